// SPDX-License-Identifier: Apache-2.0
// The character sets of identifiers. A reviewer reads names in a trust diff and in a plan; a
// name that can hold a newline, a bidi override or a Cyrillic lookalike can forge a report line
// or pass for another name (issue 8, "report forgery"). So names are plain ASCII from a small
// documented set, checked once at load, and rejected with a located diagnostic. Free text
// (summaries, reasons, owners) may stay Unicode; renderers neutralise it when they print it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace capsule {

enum class IdentifierKind {
  /// Capsule, module, profile and graph names, and the module names a profile lists:
  /// ASCII letters, digits, `_`, `.`, `-`, starting with a letter or digit, at most 128 bytes.
  Name,
  /// Evidence names (runtime guards, test suites, shared definitions, fuzz oracles) and
  /// provenance symbols and build targets: printable ASCII words separated by single spaces,
  /// without `` ` ``, `|`, `<`, `>`, `@`, `\` or `"`, starting with a letter or digit, at most
  /// 200 bytes.
  Label,
  /// Provenance paths and graph payload keys: printable ASCII without spaces, `` ` ``, `|`,
  /// `<`, `>`, `@`, `\` or `"`, starting with a letter, digit, `_`, `.` or `/`, at most 1024 bytes.
  Path,
};

/// nullopt when `text` is a valid identifier of `kind`; otherwise a sentence that names the
/// first offending character (as U+XXXX for anything outside printable ASCII) and its position.
std::optional<std::string> identifier_problem(std::string_view text, IdentifierKind kind);

/// The rule for `kind`, as a help line: what an identifier of that kind may hold.
std::string_view identifier_rule(IdentifierKind kind);

}  // namespace capsule
