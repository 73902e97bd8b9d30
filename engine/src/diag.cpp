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

std::string render(const Diagnostic& diagnostic) {
  std::string out;
  // Every part but the code and severity may quote input: each goes through text_escape, so the
  // only line breaks are the ones placed here.
  if (!diagnostic.where.file.empty()) {
    out += text_escape(diagnostic.where.file);
    if (diagnostic.where.line != 0) {
      out += ':' + std::to_string(diagnostic.where.line) + ':' + std::to_string(diagnostic.where.column);
    }
    out += ": ";
  }
  out += to_string(diagnostic.severity);
  out += '[';
  out += to_string(diagnostic.code);
  out += "]: ";
  out += text_escape(diagnostic.message);
  for (const std::string& note : diagnostic.notes) out += "\n  note: " + text_escape(note);
  if (!diagnostic.help.empty()) out += "\n  help: " + text_escape(diagnostic.help);
  return out;
}

std::string render(const Diagnostics& diagnostics) {
  std::string out;
  for (const Diagnostic& diagnostic : diagnostics) {
    out += render(diagnostic);
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
