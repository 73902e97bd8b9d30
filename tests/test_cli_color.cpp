// SPDX-License-Identifier: Apache-2.0
// `--color auto|always|never`: which streams get colour, which formats never do, and that colour
// never lets an input forge output (its bytes are still escaped; escape sequences are ours).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_support.hpp"

using capsule::testing::CliRun;
using capsule::testing::has;
using capsule::testing::source_dir;

namespace {

constexpr char kEsc = '\x1b';

/// A catalog directory with one file that does not parse, named `name`.
std::filesystem::path broken_catalogs(const std::string& dir_name, const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("capsule-color-" + dir_name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "catalogs");
  std::ofstream(dir / "catalogs" / name) << "[module]\nname = \n";
  return dir;
}

CliRun lint(const std::filesystem::path& dir, std::vector<std::string> extra, const capsule::cli::Environment& env = {}) {
  std::vector<std::string> args{"lint", "--catalogs", (dir / "catalogs").string(), "--profiles",
                                (source_dir() / "profiles").string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return capsule::testing::run_cli(args, env);
}

/// `text` without the escape sequences TextStyle writes; what is left must hold no ESC at all.
std::string without_our_sequences(std::string text) {
  for (const char* sequence : {"\x1b[1;31m", "\x1b[1;33m", "\x1b[1;36m", "\x1b[1;34m", "\x1b[1;32m", "\x1b[1m", "\x1b[0m"}) {
    const std::string s(sequence);
    for (std::size_t at = text.find(s); at != std::string::npos; at = text.find(s, at)) text.erase(at, s.size());
  }
  return text;
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("--color always colours the severity, the locus and the lint verdict, and never or piped output does not") {
    const auto dir = broken_catalogs("basic", "broken.toml");
    const CliRun always = lint(dir, {"--color", "always"});
    CHECK(always.status == 1);
    CHECK(has(always.out, "\x1b[1m" + (dir / "catalogs/broken.toml").string() + ":2:8:\x1b[0m \x1b[1;31merror[parse-error]:\x1b[0m "));
    CHECK(has(always.out, " profiles: \x1b[1;31m"));  // the tally: errors in red
    CHECK(has(always.out, " errors\x1b[0m, \x1b[1;33m"));  // warnings in yellow
    CHECK(without_our_sequences(always.out).find(kEsc) == std::string::npos);

    const CliRun before = capsule::testing::run_cli({"--color", "always", "lint", "--catalogs", (dir / "catalogs").string(),
                                                     "--profiles", (source_dir() / "profiles").string()});
    CHECK(before.out == always.out);  // before or after the command name alike

    const CliRun never = lint(dir, {"--color", "never"});
    CHECK(never.out.find(kEsc) == std::string::npos);
    CHECK(has(never.out, "broken.toml:2:8: error[parse-error]: "));

    capsule::cli::Environment piped;  // auto, not a terminal
    CHECK(lint(dir, {}, piped).out.find(kEsc) == std::string::npos);
  }

  TEST_CASE("--color auto colours a terminal unless NO_COLOR is set, and always wins over NO_COLOR") {
    const auto dir = broken_catalogs("auto", "broken.toml");
    capsule::cli::Environment terminal;
    terminal.terminal = true;
    CHECK(lint(dir, {}, terminal).out.find(kEsc) != std::string::npos);
    CHECK(lint(dir, {}, terminal).err.find(kEsc) == std::string::npos);  // stderr is not a terminal
    capsule::cli::Environment no_color = terminal;
    no_color.no_color = true;
    CHECK(lint(dir, {}, no_color).out.find(kEsc) == std::string::npos);
    CHECK(lint(dir, {"--color", "always"}, no_color).out.find(kEsc) != std::string::npos);
    CHECK(lint(dir, {"--color", "never"}, terminal).out.find(kEsc) == std::string::npos);
  }

  TEST_CASE("--color always leaves JSON, SARIF and GitHub annotations uncoloured") {
    const auto dir = broken_catalogs("formats", "broken.toml");
    for (const char* format : {"json", "sarif", "github"}) {
      const CliRun run = lint(dir, {"--color", "always", "--format", format});
      CHECK(run.status == 1);
      CHECK_MESSAGE(run.out.find(kEsc) == std::string::npos, format);
    }
    const CliRun plan = capsule::testing::run_shipped_cli({"plan", "--color", "always", "--profile", "checked_cpu",
                                                           "--ops", "matmul", "--format", "markdown"});
    CHECK(plan.status == 0);
    CHECK(plan.out.find(kEsc) == std::string::npos);
  }

  TEST_CASE("--color always still escapes an ESC byte that an input carries") {
    const auto dir = broken_catalogs("hostile", "evil\x1b[31mred.toml");
    const CliRun run = lint(dir, {"--color", "always"});
    CHECK(run.status == 1);
    CHECK(has(run.out, "evil\\x1b[31mred.toml:2:8:"));
    CHECK(without_our_sequences(run.out).find(kEsc) == std::string::npos);
    CHECK(without_our_sequences(run.err).find(kEsc) == std::string::npos);
  }

  TEST_CASE("check, explain and diff colour their verdicts") {
    const CliRun accepted = capsule::testing::run_shipped_cli(
        {"check", "--color", "always", "--profile", "libtorch_forward_cuda", "--ops", "scaled_dot_product_attention"});
    CHECK(accepted.status == 0);
    CHECK(accepted.out.find("external: \x1b[1;32maccepted\x1b[0m\n") == 0);
    const CliRun rejected = capsule::testing::run_shipped_cli({"check", "--color", "always", "--profile",
                                                               "libtorch_forward_cuda", "--ops",
                                                               "scaled_dot_product_attention", "--assurance", "checked"});
    CHECK(rejected.status == 1);
    CHECK(rejected.out.find("checked: \x1b[1;31mrejected\x1b[0m libtorch.sdpa_forward value\n") == 0);
    const CliRun explain = capsule::testing::run_shipped_cli({"explain", "--color", "always", "--profile",
                                                              "libtorch_forward_strict", "--op",
                                                              "scaled_dot_product_attention"});
    CHECK(has(explain.out, "): \x1b[1;32mchosen\x1b[0m\n"));
    const std::string tree = source_dir().string();
    const CliRun diff = capsule::testing::run_cli({"diff", tree, tree, "--color", "always"});
    CHECK(diff.status == 0);
    CHECK(has(diff.out, "result: \x1b[1;32mpasses\x1b[0m (exit 0)"));
  }

  TEST_CASE("--color given before and after the command must agree, and takes only its three values") {
    const auto dir = broken_catalogs("conflict", "broken.toml");
    const CliRun both = capsule::testing::run_cli({"--color", "always", "lint", "--color", "never"});
    CHECK(both.status == 2);
    CHECK(has(both.err, "--color is given before and after the command with different values"));
    const CliRun bad = lint(dir, {"--color", "sometimes"});
    CHECK(bad.status == 2);
    CHECK(has(bad.err, "invalid value `sometimes` for --color (expected one of: auto, always, never)"));
    const CliRun bad_before = capsule::testing::run_cli({"--color=rainbow", "lint"});
    CHECK(bad_before.status == 2);
    CHECK(has(bad_before.err, "expected one of: auto, always, never"));
  }
}
