// SPDX-License-Identifier: Apache-2.0
// The docs cannot drift from what ships: no file cites a specification the repository does not
// contain, every key the JSON Schemas name is in the format reference, and every
// section a shipped file cites (a Markdown file name, `#`, an anchor) names a real heading.
#include <doctest/doctest.h>

#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "capsule/json_reader.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

namespace fs = std::filesystem;
using testing::has;
using testing::source_dir;

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The shipped text files: sources, docs, data, schemas, CI and the action. Symbolic links (the
/// schema checker's node_modules) and build folders are not shipped and are never followed.
std::vector<fs::path> shipped_text_files() {
  static const std::set<std::string> kExtensions{".cpp", ".hpp", ".h",    ".cu",   ".cuh", ".md",  ".json",
                                                 ".toml", ".txt", ".cmake", ".yml", ".yaml", ".sh", ".mjs"};
  std::vector<fs::path> out;
  for (const char* top : {"engine", "handlers", "tools", "docs", "catalogs", "profiles", "examples", "tests", "cmake",
                          ".github", ".ci"}) {
    const fs::path root = source_dir() / top;
    if (!fs::is_directory(root)) continue;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
      if (it->is_symlink() || it->path().filename() == "node_modules") {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && kExtensions.contains(it->path().extension().string())) out.push_back(it->path());
    }
  }
  for (const char* file : {"README.md", "CMakeLists.txt", "action.yml", ".pre-commit-hooks.yaml"}) {
    if (fs::is_regular_file(source_dir() / file)) out.push_back(source_dir() / file);
  }
  return out;
}

/// GitHub's anchor for a Markdown heading: lower case, spaces to hyphens, other punctuation
/// (but hyphens and underscores) dropped.
std::string anchor_of(std::string_view heading) {
  std::string out;
  for (const char c : heading) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') out += c;
    else if (c >= 'A' && c <= 'Z') out += static_cast<char>(c - 'A' + 'a');
    else if (c == ' ') out += '-';
    else if (static_cast<unsigned char>(c) >= 0x80) out += c;  // kept, as GitHub keeps letters
  }
  return out;
}

std::set<std::string> anchors_of(const fs::path& markdown) {
  std::set<std::string> out;
  std::istringstream lines(read_text(markdown));
  bool fenced = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("```")) fenced = !fenced;
    if (fenced || !line.starts_with("#")) continue;
    const std::size_t text = line.find_first_not_of('#');
    if (text == std::string::npos || line[text] != ' ') continue;
    out.insert(anchor_of(std::string_view(line).substr(text + 1)));
  }
  return out;
}

/// Every property name a JSON Schema declares, at any depth.
void collect_keys(const JsonValue& node, std::set<std::string>& keys) {
  if (node.is_array()) {
    for (const JsonValue& item : node.as_array()) collect_keys(item, keys);
    return;
  }
  if (!node.is_object()) return;
  if (const JsonValue* properties = node.find("properties"); properties != nullptr && properties->is_object()) {
    for (const auto& [key, value] : properties->as_object()) keys.insert(key);
  }
  for (const auto& [key, value] : node.as_object()) collect_keys(value, keys);
}

TEST_SUITE("docs") {
  TEST_CASE("no shipped file cites a specification section that does not ship") {
    // Built at run time so that this file does not match itself.
    const std::string needle = std::string("SPEC ") + "\xC2\xA7";
    const std::vector<fs::path> files = shipped_text_files();
    REQUIRE(files.size() > 100);
    std::vector<std::string> citing;
    for (const fs::path& file : files) {
      if (read_text(file).find(needle) != std::string::npos) citing.push_back(file.lexically_relative(source_dir()).string());
    }
    INFO("cite a section of docs/format.md instead, in: ", join(citing, ", "));
    CHECK(citing.empty());
  }

  TEST_CASE("every schema key is in docs/format.md") {
    const std::string reference = read_text(source_dir() / "docs" / "format.md");
    REQUIRE_FALSE(reference.empty());
    for (const char* schema : {"catalog", "profile", "graph", "waiver"}) {
      CAPTURE(schema);
      const std::string text = read_text(source_dir() / "tools" / "schemas" / (std::string(schema) + ".schema.json"));
      auto parsed = parse_json(text);
      REQUIRE(parsed);
      std::set<std::string> keys;
      collect_keys(*parsed, keys);
      CHECK(keys.size() >= 5);
      for (const std::string& key : keys) {
        CAPTURE(key);
        CHECK(reference.find("`" + key + "`") != std::string::npos);
      }
    }
  }

  // docs/quickstart.md shows real output: each `$ capsule ...` line of its text blocks is run on the
  // shipped tree, must not be a usage error, and every line shown after it (but elisions, `…`)
  // must be a line of what it printed.
  TEST_CASE("the quick start's commands run and print what it shows") {
    std::istringstream lines(read_text(source_dir() / "docs" / "quickstart.md"));
    struct Shown {
      std::vector<std::string> args;
      std::vector<std::string> lines;
    };
    std::vector<Shown> commands;
    bool in_block = false;
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("```")) {
        in_block = !in_block;
        if (!in_block) commands.emplace_back();  // a block ends the previous command's output
        continue;
      }
      if (!in_block) continue;
      if (line.starts_with("$ capsule ")) {
        Shown shown;
        std::istringstream words(line.substr(10));
        for (std::string word; words >> word;) shown.args.push_back(word);
        commands.push_back(std::move(shown));
      } else if (!commands.empty() && !commands.back().args.empty() && !line.empty() &&
                 line.find("\xE2\x80\xA6") == std::string::npos) {
        commands.back().lines.push_back(line);
      }
    }
    std::size_t ran = 0;
    for (const Shown& shown : commands) {
      if (shown.args.empty()) continue;
      CAPTURE(join(shown.args, " "));
      const testing::CliRun run = testing::run_shipped_cli(shown.args);
      ++ran;
      CHECK((run.status == 0 || run.status == 1));
      const std::string out = "\n" + run.out;
      for (const std::string& expected : shown.lines) {
        CAPTURE(expected);
        CHECK(has(out, "\n" + expected + "\n"));
      }
    }
    CHECK(ran >= 6);
  }

  TEST_CASE("every cited docs anchor names a heading of that file") {
    std::map<std::string, std::set<std::string>> anchors;
    std::vector<std::string> broken;
    std::size_t checked = 0;
    for (const fs::path& file : shipped_text_files()) {
      const std::string text = read_text(file);
      for (std::size_t at = text.find(".md#"); at != std::string::npos; at = text.find(".md#", at + 4)) {
        // The file name: back over [A-Za-z0-9_/.-] to the start of the citation.
        std::size_t begin = at;
        while (begin > 0) {
          const char c = text[begin - 1];
          if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '/' || c == '.')) break;
          --begin;
        }
        std::size_t end = at + 4;
        while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-' ||
                                     text[end] == '_')) {
          ++end;
        }
        std::string target = text.substr(begin, at + 3 - begin);
        const std::string anchor = text.substr(at + 4, end - at - 4);
        // Repository paths first, then paths relative to the citing file (a docs page citing a sibling).
        fs::path resolved = source_dir() / target;
        if (!fs::is_regular_file(resolved)) resolved = file.parent_path() / target;
        if (!fs::is_regular_file(resolved) || anchor.empty()) continue;
        const std::string key = resolved.lexically_normal().string();
        if (!anchors.contains(key)) anchors[key] = anchors_of(resolved);
        ++checked;
        if (!anchors[key].contains(anchor)) {
          broken.push_back(str(file.lexically_relative(source_dir()).string(), ": ", target, "#", anchor));
        }
      }
    }
    CHECK(checked > 20);
    INFO("no such heading: ", join(broken, "; "));
    CHECK(broken.empty());
  }
}

}  // namespace
}  // namespace capsule
