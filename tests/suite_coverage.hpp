// SPDX-License-Identifier: Apache-2.0
// What each value or VJP suite of capsule_tests declares it covers, for the build's evidence
// manifest (capsule/evidence_manifest.hpp) that `capsule lint` checks catalogs against.
//
// A suite declares its cases next to its tests with a namespace-scope `SuiteCoverage`, whose op
// list comes from the same table the suite iterates wherever the suite has one. The declaration
// is then held to what actually runs: testing::reference_handler records every op a test case
// fetches under the case's suite, and `capsule_tests --verify-coverage` runs every declaring
// suite and fails when a suite declares an op it never ran or runs an op it does not declare
// (CTest: coverage.declarations_match_runs). `capsule_tests --evidence-manifest` prints the
// manifest (tests/write_suite_manifest.cmake writes it after each link).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "capsule/evidence_manifest.hpp"

namespace capsule::testing {

/// Registers, for the lifetime of the test binary, that `suite` exercises `obligation` of every op
/// `ops()` returns on `provider`/`device`. Several declarations of one suite add up.
class SuiteCoverage {
 public:
  SuiteCoverage(std::string suite, Obligation obligation, Provider provider, Device device,
                std::function<std::vector<Op>()> ops);
};

/// Records that the running test case exercised `op` on `provider`/`device`.
void record_exercised(Op op, Provider provider, Device device);

/// Every doctest suite in `suites`, with the cases declared for those of them that declare any.
EvidenceManifest declared_manifest(const std::vector<std::string>& suites);

/// The suites that declare coverage, sorted.
std::vector<std::string> declaring_suites();

/// Compares each declaring suite of `suites` with what its test cases recorded in this run (its
/// declared (op, provider, device) against the ones exercised); returns one line per mismatch
/// (empty when every declaration held).
std::vector<std::string> coverage_mismatches(const std::vector<std::string>& suites);

/// Suite names doctest listed in this run (filled by the coverage reporter on --list-test-suites).
const std::vector<std::string>& listed_suites();

}  // namespace capsule::testing
