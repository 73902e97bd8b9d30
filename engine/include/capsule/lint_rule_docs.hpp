// SPDX-License-Identifier: Apache-2.0
// The long text of every lint rule, in ONE place: SARIF's fullDescription, help (text and
// Markdown) and helpUri, and docs/lint-rules.md (generated from this table; a test compares the
// committed file with it) all come from here. kLintRules (capsule/lint.hpp) keeps the id,
// severity and one-line `checks`; this table follows it entry by entry, and a static_assert
// refuses a rule added there without its text here.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "capsule/lint.hpp"

namespace capsule {

/// What docs/lint-rules.md and SARIF's help say about one rule beyond its one-line `checks`.
/// Prose may put code in backticks (rendered as Markdown code spans; kept as typed in text).
/// Snippets are printable ASCII lines (a test checks it), shown as code blocks.
struct LintRuleDoc {
  DiagCode code;
  std::string_view why;      ///< why the rule matters
  std::string_view failing;  ///< a snippet lint reports under this rule
  std::string_view fixed;    ///< the same snippet, fixed (or what to do instead)
};

// clang-format off
inline constexpr std::array<LintRuleDoc, kLintRules.size()> kLintRuleDocs{{
    {DiagCode::ParseError,
     "A file that is not TOML cannot be read at all; every other command refuses the whole file.",
     "schema = 1\nmodule = \"mine\n", "schema = 1\nmodule = \"mine\"\n"},
    {DiagCode::IoError,
     "An unreadable catalog or profile would silently drop capsules or profiles from every plan. "
     "Lint exits 2, as for a usage error.",
     "$ chmod 000 catalogs/mine.toml\n$ capsule lint\n", "$ chmod 644 catalogs/mine.toml\n$ capsule lint\n"},
    {DiagCode::UnsupportedSchema,
     "The `schema` key says which format version a file is written in; a version this build does not "
     "know could mean keys it would misread.",
     "schema = 2\nmodule = \"mine\"\n", "schema = 1\nmodule = \"mine\"\n"},
    {DiagCode::UnknownKey,
     "A misspelled key would otherwise be ignored, and the value the author meant would never apply.",
     "[[capsule]]\nname = \"mine.relu\"\nop = \"relu\"\nprovder = \"reference\"\n",
     "[[capsule]]\nname = \"mine.relu\"\nop = \"relu\"\nprovider = \"reference\"\n"},
    {DiagCode::WrongType,
     "A value of the wrong TOML type (a string for a list, an integer for a string) has no meaning the "
     "loader could guess.",
     "modules = \"reference\"\n", "modules = [\"reference\"]\n"},
    {DiagCode::UnknownSpelling,
     "Devices, providers, ops and the other vocabulary are closed sets; a typo would name nothing. The "
     "finding suggests the nearest spelling.",
     "op = \"rleu\"\n", "op = \"relu\"\n"},
    {DiagCode::MissingField,
     "Without the key the capsule or profile is incomplete, and the planner would have to guess.",
     "[[capsule]]\nname = \"mine.relu\"\n", "[[capsule]]\nname = \"mine.relu\"\nop = \"relu\"\n"},
    {DiagCode::InvalidValue,
     "A well-typed value can still be meaningless (an empty name, a sample rate above 1); the loader "
     "refuses it rather than plan with it.",
     "name = \"\"\n", "name = \"mine.relu\"\n"},
    {DiagCode::DuplicateModule,
     "Profiles list modules by name; two catalogs with one module name make the list ambiguous.",
     "# catalogs/a.toml and catalogs/b.toml both say\nmodule = \"mine\"\n",
     "# catalogs/b.toml\nmodule = \"mine-extra\"\n"},
    {DiagCode::DuplicateIdentity,
     "Two capsules with the same name, op, provider and device in one profile leave the planner two "
     "equal choices and the report no way to tell them apart.",
     "[[capsule]]\nname = \"mine.relu\"\nop = \"relu\"\n\n[[capsule]]\nname = \"mine.relu\"\nop = \"relu\"\n",
     "[[capsule]]\nname = \"mine.relu\"\nop = \"relu\"\n\n[[capsule]]\nname = \"mine.relu_fast\"\nop = \"relu\"\n"},
    {DiagCode::DuplicateProfile,
     "Commands select a profile by name; two profiles with one name make `--profile` ambiguous.",
     "# profiles/a.toml and profiles/b.toml both say\nname = \"fast\"\n",
     "# profiles/b.toml\nname = \"fast-cuda\"\n"},
    {DiagCode::MisalignedContract,
     "Each contract field stands for one obligation; a claim filed under the wrong field would let a "
     "value test pass for a shape check.",
     "contracts.shape = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", name = \"reference.values\" } }\n",
     "contracts.value = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", name = \"reference.values\" } }\n"},
    {DiagCode::MissingTrustReason,
     "Trust without a stated reason cannot be reviewed; reviewers and the trust diff need the why.",
     "trust = \"trusted-external\"\n",
     "trust = \"trusted-external\"\nreason = \"vendor kernel, validated by the vendor's suite\"\nexpires = 2027-06-30\n"},
    {DiagCode::ExpiredTrust,
     "Trust is granted for a period; past `expires` it must be reviewed again, not carried on silently. "
     "The loaders only warn, so plans still run while the review is pending.",
     "trust = \"trusted-external\"\nreason = \"vendor kernel\"\nexpires = 2020-01-01\n",
     "trust = \"trusted-external\"\nreason = \"vendor kernel, re-reviewed\"\nexpires = 2027-06-30\n"},
    {DiagCode::UnplannableProfile,
     "A profile whose own availability or assurance admits no capsule fails every plan; mark a "
     "deliberate placeholder with `plans_nothing = true`.",
     "device = \"cuda\"\nmodules = [\"reference\"]\n\n[availability]\ndevices = [\"cpu\"]\nproviders = [\"reference\"]\n",
     "device = \"cpu\"\nmodules = [\"reference\"]\n\n[availability]\ndevices = [\"cpu\"]\nproviders = [\"reference\"]\n"},
    {DiagCode::UnknownModule,
     "A profile naming a module no catalog defines would plan without the capsules its author expected.",
     "modules = [\"reference\", \"refrence\"]\n", "modules = [\"reference\"]\n"},
    {DiagCode::UnknownTestSuite,
     "Evidence is not a label: a test suite the build does not have proves nothing about the capsule.",
     "contracts.value = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", name = \"reference.valeus\" } }\n",
     "contracts.value = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", name = \"reference.values\" } }\n"},
    {DiagCode::UnknownEvidenceSource,
     "A fuzz oracle or shared definition the build does not declare proves nothing about the capsule.",
     "evidence = { kind = \"fuzz-oracle\", name = \"no.such.oracle\" }\n",
     "evidence = { kind = \"fuzz-oracle\", name = \"<an oracle the build's manifest declares>\" }\n"},
    {DiagCode::UncoveredEvidence,
     "A suite that exists but tests another op, provider, device or obligation does not back this "
     "capsule's claim; a CUDA capsule cannot borrow the reference suite.",
     "device = \"cuda\"\ncontracts.value = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", name = \"reference.values\" } }\n",
     "device = \"cuda\"\ncontracts.value = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", name = \"<a suite covering the cuda capsule>\" } }\n"},
    {DiagCode::UnknownRuntimeGuard,
     "A guard the handler does not declare does not run; binding would refuse the capsule.",
     "evidence = { kind = \"runtime-guard\", name = \"shape chekcs\" }\n",
     "evidence = { kind = \"runtime-guard\", name = \"shape checks\" }\n"},
    {DiagCode::MissingProvenanceFile,
     "Provenance must point at real code a reviewer can read; a stale path hides where the kernel lives.",
     "provenance = [{ path = \"handlers/libtorch/src/kernels_nn.cc\", symbol = \"matmul_forward\" }]\n",
     "provenance = [{ path = \"handlers/libtorch/src/kernels_nn.cpp\", symbol = \"matmul_forward\" }]\n"},
    {DiagCode::MissingProvenanceSymbol,
     "A symbol that is not in the named file (as a whole word) means the provenance went stale.",
     "provenance = [{ path = \"handlers/libtorch/src/kernels_nn.cpp\", symbol = \"matmul_fwd\" }]\n",
     "provenance = [{ path = \"handlers/libtorch/src/kernels_nn.cpp\", symbol = \"matmul_forward\" }]\n"},
    {DiagCode::NoTestSuiteManifest,
     "Without the build's manifest, lint cannot check test-suite, fuzz-oracle or shared-definition "
     "evidence, so it says so once instead of passing them.",
     "$ capsule lint    # a binary moved away from its share/capsule/test-suites.toml\n",
     "$ capsule lint --test-suites build/share/capsule/test-suites.toml\n"},
    {DiagCode::NoCompiledHandler,
     "This build cannot run the capsule (its provider is not compiled in), so its evidence cannot be "
     "checked here; a CI job that builds every provider can `--deny` it.",
     "provider = \"cuda\"    # in a build without the CUDA provider\n",
     "$ capsule lint --allow no-compiled-handler    # or build the provider\n"},
    {DiagCode::UnverifiableEvidence,
     "Evidence of capsules without a handler here is listed, so a reader knows what this build did not check.",
     "provider = \"libtorch\"\ncontracts.shape = { claim = \"shape-safety\", evidence = { kind = \"runtime-guard\", name = \"aten checks\" } }\n",
     "$ capsule lint    # in a build with the LibTorch provider\n"},
    {DiagCode::UnlistedHandler,
     "A compiled handler no capsule mentions can never be planned; it is dead code or a catalog entry is missing.",
     "# a handler for relu on cpu is registered, no catalog names op \"relu\" for it\n",
     "[[capsule]]\nname = \"mine.relu\"\nop = \"relu\"\n"},
    {DiagCode::HandlerVjpMismatch,
     "Binding refuses a capsule whose VJP mode its handler does not run (backend-vjp needs a backward "
     "of its own, external-autograd an autograd region).",
     "vjp = \"backend-vjp\"    # the handler has no backward\n", "vjp = \"torchlean-tape\"\n"},
    {DiagCode::NothingToLint,
     "A green lint must mean something was read: an empty or wrong directory would pass vacuously.",
     "$ capsule lint --catalogs docs\n", "$ capsule lint --catalogs catalogs\n"},
    {DiagCode::CheckedOnTrustedBoundary,
     "`checked` promises machine-checked evidence; an obligation resting on a trusted boundary is trust, "
     "not a check.",
     "trust = \"checked\"\ncontracts.value = { claim = \"value-refinement\", evidence = { kind = \"trusted-boundary\", reason = \"vendor\", owner = \"ml\", expires = 2027-06-30 } }\n",
     "trust = \"trusted-external\"\nreason = \"vendor kernel\"\nexpires = 2027-06-30\n"},
    {DiagCode::MissingEvidence,
     "`missing` states a gap honestly, but every acceptance preset rejects it at the gate.",
     "contracts.value = { claim = \"value-refinement\", evidence = { kind = \"missing\" } }\n",
     "contracts.value = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", name = \"reference.values\" } }\n"},
    {DiagCode::EvidenceNotPassed,
     "A named suite that failed, or never ran, on this build does not back the claim here.",
     "$ capsule lint --ledger build/ledger.json    # reference.values failed a case\n",
     "$ ctest -R reference && capsule lint --ledger build/ledger.json\n"},
    {DiagCode::EvidenceNotRunHere,
     "Evidence of capsules this build cannot run has not run here; the warning says where it passed, if anywhere.",
     "$ capsule lint --ledger build/ledger.json    # cuda capsules in a CPU build\n",
     "$ capsule lint --ledger merged-ledger.json    # a ledger merged with the GPU job's\n"},
    {DiagCode::UnknownChecker,
     "A checker the program does not register checks nothing; the finding suggests the nearest name.",
     "evidence = { kind = \"checker\", name = \"freivalds.matmull\", coverage = \"full\" }\n",
     "evidence = { kind = \"checker\", name = \"freivalds.matmul\", coverage = \"full\" }\n"},
    {DiagCode::CheckerMismatch,
     "A registered checker for another op, device or obligation, or with less coverage than claimed, "
     "does not back this claim.",
     "op = \"matmul\"\ncontracts.vjp = { claim = \"vjp-refinement\", mode = \"torchlean-tape\", evidence = { kind = \"checker\", name = \"freivalds.matmul\", coverage = \"full\" } }\n",
     "op = \"matmul\"\ncontracts.vjp = { claim = \"vjp-refinement\", mode = \"torchlean-tape\", evidence = { kind = \"checker\", name = \"freivalds.matmul.vjp\", coverage = \"full\" } }\n"},
    {DiagCode::InvalidIdentifier,
     "Names are printed in reports, diffs and annotations; a newline, a bidi control or a look-alike "
     "character in one could forge a report line or pass for another name.",
     "name = \"mine.relu\\nerror[expired-trust]: forged\"\n", "name = \"mine.relu\"\n"},
}};
// clang-format on

/// True when kLintRuleDocs follows kLintRules entry by entry, with text for each.
constexpr bool lint_rule_docs_complete() {
  for (std::size_t i = 0; i < kLintRules.size(); ++i) {
    const LintRuleDoc& doc = kLintRuleDocs[i];
    if (doc.code != kLintRules[i].code || doc.why.empty() || doc.failing.empty() || doc.fixed.empty()) return false;
  }
  return true;
}
static_assert(lint_rule_docs_complete(), "every rule of kLintRules needs its text in kLintRuleDocs, in the same order");

/// The text of `code`'s rule, or nullptr when lint never reports it.
const LintRuleDoc* find_lint_rule_doc(DiagCode code);

/// The absolute http(s) base of the docs (CMake cache variable CAPSULE_DOCS_URL, validated at
/// configure time, ending in `/`), or empty when the build leaves it unset.
std::string_view docs_url();

/// `<docs_url>lint-rules.md#<rule id>`, or empty when docs_url() is.
std::string lint_rule_help_uri(DiagCode code);

/// The rule's friendly name for SARIF (`reportingDescriptor.name`): its id in PascalCase.
std::string lint_rule_friendly_name(DiagCode code);

/// One sentence or two for SARIF's fullDescription: what the rule checks and why.
std::string lint_rule_full_description(const LintRule& rule);

/// The rule's help as plain text (SARIF help.text).
std::string lint_rule_help_text(const LintRule& rule);

/// The rule's help as Markdown (SARIF help.markdown and the body of its docs/lint-rules.md
/// section); prose goes through markdown_escape / markdown_code.
std::string lint_rule_help_markdown(const LintRule& rule);

/// All of docs/lint-rules.md.
std::string lint_rules_markdown();

}  // namespace capsule
