// SPDX-License-Identifier: Apache-2.0
// The impact section of the trust diff (docs/trust-diff.md): every op planned under every HEAD
// profile in both trees, and the ops whose selected capsule, trust, evidence or gate verdict moved.
#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "capsule/gate.hpp"
#include "capsule/resolve.hpp"
#include "capsule/text.hpp"
#include "diff_internal.hpp"

namespace capsule {
namespace {

/// Modules by name; the first of a name wins, as in profile resolution.
class ModuleIndex {
 public:
  explicit ModuleIndex(const Workspace& workspace) {
    for (const ModulePtr& m : workspace.modules) by_name_.emplace(m->name, m.get());
  }
  const CapsuleModule* find(std::string_view name) const {
    const auto found = by_name_.find(name);
    return found == by_name_.end() ? nullptr : found->second;
  }

 private:
  std::unordered_map<std::string_view, const CapsuleModule*> by_name_;
};

bool same_module(const CapsuleModule& a, const CapsuleModule& b) { return a.name == b.name && a.capsules == b.capsules; }

/// Everything of a profile that planning reads, besides the modules it names.
bool same_planning_inputs(const Profile& a, const Profile& b) {
  if (a.policy != b.policy || a.availability != b.availability || a.module_names != b.module_names) return false;
  if (a.with_modules.size() != b.with_modules.size()) return false;
  for (std::size_t i = 0; i < a.with_modules.size(); ++i) {
    if (!same_module(*a.with_modules[i], *b.with_modules[i])) return false;
  }
  return true;
}

using diff_internal::evidence_words;
using diff_internal::relative;

Selection select(const Result<ResolvedProfile, std::string>& resolved, Op op) {
  Selection selection;
  if (!resolved) {
    selection.unplannable = resolved.error();
    return selection;
  }
  const Planner& planner = resolved->planner;
  const Capsule* c = planner.chosen(op);
  if (c == nullptr) {
    auto planned = planner.plan_op(op);
    selection.unplannable = planned ? std::string("no capsule chosen") : planned.error().message;
    return selection;
  }
  selection.capsule = c->name;
  for (const ModulePtr& module : planner.registry().modules()) {
    for (const Capsule& candidate : module->capsules) {
      if (&candidate == c) selection.module = module->name;
    }
  }
  selection.trust = c->trust;
  for (const Obligation o : all_values<Obligation>()) {
    selection.claims[static_cast<std::size_t>(o)] = c->contract(o).claim.kind;
    selection.evidence[static_cast<std::size_t>(o)] = c->contract(o).evidence;
  }
  const PlannedKernel kernel{op, c};
  for (const AcceptanceFailure& failure : acceptance_failures(kernel, planner.policy())) {
    selection.gate_failures.push_back(failure.message());
  }
  selection.accepted = selection.gate_failures.empty();
  return selection;
}

bool same_evidence(const Evidence& a, const Evidence& b) {
  return a.kind == b.kind && a.name == b.name && a.reason == b.reason && a.coverage == b.coverage;
}

bool same_selection(const Selection& a, const Selection& b) {
  if (a.planned() != b.planned()) return false;
  if (!a.planned()) return true;  // unplannable on both sides: nothing runs either way
  if (a.capsule != b.capsule || a.trust != b.trust || a.accepted != b.accepted) return false;
  for (std::size_t i = 0; i < a.evidence.size(); ++i) {
    if (!same_evidence(a.evidence[i], b.evidence[i])) return false;
  }
  return true;
}

bool relies_on_boundary(const Selection& s) {
  if (s.trust == Trust::TrustedExternal) return true;
  return std::any_of(s.evidence.begin(), s.evidence.end(),
                     [](const Evidence& e) { return e.kind == EvidenceKind::TrustedBoundary; });
}

/// Weakened when the op now rests on a trusted boundary it did not rest on (by label or by
/// evidence), or on weaker evidence for the same kind of claim, or newly runs (gate accepted) on a
/// trusted boundary; becoming unplannable fails closed and is neutral.
///
/// Note [Label is not evidence]: the trust label alone never strengthens an impact. A capsule
/// relabelled checked whose evidence is still a trusted boundary rests on that boundary exactly
/// as before, so it is not stronger; ranking it so would contradict the weakened relabel change
/// (issue 8, item 19). Whether an op rests on a boundary is judged by label *or* evidence, on both
/// sides alike.
Direction impact_direction(const Selection& was, const Selection& now) {
  if (!now.planned()) return Direction::Neutral;
  if (!was.planned()) return now.accepted && relies_on_boundary(now) ? Direction::Weakened : Direction::Neutral;
  // The gate newly lets the op run on a trusted boundary (for example after the assurance widened).
  if (!was.accepted && now.accepted && relies_on_boundary(now)) return Direction::Weakened;
  bool weaker = !relies_on_boundary(was) && relies_on_boundary(now);
  bool stronger = relies_on_boundary(was) && !relies_on_boundary(now);
  for (std::size_t i = 0; i < was.claims.size(); ++i) {
    if (was.claims[i] != now.claims[i]) continue;  // different claims do not rank against each other
    const int rank_was = evidence_rank(was.claims[i], was.evidence[i]);
    const int rank_now = evidence_rank(now.claims[i], now.evidence[i]);
    weaker = weaker || rank_now < rank_was;
    stronger = stronger || rank_now > rank_was;
    // Note [Renamed evidence] in diff.cpp: the same capsule now names other evidence of the same
    // kind; like the change that causes it, the row needs review.
    if (was.capsule == now.capsule && rank_was == rank_now && !same_evidence(was.evidence[i], now.evidence[i])) {
      weaker = true;
    }
  }
  if (weaker) return Direction::Weakened;
  return stronger ? Direction::Strengthened : Direction::Neutral;
}

std::string impact_message(const Selection& was, const Selection& now, const std::string& assurance) {
  if (!was.planned()) {
    return str("was unplannable; now selects ", now.capsule, " (", to_string(now.trust), ", gate ",
               now.accepted ? "accepts" : "rejects", " under ", assurance, ")");
  }
  if (!now.planned()) return str("selected ", was.capsule, "; now unplannable: ", now.unplannable);
  std::vector<std::string> parts;
  const bool same_capsule = was.capsule == now.capsule;
  parts.push_back(same_capsule ? str(now.capsule, " (same capsule)") : str(was.capsule, " -> ", now.capsule));
  if (was.trust != now.trust) parts.push_back(str("trust ", to_string(was.trust), " -> ", to_string(now.trust)));
  // Across two capsules every suite name differs; only a change of kind says something about
  // trust. For the same capsule a renamed suite is all there is to show.
  for (const Obligation o : all_values<Obligation>()) {
    const std::size_t i = static_cast<std::size_t>(o);
    const bool differs = same_capsule ? !same_evidence(was.evidence[i], now.evidence[i])
                                      : was.evidence[i].kind != now.evidence[i].kind;
    if (differs) {
      parts.push_back(str(to_string(o), " evidence ", evidence_words(was.evidence[i]), " -> ",
                          evidence_words(now.evidence[i])));
    }
  }
  if (was.accepted != now.accepted) {
    parts.push_back(str("gate under ", assurance, ": ", was.accepted ? "accepted" : "rejected", " -> ",
                        now.accepted ? "accepted" : "rejected"));
  }
  return join(parts, "; ");
}

/// The impact rows of one profile (without its name and place), planned in both trees.
std::vector<Impact> plan_rows(const Workspace& base, const ProfilePtr& b, const Workspace& head, const ProfilePtr& h) {
  const auto resolved_base = resolve_profile(base, b);
  const auto resolved_head = resolve_profile(head, h);
  const std::string assurance = h->policy.assurance.label();
  std::vector<Impact> rows;
  for (const Op op : all_values<Op>()) {
    Selection was = select(resolved_base, op);
    Selection now = select(resolved_head, op);
    if (same_selection(was, now)) continue;
    Impact row;
    row.op = op;
    row.direction = impact_direction(was, now);
    row.message = impact_message(was, now, assurance);
    row.before = std::move(was);
    row.after = std::move(now);
    rows.push_back(std::move(row));
  }
  return rows;
}

struct PlannedRows {
  ProfilePtr base;
  ProfilePtr head;
  std::vector<Impact> rows;
};

}  // namespace

namespace diff_internal {

void plan_impact(const Tree& base, const Tree& head, TrustDiff& out) {
  // Note [Impact cost]: planning resolves every module a profile lists, so planning every
  // profile in both trees costs profiles x capsules (2,000 profiles over a 20,000-capsule catalog
  // took 50 s for a tree against itself). A profile whose planning inputs are equal in both trees
  // (policy, availability, module names, prepended modules, and each module it names) selects
  // the same capsules for every op, so it is skipped; the modules are compared once each, and
  // profiles and modules are found through indexes, never by scanning.
  std::unordered_map<std::string_view, ProfilePtr> base_profiles;
  for (const ProfilePtr& b : base.workspace.profiles) base_profiles.emplace(b->name, b);
  const ModuleIndex base_modules(base.workspace);
  const ModuleIndex head_modules(head.workspace);
  std::unordered_map<std::string_view, bool> module_unchanged;
  const auto unchanged = [&](const std::string& name) {
    const auto known = module_unchanged.find(name);
    if (known != module_unchanged.end()) return known->second;
    const CapsuleModule* was = base_modules.find(name);
    const CapsuleModule* now = head_modules.find(name);
    const bool same = was == now || (was != nullptr && now != nullptr && same_module(*was, *now));
    module_unchanged.emplace(name, same);
    return same;
  };
  std::vector<PlannedRows> planned;
  for (const ProfilePtr& h : head.workspace.profiles) {
    const auto found = base_profiles.find(h->name);
    if (found == base_profiles.end()) continue;  // a new profile has no BASE plan; its ProfileAdded change says what it admits
    const ProfilePtr& b = found->second;
    if (same_planning_inputs(*b, *h) && std::all_of(h->module_names.begin(), h->module_names.end(), unchanged)) continue;
    // Profiles with equal planning inputs on both sides (say, thousands that differ only by
    // name) plan alike: the first one's rows are computed, the others reuse them.
    const auto same_plan = [&](const PlannedRows& rows) {
      return same_planning_inputs(*rows.base, *b) && same_planning_inputs(*rows.head, *h);
    };
    auto cached = std::find_if(planned.begin(), planned.end(), same_plan);
    if (cached == planned.end()) {
      planned.push_back(PlannedRows{b, h, plan_rows(base.workspace, b, head.workspace, h)});
      cached = std::prev(planned.end());
    }
    for (const Impact& planned_row : cached->rows) {
      Impact row = planned_row;
      row.profile = h->name;
      row.where = relative(h->where, head.root);
      out.impacts.push_back(std::move(row));
    }
  }
}


/// Note [Impact causes]: when a profile keeps the same capsule for an op and the op still got
/// weaker, the capsule's own weakened changes are the whole reason. Recording them lets one
/// waiver of the capsule change cover every profile that selects it, so a reviewer accepts one
/// decision once; an impact whose capsule moved (module order, preference, a relabel that
/// changes selection) has no such cause and must be accepted on its own.
void attribute_causes(TrustDiff& diff) {
  for (Impact& row : diff.impacts) {
    if (row.direction != Direction::Weakened || !row.before.planned() || !row.after.planned()) continue;
    if (row.before.capsule != row.after.capsule) continue;
    const std::string& name = row.after.capsule;
    for (const Change& change : diff.changes) {
      if (change.direction != Direction::Weakened || scope_of(change.kind) != ChangeScope::Capsule) continue;
      if (change.subject == name || change.subject.rfind(name + "@", 0) == 0) row.caused_by.push_back(change.id);
    }
  }
}

}  // namespace diff_internal
}  // namespace capsule
