// SPDX-License-Identifier: Apache-2.0
#include "capsule/diag.hpp"

#include <algorithm>
#include <ostream>

#include "capsule/escape.hpp"
#include "capsule/vocab.hpp"

namespace capsule {

static_assert(detail::table_is_dense(kDiagCodeNames), "kDiagCodeNames must list every code in order");

std::string_view to_string(DiagCode code) { return kDiagCodeNames[static_cast<std::size_t>(code)].second; }

std::string_view to_string(Severity severity) {
  switch (severity) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

std::ostream& operator<<(std::ostream& out, const SourceLoc& where) {
  out << where.file;
  if (where.line != 0) out << ':' << where.line << ':' << where.column;
  return out;
}

std::string render(const Diagnostic& diagnostic, const TextStyle& style) {
  std::string out;
  // Every part but the code and severity may quote input: each goes through text_escape, so the
  // only line breaks are the ones placed here, and the only escape sequences are the style's.
  if (!diagnostic.where.file.empty()) {
    std::string locus = text_escape(diagnostic.where.file);
    if (diagnostic.where.line != 0) {
      locus += ':' + std::to_string(diagnostic.where.line) + ':' + std::to_string(diagnostic.where.column);
    }
    out += style.paint(Tone::Locus, locus + ":") + " ";
  }
  const Tone tone = diagnostic.severity == Severity::Error     ? Tone::Error
                    : diagnostic.severity == Severity::Warning ? Tone::Warning
                                                               : Tone::Note;
  out += style.paint(tone, std::string(to_string(diagnostic.severity)) + "[" + std::string(to_string(diagnostic.code)) + "]:");
  out += ' ';
  out += text_escape(diagnostic.message);
  for (const std::string& note : diagnostic.notes) out += "\n  " + style.paint(Tone::Note, "note:") + " " + text_escape(note);
  if (!diagnostic.help.empty()) out += "\n  " + style.paint(Tone::Help, "help:") + " " + text_escape(diagnostic.help);
  return out;
}

std::string render(const Diagnostics& diagnostics, const TextStyle& style) {
  std::string out;
  for (const Diagnostic& diagnostic : diagnostics) {
    out += render(diagnostic, style);
    out += '\n';
  }
  return out;
}

bool has_errors(const Diagnostics& diagnostics) {
  return std::any_of(diagnostics.begin(), diagnostics.end(),
                     [](const Diagnostic& d) { return d.severity == Severity::Error; });
}

std::array<std::size_t, 3> severity_counts(const Diagnostics& diagnostics) {
  std::array<std::size_t, 3> counts{};
  for (const Diagnostic& d : diagnostics) ++counts[static_cast<std::size_t>(d.severity)];
  return counts;
}

}  // namespace capsule
