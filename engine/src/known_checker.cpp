// SPDX-License-Identifier: Apache-2.0
// Checker evidence judged against the known checkers (see capsule/known_checker.hpp).
#include "capsule/known_checker.hpp"

#include <algorithm>
#include <map>

#include "capsule/text.hpp"

namespace capsule {

namespace {

bool has_checker_evidence(const Capsule& capsule) {
  return std::any_of(capsule.contracts.begin(), capsule.contracts.end(),
                     [](const ContractDescriptor& d) { return d.evidence.kind == EvidenceKind::Checker; });
}

bool has_checker_evidence(const CapsuleModule& module) {
  return std::any_of(module.capsules.begin(), module.capsules.end(),
                     [](const Capsule& c) { return has_checker_evidence(c); });
}

}  // namespace

CheckerJudgement judge_checker_evidence(const Capsule& capsule, Obligation obligation,
                                        std::span<const KnownChecker> known) {
  CheckerJudgement judgement;
  const Evidence& evidence = capsule.contract(obligation).evidence;
  if (evidence.kind != EvidenceKind::Checker) return judgement;
  const auto found = std::find_if(known.begin(), known.end(),
                                  [&](const KnownChecker& k) { return k.name == evidence.name; });
  if (found == known.end()) {
    judgement.verdict = CheckerJudgement::Verdict::Unknown;
    return judgement;
  }
  judgement.checker = &*found;
  std::vector<std::string>& lines = judgement.disagreements;
  if (found->op != capsule.op) {
    lines.push_back(str("op: the capsule is for `", to_string(capsule.op), "`, the checker checks `",
                        to_string(found->op), "`"));
  }
  if (found->device != capsule.device) {
    lines.push_back(str("device: the capsule runs on `", to_string(capsule.device), "`, the checker checks `",
                        to_string(found->device), "`"));
  }
  if (found->obligation != obligation) {
    lines.push_back(str("obligation: the evidence backs the `", to_string(obligation),
                        "` obligation, the checker checks the `", to_string(found->obligation), "` obligation"));
  }
  const bool other_call = !lines.empty();
  // The catalog's claim: once bound, `coverage` is the registered one and the claim is kept apart.
  const CheckerCoverage claimed = evidence.claimed_coverage.value_or(evidence.coverage);
  judgement.coverage_differs = found->coverage != claimed;
  if (judgement.coverage_differs) {
    lines.push_back(str("coverage: the catalog claims `", to_string(claimed), "`, the registered checker's is `",
                        to_string(found->coverage), "`"));
  }
  if (lines.empty()) {
    judgement.verdict = CheckerJudgement::Verdict::Bound;
  } else {
    judgement.verdict = CheckerJudgement::Verdict::Mismatch;
    judgement.coverage_only = !other_call;
  }
  return judgement;
}

std::vector<std::string> checkers_for(const Capsule& capsule, Obligation obligation,
                                      std::span<const KnownChecker> known) {
  std::vector<std::string> names;
  for (const KnownChecker& k : known) {
    if (k.op == capsule.op && k.device == capsule.device && k.obligation == obligation) names.push_back(k.name);
  }
  return names;
}

void bind_known_checkers(Capsule& capsule, std::span<const KnownChecker> known) {
  for (const Obligation obligation : all_values<Obligation>()) {
    Evidence& evidence = capsule.contract(obligation).evidence;
    if (evidence.kind != EvidenceKind::Checker) continue;
    const CheckerJudgement judgement = judge_checker_evidence(capsule, obligation, known);
    switch (judgement.verdict) {
      case CheckerJudgement::Verdict::NotChecker:
      case CheckerJudgement::Verdict::Bound: break;
      case CheckerJudgement::Verdict::Unknown:
        evidence.unbound = "no checker of that name is registered in this build";
        break;
      case CheckerJudgement::Verdict::Mismatch:
        if (judgement.coverage_only) {
          // The registered checker decides what a check discharges, never the catalog's label.
          if (!evidence.claimed_coverage) evidence.claimed_coverage = evidence.coverage;
          evidence.coverage = judgement.checker->coverage;
        } else {
          std::vector<std::string> other_call = judgement.disagreements;
          if (judgement.coverage_differs) other_call.pop_back();  // the coverage line comes last
          evidence.unbound = str("the registered checker does not check this call (", join(other_call, "; "), ")");
        }
        break;
    }
  }
}

void bind_known_checkers(Workspace& workspace, std::span<const KnownChecker> known) {
  // Keyed by the original module, which the entry keeps alive so that no copy made here can
  // reuse its address. A module shared by the workspace and a profile gets one copy.
  std::map<const CapsuleModule*, std::pair<ModulePtr, ModulePtr>> rebound;
  const auto bind = [&](ModulePtr& module) {
    if (!module || !has_checker_evidence(*module)) return false;
    auto found = rebound.find(module.get());
    if (found == rebound.end()) {
      auto copy = std::make_shared<CapsuleModule>(*module);
      for (Capsule& capsule : copy->capsules) bind_known_checkers(capsule, known);
      found = rebound.emplace(module.get(), std::make_pair(module, ModulePtr(std::move(copy)))).first;
    }
    module = found->second.second;
    return true;
  };
  for (ModulePtr& module : workspace.modules) bind(module);
  for (ProfilePtr& profile : workspace.profiles) {
    if (!profile) continue;
    auto copy = std::make_shared<Profile>(*profile);
    bool changed = false;
    for (ModulePtr& module : copy->with_modules) changed |= bind(module);
    if (changed) profile = std::move(copy);
  }
}

}  // namespace capsule
