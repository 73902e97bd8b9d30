// SPDX-License-Identifier: Apache-2.0
// The libtorch_cpu profile and the libtorch-cpu catalog in every build: checked_cpu never selects
// a LibTorch capsule (even when a profile edit loads the module), libtorch_cpu trains the MLP with
// LibTorch capsules where the provider is built, and fails at bind (never falling back to the
// reference) where it is not.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#if defined(CAPSULE_HAVE_LIBTORCH)
#include "capsule/handlers/libtorch.hpp"
#endif
#include "test_support.hpp"

using capsule::testing::CliRun;
using capsule::testing::has;
using capsule::testing::source_dir;

namespace {

/// Every op the libtorch-cpu catalog has a capsule for.
std::string libtorch_ops() {
  std::string ops;
  for (const capsule::Capsule& c : capsule::testing::shipped_module("libtorch-cpu")->capsules) {
    ops += (ops.empty() ? "" : ",") + std::string(capsule::to_string(c.op));
  }
  return ops;
}

CliRun shipped_cli(std::vector<std::string> args) {
  args.push_back("--catalogs");
  args.push_back((source_dir() / "catalogs").string());
  args.push_back("--profiles");
  args.push_back((source_dir() / "profiles").string());
  return capsule::testing::run_cli(std::move(args));
}

}  // namespace

TEST_SUITE("libtorch.profiles") {
  TEST_CASE("checked_cpu never selects a LibTorch capsule, even with the libtorch-cpu module loaded") {
    const std::string ops = libtorch_ops();
    REQUIRE(has(ops, "matmul"));
    const CliRun shipped = shipped_cli({"plan", "--profile", "checked_cpu", "--ops", ops});
    CHECK(shipped.status == 0);
    CHECK(has(shipped.out, "reference.matmul"));
    CHECK_FALSE(has(shipped.out, "provider=libtorch"));

    // A profile edit that loads the module first: availability still admits only the reference
    // and torchlean providers, so nothing changes.
    capsule::testing::ScratchTree tree("libtorch-checked-cpu");
    tree.replace("profiles/checked_cpu.toml", R"(modules = ["attention",)", R"(modules = ["libtorch-cpu", "attention",)");
    const CliRun edited = capsule::testing::run_cli({"plan", "--profile", "checked_cpu", "--ops", ops, "--catalogs",
                                                     tree.catalogs().string(), "--profiles", tree.profiles().string()});
    CHECK(edited.status == 0);
    CHECK(has(edited.out, "reference.matmul"));
    CHECK_FALSE(has(edited.out, "provider=libtorch"));
  }

  TEST_CASE("libtorch_cpu plans every op of the libtorch-cpu catalog on a LibTorch capsule") {
    const CliRun plan = shipped_cli({"plan", "--profile", "libtorch_cpu", "--ops", libtorch_ops()});
    CHECK(plan.status == 0);
    CHECK(has(plan.out, "libtorch.matmul"));
    CHECK(has(plan.out, "libtorch.conv"));
    CHECK_FALSE(has(plan.out, "provider=reference"));
  }

#if defined(CAPSULE_HAVE_LIBTORCH)
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
#else
  TEST_CASE("without the LibTorch provider, libtorch_cpu loads and its run fails at bind, never falling back") {
    const CliRun lint = shipped_cli({"lint"});
    CHECK_FALSE(has(lint.err + lint.out, "error["));
    const CliRun run = shipped_cli({"run", "mlp_regression", "--profile", "libtorch_cpu"});
    CHECK(run.status != 0);
    CHECK(has(run.err, "error[no-handler]"));
    CHECK(has(run.err, "(libtorch/cpu), but no matching executable handler is linked"));
    CHECK_FALSE(has(run.out, "step 1/"));
    CHECK_FALSE(has(run.out, "-> reference.matmul"));
  }
#endif
}
