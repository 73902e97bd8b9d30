// SPDX-License-Identifier: Apache-2.0
// `capsule lint --ledger`: evidence judged by result, not by name (see check_ledger in
// capsule/lint.hpp and docs/evidence-ledger.md).
#include <algorithm>
#include <map>
#include <tuple>

#include "capsule/lint.hpp"
#include "capsule/text.hpp"
#include "lint_internal.hpp"

namespace capsule {
namespace {

/// The handler for the capsule's (op, provider, device), or null.
const LintHandler* handler_for(const std::vector<LintHandler>& handlers, const Capsule& capsule) {
  const auto it = std::find_if(handlers.begin(), handlers.end(), [&](const LintHandler& h) {
    return h.op == capsule.op && h.provider == capsule.provider && h.device == capsule.device;
  });
  return it == handlers.end() ? nullptr : &*it;
}

std::vector<std::string> first_of(const std::vector<std::string>& items, std::size_t count) {
  return {items.begin(), items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), count))};
}

}  // namespace

Diagnostics check_ledger(const Workspace& workspace, const std::vector<LintHandler>& handlers,
                         const EvidenceLedger& ledger, const EnvironmentFingerprint& here) {
  Diagnostics out;
  // Evidence written once in [defaults] is judged per capsule but reported once per site and
  // outcome, with the capsules and their reasons in notes (as check_evidence does).
  struct Finding {
    std::string evidence;
    LedgerStatus status;
    std::vector<std::string> capsules;
    std::vector<std::string> reasons;
  };
  std::map<std::tuple<std::string, std::uint32_t, std::uint32_t, LedgerStatus, std::string>, std::size_t> index;
  std::vector<std::pair<SourceLoc, Finding>> findings;
  for (const CapsuleModule* module : detail::loaded_modules(workspace)) {
    std::vector<std::string> never;      // capsules not runnable here whose evidence never passed here
    std::vector<std::string> elsewhere;  // ... of which a merged run of another build says something
    std::string unusable;                // why a handled capsule's device cannot run here (the first)
    bool unhandled = false;
    for (const Capsule& capsule : module->capsules) {
      const LintHandler* handler = handler_for(handlers, capsule);
      const bool runnable = handler != nullptr && handler->device_unusable.empty();
      for (const Obligation obligation : all_values<Obligation>()) {
        const LedgerVerdict verdict = judge_evidence(ledger, here, capsule, obligation);
        if (verdict.status == LedgerStatus::Passed || verdict.status == LedgerStatus::NotLedgerEvidence) continue;
        const Evidence& evidence = capsule.contract(obligation).evidence;
        const std::string subject = str(capsule.name, " ", to_string(obligation));
        // A failure is a failure wherever it ran: a merged GPU ledger of this build that failed
        // is an error even on a machine that cannot use the device (its handler exists here).
        const bool failed_here = handler != nullptr && verdict.status == LedgerStatus::Failed;
        if (!runnable && !failed_here) {
          never.push_back(subject);
          if (handler == nullptr) unhandled = true;
          else if (unusable.empty()) unusable = str("`", to_string(capsule.device), "`: ", handler->device_unusable);
          if (verdict.run != nullptr) elsewhere.push_back(str(subject, ": ", verdict.reason));
          continue;
        }
        const SourceLoc where = detail::site(capsule, capsule.sites[static_cast<std::size_t>(obligation)].evidence);
        const std::string words = str(to_string(evidence.kind), " `", evidence.name, "`");
        const auto key = std::make_tuple(where.file, where.line, where.column, verdict.status, words);
        auto [at, added] = index.emplace(key, findings.size());
        if (added) findings.push_back({where, Finding{words, verdict.status, {}, {}}});
        Finding& finding = findings[at->second].second;
        finding.capsules.push_back(subject);
        if (finding.reasons.size() < 4) finding.reasons.push_back(str(subject, ": ", verdict.reason));
      }
    }
    if (never.empty()) continue;
    std::vector<std::string> notes{str("not run here: ", never.size(), " obligation", never.size() == 1 ? "" : "s",
                                       " of capsules ",
                                       unhandled && !unusable.empty() ? "this build has no handler for, or whose device is unusable here"
                                       : unhandled                    ? "this build has no handler for"
                                                                      : "whose device is unusable here",
                                       ": ", join(first_of(never, 8), ", "),
                                       never.size() > 8 ? str(" and ", never.size() - 8, " more") : std::string())};
    if (!unusable.empty()) notes.push_back(str("no usable device ", unusable));
    for (std::size_t i = 0; i < elsewhere.size() && i < 4; ++i) notes.push_back(elsewhere[i]);
    out.push_back(Diagnostic{Severity::Warning, DiagCode::EvidenceNotRunHere, module->where,
                             str("evidence of module `", module->name, "` never passed on this build: its capsules ",
                                 unhandled && !unusable.empty()
                                     ? "have no compiled handler here, or handlers whose device this machine cannot use"
                                 : unhandled ? "have no compiled handler here"
                                             : "have handlers whose device this machine cannot use",
                                 ", so their suites cannot have run"),
                             std::move(notes),
                             "run the suites on a machine and build that has the provider, and merge its ledger "
                             "(`--ledger` is repeatable)"});
  }
  for (auto& [where, finding] : findings) {
    const std::size_t n = finding.capsules.size();
    std::vector<std::string> notes = std::move(finding.reasons);
    if (n > notes.size()) notes.push_back(str("and ", n - notes.size(), " more: ", join(first_of(finding.capsules, 12), ", "),
                                              n > 12 ? ", ..." : ""));
    notes.push_back(str("ledger: ", join(ledger.paths, ", ")));
    out.push_back(Diagnostic{
        Severity::Error, DiagCode::EvidenceNotPassed, where,
        str(finding.evidence, " evidence of ", n, " obligation", n == 1 ? "" : "s", " (",
            join(first_of(finding.capsules, 3), ", "), n > 3 ? ", ..." : "", ") ",
            finding.status == LedgerStatus::Failed ? "failed on this build" : "has no run on this build in the ledger"),
        std::move(notes),
        finding.status == LedgerStatus::Failed
            ? "fix the failing check, rebuild, and run the tests again (they rewrite the ledger)"
            : "run this build's tests (`ctest -L ledger` writes build/ledger.json), or pass the ledger they wrote"});
  }
  return out;
}

}  // namespace capsule
