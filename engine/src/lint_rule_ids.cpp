// SPDX-License-Identifier: Apache-2.0
// Resolving the rule ids of deny and allow lists (capsule/lint_rule_ids.hpp).
#include "capsule/lint_rule_ids.hpp"

#include <algorithm>

#include "capsule/text.hpp"

namespace capsule {
namespace {

constexpr std::string_view kWarnings = "warnings";

bool listed(const std::vector<std::string_view>& seen, std::string_view id) {
  return std::find(seen.begin(), seen.end(), id) != seen.end();
}

}  // namespace

std::string nearest_rule_id(std::string_view id, bool with_warnings) {
  std::vector<std::string_view> ids;
  if (with_warnings) ids.push_back(kWarnings);
  for (const LintRule& rule : kLintRules) ids.push_back(to_string(rule.code));
  return nearest_name(id, ids);
}

ResolvedRuleIds resolve_rule_ids(const std::vector<std::string>& deny, const std::vector<std::string>& allow) {
  ResolvedRuleIds resolved;
  const auto problem = [&](RuleIdProblem::Kind kind, RuleList list, std::size_t index, const std::string& id,
                           std::string suggestion = {}) {
    resolved.problems.push_back(RuleIdProblem{kind, list, index, id, std::move(suggestion)});
  };
  // Ids already taken from each list, so a repeat is told apart from a conflict.
  std::vector<std::string_view> denied;
  for (std::size_t index = 0; index < deny.size(); ++index) {
    const std::string& id = deny[index];
    const LintRule* rule = id == kWarnings ? nullptr : find_lint_rule(std::string_view(id));
    if (id != kWarnings && rule == nullptr) {
      problem(RuleIdProblem::Kind::Unknown, RuleList::Deny, index, id, nearest_rule_id(id, true));
    } else if (listed(denied, id)) {
      problem(RuleIdProblem::Kind::Repeated, RuleList::Deny, index, id);
    } else {
      denied.push_back(id);
      if (rule == nullptr) resolved.overrides.deny_warnings = true;
      else resolved.overrides.deny.push_back(rule->code);
    }
  }
  std::vector<std::string_view> allowed;
  for (std::size_t index = 0; index < allow.size(); ++index) {
    const std::string& id = allow[index];
    const LintRule* rule = find_lint_rule(std::string_view(id));
    if (rule == nullptr) {
      problem(RuleIdProblem::Kind::Unknown, RuleList::Allow, index, id, nearest_rule_id(id, false));
    } else if (listed(allowed, id)) {
      problem(RuleIdProblem::Kind::Repeated, RuleList::Allow, index, id);
    } else {
      allowed.push_back(id);
      if (rule->blocks_loading) {
        problem(RuleIdProblem::Kind::CannotBeAllowed, RuleList::Allow, index, id);
      } else if (listed(denied, id)) {
        problem(RuleIdProblem::Kind::DeniedAndAllowed, RuleList::Allow, index, id);
      } else {
        resolved.overrides.allow.push_back(rule->code);
      }
    }
  }
  return resolved;
}

std::string describe(const RuleIdProblem& problem) {
  switch (problem.kind) {
    case RuleIdProblem::Kind::Unknown: return str("unknown lint rule `", problem.id, "`");
    case RuleIdProblem::Kind::CannotBeAllowed:
      return str("rule `", problem.id, "` cannot be allowed: ", kBlocksLoadingReason);
    case RuleIdProblem::Kind::DeniedAndAllowed: return str("rule `", problem.id, "` is both denied and allowed");
    case RuleIdProblem::Kind::Repeated:
      return str("rule `", problem.id, "` is named twice in `", problem.list == RuleList::Deny ? "deny" : "allow",
                 "`; name it once");
  }
  return {};
}

}  // namespace capsule
