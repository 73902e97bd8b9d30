// SPDX-License-Identifier: Apache-2.0
// Editing a catalog changes what `capsule run` runs, with no rebuild: a prepended module's relu
// capsule is what the session reports, and a capsule demoted to a trusted boundary stops a
// checked profile at session open with the gate's message.
#include <doctest/doctest.h>

#include "test_support.hpp"

namespace capsule {
namespace {

testing::CliRun run_in(const testing::ScratchTree& tree, std::vector<std::string> args) {
  args.insert(args.begin(), "run");
  for (const char* flag : {"--catalogs", "--profiles"}) args.push_back(flag);
  args.insert(args.end() - 1, tree.catalogs().string());
  args.push_back(tree.profiles().string());
  return testing::run_cli(std::move(args));
}

using testing::has;

}  // namespace

TEST_SUITE("examples") {
  TEST_CASE("a prepended module with a reference relu capsule is what capsule run reports") {
    testing::ScratchTree tree("run-prepend");
    const testing::CliRun before = run_in(tree, {"causal_attention", "--profile", "checked_cpu"});
    REQUIRE(before.status == 0);
    const testing::CliRun mlp_before = run_in(tree, {"mlp_regression", "--profile", "checked_cpu"});
    REQUIRE(mlp_before.status == 0);
    CHECK(has(mlp_before.out, "relu -> reference.relu (reference/cpu"));

    tree.write("catalogs/site.toml", R"(# A downstream module: the same reference code under another capsule name.
schema = 1
module = "site"

[defaults]
provider = "reference"
device = "cpu"
trust = "checked"
vjp = "torchlean-tape"
reduction = "n/a"
contracts.shape  = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "portable runtime shape checks" } }
contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "typed tensor layout" } }
contracts.value  = { claim = "value-refinement", evidence = { kind = "test-suite", name = "reference.values" } }
contracts.vjp    = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "test-suite", name = "reference.vjps" } }

[[capsule]]
name = "site.relu"
op = "relu"
)");
    tree.replace("profiles/checked_cpu.toml", "modules = [", "modules = [\"site\", ");
    const testing::CliRun after = run_in(tree, {"mlp_regression", "--profile", "checked_cpu"});
    INFO(after.err);
    REQUIRE(after.status == 0);
    CHECK(has(after.out, "relu -> site.relu (reference/cpu, checked, vjp=torchlean-tape)"));
    CHECK_FALSE(has(after.out, "relu -> reference.relu"));
    CHECK(has(after.out, "catalogs/site.toml sha256 "));
  }

  TEST_CASE("value evidence demoted to a trusted boundary stops checked_cpu at session open") {
    testing::ScratchTree tree("run-demote");
    tree.replace("catalogs/reference.toml", "name = \"reference.relu\"\nop = \"relu\"\n",
                 "name = \"reference.relu\"\nop = \"relu\"\ncontracts.value = { claim = \"value-refinement\", "
                 "evidence = { kind = \"trusted-boundary\", reason = \"vendor relu, not yet tested\" } }\n");
    const testing::CliRun run = run_in(tree, {"mlp_regression", "--profile", "checked_cpu"});
    CHECK(run.status == 1);
    CHECK(has(run.err, "error[gate-rejected]: backend planning failed for `relu`: backend profile checked_cpu "
                       "rejected `relu`: "));
    CHECK_FALSE(has(run.err, "torch: "));
    CHECK(has(run.err, "reference.relu"));
    // Nothing ran: no training step and no capsules-used report.
    CHECK_FALSE(has(run.out, "step 1/"));
    CHECK_FALSE(has(run.out, "capsules used"));
  }
}

}  // namespace capsule
