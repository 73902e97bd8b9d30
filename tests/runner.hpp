// SPDX-License-Identifier: Apache-2.0
// The runner every test binary's main() calls: doctest, plus the modes for the evidence manifest
// and ledger (suite_coverage.hpp, ledger_recorder.hpp):
//   --evidence-manifest  prints the manifest of every suite and the cases it declares
//   --merge-manifest FILE  (with --evidence-manifest) adds the suites of another test binary's
//                        manifest, so one file lists the suites of every test binary
//   --verify-coverage    runs every declaring suite and fails when a declaration does not match
//                        what the suite's test cases ran
//   --ledger FILE        (with --verify-coverage, or alone) also records every check of those
//                        suites and writes the evidence ledger of this run to FILE, failures
//                        included; exits 1 when a check failed
//   --evidence-suites PREFIX  (with --verify-coverage or --ledger) only the declaring suites whose
//                        name starts with PREFIX: they run, their declarations are checked and the
//                        ledger holds them (tools/gpu-check.sh phase 3: `libtorch.cuda.`)
//   --tamper-op OP       fault injection for the ledger's own test, where the binary supports it
//
// It depends on the engine and doctest only (no CLI, no Boost), so the GPU test binary
// (tests/gpu/) shares it without linking what a bare GPU machine may not have.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "capsule/fingerprint.hpp"

namespace capsule::testing {

/// What differs between the test binaries.
struct TestBinary {
  /// The name messages start with.
  std::string name;
  /// The fingerprint a ledger run records: the build's, plus every linked provider's entries.
  std::function<EnvironmentFingerprint()> fingerprint;
  /// `--tamper-op OP`: arms the fault injection, or says why not. Null: the option is refused.
  std::function<std::optional<std::string>(std::string_view)> tamper;
  /// Asked before a --verify-coverage or --ledger run: a reason to refuse it (the GPU binary on a
  /// machine without a device: a ledger of suites that could not run is no evidence), or nothing.
  std::function<std::optional<std::string>()> refuse_evidence_run;
};

/// Parses the modes above, runs doctest with the rest of the arguments, and returns the exit status.
int run_test_binary(int argc, char** argv, const TestBinary& binary);

}  // namespace capsule::testing
