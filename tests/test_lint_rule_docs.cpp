// SPDX-License-Identifier: Apache-2.0
// The rule text of docs/lint-rules.md and of SARIF's rule metadata (capsule/lint_rule_docs.hpp):
// the committed doc is the generated one, has one section per rule and none extra, and every
// SARIF rule (a log lists those its findings use) carries name, fullDescription, help and an
// absolute helpUri to its section.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>

#include "capsule/diag_format.hpp"
#include "capsule/json_reader.hpp"
#include "capsule/lint.hpp"
#include "capsule/lint_rule_docs.hpp"
#include "test_support.hpp"

using namespace capsule;
using capsule::testing::read_text;
using capsule::testing::source_dir;

namespace {

std::set<std::string> rule_ids() {
  std::set<std::string> ids;
  for (const LintRule& rule : kLintRules) ids.emplace(to_string(rule.code));
  return ids;
}

/// The ids of the `## ` headings of a Markdown text.
std::set<std::string> section_ids(const std::string& markdown) {
  std::set<std::string> ids;
  std::size_t at = 0;
  while (at < markdown.size()) {
    const std::size_t end = std::min(markdown.find('\n', at), markdown.size());
    const std::string line = markdown.substr(at, end - at);
    if (line.starts_with("## ")) CHECK_MESSAGE(ids.insert(line.substr(3)).second, "section twice: " << line);
    at = end + 1;
  }
  return ids;
}

bool printable_ascii_lines(std::string_view text) {
  for (const char c : text) {
    if (c != '\n' && (c < 0x20 || c > 0x7e)) return false;
  }
  return true;
}

}  // namespace

TEST_SUITE("lint") {
  TEST_CASE("docs/lint-rules.md is the generated rule text, one section per rule and none extra") {
    const auto file = source_dir() / "docs" / "lint-rules.md";
    const std::string generated = lint_rules_markdown();
    if (std::getenv("CAPSULE_UPDATE_GOLDENS") != nullptr) std::ofstream(file, std::ios::binary) << generated;
    const std::string committed = read_text(file);
    CHECK_MESSAGE(committed == generated,
                  "docs/lint-rules.md differs from kLintRuleDocs; rerun the tests with CAPSULE_UPDATE_GOLDENS=1");
    CHECK(section_ids(committed) == rule_ids());
    CHECK(section_ids(generated) == rule_ids());
  }

  TEST_CASE("rule snippets are printable ASCII and the prose renders through the Markdown escapes") {
    for (const LintRuleDoc& doc : kLintRuleDocs) {
      INFO(to_string(doc.code));
      CHECK(printable_ascii_lines(doc.failing));
      CHECK(printable_ascii_lines(doc.fixed));
      CHECK(doc.failing != doc.fixed);
    }
    // `_` in prose is escaped, a backticked part becomes a code span.
    const std::string markdown = lint_rule_help_markdown(*find_lint_rule(DiagCode::UnplannableProfile));
    CHECK(markdown.find("`plans_nothing = true`") != std::string::npos);
    CHECK(markdown.find("`--allow unplannable-profile` silences it") != std::string::npos);
    const std::string blocking = lint_rule_help_text(*find_lint_rule(DiagCode::UnknownKey));
    CHECK(blocking.find("`--allow unknown-key` is refused") != std::string::npos);
    CHECK(blocking.find("    provder = \"reference\"\n") != std::string::npos);
  }

  TEST_CASE("every SARIF rule has a name, fullDescription, help and an absolute helpUri to its section") {
    // A log lists only the rules its findings use, so one finding of every rule lists them all.
    Diagnostics findings;
    for (const LintRule& rule : kLintRules) {
      findings.push_back(Diagnostic{rule.severity, rule.code, SourceLoc{"catalogs/a.toml", 1, 1}, "finding", {}, {}});
    }
    const std::string log = format_diagnostics(findings, DiagFormat::Sarif, "test");
    const auto parsed = parse_json(log);
    REQUIRE(parsed.has_value());
    const JsonValue& driver = *parsed.value().find("runs")->as_array().at(0).find("tool")->find("driver");
    const JsonArray& rules = driver.find("rules")->as_array();
    REQUIRE(rules.size() == kLintRules.size());
    for (std::size_t i = 0; i < rules.size(); ++i) CHECK(rules[i].find("id")->as_string() == to_string(kLintRules[i].code));
    // CAPSULE_DOCS_URL empty (a build's choice) omits both URIs; the default is the placeholder.
    const std::string base(docs_url());
    if (base.empty()) {
      CHECK(driver.find("informationUri") == nullptr);
    } else {
      CHECK((base.starts_with("https://") || base.starts_with("http://")));
      CHECK(base.ends_with('/'));
      CHECK(driver.find("informationUri")->as_string() == base + "lint-rules.md");
    }
    for (const JsonValue& rule : rules) {
      const std::string id = rule.find("id")->as_string();
      INFO(id);
      const LintRule* lint_rule = find_lint_rule(std::string_view(id));
      REQUIRE(lint_rule != nullptr);
      if (base.empty()) {
        CHECK(rule.find("helpUri") == nullptr);
      } else {
        REQUIRE(rule.find("helpUri") != nullptr);
        CHECK(rule.find("helpUri")->as_string() == base + "lint-rules.md#" + id);
      }
      CHECK(rule.find("name")->as_string() == lint_rule_friendly_name(lint_rule->code));
      CHECK(rule.find("fullDescription")->find("text")->as_string() == lint_rule_full_description(*lint_rule));
      CHECK(rule.find("help")->find("text")->as_string() == lint_rule_help_text(*lint_rule));
      CHECK(rule.find("help")->find("markdown")->as_string() == lint_rule_help_markdown(*lint_rule));
      CHECK(rule.find("fullDescription")->find("text")->as_string().size() >
            rule.find("shortDescription")->find("text")->as_string().size());
    }
    CHECK(lint_rule_friendly_name(DiagCode::MissingProvenanceSymbol) == "MissingProvenanceSymbol");
    // No finding, no rule text: the log stays a few hundred bytes.
    const std::string empty = format_diagnostics({}, DiagFormat::Sarif, "test");
    CHECK(empty.find(R"("rules":[])") != std::string::npos);
    CHECK(empty.size() < 1024);
  }
}
