// SPDX-License-Identifier: Apache-2.0
// The test binaries' runner (runner.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "runner.hpp"

#include <chrono>
#include <ctime>
#include <iostream>
#include <vector>

#include "capsule/atomic_file.hpp"
#include "capsule/text.hpp"
#include "ledger_recorder.hpp"
#include "null_reporter.hpp"
#include "suite_coverage.hpp"

namespace capsule::testing {
namespace {

/// How many test cases passed the filters in the last run. CTest runs each discovered case as
/// `--test-case=NAME`; a filter that matches nothing would pass silently (doctest exits 0), which is
/// what a case name holding `;` caused (CTest's discovery splits the name there).
unsigned g_cases_passing_filters = 0;

class FilterMatchListener : public NullReporter {
 public:
  explicit FilterMatchListener(const doctest::ContextOptions&) {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    g_cases_passing_filters = stats.numTestCasesPassingFilters;
  }
};

REGISTER_LISTENER("capsule-filter-match", 3, FilterMatchListener);

bool names_test_cases(const std::vector<const char*>& args) {
  for (const char* arg : args) {
    const std::string_view text(arg);
    if (text.starts_with("--test-case=") || text.starts_with("-tc=")) return true;
  }
  return false;
}

int print_manifest(const TestBinary& binary, const std::optional<std::string>& merge_with) {
  std::vector<const char*> args{binary.name.c_str(), "--list-test-suites", "--reporters=capsule-manifest"};
  doctest::Context context(static_cast<int>(args.size()), args.data());
  const int status = context.run();
  if (status != 0) return status;
  const std::vector<std::string>& suites = listed_suites();
  if (suites.empty()) {
    std::cerr << binary.name << " --evidence-manifest: doctest listed no test suites\n";
    return 1;
  }
  EvidenceManifest manifest = declared_manifest(suites);
  if (merge_with) {
    auto other = read_evidence_manifest(*merge_with);
    if (!other) {
      for (const Diagnostic& d : other.error()) std::cerr << d.message << "\n";
      return 1;
    }
    for (EvidenceSource& source : other->sources) manifest.sources.push_back(std::move(source));
    manifest.normalise();
  }
  std::cout << write_evidence_manifest(manifest);
  return std::cout.good() ? 0 : 1;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

/// Writes the ledger of this run; returns false (after saying why) when it cannot.
bool write_ledger(const TestBinary& binary, const std::string& path, const std::vector<std::string>& suites) {
  const EvidenceManifest manifest = declared_manifest(suites);
  const EvidenceLedger ledger = recorded_ledger(manifest, binary.fingerprint(), utc_now());
  const std::string problem = write_file_atomically(path, write_evidence_ledger(ledger));
  if (!problem.empty()) {
    std::cerr << binary.name << " --ledger: cannot write " << path << ": " << problem << "\n";
    return false;
  }
  std::size_t failed = 0;
  for (const LedgerEntry& entry : ledger.entries) failed += entry.passed ? 0 : 1;
  std::cerr << "ledger: wrote " << path << ": " << ledger.entries.size() << " cases, " << failed << " failed, "
            << recorded_failures() << " failed checks\n";
  return true;
}

/// The declaring suites an evidence run covers: all, or those whose name starts with `prefix`.
std::vector<std::string> evidence_suites(const std::optional<std::string>& prefix) {
  std::vector<std::string> suites = declaring_suites();
  if (prefix) std::erase_if(suites, [&](const std::string& suite) { return !suite.starts_with(*prefix); });
  return suites;
}

int verify_coverage(const TestBinary& binary, std::vector<const char*> args, const std::optional<std::string>& ledger,
                    const std::vector<std::string>& suites) {
  if (binary.refuse_evidence_run) {
    if (std::optional<std::string> reason = binary.refuse_evidence_run()) {
      std::cerr << binary.name << (ledger ? " --ledger" : " --verify-coverage") << ": " << *reason << "\n";
      return 1;
    }
  }
  const std::string filter = "--test-suite=" + join(suites, ",");
  args.push_back(filter.c_str());
  if (ledger) {
    // Every assertion reaches the ledger listener; the console reporter would print each one,
    // so the silent reporter runs instead and the listener prints failures itself.
    args.push_back("--success");
    args.push_back("--reporters=capsule-manifest");
    print_failed_checks();
  }
  doctest::Context context(static_cast<int>(args.size()), args.data());
  int status = context.run();
  if (context.shouldExit()) return status;
  if (ledger && !write_ledger(binary, *ledger, suites)) status = 1;
  if (ledger && recorded_failures() > 0) status = 1;
  const std::vector<std::string> mismatches = coverage_mismatches(suites);
  for (const std::string& line : mismatches) std::cerr << "coverage: " << line << "\n";
  if (!mismatches.empty()) {
    std::cerr << "coverage: " << mismatches.size()
              << " declarations do not match what the suites ran; fix the SuiteCoverage declaration next to the "
                 "suite\n";
    return 1;
  }
  return status;
}

}  // namespace

int run_test_binary(int argc, char** argv, const TestBinary& binary) {
  std::vector<const char*> args(argv, argv + argc);
  bool manifest = false;
  bool verify = false;
  std::optional<std::string> ledger;
  std::optional<std::string> merge_manifest;
  std::optional<std::string> suite_prefix;
  std::vector<const char*> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view text(args[i]);
    const bool has_value = i + 1 < args.size();
    if (text == "--evidence-manifest") {
      manifest = true;
    } else if (text == "--verify-coverage") {
      verify = true;
    } else if (text == "--ledger" || text == "--tamper-op" || text == "--merge-manifest" ||
               text == "--evidence-suites") {
      if (!has_value) {
        std::cerr << binary.name << ": " << text << " needs a value\n";
        return 2;
      }
      const std::string value = args[++i];
      if (text == "--ledger") {
        ledger = value;
      } else if (text == "--evidence-suites") {
        suite_prefix = value;
      } else if (text == "--merge-manifest") {
        merge_manifest = value;
      } else if (!binary.tamper) {
        std::cerr << binary.name << ": --tamper-op is not supported by this test binary\n";
        return 2;
      } else if (auto problem = binary.tamper(value)) {
        std::cerr << binary.name << " --tamper-op: " << *problem << "\n";
        return 2;
      }
    } else {
      rest.push_back(args[i]);
    }
  }
  if (manifest) return print_manifest(binary, merge_manifest);
  if (suite_prefix && !verify && !ledger) {
    std::cerr << binary.name << ": --evidence-suites narrows --verify-coverage or --ledger; give one of them\n";
    return 2;
  }
  if (verify || ledger) {
    const std::vector<std::string> suites = evidence_suites(suite_prefix);
    if (suites.empty()) {
      std::cerr << binary.name << " --evidence-suites: no suite that declares coverage starts with `"
                << (suite_prefix ? *suite_prefix : std::string()) << "`\n";
      return 2;
    }
    return verify_coverage(binary, std::move(rest), ledger, suites);
  }
  doctest::Context context(static_cast<int>(rest.size()), rest.data());
  const int status = context.run();
  if (status == 0 && !context.shouldExit() && names_test_cases(rest) && g_cases_passing_filters == 0) {
    std::cerr << binary.name << ": no test case matches the --test-case filter, so nothing ran; a test case "
                 "name must not hold `;` (CTest's discovery splits it there)\n";
    return 1;
  }
  return status;
}

}  // namespace capsule::testing
