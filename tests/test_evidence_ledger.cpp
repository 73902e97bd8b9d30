// SPDX-License-Identifier: Apache-2.0
// The evidence ledger (capsule/evidence_ledger.hpp): its file format read strictly and written
// deterministically, merging ledgers of several machines, judging a capsule's evidence for this
// build and device, `capsule lint --ledger` and `capsule check --ledger`.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "capsule/build_info.hpp"
#include "capsule/lint.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

using testing::has;

constexpr std::string_view kHereDigest = "1111111111111111111111111111111111111111111111111111111111111111";
constexpr std::string_view kOtherDigest = "2222222222222222222222222222222222222222222222222222222222222222";

EnvironmentFingerprint fingerprint(std::string_view reference_digest, std::string_view commit = "abc1234def5678abc1234def5678abc1234def56") {
  EnvironmentFingerprint fp;
  fp.set(std::string(fingerprint_key::kCommit), std::string(commit));
  fp.set(std::string(fingerprint_key::kCpuModel), "Test CPU 9000");
  if (!reference_digest.empty()) {
    fp.set(fingerprint_key::provider_library_digest("reference"), std::string(reference_digest));
  }
  return fp;
}

/// Adds a run to `ledger` and returns its index.
std::size_t add_run(EvidenceLedger& ledger, const EnvironmentFingerprint& fp, std::string finished) {
  ledger.runs.push_back(LedgerRun{ledger_run_id(fp, finished), finished, fp});
  return ledger.runs.size() - 1;
}

LedgerEntry entry(std::size_t run, std::string source, Op op, Obligation obligation, bool passed,
                  Provider provider = Provider::Reference, Device device = Device::Cpu) {
  LedgerEntry e;
  e.run = run;
  e.source = std::move(source);
  e.covers = CoverageCase{op, provider, device, obligation};
  e.passed = passed;
  e.checks = 12;
  e.failed_checks = passed ? 0 : 2;
  if (!passed) e.failures.push_back(LedgerFailure{"relu keeps positives", "tests/test_x.cpp", 41, "out == 1.0"});
  return e;
}

/// A one-run ledger on this build (kHereDigest) with reference.values passing for relu and add.
EvidenceLedger passing_ledger() {
  EvidenceLedger ledger;
  const std::size_t run = add_run(ledger, fingerprint(kHereDigest), "2026-11-30T10:00:00Z");
  ledger.entries.push_back(entry(run, "reference.values", Op::Relu, Obligation::Value, true));
  ledger.entries.push_back(entry(run, "reference.values", Op::Add, Obligation::Value, true));
  return ledger;
}

Diagnostics parse_errors(std::string_view text) {
  auto parsed = parse_evidence_ledger(text, "ledger.json");
  REQUIRE_FALSE(parsed.has_value());
  return parsed.error();
}

/// A valid ledger text with one run (id computed) and `entries` spliced in.
std::string ledger_text(std::string_view entries, std::string_view top_extra = "", std::string_view run_extra = "") {
  const EnvironmentFingerprint fp = fingerprint(kHereDigest);
  const std::string id = ledger_run_id(fp, "2026-11-30T10:00:00Z");
  return str("{\"format\":\"capsule-evidence-ledger\",\"schema\":1", top_extra, ",\"runs\":[{\"id\":\"", id,
             "\",\"finished\":\"2026-11-30T10:00:00Z\",\"fingerprint\":{\"build.commit\":\"abc\"", run_extra,
             "}}],\"entries\":[", entries, "]}");
}

std::string entry_text(std::string_view overrides = "", std::string_view outcome = "\"passed\"",
                       std::string_view counts = "\"checks\":3,\"failed_checks\":0") {
  const std::string id = ledger_run_id(fingerprint(kHereDigest), "2026-11-30T10:00:00Z");
  return str("{\"run\":\"", id, "\",\"kind\":\"test-suite\",\"source\":\"reference.values\",\"op\":\"relu\",",
             "\"provider\":\"reference\",\"device\":\"cpu\",\"obligation\":\"value\",\"outcome\":", outcome, ",",
             counts, ",\"failures\":[]", overrides, "}");
}

}  // namespace

TEST_SUITE("evidence ledger") {
  TEST_CASE("a ledger written and read back is the same ledger, and writing is deterministic") {
    EvidenceLedger ledger = passing_ledger();
    const std::size_t other = add_run(ledger, fingerprint(kOtherDigest), "2026-11-29T09:00:00Z");
    ledger.entries.push_back(entry(other, "reference.vjps", Op::Relu, Obligation::Vjp, false));
    ledger.runs[other].fingerprint.set("device.cpu", "CPU with \"quotes\", a tab\t and ünïcode");

    const std::string text = write_evidence_ledger(ledger);
    auto read = parse_evidence_ledger(text, "ledger.json");
    REQUIRE_MESSAGE(read.has_value(), (read ? std::string() : render(read.error())));
    CHECK(read->runs.size() == 2);
    CHECK(read->entries.size() == 3);
    CHECK(write_evidence_ledger(*read) == text);
    const auto failing = std::find_if(read->entries.begin(), read->entries.end(), [](const LedgerEntry& e) { return !e.passed; });
    REQUIRE(failing != read->entries.end());
    CHECK(failing->failures.size() == 1);
    CHECK(failing->failures[0].check == "out == 1.0");
    CHECK(read->runs[failing->run].fingerprint.get("device.cpu") == "CPU with \"quotes\", a tab\t and ünïcode");
  }

  TEST_CASE("a ledger with many entries of short source names reads (the duplicate check owns its keys)") {
    // Short names live inside the string object (SSO) and move when the entry vector grows; the
    // duplicate check once kept views into them (found by ASan in the CLI on a real ledger).
    EvidenceLedger ledger;
    const std::size_t run = add_run(ledger, fingerprint(kHereDigest), "2026-11-30T10:00:00Z");
    for (const Op op : all_values<Op>()) ledger.entries.push_back(entry(run, "v", op, Obligation::Value, true));
    auto read = parse_evidence_ledger(write_evidence_ledger(ledger), "ledger.json");
    REQUIRE_MESSAGE(read.has_value(), (read ? std::string() : render(read.error())));
    CHECK(read->entries.size() == kOpCount);
    EvidenceLedger twice = *read;
    REQUIRE(twice.merge(*read).has_value());
    CHECK(twice.entries.size() == kOpCount);
  }

  TEST_CASE("ledgers from several machines merge, a run is kept once, conflicting results are refused") {
    EvidenceLedger here = passing_ledger();
    EvidenceLedger gpu;
    EnvironmentFingerprint gpu_fp = fingerprint("");
    gpu_fp.set(fingerprint_key::provider_library_digest("native-cuda"), std::string(kOtherDigest));
    gpu_fp.set("device.cuda", "NVIDIA H200");
    const std::size_t run = add_run(gpu, gpu_fp, "2026-11-30T12:00:00Z");
    gpu.entries.push_back(entry(run, "native_cuda.values", Op::Matmul, Obligation::Value, true, Provider::NativeCuda,
                                Device::Cuda));

    EvidenceLedger merged = here;
    REQUIRE(merged.merge(gpu).has_value());
    REQUIRE(merged.merge(gpu).has_value());  // merging the same ledger twice changes nothing
    CHECK(merged.runs.size() == 2);
    CHECK(merged.entries.size() == 3);

    EvidenceLedger conflicting = gpu;
    conflicting.entries[0].passed = false;
    conflicting.entries[0].failed_checks = 1;
    auto refused = merged.merge(conflicting);
    REQUIRE_FALSE(refused.has_value());
    CHECK(has(refused.error(), "native_cuda.values on matmul/native-cuda/cuda value"));
    CHECK(has(refused.error(), "different results"));
  }

  TEST_CASE("every malformed or hostile ledger is refused with its position, code and expectation") {
    struct Case {
      std::string text;
      DiagCode code;
      std::string_view says;
    };
    const std::vector<Case> cases{
        {"{\"format\": \"capsule-evidence-ledger\",\n  \"schema\": 1,,}", DiagCode::ParseError, "2:"},
        {"[1, 2]", DiagCode::WrongType, "is a JSON object"},
        {"{\"format\":\"something-else\",\"schema\":1}", DiagCode::UnsupportedSchema, "not an evidence ledger"},
        {"{\"format\":\"capsule-evidence-ledger\",\"schema\":2}", DiagCode::UnsupportedSchema, "schema 1"},
        {ledger_text("", ",\"entires\":[]"), DiagCode::UnknownKey, "did you mean `entries`"},
        {ledger_text(entry_text(",\"op\":\"relux\"")), DiagCode::ParseError, "member name \"op\" again"},
        {ledger_text(str(entry_text()).replace(str(entry_text()).find("\"relu\""), 6, "\"relux\"")),
         DiagCode::UnknownSpelling, "did you mean `relu`"},
        {ledger_text(str(entry_text()).replace(str(entry_text()).find("reference.values"), 16, "ref\\nvalues")),
         DiagCode::InvalidIdentifier, "U+000A"},
        {ledger_text(entry_text("", "\"passed\"", "\"checks\":3,\"failed_checks\":1")), DiagCode::InvalidValue,
         "passes exactly when it has checks and none failed"},
        {ledger_text(entry_text("", "\"passed\"", "\"checks\":0,\"failed_checks\":0")), DiagCode::InvalidValue,
         "passes exactly when"},
        {ledger_text(entry_text("", "\"flaky\"")), DiagCode::InvalidValue, "\"passed\" or \"failed\""},
        {ledger_text(entry_text("", "\"passed\"", "\"checks\":-3,\"failed_checks\":0")), DiagCode::InvalidValue,
         "non-negative integer"},
        {ledger_text(str(entry_text()).replace(12, 8, "00000000")), DiagCode::InvalidValue, "names no run"},
        {ledger_text(entry_text() + "," + entry_text()), DiagCode::InvalidValue, "records this entry twice"},
        {ledger_text("", "", ",\"bad key\":\"x\""), DiagCode::InvalidValue, "fingerprint keys"},
        {ledger_text("", "", ",\"host.cpu\":7"), DiagCode::WrongType, "must be a string"},
        {ledger_text(str(entry_text()).replace(str(entry_text()).find("\"test-suite\""), 12, "\"runtime-guard\"")),
         DiagCode::InvalidValue, "not runtime-guard"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.text);
      const Diagnostics errors = parse_errors(c.text);
      REQUIRE_FALSE(errors.empty());
      const std::string rendered = render(errors);
      CAPTURE(rendered);
      CHECK(std::any_of(errors.begin(), errors.end(), [&](const Diagnostic& d) { return d.code == c.code; }));
      CHECK(has(rendered, c.says));
      CHECK(has(rendered, "ledger.json:"));
      CHECK(errors.front().where.line >= 1);
    }
  }

  TEST_CASE("a bad run id, time or too many failures are refused, and every problem of every file is reported") {
    const std::string good_id = ledger_run_id(fingerprint(kHereDigest), "2026-11-30T10:00:00Z");
    std::string bad_id = ledger_text("");
    bad_id.replace(bad_id.find(good_id), 64, std::string(64, 'Z'));
    CHECK(has(render(parse_errors(bad_id)), "64 lower-case hex digits"));
    std::string bad_time = ledger_text("");
    bad_time.replace(bad_time.find("2026-11-30T10:00:00Z"), 20, "yesterday at noon ok");
    CHECK(has(render(parse_errors(bad_time)), "YYYY-MM-DDTHH:MM:SSZ"));
    std::string failures;
    for (int i = 0; i < 9; ++i) failures += str(i == 0 ? "" : ",", R"({"test_case":"t","file":"f","line":1,"check":"c"})");
    const std::string too_many = ledger_text(str(entry_text()).replace(str(entry_text()).find("\"failures\":[]"), 13,
                                                                       str("\"failures\":[", failures, "]")));
    CHECK(has(render(parse_errors(too_many)), "at most 8 failures"));

    const std::filesystem::path dir = std::filesystem::temp_directory_path() / str("capsule-ledger-", ::getpid());
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "a.json") << "{";
    std::ofstream(dir / "b.json") << bad_time;
    const std::vector<std::filesystem::path> files{dir / "a.json", dir / "b.json", dir / "missing.json"};
    auto read = read_evidence_ledgers(files);
    REQUIRE_FALSE(read.has_value());
    const std::string rendered = render(read.error());
    CHECK(has(rendered, "a.json:1:2: error[parse-error]"));
    CHECK(has(rendered, "b.json:"));
    CHECK(has(rendered, "missing.json: error[io-error]"));
    std::filesystem::remove_all(dir);
  }

  TEST_CASE("evidence passes only on a passing entry of this build's handler library and the capsule's case") {
    const Capsule& relu = testing::shipped_capsule("reference.relu");
    const EnvironmentFingerprint here = fingerprint(kHereDigest);
    EvidenceLedger ledger = passing_ledger();

    LedgerVerdict verdict = judge_evidence(ledger, here, relu, Obligation::Value);
    CHECK(verdict.status == LedgerStatus::Passed);
    CHECK(has(verdict.reason, "passed: 12 checks of test-suite reference.values on cpu (Test CPU 9000), commit abc1234def56"));
    CHECK(has(verdict.reason, "2026-11-30T10:00:00Z"));

    // Runtime guards are not ledger evidence; the VJP suite never ran in this ledger.
    CHECK(judge_evidence(ledger, here, relu, Obligation::Shape).status == LedgerStatus::NotLedgerEvidence);
    verdict = judge_evidence(ledger, here, relu, Obligation::Vjp);
    CHECK(verdict.status == LedgerStatus::NotRunHere);
    CHECK(has(verdict.reason, "not run here: the ledger has no run of test-suite reference.vjps for vjp of relu"));

    // Another build of the reference handlers (a different library digest) does not count.
    verdict = judge_evidence(ledger, fingerprint(kOtherDigest), relu, Obligation::Value);
    CHECK(verdict.status == LedgerStatus::NotRunHere);
    CHECK(has(verdict.reason, "(it passed on another build: cpu (Test CPU 9000), commit abc1234def56"));

    // Same library, another version of the provider's shared library: another build.
    EnvironmentFingerprint upgraded = here;
    upgraded.set(fingerprint_key::provider_version("reference"), "2.0");
    CHECK(judge_evidence(ledger, upgraded, relu, Obligation::Value).status == LedgerStatus::NotRunHere);

    // A build without the provider's library cannot have run it.
    verdict = judge_evidence(ledger, fingerprint(""), relu, Obligation::Value);
    CHECK(verdict.status == LedgerStatus::NotRunHere);
    CHECK(has(verdict.reason, "this build has no compiled reference handler library"));

    // The latest run of this build decides, whichever order the runs are listed in.
    const std::size_t later = add_run(ledger, fingerprint(kHereDigest, "fedcba9876543210fedcba9876543210fedcba98"),
                                      "2026-11-30T11:00:00Z");
    ledger.entries.push_back(entry(later, "reference.values", Op::Relu, Obligation::Value, false));
    verdict = judge_evidence(ledger, here, relu, Obligation::Value);
    CHECK(verdict.status == LedgerStatus::Failed);
    CHECK(has(verdict.reason, "failed: 2 of 12 checks"));
    CHECK(has(verdict.reason, "first failure in test case \"relu keeps positives\" at tests/test_x.cpp:41: out == 1.0"));
    const std::size_t latest = add_run(ledger, here, "2026-11-30T12:00:00Z");
    ledger.entries.push_back(entry(latest, "reference.values", Op::Relu, Obligation::Value, true));
    CHECK(judge_evidence(ledger, here, relu, Obligation::Value).status == LedgerStatus::Passed);

    // An entry for another op, suite or device never stands in for the capsule's own case.
    EvidenceLedger borrowed;
    const std::size_t run = add_run(borrowed, here, "2026-11-30T10:00:00Z");
    borrowed.entries.push_back(entry(run, "reference.values", Op::Add, Obligation::Value, true));
    borrowed.entries.push_back(entry(run, "vocab", Op::Relu, Obligation::Value, true));
    borrowed.entries.push_back(entry(run, "reference.values", Op::Relu, Obligation::Value, true, Provider::Reference,
                                     Device::Cuda));
    CHECK(judge_evidence(borrowed, here, relu, Obligation::Value).status == LedgerStatus::NotRunHere);
  }

  TEST_CASE("a merged GPU run says where CUDA evidence passed, without it CUDA evidence is not run here") {
    const Capsule& matmul = testing::shipped_capsule("native_cuda.matmul");
    EnvironmentFingerprint here = fingerprint(kHereDigest);
    LedgerVerdict verdict = judge_evidence(passing_ledger(), here, matmul, Obligation::Value);
    CHECK(verdict.status == LedgerStatus::NotRunHere);
    CHECK(has(verdict.reason, "this build has no compiled native-cuda handler library"));

    // A GPU machine ran this build's native-cuda library (carried there) and its ledger merged.
    here.set(fingerprint_key::provider_library_digest("native-cuda"), std::string(kOtherDigest));
    EvidenceLedger gpu;
    EnvironmentFingerprint gpu_fp = here;
    gpu_fp.set("device.cuda", "NVIDIA H200");
    gpu_fp.set("device.cuda.driver", "580.65");
    const std::size_t run = add_run(gpu, gpu_fp, "2026-11-30T12:00:00Z");
    gpu.entries.push_back(entry(run, "native_cuda.values", Op::Matmul, Obligation::Value, true, Provider::NativeCuda,
                                Device::Cuda));
    EvidenceLedger merged = passing_ledger();
    REQUIRE(merged.merge(gpu).has_value());
    verdict = judge_evidence(merged, here, matmul, Obligation::Value);
    CHECK(verdict.status == LedgerStatus::Passed);
    CHECK(has(verdict.reason, "on cuda (NVIDIA H200), driver 580.65, commit abc1234def56, 2026-11-30T12:00:00Z"));
  }

  TEST_CASE("ledger_rejections lists every planned obligation without a passing entry, once per capsule") {
    const ResolvedProfile resolved = testing::shipped_profile("checked_cpu");
    const std::vector<Op> ops{Op::Relu, Op::Add, Op::Relu, Op::Matmul};
    auto plan = resolved.planner.plan_ops(ops);
    REQUIRE(plan.has_value());
    const std::vector<LedgerRejection> rejections =
        ledger_rejections(passing_ledger(), fingerprint(kHereDigest), plan->kernels);
    std::vector<std::string> named;
    for (const LedgerRejection& r : rejections) named.push_back(str(r.capsule->name, " ", to_string(r.obligation)));
    CHECK(named == std::vector<std::string>{"reference.relu vjp", "reference.add vjp", "reference.matmul value",
                                            "reference.matmul vjp"});
  }

  TEST_CASE("lint --ledger: a handler whose device is unusable here is not run here, but its failed run is an error") {
    EnvironmentFingerprint here = fingerprint(kHereDigest);
    here.set(fingerprint_key::provider_library_digest("cublas"), "c0ffee");
    EvidenceLedger ledger;
    const std::size_t run = add_run(ledger, here, "2026-12-02T10:00:00Z");
    ledger.entries.push_back(entry(run, "cublas.values", Op::Matmul, Obligation::Value, false, Provider::Cublas, Device::Cuda));
    std::vector<LintHandler> handlers;
    for (const Op op : {Op::Matmul, Op::Linear}) {
      handlers.push_back(LintHandler{"cuBLAS CUDA", op, Provider::Cublas, Device::Cuda, {}, {}, true, false,
                                     "no CUDA driver is installed"});
    }
    const Diagnostics found = check_ledger(testing::shipped(), handlers, ledger, here);
    bool failed_is_error = false;
    bool unusable_is_not_run = false;
    for (const Diagnostic& d : found) {
      const std::string text = render(d);
      CAPTURE(text);
      if (d.code == DiagCode::EvidenceNotPassed && has(text, "(cublas.matmul value) failed on this build")) {
        failed_is_error = d.severity == Severity::Error;
      }
      if (d.code == DiagCode::EvidenceNotRunHere && has(text, "module `cublas`")) {
        unusable_is_not_run = d.severity == Severity::Warning && has(text, "cublas.linear value") &&
                              has(text, "no usable device `cuda`: no CUDA driver is installed");
        CHECK_FALSE(has(text, "cublas.matmul value"));  // failed: reported as an error, not as not run
      }
      CHECK_FALSE((d.code == DiagCode::EvidenceNotPassed && has(text, "cublas.linear")));
    }
    CHECK(failed_is_error);
    CHECK(unusable_is_not_run);
  }

  TEST_CASE("lint --ledger: a runnable capsule's failing evidence is an error at the evidence, CUDA is not run here") {
    const EnvironmentFingerprint here = fingerprint(kHereDigest);
    EvidenceLedger ledger;
    const std::size_t run = add_run(ledger, here, "2026-11-30T10:00:00Z");
    for (const ModulePtr& module : testing::shipped().modules) {
      for (const Capsule& c : module->capsules) {
        if (c.provider != Provider::Reference) continue;
        for (const Obligation o : {Obligation::Value, Obligation::Vjp}) {
          const Evidence& e = c.contract(o).evidence;
          if (e.kind != EvidenceKind::TestSuite) continue;
          ledger.entries.push_back(entry(run, e.name, c.op, o, !(c.op == Op::Relu && o == Obligation::Value)));
        }
      }
    }
    std::vector<LintHandler> handlers;
    for (const RegisteredHandler* h : testing::reference_handlers().all()) {
      handlers.push_back(LintHandler{h->spec.name, h->spec.op, h->spec.provider, h->spec.device, h->spec.guards, {},
                                      h->spec.backend_vjp, h->spec.forward_autograd != nullptr, {}});
    }
    const Diagnostics found = check_ledger(testing::shipped(), handlers, ledger, here);
    std::size_t errors = 0;
    std::size_t not_run = 0;
    for (const Diagnostic& d : found) {
      CAPTURE(render(d));
      if (d.code == DiagCode::EvidenceNotPassed) {
        ++errors;
        CHECK(d.severity == Severity::Error);
        CHECK(has(d.where.file, "reference.toml"));
        CHECK(d.where.line > 0);
        CHECK(has(d.message, "(reference.relu value) failed on this build"));
        CHECK(has(render(d), "relu keeps positives"));
      } else {
        CHECK(d.code == DiagCode::EvidenceNotRunHere);
        CHECK(d.severity == Severity::Warning);
        ++not_run;
      }
    }
    CHECK(errors == 1);
    CHECK(not_run == 9);  // native-cuda, attention, cublas, cudnn, libtorch-cuda, libtorch-cuda-model and the three LibTorch CPU modules (no LibTorch or CUDA handlers here)
  }

  TEST_CASE("capsule check --ledger: accepted on passing evidence, rejected naming the failing case, output is inert") {
    const EnvironmentFingerprint here = current_fingerprint();
    REQUIRE_FALSE(here.get(fingerprint_key::provider_library_digest("reference")).empty());
    EvidenceLedger ledger;
    const std::size_t run = add_run(ledger, here, "2026-11-30T10:00:00Z");
    for (const Obligation o : {Obligation::Value, Obligation::Vjp}) {
      const std::string suite = o == Obligation::Value ? "reference.values" : "reference.vjps";
      ledger.entries.push_back(entry(run, suite, Op::Add, o, true));
      LedgerEntry relu = entry(run, suite, Op::Relu, o, o == Obligation::Vjp);
      if (!relu.passed) relu.failures[0].test_case = "forged\n::error file=x::owned\r\nchecked: accepted";
      ledger.entries.push_back(relu);
    }
    const std::filesystem::path file = std::filesystem::temp_directory_path() / str("capsule-ledger-cli-", ::getpid(), ".json");
    std::ofstream(file) << write_evidence_ledger(ledger);

    testing::CliRun run_ok = testing::run_cli({"check", "--profile", "checked_cpu", "--ops", "add", "--ledger", file.string()});
    CAPTURE(run_ok.out);
    CAPTURE(run_ok.err);
    CHECK(run_ok.status == 0);
    CHECK(has(run_ok.out, "reference.add value: passed: 12 checks of test-suite reference.values"));
    CHECK(has(run_ok.out, "checked: accepted"));

    testing::CliRun rejected = testing::run_cli({"check", "--profile", "checked_cpu", "--ops", "relu,add", "--ledger", file.string()});
    CAPTURE(rejected.out);
    CHECK(rejected.status == 1);
    CHECK(has(rejected.out, "checked: ledger rejected reference.relu value"));
    CHECK(has(rejected.out, "first failure in test case"));
    CHECK(has(rejected.out, "checked: rejected by the evidence ledger"));
    // The hostile test case name never starts a line of its own.
    std::istringstream lines(rejected.out);
    for (std::string line; std::getline(lines, line);) {
      CHECK_FALSE(line.starts_with("::"));
      CHECK(line != "checked: accepted");
    }

    testing::CliRun broken = testing::run_cli({"check", "--profile", "checked_cpu", "--ops", "add", "--ledger",
                                               (file.string() + ".missing")});
    CHECK(broken.status == 2);
    CHECK(has(broken.err, "error[io-error]"));
    std::filesystem::remove(file);
  }
}

}  // namespace capsule
