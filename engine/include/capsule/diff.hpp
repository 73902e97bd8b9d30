// SPDX-License-Identifier: Apache-2.0
// The semantic trust diff behind `capsule diff BASE HEAD`: two loaded catalog/profile trees are
// compared by meaning, never by text, and every difference becomes a `Change` classed as
// weakened, strengthened or neutral for trust. The impact section then plans every op under
// every HEAD profile in both trees and lists the ops whose selected capsule, trust, evidence or
// gate verdict moved. Reviewed waivers (`--accept FILE`) mark weakened findings as accepted.
// The CLI is a thin layer over this header: load two trees, diff, apply waivers, render, exit.
// docs/trust-diff.md describes the classification, the evidence order and the key format.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/fingerprint.hpp"
#include "capsule/load.hpp"
#include "capsule/result.hpp"
#include "capsule/text_style.hpp"
#include "capsule/vocab.hpp"

namespace capsule {

/// What a change does to trust. The spellings are the first field of every change id.
enum class Direction : std::uint8_t { Weakened, Strengthened, Neutral };

/// What a change is about. The spellings are the second field of every change id.
enum class ChangeScope : std::uint8_t { Module, Capsule, Profile, Impact };

/// Every kind of change the diff reports. The name table gives each kind a stable spelling used
/// in JSON; the change id uses the shorter aspect of `change_aspect`.
enum class ChangeKind : std::uint8_t {
  // modules
  ModuleAdded, ModuleRemoved, CapsuleOrder,
  // capsules
  CapsuleAdded, CapsuleRemoved, CapsuleRenamed, CapsuleMoved, CapsuleOp, CapsuleProvider, CapsuleDevice,
  Trust, TrustRecord, TrustExpiry, Forward, VjpMode, Reduction, CapsuleSummary,
  // one obligation of a capsule
  Claim, Evidence, EvidenceOwner, EvidenceExpiry, ContractSummary, Provenance,
  // profiles
  ProfileAdded, ProfileRemoved, ProfileSummary, ProfileDevice, ProviderPreference, Assurance, ProfileVjp,
  Lowering, Modules, ModuleOrder, Availability, WithCatalogs, Recheck
};

template <>
struct VocabTable<Direction> {
  static constexpr std::string_view kind = "direction";
  static constexpr std::array<std::pair<Direction, std::string_view>, 3> entries{{
      {Direction::Weakened, "weakened"}, {Direction::Strengthened, "strengthened"}, {Direction::Neutral, "neutral"}}};
};

template <>
struct VocabTable<ChangeScope> {
  static constexpr std::string_view kind = "change scope";
  static constexpr std::array<std::pair<ChangeScope, std::string_view>, 4> entries{{
      {ChangeScope::Module, "module"}, {ChangeScope::Capsule, "capsule"}, {ChangeScope::Profile, "profile"},
      {ChangeScope::Impact, "impact"}}};
};

template <>
struct VocabTable<ChangeKind> {
  using K = ChangeKind;
  static constexpr std::string_view kind = "change kind";
  static constexpr std::array<std::pair<K, std::string_view>, 36> entries{{
      {K::ModuleAdded, "module-added"}, {K::ModuleRemoved, "module-removed"}, {K::CapsuleOrder, "capsule-order"},
      {K::CapsuleAdded, "capsule-added"}, {K::CapsuleRemoved, "capsule-removed"},
      {K::CapsuleRenamed, "capsule-renamed"}, {K::CapsuleMoved, "capsule-moved"}, {K::CapsuleOp, "capsule-op"},
      {K::CapsuleProvider, "capsule-provider"}, {K::CapsuleDevice, "capsule-device"}, {K::Trust, "trust"},
      {K::TrustRecord, "trust-record"}, {K::TrustExpiry, "trust-expiry"}, {K::Forward, "forward"},
      {K::VjpMode, "vjp-mode"}, {K::Reduction, "reduction"}, {K::CapsuleSummary, "capsule-summary"},
      {K::Claim, "claim"}, {K::Evidence, "evidence"}, {K::EvidenceOwner, "evidence-owner"},
      {K::EvidenceExpiry, "evidence-expiry"}, {K::ContractSummary, "contract-summary"},
      {K::Provenance, "provenance"}, {K::ProfileAdded, "profile-added"}, {K::ProfileRemoved, "profile-removed"},
      {K::ProfileSummary, "profile-summary"}, {K::ProfileDevice, "profile-device"},
      {K::ProviderPreference, "provider-preference"}, {K::Assurance, "assurance"}, {K::ProfileVjp, "profile-vjp"},
      {K::Lowering, "lowering"}, {K::Modules, "modules"}, {K::ModuleOrder, "module-order"},
      {K::Availability, "availability"}, {K::WithCatalogs, "with-catalogs"}, {K::Recheck, "recheck"}}};
};

static_assert(detail::table_is_dense(VocabTable<Direction>::entries));
static_assert(detail::table_is_dense(VocabTable<ChangeScope>::entries));
static_assert(detail::table_is_dense(VocabTable<ChangeKind>::entries));

/// The scope a change kind belongs to (never Impact: impact rows are `Impact` values).
ChangeScope scope_of(ChangeKind kind);

/// Which tree a location points into.
enum class Side : std::uint8_t { Base, Head };

/// The evidence order (docs/trust-diff.md): how strongly `evidence` backs a claim of kind
/// `claim`, higher is stronger. Value and VJP refinement: shared-definition 9 > full checker 8 >
/// test-suite 7 > sampled checker 6 > fuzz-oracle 5 > runtime-guard 4 > partial checker 3 >
/// trusted-boundary 2 > missing 1 > not-applicable 0. Shape and layout: runtime-guard = full
/// checker 9 > shared-definition 8 > test-suite 7 > sampled checker 6 > fuzz-oracle 5 > partial
/// checker 3 > trusted-boundary 2 > missing 1 > not-applicable 0. vjp-unavailable:
/// not-applicable 5 (the only evidence that fits it), every checked kind 4, trusted-boundary 1,
/// missing 0. Not-applicable on any claim but vjp-unavailable backs nothing.
int evidence_rank(ClaimKind claim, const Evidence& evidence);
/// The rank of evidence of `kind` (a checker: with full coverage).
inline int evidence_rank(ClaimKind claim, EvidenceKind kind) {
  Evidence evidence;
  evidence.kind = kind;
  return evidence_rank(claim, evidence);
}

/// One reviewed acceptance of a change, from a waivers file (`--accept FILE`).
struct Waiver {
  std::string change;       ///< the change id it accepts, e.g. `weakened:capsule:reference.relu:value`
  std::string accepted_by;  ///< who reviewed it
  std::string reason;       ///< why it is acceptable
  Date expires{};           ///< last day the acceptance holds; after it the waiver fails the run
  SourceLoc where;          ///< position of the waiver's `change` key

  friend bool operator==(const Waiver&, const Waiver&) = default;
};

/// One difference in meaning between BASE and HEAD.
struct Change {
  ChangeKind kind = ChangeKind::CapsuleAdded;
  /// The capsule, module or profile the change is about (HEAD's name for renamed capsules). When
  /// a capsule name occurs in more than one module, `name@module`.
  std::string subject;
  std::optional<Obligation> obligation;  ///< set for Claim, Evidence and the other contract kinds
  std::string before;                    ///< BASE's value in words; empty when absent
  std::string after;                     ///< HEAD's value in words; empty when absent
  Direction direction = Direction::Neutral;
  std::string message;                   ///< one line for readers
  std::vector<std::string> notes;        ///< further lines (gate failures, lapsed dates)
  SourceLoc where;                       ///< declaration in HEAD, or in BASE for removals
  Side side = Side::Head;
  /// `direction:scope:subject:aspect`; stable across runs, so reviewers copy it into waivers.
  std::string id;
  std::optional<Waiver> waiver;          ///< set by apply_waivers when a live waiver names `id`
};

/// The last field of a change id: `trust`, `value` (the value evidence), `value.claim`,
/// `value.expiry`, `assurance`, `module-order`, ... (docs/trust-diff.md lists them all).
std::string change_aspect(const Change& change);

/// What one profile selects for one op in one tree.
struct Selection {
  std::string capsule;  ///< empty when the op is unplannable
  std::string module;
  Trust trust = Trust::Checked;
  std::array<ClaimKind, 4> claims{};     ///< indexed by Obligation
  std::array<Evidence, 4> evidence{};    ///< indexed by Obligation
  bool accepted = false;                 ///< the acceptance gate under the profile's policy
  std::vector<std::string> gate_failures;  ///< the gate's messages when not accepted
  std::string unplannable;               ///< TorchLean's planning error line when nothing fits

  bool planned() const { return !capsule.empty(); }
};

/// An op whose selection under a profile differs between BASE and HEAD.
struct Impact {
  std::string profile;
  Op op = Op::Custom;
  Selection before;
  Selection after;
  Direction direction = Direction::Neutral;
  std::string message;  ///< what moved, e.g. `a -> b; value evidence test-suite -> trusted-boundary`
  SourceLoc where;      ///< the profile's declaration in HEAD
  std::string id;       ///< `direction:impact:profile:op`
  /// For a weakened row whose capsule stayed the same: the ids of that capsule's weakened
  /// changes, which explain it. Waiving all of them covers the row too.
  std::vector<std::string> caused_by;
  std::optional<Waiver> waiver;  ///< its own waiver, or its causes' (then covered_by_cause)
  bool covered_by_cause = false;
};

/// The folders a tree was read from, as reports name them (`base/catalogs`, or
/// `HEAD~1:ml/catalogs` for a revision). Empty when the tree has no such folder: that side is
/// then empty (a base revision from before profiles existed), and the reports say so.
struct TreeFolders {
  std::string catalogs;
  std::string profiles;
};

/// The whole diff. Changes come in discovery order (modules and capsules in BASE order, then
/// what HEAD added; then profiles in HEAD order, then removed ones); renderers group them by
/// direction.
struct TrustDiff {
  std::string base_label;
  std::string head_label;
  Date today{};
  std::vector<Change> changes;
  std::vector<Impact> impacts;
  std::vector<Waiver> expired_waivers;  ///< waivers past `expires`: each fails the run
  std::vector<Waiver> unused_waivers;   ///< live waivers naming no change (shown, harmless)
  TreeFolders base_folders;             ///< what each side loaded, named in every report
  TreeFolders head_folders;
  /// The environment the diff ran in, printed with the folders' report (the CLI sets it).
  EnvironmentFingerprint environment;

  bool empty() const { return changes.empty() && impacts.empty(); }
};

/// A catalog/profile tree: `root/catalogs/*.toml` and `root/profiles/*.toml`, loaded.
struct Tree {
  Workspace workspace;
  std::string label;           ///< how reports name the tree (a directory or a git revision)
  std::filesystem::path root;  ///< locations are printed relative to it
  TreeFolders folders;         ///< what was loaded
};

/// Loads `root/catalogs` and `root/profiles`. One missing folder is an empty side; a root with
/// neither is an error naming it (never an empty tree). Fails with every diagnostic when any is
/// an error; warnings (expired trust) stay in `workspace.diagnostics`.
Result<Tree, Diagnostics> load_tree(const std::filesystem::path& root, std::string label,
                                    const LoadOptions& options = {});

/// Loads `catalogs/` and `profiles/` of git revision `rev`, found relative to the directory
/// `repo_dir` names inside its repository (`--repo ml`, or a run from inside `ml/`, reads
/// `ml/catalogs` and `ml/profiles`). Every file read comes from the revision's own blobs, written
/// into the fresh directory `scratch_dir` first (`git ls-tree` and `git cat-file --batch`, run
/// without a shell; no checkout and no .gitattributes export rules that could hide a file),
/// including the catalogs profiles name in `with_catalogs`; such a path that leaves the
/// repository is an error naming it. A non-regular `*.toml` entry (symlink, gitlink, subtree) is
/// an error, as in directories. Every refusal of git (no git binary, an unknown revision, a
/// shallow clone without it, an untrusted repository) is a `git-error` diagnostic. Locations are
/// relative to the repository top; diagnostics name files as `rev:path`.
Result<Tree, Diagnostics> load_git_tree(std::string_view rev, const std::filesystem::path& repo_dir,
                                        const std::filesystem::path& scratch_dir, const LoadOptions& options = {});

/// How diff_trees judges time and how much it plans.
struct DiffOptions {
  /// The day expiry is judged against (trust that lapsed, waivers that expired).
  Date today = LoadOptions::today_utc();
  /// Plan every op under every HEAD profile in both trees. Costs 56 lookups per profile and tree.
  bool impact = true;
};

/// Compares two loaded trees by meaning: whitespace, comments, key order, file names and
/// positions never produce a change. Trees that failed to load may be passed; a profile that
/// cannot be resolved then reports every op unplannable.
TrustDiff diff_trees(const Tree& base, const Tree& head, const DiffOptions& options = {});

/// Parses a waivers file (docs/trust-diff.md): `schema = 1` and `[[waiver]]` tables with
/// `change`, `accepted_by`, `reason` and `expires`, all required. Unknown keys, malformed ids and
/// duplicate ids are errors with file:line:col.
Result<std::vector<Waiver>, Diagnostics> parse_waivers(std::string_view text, const std::string& path);
/// Reads and parses a waivers file; `-` (kStdinPath, capsule/load.hpp) reads standard input.
Result<std::vector<Waiver>, Diagnostics> load_waivers(const std::filesystem::path& file);

/// Marks every change and impact whose id a live waiver names; an impact row whose causes are
/// all waived is covered too. Expired waivers (expires before `diff.today`) waive nothing and are
/// recorded as failures; live waivers that match nothing are recorded as unused. Calling it
/// again first clears earlier marks.
void apply_waivers(TrustDiff& diff, std::span<const Waiver> waivers);

/// Counts behind the summary lines.
struct DiffCounts {
  std::size_t weakened = 0;       ///< weakened changes, waived or not
  std::size_t strengthened = 0;
  std::size_t neutral = 0;
  std::size_t impacted = 0;       ///< impact rows
  std::size_t impact_weakened = 0;
  std::size_t waived = 0;         ///< weakened changes and impacts a live waiver accepts
  std::size_t failing = 0;        ///< unwaived weakened changes and impacts, plus expired waivers
};

/// Counts the findings of `diff` (after apply_waivers, when waivers are used).
DiffCounts diff_counts(const TrustDiff& diff);

/// 0 when nothing unwaived is weakened and no waiver expired; 1 otherwise. (Load failures are
/// the CLI's 2.)
int exit_status(const TrustDiff& diff);

/// Plain text for terminals and CI logs; each finding starts with its id. With `style.color`
/// the result line's `passes` is green and `fails` red.
std::string render_text(const TrustDiff& diff, const TextStyle& style = {});
/// Markdown for a pull-request comment: summary line, tables of weakened and strengthened
/// changes and of the impact, neutral changes in a collapsible block, and a waiver template.
std::string render_markdown(const TrustDiff& diff);
/// One JSON object: labels, summary counts and exit status, changes, impact, waivers.
std::string render_json(const TrustDiff& diff);

}  // namespace capsule
