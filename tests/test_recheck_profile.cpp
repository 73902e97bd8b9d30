// SPDX-License-Identifier: Apache-2.0
// The profile key `recheck` (issue 11, item 3): how often checker evidence is rechecked at run
// time. Loading, the rule that `strict` checks every call, and the shipped libtorch_checked_cpu
// profile that admits LibTorch capsules because a full checker backs their value (item 4).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "capsule/diag.hpp"
#include "capsule/load.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

using testing::has;

std::string profile_text(std::string_view extra) {
  return str(R"(schema = 1
name = "recheck"
device = "cpu"
modules = ["reference"]
)",
             extra, R"(

[availability]
devices = ["cpu"]
providers = ["reference"]
)");
}

struct Loaded {
  std::optional<Profile> profile;
  Diagnostics diagnostics;
};

Loaded load(std::string_view extra) {
  Loaded out;
  out.profile = parse_profile(profile_text(extra), "recheck.profile.toml", LoadOptions{}, out.diagnostics);
  return out;
}

std::size_t errors_with(const Diagnostics& diagnostics, DiagCode code) {
  return static_cast<std::size_t>(std::count_if(diagnostics.begin(), diagnostics.end(), [&](const Diagnostic& d) {
    return d.severity == Severity::Error && d.code == code;
  }));
}

}  // namespace

TEST_SUITE("recheck") {
  TEST_CASE("a profile without `recheck` checks every call") {
    const Loaded loaded = load("");
    REQUIRE(loaded.profile.has_value());
    CHECK(loaded.profile->recheck == RecheckPolicy{});
    CHECK(loaded.profile->recheck.checks_every_call());
    CHECK(loaded.profile->recheck_where.line == 0);
    CHECK(loaded.profile->recheck.label() == "every call");
  }

  TEST_CASE("`every` and `sample` load with their position and label") {
    const Loaded every = load("recheck = { every = 4 }");
    REQUIRE(every.profile.has_value());
    CHECK(every.profile->recheck.kind == RecheckPolicy::Kind::Every);
    CHECK(every.profile->recheck.every == 4);
    CHECK_FALSE(every.profile->recheck.checks_every_call());
    CHECK(every.profile->recheck.label() == "every 4 calls");
    CHECK(every.profile->recheck_where.line == 5);
    CHECK(every.profile->recheck_where.column == 1);

    const Loaded sample = load("recheck = { sample = 0.01, seed = 7 }");
    REQUIRE(sample.profile.has_value());
    CHECK(sample.profile->recheck.kind == RecheckPolicy::Kind::Sample);
    CHECK(sample.profile->recheck.sample == 0.01);
    CHECK(sample.profile->recheck.seed == 7);
    CHECK(sample.profile->recheck.label() == "sample 0.01 (seed 7)");
    CHECK(sample.profile->recheck.checked_fraction() == 0.01);

    // The integer 1 is a fraction too, and sampling every call checks every call.
    const Loaded all = load("recheck = { sample = 1, seed = 0 }");
    REQUIRE(all.profile.has_value());
    CHECK(all.profile->recheck.checks_every_call());
  }

  TEST_CASE("every problem of one `recheck` table is reported in one run, at its value") {
    const Loaded loaded = load("recheck = { sample = nan, seed = -2 }");
    CHECK_FALSE(loaded.profile.has_value());
    REQUIRE(errors_with(loaded.diagnostics, DiagCode::InvalidValue) == 2);
    const std::string text = render(loaded.diagnostics);
    CHECK(has(text, "recheck.profile.toml:5:22: error[invalid-value]: `recheck.sample` must be a fraction in (0, 1], got nan"));
    CHECK(has(text, "recheck.profile.toml:5:34: error[invalid-value]: `recheck.seed` must be a non-negative integer, got -2"));
  }

  TEST_CASE("`strict` refuses a recheck of fewer than every call, other presets accept it") {
    const Loaded strict = load("assurance = \"strict\"\nrecheck = { sample = 0.5, seed = 1 }");
    CHECK_FALSE(strict.profile.has_value());
    REQUIRE(errors_with(strict.diagnostics, DiagCode::InvalidValue) == 1);
    const std::string text = render(strict.diagnostics);
    CHECK(has(text, "recheck.profile.toml:6:1: error[invalid-value]: assurance `strict` requires a check on every "
                    "call, but `recheck` is sample 0.5 (seed 1)"));
    CHECK(load("assurance = \"strict\"\nrecheck = { every = 1 }").profile.has_value());
    CHECK(load("assurance = \"strict\"").profile.has_value());
    CHECK(load("assurance = \"checked-runtime\"\nrecheck = { sample = 0.5, seed = 1 }").profile.has_value());
    CHECK(load("assurance = \"checked\"\nrecheck = { every = 100 }").profile.has_value());
  }

  TEST_CASE("libtorch_checked_cpu selects the checked LibTorch matmul and a parity-suite capsule for relu") {
    const testing::CliRun plan =
        testing::run_shipped_cli({"plan", "--profile", "libtorch_checked_cpu", "--ops", "matmul,relu"});
    INFO(plan.out, plan.err);
    CHECK(plan.status == 0);
    CHECK(has(plan.out, "libtorch.checked.matmul"));
    CHECK(has(plan.out, "libtorch.relu"));
    CHECK_FALSE(has(plan.out, "libtorch.checked.relu"));
    const testing::CliRun check =
        testing::run_shipped_cli({"check", "--profile", "libtorch_checked_cpu", "--ops", "matmul,relu"});
    INFO(check.out, check.err);
    CHECK(check.status == 0);
    CHECK(has(check.out, "accepted"));
  }

  TEST_CASE("checked_cpu never selects a LibTorch capsule, checked by a per-call checker or not") {
    const testing::CliRun plan = testing::run_shipped_cli(
        {"plan", "--profile", "checked_cpu", "--ops", "matmul,linear,softmax,conv,sqrt,inv"});
    INFO(plan.out, plan.err);
    CHECK(plan.status == 0);
    // (not just "libtorch": the checkout's path may hold that word)
    CHECK_FALSE(has(plan.out, "provider=libtorch"));
    CHECK_FALSE(has(plan.out, ": libtorch."));
  }

  TEST_CASE("demoting a checker to a trusted boundary is a weakening that libtorch_checked_cpu's gate rejects") {
    testing::ScratchTree tree("recheck-demote");
    tree.replace("catalogs/libtorch-checked-cpu.toml",
                 "evidence = { kind = \"checker\", name = \"freivalds.matmul\", coverage = \"full\" }",
                 "evidence = { kind = \"trusted-boundary\", reason = \"ATen matmul, taken on trust\" }");
    const testing::CliRun diff =
        testing::run_cli({"diff", testing::source_dir().string(), tree.root().string()});
    INFO(diff.out, diff.err);
    CHECK(diff.status == 1);
    CHECK(has(diff.out, "weakened:capsule:libtorch.checked.matmul:value"));
    CHECK(has(diff.out, "checker"));
    const testing::CliRun check = testing::run_cli({"check", "--profile", "libtorch_checked_cpu", "--ops", "matmul",
                                                    "--catalogs", tree.catalogs().string(), "--profiles",
                                                    tree.profiles().string()});
    INFO(check.out, check.err);
    CHECK(check.status == 1);
    CHECK(has(check.out, "libtorch.checked.matmul"));
    CHECK(has(check.out, "trusted"));
  }
}

}  // namespace capsule
