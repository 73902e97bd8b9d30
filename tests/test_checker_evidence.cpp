// SPDX-License-Identifier: Apache-2.0
// Checker evidence judged against the checkers a program links (capsule/known_checker.hpp;
// docs/acceptance-presets.md, "Checker evidence against the linked registry"): lint reports a name
// no checker registers (unknown-checker) and a checker of another op, device, coverage or
// obligation (checker-mismatch), and plan, check and explain gate on the registered checker,
// never on the catalog's name and coverage alone. Hostile inputs: tests/data/hostile/checker-evidence.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "capsule/gate.hpp"
#include "capsule/known_checker.hpp"
#include "capsule/lint.hpp"
#include "capsule/text.hpp"
#include "linked_checkers.hpp"
#include "test_support.hpp"

using namespace capsule;
using capsule::testing::has;

namespace {

std::filesystem::path hostile_tree() { return capsule::testing::test_data() / "hostile" / "checker-evidence"; }

const std::vector<KnownChecker>& known() {
  static const std::vector<KnownChecker> checkers = cli::linked_known_checkers();
  return checkers;
}

Evidence checker_evidence(std::string name, CheckerCoverage coverage = CheckerCoverage::Full) {
  Evidence evidence;
  evidence.kind = EvidenceKind::Checker;
  evidence.name = std::move(name);
  evidence.coverage = coverage;
  return evidence;
}

/// reference.<op> relabelled trusted-external, its value and VJP backed by the named checkers.
Capsule checked_capsule(std::string_view shipped, Evidence value, Evidence vjp) {
  Capsule capsule = capsule::testing::shipped_capsule(shipped);
  capsule.trust = Trust::TrustedExternal;
  capsule.trust_record.reason = "foreign kernel";
  capsule.contract(Obligation::Value).evidence = std::move(value);
  capsule.contract(Obligation::Vjp).evidence = std::move(vjp);
  return capsule;
}

std::size_t count(const std::string& text, std::string_view part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

std::vector<std::string> base_args(std::string_view command) {
  return {std::string(command), "--catalogs", (hostile_tree() / "catalogs").string(), "--profiles",
          (hostile_tree() / "profiles").string()};
}

}  // namespace

TEST_SUITE("checker-evidence") {
  TEST_CASE("the linked checkers are described with their registration sites") {
    REQUIRE(known().size() == 15);
    const auto matmul = std::find_if(known().begin(), known().end(),
                                     [](const KnownChecker& k) { return k.name == "freivalds.matmul"; });
    REQUIRE(matmul != known().end());
    CHECK(matmul->op == Op::Matmul);
    CHECK(matmul->coverage == CheckerCoverage::Full);
    CHECK(matmul->obligation == Obligation::Value);
    CHECK(has(matmul->where.file, "handlers/checkers/src/register.cpp"));
    CHECK(matmul->where.line > 0);
  }

  TEST_CASE("judging: bound, unknown, and a mismatch of op, device, obligation or coverage") {
    const Capsule good = checked_capsule("reference.matmul", checker_evidence("freivalds.matmul"),
                                         checker_evidence("freivalds.matmul.vjp"));
    CHECK(judge_checker_evidence(good, Obligation::Value, known()).verdict == CheckerJudgement::Verdict::Bound);
    CHECK(judge_checker_evidence(good, Obligation::Vjp, known()).verdict == CheckerJudgement::Verdict::Bound);
    CHECK(judge_checker_evidence(good, Obligation::Shape, known()).verdict == CheckerJudgement::Verdict::NotChecker);

    const Capsule typo = checked_capsule("reference.matmul", checker_evidence("freivalds.matmull"),
                                         checker_evidence("freivalds.matmul.vjp"));
    CHECK(judge_checker_evidence(typo, Obligation::Value, known()).verdict == CheckerJudgement::Verdict::Unknown);

    const Capsule relu = checked_capsule("reference.relu", checker_evidence("freivalds.matmul"),
                                         checker_evidence("freivalds.matmul.vjp"));
    const CheckerJudgement op = judge_checker_evidence(relu, Obligation::Value, known());
    CHECK(op.verdict == CheckerJudgement::Verdict::Mismatch);
    CHECK_FALSE(op.coverage_only);
    REQUIRE(op.disagreements.size() == 1);
    CHECK(op.disagreements.front() == "op: the capsule is for `relu`, the checker checks `matmul`");

    Capsule cuda = good;
    cuda.device = Device::Cuda;
    const CheckerJudgement device = judge_checker_evidence(cuda, Obligation::Value, known());
    CHECK(device.verdict == CheckerJudgement::Verdict::Mismatch);
    CHECK(has(device.disagreements.front(), "device: the capsule runs on `cuda`, the checker checks `cpu`"));

    const Capsule swapped = checked_capsule("reference.matmul", checker_evidence("freivalds.matmul.vjp"),
                                            checker_evidence("freivalds.matmul"));
    const CheckerJudgement obligation = judge_checker_evidence(swapped, Obligation::Vjp, known());
    CHECK(obligation.verdict == CheckerJudgement::Verdict::Mismatch);
    CHECK(has(obligation.disagreements.front(), "obligation: the evidence backs the `vjp` obligation"));

    const Capsule overclaimed =
        checked_capsule("reference.attention", checker_evidence("blocked_rows.attention"),
                        checker_evidence("freivalds.matmul.vjp"));
    const CheckerJudgement coverage = judge_checker_evidence(overclaimed, Obligation::Value, known());
    CHECK(coverage.verdict == CheckerJudgement::Verdict::Mismatch);
    CHECK(coverage.coverage_only);
    CHECK(coverage.disagreements.front() == "coverage: the catalog claims `full`, the registered checker's is `partial`");
  }

  TEST_CASE("the gate uses the registered checker: another op's checker or an overclaimed coverage never passes strict") {
    KernelPolicy policy;
    for (const AssurancePolicy& assurance : {AssurancePolicy::strict(), AssurancePolicy::checked_runtime()}) {
      policy.assurance = assurance;
      CAPTURE(assurance.label());
      // Bound honestly: passes, and the evidence is unchanged.
      Capsule matmul = checked_capsule("reference.matmul", checker_evidence("freivalds.matmul"),
                                       checker_evidence("freivalds.matmul.vjp"));
      const Capsule before = matmul;
      bind_known_checkers(matmul, known());
      CHECK(matmul == before);
      CHECK(accept(PlannedKernel{Op::Matmul, &matmul}, policy).has_value());

      // Another op's checker: refused, in class `missing`, with the reason in the label.
      Capsule relu = checked_capsule("reference.relu", checker_evidence("freivalds.matmul"),
                                     checker_evidence("freivalds.matmul.vjp"));
      bind_known_checkers(relu, known());
      const Evidence& value = relu.contract(Obligation::Value).evidence;
      CHECK(evidence_disposition(ClaimKind::ValueRefinement, value) == Disposition::Missing);
      CHECK(evidence_label(value) ==
            "checker freivalds.matmul cannot be bound: the registered checker does not check this call "
            "(op: the capsule is for `relu`, the checker checks `matmul`)");
      auto refused = accept(PlannedKernel{Op::Relu, &relu}, policy);
      REQUIRE_FALSE(refused.has_value());
      std::vector<Obligation> rejected;
      for (const AcceptanceFailure& f : refused.error()) {
        if (f.kind == AcceptanceFailure::Kind::EvidenceRejected) rejected.push_back(f.obligation);
      }
      // The VJP checker names matmul too.
      CHECK(rejected == std::vector<Obligation>{Obligation::Value, Obligation::Vjp});
      const std::vector<PlannedKernel> kernels{PlannedKernel{Op::Relu, &relu}};
      const std::vector<GateFailure> failures = gate_failures(assurance, kernels);
      REQUIRE_FALSE(failures.empty());
      CHECK(failures.front().kind == GateFailureClass::Missing);

      // A partial checker claimed `full`: the registered coverage decides, so it is `trusted`.
      Capsule attention =
          checked_capsule("reference.attention", checker_evidence("blocked_rows.attention"),
                          checker_evidence("freivalds.matmul.vjp"));
      bind_known_checkers(attention, known());
      const Evidence& partial = attention.contract(Obligation::Value).evidence;
      CHECK(partial.coverage == CheckerCoverage::Partial);
      REQUIRE(partial.claimed_coverage.has_value());
      CHECK(*partial.claimed_coverage == CheckerCoverage::Full);
      CHECK(evidence_disposition(ClaimKind::ValueRefinement, partial) == Disposition::Trusted);
      CHECK(has(evidence_label(partial), "(registered coverage; the catalog claims full)"));
      CHECK_FALSE(assurance.accepts_evidence(ClaimKind::ValueRefinement, partial));

      // A misspelt name: refused.
      Capsule typo = checked_capsule("reference.matmul", checker_evidence("freivalds.matmull"),
                                     checker_evidence("freivalds.matmul.vjp"));
      bind_known_checkers(typo, known());
      CHECK(evidence_label(typo.contract(Obligation::Value).evidence) ==
            "checker freivalds.matmull cannot be bound: no checker of that name is registered in this build");
      CHECK_FALSE(accept(PlannedKernel{Op::Matmul, &typo}, policy).has_value());
    }
  }

  TEST_CASE("lint: each checker claim the linked registry does not back is an error at its name, in one run") {
    const capsule::testing::CliRun run = capsule::testing::run_cli(base_args("lint"));
    INFO(run.out, run.err);
    CHECK(run.status == 1);
    const std::string file = (hostile_tree() / "catalogs" / "claims.toml").string();
    CHECK(has(run.out, str(file, ":22:87: error[unknown-checker]: capsule `claims.matmul` value evidence names checker "
                                 "`freivalds.matmull`, which this program does not register")));
    CHECK(has(run.out, "help: did you mean `freivalds.matmul`?"));
    CHECK(has(run.out, str(file, ":28:87: error[checker-mismatch]: capsule `claims.relu` (relu on cpu) value evidence "
                                 "names checker `freivalds.matmul` with coverage `full`, but the registered checker "
                                 "checks matmul on cpu (value) with coverage `full`")));
    CHECK(has(run.out, "op: the capsule is for `relu`, the checker checks `matmul`"));
    CHECK(has(run.out, "no registered checker checks relu on cpu (value)"));
    CHECK(has(run.out, "`freivalds.matmul` is registered at "));
    CHECK(has(run.out, str(file, ":35:87: error[checker-mismatch]: capsule `claims.attention`")));
    CHECK(has(run.out, "coverage: the catalog claims `full`, the registered checker's is `partial`"));
    CHECK(has(run.out, "help: claim coverage `partial`"));
    CHECK(has(run.out, str(file, ":43:110: error[checker-mismatch]: capsule `claims.linear` (linear on cpu) vjp "
                                 "evidence names checker `freivalds.linear`")));
    CHECK(has(run.out, "help: name `freivalds.linear.vjp`"));
    // Bound evidence (the [defaults] VJP checker of claims.matmul) is not reported, and no checker
    // name is left as an unverifiable note when the registry is known.
    CHECK_FALSE(has(run.out, ":16:111:"));
    CHECK_FALSE(has(run.out, "which lint cannot resolve"));
    CHECK(count(run.out, "error[unknown-checker]") == 1);
    CHECK(count(run.out, "error[checker-mismatch]") == 3);
  }

  TEST_CASE("plan and check refuse what the registry does not back, naming why") {
    std::vector<std::string> args = base_args("check");
    args.insert(args.end(), {"--profile", "claims_strict"});
    const capsule::testing::CliRun check = capsule::testing::run_cli(args);
    INFO(check.out, check.err);
    CHECK(check.status == 1);
    CHECK(has(check.out, "strict: rejected claims.relu value\n  checker freivalds.matmul cannot be bound: the registered "
                         "checker does not check this call (op: the capsule is for `relu`, the checker checks `matmul`)"));
    CHECK(has(check.out, "strict: rejected claims.matmul value\n  checker freivalds.matmull cannot be bound: no checker "
                         "of that name is registered in this build"));
    CHECK(has(check.out, "strict: rejected claims.attention value\n  partly checked by checker blocked_rows.attention (a "
                         "necessary condition only) (registered coverage; the catalog claims full)"));
    CHECK(has(check.out, "strict: rejected claims.linear vjp\n  checker freivalds.linear cannot be bound"));
    CHECK_FALSE(has(check.out, "rejected claims.matmul vjp"));  // freivalds.matmul.vjp binds
    CHECK_FALSE(has(check.out, "rejected claims.linear value"));

    std::vector<std::string> explain = base_args("explain");
    explain.insert(explain.end(), {"--profile", "claims_strict", "--op", "relu"});
    const capsule::testing::CliRun why = capsule::testing::run_cli(explain);
    CHECK(has(why.out, "! gate: value evidence (checker freivalds.matmul cannot be bound"));
    CHECK(has(why.out, ", missing) is not admitted by assurance strict"));
  }

  TEST_CASE("a profile file's with_catalogs modules are judged too, by check and explain") {
    // The profile file loads its modules after the workspace; binding must come after it.
    const capsule::testing::ScratchTree tree("checker-evidence-with-catalogs");
    tree.write("claims.toml", capsule::testing::read_text(hostile_tree() / "catalogs" / "claims.toml"));
    std::string profile = capsule::testing::read_text(hostile_tree() / "profiles" / "claims_strict.toml");
    profile.replace(profile.find("modules = "), 0, "with_catalogs = [\"claims.toml\"]\n");
    tree.write("claims_file.toml", profile);
    const std::string file = (tree.root() / "claims_file.toml").string();
    const std::vector<std::string> where = {"--catalogs", tree.catalogs().string(), "--profiles", tree.profiles().string(),
                                            "--profile", file};
    std::vector<std::string> check = {"check"};
    check.insert(check.end(), where.begin(), where.end());
    const capsule::testing::CliRun checked = capsule::testing::run_cli(check);
    INFO(checked.out, checked.err);
    CHECK(checked.status == 1);
    CHECK(has(checked.out, "strict: rejected claims.relu value\n  checker freivalds.matmul cannot be bound"));
    CHECK(has(checked.out, "strict: rejected claims.attention value\n  partly checked by checker blocked_rows.attention"));
    std::vector<std::string> explain = {"explain"};
    explain.insert(explain.end(), where.begin(), where.end());
    explain.insert(explain.end(), {"--op", "relu"});
    const capsule::testing::CliRun why = capsule::testing::run_cli(explain);
    CHECK(has(why.out, "! gate: value evidence (checker freivalds.matmul cannot be bound"));
  }
}
