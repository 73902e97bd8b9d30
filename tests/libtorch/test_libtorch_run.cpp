// SPDX-License-Identifier: Apache-2.0
// The shipped data with the LibTorch handlers linked into the CLI: lint finds a handler for every
// LibTorch CPU capsule, and the MLP trains on LibTorch capsules under libtorch_cpu, the report
// naming them and the provider's fingerprint.
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
  TEST_CASE("with the LibTorch handlers linked, lint finds a compiled handler for every LibTorch CPU capsule") {
    const CliRun lint = shipped_cli({"lint"});
    INFO(lint.out << lint.err);
    CHECK(lint.status == 0);
    CHECK_FALSE(has(lint.out, "error["));
    CHECK_FALSE(has(lint.out, "libtorch-cpu.toml:9:10: warning[no-compiled-handler]"));
    CHECK_FALSE(has(lint.out, "(libtorch/cpu"));
    // The CUDA capsules still have none here.
    CHECK(has(lint.out, "warning[no-compiled-handler]: 54 capsules of module `native-cuda`"));
  }

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
    // The fingerprint names LibTorch's BLAS, its core and its threads (docs/fingerprint.md).
    CHECK(has(run.out, "\n  provider.libtorch.blas "));
    CHECK(has(run.out, "\n  provider.libtorch.blas.library "));
    CHECK(has(run.out, "\n  provider.libtorch.blas.core "));
    CHECK(has(run.out, "\n  provider.libtorch.threads 1\n"));
    // Every boundary copy is reported, by op: the shape ops' contiguous outputs and mse_loss's
    // scalar (docs/libtorch.md, "Copies at the boundary").
    CHECK(has(run.out, "\nlibtorch boundary copies: broadcast 600, mse_loss 200, permute 1400, reshape 400\n"));
  }
}
