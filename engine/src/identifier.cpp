// SPDX-License-Identifier: Apache-2.0
#include "capsule/identifier.hpp"

#include <cstdint>
#include <cstdio>

#include "capsule/escape.hpp"
#include "capsule/text.hpp"

namespace capsule {
namespace {

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

/// Characters that would let a label or path break out of a Markdown code span or table cell,
/// open an HTML tag, mention a user, or escape a quoted string.
bool is_markup(char c) { return c == '`' || c == '|' || c == '<' || c == '>' || c == '@' || c == '\\' || c == '"'; }

bool allowed(char c, IdentifierKind kind) {
  switch (kind) {
    case IdentifierKind::Name: return is_alnum(c) || c == '_' || c == '.' || c == '-';
    case IdentifierKind::Label: return c >= 0x20 && c <= 0x7e && !is_markup(c);
    case IdentifierKind::Path: return c > 0x20 && c <= 0x7e && !is_markup(c);
  }
  return false;
}

std::size_t max_length(IdentifierKind kind) {
  switch (kind) {
    case IdentifierKind::Name: return 128;
    case IdentifierKind::Label: return 200;
    case IdentifierKind::Path: return 1024;
  }
  return 0;
}

/// The character at `at` for a message: itself when printable ASCII, else its code point (a
/// UTF-8 sequence decoded when well formed, else the raw byte), never the raw bytes.
std::string describe(std::string_view text, std::size_t at) {
  const auto byte = static_cast<unsigned char>(text[at]);
  char buffer[16];
  if (byte > 0x20 && byte < 0x7f) return str("'", text[at], "'");
  if (byte == 0x20) return "a space";
  if (byte < 0x80) {
    std::snprintf(buffer, sizeof buffer, "U+%04X", byte);
    return str(buffer, " (a control character)");
  }
  const Utf8Step step = decode_utf8(text, at);
  if (step.code_point == kInvalidUtf8) {
    std::snprintf(buffer, sizeof buffer, "0x%02X", byte);
    return str("the byte ", buffer, " (not UTF-8)");
  }
  std::snprintf(buffer, sizeof buffer, "U+%04X", static_cast<unsigned>(step.code_point));
  return str(buffer, " (not ASCII)");
}

}  // namespace

std::optional<std::string> identifier_problem(std::string_view text, IdentifierKind kind) {
  if (text.empty()) return std::string("it is empty");
  if (text.size() > max_length(kind)) {
    return str("it is ", text.size(), " bytes long, more than the ", max_length(kind), " allowed");
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!allowed(text[i], kind)) return str("character ", i + 1, " is ", describe(text, i));
  }
  // Nothing starts with punctuation: a field can then never open a workflow command (`::error::`),
  // a Markdown heading or list item, or an option (`-x`), wherever a renderer puts it.
  // A path may start with `/`: lint then says the better thing, that it leaves the source root.
  const bool path_start =
      kind == IdentifierKind::Path && (text.front() == '_' || text.front() == '.' || text.front() == '/');
  if (!is_alnum(text.front()) && !path_start) {
    return str("it starts with ", describe(text, 0), ", not a letter or digit");
  }
  if (kind == IdentifierKind::Label) {
    if (text.front() == ' ' || text.back() == ' ') return std::string("it starts or ends with a space");
    if (text.find("  ") != std::string_view::npos) return std::string("it holds two spaces in a row");
  }
  return std::nullopt;
}

std::string_view identifier_rule(IdentifierKind kind) {
  switch (kind) {
    case IdentifierKind::Name:
      return "names are ASCII letters, digits, `_`, `.` and `-`, start with a letter or digit, and are at most 128 bytes";
    case IdentifierKind::Label:
      return "evidence names, symbols and build targets are printable ASCII words separated by single spaces, "
             "without ` | < > @ \\ or \", start with a letter or digit, and are at most 200 bytes";
    case IdentifierKind::Path:
      return "paths and keys are printable ASCII without spaces or ` | < > @ \\ \", start with a letter, digit, `_`, `.` or `/`, "
             "and are at most 1024 bytes";
  }
  return "";
}

}  // namespace capsule
