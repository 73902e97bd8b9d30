// SPDX-License-Identifier: Apache-2.0
#include "capsule/lint_rule_docs.hpp"

#include <algorithm>
#include <vector>

#include "capsule/escape.hpp"
#include "capsule/text.hpp"

#ifndef CAPSULE_DOCS_URL
#define CAPSULE_DOCS_URL ""
#endif

namespace capsule {
namespace {

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    lines.push_back(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return lines;
}

/// Rule prose as Markdown: backticked parts become code spans, the rest is escaped text.
std::string prose_markdown(std::string_view prose) {
  std::string out;
  bool code = false;
  for (std::size_t start = 0; start <= prose.size();) {
    const std::size_t tick = std::min(prose.find('`', start), prose.size());
    const std::string_view part = prose.substr(start, tick - start);
    if (code) {
      out += markdown_code(part, MarkdownPlace::Inline);
    } else {
      out += markdown_escape(part);
    }
    code = !code;
    start = tick + 1;
  }
  return out;
}

/// A snippet as an indented Markdown code block: nothing inside one is markup, so the snippet
/// (printable ASCII, checked by a test) needs no escaping and no fence can close early.
std::string code_block(std::string_view snippet) {
  std::string out;
  for (const std::string_view line : lines_of(snippet)) {
    if (!line.empty()) out += str("    ", line);
    out += '\n';
  }
  while (out.ends_with("\n\n")) out.pop_back();
  return out;
}

/// The snippet indented for the text help.
std::string text_block(std::string_view snippet) {
  std::string out;
  for (const std::string_view line : lines_of(snippet)) {
    if (!line.empty()) out += str("    ", line, '\n');
  }
  return out;
}

std::string severity_sentence(const LintRule& rule) {
  return str("Default severity: ", to_string(rule.severity), ".");
}

std::string allow_sentence(const LintRule& rule) {
  const std::string id(to_string(rule.code));
  return rule.blocks_loading
             ? str("`--allow ", id, "` is refused: the finding keeps its file or profile out of every other command, "
                   "so a green lint would promise plans that then fail to load.")
             : str("`--allow ", id, "` silences it; `--deny ", id, "` makes it an error.");
}

}  // namespace

const LintRuleDoc* find_lint_rule_doc(DiagCode code) {
  for (const LintRuleDoc& doc : kLintRuleDocs) {
    if (doc.code == code) return &doc;
  }
  return nullptr;
}

std::string_view docs_url() { return CAPSULE_DOCS_URL; }

std::string lint_rule_help_uri(DiagCode code) {
  if (docs_url().empty()) return {};
  return str(docs_url(), "lint-rules.md#", to_string(code));
}

std::string lint_rule_friendly_name(DiagCode code) {
  std::string out;
  bool upper = true;
  for (const char c : std::string(to_string(code))) {
    if (c == '-') {
      upper = true;
    } else {
      out += upper && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
      upper = false;
    }
  }
  return out;
}

std::string lint_rule_full_description(const LintRule& rule) {
  const LintRuleDoc* doc = find_lint_rule_doc(rule.code);
  std::string out = str("Checks that ", rule.checks, ".");
  if (doc != nullptr) out += str(" ", doc->why);
  return out;
}

std::string lint_rule_help_text(const LintRule& rule) {
  const LintRuleDoc* doc = find_lint_rule_doc(rule.code);
  std::string out = lint_rule_full_description(rule) + "\n";
  if (doc != nullptr) out += str("\nFails:\n", text_block(doc->failing), "\nFix:\n", text_block(doc->fixed));
  out += str("\n", severity_sentence(rule), " ", allow_sentence(rule), "\n");
  return out;
}

std::string lint_rule_help_markdown(const LintRule& rule) {
  const LintRuleDoc* doc = find_lint_rule_doc(rule.code);
  std::string out = str("**Checks** that ", prose_markdown(rule.checks), ".\n");
  if (doc != nullptr) {
    out += str("\n**Why:** ", prose_markdown(doc->why), "\n");
    out += str("\nFails:\n\n", code_block(doc->failing), "\nFix:\n\n", code_block(doc->fixed));
  }
  out += str("\n", prose_markdown(severity_sentence(rule)), " ", prose_markdown(allow_sentence(rule)), "\n");
  return out;
}

std::string lint_rules_markdown() {
  std::string out =
      "<!-- Generated from kLintRules (engine/include/capsule/lint.hpp) and kLintRuleDocs\n"
      "     (engine/include/capsule/lint_rule_docs.hpp); edit those, then rebuild and run the\n"
      "     tests with CAPSULE_UPDATE_GOLDENS=1. The SARIF help of each rule is the same text. -->\n"
      "# Lint rules\n\n"
      "Every finding of `capsule lint` names its rule. Each section below is the help that the SARIF\n"
      "log carries for that rule (code scanning links here through `helpUri`). Severities and\n"
      "overrides are described in docs/decisions.md, \"Lint rules\".\n";
  for (const LintRule& rule : kLintRules) {
    out += str("\n## ", to_string(rule.code), "\n\n", lint_rule_help_markdown(rule));
  }
  return out;
}

}  // namespace capsule
