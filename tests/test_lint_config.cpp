// SPDX-License-Identifier: Apache-2.0
// The lint configuration file, capsule-lint.toml: parsing, where lint finds it, and how it and the
// command line together rank findings.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "capsule/lint_config.hpp"
#include "capsule/lint_rule_ids.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

using capsule::DiagCode;
using capsule::RuleIdProblem;
using capsule::RuleList;
using capsule::RuleOverrides;
using capsule::Severity;
using capsule::testing::CliRun;
using capsule::testing::has;
using capsule::testing::ScratchTree;
using capsule::testing::source_dir;
namespace fs = std::filesystem;

namespace {

/// An empty directory of this process (parallel runs and other build folders never share it),
/// removed when the test ends.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : root_(fs::temp_directory_path() / capsule::str("capsule-lint-config-", name, "-", ::getpid())) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

/// `path` as one single-quoted shell word, whatever it contains.
std::string shell_word(const fs::path& path) {
  std::string out = "'";
  for (const char c : path.string()) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int git_init(const fs::path& dir) { return std::system(("git init -q " + shell_word(dir) + " >/dev/null 2>&1").c_str()); }

std::string messages(const capsule::Diagnostics& diagnostics) {
  std::string out;
  for (const capsule::Diagnostic& d : diagnostics) {
    out += capsule::str(d.where.line, ":", d.where.column, " ", capsule::to_string(d.code), " ", d.message, " | ",
                        d.help, "\n");
  }
  return out;
}

/// find_lint_config with the work tree's top asked of git, as `capsule lint` does.
capsule::Result<std::optional<fs::path>, capsule::Diagnostics> find_config(const capsule::LintScope& scope) {
  return capsule::find_lint_config(scope, capsule::catalogs_work_tree_top(scope));
}

/// The file find_config names; fails the test when the search failed.
std::optional<fs::path> found(const capsule::LintScope& scope) {
  auto result = find_config(scope);
  // doctest builds the message even when the check passes: only a failed search has one.
  REQUIRE_MESSAGE(result.has_value(), (result.has_value() ? std::string() : messages(result.error())));
  return *result;
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

  TEST_CASE("a rule named twice in one list is reported at its second mention") {
    const auto parsed = capsule::parse_lint_config(R"(schema = 1
deny = ["unlisted-handler", "unlisted-handler", "warnings", "warnings"]
allow = ["no-compiled-handler", "no-compiled-handler"]
)",
                                                   "capsule-lint.toml");
    REQUIRE_FALSE(parsed);
    const std::string text = messages(parsed.error());
    INFO(text);
    CHECK(has(text, "2:29 invalid-value rule `unlisted-handler` is named twice in `deny`; name it once"));
    CHECK(has(text, "2:61 invalid-value rule `warnings` is named twice in `deny`; name it once"));
    CHECK(has(text, "3:33 invalid-value rule `no-compiled-handler` is named twice in `allow`; name it once"));
    CHECK(parsed.error().size() == 3);
  }

  TEST_CASE("one resolution of rule ids serves the command line and the file") {
    const capsule::ResolvedRuleIds resolved = capsule::resolve_rule_ids(
        {"warnings", "expired-trust", "unknwn-test-suite", "expired-trust"},
        {"parse-error", "expired-trust", "no-compiled-handler", "warnigs", "no-compiled-handler"});
    CHECK(resolved.overrides.deny_warnings);
    CHECK(resolved.overrides.deny == std::vector<DiagCode>{DiagCode::ExpiredTrust});
    CHECK(resolved.overrides.allow == std::vector<DiagCode>{DiagCode::NoCompiledHandler});
    REQUIRE(resolved.problems.size() == 6);
    const auto check = [&](std::size_t at, RuleIdProblem::Kind kind, RuleList list, std::size_t index,
                           std::string_view id, std::string_view suggestion) {
      CAPTURE(at);
      const RuleIdProblem& problem = resolved.problems[at];
      CHECK(problem.kind == kind);
      CHECK(problem.list == list);
      CHECK(problem.index == index);
      CHECK(problem.id == id);
      CHECK(problem.suggestion == suggestion);
    };
    check(0, RuleIdProblem::Kind::Unknown, RuleList::Deny, 2, "unknwn-test-suite", "unknown-test-suite");
    check(1, RuleIdProblem::Kind::Repeated, RuleList::Deny, 3, "expired-trust", "");
    check(2, RuleIdProblem::Kind::CannotBeAllowed, RuleList::Allow, 0, "parse-error", "");
    check(3, RuleIdProblem::Kind::DeniedAndAllowed, RuleList::Allow, 1, "expired-trust", "");
    // `warnings` is a deny-list word only: never suggested for allow.
    check(4, RuleIdProblem::Kind::Unknown, RuleList::Allow, 3, "warnigs", "");
    check(5, RuleIdProblem::Kind::Repeated, RuleList::Allow, 4, "no-compiled-handler", "");
    CHECK(capsule::describe(resolved.problems[2]) ==
          "rule `parse-error` cannot be allowed: a file with that error does not load, so every other command would "
          "still refuse it");
    CHECK(capsule::describe(resolved.problems[3]) == "rule `expired-trust` is both denied and allowed");
    CHECK(capsule::nearest_rule_id("warnigs", true) == "warnings");

    // The command line words the same problems as usage errors (exit 2); a repeat there is harmless.
    const CliRun blocked = capsule::testing::run_shipped_cli({"lint", "--allow", "parse-error"});
    CHECK(blocked.status == 2);
    CHECK(has(blocked.err, "--allow: rule `parse-error` cannot be allowed: a file with that error does not load, so "
                           "every other command would still refuse it"));
    // `warnings` is no rule to allow, so it is never what `--allow` "meant".
    const CliRun allow_warnings = capsule::testing::run_shipped_cli({"lint", "--allow", "warnings"});
    CHECK(allow_warnings.status == 2);
    CHECK(has(allow_warnings.err, "--allow: unknown lint rule `warnings` (`capsule lint --help` lists the rules)"));
    CHECK(capsule::testing::run_shipped_cli({"lint", "--allow", "no-compiled-handler,no-compiled-handler",
                                             "--allow", "unverifiable-evidence"})
              .status == 0);
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
    const ScratchTree tree("lint-config-found");
    const fs::path dir = tree.root();
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
    // contributes nothing: its valid `allow` entry and severity are not applied either.
    std::ofstream(dir / "capsule-lint.toml") << "schema = 1\nallow = [\"no-such-rule\", \"no-compiled-handler\"]\n"
                                                "[severity]\nunverifiable-evidence = \"error\"\n";
    std::vector<std::string> named = root;
    named.push_back((dir / "profiles/checked_cpu.toml").string());
    const CliRun broken_named = capsule::testing::run_cli(named);
    CHECK(broken_named.status == 1);
    CHECK(has(broken_named.out, "capsule-lint.toml:2:10: error[invalid-value]"));
    const CliRun broken = capsule::testing::run_cli(root);
    CHECK(broken.status == 1);
    CHECK(has(broken.out, "warning[no-compiled-handler]"));
    CHECK(has(broken.out, "note[unverifiable-evidence]"));
    CHECK_FALSE(has(broken.out, "error[unverifiable-evidence]"));

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
    // A FIFO in its place is refused too, without waiting for a writer.
    fs::remove(dir / "capsule-lint.toml");
    REQUIRE(::mkfifo((dir / "capsule-lint.toml").c_str(), 0600) == 0);
    const auto fifo = capsule::read_lint_config(dir / "capsule-lint.toml", true);
    REQUIRE_FALSE(fifo);
    CHECK(fifo.error().front().code == DiagCode::NonRegularFile);
    fs::remove(dir / "capsule-lint.toml");
    // A named file that does not exist is unreadable input (exit 2), and both flags are a usage error.
    std::vector<std::string> missing = root;
    missing.insert(missing.end(), {"--config", (dir / "nope.toml").string()});
    CHECK(capsule::testing::run_cli(missing).status == 2);
    explicit_config.push_back("--no-config");
    CHECK(capsule::testing::run_cli(explicit_config).status == 2);
  }

  TEST_CASE("a discovered configuration is read only when you or root own it and no other user can replace it") {
    using capsule::detail::Ownership;
    using capsule::detail::trust_problem;
    constexpr std::uint32_t me = 1000;
    constexpr std::uint32_t other = 1001;
    const Ownership mine_dir{me, S_IFDIR | 0755};
    CHECK(trust_problem({me, S_IFREG | 0644}, mine_dir, me).empty());
    CHECK(trust_problem({0, S_IFREG | 0644}, mine_dir, me).empty());
    CHECK(trust_problem({me, S_IFREG | 0664}, {me, S_IFDIR | 0775}, me).empty());  // umask 002, own directory
    CHECK(trust_problem({me, S_IFREG | 0644}, {0, S_IFDIR | 0755}, me).empty());    // a directory only root writes
    CHECK(trust_problem({0, S_IFREG | 0644}, {0, S_IFDIR | 0777}, 0).empty());      // root trusts root
    // A file anyone may write is refused whoever owns it, yours and root's alike.
    CHECK(trust_problem({me, S_IFREG | 0666}, mine_dir, me) == "every user may write it");
    CHECK(trust_problem({me, S_IFREG | 0602}, mine_dir, me) == "every user may write it");
    CHECK(trust_problem({0, S_IFREG | 0666}, {0, S_IFDIR | 0755}, 0) == "every user may write it");
    CHECK(trust_problem({other, S_IFREG | 0644}, mine_dir, me) ==
          "it belongs to user 1001, neither you (user 1000) nor root");
    CHECK(trust_problem({0, S_IFREG | 0664}, mine_dir, me) == "it belongs to root but users other than root may write it");
    // /tmp: root's, world-writable; the sticky bit does not exempt it.
    CHECK(trust_problem({me, S_IFREG | 0644}, {0, S_IFDIR | 01777}, me) ==
          "its directory belongs to user 0, not you (user 1000), and users other than its owner may write it");
    CHECK_FALSE(trust_problem({me, S_IFREG | 0644}, {other, S_IFDIR | 0775}, me).empty());
    CHECK_FALSE(trust_problem({other, S_IFREG | 0644}, {other, S_IFDIR | 0755}, me).empty());

    // End to end: giving files to another user needs root.
    if (::geteuid() != 0) {
      MESSAGE("SKIP the end-to-end ownership checks: chown needs root (the rule itself is checked above)");
      return;
    }
    const ScratchTree tree("lint-config-owner");
    const fs::path dir = tree.root();
    const fs::path file = dir / "capsule-lint.toml";
    const std::vector<std::string> root{"lint", "--root", dir.string(), "--source-root", source_dir().string()};
    std::ofstream(file) << "schema = 1\nallow = [\"no-compiled-handler\"]\n";
    REQUIRE(::chown(file.c_str(), 4242, 4242) == 0);
    const CliRun planted = capsule::testing::run_cli(root);
    CHECK(planted.status == 2);  // refused like a discovered link: the file applies nothing
    CHECK(has(planted.out, file.string() + ": error[io-error]: lint does not read the lint configuration it found: it "
                           "belongs to user 4242, neither you (user 0) nor root, so another user could have put it there"));
    CHECK(has(planted.out, "warning[no-compiled-handler]"));
    // Named with --config, the same file is the user's choice: no ownership rule.
    std::vector<std::string> chosen = root;
    chosen.insert(chosen.end(), {"--config", file.string()});
    CHECK(capsule::testing::run_cli(chosen).status == 0);

    REQUIRE(::chown(file.c_str(), 0, 0) == 0);
    REQUIRE(::chmod(dir.c_str(), 01777) == 0);
    REQUIRE(::chown(dir.c_str(), 4242, 4242) == 0);
    const CliRun shared = capsule::testing::run_cli(root);
    CHECK(shared.status == 2);
    CHECK(has(shared.out, "its directory belongs to user 4242, not you (user 0)"));
    REQUIRE(::chown(dir.c_str(), 0, 0) == 0);  // your own directory may be writable by others
    const CliRun own = capsule::testing::run_cli(root);
    CHECK(own.status == 0);
    CHECK_FALSE(has(own.out, "no-compiled-handler"));
  }

  TEST_CASE("lint never looks for a configuration above the git work tree or the catalogs' parent") {
    const ScratchDir scratch("outer");
    const fs::path& outer = scratch.root();
    fs::create_directories(outer / "project");
    fs::copy(source_dir() / "catalogs", outer / "project/catalogs");
    fs::copy(source_dir() / "profiles", outer / "project/profiles");
    // Outside any git work tree, a file one level further up is not the project's.
    std::ofstream(outer / "capsule-lint.toml") << "schema = 1\nallow = [\"no-compiled-handler\"]\n";
    capsule::LintScope scope{{outer / "project/catalogs"}, {outer / "project/profiles"}, std::nullopt};
    CHECK_FALSE(found(scope).has_value());
    std::ofstream(outer / "project/capsule-lint.toml") << "schema = 1\n";
    REQUIRE(found(scope).has_value());
    CHECK(*found(scope) == outer / "project/capsule-lint.toml");

    // In a work tree: the nearest file up to the tree's top, and nothing above it.
    fs::create_directories(outer / "repo/ml/catalogs");
    REQUIRE(git_init(outer / "repo") == 0);
    std::ofstream(outer / "repo/ml/catalogs/a.toml") << "schema = 1\n";
    capsule::LintScope nested{{outer / "repo/ml/catalogs"}, {}, std::nullopt};
    CHECK_FALSE(found(nested).has_value());  // outer/capsule-lint.toml is above the top
    std::ofstream(outer / "repo/capsule-lint.toml") << "schema = 1\n";
    REQUIRE(found(nested).has_value());
    CHECK(*found(nested) == outer / "repo/capsule-lint.toml");
    std::ofstream(outer / "repo/ml/capsule-lint.toml") << "schema = 1\n";
    CHECK(*found(nested) == outer / "repo/ml/capsule-lint.toml");
    // Catalogs at the very top of their work tree: the directory above is no part of it.
    fs::create_directories(outer / "solo");
    REQUIRE(git_init(outer / "solo") == 0);
    capsule::LintScope solo{{outer / "solo"}, {}, std::nullopt};
    CHECK_FALSE(found(solo).has_value());
  }

  TEST_CASE("in a repository git cannot read, lint reports it instead of guessing where the work tree ends") {
    const ScratchDir scratch("broken-git");
    const fs::path repo = scratch.root() / "repo";
    fs::create_directories(repo / "ml");
    fs::copy(source_dir() / "catalogs", repo / "ml/catalogs");
    fs::copy(source_dir() / "profiles", repo / "ml/profiles");
    // What git says of a repository it refuses (safe.directory) or cannot find: no top.
    std::ofstream(repo / ".git") << "gitdir: /nonexistent\n";
    std::ofstream(repo / "ml/capsule-lint.toml") << "schema = 1\nallow = [\"no-compiled-handler\"]\n";
    const capsule::LintScope scope{{repo / "ml/catalogs"}, {repo / "ml/profiles"}, std::nullopt};
    CHECK_FALSE(capsule::catalogs_work_tree_top(scope).has_value());
    const auto search = find_config(scope);
    REQUIRE_FALSE(search.has_value());
    REQUIRE(search.error().size() == 1);
    const capsule::Diagnostic& problem = search.error().front();
    CHECK(problem.code == DiagCode::IoError);
    CHECK(problem.where.file == (repo / "ml/catalogs").string());
    CHECK(has(problem.message, "the catalogs are in a git repository, but git could not name the top of its work tree"));

    const std::vector<std::string> root{"lint", "--root", (repo / "ml").string(), "--source-root",
                                        source_dir().string()};
    const CliRun run = capsule::testing::run_cli(root);
    CHECK(run.status == 2);
    CHECK(has(run.out, "error[io-error]: the catalogs are in a git repository"));
    CHECK(has(run.out, "warning[no-compiled-handler]"));  // the file in ml/ was not applied
    CHECK_FALSE(has(run.err, "capsule: lint configuration:"));
    // The way out the help names: the file, named.
    std::vector<std::string> named = root;
    named.insert(named.end(), {"--config", (repo / "ml/capsule-lint.toml").string()});
    CHECK(capsule::testing::run_cli(named).status == 0);
    std::vector<std::string> none = root;
    none.push_back("--no-config");
    CHECK(capsule::testing::run_cli(none).status == 0);
  }
}
