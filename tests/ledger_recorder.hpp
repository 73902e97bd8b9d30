// SPDX-License-Identifier: Apache-2.0
// The test binary's side of the evidence ledger (capsule/evidence_ledger.hpp):
// `capsule_tests --ledger FILE` runs every suite that declares coverage (suite_coverage.hpp)
// with every assertion reported, attributes each check to the (op, provider, device) case it
// tested, and writes one ledger run: per declared case, passed or failed, the number of checks,
// the first failing checks, and this build's fingerprint.
//
// Attribution: a check belongs to the handler the test case fetched last before it
// (testing::reference_handler and every other handler accessor call note_handler_fetched). A
// check made before the test case fetched any handler, an exception, or a failure doctest
// reports without an assertion (a crash, a timeout) belongs to every case the test case
// exercised. So a failure can blame more cases than it should, never fewer.
#pragma once

#include <string>

#include "capsule/evidence_ledger.hpp"

namespace capsule::testing {

/// Makes the recorder print each failed check to stderr (the --ledger runner replaces doctest's
/// console reporter, which would print every passing check under --success).
void print_failed_checks();

/// Called whenever a test fetches a handler: later checks of the test case are about it.
void note_handler_fetched(Op op, Provider provider, Device device);

/// The ledger of this process's run so far, for every declared case of `manifest`'s suites
/// (declared cases that no check reached are recorded as failed with 0 checks).
EvidenceLedger recorded_ledger(const EvidenceManifest& manifest, const EnvironmentFingerprint& fingerprint,
                               const std::string& finished);

/// The number of failed checks recorded so far (for the runner's summary).
std::size_t recorded_failures();

}  // namespace capsule::testing
