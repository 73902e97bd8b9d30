// SPDX-License-Identifier: Apache-2.0
// The invalid-input gallery (tests/data/invalid): one small file, or one small catalogs/ +
// profiles/ tree, per diagnostic the loaders can emit. Each entry states the position and code
// of its FIRST diagnostic:
//   - a file: its first line is `# expect: <line>:<col> <code>`;
//   - a directory: `expect.txt` holds `<file relative to the directory>:<line>:<col> <code>`.
// The file name says which loader reads it: `*.graph.toml` → load_graph, `*.profile.toml` →
// load_profile, any other `*.toml` → load_catalog, a directory → load_workspace. Names start with
// the code they demonstrate (`<code>[-variant]`), so the gallery doubles as an error catalogue.
#include <doctest/doctest.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "capsule/load.hpp"
#include "capsule/op_arity.hpp"
#include "capsule/runtime/handler.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

using namespace capsule;
namespace fs = std::filesystem;

namespace {

fs::path gallery_dir() { return capsule::testing::test_data() / "invalid"; }

/// Every entry is judged on a fixed day so expired-trust does not depend on the clock.
LoadOptions fixed_day() {
  LoadOptions options;
  options.today = Date{std::chrono::year{2026}, std::chrono::month{11}, std::chrono::day{29}};
  return options;
}

enum class Loader { Catalog, Profile, Graph, Workspace };

struct Expectation {
  std::string file;  ///< relative to the entry directory; empty for single files
  std::uint32_t line = 0;
  std::uint32_t column = 0;
  std::string code;
};

struct Entry {
  fs::path path;
  std::string name;  ///< file or directory name
  Loader loader = Loader::Catalog;
  Expectation expect;
  bool well_formed = false;  ///< the expectation line parsed
};

std::string first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

bool parse_number(std::string_view text, std::uint32_t& out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

/// Parses `<line>:<col> <code>` (single files) or `<file>:<line>:<col> <code>` (directories).
bool parse_expectation(std::string_view text, bool with_file, Expectation& out) {
  const auto space = text.rfind(' ');
  if (space == std::string_view::npos) return false;
  out.code = std::string(text.substr(space + 1));
  std::string_view position = text.substr(0, space);
  const auto last = position.rfind(':');
  if (last == std::string_view::npos) return false;
  const auto middle = position.rfind(':', last - 1);
  std::string_view line_text;
  if (with_file) {
    if (middle == std::string_view::npos || last == 0) return false;
    out.file = std::string(position.substr(0, middle));
    line_text = position.substr(middle + 1, last - middle - 1);
  } else {
    if (middle != std::string_view::npos && last != 0) return false;
    line_text = position.substr(0, last);
  }
  return parse_number(line_text, out.line) && parse_number(position.substr(last + 1), out.column) &&
         !out.code.empty();
}

std::vector<Entry> gallery() {
  std::vector<Entry> entries;
  for (const auto& item : fs::directory_iterator(gallery_dir())) {
    Entry entry;
    entry.path = item.path();
    entry.name = item.path().filename().string();
    if (item.is_directory()) {
      entry.loader = Loader::Workspace;
      entry.well_formed = parse_expectation(first_line(entry.path / "expect.txt"), true, entry.expect);
    } else if (entry.name.ends_with(".toml")) {
      entry.loader = entry.name.ends_with(".graph.toml")     ? Loader::Graph
                     : entry.name.ends_with(".profile.toml") ? Loader::Profile
                                                             : Loader::Catalog;
      constexpr std::string_view kPrefix = "# expect: ";
      const std::string line = first_line(entry.path);
      entry.well_formed = line.starts_with(kPrefix) &&
                          parse_expectation(std::string_view(line).substr(kPrefix.size()), false, entry.expect);
    } else {
      continue;  // notes and other files are not gallery entries
    }
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return entries;
}

struct Outcome {
  Diagnostics diagnostics;
  bool has_value = false;  ///< for a directory: no error-level diagnostic
};

Outcome load(const Entry& entry) {
  Outcome outcome;
  const LoadOptions options = fixed_day();
  switch (entry.loader) {
    case Loader::Catalog:
      outcome.has_value = load_catalog(entry.path, options, outcome.diagnostics).has_value();
      break;
    case Loader::Profile:
      outcome.has_value = load_profile(entry.path, options, outcome.diagnostics).has_value();
      break;
    case Loader::Graph:
      outcome.has_value = load_graph(entry.path, outcome.diagnostics).has_value();
      break;
    case Loader::Workspace: {
      Workspace workspace = load_workspace({entry.path / "catalogs"}, {entry.path / "profiles"}, options);
      outcome.diagnostics = std::move(workspace.diagnostics);
      outcome.has_value = !has_errors(outcome.diagnostics);
      break;
    }
  }
  return outcome;
}

std::optional<DiagCode> code_named(std::string_view name) {
  for (const auto& [code, spelling] : kDiagCodeNames) {
    if (spelling == name) return code;
  }
  return std::nullopt;
}

/// The codes a loader can report about a file or a small directory of files. The others are
/// raised by later stages (planner, gate) or the command line.
const std::vector<DiagCode> kLoaderCodes{
    DiagCode::ParseError,        DiagCode::IoError,          DiagCode::UnsupportedSchema,
    DiagCode::UnknownKey,        DiagCode::WrongType,        DiagCode::UnknownSpelling,
    DiagCode::MissingField,      DiagCode::InvalidValue,     DiagCode::DuplicateModule,
    DiagCode::DuplicateIdentity, DiagCode::DuplicateProfile, DiagCode::MisalignedContract,
    DiagCode::MissingTrustReason, DiagCode::ExpiredTrust,    DiagCode::UnplannableProfile,
    DiagCode::UnknownModule,     DiagCode::InvalidGraph,     DiagCode::InvalidIdentifier,
};
/// Codes of later stages: planning, the gate, the command line, and lint's evidence checks
/// (tests/test_lint.cpp).
const std::vector<DiagCode> kNonLoaderCodes{
    DiagCode::UnknownProfile,        DiagCode::NoAdmissibleCapsule,     DiagCode::GateRejected,
    DiagCode::Usage,                 DiagCode::UnknownTestSuite,        DiagCode::UnknownRuntimeGuard,
    DiagCode::MissingProvenanceFile, DiagCode::MissingProvenanceSymbol, DiagCode::NoTestSuiteManifest,
    DiagCode::NoCompiledHandler,     DiagCode::UnverifiableEvidence,    DiagCode::UnlistedHandler, DiagCode::HandlerVjpMismatch,
    // Directory listings and git revisions, not file contents (tests/test_diff_git.cpp).
    DiagCode::GitError,              DiagCode::NonRegularFile,
    DiagCode::NothingToLint,         DiagCode::CheckedOnTrustedBoundary,
    // Evidence coverage against the build's manifest (tests/test_lint.cpp).
    DiagCode::UnknownEvidenceSource, DiagCode::UncoveredEvidence,
    // Evidence judged against a ledger (tests/test_evidence_ledger.cpp).
    DiagCode::EvidenceNotPassed,     DiagCode::EvidenceNotRunHere,
    // Lint's rule on declared `missing` evidence (tests/test_acceptance_presets.cpp).
    DiagCode::MissingEvidence,
    // Checker evidence against the checkers a program links: lint, not the loaders
    // (tests/test_checker_evidence.cpp, tests/data/hostile/checker-evidence).
    DiagCode::UnknownChecker,        DiagCode::CheckerMismatch,
};

std::string relative_to(const fs::path& base, const std::string& file) {
  return fs::path(file).lexically_relative(base).generic_string();
}

}  // namespace

TEST_SUITE("gallery") {
  TEST_CASE("every gallery entry is well formed and named after its code") {
    const std::vector<Entry> entries = gallery();
    REQUIRE(entries.size() >= 20);
    for (const Entry& entry : entries) {
      CAPTURE(entry.name);
      REQUIRE_MESSAGE(entry.well_formed, "missing or malformed `# expect: <line>:<col> <code>` / expect.txt");
      CHECK_MESSAGE(code_named(entry.expect.code).has_value(), "unknown code " << entry.expect.code);
      CHECK_MESSAGE(entry.name.starts_with(entry.expect.code), "name does not start with its code");
      if (entry.loader == Loader::Workspace) {
        CHECK(fs::is_directory(entry.path / "catalogs"));
        CHECK(fs::is_directory(entry.path / "profiles"));
        CHECK(fs::is_regular_file(entry.path / entry.expect.file));
      }
    }
  }

  TEST_CASE("each gallery entry reports its first diagnostic at the stated position") {
    for (const Entry& entry : gallery()) {
      if (!entry.well_formed) continue;  // reported by the test above
      CAPTURE(entry.name);
      const Outcome outcome = load(entry);
      INFO("diagnostics:\n" << render(outcome.diagnostics));
      REQUIRE_FALSE(outcome.diagnostics.empty());
      const Diagnostic& first = outcome.diagnostics.front();
      CHECK(to_string(first.code) == entry.expect.code);
      CHECK(first.where.line == entry.expect.line);
      CHECK(first.where.column == entry.expect.column);
      if (entry.loader == Loader::Workspace) {
        CHECK(relative_to(entry.path, first.where.file) == entry.expect.file);
      } else {
        CHECK(fs::path(first.where.file) == entry.path);
      }
      CHECK_FALSE(first.message.empty());
      if (first.code == DiagCode::ExpiredTrust || first.code == DiagCode::UnplannableProfile) {
        // A warning: the file still loads, and nothing in it is an error.
        CHECK(first.severity == Severity::Warning);
        CHECK_FALSE(has_errors(outcome.diagnostics));
        CHECK(outcome.has_value);
      } else {
        CHECK(first.severity == Severity::Error);
        CHECK_FALSE(outcome.has_value);
      }
    }
  }

  TEST_CASE("the gallery covers every code the loaders can report") {
    std::set<DiagCode> covered;
    for (const Entry& entry : gallery()) {
      if (auto code = code_named(entry.expect.code)) covered.insert(*code);
    }
    for (const DiagCode code : kLoaderCodes) {
      CAPTURE(to_string(code));
      CHECK(covered.count(code) == 1);
    }
    // A new code must be sorted into one list or the other (and, if a loader can emit it, get
    // a gallery file).
    std::set<DiagCode> listed(kLoaderCodes.begin(), kLoaderCodes.end());
    listed.insert(kNonLoaderCodes.begin(), kNonLoaderCodes.end());
    CHECK(listed.size() == kDiagCodeNames.size());
    CHECK(listed.size() == kLoaderCodes.size() + kNonLoaderCodes.size());
  }

  TEST_CASE("the gallery holds the named contract-alignment and graph cases") {
    const std::map<std::string, std::string> required{
        {"misaligned-contract-value-in-shape.toml", "misaligned-contract"},
        {"misaligned-contract-vjp-mode.toml", "misaligned-contract"},
        {"misaligned-contract-vjp-unavailable.toml", "misaligned-contract"},
        {"expired-trust.toml", "expired-trust"},
        {"invalid-graph-later-input.graph.toml", "invalid-graph"},
        {"invalid-graph-duplicate-id.graph.toml", "invalid-graph"},
        {"unknown-spelling-node-kind.graph.toml", "unknown-spelling"},
        {"duplicate-module", "duplicate-module"},
        {"duplicate-profile", "duplicate-profile"},
        {"unknown-module", "unknown-module"},
    };
    const std::vector<Entry> entries = gallery();
    for (const auto& item : required) {
      // (not a structured binding: clang 14 cannot capture one in a lambda)
      const std::string& name = item.first;
      CAPTURE(name);
      const auto found =
          std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == name; });
      REQUIRE(found != entries.end());
      CHECK(found->expect.code == item.second);
    }
  }

  TEST_CASE("expired trust is judged against LoadOptions::today") {
    Diagnostics before;
    LoadOptions early;
    early.today = Date{std::chrono::year{2019}, std::chrono::month{12}, std::chrono::day{31}};
    CHECK(load_catalog(gallery_dir() / "expired-trust.toml", early, before).has_value());
    CHECK(before.empty());

    Diagnostics after;
    CHECK(load_catalog(gallery_dir() / "expired-trust.toml", fixed_day(), after).has_value());
    REQUIRE(after.size() == 1);
    CHECK(after.front().message.find("2020-01-01") != std::string::npos);
  }

  TEST_CASE("one run reports every problem: three faulty capsules give three diagnostics") {
    const std::string text = std::string(capsule::testing::kCatalogHead) + R"(
[[capsule]]
name = "inline.relu"
op = "relu"
provder = "reference"

[[capsule]]
name = "inline.gelu"
op = "gelu"
forward = "yes"

[[capsule]]
name = "inline.tanh"
op = "tanh"
contracts.shape = { claim = "value-refinement", evidence = { kind = "test-suite", name = "inline.values" } }

[[capsule]]
name = "inline.exp"
op = "exp"
)";
    Diagnostics out;
    CHECK_FALSE(parse_catalog(text, "three.toml", fixed_day(), out).has_value());
    INFO(render(out));
    REQUIRE(out.size() == 3);
    CHECK(out[0].code == DiagCode::UnknownKey);
    CHECK(out[0].where == SourceLoc{"three.toml", 18, 1});
    CHECK(out[1].code == DiagCode::WrongType);
    CHECK(out[1].where == SourceLoc{"three.toml", 23, 11});
    CHECK(out[2].code == DiagCode::MisalignedContract);
    CHECK(out[2].where == SourceLoc{"three.toml", 28, 19});
  }

  // One problem, one diagnostic: a bad value is not reported again as a missing key, and a
  // module listed twice does not also make its capsules duplicates of themselves.
  TEST_CASE("a misspelled op is reported once and not again as a missing op") {
    Diagnostics out;
    CHECK_FALSE(load_catalog(gallery_dir() / "unknown-spelling-op.toml", fixed_day(), out).has_value());
    INFO(render(out));
    CHECK(out.size() == 1);
  }

  TEST_CASE("a misspelled claim is reported once and not again as a missing claim") {
    Diagnostics out;
    const std::string text = "schema = 1\nmodule = \"m\"\n[[capsule]]\nname = \"m.relu\"\nop = \"relu\"\n"
                             "provider = \"reference\"\ndevice = \"cpu\"\ntrust = \"checked\"\nvjp = \"none\"\n"
                             "reduction = \"n/a\"\n"
                             "contracts.shape = { claim = \"shape-safety\", evidence = { kind = \"runtime-guard\", name = \"g\" } }\n"
                             "contracts.layout = { claim = \"layout-compatibility\", layout = \"canonical-tensor\", evidence = { kind = \"runtime-guard\", name = \"g\" } }\n"
                             "contracts.value = { claim = \"value-refinment\", evidence = { kind = \"test-suite\", name = \"s\" } }\n"
                             "contracts.vjp = { claim = \"vjp-unavailable\", evidence = { kind = \"not-applicable\" } }\n";
    CHECK_FALSE(parse_catalog(text, "claim.toml", fixed_day(), out).has_value());
    INFO(render(out));
    REQUIRE(out.size() == 1);
    CHECK(out[0].code == DiagCode::UnknownSpelling);
    CHECK(out[0].help == "did you mean `value-refinement`?");
  }

  TEST_CASE("a module listed twice by a profile does not also make its capsules duplicates") {
    const fs::path dir = gallery_dir() / "duplicate-module-in-profile";
    const Workspace workspace = load_workspace({dir / "catalogs"}, {dir / "profiles"}, fixed_day());
    INFO(render(workspace.diagnostics));
    CHECK(workspace.diagnostics.size() == 1);
  }
}

// Hostile graphs (tests/data/hostile/graphs): every `# expect: LINE:COL CODE` line is one
// diagnostic, and there is no other: one finding per problem, each at its value.
TEST_CASE("hostile graphs report every shape, arity and emptiness problem at its position") {
  const fs::path dir = capsule::testing::test_data() / "hostile" / "graphs";
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    ++files;
    CAPTURE(entry.path().string());
    std::multiset<std::string> expected;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("# expect: ", 0) == 0) expected.insert(line.substr(10));
    }
    REQUIRE_FALSE(expected.empty());
    Diagnostics out;
    CHECK_FALSE(load_graph(entry.path(), out).has_value());
    std::multiset<std::string> got;
    for (const Diagnostic& d : out) got.insert(std::to_string(d.where.line) + ":" + std::to_string(d.where.column) + " " +
                                               std::string(to_string(d.code)));
    INFO(render(out));
    CHECK(got == expected);
  }
  CHECK(files == 3);
}

// Messages that contradicted themselves (tests/data/hostile/messages).
TEST_CASE("schema, provider and with_catalogs messages say what was written and suggest only valid values") {
  const fs::path dir = capsule::testing::test_data() / "hostile" / "messages";
  const auto rendered = [](const Diagnostics& out) { return render(out); };
  {
    Diagnostics out;
    CHECK_FALSE(load_catalog(dir / "schema-float.toml", LoadOptions{}, out));
    const std::string text = rendered(out);
    INFO(text);
    CHECK(capsule::testing::has(text, ":1:10: error[unsupported-schema]: `schema` must be the integer 1, got the float 1.0"));
    CHECK_FALSE(capsule::testing::has(text, "unsupported schema 1;"));
  }
  {
    Diagnostics out;
    CHECK_FALSE(load_profile(dir / "provider-sometimes.profile.toml", LoadOptions{}, out));
    const std::string text = rendered(out);
    INFO(text);
    CHECK(capsule::testing::has(text, "got \"sometimes\""));
    // The old hint suggested { prefer = "sometimes" }, itself invalid.
    CHECK_FALSE(capsule::testing::has(text, "prefer = \"sometimes\""));
    CHECK(capsule::testing::has(text, "{ prefer = \"reference\" }"));
  }
  {
    Diagnostics out;
    CHECK_FALSE(load_profile(dir / "provider-near.profile.toml", LoadOptions{}, out));
    CHECK(capsule::testing::has(rendered(out), "help: write \"auto\", { prefer = \"reference\" } or { only = \"reference\" }"));
  }
  {
    Diagnostics out;
    CHECK_FALSE(load_profile(dir / "twice.profile.toml", LoadOptions{}, out));
    const std::string text = rendered(out);
    INFO(text);
    CHECK(capsule::testing::has(text, ":5:57: error[invalid-value]: `with_catalogs` lists the same catalog "));
    CHECK(capsule::testing::has(text, "twice: entry 1 (`../../../../catalogs/reference.toml`) and entry 2 "));
    CHECK(capsule::testing::has(text, "note: entry 1 is at "));
    CHECK_FALSE(capsule::testing::has(text, "duplicate"));
  }
}

TEST_CASE("not-applicable evidence backs only a vjp-unavailable claim") {
  Diagnostics out;
  const fs::path file = capsule::testing::test_data() / "hostile" / "catalogs" / "not-applicable-value.toml";
  CHECK_FALSE(load_catalog(file, LoadOptions{}, out));
  const std::string text = render(out);
  INFO(text);
  CHECK(capsule::testing::has(text, ":19:60: error[invalid-value]: capsule `inline.relu` value contract rests its "
                                    "value-refinement claim on `not-applicable` evidence"));
  CHECK(out.size() == 1);
  // The shipped forward-only capsules (vjp-unavailable on not-applicable) still load.
  CHECK(capsule::testing::shipped().diagnostics.empty());
}

// The graph loader's arity table and the reference kernels must agree: each kernel refuses one
// input too many and one too few with its input-count check (a second, conflicting source of
// arity would show here).
TEST_CASE("reference kernels refuse exactly the input counts op_arity refuses") {
  const auto tensor = Tensor::from_values({2, 2}, DType::F32, {1.0, 2.0, 3.0, 4.0});
  REQUIRE(tensor);
  for (const auto& [op, name] : VocabTable<Op>::entries) {
    const OpArity arity = op_arity(op);
    if (!arity.known || !capsule::testing::reference_handlers().find(op, Provider::Reference, Device::Cpu)) continue;
    CAPTURE(name);
    const HandlerSpec& handler = capsule::testing::reference_handler(op);
    const auto refuses = [&](std::size_t count) {
      const std::vector<Tensor> inputs(count, *tensor);
      const auto result = handler.forward(inputs, OpAttrs{});
      return !result && capsule::testing::has(result.error().message, str(": got ", count, " inputs; expected"));
    };
    if (arity.max != std::numeric_limits<std::size_t>::max()) CHECK(refuses(arity.max + 1));
    if (arity.min > 0) CHECK(refuses(arity.min - 1));
  }
}
