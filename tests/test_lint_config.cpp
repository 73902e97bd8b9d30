// SPDX-License-Identifier: Apache-2.0
// The lint configuration file, capsule-lint.toml: parsing, where lint finds it, and how it and the
// command line together rank findings.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "capsule/lint_config.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

using capsule::DiagCode;
using capsule::RuleOverrides;
using capsule::Severity;
using capsule::testing::CliRun;
using capsule::testing::has;
using capsule::testing::source_dir;
namespace fs = std::filesystem;

namespace {

fs::path scratch_tree(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("capsule-lint-config-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy(source_dir() / "catalogs", dir / "catalogs");
  fs::copy(source_dir() / "profiles", dir / "profiles");
  return dir;
}

std::string messages(const capsule::Diagnostics& diagnostics) {
  std::string out;
  for (const capsule::Diagnostic& d : diagnostics) {
    out += capsule::str(d.where.line, ":", d.where.column, " ", capsule::to_string(d.code), " ", d.message, " | ",
                        d.help, "\n");
  }
  return out;
}

}  // namespace

TEST_SUITE("lint") {
  TEST_CASE("a lint configuration allows, denies and re-ranks rules") {
    const auto parsed = capsule::parse_lint_config(R"(schema = 1
allow = ["no-compiled-handler"]
deny = ["warnings", "unlisted-handler"]

[severity]
evidence-not-run-here = "note"
)",
                                                   "capsule-lint.toml");
    REQUIRE(parsed);
    CHECK(parsed->allow == std::vector<DiagCode>{DiagCode::NoCompiledHandler});
    CHECK(parsed->deny == std::vector<DiagCode>{DiagCode::UnlistedHandler});
    CHECK(parsed->deny_warnings);
    REQUIRE(parsed->severity.size() == 1);
    CHECK(parsed->severity[0].first == DiagCode::EvidenceNotRunHere);
    CHECK(parsed->severity[0].second == Severity::Note);

    // Applied: the re-ranked warning becomes a note, so `deny = ["warnings"]` leaves it alone.
    capsule::Diagnostics findings{
        {Severity::Warning, DiagCode::EvidenceNotRunHere, {"a.toml", 1, 1}, "x", {}, {}},
        {Severity::Warning, DiagCode::NoCompiledHandler, {"a.toml", 2, 1}, "y", {}, {}},
        {Severity::Warning, DiagCode::MissingEvidence, {"a.toml", 3, 1}, "z", {}, {}},
        {Severity::Note, DiagCode::UnverifiableEvidence, {"a.toml", 4, 1}, "w", {}, {}}};
    const capsule::Diagnostics ranked = capsule::apply_lint_rules(findings, *parsed);
    REQUIRE(ranked.size() == 3);
    CHECK(ranked[0].severity == Severity::Note);
    CHECK(ranked[1].code == DiagCode::MissingEvidence);
    CHECK(ranked[1].severity == Severity::Error);  // a warning, under deny = ["warnings"]
    CHECK(ranked[2].severity == Severity::Note);   // notes stay notes
  }

  TEST_CASE("every problem of a lint configuration is reported at its position, and none of it applies") {
    const auto parsed = capsule::parse_lint_config(R"(schema = 1
allow = ["no-compiled-handlr", "parse-error", 3]
deny = ["unlisted-handler"]
ignore = ["x"]

[severity]
unlisted-handler = "warning"
unknown-key = "note"
no-compiled-handler = "fatal"
)",
                                                   "capsule-lint.toml");
    REQUIRE_FALSE(parsed);
    const std::string text = messages(parsed.error());
    INFO(text);
    CHECK(has(text, "2:10 invalid-value `allow` names an unknown lint rule `no-compiled-handlr` | did you mean "
                    "`no-compiled-handler`?"));
    CHECK(has(text, "2:32 invalid-value `allow`: rule `parse-error` cannot be allowed"));
    CHECK(has(text, "2:47 wrong-type `allow` entries must be strings naming lint rules, got integer 3"));
    CHECK(has(text, "4:1 unknown-key"));
    CHECK(has(text, "7:20 invalid-value rule `unlisted-handler` is given a severity and is also denied"));
    CHECK(has(text, "8:15 invalid-value rule `unknown-key` cannot be made a note"));
    CHECK(has(text, "9:23 invalid-value `severity.no-compiled-handler` is \"fatal\"; expected \"error\", \"warning\" or \"note\""));
    CHECK(parsed.error().size() == 7);

    const auto no_schema = capsule::parse_lint_config("allow = []\n", "capsule-lint.toml");
    REQUIRE_FALSE(no_schema);
    CHECK(no_schema.error().front().code == DiagCode::UnsupportedSchema);
  }

  TEST_CASE("the command line wins over the configuration file, rule by rule") {
    RuleOverrides file;
    file.allow = {DiagCode::NoCompiledHandler};
    file.deny = {DiagCode::UnlistedHandler};
    file.severity = {{DiagCode::EvidenceNotRunHere, Severity::Note}};
    RuleOverrides command_line;
    command_line.deny = {DiagCode::NoCompiledHandler, DiagCode::EvidenceNotRunHere};
    command_line.allow = {DiagCode::UnlistedHandler};
    const RuleOverrides merged = capsule::merge_rule_overrides(file, command_line);
    CHECK(merged.allow == std::vector<DiagCode>{DiagCode::UnlistedHandler});
    CHECK(merged.deny == std::vector<DiagCode>{DiagCode::NoCompiledHandler, DiagCode::EvidenceNotRunHere});
    CHECK(merged.severity.empty());
    CHECK_FALSE(merged.deny_warnings);
  }

  TEST_CASE("lint finds capsule-lint.toml above the catalogs, names it, and refuses a link") {
    const fs::path dir = scratch_tree("found");
    const std::vector<std::string> root{"lint", "--root", dir.string(), "--source-root", source_dir().string()};
    const CliRun before = capsule::testing::run_cli(root);
    CHECK(before.status == 0);
    CHECK(has(before.out, "warning[no-compiled-handler]"));
    CHECK_FALSE(has(before.err, "lint configuration"));

    std::ofstream(dir / "capsule-lint.toml") << "schema = 1\nallow = [\"no-compiled-handler\"]\n"
                                                "[severity]\nunverifiable-evidence = \"error\"\n";
    const CliRun configured = capsule::testing::run_cli(root);
    CHECK(has(configured.err, "capsule: lint configuration: " + (dir / "capsule-lint.toml").string() + "\n"));
    CHECK_FALSE(has(configured.out, "no-compiled-handler"));
    CHECK(has(configured.out, "error[unverifiable-evidence]"));
    CHECK(configured.status == 1);

    // The command line wins for one run; --no-config ignores the file altogether.
    std::vector<std::string> allowed = root;
    allowed.insert(allowed.end(), {"--allow", "unverifiable-evidence"});
    const CliRun overridden = capsule::testing::run_cli(allowed);
    CHECK(overridden.status == 0);
    CHECK_FALSE(has(overridden.out, "unverifiable-evidence"));
    std::vector<std::string> ignored = root;
    ignored.push_back("--no-config");
    const CliRun unconfigured = capsule::testing::run_cli(ignored);
    CHECK(unconfigured.status == 0);
    CHECK(has(unconfigured.out, "warning[no-compiled-handler]"));
    CHECK_FALSE(has(unconfigured.err, "lint configuration"));

    // A broken file fails the run with its problems, even when only other files are named, and
    // contributes nothing.
    std::ofstream(dir / "capsule-lint.toml") << "schema = 1\nallow = [\"no-such-rule\"]\n";
    std::vector<std::string> named = root;
    named.push_back((dir / "profiles/checked_cpu.toml").string());
    const CliRun broken = capsule::testing::run_cli(named);
    CHECK(broken.status == 1);
    CHECK(has(broken.out, "capsule-lint.toml:2:10: error[invalid-value]"));

    // Tree content is hostile: a link is refused, never followed out of the tree.
    fs::remove(dir / "capsule-lint.toml");
    std::ofstream(dir / "elsewhere.toml") << "schema = 1\nallow = [\"no-compiled-handler\"]\n";
    fs::create_symlink(dir / "elsewhere.toml", dir / "capsule-lint.toml");
    const CliRun linked = capsule::testing::run_cli(root);
    CHECK(linked.status == 2);  // as for a `*.toml` entry of catalogs/ that is no regular file
    CHECK(has(linked.out, "error[non-regular-file]"));
    CHECK(has(linked.out, "warning[no-compiled-handler]"));
    // Named on the command line, the same link is the user's choice and is read.
    std::vector<std::string> explicit_config = root;
    explicit_config.insert(explicit_config.end(), {"--config", (dir / "capsule-lint.toml").string()});
    const CliRun chosen = capsule::testing::run_cli(explicit_config);
    CHECK(chosen.status == 0);
    CHECK_FALSE(has(chosen.out, "no-compiled-handler"));
    // A named file that does not exist is unreadable input (exit 2), and both flags are a usage error.
    std::vector<std::string> missing = root;
    missing.insert(missing.end(), {"--config", (dir / "nope.toml").string()});
    CHECK(capsule::testing::run_cli(missing).status == 2);
    explicit_config.push_back("--no-config");
    CHECK(capsule::testing::run_cli(explicit_config).status == 2);
  }

  TEST_CASE("lint never looks for a configuration above the git work tree or the catalogs' parent") {
    const fs::path outer = fs::temp_directory_path() / "capsule-lint-config-outer";
    fs::remove_all(outer);
    fs::create_directories(outer / "project");
    fs::copy(source_dir() / "catalogs", outer / "project/catalogs");
    fs::copy(source_dir() / "profiles", outer / "project/profiles");
    // Outside any git work tree, a file one level further up is not the project's.
    std::ofstream(outer / "capsule-lint.toml") << "schema = 1\nallow = [\"no-compiled-handler\"]\n";
    capsule::LintScope scope{{outer / "project/catalogs"}, {outer / "project/profiles"}, std::nullopt};
    CHECK_FALSE(capsule::find_lint_config(scope).has_value());
    std::ofstream(outer / "project/capsule-lint.toml") << "schema = 1\n";
    const auto found = capsule::find_lint_config(scope);
    REQUIRE(found.has_value());
    CHECK(*found == outer / "project/capsule-lint.toml");

    // In a work tree: the nearest file up to the tree's top, and nothing above it.
    fs::create_directories(outer / "repo/ml/catalogs");
    REQUIRE(std::system(("git init -q " + (outer / "repo").string()).c_str()) == 0);
    std::ofstream(outer / "repo/ml/catalogs/a.toml") << "schema = 1\n";
    capsule::LintScope nested{{outer / "repo/ml/catalogs"}, {}, std::nullopt};
    CHECK_FALSE(capsule::find_lint_config(nested).has_value());  // outer/capsule-lint.toml is above the top
    std::ofstream(outer / "repo/capsule-lint.toml") << "schema = 1\n";
    REQUIRE(capsule::find_lint_config(nested).has_value());
    CHECK(*capsule::find_lint_config(nested) == outer / "repo/capsule-lint.toml");
    std::ofstream(outer / "repo/ml/capsule-lint.toml") << "schema = 1\n";
    CHECK(*capsule::find_lint_config(nested) == outer / "repo/ml/capsule-lint.toml");
    // Catalogs at the very top of their work tree: the directory above is no part of it.
    fs::create_directories(outer / "solo");
    REQUIRE(std::system(("git init -q " + (outer / "solo").string()).c_str()) == 0);
    capsule::LintScope solo{{outer / "solo"}, {}, std::nullopt};
    CHECK_FALSE(capsule::find_lint_config(solo).has_value());
  }
}
