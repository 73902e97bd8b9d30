// SPDX-License-Identifier: Apache-2.0
// Report forgery and invalid JSON (issue 8, items 6 and 7): the escaping function of each output
// format over a table of hostile strings, then every renderer end to end on a tree whose free
// text and a catalog file name are hostile (tests/data/hostile/forgery).
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/escape.hpp"
#include "capsule/runtime/error.hpp"
#include "json_check.hpp"
#include "test_support.hpp"

using namespace capsule;
using capsule::testing::has;

namespace {

using namespace std::string_literals;

/// One string per hostile class: every control class, bidi and invisible characters, each kind
/// of invalid UTF-8, backtick runs at the start, middle and end, and markup.
const std::vector<std::string>& hostile_strings() {
  static const std::vector<std::string> strings = [] {
    std::vector<std::string> out{
        "line\n::error::forged", "cr\r::error::forged", "\r\n::warning::x", "tab\tinside", "nul\0byte"s,
        "esc\x1b[2J\x1b]0;title\x07", "bel\a", "del\x7f", "c0 \x01\x02\x1f", "::error::at start", "  ::error::indented",
        "##[error]legacy", "#123 and #x", ":one colon",
        "c1 \xc2\x85 and \xc2\x9b[31m",                                   // U+0085 NEL, U+009B CSI
        "rlo \xe2\x80\xae" "fdp.exe",                                      // U+202E
        "lre \xe2\x80\xaa lro \xe2\x80\xad pdf \xe2\x80\xac rle \xe2\x80\xab",  // U+202A-U+202D
        "isolates \xe2\x81\xa6 \xe2\x81\xa7 \xe2\x81\xa8 \xe2\x81\xa9",    // U+2066-U+2069
        "marks \xe2\x80\x8e \xe2\x80\x8f \xd8\x9c",                        // U+200E, U+200F, U+061C
        "zw\xe2\x80\x8bsp \xe2\x80\x8c \xe2\x80\x8d \xe2\x81\xa0 \xe2\x81\xa4",  // U+200B-U+200D, U+2060, U+2064
        "bom\xef\xbb\xbf soft\xc2\xadhyphen mongolian\xe1\xa0\x8e",       // U+FEFF, U+00AD, U+180E
        "ls\xe2\x80\xa8ps\xe2\x80\xa9",                                    // U+2028, U+2029
        "tag \xf3\xa0\x80\x81\xf3\xa0\x81\x81",                            // U+E0001, U+E0041
        "byte \xff and \xfe",                                              // never UTF-8
        "overlong \xc0\xaf \xe0\x80\xaf \xf0\x80\x80\xaf",                // overlong '/'
        "surrogate \xed\xa0\x80\xed\xb0\x80",                              // U+D800 U+DC00 encoded
        "truncated \xe2\x82",                                              // cut three-byte sequence
        "truncated at end \xf0\x9f\x98",                                   // cut four-byte sequence
        "stray \x80\xbf continuation",                                     // continuation without lead
        "above \xf4\x90\x80\x80 max",                                      // U+110000
        "five \xf8\x88\x80\x80\x80",                                       // old five-byte form
        "`", "``", "```", "````", "`start", "``start", "end`", "end````", "mid ` one", "mid `` two",
        "mid ``` three ```` four", " ` ", " padded ", "pipe | cell", "a\\|b", "<script>alert(1)</script>",
        "@octocat and team@org", "[link](http://e.example) ![img](http://e.example/x.png)", "*em* _em_ ~~s~~ $x$",
        "&amp; entity", "back\\slash", "",
    };
    return out;
  }();
  return strings;
}

/// Plain text that every escaper leaves alone (besides markup in markdown).
const std::vector<std::string> kPlain{"reference.matmul", "a b: c, d", "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80",
                                      "catalogs/reference.toml:12:3"};

struct Decoded {
  char32_t code_point;
  std::size_t length;  // 0 when the bytes there are not well-formed UTF-8
};

/// A strict UTF-8 decoder written apart from the one under test (Unicode table 3-7).
Decoded decode_at(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char lead = b(0);
  if (lead < 0x80) return {lead, 1};
  std::size_t n = 0;
  char32_t cp = 0;
  if ((lead & 0xE0) == 0xC0) n = 2, cp = lead & 0x1F;
  else if ((lead & 0xF0) == 0xE0) n = 3, cp = lead & 0x0F;
  else if ((lead & 0xF8) == 0xF0) n = 4, cp = lead & 0x07;
  else return {0, 0};
  if (i + n > s.size()) return {0, 0};
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return {0, 0};
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0, 0};
  return {cp, n};
}

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const Decoded d = decode_at(s, i);
    if (d.length == 0) return false;
    i += d.length;
  }
  return true;
}

/// Why `out` is not inert, or "" when it is: valid UTF-8 with no control character (LF allowed
/// where `allow_newline`), no DEL, C1, bidi, invisible or separator character.
std::string why_not_inert(std::string_view out, bool allow_newline) {
  if (!valid_utf8(out)) return "invalid UTF-8";
  for (std::size_t i = 0; i < out.size();) {
    const Decoded d = decode_at(out, i);
    const char32_t c = d.code_point;
    if (c == '\n' && allow_newline) {
    } else if (c < 0x20 || c == 0x7F) {
      return "raw control byte " + std::to_string(static_cast<unsigned>(c)) + " at " + std::to_string(i);
    } else if (is_hidden_code_point(c)) {
      return "raw hidden code point " + std::to_string(static_cast<unsigned>(c)) + " at " + std::to_string(i);
    }
    i += d.length;
  }
  return {};
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

/// A line GitHub's runner would read as a workflow command: `::` or `##[` after leading blanks.
bool is_command_line(std::string_view line) {
  const std::size_t first = line.find_first_not_of(" \t");
  if (first == std::string_view::npos) return false;
  line.remove_prefix(first);
  return line.starts_with("::") || line.starts_with("##[");
}

std::string first_command_line(std::string_view text) {
  for (const std::string_view line : lines_of(text)) {
    if (is_command_line(line)) return std::string(line);
  }
  return {};
}

/// True when the character at `at` is preceded by an odd number of backslashes (escaped).
bool escaped_at(std::string_view s, std::size_t at) {
  std::size_t slashes = 0;
  while (at > slashes && s[at - slashes - 1] == '\\') ++slashes;
  return slashes % 2 == 1;
}

/// The `|` that split a GitHub table row into cells: every one not right after a backslash
/// (GitHub's table scanner reads `\|` as a pipe inside the cell, whatever precedes it).
std::size_t cell_bars(std::string_view line) {
  std::size_t bars = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '|' && (i == 0 || line[i - 1] != '\\')) ++bars;
  }
  return bars;
}

/// `markdown` without its fenced code blocks, where nothing is markup.
std::string outside_code_blocks(std::string_view markdown) {
  std::string out;
  bool fenced = false;
  for (const std::string_view line : lines_of(markdown)) {
    if (line.starts_with("```")) {
      fenced = !fenced;
      continue;
    }
    if (!fenced) out += std::string(line) + "\n";
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

/// The value of one quoted JSON string (RFC 8259), or nothing when it is malformed.
std::optional<std::string> json_string_value(std::string_view quoted) {
  if (quoted.size() < 2 || quoted.front() != '"' || quoted.back() != '"') return std::nullopt;
  const std::string_view body = quoted.substr(1, quoted.size() - 2);
  std::string out;
  const auto hex4 = [&](std::size_t at) -> std::optional<char32_t> {
    if (at + 4 > body.size()) return std::nullopt;
    char32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char h = body[at + k];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<char32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<char32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<char32_t>(h - 'A' + 10);
      else return std::nullopt;
    }
    return v;
  };
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (c == '"' || static_cast<unsigned char>(c) < 0x20) return std::nullopt;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i >= body.size()) return std::nullopt;
    switch (body[i]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        auto v = hex4(i + 1);
        if (!v) return std::nullopt;
        i += 4;
        if (*v >= 0xD800 && *v <= 0xDBFF) {
          if (i + 2 >= body.size() || body[i + 1] != '\\' || body[i + 2] != 'u') return std::nullopt;
          const auto low = hex4(i + 3);
          if (!low || *low < 0xDC00 || *low > 0xDFFF) return std::nullopt;
          i += 6;
          *v = 0x10000 + ((*v - 0xD800) << 10) + (*low - 0xDC00);
        } else if (*v >= 0xDC00 && *v <= 0xDFFF) {
          return std::nullopt;
        }
        append_utf8(out, *v);
        break;
      }
      default: return std::nullopt;
    }
  }
  return out;
}

/// `s` with each byte that is not well-formed UTF-8 replaced by U+FFFD (what json_escape means).
std::string with_replacement(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const Decoded d = decode_at(s, i);
    if (d.length == 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else {
      out.append(s.substr(i, d.length));
      i += d.length;
    }
  }
  return out;
}

bool json_parses(const std::string& text) {
  // JsonCheck reads one object; wrap anything else in one.
  const std::size_t first = text.find_first_not_of(" \n");
  if (first != std::string::npos && text[first] == '{') return capsule::testing::JsonCheck(text).one_object();
  return capsule::testing::JsonCheck("{\"x\":" + text + "}").one_object();
}

}  // namespace

TEST_SUITE("escape") {
  TEST_CASE("text_escape leaves no control, hidden character or invalid byte, and no field starts a command") {
    for (const std::string& s : hostile_strings()) {
      const std::string out = text_escape(s);
      INFO("input: ", json_escape(s), " output: ", json_escape(out));
      CHECK(why_not_inert(out, false) == "");
      CHECK_FALSE(is_command_line(out));
      CHECK_FALSE(is_command_line(" " + out));
      CHECK(text_escape(out) == out);  // idempotent: escaped text is plain text
    }
    for (const std::string& s : kPlain) CHECK(text_escape(s) == s);
  }

  TEST_CASE("text_escape spells each class one documented way") {
    CHECK(text_escape("a\nb\rc\td") == "a\\nb\\rc\\td");
    CHECK(text_escape("\x1b[2J\a\x7f"s + '\0') == "\\x1b[2J\\x07\\x7f\\x00");
    CHECK(text_escape("\xc2\x85") == "<U+0085>");
    CHECK(text_escape("a\xe2\x80\xae" "b") == "a<U+202E>b");
    CHECK(text_escape("\xe2\x80\x8b\xef\xbb\xbf\xe2\x80\xa8") == "<U+200B><U+FEFF><U+2028>");
    CHECK(text_escape("\xf3\xa0\x81\x81") == "<U+E0041>");
    CHECK(text_escape("\xff\xc0\xaf") == "\\xff\\xc0\\xaf");
    CHECK(text_escape("\xed\xa0\x80") == "\\xed\\xa0\\x80");
    CHECK(text_escape("\xe2\x82") == "\\xe2\\x82");
    CHECK(text_escape("::error::x") == "\\x3a:error::x");
    CHECK(text_escape("  ##[error]") == "  \\x23#[error]");
    CHECK(text_escape("a ::b #c") == "a ::b #c");  // only the field's first visible character
  }

  TEST_CASE("markdown_escape neutralises markup, mentions and pipes on top of text_escape") {
    for (const std::string& s : hostile_strings()) {
      const std::string out = markdown_escape(s);
      INFO("input: ", json_escape(s), " output: ", json_escape(out));
      CHECK(why_not_inert(out, false) == "");
      CHECK_FALSE(is_command_line(out));
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (out.compare(i, 8, "<!-- -->") == 0) i += 8;  // the comment that breaks a mention
        if (i >= out.size()) break;
        const char c = out[i];
        if (c == '`' || c == '|' || c == '*' || c == '_' || c == '[' || c == ']' || c == '!' || c == '~' || c == '$') {
          CHECK_MESSAGE(escaped_at(out, i), "unescaped ", c, " at ", i);
        }
        CHECK(c != '<');
        CHECK(c != '>');
        if (c == '@') CHECK(out.compare(i, 9, "@<!-- -->") == 0);
      }
    }
    CHECK(markdown_escape("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;");
    CHECK(markdown_escape("@octocat") == "@<!-- -->octocat");
    CHECK(markdown_escape("a|b") == "a\\|b");
    CHECK(markdown_escape("x\ny") == "x\\\\ny");  // the visible \n, its backslash escaped
    CHECK(markdown_escape("reference.matmul") == "reference.matmul");
  }

  TEST_CASE("markdown_code fences every backtick run and keeps its content exact") {
    for (const MarkdownPlace place : {MarkdownPlace::Inline, MarkdownPlace::TableCell}) {
      for (const std::string& s : hostile_strings()) {
        const std::string out = markdown_code(s, place);
        INFO("input: ", json_escape(s), " output: ", json_escape(out));
        CHECK(why_not_inert(out, false) == "");
        std::string content = text_escape(s);
        if (place == MarkdownPlace::TableCell) {
          std::string piped;
          for (const char c : content) piped += c == '|' ? "\\|" : std::string(1, c);
          content = piped;
        }
        // Opening fence: the leading backtick run; the span closes at the first run of that length.
        const std::size_t fence = out.find_first_not_of('`');
        REQUIRE(fence != std::string::npos);
        REQUIRE(fence >= 1);
        CHECK(out.size() >= 2 * fence);
        CHECK(out.substr(out.size() - fence) == std::string(fence, '`'));
        std::string inside = out.substr(fence, out.size() - 2 * fence);
        // No backtick run inside is as long as the fence, so the span cannot close early.
        std::size_t run = 0, longest = 0;
        for (const char c : inside) {
          run = c == '`' ? run + 1 : 0;
          longest = std::max(longest, run);
        }
        CHECK(longest < fence);
        CHECK(out[fence - 1] == '`');
        // CommonMark strips one space from each end when both ends are spaces.
        if (inside.size() >= 2 && inside.front() == ' ' && inside.back() == ' ' &&
            inside.find_first_not_of(' ') != std::string::npos) {
          inside = inside.substr(1, inside.size() - 2);
        }
        CHECK(inside == (content.empty() ? " " : content));
        if (place == MarkdownPlace::TableCell) CHECK(cell_bars(out) == 0);
      }
    }
    CHECK(markdown_code("reference.relu") == "`reference.relu`");
    CHECK(markdown_code("a`b") == "``a`b``");
    CHECK(markdown_code("`x") == "`` `x ``");
    CHECK(markdown_code("a|b") == "`a\\|b`");
    CHECK(markdown_code("a|b", MarkdownPlace::Inline) == "`a|b`");
  }

  TEST_CASE("json_escape writes valid UTF-8 JSON that reads back as the input, invalid bytes as U+FFFD") {
    std::vector<std::string> inputs = hostile_strings();
    inputs.insert(inputs.end(), kPlain.begin(), kPlain.end());
    for (const std::string& s : inputs) {
      const std::string out = json_escape(s);
      INFO("input: ", text_escape(s), " output: ", text_escape(out));
      CHECK(why_not_inert(out, false) == "");
      CHECK(json_parses(out));
      const std::optional<std::string> back = json_string_value(out);
      REQUIRE(back.has_value());
      CHECK(*back == with_replacement(s));
    }
    CHECK(json_escape("\xff") == "\"\\ufffd\"");
    CHECK(json_escape("a\xc0\xaf" "b") == "\"a\\ufffd\\ufffdb\"");
    CHECK(json_escape("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");
    CHECK(json_escape("\xe2\x80\xae") == "\"\\u202e\"");
    CHECK(json_escape("\xf3\xa0\x81\x81") == "\"\\udb40\\udc41\"");
    CHECK(json_escape("q\"\\\n\x1b") == "\"q\\\"\\\\\\n\\u001b\"");
    CHECK(json_escape("caf\xc3\xa9") == "\"caf\xc3\xa9\"");
  }

  TEST_CASE("github_escape keeps a value on its line and inside its property") {
    for (const std::string& s : hostile_strings()) {
      for (const GithubField field : {GithubField::Property, GithubField::Data}) {
        const std::string out = github_escape(s, field);
        INFO("input: ", json_escape(s), " output: ", json_escape(out));
        CHECK(why_not_inert(out, false) == "");
        CHECK_FALSE(is_command_line(out));
        if (field == GithubField::Property) {
          CHECK(out.find(':') == std::string::npos);
          CHECK(out.find(',') == std::string::npos);
        }
        // Every % starts an escape the runner decodes, so none can forge one.
        for (std::size_t i = out.find('%'); i != std::string::npos; i = out.find('%', i + 1)) {
          const std::string code = out.substr(i, 3);
          CHECK((code == "%25" || code == "%0D" || code == "%0A" || code == "%3A" || code == "%2C"));
        }
      }
    }
    CHECK(github_escape("100%\n::error::x", GithubField::Data) == "100%25\\n::error::x");
    CHECK(github_escape("a:b,c", GithubField::Property) == "a%3Ab%2Cc");
  }

  TEST_CASE("dot_escape keeps a label inside its quotes") {
    for (const std::string& s : hostile_strings()) {
      const std::string out = dot_escape(s);
      INFO("input: ", json_escape(s), " output: ", json_escape(out));
      CHECK(why_not_inert(out, false) == "");
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i] == '"') CHECK(escaped_at(out, i));
      }
      CHECK((out.empty() || out.back() != '\\' || escaped_at(out, out.size() - 1)));
    }
    CHECK(dot_escape("a\"b\nc") == "a\\\"b\\\\nc");
  }
}

namespace {

/// The hostile catalog's file name: a newline, a workflow command and the byte 0xFF.
const std::string kHostileFileName = "x\n::error::file\xff.toml";
/// A loadable catalog's file name: ESC, a newline, a workflow command and the byte 0xFE.
const std::string kLoadableHostileFileName = "y\x1b[2J\n::error::src\xfe.toml";

/// A scratch copy of the shipped tree whose `reference.relu` rests on a trusted boundary with a
/// hostile reason and owner, and whose checked_cpu profile has a hostile summary.
class HostileTree {
 public:
  explicit HostileTree(std::string_view name) : tree_(name) {
    tree_.replace("catalogs/reference.toml", "name = \"reference.relu\"\nop = \"relu\"\n",
                  testing::read_text(fixture() / "relu-boundary.toml.part"));
    tree_.replace("profiles/checked_cpu.toml", "summary = \"Portable checked CPU execution",
                  "summary = \"\\n::error::profile forged \\u001b[31m\\u202e @octocat | Portable checked CPU execution");
  }
  /// Adds the catalog whose file name is hostile (it fails to load: its expiry is no date).
  void add_hostile_file() const { tree_.write(std::filesystem::path("catalogs") / kHostileFileName,
                                              testing::read_text(fixture() / "forged.catalog.toml")); }
  /// Adds a valid catalog under a hostile file name, used by checked_cpu (so plans list it).
  void add_loadable_hostile_file() const {
    tree_.write(std::filesystem::path("catalogs") / kLoadableHostileFileName,
                testing::read_text(fixture() / "loadable.catalog.toml"));
    tree_.replace("profiles/checked_cpu.toml", "modules = [\"attention\", \"native-cuda\", \"reference\"]",
                  "modules = [\"attention\", \"native-cuda\", \"reference\", \"forged\"]");
  }
  std::string root() const { return tree_.root().string(); }

 private:
  static std::filesystem::path fixture() { return testing::test_data() / "hostile" / "forgery"; }
  testing::ScratchTree tree_;
};

/// Checks what every format promises: no raw control, bidi or invisible character, valid UTF-8,
/// and no line that GitHub would run as a workflow command.
void check_inert_text(const testing::CliRun& run) {
  INFO("stdout: ", json_escape(run.out));
  INFO("stderr: ", json_escape(run.err));
  CHECK(why_not_inert(run.out, true) == "");
  CHECK(why_not_inert(run.err, true) == "");
  CHECK(first_command_line(run.out) == "");
  CHECK(first_command_line(run.err) == "");
}

void check_json(const testing::CliRun& run) {
  INFO("stdout: ", text_escape(run.out));
  CHECK(why_not_inert(run.out, true) == "");
  CHECK(json_parses(run.out));
  CHECK(first_command_line(run.err) == "");
  CHECK(why_not_inert(run.err, true) == "");
}

}  // namespace

TEST_SUITE("escape") {
  TEST_CASE("plan: hostile reasons render inert as text, markdown and json") {
    const HostileTree tree("escape-plan");
    const auto plan = [&](std::string_view format) {
      return testing::run_cli({"plan", "--root", tree.root(), "--profile", "checked_cpu", "--ops", "relu,matmul",
                               "--format", std::string(format)});
    };
    const testing::CliRun text = plan("text");
    REQUIRE(text.status == 0);
    check_inert_text(text);
    // The hostile reason reached the report, visibly.
    CHECK(has(text.out, "vendor relu\\n::error::reason forged\\r\\n##[error]legacy\\x1b[2J"));
    CHECK(has(text.out, "<U+202E>gnp.exe<U+202C>"));
    CHECK(has(text.out, "profile=checked_cpu"));

    const testing::CliRun markdown = plan("markdown");
    REQUIRE(markdown.status == 0);
    check_inert_text(markdown);
    CHECK(has(markdown.out, "trusted boundary: vendor relu\\\\n::error::reason forged"));
    // The contracts are a table of escaped cells (issue 12): no markup survives anywhere.
    const std::string prose = outside_code_blocks(markdown.out);
    CHECK(has(prose, "&lt;script&gt;"));
    CHECK_FALSE(has(prose, "<script"));
    CHECK_FALSE(has(markdown.out, "<script"));  // as in the diff's Markdown: not even in a fence
    CHECK_FALSE(has(prose, "@octocat"));
    CHECK_FALSE(has(prose, "[link](http"));
    // Each table row keeps its header's cell bars: no `|` from the reason splits one.
    std::size_t header_cells = 0;
    for (const std::string_view line : lines_of(markdown.out)) {
      if (!line.starts_with("|")) {
        header_cells = 0;
        continue;
      }
      if (header_cells == 0) header_cells = cell_bars(line);
      CHECK_MESSAGE(cell_bars(line) == header_cells, std::string(line));
    }

    const testing::CliRun json = plan("json");
    REQUIRE(json.status == 0);
    check_json(json);
    CHECK(has(json.out, R"(vendor relu\n::error::reason forged\r\n##[error]legacy\u001b[2J)"));
    CHECK(has(json.out, R"(\u202egnp.exe\u202c)"));
  }

  TEST_CASE("explain, check and list: hostile reasons and summaries render inert") {
    const HostileTree tree("escape-explain");
    const testing::CliRun explain =
        testing::run_cli({"explain", "--root", tree.root(), "--profile", "checked_cpu", "--op", "relu"});
    check_inert_text(explain);
    CHECK(has(explain.out, "! gate: value evidence (trusted boundary: vendor relu\\n::error::reason forged"));
    const testing::CliRun check =
        testing::run_cli({"check", "--root", tree.root(), "--profile", "checked_cpu", "--ops", "relu"});
    CHECK(check.status == 1);  // the gate rejects the boundary under `checked`
    check_inert_text(check);
    CHECK(has(check.out, "vendor relu\\n::error::reason forged"));
    const testing::CliRun profiles = testing::run_cli({"list", "profiles", "--root", tree.root()});
    REQUIRE(profiles.status == 0);
    check_inert_text(profiles);
    CHECK(has(profiles.out, "\\n::error::profile forged \\x1b[31m<U+202E> @octocat"));
    const testing::CliRun profiles_json = testing::run_cli({"list", "profiles", "--root", tree.root(), "--format", "json"});
    check_json(profiles_json);
  }

  TEST_CASE("lint: a hostile file name and quoted value render inert in every format, JSON and SARIF stay UTF-8") {
    const HostileTree tree("escape-lint");
    tree.add_hostile_file();
    const auto lint = [&](std::string_view format) {
      return testing::run_cli({"lint", "--root", tree.root(), "--format", std::string(format)});
    };
    const testing::CliRun text = lint("text");
    CHECK(text.status == 1);
    check_inert_text(text);
    CHECK(has(text.out, "catalogs/x\\n::error::file\\xff.toml:15:"));
    CHECK(has(text.out, "2026-13-01\\n::error::date forged<U+202E>"));

    // Item 7: the 0xFF byte of the file name becomes U+FFFD; the output is valid UTF-8 and parses.
    const testing::CliRun json = lint("json");
    CHECK(json.status == 1);
    check_json(json);
    CHECK(has(json.out, R"(/catalogs/x\n::error::file\ufffd.toml")"));
    const testing::CliRun sarif = lint("sarif");
    CHECK(sarif.status == 1);
    check_json(sarif);
    CHECK(has(sarif.out, "x%0A%3A%3Aerror%3A%3Afile%FF.toml"));  // the URI percent-encodes the bytes
    CHECK(has(sarif.out, R"(2026-13-01\\n::error::date forged\u202e)"));

    // GitHub: every line is one of capsule's own commands, one per finding; nothing else starts one.
    const testing::CliRun github = lint("github");
    CHECK(github.status == 1);
    INFO("stdout: ", json_escape(github.out));
    CHECK(why_not_inert(github.out, true) == "");
    const std::vector<std::string_view> lines = lines_of(github.out);
    REQUIRE_FALSE(lines.empty());
    std::size_t findings = 0;
    for (std::size_t at = json.out.find("\"severity\":"); at != std::string::npos; at = json.out.find("\"severity\":", at + 1)) {
      ++findings;
    }
    CHECK(lines.size() == findings);
    for (const std::string_view line : lines) {
      const bool own = line.starts_with("::error ") || line.starts_with("::warning ") || line.starts_with("::notice ");
      CHECK_MESSAGE(own, std::string(line));
      // Past capsule's own `::command properties::`, no further `::` can start a command.
      const std::size_t data = line.find("::", 2);
      REQUIRE(data != std::string_view::npos);
      CHECK(line.substr(2, data - 2).find("::") == std::string_view::npos);
    }
    CHECK(has(github.out, "file=catalogs/x\\n%3A%3Aerror%3A%3Afile\\xff.toml,line=15,"));
  }

  TEST_CASE("diff: hostile reasons, owners and summaries render inert as text, markdown and json") {
    testing::ScratchTree base("escape-diff-base");
    const HostileTree head("escape-diff-head");
    const auto diff = [&](std::string_view format) {
      return testing::run_cli({"diff", base.root().string(), head.root(), "--format", std::string(format)});
    };
    const testing::CliRun text = diff("text");
    CHECK(text.status == 1);
    check_inert_text(text);
    CHECK(has(text.out, "weakened:capsule:reference.relu:value"));
    CHECK(has(text.out, "trusted-boundary (vendor relu\\n::error::reason forged"));
    CHECK(has(text.out, "ok\\n::error file=x::summary forged"));

    const testing::CliRun markdown = diff("markdown");
    CHECK(markdown.status == 1);
    check_inert_text(markdown);
    CHECK_FALSE(has(markdown.out, "<script"));
    CHECK_FALSE(has(markdown.out, "@octocat"));
    CHECK_FALSE(has(markdown.out, "[link](http"));
    CHECK(has(markdown.out, "\\`\\`\\` tick \\`"));
    // No row of a table gains a cell from a `|` in the input.
    std::size_t header_cells = 0;
    for (const std::string_view line : lines_of(markdown.out)) {
      if (!line.starts_with("|")) {
        header_cells = 0;
        continue;
      }
      const std::size_t cells = cell_bars(line);
      if (header_cells == 0) header_cells = cells;
      CHECK_MESSAGE(cells == header_cells, std::string(line));
    }

    const testing::CliRun json = diff("json");
    CHECK(json.status == 1);
    check_json(json);
    CHECK(has(json.out, R"(\u001b[2J\u001b]0;title\u0007\u0000 \u202egnp.exe)"));
  }

  TEST_CASE("diff and plan: a tree whose catalog file name is hostile fails to load, and says so inertly") {
    testing::ScratchTree base("escape-load-base");
    const HostileTree head("escape-load-head");
    head.add_hostile_file();
    const testing::CliRun diff = testing::run_cli({"diff", base.root().string(), head.root()});
    CHECK(diff.status == 2);
    check_inert_text(diff);
    CHECK(has(diff.err, "x\\n::error::file\\xff.toml:15:"));
    const testing::CliRun plan =
        testing::run_cli({"plan", "--root", head.root(), "--profile", "checked_cpu", "--ops", "relu"});
    CHECK(plan.status == 2);
    check_inert_text(plan);
    CHECK(has(plan.err, "x\\n::error::file\\xff.toml:15:"));
  }
}

TEST_SUITE("escape") {
  TEST_CASE("plan --graph: a hostile graph name stays inside its DOT string, code span and JSON string") {
    // Graph names are identifiers: a build that rejects this name at load must say so inertly; one
    // that loads it must keep it inside each format's string or span.
    const std::string graph = (testing::test_data() / "hostile" / "forgery" / "hostile-name.graph.toml").string();
    const auto plan = [&](std::string_view format) {
      return testing::run_cli({"plan", "--root", testing::source_dir().string(), "--profile", "checked_cpu", "--graph",
                               graph, "--format", std::string(format)});
    };
    const testing::CliRun dot = plan("dot");
    check_inert_text(dot);
    if (dot.status != 0) {
      CHECK(dot.status == 2);
      CHECK(has(dot.err, "hostile-name.graph.toml:3:"));
      CHECK(has(dot.err, "<U+202E>"));
      return;
    }
    const std::string_view first = lines_of(dot.out).front();
    INFO(std::string(first));
    std::size_t quotes = 0;
    for (std::size_t i = 0; i < first.size(); ++i) quotes += first[i] == '"' && !escaped_at(first, i) ? 1U : 0U;
    CHECK(quotes == 2);  // digraph "…" {: the name cannot close its string and add a node
    CHECK(first.ends_with("\" {"));
    CHECK(has(first, "x\\\\n::error::graph forged\\\\x1b[2J<U+202E>"));

    const testing::CliRun markdown = plan("markdown");
    REQUIRE(markdown.status == 0);
    check_inert_text(markdown);
    CHECK(has(markdown.out, "### Graph plan ````g\"]; evil [label=\"x\\n::error::graph forged\\x1b[2J<U+202E> @octocat ``` <b>```` under `checked_cpu`"));

    const testing::CliRun text = plan("text");
    REQUIRE(text.status == 0);
    check_inert_text(text);
    const testing::CliRun json = plan("json");
    REQUIRE(json.status == 0);
    check_json(json);
    CHECK(has(json.out, R"("name":"g\"]; evil [label=\"x\n::error::graph forged\u001b[2J\u202e @octocat ``` <b>")"));
  }

  TEST_CASE("plan --graph: hostile payload values and nested keys render inert") {
    const std::string graph = (testing::test_data() / "hostile" / "forgery" / "hostile-payload.graph.toml").string();
    const auto plan = [&](std::string_view format) {
      return testing::run_cli({"plan", "--root", testing::source_dir().string(), "--profile", "checked_cpu", "--graph",
                               graph, "--format", std::string(format)});
    };
    const testing::CliRun text = plan("text");
    REQUIRE(text.status == 0);
    check_inert_text(text);
    CHECK(has(text.out, "note=\"x\\n::error::payload forged\\u001B[2J<U+202E> @octocat\""));
    CHECK(has(text.out, "meta={ k\\n::error::nested key forged<U+202E> = \"v\" }"));
    const testing::CliRun json = plan("json");
    REQUIRE(json.status == 0);
    check_json(json);
    CHECK(has(json.out, R"(k\n::error::nested key forged\u202e)"));
    for (const std::string_view format : {"markdown", "dot"}) {
      const testing::CliRun run = plan(format);
      CHECK(run.status == 0);
      check_inert_text(run);
    }
  }

  TEST_CASE("run: a runtime error quoting input shows its controls visibly") {
    const RuntimeError error{RuntimeCode::UnknownProfile, "unknown profile `a\x1b[2J\xe2\x80\xae`\n  candidates: b\x07"};
    std::ostringstream out;
    out << error;
    CHECK(out.str() == "error[unknown-profile]: unknown profile `a\\x1b[2J<U+202E>`\n  candidates: b\\x07");
  }
}

TEST_SUITE("escape") {
  TEST_CASE("diff --accept: hostile waiver owners and reasons render inert in every format") {
    testing::ScratchTree base("escape-waiver-base");
    const HostileTree head("escape-waiver-head");
    const std::string waivers = (testing::test_data() / "hostile" / "forgery" / "waivers.toml").string();
    const auto diff = [&](std::string_view format) {
      return testing::run_cli({"diff", base.root().string(), head.root(), "--accept", waivers, "--format",
                               std::string(format)});
    };
    const testing::CliRun text = diff("text");
    CHECK(text.status == 1);  // the expired waiver fails the run
    check_inert_text(text);
    CHECK(has(text.out, "waived by eve\\n::error::waiver forged\\x1b[2J<U+202E> @octocat"));
    CHECK(has(text.out, "accepted by \\n::error::expired forged"));

    const testing::CliRun markdown = diff("markdown");
    CHECK(markdown.status == 1);
    check_inert_text(markdown);
    const std::string prose = outside_code_blocks(markdown.out);
    CHECK_FALSE(has(prose, "@octocat"));
    CHECK_FALSE(has(prose, "<b>"));
    CHECK_FALSE(has(prose, "[x](http"));
    CHECK(has(prose, "mallory\\\\x07 \\`\\`\\` \\`\\` \\` @<!-- -->octocat \\| x"));
    std::size_t header_cells = 0;
    for (const std::string_view line : lines_of(markdown.out)) {
      if (!line.starts_with("|")) {
        header_cells = 0;
        continue;
      }
      const std::size_t cells = cell_bars(line);
      if (header_cells == 0) header_cells = cells;
      CHECK_MESSAGE(cells == header_cells, std::string(line));
    }

    const testing::CliRun json = diff("json");
    CHECK(json.status == 1);
    check_json(json);
    CHECK(has(json.out, R"("accepted_by":"eve\n::error::waiver forged\u001b[2J\u202e @octocat | <b>bold</b>")"));
  }
}

TEST_SUITE("escape") {
  TEST_CASE("plan and diff: a loaded catalog's hostile file name is escaped in sources and locations") {
    testing::ScratchTree base("escape-source-base");
    const HostileTree head("escape-source-head");
    head.add_loadable_hostile_file();
    const auto plan = [&](std::string_view format) {
      return testing::run_cli({"plan", "--root", head.root(), "--profile", "checked_cpu", "--ops", "relu", "--format",
                               std::string(format)});
    };
    const testing::CliRun text = plan("text");
    REQUIRE(text.status == 0);
    check_inert_text(text);
    CHECK(has(text.out, "catalogs/y\\x1b[2J\\n::error::src\\xfe.toml sha256 "));
    const testing::CliRun markdown = plan("markdown");
    REQUIRE(markdown.status == 0);
    check_inert_text(markdown);
    CHECK(has(markdown.out, "catalogs/y\\x1b[2J\\n::error::src\\xfe.toml` | `"));
    const testing::CliRun json = plan("json");
    REQUIRE(json.status == 0);
    check_json(json);
    CHECK(has(json.out, R"(catalogs/y\u001b[2J\n::error::src\ufffd.toml")"));

    const auto diff = [&](std::string_view format) {
      return testing::run_cli({"diff", base.root().string(), head.root(), "--format", std::string(format)});
    };
    const testing::CliRun diff_text = diff("text");
    CHECK(diff_text.status == 1);
    check_inert_text(diff_text);
    CHECK(has(diff_text.out, "at catalogs/y\\x1b[2J\\n::error::src\\xfe.toml:"));
    const testing::CliRun diff_markdown = diff("markdown");
    CHECK(diff_markdown.status == 1);
    check_inert_text(diff_markdown);
    CHECK(has(diff_markdown.out, "`catalogs/y\\x1b[2J\\n::error::src\\xfe.toml:"));
    const testing::CliRun diff_json = diff("json");
    CHECK(diff_json.status == 1);
    check_json(diff_json);
    CHECK(has(diff_json.out, R"(catalogs/y\u001b[2J\n::error::src\ufffd.toml")"));
  }
}

TEST_SUITE("escape") {
  TEST_CASE("roff_escape keeps a text on one line that never reads as a request") {
    CHECK(roff_escape("--format FILE") == "\\-\\-format FILE");
    CHECK(roff_escape("a\\b") == "a\\(rsb");
    CHECK(roff_escape(".SH NAME") == "\\&.SH NAME");
    CHECK(roff_escape("'br") == "\\&'br");
    CHECK(roff_escape("x\n.SH y") == "x\\(rsn.SH y");  // the break made visible, so `.SH` is mid-line
    CHECK(roff_escape("\x1b[31m") == "\\(rsx1b[31m");
    CHECK(roff_escape("plain text") == "plain text");
  }

  TEST_CASE("fish_escape keeps a text inside one fish single-quoted string on one line") {
    CHECK(fish_escape("the model's graph") == "the model\\'s graph");
    CHECK(fish_escape("a\\b") == "a\\\\b");
    CHECK(fish_escape("x'; rm -rf ~; echo '") == "x\\'; rm -rf ~; echo \\'");
    CHECK(fish_escape("two\nlines") == "two\\\\nlines");  // the break made visible, its backslash escaped
    CHECK(fish_escape("\x1b[31m") == "\\\\x1b[31m");
    CHECK(fish_escape("$(id) `id` (id)") == "$(id) `id` (id)");  // no expansion between single quotes
    CHECK(fish_escape("plain text") == "plain text");
  }
}
