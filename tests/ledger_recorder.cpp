// SPDX-License-Identifier: Apache-2.0
// Records, per suite and (op, provider, device), the checks capsule_tests ran and which failed
// (see ledger_recorder.hpp). A doctest listener sees every assertion when the runner passes
// --success (it does in --ledger mode).
#include "ledger_recorder.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <set>
#include <string_view>
#include <tuple>

#include "capsule/escape.hpp"
#include "capsule/text.hpp"
#include "null_reporter.hpp"

namespace capsule::testing {
namespace {

using Key = std::tuple<Op, Provider, Device>;

struct Tally {
  std::int64_t checks = 0;
  std::int64_t failed = 0;
  std::vector<LedgerFailure> failures;

  void add(bool ok, const LedgerFailure& failure) {
    ++checks;
    if (ok) return;
    ++failed;
    if (failures.size() < kMaxLedgerFailures) failures.push_back(failure);
  }
};

struct Recorder {
  std::mutex mutex;
  // The running test case.
  std::string suite;
  std::string test_case;
  std::optional<Key> current;     ///< the handler fetched last
  std::set<Key> exercised;        ///< every handler the test case fetched
  Tally unattributed;             ///< checks made before any fetch, plus case-level failures
  // Totals of the run, by suite and case.
  std::map<std::string, std::map<Key, Tally>> tallies;
  std::size_t failures = 0;
  bool print = false;
};

Recorder& recorder() {
  static Recorder instance;
  return instance;
}

/// `file` as a path in the source tree: __FILE__ is absolute, or relative to the object's build
/// directory when ccache's base_dir rewrites it (`../../tests/x.cpp`).
std::string relative_to_source(std::string_view file) {
  const std::string_view root = CAPSULE_SOURCE_DIR;
  if (file.size() > root.size() + 1 && file.substr(0, root.size()) == root && file[root.size()] == '/') {
    file.remove_prefix(root.size() + 1);
  }
  while (file.starts_with("../") || file.starts_with("./")) file.remove_prefix(file.find('/') + 1);
  return std::string(file.substr(0, 400));
}

class LedgerListener : public NullReporter {
 public:
  explicit LedgerListener(const doctest::ContextOptions&) {}

  /// The failing check's INFO, CAPTURE and *_MESSAGE texts (the console reporter is silent in
  /// ledger runs, so without them a log, a GPU machine's above all, would not say why), one
  /// escaped line each, at most 400 characters.
  static void print_active_contexts() {
    const doctest::IContextScope* const* contexts = doctest::IReporter::get_active_contexts();
    for (int i = 0; contexts != nullptr && i < doctest::IReporter::get_num_active_contexts(); ++i) {
      std::ostringstream text;
      contexts[i]->stringify(&text);
      std::fprintf(stderr, "ledger:   with %s\n", text_escape(std::string_view(text.str()).substr(0, 400)).c_str());
    }
  }

  void test_case_start(const doctest::TestCaseData& in) override {
    Recorder& r = recorder();
    const std::lock_guard lock(r.mutex);
    r.suite = in.m_test_suite != nullptr ? in.m_test_suite : "";
    r.test_case = in.m_name != nullptr ? in.m_name : "";
    r.current.reset();
    r.exercised.clear();
    r.unattributed = {};
  }
  void test_case_reenter(const doctest::TestCaseData&) override {
    // A subcase starts over from the top of the test case: nothing is fetched yet.
    Recorder& r = recorder();
    const std::lock_guard lock(r.mutex);
    r.current.reset();
  }
  void log_assert(const doctest::AssertData& in) override {
    if ((in.m_at & doctest::assertType::is_warn) != 0) return;  // WARN never fails a test
    Recorder& r = recorder();
    const std::lock_guard lock(r.mutex);
    const LedgerFailure failure{r.test_case.substr(0, 400), relative_to_source(in.m_file != nullptr ? in.m_file : ""),
                                in.m_line, std::string(std::string_view(in.m_expr != nullptr ? in.m_expr : "").substr(0, 400))};
    if (in.m_failed) ++r.failures;
    if (in.m_failed && r.print) {
      std::fprintf(stderr, "ledger: check failed in %s: %s:%d: %s\n", text_escape(r.test_case).c_str(),
                   text_escape(failure.file).c_str(), in.m_line, text_escape(failure.check).c_str());
      print_active_contexts();
    }
    if (r.current) r.tallies[r.suite][*r.current].add(!in.m_failed, failure);
    else r.unattributed.add(!in.m_failed, failure);
  }
  void test_case_exception(const doctest::TestCaseException& in) override {
    Recorder& r = recorder();
    const std::lock_guard lock(r.mutex);
    ++r.failures;
    if (r.print) std::fprintf(stderr, "ledger: test case %s threw: %s\n", text_escape(r.test_case).c_str(),
                 text_escape(std::string_view(in.error_string.c_str()).substr(0, 400)).c_str());
    r.unattributed.add(false, LedgerFailure{r.test_case.substr(0, 400), "", 0,
                                            str(in.is_crash ? "crashed: " : "threw: ",
                                                std::string_view(in.error_string.c_str()).substr(0, 300))});
  }
  void test_case_end(const doctest::CurrentTestCaseStats& in) override {
    Recorder& r = recorder();
    const std::lock_guard lock(r.mutex);
    if (!in.testCaseSuccess && r.unattributed.failed == 0) {
      // A failure doctest reports without a failed assertion (timeout, expected-failure
      // mismatch): blame the test case as a whole.
      bool attributed = false;
      for (const Key& key : r.exercised) attributed |= r.tallies[r.suite][key].failed > 0;
      if (!attributed) r.unattributed.add(false, LedgerFailure{r.test_case.substr(0, 400), "", 0, "the test case failed"});
    }
    if (r.unattributed.checks > 0) {
      for (const Key& key : r.exercised) {
        Tally& tally = r.tallies[r.suite][key];
        tally.checks += r.unattributed.checks;
        tally.failed += r.unattributed.failed;
        for (const LedgerFailure& f : r.unattributed.failures) {
          if (tally.failures.size() < kMaxLedgerFailures) tally.failures.push_back(f);
        }
      }
    }
    r.suite.clear();
    r.current.reset();
    r.exercised.clear();
    r.unattributed = {};
  }
};

REGISTER_LISTENER("capsule-ledger", 2, LedgerListener);

}  // namespace

void print_failed_checks() {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  r.print = true;
}

void note_handler_fetched(Op op, Provider provider, Device device) {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  if (r.suite.empty()) return;
  r.current = Key{op, provider, device};
  r.exercised.insert(*r.current);
}

EvidenceLedger recorded_ledger(const EvidenceManifest& manifest, const EnvironmentFingerprint& fingerprint,
                               const std::string& finished) {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  EvidenceLedger ledger;
  ledger.runs.push_back(LedgerRun{ledger_run_id(fingerprint, finished), finished, fingerprint});
  for (const EvidenceSource& source : manifest.sources) {
    const auto suite = r.tallies.find(source.name);
    for (const CoverageCase& covered : source.cases) {
      LedgerEntry entry;
      entry.kind = source.kind;
      entry.source = source.name;
      entry.covers = covered;
      if (suite != r.tallies.end()) {
        const auto tally = suite->second.find(Key{covered.op, covered.provider, covered.device});
        if (tally != suite->second.end()) {
          entry.checks = tally->second.checks;
          entry.failed_checks = tally->second.failed;
          entry.failures = tally->second.failures;
        }
      }
      entry.passed = entry.checks > 0 && entry.failed_checks == 0;
      if (entry.checks == 0) entry.failures.clear();
      ledger.entries.push_back(std::move(entry));
    }
  }
  return ledger;
}

std::size_t recorded_failures() {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  return r.failures;
}

}  // namespace capsule::testing
