// SPDX-License-Identifier: Apache-2.0
// The libtorch_cpu and libtorch_autograd_cpu profiles and their catalogs in every build:
// checked_cpu never selects a LibTorch capsule (even when a profile edit loads the module), and a
// CLI that links no LibTorch handlers (this binary's, in every build) fails both at bind, never
// falling back to the reference. tests/libtorch/test_libtorch_run.cpp runs them with the provider.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "test_support.hpp"

using capsule::testing::CliRun;
using capsule::testing::has;
using capsule::testing::run_shipped_cli;

namespace {

/// Every op a shipped module has a capsule for.
std::string module_ops(const char* module) {
  std::string ops;
  for (const capsule::Capsule& c : capsule::testing::shipped_module(module)->capsules) {
    ops += (ops.empty() ? "" : ",") + std::string(capsule::to_string(c.op));
  }
  return ops;
}

/// Every op the libtorch-cpu catalog has a `checked` capsule for (the SDPA twins are
/// trusted-external, so a checked profile never selects them).
std::string libtorch_ops() {
  std::string ops;
  for (const capsule::Capsule& c : capsule::testing::shipped_module("libtorch-cpu")->capsules) {
    if (c.trust != capsule::Trust::Checked) continue;
    ops += (ops.empty() ? "" : ",") + std::string(capsule::to_string(c.op));
  }
  return ops;
}

}  // namespace

TEST_SUITE("libtorch.profiles") {
  TEST_CASE("checked_cpu never selects a LibTorch capsule, even with the libtorch-cpu module loaded") {
    const std::string ops = libtorch_ops();
    REQUIRE(has(ops, "matmul"));
    const CliRun shipped = run_shipped_cli({"plan", "--profile", "checked_cpu", "--ops", ops});
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
    const CliRun plan = run_shipped_cli({"plan", "--profile", "libtorch_cpu", "--ops", libtorch_ops()});
    CHECK(plan.status == 0);
    CHECK(has(plan.out, "libtorch.matmul"));
    CHECK(has(plan.out, "libtorch.conv"));
    CHECK_FALSE(has(plan.out, "provider=reference"));
  }

  TEST_CASE("libtorch_cpu leaves attention to the reference: the CPU SDPA twins are trusted-external") {
    const CliRun plan = run_shipped_cli({"plan", "--profile", "libtorch_cpu", "--ops", "scaled_dot_product_attention"});
    CHECK(plan.status == 0);
    CHECK(has(plan.out, "reference."));
    CHECK_FALSE(has(plan.out, "libtorch.sdpa_"));
  }

  TEST_CASE("libtorch_autograd_cpu plans every op on an external-autograd LibTorch capsule, and nothing else") {
    const CliRun plan = run_shipped_cli({"plan", "--profile", "libtorch_autograd_cpu", "--ops", module_ops("libtorch-autograd-cpu")});
    CHECK(plan.status == 0);
    CHECK(has(plan.out, "libtorch.autograd.matmul"));
    CHECK(has(plan.out, "libtorch.autograd.conv"));
    CHECK_FALSE(has(plan.out, "provider=reference"));
    CHECK_FALSE(has(plan.out, "vjp=torchlean-tape"));
    CHECK(has(plan.out, "libtorch.autograd.layer_norm"));
    CHECK(has(plan.out, "libtorch.autograd.scatter_add"));
    // An op without a LibTorch autograd capsule fails to plan; the reference never stands in.
    const CliRun missing = run_shipped_cli({"plan", "--profile", "libtorch_autograd_cpu", "--ops", "distill"});
    CHECK(missing.status != 0);
    CHECK(has(missing.out + missing.err, "distill"));
    CHECK_FALSE(has(missing.out, "reference.distill"));
  }

  TEST_CASE("without LibTorch handlers linked, libtorch_cpu loads and its run fails at bind, never falling back") {
    const CliRun lint = run_shipped_cli({"lint"});
    CHECK_FALSE(has(lint.err + lint.out, "error["));
    const CliRun run = run_shipped_cli({"run", "mlp_regression", "--profile", "libtorch_cpu"});
    CHECK(run.status != 0);
    CHECK(has(run.err, "error[no-handler]"));
    CHECK(has(run.err, "(libtorch/cpu), but no matching executable handler is linked"));
    CHECK_FALSE(has(run.out, "step 1/"));
    CHECK_FALSE(has(run.out, "-> reference.matmul"));
    const CliRun autograd = run_shipped_cli({"run", "cnn_classifier", "--profile", "libtorch_autograd_cpu"});
    CHECK(autograd.status != 0);
    CHECK(has(autograd.err, "error[no-handler]"));
    CHECK_FALSE(has(autograd.out, "step 1/"));
    CHECK_FALSE(has(autograd.out, "-> reference."));
  }

  TEST_CASE("a --profile file asking only libtorch for an op LibTorch lacks fails at plan time listing the candidates") {
    // top_k_mask has a reference capsule and no LibTorch one: `only` must refuse, not fall back.
    capsule::testing::ScratchTree tree("libtorch-only");
    const auto profile = tree.root() / "libtorch_only_cpu.toml";
    tree.write("libtorch_only_cpu.toml", R"(schema = 1
name = "libtorch_only_cpu"
summary = "LibTorch or nothing"
device = "cpu"
provider = { only = "libtorch" }
assurance = "checked"
vjp = "torchlean-tape"
lowering = "coalesced"
modules = ["libtorch-cpu", "reference"]

[availability]
devices = ["cpu"]
providers = ["libtorch", "reference", "torchlean"]
)");
    const CliRun plan = capsule::testing::run_cli({"plan", "--profile", profile.string(), "--ops", "matmul,top_k_mask",
                                                   "--catalogs", tree.catalogs().string(), "--profiles",
                                                   tree.profiles().string()});
    INFO(plan.out << plan.err);
    CHECK(plan.status == 1);
    CHECK(has(plan.err, "no admissible kernel capsule for op top_k_mask on device cpu"));
    CHECK(has(plan.err, "candidate reference.top_k_mask (reference/cpu, checked, vjp none):"));
    CHECK(has(plan.err, "provider reference is excluded by `only libtorch`"));
    CHECK_FALSE(has(plan.out + plan.err, "top_k_mask -> reference"));

    // The same profile covers every op mlp_regression dispatches, so its run uses LibTorch only;
    // in this binary no LibTorch handler is linked, so it stops at bind and runs nothing.
    const CliRun run = capsule::testing::run_cli({"run", "mlp_regression", "--profile", profile.string(), "--catalogs",
                                                  tree.catalogs().string(), "--profiles", tree.profiles().string()});
    CHECK(run.status != 0);
    CHECK(has(run.err, "error[no-handler]"));
    CHECK_FALSE(has(run.out, "step 1/"));
  }
}
