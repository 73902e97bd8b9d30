// SPDX-License-Identifier: Apache-2.0
// `capsule lint` beyond loading. Evidence is not a label: a test suite, fuzz oracle or shared
// definition must be one this build declares, covering the capsule's op, provider, device and
// obligation (capsule/evidence_manifest.hpp); a runtime guard must be one the capsule's compiled handler declares, and provenance
// must name a real file that holds its symbol. This header holds every lint rule (a stable id,
// which is a diagnostic code, and a default severity), those evidence-integrity checks, and the
// `--deny`/`--allow` overrides CI uses. The engine includes no handler header: callers describe
// their compiled handlers as `LintHandler` values.
#pragma once

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "capsule/diag.hpp"
#include "capsule/evidence_ledger.hpp"
#include "capsule/evidence_manifest.hpp"
#include "capsule/known_checker.hpp"
#include "capsule/load.hpp"
#include "capsule/result.hpp"
#include "capsule/vocab.hpp"

namespace capsule {

/// How `capsule lint` treats one diagnostic code.
struct LintRule {
  DiagCode code;
  Severity severity;  ///< default severity under lint (the loaders may report it more mildly)
  /// As an error, the rule keeps its file or profile out of every other command, so `--allow`
  /// may not silence it: a green lint would promise plans that then refuse to load.
  bool blocks_loading;
  std::string_view checks;  ///< one line: what the rule checks (help, SARIF, docs/decisions.md)
};

/// Every rule lint can report, in the order docs/decisions.md lists them.
inline constexpr std::array<LintRule, 35> kLintRules{{
    {DiagCode::ParseError, Severity::Error, true, "the file is valid TOML"},
    {DiagCode::IoError, Severity::Error, true, "every file and directory can be read"},
    {DiagCode::UnsupportedSchema, Severity::Error, true, "`schema` is a version this build reads"},
    {DiagCode::UnknownKey, Severity::Error, true, "every key is one the format defines"},
    {DiagCode::WrongType, Severity::Error, true, "every key holds the TOML type the format expects"},
    {DiagCode::UnknownSpelling, Severity::Error, true,
     "devices, providers, ops and other vocabulary are spelled as in docs/format.md#vocabulary"},
    {DiagCode::MissingField, Severity::Error, true, "required keys are present once [defaults] are applied"},
    {DiagCode::InvalidValue, Severity::Error, true, "well-typed values obey their rules (non-empty names, ...)"},
    {DiagCode::DuplicateModule, Severity::Error, true, "module names are unique across the loaded catalogs"},
    {DiagCode::DuplicateIdentity, Severity::Error, true,
     "no two capsules a profile combines share name, op, provider and device"},
    {DiagCode::DuplicateProfile, Severity::Error, true, "profile names are unique"},
    {DiagCode::MisalignedContract, Severity::Error, true,
     "each contract's claim is the obligation of its field (§3.1)"},
    {DiagCode::MissingTrustReason, Severity::Error, true,
     "trusted-external capsules and trusted-boundary evidence say why (`reason`)"},
    {DiagCode::ExpiredTrust, Severity::Error, false,
     "trusted-external capsules and trusted boundaries are not past `expires`"},
    {DiagCode::UnplannableProfile, Severity::Error, false,
     "a profile's own availability and assurance let it plan something"},
    {DiagCode::UnknownModule, Severity::Error, true, "every module a profile lists is loaded"},
    {DiagCode::UnknownTestSuite, Severity::Error, false,
     "test-suite evidence of a capsule with a compiled handler names a suite of this build"},
    {DiagCode::UnknownEvidenceSource, Severity::Error, false,
     "fuzz-oracle and shared-definition evidence of a capsule with a compiled handler names one this build declares"},
    {DiagCode::UncoveredEvidence, Severity::Error, false,
     "a suite, oracle or definition of this build that evidence names covers the capsule's op, provider, device "
     "and obligation"},
    {DiagCode::UnknownRuntimeGuard, Severity::Error, false,
     "runtime-guard evidence names a guard the capsule's compiled handler declares"},
    {DiagCode::MissingProvenanceFile, Severity::Error, false, "every provenance path exists under the source root"},
    {DiagCode::MissingProvenanceSymbol, Severity::Error, false,
     "every provenance symbol occurs, as a whole word, in its file"},
    {DiagCode::NoTestSuiteManifest, Severity::Warning, false, "the build's manifest of test suites was found"},
    {DiagCode::NoCompiledHandler, Severity::Warning, false, "every capsule has a compiled handler in this build"},
    {DiagCode::UnverifiableEvidence, Severity::Note, false,
     "evidence of capsules without a handler that this build cannot check"},
    {DiagCode::UnlistedHandler, Severity::Warning, false, "every compiled handler is mentioned by a loaded capsule"},
    {DiagCode::HandlerVjpMismatch, Severity::Warning, false,
     "a capsule's VJP mode is one its compiled handler runs (backend-vjp: a backward of its own; "
     "external-autograd: an autograd region)"},
    {DiagCode::NothingToLint, Severity::Error, true,
     "every catalog directory holds catalog files, and the source root exists"},
    {DiagCode::CheckedOnTrustedBoundary, Severity::Error, false,
     "a capsule labelled `checked` rests no obligation on trusted-boundary evidence"},
    {DiagCode::MissingEvidence, Severity::Warning, false,
     "no obligation declares `missing` evidence (every acceptance preset rejects it at the gate)"},
    {DiagCode::EvidenceNotPassed, Severity::Error, false,
     "with --ledger: test-suite and fuzz-oracle evidence of a capsule with a compiled handler passed on this build"},
    {DiagCode::EvidenceNotRunHere, Severity::Warning, false,
     "with --ledger: evidence of capsules without a compiled handler here, or whose handler's device is unusable here, is listed as not run here"},
    {DiagCode::UnknownChecker, Severity::Error, false,
     "checker evidence names a checker this program registers (programs that link checkers only)"},
    {DiagCode::CheckerMismatch, Severity::Error, false,
     "the registered checker that evidence names checks the capsule's op and device, the evidence's obligation, "
     "with the coverage the catalog claims"},
    // Last, so the SARIF rule indices of the rules above stay as they were.
    {DiagCode::InvalidIdentifier, Severity::Error, true,
     "names, evidence names, symbols and paths use only their plain-ASCII character sets"},
}};

/// The rule for `code`, or nullptr when lint never reports it (planning, gate and usage codes).
const LintRule* find_lint_rule(DiagCode code);
/// The rule whose id (the code's kebab-case name) is `id`, or nullptr.
const LintRule* find_lint_rule(std::string_view id);

/// A compiled handler as lint sees it: the key it registers under and the guards it declares.
struct LintHandler {
  std::string name;
  Op op = Op::Custom;
  Provider provider = Provider::Reference;
  Device device = Device::Cpu;
  std::vector<std::string> guards;
  SourceLoc where;  ///< registration site, when known
  bool backend_vjp = false;      ///< computes its own backward (what backend-vjp capsules need)
  bool autograd_region = false;  ///< opens an autograd boundary (what external-autograd capsules need)
  /// Why the handler's device cannot run here (its runtime's probe: no driver, no device), or
  /// empty. Filled for `lint --ledger` only, which needs it: a handler whose device is unusable
  /// cannot have run its suites on this machine.
  std::string device_unusable;
};

struct EvidenceCheckInputs {
  std::vector<LintHandler> handlers;  ///< every compiled handler of this build
  /// The build's evidence manifest (test suites, fuzz oracles, shared definitions and the cases
  /// each covers); without one, a single no-test-suite-manifest warning replaces those checks.
  std::optional<EvidenceManifest> suites;
  std::vector<std::string> manifest_searched;  ///< where a manifest was looked for (for that warning)
  /// The directory provenance paths are relative to. Unset: the directory above each catalog's
  /// own directory (the project root for `catalogs/x.toml`). Lint reads only files git tracks
  /// there (any regular file when it is not a git work tree), never under `.git`, never through
  /// a symbolic link, at most 8 MiB each; a root it cannot read is an io-error.
  std::optional<std::filesystem::path> source_root;
  /// False forces the component-by-component O_NOFOLLOW walk instead of openat2 (for tests).
  bool use_openat2 = true;
  /// The checkers the program links (capsule/known_checker.hpp). Set: checker evidence must name
  /// one of them that checks the capsule's op, device and obligation with the claimed coverage
  /// (unknown-checker, checker-mismatch). Unset (a program without checkers): each checker name
  /// is an unverifiable-evidence note.
  std::optional<std::vector<KnownChecker>> checkers;
};

/// The evidence-integrity findings for every loaded capsule: the workspace's modules and the
/// modules profiles prepend through `with_catalogs`. A capsule whose (op, provider, device) has
/// no compiled handler cannot have its guards checked, nor suites the manifest lacks (they may
/// belong to a provider this build leaves out); such capsules give one no-compiled-handler
/// warning and one unverifiable-evidence note per module instead of errors. Evidence written
/// once in [defaults] is reported once, with the other capsules that share it in a note.
/// Evidence naming a suite, oracle or definition the manifest has must be covered by it whether
/// or not the capsule has a handler: a CUDA capsule cannot borrow the reference suite's name.
/// It ends with check_profile_intent's findings.
Diagnostics check_evidence(const Workspace& workspace, const EvidenceCheckInputs& inputs);

/// With `capsule lint --ledger`: every test-suite and fuzz-oracle evidence of every loaded
/// capsule judged against the ledger for this build (capsule/evidence_ledger.hpp). Evidence of a
/// capsule with a compiled handler that did not pass here is an evidence-not-passed error at the
/// evidence, with the reason (the failing case, or why it counts as not run). Capsules without a
/// handler, or whose handler's device is unusable on this machine (`device_unusable`), cannot
/// have run here: one evidence-not-run-here warning per module lists those whose evidence never
/// passed here, with where it passed elsewhere when a merged run says so.
Diagnostics check_ledger(const Workspace& workspace, const std::vector<LintHandler>& handlers,
                         const EvidenceLedger& ledger, const EnvironmentFingerprint& here);

/// unplannable-profile findings that need the catalogs: a profile that plans no op (no capsule
/// of its modules is admitted) unless it is marked `plans_nothing = true`, and a marked profile
/// that does plan an op.
Diagnostics check_profile_intent(const Workspace& workspace);

/// What `capsule lint` was asked to check.
struct LintScope {
  std::vector<std::filesystem::path> catalog_dirs;
  std::vector<std::filesystem::path> profile_dirs;
  std::optional<std::filesystem::path> source_root;
};

/// Errors for a lint that would check nothing: a catalog directory that holds no catalog file
/// (profile directories may be empty), no catalog found at all, or a `--source-root` that is not a directory. A green
/// lint must mean something was read.
Diagnostics check_lint_scope(const Workspace& workspace, const LintScope& scope);

/// The top of the git work tree holding the first catalog directory, or nullopt (no catalog
/// directory, not a directory, outside a work tree, or git could not say). It asks git, so a run
/// computes it once and hands it to annotation_root and find_lint_config.
std::optional<std::filesystem::path> catalogs_work_tree_top(const LintScope& scope);

/// The directory SARIF and GitHub annotations name files relative to: the top of the git work
/// tree holding the first catalog directory (annotations land on repository paths even when
/// catalogs live in `ml/catalogs`), else `--source-root`, else the directory above the first
/// catalog directory. `work_tree_top` is catalogs_work_tree_top(scope); the one-argument form
/// asks git itself.
std::filesystem::path annotation_root(const LintScope& scope, const std::optional<std::filesystem::path>& work_tree_top);
std::filesystem::path annotation_root(const LintScope& scope);

/// `--deny RULE`, `--allow RULE` and `--deny warnings`, and a configuration file's severities
/// (capsule/lint_config.hpp).
struct RuleOverrides {
  std::vector<DiagCode> deny;
  std::vector<DiagCode> allow;  ///< never a rule that blocks loading
  bool deny_warnings = false;
  /// A rule's severity in place of its default; never below error for a rule that blocks loading.
  std::vector<std::pair<DiagCode, Severity>> severity;
};

/// Gives every diagnostic its rule's lint severity (or the overridden one), then drops allowed
/// rules (an allowed rule wins over `--deny warnings`) and raises denied rules, and with
/// `deny_warnings` every warning, to errors.
Diagnostics apply_lint_rules(Diagnostics diagnostics, const RuleOverrides& overrides);

}  // namespace capsule
