// SPDX-License-Identifier: Apache-2.0
#include "capsule/diag_format.hpp"

#include <set>

#include "capsule/json.hpp"
#include "capsule/text.hpp"

namespace capsule {
namespace {

std::string full_message(const Diagnostic& d) {
  std::string out = d.message;
  for (const std::string& note : d.notes) out += "\nnote: " + note;
  if (!d.help.empty()) out += "\nhelp: " + d.help;
  return out;
}

// GitHub workflow commands need %, CR and LF escaped in the message, and also , and : in properties.
std::string github_escape(std::string_view text, bool property) {
  std::string out;
  for (const char c : text) {
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else if (property && c == ':') out += "%3A";
    else if (property && c == ',') out += "%2C";
    else out += c;
  }
  return out;
}

}  // namespace

std::string format_diagnostics(const Diagnostics& diagnostics, DiagFormat format, const std::string& tool_version) {
  switch (format) {
    case DiagFormat::Text:
      return render(diagnostics);
    case DiagFormat::Json: {
      JsonWriter json;
      json.begin_object().key("diagnostics").begin_array();
      for (const Diagnostic& d : diagnostics) {
        json.begin_object()
            .field("severity", to_string(d.severity))
            .field("code", to_string(d.code))
            .field("file", d.where.file)
            .field("line", static_cast<std::int64_t>(d.where.line))
            .field("column", static_cast<std::int64_t>(d.where.column))
            .field("message", d.message)
            .string_array("notes", d.notes)
            .field("help", d.help)
            .end_object();
      }
      json.end_array();
      std::int64_t errors = 0;
      for (const Diagnostic& d : diagnostics) errors += d.severity == Severity::Error ? 1 : 0;
      json.field("errors", errors).field("warnings", static_cast<std::int64_t>(diagnostics.size()) - errors);
      json.end_object();
      return json.str() + "\n";
    }
    case DiagFormat::Sarif: {
      JsonWriter json;
      json.begin_object()
          .field("$schema", "https://json.schemastore.org/sarif-2.1.0.json")
          .field("version", "2.1.0")
          .key("runs")
          .begin_array()
          .begin_object()
          .key("tool")
          .begin_object()
          .key("driver")
          .begin_object()
          .field("name", "capsule")
          .field("version", tool_version)
          .key("rules")
          .begin_array();
      std::set<DiagCode> used;
      for (const Diagnostic& d : diagnostics) used.insert(d.code);
      for (const DiagCode code : used) {
        json.begin_object().field("id", to_string(code)).key("shortDescription").begin_object()
            .field("text", str("capsule diagnostic ", to_string(code))).end_object().end_object();
      }
      json.end_array().end_object().end_object();
      json.key("results").begin_array();
      for (const Diagnostic& d : diagnostics) {
        json.begin_object()
            .field("ruleId", to_string(d.code))
            .field("level", d.severity == Severity::Error ? "error" : "warning")
            .key("message")
            .begin_object()
            .field("text", full_message(d))
            .end_object();
        if (!d.where.file.empty()) {
          json.key("locations").begin_array().begin_object().key("physicalLocation").begin_object()
              .key("artifactLocation").begin_object().field("uri", d.where.file).end_object();
          if (d.where.line != 0) {
            json.key("region").begin_object()
                .field("startLine", static_cast<std::int64_t>(d.where.line))
                .field("startColumn", static_cast<std::int64_t>(d.where.column == 0 ? 1 : d.where.column))
                .end_object();
          }
          json.end_object().end_object().end_array();
        }
        json.end_object();
      }
      json.end_array().end_object().end_array().end_object();
      return json.str() + "\n";
    }
    case DiagFormat::Github: {
      std::string out;
      for (const Diagnostic& d : diagnostics) {
        out += d.severity == Severity::Error ? "::error " : "::warning ";
        std::vector<std::string> properties;
        if (!d.where.file.empty()) properties.push_back("file=" + github_escape(d.where.file, true));
        if (d.where.line != 0) {
          properties.push_back(str("line=", d.where.line));
          properties.push_back(str("col=", d.where.column));
        }
        properties.push_back("title=" + github_escape(str("capsule ", to_string(d.code)), true));
        out += join(properties, ",") + "::" + github_escape(full_message(d), false) + "\n";
      }
      return out;
    }
  }
  return {};
}

}  // namespace capsule
