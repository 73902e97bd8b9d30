// SPDX-License-Identifier: Apache-2.0
// The libtorch_cpu profile run by the real CLI with the LibTorch handlers linked: the MLP trains on
// LibTorch capsules, and the report names them and the provider's fingerprint.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "capsule/handlers/libtorch.hpp"
#include "test_support.hpp"

using capsule::testing::CliRun;
using capsule::testing::has;
using capsule::testing::source_dir;

namespace {

CliRun shipped_cli(std::vector<std::string> args) {
  args.push_back("--catalogs");
  args.push_back((source_dir() / "catalogs").string());
  args.push_back("--profiles");
  args.push_back((source_dir() / "profiles").string());
  return capsule::testing::run_cli(std::move(args));
}

}  // namespace

TEST_SUITE("libtorch.run") {
  TEST_CASE("capsule run mlp_regression --profile libtorch_cpu trains on LibTorch capsules") {
    capsule::set_libtorch_threads(1);
    const CliRun run = shipped_cli({"run", "mlp_regression", "--profile", "libtorch_cpu"});
    REQUIRE(run.status == 0);
    CHECK(has(run.out, "(falling)"));
    CHECK(has(run.out, "matmul -> libtorch.matmul (libtorch/cpu, checked, vjp=torchlean-tape): 400 forward"));
    CHECK(has(run.out, "relu -> libtorch.relu (libtorch/cpu, checked, vjp=torchlean-tape): 200 forward"));
    CHECK(has(run.out, "mse_loss -> libtorch.mse_loss"));
    CHECK_FALSE(has(run.out, "-> reference."));
    CHECK(has(run.out, "provider.libtorch.sha256 "));
    CHECK(has(run.out, "provider.libtorch.version LibTorch "));
  }
}
