// SPDX-License-Identifier: Apache-2.0
// Hostile sizes: TOML nesting and file-size limits (one rule for catalogs, profiles, graphs and
// waivers), the nesting pre-scan against toml++, bounded "did you mean", clipped quotes of long
// values, and strict dates.
#include <doctest/doctest.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "capsule/date.hpp"
#include "capsule/diff.hpp"
#include "capsule/load.hpp"
#include "capsule/text.hpp"
#include "capsule/toml_limits.hpp"
#include "test_support.hpp"

using namespace capsule;
using capsule::testing::has;
using capsule::testing::test_data;

namespace {

std::string repeat(std::string_view part, std::size_t times) {
  std::string out;
  out.reserve(part.size() * times);
  for (std::size_t i = 0; i < times; ++i) out += part;
  return out;
}

/// The nesting depth of a parsed TOML tree, counted as the scan counts it: the root table is
/// level 0 and every table entry or array element is one level below its parent.
std::size_t tree_depth(const toml::node& node, std::size_t level = 0) {
  std::size_t deepest = level;
  if (const auto* table = node.as_table()) {
    for (auto&& [key, value] : *table) deepest = std::max(deepest, tree_depth(value, level + 1));
  } else if (const auto* array = node.as_array()) {
    for (const toml::node& element : *array) deepest = std::max(deepest, tree_depth(element, level + 1));
  }
  return deepest;
}

std::size_t depth_of(std::string_view text) { return detail::scan_nesting(text, 1000).depth; }

/// The deep documents of the issue: 40,000 levels in about 80 KB, one per way of nesting.
struct DeepDocument {
  std::string name;
  std::string text;
};
std::vector<DeepDocument> deep_documents(std::size_t levels) {
  return {
      {"dotted key", "schema = 1\n" + repeat("a.", levels) + "a = 1\n"},
      {"table header", "schema = 1\n[" + repeat("a.", levels) + "a]\n"},
      {"array-of-tables header", "schema = 1\n[[" + repeat("a.", levels) + "a]]\n"},
      {"inline tables", "schema = 1\nx = " + repeat("{a=", levels) + "1" + repeat("}", levels) + "\n"},
      {"arrays", "schema = 1\nx = " + repeat("[", levels) + repeat("]", levels) + "\n"},
      {"inline tables with dotted keys", "schema = 1\nx = " + repeat("{a.b=", levels) + "1" + repeat("}", levels) + "\n"},
  };
}

void check_rejected_at_line_2(const Diagnostics& diagnostics, const std::string& path) {
  REQUIRE_FALSE(diagnostics.empty());
  const Diagnostic& first = diagnostics.front();
  CHECK(first.code == DiagCode::ParseError);
  CHECK(first.where.file == path);
  CHECK(first.where.line == 2);
  CHECK(first.where.column > 1);
  CHECK(has(first.message, "nesting deeper than 128 levels"));
}

}  // namespace

TEST_SUITE("limits") {

TEST_CASE("nesting scan: depth counted as the parsed tree nests") {
  CHECK(depth_of("") == 0);
  CHECK(depth_of("# only a comment\n") == 0);
  CHECK(depth_of("a = 1") == 1);
  CHECK(depth_of("a.b.c = 1") == 3);
  CHECK(depth_of("a . b\t. c = 1") == 3);
  CHECK(depth_of("[a.b]\nx = 1\n") == 3);
  CHECK(depth_of("[a.b]\n") == 2);
  CHECK(depth_of("[[a]]\nx = 1\n") == 3);
  CHECK(depth_of("[[a]]\n") == 2);
  CHECK(depth_of("a = [[1]]") == 3);
  CHECK(depth_of("a = []") == 1);
  CHECK(depth_of("a = [ ]") == 1);
  CHECK(depth_of("a = {}") == 1);
  CHECK(depth_of("a = {b = {c = 1}}") == 3);
  CHECK(depth_of("a = {b.c = [1]}") == 4);
  CHECK(depth_of("[t]\na = [\n  1, # one\n  [2],\n]\n") == 4);
  // A header resets the level: only the deepest table counts.
  CHECK(depth_of("[a.b.c]\n[d]\nx = 1\n") == 3);
}

TEST_CASE("nesting scan: brackets, braces and dots inside strings, quoted keys and comments do not nest") {
  CHECK(depth_of("a = \"[[[[{{{{a.b.c\"") == 1);
  CHECK(depth_of("a = '[[[[{{{{'") == 1);
  CHECK(depth_of("a = \"x\\\"[[[[\"") == 1);
  CHECK(depth_of("a = 'x\\'\nb = 1") == 1);  // no escapes in literal strings: the line ends the string
  CHECK(depth_of("a = \"\"\"\n[[[[\n{{{{\n\"\"\"\n") == 1);
  CHECK(depth_of("a = '''\n[[[[\n'''\n") == 1);
  CHECK(depth_of("a = \"\"\"x\\\"\"\"[[[[\"\"\"") == 1);
  CHECK(depth_of("# [[[[ a.b.c.d\na = 1 # {{{{\n") == 1);
  CHECK(depth_of("\"a.b.c\" = 1") == 1);
  CHECK(depth_of("'a.b.c' = 1") == 1);
  CHECK(depth_of("a.\"b.c\".'d.e' = 1") == 3);
  CHECK(depth_of("[\"a.b\".'c.d']\nx = 1") == 3);
  CHECK(depth_of("a = { \"b.c\" = \"[[{{\" }") == 2);
}

TEST_CASE("nesting scan: what follows a tricky token is still scanned") {
  // A closing run of four or five quotes ends a multi-line string (one or two quotes of content).
  CHECK(depth_of("a = \"\"\"x\"\"\"\"\nb = [[1]]\n") == 3);
  CHECK(depth_of("a = \"\"\"x\"\"\"\"\"\nb = [[1]]\n") == 3);
  CHECK(depth_of("a = '''x''''\nb = [[1]]\n") == 3);
  CHECK(depth_of("a = ''''''\nb = [[1]]\n") == 3);
  CHECK(depth_of("a = \"\"\nb = [[1]]\n") == 3);
  CHECK(depth_of("a = \"\\\\\"\nb = [[1]]\n") == 3);
  // A line-ending backslash in a multi-line basic string.
  CHECK(depth_of("a = \"\"\"x \\\n  y\"\"\"\nb = [[1]]\n") == 3);
  // Date-times may hold a space; numbers hold dots.
  CHECK(depth_of("d = 1979-05-27 07:32:00Z\nb = [[1]]\n") == 3);
  CHECK(depth_of("f = 1.5e3\nb = [[1]]\n") == 3);
  // CRLF line ends, a byte order mark, a trailing comma, comments between array elements.
  CHECK(depth_of("a = 1\r\nb = [[1]]\r\n") == 3);
  CHECK(depth_of("\xEF\xBB\xBF" "b = [[1]]\n") == 3);
  CHECK(depth_of("b = [\n [1], # c\n [[2]],\n]\n") == 4);
  // Non-ASCII text in strings and comments.
  CHECK(depth_of("a = \"é[[\" # ü{{\nb = [[1]]\n") == 3);
}

TEST_CASE("nesting scan: the first level past the limit is reported where it starts") {
  const detail::NestingScan scan = detail::scan_nesting("x = 1\ny = [[[[1]]]]\n", 3);
  CHECK(scan.exceeded);
  CHECK(scan.depth == 4);
  CHECK(scan.deepest.line == 2);
  CHECK(scan.deepest.column == 8);  // the third `[` holds level 4 (y = 1, elements at 2, 3, 4)
  const detail::NestingScan keys = detail::scan_nesting("\"é\".b.c.d = 1\n", 3);
  CHECK(keys.exceeded);
  CHECK(keys.deepest.column == 9);  // columns count code points, as toml++ does
  CHECK_FALSE(detail::scan_nesting("a.b.c = 1\n", 3).exceeded);
}

TEST_CASE("nesting scan: never rejects a document toml++ reads within the limit (D <= T <= 2D)") {
  // Every TOML file in the repository and the invalid gallery, plus documents built to pass
  // through arrays of tables, where the tree nests deeper than the headers say.
  std::vector<std::pair<std::string, std::string>> documents;
  for (const auto& dir : {testing::source_dir() / "catalogs", testing::source_dir() / "profiles",
                          testing::source_dir() / "examples" / "graphs", test_data()}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      if (entry.is_regular_file() && entry.path().extension() == ".toml") {
        documents.emplace_back(entry.path().string(), testing::read_text(entry.path()));
      }
    }
  }
  documents.emplace_back("aot", "[[a]]\n[[a.b]]\n[[a.b.c]]\nx = 1\n[a.b.c.d]\ny = [{z = [1]}]\n");
  documents.emplace_back("mixed", "a = [{b = [{c = {d.e = 1}}]}]\n[t.'u.v']\n\"w\" = '''x'''\n");
  REQUIRE(documents.size() > 20);
  for (const auto& [name, text] : documents) {
    CAPTURE(name);
    // Past the limit (the hostile files): the scan stops there, and so must we.
    const detail::NestingScan scan = detail::scan_nesting(text);
    if (scan.exceeded) {
      CHECK(has(name, "hostile"));
      continue;
    }
    toml::table parsed;
    try {
      parsed = toml::parse(text);
    } catch (const toml::parse_error&) {
      continue;  // not TOML: nothing to compare
    }
    const std::size_t scanned = scan.depth;
    const std::size_t tree = tree_depth(parsed);
    CHECK(scanned <= tree);
    CHECK(tree <= 2 * scanned);
  }
}

TEST_CASE("deep nesting is a located parse-error in catalogs, profiles, graphs and waivers, not a crash") {
  for (const DeepDocument& document : deep_documents(40000)) {
    CAPTURE(document.name);
    CHECK(document.text.size() < 250000);
    Diagnostics catalog;
    CHECK_FALSE(parse_catalog(document.text, "deep.toml", {}, catalog).has_value());
    check_rejected_at_line_2(catalog, "deep.toml");
    Diagnostics profile;
    CHECK_FALSE(parse_profile(document.text, "deep.profile.toml", {}, profile).has_value());
    check_rejected_at_line_2(profile, "deep.profile.toml");
    Diagnostics graph;
    CHECK_FALSE(parse_graph(document.text, "deep.graph.toml", graph).has_value());
    check_rejected_at_line_2(graph, "deep.graph.toml");
    const auto waivers = parse_waivers(document.text, "waivers.toml");
    REQUIRE_FALSE(waivers.has_value());
    check_rejected_at_line_2(waivers.error(), "waivers.toml");
  }
}

TEST_CASE("nesting at the limit still loads as far as the format goes, one past it does not") {
  // x is at level 1 and the array it holds too; each `[` inside is one level deeper.
  const std::string at_limit = "x = " + repeat("[", 128) + repeat("]", 128) + "\n";
  CHECK_FALSE(detail::scan_nesting(at_limit).exceeded);
  const std::string past = "x = " + repeat("[", 129) + repeat("]", 129) + "\n";
  CHECK(detail::scan_nesting(past).exceeded);
  Diagnostics diagnostics;
  CHECK_FALSE(parse_graph(at_limit, "g.graph.toml", diagnostics).has_value());
  REQUIRE_FALSE(diagnostics.empty());
  CHECK_FALSE(has(diagnostics.front().message, "nesting deeper"));
}

TEST_CASE("hostile files under tests/data/hostile/limits are rejected with a located parse-error") {
  const std::filesystem::path dir = test_data() / "hostile" / "limits";
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.path().filename().string().starts_with("deep-")) continue;
    ++files;
    CAPTURE(entry.path().string());
    Diagnostics diagnostics;
    CHECK_FALSE(load_catalog(entry.path(), {}, diagnostics).has_value());
    check_rejected_at_line_2(diagnostics, entry.path().string());
  }
  CHECK(files == 6);
}

TEST_CASE("a file larger than the limit is a parse-error, whether read from disk or given as text") {
  std::string big = "schema = 1\n";
  big += "# " + std::string(detail::kMaxTomlBytes, 'x') + "\n";
  Diagnostics text_diagnostics;
  CHECK_FALSE(parse_catalog(big, "big.toml", {}, text_diagnostics).has_value());
  REQUIRE(text_diagnostics.size() == 1);
  CHECK(text_diagnostics[0].code == DiagCode::ParseError);
  CHECK(text_diagnostics[0].where.line == 2);
  CHECK(has(text_diagnostics[0].message, "larger than 16 MiB"));

  const std::filesystem::path file = std::filesystem::temp_directory_path() / "capsule-limits-big.toml";
  {
    std::ofstream out(file, std::ios::binary);
    out << big;
  }
  Diagnostics file_diagnostics;
  CHECK_FALSE(load_catalog(file, {}, file_diagnostics).has_value());
  std::filesystem::remove(file);
  REQUIRE(file_diagnostics.size() == 1);
  CHECK(file_diagnostics[0].code == DiagCode::ParseError);
  CHECK(file_diagnostics[0].where.file == file.string());
  CHECK(has(file_diagnostics[0].message, "larger than 16 MiB"));
}

TEST_CASE("edit distance: bounded, linear memory, same answers as the full table") {
  CHECK(edit_distance("relu", "relu") == 0);
  CHECK(edit_distance("cuda", "cdua") == 1);  // a transposition is one edit
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("RELU", "relu") == 0);
  CHECK(edit_distance("kitten", "sitting", 2) == 3);  // past the bound: bound + 1
  CHECK(edit_distance("kitten", "sitting", 3) == 3);
  CHECK(edit_distance("a", std::string(1000, 'b'), 5) == 6);

  // The full table, kept here as the specification the banded rows must match.
  const auto full = [](std::string_view a, std::string_view b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
    return d[a.size()][b.size()];
  };
  std::mt19937 random(7);
  const auto word = [&] {
    std::string w(random() % 12, 'a');
    for (char& c : w) c = static_cast<char>('a' + random() % 3);
    return w;
  };
  for (int n = 0; n < 3000; ++n) {
    const std::string a = word(), b = word();
    const std::size_t expected = full(a, b);
    CAPTURE(a);
    CAPTURE(b);
    CHECK(edit_distance(a, b) == expected);
    const std::size_t bound = random() % 6;
    CHECK(edit_distance(a, b, bound) == std::min(expected, bound + 1));
  }
}

TEST_CASE("did you mean: no suggestion for absurd lengths, closest one otherwise") {
  CHECK(nearest_name("rleu", {"relu", "gelu", "matmul"}) == "relu");
  CHECK(nearest_name("zzzzzz", {"relu", "gelu"}).empty());
  CHECK(nearest_name("zzzzzz", {"relu", "gelu"}, /*any_distance=*/true) == "relu");
  const std::string long_name(kMaxSuggestionLength + 1, 'r');
  CHECK(nearest_name(long_name, {"relu"}, /*any_distance=*/true).empty());
  CHECK(nearest_name("relu", {std::string_view(long_name), "gelu"}) == "gelu");
  // The issue's case: two 20,000-character names. Before, 3 GB of table; now no comparison.
  const std::string a(20000, 'a');
  std::string b = a;
  b.back() = 'b';
  CHECK(nearest_name(a, {std::string_view(b)}).empty());
}

TEST_CASE("messages quote at most a clipped prefix of a huge value") {
  CHECK(clipped("relu") == "relu");
  const std::string huge(5 << 20, 'x');
  const std::string quoted = clipped(huge);
  CHECK(quoted.size() < 200);
  CHECK(has(quoted, "… (5242880 bytes)"));
  // Never splits a UTF-8 character: "é" is two bytes, the cut falls inside one.
  const std::string accents = "a" + repeat("é", 100);
  const std::string cut = clipped(accents, 4);
  CHECK(cut.starts_with("aé…"));

  // A 5 MB misspelled op: one unknown-spelling error, the value clipped, no suggestion.
  const std::string catalog = std::string(testing::kCatalogHead) + "\n[[capsule]]\nname = \"x.relu\"\nop = \"" +
                              std::string(5 << 20, 'q') + "\"\n";
  Diagnostics diagnostics;
  CHECK_FALSE(parse_catalog(catalog, "long.toml", {}, diagnostics).has_value());
  REQUIRE_FALSE(diagnostics.empty());
  for (const Diagnostic& d : diagnostics) {
    CHECK(d.message.size() < 1000);
    CHECK(d.help.size() < 1000);
  }
  CHECK(diagnostics.front().code == DiagCode::UnknownSpelling);
  CHECK(has(diagnostics.front().message, "(5242880 bytes)"));
}

TEST_CASE("a 20,000-character unknown module name is reported clipped, without a suggestion") {
  const Workspace workspace = load_workspace({test_data() / "hostile" / "limits" / "long-names" / "catalogs"},
                                             {test_data() / "hostile" / "limits" / "long-names" / "profiles"});
  const auto unknown = std::find_if(workspace.diagnostics.begin(), workspace.diagnostics.end(),
                                    [](const Diagnostic& d) { return d.code == DiagCode::UnknownModule; });
  REQUIRE(unknown != workspace.diagnostics.end());
  CHECK(unknown->message.size() < 1000);
  CHECK(has(unknown->message, "(20000 bytes)"));
  CHECK(unknown->help.empty());
}

TEST_CASE("dates: strict YYYY-MM-DD, real calendar days, years 1970 to 9999") {
  CHECK(parse_date("2026-06-30").value() == Date{std::chrono::year{2026}, std::chrono::month{6}, std::chrono::day{30}});
  CHECK(parse_date("2024-02-29").has_value());
  CHECK(parse_date("2000-02-29").has_value());
  CHECK(parse_date("9999-12-31").has_value());
  CHECK(parse_date("1970-01-01").has_value());
  // 257 used to wrap to month 1 in an 8-bit std::chrono::month; 99999 to a negative year.
  CHECK(parse_date("2026-257-01").error() == "expected a date written YYYY-MM-DD, e.g. 2027-06-30");
  CHECK_FALSE(parse_date("99999-01-01").has_value());
  CHECK(parse_date("2026-13-01").error() == "month 13 is out of range (1 to 12)");
  CHECK(parse_date("2026-00-10").error() == "month 0 is out of range (1 to 12)");
  CHECK(parse_date("2026-02-29").error() == "day 29 is out of range (2026-02 has days 1 to 28)");
  CHECK(parse_date("1900-02-29").error() == "year 1900 is out of range (1970 to 9999)");
  CHECK_FALSE(parse_date("2026-04-31").has_value());
  CHECK_FALSE(parse_date("2026-04-00").has_value());
  CHECK_FALSE(parse_date("0000-01-01").has_value());
  CHECK_FALSE(parse_date("2026-1-1").has_value());
  CHECK_FALSE(parse_date("2026-01-01x").has_value());
  CHECK_FALSE(parse_date(" 2026-01-01").has_value());
  CHECK_FALSE(parse_date("+202-01-01").has_value());
  CHECK_FALSE(parse_date("").has_value());
}

TEST_CASE("CAPSULE_TODAY out of range is a usage error, never another day") {
  for (const char* today : {"2026-257-01", "99999-01-01", "2026-02-30", "1969-12-31"}) {
    CAPTURE(today);
    cli::Environment env;
    env.today = today;
    const testing::CliRun run = testing::run_cli({"lint", "--catalogs", (testing::source_dir() / "catalogs").string(),
                                                  "--profiles", (testing::source_dir() / "profiles").string()},
                                                 env);
    CHECK(run.status == 2);
    CHECK(has(run.err, std::string("CAPSULE_TODAY=") + today + " is not a date"));
  }
}

TEST_CASE("out-of-range expiry dates in catalogs and waivers are invalid values at their position") {
  const std::string catalog = std::string(testing::kCatalogHead) + R"(
[[capsule]]
name = "x.relu"
op = "relu"
provider = "libtorch"
trust = "trusted-external"
reason = "vendor"
owner = "x"
expires = 1960-01-01
)";
  Diagnostics diagnostics;
  CHECK_FALSE(parse_catalog(catalog, "dates.toml", {}, diagnostics).has_value());
  const auto invalid = std::find_if(diagnostics.begin(), diagnostics.end(),
                                    [](const Diagnostic& d) { return d.code == DiagCode::InvalidValue; });
  REQUIRE(invalid != diagnostics.end());
  CHECK(invalid->where.line == 22);  // the `expires` line
  CHECK(invalid->where.column == 11);
  CHECK(has(invalid->message, "`expires` in "));
  CHECK(has(invalid->message, "year 1960 is out of range"));

  const auto waivers = parse_waivers(R"(schema = 1
[[waiver]]
change = "weakened:capsule:reference.relu:value"
accepted_by = "a"
reason = "r"
expires = 0001-01-01
)",
                                     "waivers.toml");
  REQUIRE_FALSE(waivers.has_value());
  CHECK(waivers.error().front().code == DiagCode::InvalidValue);
  CHECK(waivers.error().front().where == SourceLoc{"waivers.toml", 6, 11});
}

}  // TEST_SUITE

TEST_SUITE("limits") {

TEST_CASE("plan, check, explain and run check only the profile they name, lint and list check every one") {
  namespace fs = std::filesystem;
  const fs::path extra = fs::temp_directory_path() / "capsule-limits-lazy-profiles";
  fs::remove_all(extra);
  fs::create_directories(extra);
  {
    std::ofstream out(extra / "broken.toml");
    out << "schema = 1\nname = \"broken\"\ndevice = \"cpu\"\nmodules = [\"reference\", \"nowhere\"]\n\n"
           "[availability]\ndevices = [\"cpu\"]\nproviders = [\"reference\"]\n";
  }
  const std::string catalogs = (testing::source_dir() / "catalogs").string();
  const std::string profiles = (testing::source_dir() / "profiles").string();
  const auto with_data = [&](std::vector<std::string> args) {
    for (const std::string& flag : {std::string("--catalogs"), catalogs, std::string("--profiles"), profiles,
                                    std::string("--profiles"), extra.string()}) {
      args.push_back(flag);
    }
    return args;
  };

  SUBCASE("engine: the check is skipped at load and made on demand") {
    LoadOptions options;
    options.check_every_profile = false;
    const Workspace lazy = load_workspace({catalogs}, {profiles, extra}, options);
    CHECK_FALSE(has_errors(lazy.diagnostics));
    const ProfilePtr broken = lazy.find_profile("broken");
    REQUIRE(broken != nullptr);
    const Diagnostics problems = check_profile(lazy, *broken);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].code == DiagCode::UnknownModule);
    CHECK(check_profile(lazy, *lazy.find_profile("checked_cpu")).empty());
    const Workspace eager = load_workspace({catalogs}, {profiles, extra});
    CHECK(has_errors(eager.diagnostics));
  }
  SUBCASE("cli: another profile plans; the broken one fails with its diagnostic; lint reports it") {
    CHECK(testing::run_cli(with_data({"plan", "--profile", "checked_cpu", "--ops", "relu"})).status == 0);
    CHECK(testing::run_cli(with_data({"check", "--profile", "checked_cpu", "--ops", "relu"})).status == 0);
    CHECK(testing::run_cli(with_data({"explain", "--profile", "checked_cpu", "--op", "relu"})).status == 0);
    for (const std::vector<std::string>& command : {std::vector<std::string>{"plan", "--ops", "relu"},
                                                   std::vector<std::string>{"check", "--ops", "relu"},
                                                   std::vector<std::string>{"explain", "--op", "relu"}}) {
      std::vector<std::string> args = command;
      args.insert(args.begin() + 1, {"--profile", "broken"});
      const testing::CliRun run = testing::run_cli(with_data(args));
      CAPTURE(command.front());
      CHECK(run.status == 2);
      CHECK(has(run.err, "error[unknown-module]"));
      CHECK(has(run.err, "names unknown capsule module `nowhere`"));
    }
    const testing::CliRun lint = testing::run_cli(with_data({"lint"}));
    CHECK(lint.status != 0);
    CHECK(has(lint.err + lint.out, "names unknown capsule module `nowhere`"));
  }
  fs::remove_all(extra);
}

}  // TEST_SUITE
