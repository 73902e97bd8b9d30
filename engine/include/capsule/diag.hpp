// SPDX-License-Identifier: Apache-2.0
// Diagnostics: every user-facing failure of the engine is one of these values, with a stable
// code, a file:line:col position where a file is involved, the offending value and what was
// expected. Loaders collect them into a `Diagnostics` list so one run reports every problem.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "capsule/text_style.hpp"

namespace capsule {

/// Stable diagnostic codes. The kebab-case spellings in `kDiagCodeNames` are a contract: tests,
/// CI annotations and users match on them, so a rename is a breaking change.
enum class DiagCode : std::uint8_t {
  ParseError,          // the file is not valid TOML
  IoError,             // the file or directory cannot be read
  UnsupportedSchema,   // `schema` is missing or not a version this build reads
  UnknownKey,          // a key the format does not define (often a typo)
  WrongType,           // a key holds the wrong TOML type
  UnknownSpelling,     // a vocabulary value (device, op, ...) that is not in docs/format.md#vocabulary
  MissingField,        // a required key is absent after defaults are applied
  InvalidValue,        // a well-typed value that breaks a rule (empty name, bad id, ...)
  InvalidIdentifier,   // a name, evidence name, symbol or path outside its ASCII set (capsule/identifier.hpp)
  DuplicateModule,     // two catalogs declare the same module name
  DuplicateIdentity,   // two capsules share (name, op, provider, device)
  DuplicateProfile,    // two profile files declare the same profile name
  MisalignedContract,  // a contract's claim is not the obligation of its field (§3.1)
  MissingTrustReason,  // a trusted-external capsule or trusted-boundary evidence without `reason`
  ExpiredTrust,        // a trusted boundary or trusted-external capsule is past `expires`
  UnplannableProfile,  // a profile that loads but can plan nothing (device not available, no trust)
  UnknownModule,       // a profile names a module no catalog declares
  UnknownProfile,      // a profile name that was not loaded
  InvalidGraph,        // graph ids not unique, inputs not earlier nodes, unknown node kind
  // Evidence integrity, checked by `capsule lint` against this build (capsule/lint.hpp).
  UnknownTestSuite,         // test-suite evidence names no suite in the build's manifest
  UnknownEvidenceSource,    // fuzz-oracle or shared-definition evidence names none the manifest declares
  UncoveredEvidence,        // evidence names a suite, oracle or definition that does not cover the capsule
  UnknownRuntimeGuard,      // runtime-guard evidence names no guard of the capsule's handler
  MissingProvenanceFile,    // a provenance path that does not exist under the source root
  MissingProvenanceSymbol,  // a provenance symbol that does not occur in its file
  NoTestSuiteManifest,      // no manifest of test suites was found, so suites go unchecked
  NoCompiledHandler,        // a capsule no handler of this build can run
  UnverifiableEvidence,     // evidence of such a capsule that this build cannot check
  UnlistedHandler,          // a compiled handler that no loaded capsule mentions
  HandlerVjpMismatch,       // a capsule's VJP mode needs what its compiled handler lacks
  NothingToLint,            // lint was given a directory without files of its kind, or no root
  CheckedOnTrustedBoundary, // a capsule labelled `checked` rests an obligation on a trusted boundary
  EvidenceNotPassed,        // with --ledger: evidence of a runnable capsule has no passing ledger entry for this build
  EvidenceNotRunHere,       // with --ledger: evidence of capsules this build cannot run never passed on this build
  NoAdmissibleCapsule, // planning found no capsule for an op (§3.4)
  GateRejected,        // the acceptance gate refused a plan (§5.4)
  Usage,               // command-line misuse
  GitError,            // git could not read a revision: no git binary, refused repository, unknown revision
  NonRegularFile,      // a `*.toml` entry in catalogs/ or profiles/ that is not a regular file
  MissingEvidence,     // lint: an obligation declares `missing` evidence (nothing stands behind its claim)
  UnknownChecker,      // lint: checker evidence names no checker the program links
  CheckerMismatch,     // lint: the named checker checks another op, device, coverage or obligation
};

inline constexpr std::array<std::pair<DiagCode, std::string_view>, 42> kDiagCodeNames{{
    {DiagCode::ParseError, "parse-error"},
    {DiagCode::IoError, "io-error"},
    {DiagCode::UnsupportedSchema, "unsupported-schema"},
    {DiagCode::UnknownKey, "unknown-key"},
    {DiagCode::WrongType, "wrong-type"},
    {DiagCode::UnknownSpelling, "unknown-spelling"},
    {DiagCode::MissingField, "missing-field"},
    {DiagCode::InvalidValue, "invalid-value"},
    {DiagCode::InvalidIdentifier, "invalid-identifier"},
    {DiagCode::DuplicateModule, "duplicate-module"},
    {DiagCode::DuplicateIdentity, "duplicate-identity"},
    {DiagCode::DuplicateProfile, "duplicate-profile"},
    {DiagCode::MisalignedContract, "misaligned-contract"},
    {DiagCode::MissingTrustReason, "missing-trust-reason"},
    {DiagCode::ExpiredTrust, "expired-trust"},
    {DiagCode::UnplannableProfile, "unplannable-profile"},
    {DiagCode::UnknownModule, "unknown-module"},
    {DiagCode::UnknownProfile, "unknown-profile"},
    {DiagCode::InvalidGraph, "invalid-graph"},
    {DiagCode::UnknownTestSuite, "unknown-test-suite"},
    {DiagCode::UnknownEvidenceSource, "unknown-evidence-source"},
    {DiagCode::UncoveredEvidence, "uncovered-evidence"},
    {DiagCode::UnknownRuntimeGuard, "unknown-runtime-guard"},
    {DiagCode::MissingProvenanceFile, "missing-provenance-file"},
    {DiagCode::MissingProvenanceSymbol, "missing-provenance-symbol"},
    {DiagCode::NoTestSuiteManifest, "no-test-suite-manifest"},
    {DiagCode::NoCompiledHandler, "no-compiled-handler"},
    {DiagCode::UnverifiableEvidence, "unverifiable-evidence"},
    {DiagCode::UnlistedHandler, "unlisted-handler"},
    {DiagCode::HandlerVjpMismatch, "handler-vjp-mismatch"},
    {DiagCode::NothingToLint, "nothing-to-lint"},
    {DiagCode::CheckedOnTrustedBoundary, "checked-on-trusted-boundary"},
    {DiagCode::EvidenceNotPassed, "evidence-not-passed"},
    {DiagCode::EvidenceNotRunHere, "evidence-not-run-here"},
    {DiagCode::NoAdmissibleCapsule, "no-admissible-capsule"},
    {DiagCode::GateRejected, "gate-rejected"},
    {DiagCode::Usage, "usage"},
    {DiagCode::GitError, "git-error"},
    {DiagCode::NonRegularFile, "non-regular-file"},
    {DiagCode::MissingEvidence, "missing-evidence"},
    {DiagCode::UnknownChecker, "unknown-checker"},
    {DiagCode::CheckerMismatch, "checker-mismatch"},
}};

std::string_view to_string(DiagCode code);

/// Error fails the command; a warning is shown and does not; a note is information (lint's
/// "cannot check this here"). `capsule lint --deny` can raise any of them to an error.
enum class Severity : std::uint8_t { Error, Warning, Note };

std::string_view to_string(Severity severity);

/// A position in a source file; `line == 0` means "the whole file" (I/O errors).
struct SourceLoc {
  std::string file;
  std::uint32_t line = 0;
  std::uint32_t column = 0;

  friend bool operator==(const SourceLoc&, const SourceLoc&) = default;
};

/// `file:line:col`, or just `file` when the line is unknown.
std::ostream& operator<<(std::ostream& out, const SourceLoc& where);

struct Diagnostic {
  Severity severity = Severity::Error;
  DiagCode code = DiagCode::InvalidValue;
  SourceLoc where;
  std::string message;             ///< lower-case, names the entity, the value and the expectation
  std::vector<std::string> notes;  ///< extra context, e.g. where a duplicate was first declared
  std::string help;                ///< a suggestion, usually "did you mean `x`?"
};

using Diagnostics = std::vector<Diagnostic>;

/// GCC-shaped rendering so editors can jump: `file:line:col: error[code]: message`, then
/// indented `note:` and `help:` lines. With `style.color`, the locus is bold, the severity and
/// rule coloured by severity, and `note`/`help` coloured (capsule/text_style.hpp).
std::string render(const Diagnostic& diagnostic, const TextStyle& style = {});
std::string render(const Diagnostics& diagnostics, const TextStyle& style = {});

bool has_errors(const Diagnostics& diagnostics);

/// How many diagnostics have each severity, indexed by Severity.
std::array<std::size_t, 3> severity_counts(const Diagnostics& diagnostics);

}  // namespace capsule
