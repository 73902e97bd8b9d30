// SPDX-License-Identifier: Apache-2.0
// Shell completions and the man page come from the command table: each lists every command and
// flag the table has, and the names they complete are plain. (completions_check.sh drives the
// bash script and syntax-checks the zsh and fish ones; man_page_check.sh renders the page.)
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "command_table.hpp"
#include "completion_scripts.hpp"
#include "capsule/escape.hpp"
#include "capsule/examples.hpp"
#include "capsule/lint.hpp"
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

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("each completion script names every command and every flag it offers") {
    for (const char* shell : {"bash", "zsh", "fish"}) {
      const CliRun run = capsule::testing::run_cli({"completions", shell});
      REQUIRE(run.status == 0);
      for (const CommandSpec& spec : command_table()) {
        if (spec.hidden) continue;
        CHECK_MESSAGE(has(run.out, std::string(spec.name)), shell << " " << spec.name);
        for (const FlagSpec* f : all_flags(spec.command)) {
          if (f->positional != 0) continue;
          // fish names a flag `-l NAME`, bash and zsh `--NAME`.
          const std::string written = std::string(shell) == "fish" ? "-l " + std::string(f->name) : "--" + std::string(f->name);
          CHECK_MESSAGE(has(run.out, written), shell << " " << spec.name << " " << written);
        }
      }
    }
    CHECK(capsule::testing::run_cli({"completions", "tcsh"}).status == 2);
    CHECK(capsule::testing::run_cli({"completions"}).status == 2);
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
