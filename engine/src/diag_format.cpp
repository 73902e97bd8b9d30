// SPDX-License-Identifier: Apache-2.0
#include "capsule/diag_format.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "capsule/escape.hpp"
#include "capsule/json.hpp"
#include "capsule/lint.hpp"
#include "capsule/lint_rule_docs.hpp"
#include "capsule/sha256.hpp"
#include "capsule/text.hpp"

namespace capsule {
namespace {

namespace fs = std::filesystem;

std::string full_message(const Diagnostic& d) {
  std::string out = d.message;
  for (const std::string& note : d.notes) out += "\nnote: " + note;
  if (!d.help.empty()) out += "\nhelp: " + d.help;
  return out;
}

/// The message, notes and help of a workflow command, each escaped on its own so that the only
/// encoded line breaks (%0A) are the ones between them.
std::string github_message(const Diagnostic& d) {
  std::string out = github_escape(d.message, GithubField::Data);
  for (const std::string& note : d.notes) out += "%0Anote: " + github_escape(note, GithubField::Data);
  if (!d.help.empty()) out += "%0Ahelp: " + github_escape(d.help, GithubField::Data);
  return out;
}

/// Percent-encodes everything but RFC 3986 unreserved characters and `/`, so a path becomes a
/// valid URI reference (a `:` in a first relative segment would otherwise read as a scheme).
std::string uri_path(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : path) {
    const auto byte = static_cast<unsigned char>(c);
    const bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '.' || c == '_' || c == '~' || c == '/';
    if (unreserved) {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    }
  }
  return out;
}

fs::path absolute_normal(const fs::path& path) {
  std::error_code error;
  const fs::path absolute = fs::absolute(path, error);
  return (error ? path : absolute).lexically_normal();
}

/// `file` relative to `root` (generic separators), or empty when it lies outside.
std::string under_root(const std::string& file, const fs::path& root) {
  if (root.empty() || file.empty()) return {};
  const fs::path relative = absolute_normal(file).lexically_relative(absolute_normal(root));
  if (relative.empty() || *relative.begin() == "..") return {};
  return relative.generic_string();
}

std::string_view github_command(Severity severity) {
  switch (severity) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "notice";
  }
  return "error";
}

std::string sarif(const Diagnostics& diagnostics, const std::string& tool_version, const fs::path& root) {
  // Only the rules this log's results and notifications use: each carries its full help (the
  // whole set is about 57 KB), and a ruleIndex means something only within its own log (code
  // scanning matches alerts across runs by ruleId). Lint rules come in kLintRules order, then any
  // other code used, in order of first use.
  std::set<DiagCode> used;
  for (const Diagnostic& d : diagnostics) used.insert(d.code);
  std::vector<DiagCode> rules;
  for (const LintRule& rule : kLintRules) {
    if (used.contains(rule.code)) rules.push_back(rule.code);
  }
  for (const Diagnostic& d : diagnostics) {
    if (std::find(rules.begin(), rules.end(), d.code) == rules.end()) rules.push_back(d.code);
  }
  // A code's position in `rules`, which lists every code used.
  const auto rule_index = [&rules](DiagCode code) {
    return static_cast<std::int64_t>(std::find(rules.begin(), rules.end(), code) - rules.begin());
  };
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
      .field("version", tool_version);
  if (!docs_url().empty()) json.field("informationUri", str(docs_url(), "lint-rules.md"));
  json
      .key("rules")
      .begin_array();
  for (const DiagCode code : rules) {
    const LintRule* rule = find_lint_rule(code);
    // Code scanning shows fullDescription and help on each alert and links helpUri (the rule's
    // section of docs/lint-rules.md); all come from kLintRuleDocs, as that file does.
    const std::string short_text = rule != nullptr ? std::string(rule->checks) : str("capsule diagnostic ", to_string(code));
    json.begin_object()
        .field("id", to_string(code))
        .field("name", lint_rule_friendly_name(code))
        .key("shortDescription").begin_object().field("text", short_text).end_object()
        .key("fullDescription").begin_object()
        .field("text", rule != nullptr ? lint_rule_full_description(*rule) : short_text)
        .end_object();
    if (rule != nullptr) {
      json.key("help").begin_object()
          .field("text", lint_rule_help_text(*rule))
          .field("markdown", lint_rule_help_markdown(*rule))
          .end_object();
      if (const std::string uri = lint_rule_help_uri(code); !uri.empty()) json.field("helpUri", uri);
    }
    json.key("defaultConfiguration")
        .begin_object()
        .field("level", to_string(rule != nullptr ? rule->severity : Severity::Error))
        .end_object()
        .end_object();
  }
  json.end_array().end_object().end_object();
  // Code scanning groups the runs of one analysis by this category and tracks findings across
  // runs within it (with partialFingerprints below).
  json.key("automationDetails").begin_object().field("id", "capsule/lint/").end_object();
  // Columns count Unicode code points, as every loader counts them (toml++, the nesting scan, the
  // JSON reader): a character outside the BMP is one column, not two UTF-16 units or four bytes.
  json.field("columnKind", "unicodeCodePoints");
  // A finding that concerns no file (the missing test-suite manifest) has no location to give
  // a result, which code scanning requires: it is a notification of the tool's run instead.
  json.key("invocations").begin_array().begin_object().field("executionSuccessful", true);
  json.key("toolExecutionNotifications").begin_array();
  for (const Diagnostic& d : diagnostics) {
    if (!d.where.file.empty()) continue;
    const std::int64_t index = rule_index(d.code);
    json.begin_object()
        .field("level", to_string(d.severity))
        .key("message").begin_object().field("text", full_message(d)).end_object()
        .key("associatedRule").begin_object()
        .field("id", to_string(d.code))
        .field("index", index)
        .end_object()
        .end_object();
  }
  json.end_array().end_object().end_array();
  if (!root.empty()) {
    std::string root_uri = "file://" + uri_path(absolute_normal(root).generic_string());
    if (!root_uri.ends_with('/')) root_uri += '/';
    json.key("originalUriBaseIds").begin_object().key("PROJECTROOT").begin_object().field("uri", root_uri)
        .end_object().end_object();
  }
  json.key("results").begin_array();
  // How many results with the same fingerprint key came before: identical findings in one file
  // stay distinct alerts.
  std::map<std::string, int> occurrences;
  for (const Diagnostic& d : diagnostics) {
    if (d.where.file.empty()) continue;  // a notification above
    const std::int64_t index = rule_index(d.code);
    const std::string relative = under_root(d.where.file, root);
    json.begin_object()
        .field("ruleId", to_string(d.code))
        .field("ruleIndex", index)
        .field("level", to_string(d.severity))
        .key("message")
        .begin_object()
        .field("text", full_message(d))
        .end_object();
    // The same finding in a later run (lines moved by an edit above it) keeps its fingerprint:
    // rule, file (relative to the root when under it) and message, never a position (the notes,
    // which may cite other positions, are left out), and its occurrence among equal keys.
    const std::string key = str(to_string(d.code), '\n', relative.empty() ? d.where.file : relative, '\n', d.message);
    const int occurrence = occurrences[key]++;
    json.key("partialFingerprints").begin_object()
        .field("capsuleFinding/v1", sha256_hex(str(key, '\n', occurrence)))
        .end_object();
    json.key("locations").begin_array().begin_object().key("physicalLocation").begin_object()
        .key("artifactLocation").begin_object();
    if (!relative.empty()) {
      json.field("uri", uri_path(relative)).field("uriBaseId", "PROJECTROOT");
    } else {
      json.field("uri", "file://" + uri_path(absolute_normal(d.where.file).generic_string()));
    }
    json.end_object();
    if (d.where.line != 0) {
      json.key("region").begin_object()
          .field("startLine", static_cast<std::int64_t>(d.where.line))
          .field("startColumn", static_cast<std::int64_t>(d.where.column == 0 ? 1 : d.where.column))
          .end_object();
    }
    json.end_object().end_object().end_array();
    json.end_object();
  }
  json.end_array().end_object().end_array().end_object();
  return json.str() + "\n";
}

}  // namespace

std::string format_diagnostics(const Diagnostics& diagnostics, DiagFormat format, const std::string& tool_version,
                               const fs::path& root, const TextStyle& text_style) {
  switch (format) {
    case DiagFormat::Text:
      return render(diagnostics, text_style);
    case DiagFormat::Json: {
      JsonWriter json;
      json.begin_document().key("diagnostics").begin_array();
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
      const std::array<std::size_t, 3> counts = severity_counts(diagnostics);
      json.field("errors", static_cast<std::int64_t>(counts[static_cast<std::size_t>(Severity::Error)]))
          .field("warnings", static_cast<std::int64_t>(counts[static_cast<std::size_t>(Severity::Warning)]))
          .field("notes", static_cast<std::int64_t>(counts[static_cast<std::size_t>(Severity::Note)]));
      json.end_object();
      return json.str() + "\n";
    }
    case DiagFormat::Sarif:
      return sarif(diagnostics, tool_version, root);
    case DiagFormat::Github: {
      std::string out;
      for (const Diagnostic& d : diagnostics) {
        out += str("::", github_command(d.severity), " ");
        std::vector<std::string> properties;
        if (!d.where.file.empty()) {
          const std::string relative = under_root(d.where.file, root);
          properties.push_back("file=" + github_escape(relative.empty() ? d.where.file : relative, GithubField::Property));
        }
        if (d.where.line != 0) {
          properties.push_back(str("line=", d.where.line));
          properties.push_back(str("col=", d.where.column == 0 ? 1 : d.where.column));
        }
        properties.push_back("title=" + github_escape(str("capsule ", to_string(d.code)), GithubField::Property));
        out += join(properties, ",") + "::" + github_message(d) + "\n";
      }
      return out;
    }
  }
  return {};
}

}  // namespace capsule
