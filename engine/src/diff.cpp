// SPDX-License-Identifier: Apache-2.0
// The semantic trust diff (docs/trust-diff.md). Both trees are compared as loaded values, so
// text that carries no meaning (whitespace, comments, key order, file names, positions) cannot
// produce a change. Directions are about trust only: what a reviewer must accept before a run
// may rely on more than it did. Structural changes (provider, device, layout, reduction, order)
// are shown as neutral; their effect on trust, if any, surfaces in the impact section, which
// plans every op under every HEAD profile in both trees.
#include "capsule/diff.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "capsule/gate.hpp"
#include "capsule/text.hpp"
#include "diff_internal.hpp"

namespace capsule {

ChangeScope scope_of(ChangeKind kind) {
  using K = ChangeKind;
  switch (kind) {
    case K::ModuleAdded:
    case K::ModuleRemoved:
    case K::CapsuleOrder: return ChangeScope::Module;
    case K::CapsuleAdded:
    case K::CapsuleRemoved:
    case K::CapsuleRenamed:
    case K::CapsuleMoved:
    case K::CapsuleOp:
    case K::CapsuleProvider:
    case K::CapsuleDevice:
    case K::Trust:
    case K::TrustRecord:
    case K::TrustExpiry:
    case K::Forward:
    case K::VjpMode:
    case K::Reduction:
    case K::CapsuleSummary:
    case K::Claim:
    case K::Evidence:
    case K::EvidenceOwner:
    case K::EvidenceExpiry:
    case K::ContractSummary:
    case K::Provenance: return ChangeScope::Capsule;
    case K::ProfileAdded:
    case K::ProfileRemoved:
    case K::ProfileSummary:
    case K::ProfileDevice:
    case K::ProviderPreference:
    case K::Assurance:
    case K::ProfileVjp:
    case K::Lowering:
    case K::Modules:
    case K::ModuleOrder:
    case K::Availability:
    case K::WithCatalogs:
    case K::Recheck: return ChangeScope::Profile;
  }
  return ChangeScope::Capsule;
}

std::string change_aspect(const Change& change) {
  using K = ChangeKind;
  const std::string o = change.obligation ? std::string(to_string(*change.obligation)) : std::string("contract");
  switch (change.kind) {
    case K::ModuleAdded:
    case K::CapsuleAdded:
    case K::ProfileAdded: return "added";
    case K::ModuleRemoved:
    case K::CapsuleRemoved:
    case K::ProfileRemoved: return "removed";
    case K::CapsuleOrder: return "capsule-order";
    case K::CapsuleRenamed: return "renamed";
    case K::CapsuleMoved: return "module";
    case K::CapsuleOp: return "op";
    case K::CapsuleProvider: return "provider";
    case K::CapsuleDevice: return "device";
    case K::Trust: return "trust";
    case K::TrustRecord: return "trust-record";
    case K::TrustExpiry: return "trust-expiry";
    case K::Forward: return "forward";
    case K::VjpMode: return "vjp-mode";
    case K::Reduction: return "reduction";
    case K::CapsuleSummary: return "summary";
    // The evidence of an obligation is what reviewers care about most, so it gets the bare name.
    case K::Evidence: return o;
    case K::Claim: return o + ".claim";
    case K::EvidenceOwner: return o + ".owner";
    case K::EvidenceExpiry: return o + ".expiry";
    case K::ContractSummary: return o + ".summary";
    case K::Provenance: return o + ".provenance";
    case K::ProfileSummary: return "summary";
    case K::ProfileDevice: return "device";
    case K::ProviderPreference: return "provider";
    case K::Assurance: return "assurance";
    case K::ProfileVjp: return "vjp";
    case K::Lowering: return "lowering";
    case K::Modules: return "modules";
    case K::ModuleOrder: return "module-order";
    case K::Availability: return "availability";
    case K::WithCatalogs: return "with-catalogs";
    case K::Recheck: return "recheck";
  }
  return "change";
}

// Note [Evidence order]: one order per claim family, because the same kind of evidence is not
// equally strong for every claim. A runtime guard checks shape and layout on every call and fails
// closed, so it is the best evidence for those claims; for a value or VJP claim it only checks
// preconditions, never the numbers, so it is the weakest checked evidence there. A shared
// definition runs the canonical definition itself; a named test suite is a fixed, reviewable set
// of cases; a fuzz oracle samples, so what it covered depends on the run. A trusted boundary
// names code whose correctness is assumed: the weakest real evidence for any claim. Not-applicable
// fits only a vjp-unavailable claim; anywhere else it backs nothing, yet the checked policy
// accepts it, so the diff ranks it below everything.
int evidence_rank(ClaimKind claim, const Evidence& evidence) {
  using E = EvidenceKind;
  // A checker ranks by its coverage (Note [Checker coverage]): full is a per-call check of the
  // claim; sampled checks some calls, like a fuzz oracle on real inputs; partial checks only a
  // necessary condition, which the gate treats as trust, so it ranks just above a boundary.
  const CheckerCoverage coverage = evidence.coverage;
  switch (claim) {
    case ClaimKind::ShapeSafety:
    case ClaimKind::LayoutCompatibility:
      switch (evidence.kind) {
        case E::RuntimeGuard: return 9;
        case E::SharedDefinition: return 8;
        case E::TestSuite: return 7;
        case E::FuzzOracle: return 5;
        case E::TrustedBoundary: return 2;
        case E::Missing: return 1;
        case E::NotApplicable: return 0;
        case E::Checker:
          return coverage == CheckerCoverage::Full ? 9 : coverage == CheckerCoverage::Sampled ? 6 : 3;
      }
      return 0;
    case ClaimKind::ValueRefinement:
    case ClaimKind::VjpRefinement:
      switch (evidence.kind) {
        case E::SharedDefinition: return 9;
        case E::TestSuite: return 7;
        case E::FuzzOracle: return 5;
        case E::RuntimeGuard: return 4;
        case E::TrustedBoundary: return 2;
        case E::Missing: return 1;
        case E::NotApplicable: return 0;
        case E::Checker:
          return coverage == CheckerCoverage::Full ? 8 : coverage == CheckerCoverage::Sampled ? 6 : 3;
      }
      return 0;
    case ClaimKind::VjpUnavailable:
      switch (evidence.kind) {
        case E::NotApplicable: return 5;
        case E::RuntimeGuard:
        case E::TestSuite:
        case E::SharedDefinition:
        case E::FuzzOracle:
        case E::Checker: return 4;
        case E::TrustedBoundary: return 1;
        case E::Missing: return 0;
      }
      return 0;
  }
  return 0;
}

namespace diff_internal {

std::string evidence_words(const Evidence& e) {
  switch (e.kind) {
    case EvidenceKind::RuntimeGuard:
    case EvidenceKind::TestSuite:
    case EvidenceKind::SharedDefinition:
    case EvidenceKind::FuzzOracle: return str(to_string(e.kind), " (", e.name, ")");
    case EvidenceKind::Checker: return str("checker (", e.name, ", ", to_string(e.coverage), ")");
    case EvidenceKind::TrustedBoundary: return str("trusted-boundary (", e.reason, ")");
    case EvidenceKind::NotApplicable: return "not-applicable";
    case EvidenceKind::Missing: return "missing";
  }
  return {};
}

SourceLoc relative(const SourceLoc& where, const std::filesystem::path& root) {
  if (root.empty() || where.file.empty()) return where;
  std::filesystem::path base = root.lexically_normal();
  if (!base.has_filename() && base.has_parent_path()) base = base.parent_path();  // "dir/" → "dir"
  const std::filesystem::path rel = std::filesystem::path(where.file).lexically_normal().lexically_relative(base);
  if (rel.empty() || rel.begin()->string() == "..") return where;
  SourceLoc out = where;
  out.file = rel.generic_string();
  return out;
}

std::string location_words(const SourceLoc& where) { return where.file.empty() ? std::string() : str(where); }

}  // namespace diff_internal

namespace {

using diff_internal::evidence_words;
using diff_internal::location_words;
using diff_internal::relative;

// ---- words ----------------------------------------------------------------------------------

std::string claim_words(const Claim& c) {
  std::string out = str(to_string(c.kind), " for ", to_string(c.op));
  if (c.kind == ClaimKind::LayoutCompatibility) out += str(" (layout ", to_string(c.layout), ")");
  if (c.kind == ClaimKind::VjpRefinement) out += str(" (mode ", to_string(c.mode), ")");
  return out;
}

std::string date_words(const std::optional<Date>& date) { return date ? format_date(*date) : "none"; }

template <class E>
std::vector<std::string> names_of(const std::vector<E>& values) {
  std::vector<std::string> out;
  for (const E value : values) out.emplace_back(to_string(value));
  return out;
}

template <class E>
std::string set_words(const EnumSet<E>& set) {
  const std::vector<E> values = set.values();
  return values.empty() ? std::string("none") : join(names_of(values), ", ");
}

/// Values in `a` and not in `b`.
template <class E>
std::vector<E> minus(const EnumSet<E>& a, const EnumSet<E>& b) {
  std::vector<E> out;
  for (const E value : a.values()) {
    if (!b.contains(value)) out.push_back(value);
  }
  return out;
}

std::string bracket_list(const std::vector<std::string>& items) { return "[" + join(items, ", ") + "]"; }

/// A preset's name with the sets it stands for; a custom label already lists them.
std::string assurance_words(const AssurancePolicy& policy) {
  const std::string label = policy.label();
  if (label.starts_with("custom(")) return label;
  std::string out = str(label, " (trust ", set_words(policy.trust), "; evidence ", set_words(policy.evidence));
  if (!policy.refused.empty()) out += str("; refused ", set_words(policy.refused));
  return out + ")";
}

std::string availability_words(const Availability& a) {
  return str("devices ", set_words(a.devices), "; providers ", set_words(a.providers));
}

/// A policy that refuses the `trusted` disposition (strict, checked-runtime) lets no claim rest on
/// trust, even on a capsule labelled trusted-external: the evidence decides (Note [Label is not
/// evidence] in diff_impact.cpp).
bool admits_boundary(const AssurancePolicy& policy) {
  if (policy.refused.contains(Disposition::Trusted)) return false;
  return policy.trust.contains(Trust::TrustedExternal) || policy.evidence.contains(EvidenceKind::TrustedBoundary);
}

bool lapsed(const std::optional<Date>& expires, Date today) { return expires && *expires < today; }

/// Not-applicable evidence on a claim other than vjp-unavailable: it backs nothing.
bool misfit(const ContractDescriptor& d) {
  return d.evidence.kind == EvidenceKind::NotApplicable && d.claim.kind != ClaimKind::VjpUnavailable;
}

struct Verdict {
  Direction direction = Direction::Neutral;
  std::string words;
};

/// Trust that lapses sooner, or at all, is stronger: it forces the judgment to be revisited
/// (cargo-vet's `end`). A date already past in HEAD is a lapse, whatever BASE said.
std::optional<Verdict> compare_expiry(const std::optional<Date>& before, const std::optional<Date>& after, Date today) {
  if (before == after) return std::nullopt;
  if (lapsed(after, today)) {
    return Verdict{Direction::Weakened,
                   str("lapsed: expired on ", format_date(*after), " (today is ", format_date(today), ")")};
  }
  if (!before) return Verdict{Direction::Strengthened, str("added: ", format_date(*after))};
  if (!after) return Verdict{Direction::Weakened, str("removed (was ", format_date(*before), "): the trust no longer lapses")};
  if (*after > *before) {
    return Verdict{Direction::Weakened, str("extended from ", format_date(*before), " to ", format_date(*after))};
  }
  return Verdict{Direction::Strengthened, str("shortened from ", format_date(*before), " to ", format_date(*after))};
}

/// The acceptance gate's verdict on a capsule under the checked policy, in inference mode so
/// that only trust and evidence decide: the question seed 002 asks of a relabelled capsule.
std::vector<std::string> rejected_under_checked(const Capsule& c) {
  KernelPolicy policy;
  policy.device = c.device;
  policy.assurance = AssurancePolicy::checked();
  policy.vjp = VjpMode::None;
  std::vector<std::string> out;
  for (const AcceptanceFailure& failure : acceptance_failures(PlannedKernel{c.op, &c}, policy)) {
    out.push_back(failure.message());
  }
  return out;
}

// ---- capsule matching -----------------------------------------------------------------------

struct Entry {
  const CapsuleModule* module = nullptr;
  const Capsule* capsule = nullptr;
};

std::vector<Entry> entries_of(const Workspace& workspace) {
  std::vector<Entry> out;
  for (const ModulePtr& module : workspace.modules) {
    for (const Capsule& c : module->capsules) out.push_back(Entry{module.get(), &c});
  }
  return out;
}

std::string key_of(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (const std::string_view part : parts) {
    out += part;
    out += '\x1f';  // a separator no name contains
  }
  return out;
}

std::string exact_key(const Entry& e) {
  const Capsule& c = *e.capsule;
  return key_of({e.module->name, c.name, to_string(c.op), to_string(c.provider), to_string(c.device)});
}
std::string module_name_key(const Entry& e) { return key_of({e.module->name, e.capsule->name}); }
std::string identity_key(const Entry& e) {
  const Capsule& c = *e.capsule;
  return key_of({c.name, to_string(c.op), to_string(c.provider), to_string(c.device)});
}
/// Identity minus the name: what a rename keeps (op, provider, device, trust, VJP ownership and
/// every claim and its evidence).
std::string rename_key(const Entry& e) {
  const Capsule& c = *e.capsule;
  std::string out = key_of({to_string(c.op), to_string(c.provider), to_string(c.device), to_string(c.trust),
                            to_string(c.vjp), c.supports_forward ? "forward" : "no-forward"});
  for (const ContractDescriptor& d : c.contracts) {
    out += key_of({to_string(d.claim.kind), to_string(d.claim.op), to_string(d.claim.layout), to_string(d.claim.mode),
                   to_string(d.evidence.kind), d.evidence.name, d.evidence.reason});
  }
  return out;
}
std::string rename_key_in_module(const Entry& e) { return e.module->name + '\x1e' + rename_key(e); }

class Matching {
 public:
  Matching(const std::vector<Entry>& base, const std::vector<Entry>& head)
      : base_(base), head_(head), base_to_head_(base.size()), head_to_base_(head.size()) {
    pair_by(exact_key, false);
    pair_by(module_name_key, true);  // same module and name, changed op, provider or device
    pair_by(identity_key, false);    // moved to another module
    pair_by(rename_key_in_module, true);
    pair_by(rename_key, true);
  }

  std::optional<std::size_t> head_of(std::size_t base_index) const { return base_to_head_[base_index]; }
  std::optional<std::size_t> base_of(std::size_t head_index) const { return head_to_base_[head_index]; }

 private:
  // Pairs still-unpaired entries whose keys are equal, in BASE order. With `unique`, only keys
  // that occur once on each side pair, so an ambiguous rename is reported as removed + added
  // rather than guessed.
  void pair_by(std::string (*key)(const Entry&), bool unique) {
    std::map<std::string, std::vector<std::size_t>> head_keys;
    for (std::size_t j = 0; j < head_.size(); ++j) {
      if (!head_to_base_[j]) head_keys[key(head_[j])].push_back(j);
    }
    std::map<std::string, std::size_t> base_counts;
    for (std::size_t i = 0; i < base_.size(); ++i) {
      if (!base_to_head_[i]) ++base_counts[key(base_[i])];
    }
    for (std::size_t i = 0; i < base_.size(); ++i) {
      if (base_to_head_[i]) continue;
      const std::string k = key(base_[i]);
      const auto found = head_keys.find(k);
      if (found == head_keys.end() || found->second.empty()) continue;
      if (unique && (found->second.size() != 1 || base_counts[k] != 1)) continue;
      const std::size_t j = found->second.front();
      found->second.erase(found->second.begin());
      base_to_head_[i] = j;
      head_to_base_[j] = i;
    }
  }

  const std::vector<Entry>& base_;
  const std::vector<Entry>& head_;
  std::vector<std::optional<std::size_t>> base_to_head_;
  std::vector<std::optional<std::size_t>> head_to_base_;
};

// ---- the differ -----------------------------------------------------------------------------

class Differ {
 public:
  Differ(const Tree& base, const Tree& head, const DiffOptions& options, TrustDiff& out)
      : base_(base), head_(head), options_(options), out_(out) {}

  void capsules();
  void profiles();

 private:
  Change& add(ChangeKind kind, std::string subject, Direction direction, std::string message, const SourceLoc& where,
              Side side) {
    Change change;
    change.kind = kind;
    change.subject = std::move(subject);
    change.direction = direction;
    change.message = std::move(message);
    change.where = relative(where, side == Side::Head ? head_.root : base_.root);
    change.side = side;
    out_.changes.push_back(std::move(change));
    return out_.changes.back();
  }

  std::string subject_of(const Entry& e) const {
    return ambiguous_.count(e.capsule->name) != 0 ? str(e.capsule->name, "@", e.module->name) : e.capsule->name;
  }

  void capsule_pair(const Entry& b, const Entry& h);
  void capsule_added(const Entry& h);
  void capsule_removed(const Entry& b);
  void obligation(const Entry& b, const Entry& h, Obligation o);
  void profile_pair(const Profile& b, const Profile& h);

  const Tree& base_;
  const Tree& head_;
  const DiffOptions& options_;
  TrustDiff& out_;
  std::set<std::string> ambiguous_;  // capsule names declared more than once in either tree
};

void Differ::capsules() {
  const std::vector<Entry> base = entries_of(base_.workspace);
  const std::vector<Entry> head = entries_of(head_.workspace);
  for (const std::vector<Entry>* side : {&base, &head}) {
    std::map<std::string, int> seen;
    for (const Entry& e : *side) {
      if (++seen[e.capsule->name] > 1) ambiguous_.insert(e.capsule->name);
    }
  }
  const Matching matching(base, head);

  for (const ModulePtr& module : base_.workspace.modules) {
    const CapsuleModule* in_head = head_.workspace.find_module(module->name);
    if (in_head == nullptr) {
      add(ChangeKind::ModuleRemoved, module->name, Direction::Neutral,
          str("module `", module->name, "` removed (it had ", module->capsules.size(), " capsules)"), module->where,
          Side::Base)
          .before = module->name;
    }
    std::vector<std::size_t> head_order;  // head positions of this module's capsules, base order
    for (std::size_t i = 0; i < base.size(); ++i) {
      if (base[i].module != module.get()) continue;
      const std::optional<std::size_t> j = matching.head_of(i);
      if (!j) {
        capsule_removed(base[i]);
        continue;
      }
      capsule_pair(base[i], head[*j]);
      if (head[*j].module == in_head) head_order.push_back(*j);
    }
    // Catalog order decides `auto` selection and `prefer` fallback (§3.3), so a reordering is a
    // change in meaning even when no capsule changed.
    if (!std::is_sorted(head_order.begin(), head_order.end())) {
      std::vector<std::string> before;
      for (const std::size_t j : head_order) before.push_back(head[j].capsule->name);
      std::vector<std::size_t> sorted = head_order;
      std::sort(sorted.begin(), sorted.end());
      std::vector<std::string> after;
      for (const std::size_t j : sorted) after.push_back(head[j].capsule->name);
      Change& change = add(ChangeKind::CapsuleOrder, module->name, Direction::Neutral,
                           str("capsule order changed in module `", module->name,
                               "`; catalog order decides selection under `auto` and `prefer` fallback"),
                           in_head->where, Side::Head);
      change.before = join(before, ", ");
      change.after = join(after, ", ");
    }
  }
  for (const ModulePtr& module : head_.workspace.modules) {
    if (base_.workspace.find_module(module->name) != nullptr) continue;
    add(ChangeKind::ModuleAdded, module->name, Direction::Neutral,
        str("module `", module->name, "` added with ", module->capsules.size(), " capsules"), module->where, Side::Head)
        .after = module->name;
  }
  for (std::size_t j = 0; j < head.size(); ++j) {
    if (!matching.base_of(j)) capsule_added(head[j]);
  }
}

void Differ::capsule_added(const Entry& h) {
  const Capsule& c = *h.capsule;
  std::string message = str("capsule added to module `", h.module->name, "`: ", to_string(c.op), " on ",
                            to_string(c.device), " by ", to_string(c.provider), ", trust ", to_string(c.trust));
  Direction direction = Direction::Neutral;
  std::vector<std::string> notes;
  // A new capsule labelled checked whose evidence the checked gate rejects is seed 002's trap:
  // checked profiles will select it by its label and then fail at the gate.
  if (c.trust == Trust::Checked) {
    notes = rejected_under_checked(c);
    if (!notes.empty()) {
      direction = Direction::Weakened;
      message += "; it is labelled checked, but the acceptance gate rejects it under `checked` (label versus evidence)";
    }
  }
  Change& change = add(ChangeKind::CapsuleAdded, subject_of(h), direction, std::move(message), c.where, Side::Head);
  change.after = c.name;
  change.notes = std::move(notes);
}

void Differ::capsule_removed(const Entry& b) {
  const Capsule& c = *b.capsule;
  add(ChangeKind::CapsuleRemoved, subject_of(b), Direction::Neutral,
      str("capsule removed from module `", b.module->name, "` (", to_string(c.op), " on ", to_string(c.device), " by ",
          to_string(c.provider), ")"),
      c.where, Side::Base)
      .before = c.name;
}

void Differ::capsule_pair(const Entry& b, const Entry& h) {
  const Capsule& cb = *b.capsule;
  const Capsule& ch = *h.capsule;
  if (cb == ch && b.module->name == h.module->name) return;
  const std::string subject = subject_of(h);
  const auto simple = [&](ChangeKind kind, std::string before, std::string after, std::string message) {
    Change& change = add(kind, subject, Direction::Neutral, std::move(message), ch.where, Side::Head);
    change.before = std::move(before);
    change.after = std::move(after);
  };
  if (cb.name != ch.name) simple(ChangeKind::CapsuleRenamed, cb.name, ch.name, str("renamed from `", cb.name, "`"));
  if (b.module->name != h.module->name) {
    simple(ChangeKind::CapsuleMoved, b.module->name, h.module->name,
           str("moved from module `", b.module->name, "` to `", h.module->name,
               "`; profiles now see it where they list that module"));
  }
  if (cb.op != ch.op) simple(ChangeKind::CapsuleOp, std::string(to_string(cb.op)), std::string(to_string(ch.op)), "op changed");
  if (cb.provider != ch.provider) {
    simple(ChangeKind::CapsuleProvider, std::string(to_string(cb.provider)), std::string(to_string(ch.provider)),
           "provider changed");
  }
  if (cb.device != ch.device) {
    simple(ChangeKind::CapsuleDevice, std::string(to_string(cb.device)), std::string(to_string(ch.device)),
           "device changed");
  }

  if (cb.trust != ch.trust) {
    Direction direction = Direction::Weakened;
    std::string message;
    std::vector<std::string> notes;
    if (ch.trust == Trust::TrustedExternal) {
      message = "relabelled trusted-external: its correctness is now assumed; external profiles may select it";
      if (lapsed(ch.trust_record.expires, options_.today)) {
        notes.push_back(str("its trust already lapsed on ", format_date(*ch.trust_record.expires)));
      }
    } else {
      // See Note [Evidence order]: the label is a filter, the evidence is the claim. A relabel
      // strengthens only if the gate accepts the evidence under checked.
      notes = rejected_under_checked(ch);
      if (notes.empty()) {
        direction = Direction::Strengthened;
        message = "relabelled checked, and the acceptance gate accepts its evidence under `checked`";
      } else {
        message = "relabelled checked, but the label is not the evidence: the acceptance gate still rejects it "
                  "under `checked`, and checked profiles will now select it and fail at the gate";
      }
    }
    Change& change = add(ChangeKind::Trust, subject, direction, std::move(message), ch.where, Side::Head);
    change.before = std::string(to_string(cb.trust));
    change.after = std::string(to_string(ch.trust));
    change.notes = std::move(notes);
  }
  if (cb.trust_record.reason != ch.trust_record.reason || cb.trust_record.owner != ch.trust_record.owner) {
    simple(ChangeKind::TrustRecord, str(cb.trust_record.reason, " / owner ", cb.trust_record.owner),
           str(ch.trust_record.reason, " / owner ", ch.trust_record.owner), "trust reason or owner changed");
  }
  if (cb.trust == Trust::TrustedExternal && ch.trust == Trust::TrustedExternal) {
    if (auto verdict = compare_expiry(cb.trust_record.expires, ch.trust_record.expires, options_.today)) {
      Change& change = add(ChangeKind::TrustExpiry, subject, verdict->direction,
                           "trusted-external expiry " + verdict->words, ch.where, Side::Head);
      change.before = date_words(cb.trust_record.expires);
      change.after = date_words(ch.trust_record.expires);
    }
  }
  if (cb.supports_forward != ch.supports_forward) {
    simple(ChangeKind::Forward, cb.supports_forward ? "true" : "false", ch.supports_forward ? "true" : "false",
           ch.supports_forward ? "now supplies a forward implementation" : "no longer supplies a forward implementation");
  }
  if (cb.vjp != ch.vjp) {
    simple(ChangeKind::VjpMode, std::string(to_string(cb.vjp)), std::string(to_string(ch.vjp)),
           "VJP mode changed: who owns the local reverse rule moved");
  }
  if (cb.numerical.reduction != ch.numerical.reduction) {
    simple(ChangeKind::Reduction, std::string(to_string(cb.numerical.reduction)),
           std::string(to_string(ch.numerical.reduction)),
           "reduction policy changed: numerical certificates for the old order no longer apply");
  }
  if (cb.summary != ch.summary) simple(ChangeKind::CapsuleSummary, cb.summary, ch.summary, "summary changed");
  for (const Obligation o : all_values<Obligation>()) obligation(b, h, o);
}

void Differ::obligation(const Entry& b, const Entry& h, Obligation o) {
  const Capsule& capsule = *h.capsule;
  const ContractDescriptor& before = b.capsule->contract(o);
  const ContractDescriptor& after = capsule.contract(o);
  if (before == after) return;
  const std::string subject = subject_of(h);
  const std::string_view name = to_string(o);
  const auto add_o = [&](ChangeKind kind, Direction direction, std::string message, std::string was,
                         std::string now) -> Change& {
    Change& change = add(kind, subject, direction, std::move(message), capsule.where, Side::Head);
    change.obligation = o;
    change.before = std::move(was);
    change.after = std::move(now);
    return change;
  };

  const bool same_claim_kind = before.claim.kind == after.claim.kind;
  if (before.claim != after.claim) {
    Change& change = add_o(ChangeKind::Claim, misfit(after) ? Direction::Weakened : Direction::Neutral,
                           str(name, " claim changed"), claim_words(before.claim), claim_words(after.claim));
    if (misfit(after)) change.notes.push_back("its not-applicable evidence backs no such claim");
  }

  const Evidence& was = before.evidence;
  const Evidence& now = after.evidence;
  if (was.kind != now.kind) {
    Direction direction = Direction::Neutral;
    if (same_claim_kind) {
      const int rank_before = evidence_rank(before.claim.kind, was);
      const int rank_after = evidence_rank(after.claim.kind, now);
      if (rank_after < rank_before) direction = Direction::Weakened;
      if (rank_after > rank_before) direction = Direction::Strengthened;
    } else if (misfit(after) || now.kind == EvidenceKind::TrustedBoundary || now.kind == EvidenceKind::Missing) {
      // Claims of different kinds do not rank against each other, but a claim that now rests on
      // a trusted boundary or on nothing (missing, or not-applicable where it does not fit) is
      // weaker whatever it was.
      direction = Direction::Weakened;
    }
    std::string message = str(name, " evidence ",
                              direction == Direction::Weakened       ? "weakened"
                              : direction == Direction::Strengthened ? "strengthened"
                                                                     : "changed");
    if (!same_claim_kind) message += " along with its claim";
    if (now.kind == EvidenceKind::TrustedBoundary) message += "; the claim now rests on a trusted boundary";
    Change& change = add_o(ChangeKind::Evidence, direction, std::move(message), evidence_words(was), evidence_words(now));
    if (misfit(after)) {
      change.notes.push_back(str("not-applicable fits only a vjp-unavailable claim; it backs no ",
                                 to_string(after.claim.kind), " claim, and the checked policy still accepts it, "
                                 "so the gate will not catch this"));
    }
    if (capsule.trust == Trust::Checked && !AssurancePolicy::checked().accepts_evidence(after.claim.kind, now)) {
      change.notes.push_back(str("the capsule is still labelled checked, but the acceptance gate now rejects its ",
                                 name, " evidence under `checked`"));
    }
    if (now.kind == EvidenceKind::TrustedBoundary && lapsed(now.expires, options_.today)) {
      change.notes.push_back(str("the boundary already expired on ", format_date(*now.expires)));
    }
  } else {
    // Same kind: a coverage change and a rename are independent findings, so both are reported
    // when a checker is renamed and its coverage moves at once.
    if (now.kind == EvidenceKind::Checker && was.coverage != now.coverage) {
      // Note [Checker coverage]: the same checker kind, yet a move from full to partial or sampled
      // checks less of the claim, so it ranks like any other evidence change.
      const int rank_before = evidence_rank(before.claim.kind, was);
      const int rank_after = evidence_rank(after.claim.kind, now);
      const Direction direction = !same_claim_kind         ? Direction::Neutral
                                  : rank_after < rank_before ? Direction::Weakened
                                  : rank_after > rank_before ? Direction::Strengthened
                                                             : Direction::Neutral;
      add_o(ChangeKind::Evidence, direction,
            str(name, " checker coverage ", direction == Direction::Weakened       ? "weakened"
                                            : direction == Direction::Strengthened ? "strengthened"
                                                                                   : "changed",
                ": ", to_string(was.coverage), " -> ", to_string(now.coverage)),
            evidence_words(was), evidence_words(now));
    }
    if (was.name != now.name || was.reason != now.reason) {
      // Note [Renamed evidence]: same kind, other suite, guard, definition or reason. The kind did
      // not move, but what stands behind the claim did: the new suite may test nothing of it, and
      // only a reviewer can tell. So it needs review (weakened, waivable), never neutral.
      add_o(ChangeKind::Evidence, Direction::Weakened,
            str(name, now.kind == EvidenceKind::TrustedBoundary ? " trusted-boundary reason changed"
                                                                : str(" evidence now names another ", to_string(now.kind)),
                ": a reviewer must confirm it still backs the claim"),
            evidence_words(was), evidence_words(now));
    }
  }
  if (was.kind == now.kind && was.owner != now.owner) {
    add_o(ChangeKind::EvidenceOwner, Direction::Neutral, str(name, " evidence owner changed"), was.owner, now.owner);
  }
  if (was.kind == EvidenceKind::TrustedBoundary && now.kind == EvidenceKind::TrustedBoundary) {
    if (auto verdict = compare_expiry(was.expires, now.expires, options_.today)) {
      add_o(ChangeKind::EvidenceExpiry, verdict->direction, str(name, " trusted-boundary expiry ", verdict->words),
            date_words(was.expires), date_words(now.expires));
    }
  }
  if (before.summary != after.summary) {
    add_o(ChangeKind::ContractSummary, Direction::Neutral, str(name, " summary changed"), before.summary, after.summary);
  }
  if (before.provenance != after.provenance) {
    const auto words = [](const std::vector<Provenance>& list) {
      std::vector<std::string> items;
      for (const Provenance& p : list) items.push_back(str(p.path, " ", p.symbol, " ", p.build_target));
      return join(items, "; ");
    };
    add_o(ChangeKind::Provenance, Direction::Neutral, str(name, " provenance changed (identifies code; never evidence)"),
          words(before.provenance), words(after.provenance));
  }
}

void Differ::profiles() {
  // Indexed by name (the first of a name, as find_profile): thousands of profiles must not cost
  // their square (Note [Impact cost] in diff_impact.cpp).
  const auto index = [](const Workspace& workspace) {
    std::map<std::string_view, ProfilePtr> out;
    for (const ProfilePtr& p : workspace.profiles) out.emplace(p->name, p);
    return out;
  };
  const std::map<std::string_view, ProfilePtr> base_profiles = index(base_.workspace);
  const std::map<std::string_view, ProfilePtr> head_profiles = index(head_.workspace);
  for (const ProfilePtr& h : head_.workspace.profiles) {
    const auto found = base_profiles.find(h->name);
    const ProfilePtr b = found == base_profiles.end() ? nullptr : found->second;
    if (b) {
      profile_pair(*b, *h);
      continue;
    }
    const AssurancePolicy& assurance = h->policy.assurance;
    const bool boundary = admits_boundary(assurance);
    Change& change =
        add(ChangeKind::ProfileAdded, h->name, boundary ? Direction::Weakened : Direction::Neutral,
            boundary ? str("new profile admits a trusted boundary (assurance ", assurance.label(), ")")
                     : str("new profile (assurance ", assurance.label(), ", device ", to_string(h->policy.device), ")"),
            h->where, Side::Head);
    change.after = h->name;
  }
  for (const ProfilePtr& b : base_.workspace.profiles) {
    if (head_profiles.count(b->name) != 0) continue;
    add(ChangeKind::ProfileRemoved, b->name, Direction::Neutral, "profile removed", b->where, Side::Base).before = b->name;
  }
}

void Differ::profile_pair(const Profile& b, const Profile& h) {
  const auto simple = [&](ChangeKind kind, Direction direction, std::string message, std::string was,
                          std::string now) -> Change& {
    Change& change = add(kind, h.name, direction, std::move(message), h.where, Side::Head);
    change.before = std::move(was);
    change.after = std::move(now);
    return change;
  };
  if (b.summary != h.summary) simple(ChangeKind::ProfileSummary, Direction::Neutral, "summary changed", b.summary, h.summary);
  if (b.policy.device != h.policy.device) {
    simple(ChangeKind::ProfileDevice, Direction::Neutral, "device changed", std::string(to_string(b.policy.device)),
           std::string(to_string(h.policy.device)));
  }
  if (b.policy.provider != h.policy.provider) {
    simple(ChangeKind::ProviderPreference, Direction::Neutral, "provider preference changed", b.policy.provider.label(),
           h.policy.provider.label());
  }
  const AssurancePolicy& was = b.policy.assurance;
  const AssurancePolicy& now = h.policy.assurance;
  if (was != now) {
    // Widening admits more trust levels or evidence kinds: the profile will accept runs it used
    // to refuse, so it is weakened even when some other kind was dropped at the same time.
    // A refused disposition narrows: no longer refusing one (strict -> checked-runtime) widens.
    const std::vector<Trust> more_trust = minus(now.trust, was.trust);
    const std::vector<EvidenceKind> more_evidence = minus(now.evidence, was.evidence);
    const std::vector<Disposition> unrefused = minus(was.refused, now.refused);
    const std::vector<Trust> less_trust = minus(was.trust, now.trust);
    const std::vector<EvidenceKind> less_evidence = minus(was.evidence, now.evidence);
    const std::vector<Disposition> refused = minus(now.refused, was.refused);
    const bool widened = !more_trust.empty() || !more_evidence.empty() || !unrefused.empty();
    const bool narrowed = !less_trust.empty() || !less_evidence.empty() || !refused.empty();
    std::vector<std::string> parts;
    if (!more_trust.empty()) parts.push_back("now admits trust " + join(names_of(more_trust), ", "));
    if (!more_evidence.empty()) parts.push_back("now admits evidence " + join(names_of(more_evidence), ", "));
    if (!unrefused.empty()) parts.push_back("no longer refuses " + join(names_of(unrefused), ", ") + " evidence");
    if (!less_trust.empty()) parts.push_back("no longer admits trust " + join(names_of(less_trust), ", "));
    if (!less_evidence.empty()) parts.push_back("no longer admits evidence " + join(names_of(less_evidence), ", "));
    if (!refused.empty()) parts.push_back("now refuses " + join(names_of(refused), ", ") + " evidence");
    if (admits_boundary(now) && !admits_boundary(was)) parts.push_back("now admits a trusted boundary it did not admit before");
    simple(ChangeKind::Assurance, widened ? Direction::Weakened : Direction::Strengthened,
           str("assurance ", widened ? (narrowed ? "changed" : "widened") : "narrowed", ": ", join(parts, "; ")),
           assurance_words(was), assurance_words(now));
  }
  if (b.recheck != h.recheck) {
    // Ranked by the expected share of calls checked (docs/trust-diff.md): fewer checks let more
    // wrong results through unseen. The same share under another seed or spelling (every = 1 and
    // sample = 1 both check every call) is neutral: another set of calls is checked, not fewer.
    const double was_share = b.recheck.checked_fraction();
    const double now_share = h.recheck.checked_fraction();
    const Direction direction = now_share < was_share   ? Direction::Weakened
                                : now_share > was_share ? Direction::Strengthened
                                                        : Direction::Neutral;
    const std::string message =
        direction == Direction::Weakened       ? "recheck weakened: checker evidence is rechecked on fewer calls"
        : direction == Direction::Strengthened ? "recheck strengthened: checker evidence is rechecked on more calls"
                                               : "recheck changed: the same share of calls, another set of them";
    // At the `recheck` key: the head's, else (the key was removed) the base's, else the profile.
    const bool head_key = h.recheck_where.line != 0;
    const bool base_key = !head_key && b.recheck_where.line != 0;
    Change& change = add(ChangeKind::Recheck, h.name, direction, message,
                         head_key ? h.recheck_where : base_key ? b.recheck_where : h.where,
                         base_key ? Side::Base : Side::Head);
    change.before = b.recheck.label();
    change.after = h.recheck.label();
  }
  if (b.policy.vjp != h.policy.vjp) {
    simple(ChangeKind::ProfileVjp, Direction::Neutral, "requested VJP mode changed", std::string(to_string(b.policy.vjp)),
           std::string(to_string(h.policy.vjp)));
  }
  if (b.lowering != h.lowering) {
    simple(ChangeKind::Lowering, Direction::Neutral, "graph lowering changed", std::string(to_string(b.lowering)),
           std::string(to_string(h.lowering)));
  }
  if (b.module_names != h.module_names) {
    const std::set<std::string> was_set(b.module_names.begin(), b.module_names.end());
    const std::set<std::string> now_set(h.module_names.begin(), h.module_names.end());
    if (was_set == now_set) {
      simple(ChangeKind::ModuleOrder, Direction::Neutral,
             "module order changed; catalog order decides selection under `auto` and `prefer` fallback",
             bracket_list(b.module_names), bracket_list(h.module_names));
    } else {
      std::vector<std::string> added;
      std::vector<std::string> removed;
      for (const std::string& m : h.module_names) {
        if (was_set.count(m) == 0) added.push_back(m);
      }
      for (const std::string& m : b.module_names) {
        if (now_set.count(m) == 0) removed.push_back(m);
      }
      std::vector<std::string> parts;
      if (!added.empty()) parts.push_back("added " + join(added, ", "));
      if (!removed.empty()) parts.push_back("removed " + join(removed, ", "));
      simple(ChangeKind::Modules, Direction::Neutral, "modules changed: " + join(parts, "; "), bracket_list(b.module_names),
             bracket_list(h.module_names));
    }
  }
  if (b.availability != h.availability || b.target != h.target) {
    // Availability is a declaration (§4.1); what it changes is which capsules can be selected,
    // which the impact section shows op by op.
    std::vector<std::string> parts;
    const auto describe = [&parts](std::string_view what, const std::vector<std::string>& more,
                                   const std::vector<std::string>& less) {
      if (!more.empty()) parts.push_back(str("declares ", what, " ", join(more, ", ")));
      if (!less.empty()) parts.push_back(str("no longer declares ", what, " ", join(less, ", ")));
    };
    describe("devices", names_of(minus(h.availability.devices, b.availability.devices)),
             names_of(minus(b.availability.devices, h.availability.devices)));
    describe("providers", names_of(minus(h.availability.providers, b.availability.providers)),
             names_of(minus(b.availability.providers, h.availability.providers)));
    if (parts.empty()) parts.emplace_back("build target changed, same availability");
    simple(ChangeKind::Availability, Direction::Neutral, "availability changed: " + join(parts, "; "),
           availability_words(b.availability), availability_words(h.availability));
  }
  std::vector<std::string> was_catalogs;
  std::vector<std::string> now_catalogs;
  for (const auto& entry : b.with_catalogs) was_catalogs.push_back(entry.first);
  for (const auto& entry : h.with_catalogs) now_catalogs.push_back(entry.first);
  if (was_catalogs != now_catalogs) {
    simple(ChangeKind::WithCatalogs, Direction::Neutral, "prepended catalogs changed (their effect shows in the impact)",
           bracket_list(was_catalogs), bracket_list(now_catalogs));
  }
}
void assign_ids(TrustDiff& diff) {
  std::map<std::string, int> seen;
  // Ids must be unique for waivers to name one finding; a repeat (two changes of one aspect on
  // one subject) gets `#2`, `#3` in discovery order.
  const auto unique = [&seen](std::string id) {
    const int n = ++seen[id];
    return n == 1 ? id : str(id, "#", n);
  };
  for (Change& change : diff.changes) {
    change.id = unique(str(to_string(change.direction), ":", to_string(scope_of(change.kind)), ":", change.subject, ":",
                           change_aspect(change)));
  }
  for (Impact& row : diff.impacts) {
    row.id = unique(str(to_string(row.direction), ":impact:", row.profile, ":", to_string(row.op)));
  }
}

}  // namespace

TrustDiff diff_trees(const Tree& base, const Tree& head, const DiffOptions& options) {
  TrustDiff diff;
  diff.base_label = base.label;
  diff.head_label = head.label;
  diff.today = options.today;
  diff.base_folders = base.folders;
  diff.head_folders = head.folders;
  Differ differ(base, head, options, diff);
  differ.capsules();
  differ.profiles();
  if (options.impact) diff_internal::plan_impact(base, head, diff);
  assign_ids(diff);
  diff_internal::attribute_causes(diff);
  return diff;
}

}  // namespace capsule
