// SPDX-License-Identifier: Apache-2.0
// The coverage registry of capsule_tests and the doctest listener that records what each suite
// runs (see suite_coverage.hpp).
#include "suite_coverage.hpp"

#include <algorithm>

#include <doctest/doctest.h>

#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "capsule/text.hpp"
#include "ledger_recorder.hpp"
#include "null_reporter.hpp"

namespace capsule::testing {
namespace {

struct Declaration {
  std::string suite;
  Obligation obligation;
  Provider provider;
  Device device;
  std::function<std::vector<Op>()> ops;
};

using Key = std::tuple<Op, Provider, Device>;

struct Registry {
  std::vector<Declaration> declarations;
  std::string current_suite;
  std::map<std::string, std::set<Key>> exercised;  ///< by suite, in this run
  std::set<std::string> ran;                        ///< suites with at least one case run
  std::set<std::string> listed;
  std::vector<std::string> listed_sorted;
  std::mutex mutex;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

std::map<std::string, std::set<Key>> declared_keys() {
  std::map<std::string, std::set<Key>> out;
  for (const Declaration& d : registry().declarations) {
    for (const Op op : d.ops()) out[d.suite].insert({op, d.provider, d.device});
  }
  return out;
}

std::string key_words(const Key& key) {
  return str(to_string(std::get<0>(key)), " on ", to_string(std::get<1>(key)), "/", to_string(std::get<2>(key)));
}

/// Follows which suite is running (as a listener) and collects suite names when doctest lists
/// them (as the `capsule-manifest` reporter, which prints nothing itself).
class CoverageReporter : public NullReporter {
 public:
  explicit CoverageReporter(const doctest::ContextOptions&) {}

  void report_query(const doctest::QueryData& in) override {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    for (unsigned i = 0; i < in.num_data; ++i) {
      if (in.data[i] != nullptr && in.data[i]->m_test_suite != nullptr) r.listed.insert(in.data[i]->m_test_suite);
    }
    r.listed_sorted.assign(r.listed.begin(), r.listed.end());
  }
  void test_case_start(const doctest::TestCaseData& in) override {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    r.current_suite = in.m_test_suite != nullptr ? in.m_test_suite : "";
    r.ran.insert(r.current_suite);
  }
  void test_case_end(const doctest::CurrentTestCaseStats&) override {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    r.current_suite.clear();
  }
};

REGISTER_LISTENER("capsule-coverage", 1, CoverageReporter);
REGISTER_REPORTER("capsule-manifest", 1, CoverageReporter);

}  // namespace

SuiteCoverage::SuiteCoverage(std::string suite, Obligation obligation, Provider provider, Device device,
                             std::function<std::vector<Op>()> ops) {
  registry().declarations.push_back({std::move(suite), obligation, provider, device, std::move(ops)});
}

void record_exercised(Op op, Provider provider, Device device) {
  note_handler_fetched(op, provider, device);
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  if (!r.current_suite.empty()) r.exercised[r.current_suite].insert({op, provider, device});
}

EvidenceManifest declared_manifest(const std::vector<std::string>& suites) {
  EvidenceManifest manifest;
  for (const std::string& suite : suites) manifest.sources.push_back({EvidenceKind::TestSuite, suite, {}});
  for (const Declaration& d : registry().declarations) {
    if (std::find(suites.begin(), suites.end(), d.suite) == suites.end()) continue;
    EvidenceSource source{EvidenceKind::TestSuite, d.suite, {}};
    for (const Op op : d.ops()) source.cases.push_back({op, d.provider, d.device, d.obligation});
    manifest.sources.push_back(std::move(source));
  }
  manifest.normalise();
  return manifest;
}

std::vector<std::string> declaring_suites() {
  std::set<std::string> names;
  for (const Declaration& d : registry().declarations) names.insert(d.suite);
  return {names.begin(), names.end()};
}

std::vector<std::string> coverage_mismatches(const std::vector<std::string>& suites) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [suite, declared] : declared_keys()) {
    if (std::find(suites.begin(), suites.end(), suite) == suites.end()) continue;
    if (r.ran.count(suite) == 0) {
      out.push_back(str("suite `", suite, "` declares coverage but none of its test cases ran"));
      continue;
    }
    const std::set<Key>& ran = r.exercised[suite];
    for (const Key& key : declared) {
      if (ran.count(key) == 0) out.push_back(str("suite `", suite, "` declares ", key_words(key), " but never runs it"));
    }
    for (const Key& key : ran) {
      if (declared.count(key) == 0) {
        out.push_back(str("suite `", suite, "` runs ", key_words(key), " but does not declare it"));
      }
    }
  }
  return out;
}

const std::vector<std::string>& listed_suites() { return registry().listed_sorted; }

}  // namespace capsule::testing
