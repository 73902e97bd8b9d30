// SPDX-License-Identifier: Apache-2.0
// The evidence ledger: what ran and passed, on which build and device. Running the test suites
// records, for each evidence source and each (op, provider, device, obligation) case it covers,
// pass or fail and the number of checks, together with the fingerprint of the run (commit,
// compiled handler library digests, compiler and flags, provider libraries and their
// configuration, device). `capsule lint --ledger` and `capsule check --ledger` then require
// that evidence a capsule names has a *passing* entry for this build on the capsule's device,
// so "checked" stops meaning "someone wrote a plausible name". Ledgers from other machines (a
// GPU run, say) merge: every entry keeps the run it came from. Format and rules:
// docs/evidence-ledger.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/diag.hpp"
#include "capsule/evidence_manifest.hpp"
#include "capsule/fingerprint.hpp"
#include "capsule/planner.hpp"
#include "capsule/result.hpp"

namespace capsule {

/// The ledger format this build reads and writes.
inline constexpr std::int64_t kEvidenceLedgerSchema = 1;
/// The `format` member every ledger carries, so a stray JSON file is not read as one.
inline constexpr std::string_view kEvidenceLedgerFormat = "capsule-evidence-ledger";
/// At most this many failing checks are kept per entry (the first ones, in run order).
inline constexpr std::size_t kMaxLedgerFailures = 8;

/// One test run: where and on what the entries that name it were recorded.
struct LedgerRun {
  std::string id;        ///< unique within a ledger: hex SHA-256 of the fingerprint digest and `finished`
  std::string finished;  ///< UTC, `YYYY-MM-DDTHH:MM:SSZ`
  EnvironmentFingerprint fingerprint;
};

/// A check that failed, as the test framework reported it.
struct LedgerFailure {
  std::string test_case;  ///< the doctest case name
  std::string file;       ///< source file, relative to the source tree where possible
  std::int64_t line = 0;
  std::string check;      ///< the failed expression, as written in the test
};

/// The result of one evidence source on one case in one run.
struct LedgerEntry {
  std::size_t run = 0;  ///< index into EvidenceLedger::runs
  EvidenceKind kind = EvidenceKind::TestSuite;
  std::string source;   ///< the suite, oracle or definition name
  CoverageCase covers;
  bool passed = false;  ///< every check attributed to the case passed, and there was at least one
  std::int64_t checks = 0;
  std::int64_t failed_checks = 0;
  std::vector<LedgerFailure> failures;  ///< the first kMaxLedgerFailures failing checks
};

struct EvidenceLedger {
  std::vector<std::string> paths;  ///< the files it was read from (empty when built in code)
  std::vector<LedgerRun> runs;
  std::vector<LedgerEntry> entries;

  /// Adds `other`'s runs and entries. A run already present (same id) is not duplicated; an entry
  /// equal in run, source and case to one already present replaces nothing and must agree with
  /// it, else the merge fails with a message naming the entry.
  Result<bool, std::string> merge(const EvidenceLedger& other);
};

/// Reads ledgers (every problem reported with file:line:col) and merges them in order.
Result<EvidenceLedger, Diagnostics> read_evidence_ledgers(std::span<const std::filesystem::path> files);
/// One ledger from text already read; `path` names it in diagnostics.
Result<EvidenceLedger, Diagnostics> parse_evidence_ledger(std::string_view text, const std::string& path);
/// The ledger as JSON: deterministic (runs in id order, entries sorted), one entry per line.
std::string write_evidence_ledger(const EvidenceLedger& ledger);
/// The id of a run with this fingerprint that finished at `finished`.
std::string ledger_run_id(const EnvironmentFingerprint& fingerprint, std::string_view finished);

// ---- Judging evidence against the ledger -----------------------------------------------------

/// What the ledger says about one obligation's evidence, for this build on the capsule's device.
enum class LedgerStatus : std::uint8_t {
  NotLedgerEvidence,  ///< runtime guards, trusted boundaries, not-applicable and shared definitions need no run
  Passed,             ///< this build's latest run of the case passed
  Failed,             ///< this build's latest run of the case failed
  NotRunHere,         ///< no run of the case on this build: never recorded, or only on other builds
};
std::string_view to_string(LedgerStatus status);

struct LedgerVerdict {
  LedgerStatus status = LedgerStatus::NotLedgerEvidence;
  const LedgerEntry* entry = nullptr;  ///< the deciding entry; for NotRunHere the latest entry of another build, if any
  const LedgerRun* run = nullptr;      ///< `entry`'s run
  std::string reason;                  ///< one line, e.g. "passed: 412 checks of reference.values on cpu (...)"
};

/// Judges `capsule`'s evidence for `obligation`. `here` is the running build's fingerprint: an
/// entry counts only when its run's `provider.<provider>.sha256` equals `here`'s (non-empty)
/// value for the capsule's provider, and its case is the capsule's (op, provider, device,
/// obligation). Of several such entries the latest run decides.
LedgerVerdict judge_evidence(const EvidenceLedger& ledger, const EnvironmentFingerprint& here, const Capsule& capsule,
                             Obligation obligation);

/// One obligation of a planned kernel whose ledger-backed evidence has no passing entry.
struct LedgerRejection {
  Op op = Op::Custom;
  const Capsule* capsule = nullptr;
  Obligation obligation = Obligation::Value;
  LedgerVerdict verdict;
};

/// The verdict of every ledger-backed obligation of `kernels` (distinct capsules, in plan order,
/// shape→vjp), passed or not; NotLedgerEvidence obligations are left out.
std::vector<LedgerRejection> ledger_verdicts(const EvidenceLedger& ledger, const EnvironmentFingerprint& here,
                                             std::span<const PlannedKernel> kernels);

/// Every ledger-backed obligation of `kernels` (distinct capsules, in plan order, shape→vjp) that
/// is not Passed.
std::vector<LedgerRejection> ledger_rejections(const EvidenceLedger& ledger, const EnvironmentFingerprint& here,
                                               std::span<const PlannedKernel> kernels);

/// "where it ran": "cpu (Intel Xeon ...), commit abc1234, 2026-11-30T10:00:00Z" for a run.
std::string describe_run(const LedgerRun& run, Device device);

}  // namespace capsule
