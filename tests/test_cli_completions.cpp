// SPDX-License-Identifier: Apache-2.0
// Shell completions and the man page come from the command table: each lists every command and
// flag the table has, and the names they complete are plain. (completions_check.sh drives the
// bash script and syntax-checks the zsh and fish ones; man_page_check.sh renders the page.)
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>

#include "command_table.hpp"
#include "completion_common.hpp"
#include "completion_scripts.hpp"
#include "capsule/escape.hpp"
#include "capsule/examples.hpp"
#include "capsule/lint.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

using capsule::testing::CliRun;
using capsule::testing::has;
using namespace capsule::cli;

namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream stream(text);
  for (std::string line; std::getline(stream, line);) out.push_back(line);
  return out;
}

/// The words of `text`, split at spaces, line ends, `|` and `"`.
std::vector<std::string> tokens(std::string_view text) {
  std::vector<std::string> out;
  std::string word;
  for (const char c : std::string(text) + " ") {
    if (c == ' ' || c == '\n' || c == '|' || c == '"') {
      if (!word.empty()) out.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  return out;
}

/// How a command's section of a script lists its flags: every flag offered after `-`, and the
/// flags whose value it completes.
struct Section {
  bool found = false;
  std::set<std::string> offered;
  std::set<std::string> valued;
  std::string text;
};

/// bash and zsh: the `case $cmd` arm of `name` (`''` before any command), from `    NAME)` to
/// its closing `      return ;;`. Flags are offered by its `if [[ $cur == -* ]]` line (or, before a
/// command, its only offer line); their values completed by the arms of its `case $prev`.
Section case_arm(const std::string& script, std::string_view name) {
  Section section;
  const std::size_t start = script.find(capsule::str("\n    ", name, ")\n"));
  if (start == std::string::npos) return section;
  const std::size_t end = script.find("\n      return ;;\n", start);
  section.found = end != std::string::npos;
  section.text = script.substr(start, end - start);
  for (const std::string& line : lines(section.text)) {
    if (line.starts_with("        -")) {
      for (const std::string& flag : tokens(line.substr(0, line.find(')')))) section.valued.insert(flag);
    }
    const bool offer = line.starts_with("      if [[ $cur == -* ]]; then ") ||
                       (name == "''" && (line.starts_with("      _capsule_words") || line.starts_with("      compadd")));
    if (!offer) continue;
    for (const std::string& word : tokens(line.substr(0, line.find("; return")))) {
      if (word.starts_with("-") && word != "-*" && word != "--") section.offered.insert(word);
    }
  }
  return section;
}

/// fish: the `complete` lines under `condition`: their `-l NAME` and `-s X`; those with `-x` or
/// `-r` take a value.
Section fish_lines(const std::string& script, std::string_view condition) {
  Section section;
  const std::string head = capsule::str("complete -c capsule -n '", condition, "' ");
  for (const std::string& line : lines(script)) {
    if (!line.starts_with(head)) continue;
    section.found = true;
    section.text += line.substr(0, line.find(" -d '")) + "\n";
    // The description (`-d '…'`, last on the line) is prose, not flags.
    const std::string body = line.substr(head.size(), line.find(" -d '") - head.size());
    const std::vector<std::string> words = tokens(body);
    std::vector<std::string> flags;
    bool valued = false;
    for (std::size_t i = 0; i < words.size(); ++i) {
      if (words[i] == "-l" && i + 1 < words.size()) flags.push_back("--" + words[i + 1]);
      if (words[i] == "-s" && i + 1 < words.size()) flags.push_back("-" + words[i + 1]);
      valued |= words[i] == "-x" || words[i] == "-r";
    }
    for (const std::string& flag : flags) {
      section.offered.insert(flag);
      if (valued) section.valued.insert(flag);
    }
  }
  return section;
}

/// What a command's section must hold: exactly its table flags, no other command's.
Section expected(const std::vector<const FlagSpec*>& flags) {
  Section section;
  for (const FlagSpec* f : flags) {
    if (f->positional != 0) continue;
    std::vector<std::string> spellings{"--" + std::string(f->name)};
    if (f->short_name != 0) spellings.push_back(std::string("-") + f->short_name);
    for (const std::string& spelling : spellings) {
      section.offered.insert(spelling);
      if (f->kind != ValueKind::None) section.valued.insert(spelling);
    }
  }
  return section;
}

std::string listed(const std::set<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += word + " ";
  return out;
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("each completion script gives every command exactly its own flags, and their values") {
    for (const std::string shell : {"bash", "zsh", "fish"}) {
      const CliRun run = capsule::testing::run_cli({"completions", shell});
      REQUIRE(run.status == 0);
      const bool fish = shell == "fish";
      for (const CommandSpec& spec : command_table()) {
        const Section got = fish ? fish_lines(run.out, "__capsule_using " + std::string(spec.name))
                                 : case_arm(run.out, spec.name);
        CHECK_MESSAGE(got.found != spec.hidden, shell << " " << spec.name);
        if (spec.hidden) continue;
        const Section want = expected(all_flags(spec.command));
        CHECK_MESSAGE(listed(got.offered) == listed(want.offered), shell << " " << spec.name << " offers");
        CHECK_MESSAGE(listed(got.valued) == listed(want.valued), shell << " " << spec.name << " completes values of");
      }
      // Before any command: the commands, the global flags and --version.
      std::vector<const FlagSpec*> leading;
      for (const FlagSpec& f : global_flags()) leading.push_back(&f);
      leading.push_back(&version_flag());
      const Section before = fish ? fish_lines(run.out, "not __capsule_command") : case_arm(run.out, "''");
      REQUIRE_MESSAGE(before.found, shell);
      CHECK_MESSAGE(listed(before.offered) == listed(expected(leading).offered), shell);
      CHECK_MESSAGE(listed(before.valued) == listed(expected(leading).valued), shell);
      for (const CommandSpec& spec : command_table()) {
        const std::vector<std::string> words = tokens(before.text);
        const bool offered = std::find_if(words.begin(), words.end(), [&](const std::string& word) {
                               return word == spec.name || word == "'" + std::string(spec.name) ||
                                      word == std::string(spec.name) + "'";
                             }) != words.end();
        CHECK_MESSAGE(offered != spec.hidden, shell << " offers the command " << spec.name);
      }
    }
    CHECK(capsule::testing::run_cli({"completions", "tcsh"}).status == 2);
    CHECK(capsule::testing::run_cli({"completions"}).status == 2);
  }

  TEST_CASE("fish completions describe each command and flag by the first clause of its help") {
    const CliRun run = capsule::testing::run_cli({"completions", "fish"});
    REQUIRE(run.status == 0);
    // A command: its summary, cut at the last word that fits in 60 characters with the `...`.
    CHECK(has(run.out, "complete -c capsule -n 'not __capsule_command' -a plan "
                       "-d 'select one capsule per op or graph node under a profile...'\n"));
    CHECK(has(run.out, "complete -c capsule -n 'not __capsule_command' -a list -d 'list capsules, profiles or ops'\n"));
    // A flag: the clause before ` (`; a `'` in the help escaped for fish's single quotes.
    CHECK(has(run.out, "complete -c capsule -n '__capsule_using run' -l dump-graph -r -F "
                       "-d 'write the model\\'s lowered IR graph'\n"));
    CHECK(has(run.out, "complete -c capsule -n '__capsule_using plan' -l profile -x "
                       "-a '(__capsule_names profiles one) (__capsule_paths)' "
                       "-d 'profile name, or a profile file path'\n"));
    CHECK(has(run.out, "complete -c capsule -n 'not __capsule_command' -l version -s V -d 'print the version'\n"));
    // Every command and flag line has one; the positional values (candidates, not flags) have none.
    for (const std::string& line : lines(run.out)) {
      if (!line.starts_with("complete -c capsule -n ")) continue;
      const bool described = line.find(" -l ") != std::string::npos ||
                             line.starts_with("complete -c capsule -n 'not __capsule_command' -a ");
      CHECK_MESSAGE(has(line, " -d '") == described, line);
      if (described) CHECK_MESSAGE(line.ends_with("'"), line);  // the description ends the line
    }
  }

  TEST_CASE("a completion description is the first clause of the help, at most 60 bytes") {
    using capsule::cli::completion::short_description;
    CHECK(short_description("the lint configuration (default: the nearest one)") == "the lint configuration");
    CHECK(short_description("an evidence ledger; repeatable") == "an evidence ledger");
    CHECK(short_description("print it. Then stop.") == "print it");
    CHECK(short_description("show this help.") == "show this help");
    CHECK(short_description("comma-separated ops, e.g. matmul,relu") == "comma-separated ops");
    CHECK(short_description("this build's evidence manifest: its test suites") == "this build's evidence manifest");
    CHECK(short_description("with --git: the directory") == "with --git: the directory");
    const std::string long_help = "one two three four five six seven eight nine ten eleven twelve thirteen";
    CHECK(short_description(long_help) == "one two three four five six seven eight nine ten eleven...");
    CHECK(short_description(long_help).size() <= capsule::cli::completion::kDescriptionWidth);
    CHECK(short_description("list a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u, v") ==
          "list a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q...");
    const std::string word(70, 'x');
    CHECK(short_description(word) == word);  // no space to cut at: kept whole
    CHECK(short_description(word + " tail") == word + "...");  // the long first word kept, the rest cut
    CHECK(short_description("") == "");
  }

  TEST_CASE("completions --list prints the loaded names of each kind, one a line") {
    const CliRun profiles = capsule::testing::run_shipped_cli({"completions", "--list", "profiles"});
    CHECK(profiles.status == 0);
    const std::vector<std::string> names = lines(profiles.out);
    CHECK(std::find(names.begin(), names.end(), "checked_cpu") != names.end());
    CHECK(std::find(names.begin(), names.end(), "strict") != names.end());
    const CliRun ops = capsule::testing::run_shipped_cli({"completions", "--list", "ops"});
    CHECK(has(ops.out, "matmul\n"));
    const CliRun examples = capsule::testing::run_cli({"completions", "--list", "examples"});
    CHECK(lines(examples.out).size() == capsule::examples::all_examples().size());
    const CliRun rules = capsule::testing::run_cli({"completions", "--list", "rules"});
    CHECK(lines(rules.out).size() == capsule::kLintRules.size());
    CHECK(has(rules.out, "expired-trust\n"));
    CHECK(capsule::testing::run_cli({"completions", "bash", "--list", "ops"}).status == 2);
  }

  TEST_CASE("only plain names are safe for a shell") {
    for (const char* safe : {"checked_cpu", "expired-trust", "a.b", "X9"}) CHECK(is_shell_safe_name(safe));
    for (const char* unsafe : {"", "$(touch pwned)", "a b", "-x", ".hidden", "a;b", "a*", "`id`", "a\nb", "naïve"}) {
      CHECK_MESSAGE(!is_shell_safe_name(unsafe), unsafe);
    }
    CHECK(!is_shell_safe_name(std::string(129, 'a')));
  }

  TEST_CASE("the man page lists every command and each of its flags, and no input line reads as a request") {
    const CliRun run = capsule::testing::run_cli({"man"});
    REQUIRE(run.status == 0);
    const std::string& page = run.out;
    CHECK(page.starts_with(".\\\" capsule(1)"));
    for (const CommandSpec& spec : command_table()) {
      if (spec.hidden) continue;
      const std::size_t start = page.find("\n.SS " + std::string(spec.name) + "\n");
      REQUIRE_MESSAGE(start != std::string::npos, spec.name);
      const std::size_t end = page.find("\n.S", start + 1);
      const std::string section = page.substr(start, end - start);
      for (const FlagSpec* f : all_flags(spec.command)) {
        bool global = false;
        for (const FlagSpec& g : global_flags()) global |= &g == f;
        const std::string written = "\\fB\\-\\-" + capsule::roff_escape(f->name) + "\\fR";
        CHECK_MESSAGE(has(global ? page : section, written), spec.name << " --" << f->name);
      }
    }
    for (const std::string& line : lines(page)) {
      if (!line.starts_with(".") && !line.starts_with("'")) continue;
      const bool request = line.starts_with(".\\\" ") || line.starts_with(".TH ") || line.starts_with(".SH ") ||
                           line.starts_with(".SS ") || line == ".TP" || line == ".PP" || line == ".nf" ||
                           line == ".fi" || line == ".br" || line.starts_with(".B ");
      CHECK_MESSAGE(request, line);
    }
  }
}
