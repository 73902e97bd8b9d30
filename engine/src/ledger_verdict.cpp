// SPDX-License-Identifier: Apache-2.0
// Judging a capsule's evidence against the evidence ledger (see capsule/evidence_ledger.hpp):
// an entry counts for this build only when it was recorded with the same compiled handler
// library of the capsule's provider, on the capsule's device; the latest such run decides.
#include <algorithm>

#include "capsule/evidence_ledger.hpp"
#include "capsule/text.hpp"

namespace capsule {
namespace {

bool ledger_backed(EvidenceKind kind) { return kind == EvidenceKind::TestSuite || kind == EvidenceKind::FuzzOracle; }

std::string short_commit(const std::string& commit) {
  if (commit.size() >= 40) return commit.substr(0, 12) + commit.substr(40);  // keeps "-dirty"
  return commit.empty() ? "unknown" : commit;
}

std::string case_words(const Capsule& capsule, Obligation obligation) {
  return str(to_string(obligation), " of ", to_string(capsule.op), " on ", to_string(capsule.provider), "/",
             to_string(capsule.device));
}

}  // namespace

std::string_view to_string(LedgerStatus status) {
  switch (status) {
    case LedgerStatus::NotLedgerEvidence: return "not ledger evidence";
    case LedgerStatus::Passed: return "passed";
    case LedgerStatus::Failed: return "failed";
    case LedgerStatus::NotRunHere: return "not run here";
  }
  return "?";
}

std::string describe_run(const LedgerRun& run, Device device) {
  const EnvironmentFingerprint& fp = run.fingerprint;
  std::string where(to_string(device));
  const std::string cpu = fp.get(fingerprint_key::kCpuModel);
  const std::string model = device == Device::Cpu ? cpu : fp.get(str("device.", to_string(device)));
  if (!model.empty()) where += str(" (", clipped(model, 80), ")");
  const std::string driver = fp.get(str("device.", to_string(device), ".driver"));
  if (!driver.empty()) where += str(", driver ", clipped(driver, 40));
  return str(where, ", commit ", clipped(short_commit(fp.get(fingerprint_key::kCommit)), 60), ", ", run.finished);
}

LedgerVerdict judge_evidence(const EvidenceLedger& ledger, const EnvironmentFingerprint& here, const Capsule& capsule,
                             Obligation obligation) {
  const Evidence& evidence = capsule.contract(obligation).evidence;
  LedgerVerdict verdict;
  if (evidence.kind == EvidenceKind::SharedDefinition) {
    verdict.reason = "a shared definition holds by construction; nothing runs (the manifest checks its coverage)";
    return verdict;
  }
  if (!ledger_backed(evidence.kind)) {
    verdict.reason = str(to_string(evidence.kind), " evidence is not recorded in the ledger");
    return verdict;
  }
  const CoverageCase wanted{capsule.op, capsule.provider, capsule.device, obligation};
  const std::string digest_key = fingerprint_key::provider_library_digest(to_string(capsule.provider));
  const std::string here_digest = here.get(digest_key);
  const std::string version_key = fingerprint_key::provider_version(to_string(capsule.provider));

  const LedgerEntry* decided = nullptr;  // latest entry of this build
  const LedgerEntry* other = nullptr;    // latest entry of another build
  const auto later = [&](const LedgerEntry* current, const LedgerEntry& candidate) {
    if (current == nullptr) return true;
    const LedgerRun& a = ledger.runs[current->run];
    const LedgerRun& b = ledger.runs[candidate.run];
    return std::tie(b.finished, b.id) > std::tie(a.finished, a.id);
  };
  for (const LedgerEntry& entry : ledger.entries) {
    if (entry.kind != evidence.kind || entry.source != evidence.name || !(entry.covers == wanted)) continue;
    // The provider's library digest decides; its version too, for a provider whose library is
    // a shared dependency that can change under an unchanged handler library (LibTorch).
    const EnvironmentFingerprint& there = ledger.runs[entry.run].fingerprint;
    const bool this_build = !here_digest.empty() && there.get(digest_key) == here_digest &&
                            there.get(version_key) == here.get(version_key);
    const LedgerEntry*& slot = this_build ? decided : other;
    if (later(slot, entry)) slot = &entry;
  }

  const std::string source = str(to_string(evidence.kind), " ", evidence.name);
  if (decided != nullptr) {
    verdict.entry = decided;
    verdict.run = &ledger.runs[decided->run];
    const std::string where = describe_run(*verdict.run, capsule.device);
    if (decided->passed) {
      verdict.status = LedgerStatus::Passed;
      verdict.reason = str("passed: ", decided->checks, " checks of ", source, " on ", where);
    } else {
      verdict.status = LedgerStatus::Failed;
      std::string first;
      if (!decided->failures.empty()) {
        const LedgerFailure& f = decided->failures.front();
        first = str("; first failure in test case \"", clipped(f.test_case, 100), "\" at ", clipped(f.file, 100), ":",
                    f.line, ": ", clipped(f.check, 100));
      } else if (decided->checks == 0) {
        first = "; no check ran for this case";
      }
      verdict.reason = str("failed: ", decided->failed_checks, " of ", decided->checks, " checks of ", source, " on ",
                           where, first);
    }
    return verdict;
  }

  verdict.status = LedgerStatus::NotRunHere;
  if (here_digest.empty()) {
    verdict.reason = str("not run here: this build has no compiled ", to_string(capsule.provider),
                         " handler library, so ", source, " never ran ", case_words(capsule, obligation),
                         " on this build");
  } else {
    verdict.reason = str("not run here: the ledger has no run of ", source, " for ", case_words(capsule, obligation),
                         " with this build's ", to_string(capsule.provider), " handler library");
  }
  if (other != nullptr) {
    verdict.entry = other;
    verdict.run = &ledger.runs[other->run];
    verdict.reason += str(" (it ", other->passed ? "passed" : "failed", " on another build: ",
                          describe_run(*verdict.run, capsule.device), ")");
  }
  return verdict;
}

std::vector<LedgerRejection> ledger_verdicts(const EvidenceLedger& ledger, const EnvironmentFingerprint& here,
                                             std::span<const PlannedKernel> kernels) {
  std::vector<LedgerRejection> out;
  std::vector<const Capsule*> seen;
  for (const PlannedKernel& kernel : kernels) {
    if (kernel.capsule == nullptr) continue;
    if (std::find(seen.begin(), seen.end(), kernel.capsule) != seen.end()) continue;
    seen.push_back(kernel.capsule);
    for (const Obligation obligation : all_values<Obligation>()) {
      LedgerVerdict verdict = judge_evidence(ledger, here, *kernel.capsule, obligation);
      if (verdict.status != LedgerStatus::NotLedgerEvidence) {
        out.push_back(LedgerRejection{kernel.op, kernel.capsule, obligation, std::move(verdict)});
      }
    }
  }
  return out;
}

std::vector<LedgerRejection> ledger_rejections(const EvidenceLedger& ledger, const EnvironmentFingerprint& here,
                                               std::span<const PlannedKernel> kernels) {
  std::vector<LedgerRejection> out = ledger_verdicts(ledger, here, kernels);
  std::erase_if(out, [](const LedgerRejection& r) { return r.verdict.status == LedgerStatus::Passed; });
  return out;
}

}  // namespace capsule
