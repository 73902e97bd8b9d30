// SPDX-License-Identifier: Apache-2.0
// Issue 11, item 1 (docs/acceptance-presets.md): the `checker` and `missing` evidence kinds,
// TorchLean's dispositions, the acceptance presets and the fixed order of gate-failure classes,
// as the engine, the profile loader, the reports, lint and the CLI see them.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "capsule/gate.hpp"
#include "capsule/known_checker.hpp"
#include "capsule/lint.hpp"
#include "capsule/load.hpp"
#include "capsule/report.hpp"
#include "capsule/text.hpp"
#include "linked_checkers.hpp"
#include "test_support.hpp"

using namespace capsule;
using capsule::testing::has;
using capsule::testing::shipped_capsule;

namespace {

Evidence make_evidence(EvidenceKind kind, std::string name = {}) {
  Evidence evidence;
  evidence.kind = kind;
  evidence.name = std::move(name);
  if (kind == EvidenceKind::TrustedBoundary) evidence.reason = "assumed";
  return evidence;
}

Evidence make_checker(CheckerCoverage coverage) {
  Evidence evidence = make_evidence(EvidenceKind::Checker, "freivalds.matmul");
  evidence.coverage = coverage;
  return evidence;
}

/// reference.relu with its value evidence replaced.
Capsule relu_with_value(const Evidence& value) {
  Capsule capsule = shipped_capsule("reference.relu");
  capsule.contract(Obligation::Value).evidence = value;
  return capsule;
}

std::filesystem::path scratch(std::string_view name) {
  const auto dir = std::filesystem::temp_directory_path() / str("capsule-presets-", ::getpid(), "-", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void write(const std::filesystem::path& file, std::string_view text) {
  std::ofstream out(file);
  out << text;
}

}  // namespace

TEST_SUITE("acceptance presets") {
  TEST_CASE("dispositions: TorchLean's mapping, with guards by claim and checkers by coverage") {
    const auto of = [](ClaimKind claim, const Evidence& e) { return evidence_disposition(claim, e); };
    CHECK(of(ClaimKind::ValueRefinement, make_evidence(EvidenceKind::SharedDefinition, "d")) == Disposition::Proved);
    CHECK(of(ClaimKind::ValueRefinement, make_checker(CheckerCoverage::Full)) == Disposition::Checked);
    CHECK(of(ClaimKind::ValueRefinement, make_checker(CheckerCoverage::Sampled)) == Disposition::Fuzzed);
    CHECK(of(ClaimKind::ValueRefinement, make_checker(CheckerCoverage::Partial)) == Disposition::Trusted);
    CHECK(of(ClaimKind::ValueRefinement, make_evidence(EvidenceKind::RuntimeGuard, "g")) == Disposition::Guarded);
    CHECK(of(ClaimKind::VjpRefinement, make_evidence(EvidenceKind::RuntimeGuard, "g")) == Disposition::Guarded);
    CHECK(of(ClaimKind::ShapeSafety, make_evidence(EvidenceKind::RuntimeGuard, "g")) == Disposition::Checked);
    CHECK(of(ClaimKind::LayoutCompatibility, make_evidence(EvidenceKind::RuntimeGuard, "g")) == Disposition::Checked);
    CHECK(of(ClaimKind::ValueRefinement, make_evidence(EvidenceKind::TestSuite, "s")) == Disposition::Tested);
    CHECK(of(ClaimKind::ValueRefinement, make_evidence(EvidenceKind::FuzzOracle, "f")) == Disposition::Fuzzed);
    CHECK(of(ClaimKind::ValueRefinement, make_evidence(EvidenceKind::TrustedBoundary)) == Disposition::Trusted);
    CHECK(of(ClaimKind::ValueRefinement, make_evidence(EvidenceKind::Missing)) == Disposition::Missing);
    CHECK(of(ClaimKind::VjpUnavailable, make_evidence(EvidenceKind::NotApplicable)) == Disposition::NotApplicable);
    // Spellings are a report contract.
    CHECK(to_string(Disposition::NotApplicable) == "not-applicable");
    CHECK(to_string(EvidenceKind::Checker) == "checker");
    CHECK(to_string(EvidenceKind::Missing) == "missing");
    CHECK(evidence_label(make_checker(CheckerCoverage::Partial)) ==
          "partly checked by checker freivalds.matmul (a necessary condition only)");
    CHECK(evidence_label(make_evidence(EvidenceKind::Missing)) == "missing: no evidence provided");
  }

  TEST_CASE("presets admit dispositions as TorchLean's flags say") {
    struct Row {
      AssurancePolicy policy;
      std::string label;
      // proved, checked, guarded, tested, fuzzed, trusted, missing, not-applicable
      std::array<bool, 8> admits;
    };
    const std::vector<Row> rows{
        {AssurancePolicy::strict(), "strict", {true, true, false, false, false, false, false, true}},
        {AssurancePolicy::checked_runtime(), "checked-runtime", {true, true, true, true, true, false, false, true}},
        {AssurancePolicy::allow_trusted_runtime(), "external", {true, true, true, true, true, true, false, true}},
        {AssurancePolicy::checked(), "checked", {true, true, true, true, true, false, false, true}},
        {AssurancePolicy::external(), "external", {true, true, true, true, true, true, false, true}},
    };
    for (const Row& row : rows) {
      INFO(row.label);
      CHECK(row.policy.label() == row.label);
      for (const Disposition d : all_values<Disposition>()) {
        INFO(to_string(d));
        CHECK(row.policy.accepts_disposition(d) == row.admits[static_cast<std::size_t>(d)]);
      }
    }
    // Evidence decides under strict and checked-runtime; the label still filters under checked.
    CHECK(AssurancePolicy::strict().accepts_trust(Trust::TrustedExternal));
    CHECK(AssurancePolicy::checked_runtime().accepts_trust(Trust::TrustedExternal));
    CHECK_FALSE(AssurancePolicy::checked().accepts_trust(Trust::TrustedExternal));
    // Every preset name loads, and nothing else does.
    for (const std::string_view name : kAssurancePresets) CHECK(assurance_preset(name).has_value());
    CHECK_FALSE(assurance_preset("Strict").has_value());
    CHECK(*assurance_preset("allow-trusted-runtime") == AssurancePolicy::external());
  }

  TEST_CASE("a partial checker never discharges a value claim under strict, checked-runtime or checked") {
    const Evidence partial = make_checker(CheckerCoverage::Partial);
    for (const AssurancePolicy& policy :
         {AssurancePolicy::strict(), AssurancePolicy::checked_runtime(), AssurancePolicy::checked()}) {
      INFO(policy.label());
      CHECK_FALSE(policy.accepts_evidence(ClaimKind::ValueRefinement, partial));
      CHECK_FALSE(policy.accepts_evidence(ClaimKind::VjpRefinement, partial));
    }
    CHECK(AssurancePolicy::external().accepts_evidence(ClaimKind::ValueRefinement, partial));
    // Sampled: only where the policy admits fuzzing.
    const Evidence sampled = make_checker(CheckerCoverage::Sampled);
    CHECK_FALSE(AssurancePolicy::strict().accepts_evidence(ClaimKind::ValueRefinement, sampled));
    CHECK(AssurancePolicy::checked_runtime().accepts_evidence(ClaimKind::ValueRefinement, sampled));
    AssurancePolicy no_fuzz = AssurancePolicy::checked_runtime();
    no_fuzz.refused.insert(Disposition::Fuzzed);
    CHECK_FALSE(no_fuzz.accepts_evidence(ClaimKind::ValueRefinement, sampled));
    CHECK(has(no_fuzz.label(), "; refused: fuzzed|trusted|missing)"));
    // A full checker passes everywhere; missing passes nowhere.
    for (const std::string_view name : kAssurancePresets) {
      const AssurancePolicy policy = *assurance_preset(name);
      INFO(name);
      CHECK(policy.accepts_evidence(ClaimKind::ValueRefinement, make_checker(CheckerCoverage::Full)));
      CHECK_FALSE(policy.accepts_evidence(ClaimKind::ValueRefinement, make_evidence(EvidenceKind::Missing)));
    }
  }

  TEST_CASE("gate failures come one per class in TorchLean's order: missing, guarded, tested, trusted, fuzzed") {
    // Plan order is the reverse of the class order, so a result in class order was sorted.
    std::vector<Capsule> capsules{
        relu_with_value(make_evidence(EvidenceKind::FuzzOracle, "fuzz")),
        relu_with_value(make_evidence(EvidenceKind::TrustedBoundary)),
        relu_with_value(make_evidence(EvidenceKind::TestSuite, "suite")),
        relu_with_value(make_evidence(EvidenceKind::RuntimeGuard, "guard")),
        relu_with_value(make_evidence(EvidenceKind::Missing)),
        relu_with_value(make_checker(CheckerCoverage::Full)),
    };
    // The reference capsules' VJP claims rest on test suites; make them checked so only the
    // value evidence differs.
    for (Capsule& c : capsules) c.contract(Obligation::Vjp).evidence = make_checker(CheckerCoverage::Full);
    std::vector<PlannedKernel> kernels;
    for (const Capsule& c : capsules) kernels.push_back(PlannedKernel{Op::Relu, &c});

    const std::vector<GateFailure> strict = gate_failures(AssurancePolicy::strict(), kernels);
    std::vector<GateFailureClass> classes;
    for (const GateFailure& f : strict) classes.push_back(f.kind);
    CHECK(classes == std::vector<GateFailureClass>{GateFailureClass::Missing, GateFailureClass::Guarded,
                                                   GateFailureClass::Tested, GateFailureClass::Trusted,
                                                   GateFailureClass::Fuzzed});
    for (const GateFailure& f : strict) {
      REQUIRE(f.reports.size() == 1);
      CHECK(f.reports.front().obligation == Obligation::Value);
    }
    CHECK(gate_failure_summary(strict) == "missing 1, guarded 1, tested 1, trusted 1, fuzzed 1");
    // rejected_reports follows the same order.
    const std::vector<ObligationReport> reports = rejected_reports(AssurancePolicy::strict(), kernels);
    REQUIRE(reports.size() == 5);
    CHECK(reports.front().capsule == &capsules[4]);
    CHECK(reports.back().capsule == &capsules[0]);

    // Only disallowed classes appear: checked-runtime refuses missing and trusted, nothing else.
    std::vector<GateFailureClass> runtime;
    for (const GateFailure& f : gate_failures(AssurancePolicy::checked_runtime(), kernels)) runtime.push_back(f.kind);
    CHECK(runtime == std::vector<GateFailureClass>{GateFailureClass::Missing, GateFailureClass::Trusted});
    // A custom kind list that leaves out a proved kind fails in the engine's own last class.
    const AssurancePolicy no_checkers{EnumSet<Trust>{Trust::Checked},
                                      EnumSet<EvidenceKind>{EvidenceKind::RuntimeGuard, EvidenceKind::TestSuite},
                                      {}};
    const std::vector<GateFailure> custom = gate_failures(no_checkers, std::span(kernels).subspan(5));
    REQUIRE(custom.size() == 1);
    CHECK(custom.front().kind == GateFailureClass::NotAdmitted);
    CHECK(custom.front().reports.size() == 2);  // value and vjp checkers
  }

  TEST_CASE("the acceptance gate applies the presets, and a checked trusted-external capsule passes strict") {
    // matmul checked by the registered freivalds checkers, value and VJP.
    Capsule foreign = shipped_capsule("reference.matmul");
    foreign.contract(Obligation::Value).evidence = make_checker(CheckerCoverage::Full);
    foreign.trust = Trust::TrustedExternal;
    foreign.trust_record.reason = "foreign kernel";
    foreign.contract(Obligation::Vjp).evidence = make_checker(CheckerCoverage::Full);
    foreign.contract(Obligation::Vjp).evidence.name = "freivalds.matmul.vjp";
    const std::vector<KnownChecker> known = cli::linked_known_checkers();
    bind_known_checkers(foreign, known);
    KernelPolicy policy;
    policy.assurance = AssurancePolicy::strict();
    CHECK(accept(PlannedKernel{Op::Matmul, &foreign}, policy).has_value());
    policy.assurance = AssurancePolicy::checked();
    auto refused = accept(PlannedKernel{Op::Matmul, &foreign}, policy);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().front().kind == AcceptanceFailure::Kind::TrustRejected);
    // relu backed by freivalds.matmul (a checker of another op) is rejected under strict once the
    // registry is known: the gate never takes a checker's name at the catalog's word.
    Capsule misbacked = relu_with_value(make_checker(CheckerCoverage::Full));
    misbacked.trust = Trust::TrustedExternal;
    misbacked.trust_record.reason = "foreign kernel";
    misbacked.contract(Obligation::Vjp).evidence = make_checker(CheckerCoverage::Full);
    bind_known_checkers(misbacked, known);
    policy.assurance = AssurancePolicy::strict();
    auto wrong_op = accept(PlannedKernel{Op::Relu, &misbacked}, policy);
    REQUIRE_FALSE(wrong_op.has_value());
    REQUIRE(wrong_op.error().front().kind == AcceptanceFailure::Kind::EvidenceRejected);
    CHECK(wrong_op.error().front().obligation == Obligation::Value);
    CHECK(has(wrong_op.error().front().message(), "checker freivalds.matmul cannot be bound: the registered checker "
                                                   "does not check this call (op: the capsule is for `relu`, the "
                                                   "checker checks `matmul`)"));
    // The shipped reference capsule fails strict on its value and VJP suites only: its shape and
    // layout guards are complete checks.
    policy.assurance = AssurancePolicy::strict();
    auto reference = accept(PlannedKernel{Op::Relu, &shipped_capsule("reference.relu")}, policy);
    REQUIRE_FALSE(reference.has_value());
    std::vector<Obligation> rejected;
    for (const AcceptanceFailure& f : reference.error()) {
      CHECK(f.kind == AcceptanceFailure::Kind::EvidenceRejected);
      rejected.push_back(f.obligation);
    }
    CHECK(rejected == std::vector<Obligation>{Obligation::Value, Obligation::Vjp});
  }

  TEST_CASE("catalogs load checker and missing evidence, and reports show dispositions") {
    const auto dir = scratch("catalog");
    write(dir / "inline.toml", str(capsule::testing::kCatalogHead, R"(
[[capsule]]
name = "inline.relu"
op = "relu"
contracts.value = { claim = "value-refinement", evidence = { kind = "checker", name = "relu.recompute", coverage = "sampled" } }
contracts.vjp = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "missing" } }
)"));
    Diagnostics diagnostics;
    auto module = load_catalog(dir / "inline.toml", LoadOptions{}, diagnostics);
    REQUIRE_MESSAGE(module.has_value(), render(diagnostics));
    const Capsule& c = module->capsules.front();
    CHECK(c.contract(Obligation::Value).evidence.kind == EvidenceKind::Checker);
    CHECK(c.contract(Obligation::Value).evidence.coverage == CheckerCoverage::Sampled);
    CHECK(c.contract(Obligation::Value).evidence.name == "relu.recompute");
    CHECK(c.contract(Obligation::Vjp).evidence.kind == EvidenceKind::Missing);

    // The plan's JSON and Markdown carry the disposition; TorchLean's text lines stay as they are.
    const ResolvedProfile resolved = capsule::testing::shipped_profile("checked_cpu");
    const KernelPlan plan{{PlannedKernel{Op::Relu, &c}}};
    const std::vector<PlannedKernel>& kernels = plan.kernels;
    const std::string json = plan_report(resolved, plan, ReportFormat::Json, capsule::testing::fixed_fingerprint());
    CHECK(has(json, R"("value":{"claim":"value-refinement")"));
    CHECK(has(json, R"({"kind":"checker","name":"relu.recompute","coverage":"sampled","disposition":"fuzzed")"));
    CHECK(has(json, R"({"kind":"missing","disposition":"missing","label":"missing: no evidence provided"})"));
    CHECK(has(json, R"("shape":{"claim":"shape-safety","label":"shape safety for relu","evidence":{"kind":"runtime-guard","name":"shape checks","disposition":"checked")"));
    const std::string markdown =
        plan_report(resolved, plan, ReportFormat::Markdown, capsule::testing::fixed_fingerprint());
    CHECK(has(markdown, "| value evidence | value disposition |"));
    CHECK(has(markdown, "checked on sampled calls by checker relu.recompute | fuzzed |"));
    const std::vector<std::string> lines = detailed_lines(kernels.front());
    REQUIRE(lines.size() == 5);
    CHECK(lines[3] == "    value: relu forward refines its TorchLean semantics; checked on sampled calls by checker "
                      "relu.recompute");
    std::filesystem::remove_all(dir);
  }

  TEST_CASE("a catalog reports every checker-evidence problem in one run, each at its value") {
    const auto dir = scratch("bad");
    write(dir / "inline.toml", str(capsule::testing::kCatalogHead, R"(
[[capsule]]
name = "inline.relu"
op = "relu"
contracts.value = { claim = "value-refinement", evidence = { kind = "checker", name = "relu.check" } }

[[capsule]]
name = "inline.abs"
op = "abs"
contracts.value = { claim = "value-refinement", evidence = { kind = "checker", name = "abs.check", coverage = "most" } }

[[capsule]]
name = "inline.neg"
op = "neg"
contracts.value = { claim = "value-refinement", evidence = { kind = "missing", coverage = "full" } }
)"));
    Diagnostics diagnostics;
    CHECK_FALSE(load_catalog(dir / "inline.toml", LoadOptions{}, diagnostics).has_value());
    const std::string text = render(diagnostics);
    INFO(text);
    CHECK(has(text, "error[missing-field]"));
    CHECK(has(text, "checker evidence states its coverage"));
    CHECK(has(text, "error[unknown-spelling]: `coverage`: unknown checker coverage `most`"));
    CHECK(has(text, "error[invalid-value]: `coverage` does not belong to missing evidence"));
    CHECK(std::count_if(diagnostics.begin(), diagnostics.end(), [](const Diagnostic& d) { return d.where.line > 0; }) ==
          3);
    std::filesystem::remove_all(dir);
  }
}

TEST_SUITE("acceptance presets") {
  TEST_CASE("capsule check --profile strict lists exactly the obligations without proved or checked evidence") {
    const capsule::testing::CliRun run =
        capsule::testing::run_shipped_cli({"check", "--profile", "strict", "--ops", "matmul,relu"});
    INFO(run.out, run.err);
    CHECK(run.status == 1);
    // Shape and layout guards are complete checks; the value and VJP suites are `tested`.
    CHECK(run.out.find("strict: rejected reference.matmul value\n"
                       "  covered by test suite reference.values\n"
                       "strict: rejected reference.matmul vjp\n") == 0);
    CHECK(has(run.out, "strict: rejected reference.relu value\n"));
    CHECK(has(run.out, "strict: rejected reference.relu vjp\n"));
    CHECK_FALSE(has(run.out, " shape\n"));
    CHECK_FALSE(has(run.out, " layout\n"));
    CHECK(has(run.out, "strict: gate failures by class: tested 4\n"
                       "  tested: reference.matmul value, reference.matmul vjp, reference.relu value, reference.relu vjp\n"));
    CHECK_FALSE(has(run.out, "strict: accepted"));
  }

  TEST_CASE("capsule check lists failure classes in order under a profile that admits trust") {
    // libtorch_forward_cuda under --assurance strict: the SDPA capsule's guards on the VJP claim
    // are `guarded`, its value boundary `trusted`; guarded comes first.
    const capsule::testing::CliRun run = capsule::testing::run_shipped_cli(
        {"check", "--profile", "libtorch_forward_cuda", "--ops", "scaled_dot_product_attention", "--assurance",
         "strict"});
    INFO(run.out, run.err);
    CHECK(run.status == 1);
    // The seed 002 lines come in class order: the VJP guard (guarded) before the value boundary.
    CHECK(run.out.find("strict: rejected libtorch.sdpa_forward vjp\n"
                       "  guarded at runtime by backend profile requires vjp=torchlean-tape\n"
                       "strict: rejected libtorch.sdpa_forward value\n"
                       "  trusted boundary: LibTorch/CUDA SDPA implementation\n"
                       "strict: gate failures by class: guarded 1, trusted 1\n"
                       "  guarded: libtorch.sdpa_forward vjp\n"
                       "  trusted: libtorch.sdpa_forward value\n") == 0);
  }

  TEST_CASE("lint warns about missing evidence at the evidence, and --deny makes it an error") {
    const auto dir = scratch("lint");
    std::filesystem::create_directories(dir / "catalogs");
    std::filesystem::create_directories(dir / "profiles");
    write(dir / "catalogs" / "inline.toml", str(capsule::testing::kCatalogHead, R"(
[[capsule]]
name = "inline.relu"
op = "relu"
contracts.value = { claim = "value-refinement", evidence = { kind = "missing" } }

[[capsule]]
name = "inline.abs"
op = "abs"
contracts.value = { claim = "value-refinement", evidence = { kind = "checker", name = "abs.check", coverage = "partial" } }
)"));
    const std::vector<std::string> base{"lint", "--catalogs", (dir / "catalogs").string(), "--profiles",
                                        (dir / "profiles").string()};
    const capsule::testing::CliRun warn = capsule::testing::run_cli(base);
    INFO(warn.out, warn.err);
    CHECK(has(warn.out + warn.err, "inline.toml:18:60: warning[missing-evidence]: capsule `inline.relu` declares "
                                   "`missing` evidence for its value obligation"));
    // The CLI knows the checkers it links: a checker name none of them has is an error at the name.
    CHECK(has(warn.out + warn.err, "inline.toml:23:87: error[unknown-checker]: capsule `inline.abs` value evidence "
                                   "names checker `abs.check`, which this program does not register"));
    std::vector<std::string> deny = base;
    deny.push_back("--deny");
    deny.push_back("missing-evidence");
    const capsule::testing::CliRun denied = capsule::testing::run_cli(deny);
    CHECK(denied.status != 0);
    CHECK(has(denied.out + denied.err, "error[missing-evidence]"));
    std::filesystem::remove_all(dir);
  }

  TEST_CASE("profiles load every preset name and an optional `refused` list") {
    const auto dir = scratch("profiles");
    const auto profile = [&](std::string_view assurance) {
      write(dir / "p.toml", str("schema = 1\nname = \"p\"\ndevice = \"cpu\"\nassurance = ", assurance,
                                "\nmodules = [\"reference\"]\n[availability]\ndevices = [\"cpu\"]\n"
                                "providers = [\"reference\"]\n"));
      Diagnostics diagnostics;
      auto loaded = load_profile(dir / "p.toml", LoadOptions{}, diagnostics);
      return std::make_pair(std::move(loaded), render(diagnostics));
    };
    for (const std::string_view name : kAssurancePresets) {
      auto [loaded, text] = profile(str("\"", name, "\""));
      INFO(name, text);
      REQUIRE(loaded.has_value());
      CHECK(loaded->policy.assurance == *assurance_preset(name));
    }
    auto [custom, text] =
        profile(R"({ trust = ["checked"], evidence = ["runtime-guard", "checker"], refused = ["guarded"] })");
    INFO(text);
    REQUIRE(custom.has_value());
    CHECK(custom->policy.assurance.refused == EnumSet<Disposition>{Disposition::Guarded});
    CHECK(custom->policy.assurance.label() == "custom(trust: checked; evidence: runtime-guard|checker; refused: guarded)");
    auto [typo, typo_text] = profile("\"strickt\"");
    CHECK_FALSE(typo.has_value());
    CHECK(has(typo_text, "p.toml:4:13: error[unknown-spelling]: unknown assurance `strickt`"));
    CHECK(has(typo_text, "did you mean `strict`?"));
    std::filesystem::remove_all(dir);
  }
}
