// SPDX-License-Identifier: Apache-2.0
// `capsule lint` beyond loading: evidence must point at something real in this build (test
// suites from the build's manifest, runtime guards of the compiled handlers, provenance files and
// symbols), trust needs a reason and lapses at `expires`, rules have ids and severities that
// --deny/--allow adjust, and findings render as text, JSON, SARIF and GitHub annotations.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/diag_format.hpp"
#include "capsule/json_reader.hpp"
#include "capsule/lint.hpp"
#include "capsule/text.hpp"
#include "json_check.hpp"
#include "capsule/source_tree.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

using testing::CliRun;
using testing::ScratchTree;

using testing::has;

std::size_t count(const std::string& text, std::string_view part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

CliRun lint_in(const ScratchTree& tree, std::vector<std::string> extra = {}, const cli::Environment& env = {}) {
  std::vector<std::string> args{"lint", "--catalogs", tree.catalogs().string(), "--profiles", tree.profiles().string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return testing::run_cli(std::move(args), env);
}

CliRun lint_shipped(std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), "lint");
  return testing::run_shipped_cli(std::move(extra));
}


/// A SARIF log's rules are exactly the ones it uses: every result's ruleIndex (and every
/// notification's associatedRule index) names the rule of its ruleId, every listed rule is used
/// at least once and listed once, lint rules in kLintRules order before any other code.
void check_sarif_rules(const std::string& log) {
  const auto parsed = parse_json(log);
  REQUIRE(parsed.has_value());
  const JsonValue* runs = parsed.value().find("runs");
  REQUIRE(runs != nullptr);
  REQUIRE(runs->as_array().size() == 1);
  const JsonValue& run = runs->as_array().front();
  const JsonValue* rules_value = run.find("tool")->find("driver")->find("rules");
  REQUIRE(rules_value != nullptr);
  const JsonArray& rules = rules_value->as_array();
  std::vector<std::string> ids;
  for (const JsonValue& rule : rules) ids.push_back(rule.find("id")->as_string());
  std::vector<bool> used(rules.size(), false);
  std::size_t references = 0;
  const auto refer = [&](const JsonValue* id, const JsonValue* index) {
    REQUIRE(id != nullptr);
    REQUIRE(index != nullptr);
    INFO("rule ", id->as_string());
    REQUIRE(index->is_integer());
    REQUIRE(index->as_int() >= 0);
    REQUIRE(static_cast<std::size_t>(index->as_int()) < rules.size());
    CHECK(ids[static_cast<std::size_t>(index->as_int())] == id->as_string());
    used[static_cast<std::size_t>(index->as_int())] = true;
    ++references;
  };
  for (const JsonValue& result : run.find("results")->as_array()) refer(result.find("ruleId"), result.find("ruleIndex"));
  for (const JsonValue& invocation : run.find("invocations")->as_array()) {
    for (const JsonValue& notification : invocation.find("toolExecutionNotifications")->as_array()) {
      const JsonValue* rule = notification.find("associatedRule");
      REQUIRE(rule != nullptr);
      refer(rule->find("id"), rule->find("index"));
    }
  }
  CHECK(references > 0);
  std::size_t last_lint = 0;  // one past the kLintRules position of the previous listed rule
  bool other_seen = false;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    INFO("rule ", ids[i]);
    CHECK_MESSAGE(used[i], "listed but referenced by no result or notification");
    CHECK(std::count(ids.begin(), ids.end(), ids[i]) == 1);
    const LintRule* lint_rule = find_lint_rule(std::string_view(ids[i]));
    if (lint_rule == nullptr) {
      other_seen = true;
      continue;
    }
    const auto position = static_cast<std::size_t>(lint_rule - kLintRules.data());
    CHECK_FALSE(other_seen);
    CHECK(position + 1 > last_lint);
    last_lint = position + 1;
  }
}

/// The reference catalog's default value suite, misspelled: every reference capsule inherits it.
void misspell_reference_suite(const ScratchTree& tree) {
  tree.replace("catalogs/reference.toml", R"(name = "reference.values" })", R"(name = "reference.valeus" })");
}


/// A source root laid out as tests/data/hostile/lint-symlinks/leak.toml describes: links to a
/// file and a directory outside it, to .git/config and to /proc/self/environ, a FIFO, and one
/// plain file. Every secret lies in a file lint must not read.
struct HostileRoot {
  ScratchTree tree{"lint-symlinks"};
  std::filesystem::path outside = tree.root().parent_path() / str("capsule-test-lint-outside-", ::getpid());

  enum class Kind { Plain, Git, BrokenGit };

  explicit HostileRoot(Kind kind) {
    const bool git = kind == Kind::Git;
    namespace fs = std::filesystem;
    for (const fs::path& dir : {tree.catalogs(), tree.profiles()}) fs::remove_all(dir);
    fs::create_directories(tree.catalogs());
    fs::create_directories(tree.profiles());
    fs::copy_file(testing::test_data() / "hostile" / "lint-symlinks" / "leak.toml", tree.catalogs() / "leak.toml");
    fs::remove_all(outside);
    fs::create_directories(outside / "dir");
    std::ofstream(outside / "secret.cpp") << "secret_outside_token_abc\n";
    std::ofstream(outside / "dir" / "inner.cpp") << "secret_dir_token_abc\n";
    tree.write("tracked.cpp", "int tracked_symbol = 0;\n");
    tree.write("untracked.cpp", "int untracked_symbol = 0;\n");
    if (git) {
      REQUIRE(std::system(str("git init -q '", tree.root().string(), "'").c_str()) == 0);
      REQUIRE(std::system(str("git -C '", tree.root().string(), "' config capsule.token secret_git_token_abc").c_str()) == 0);
      fs::create_symlink(".git/config", tree.root() / "gitlink.cpp");
    } else {
      // Outside a work tree, a nested repository's git directory holds the token.
      fs::create_directories(tree.root() / "vendor" / ".git");
      std::ofstream(tree.root() / "vendor" / ".git" / "config") << "secret_git_token_abc\n";
      fs::create_symlink("vendor/.git/config", tree.root() / "gitlink.cpp");
      fs::copy_file(tree.root() / "vendor" / ".git" / "config", tree.root() / "vendor-git-config");
    }
    // A `.git` that git cannot read: lint must refuse the tree, not fall back to reading it all.
    if (kind == Kind::BrokenGit) std::ofstream(tree.root() / ".git") << "gitdir: /nonexistent\n";
    fs::create_symlink(outside / "secret.cpp", tree.root() / "outside-link.cpp");
    fs::create_directory_symlink(outside / "dir", tree.root() / "linkdir");
    fs::create_symlink("/proc/self/environ", tree.root() / "environ.cpp");
    REQUIRE(::mkfifo((tree.root() / "fifo.cpp").c_str(), 0600) == 0);
    if (git) {
      // Links and the FIFO's name are tracked too: tracking is not what keeps them out.
      REQUIRE(std::system(str("git -C '", tree.root().string(),
                              "' add tracked.cpp outside-link.cpp gitlink.cpp environ.cpp linkdir").c_str()) == 0);
    }
  }
  ~HostileRoot() {
    std::error_code ignored;
    std::filesystem::remove_all(outside, ignored);
  }
};

/// Every output lint can give for the hostile root: the CLI in every format, and the engine
/// with the openat2 path and with the O_NOFOLLOW walk.
std::string every_lint_output(const HostileRoot& hostile, std::size_t expected_findings) {
  std::string all;
  for (const char* format : {"text", "json", "sarif", "github"}) {
    const CliRun run = lint_in(hostile.tree, {"--format", format, "--source-root", hostile.tree.root().string()});
    CHECK(run.status != 0);
    all += run.out + run.err;
  }
  const Workspace workspace = hostile.tree.load();
  for (const bool openat2 : {true, false}) {
    EvidenceCheckInputs inputs;
    inputs.source_root = hostile.tree.root();
    inputs.use_openat2 = openat2;
    const Diagnostics found = check_evidence(workspace, inputs);
    all += render(found);
    CHECK(static_cast<std::size_t>(std::count_if(found.begin(), found.end(), [](const Diagnostic& d) {
            return d.code == DiagCode::MissingProvenanceFile;
          })) == expected_findings);
  }
  return all;
}
}  // namespace

TEST_SUITE("lint") {
  TEST_CASE("the shipped catalogs lint without errors and flag the capsules no compiled handler runs") {
    const CliRun run = lint_shipped();
    INFO(run.out << run.err);
    CHECK(run.status == 0);
    CHECK_FALSE(has(run.out, "error["));
    CHECK(has(run.out, "catalogs/native-cuda.toml:8:10: warning[no-compiled-handler]: 54 capsules of module "
                       "`native-cuda` (native-cuda/cuda) have no compiled handler in this build"));
    CHECK(has(run.out, "note[unverifiable-evidence]: evidence of module `native-cuda` cannot be checked by this build"));
    CHECK(has(run.out, "test suites `native_cuda.values`, `native_cuda.vjps` (not in this build's manifest)"));
    CHECK(has(run.out, "lint: 11 modules, 275 capsules, 20 profiles: 0 errors, 10 warnings, 10 notes\n"));
    CHECK(run.err.empty());
  }

  TEST_CASE("the build writes a manifest of this project's test suites and what each covers") {
    auto manifest = read_evidence_manifest(CAPSULE_TEST_SUITE_MANIFEST);
    REQUIRE_MESSAGE(manifest.has_value(), (manifest ? std::string() : render(manifest.error())));
    for (const char* suite : {"lint", "cli", "gallery", "vocab", "reference.values", "reference.vjps"}) {
      CAPTURE(suite);
      CHECK(manifest->contains(suite));
    }
    CHECK_FALSE(manifest->contains("native_cuda.values"));  // no CUDA handlers in this build
    const std::vector<std::string> suites = manifest->names(EvidenceKind::TestSuite);
    CHECK(std::is_sorted(suites.begin(), suites.end()));
    // Every reference capsule's value and VJP are covered, by the suite its catalog names.
    const EvidenceSource* values = manifest->find(EvidenceKind::TestSuite, "reference.values");
    const EvidenceSource* vjps = manifest->find(EvidenceKind::TestSuite, "reference.vjps");
    REQUIRE(values != nullptr);
    REQUIRE(vjps != nullptr);
    std::size_t reference_capsules = 0;
    for (const Capsule& c : testing::shipped_module("reference")->capsules) {
      CAPTURE(c.name);
      ++reference_capsules;
      CHECK(values->covers({c.op, Provider::Reference, Device::Cpu, Obligation::Value}));
      CHECK(vjps->covers({c.op, Provider::Reference, Device::Cpu, Obligation::Vjp}));
      CHECK_FALSE(values->covers({c.op, Provider::Reference, Device::Cpu, Obligation::Vjp}));
      CHECK_FALSE(values->covers({c.op, Provider::NativeCuda, Device::Cuda, Obligation::Value}));
    }
    CHECK(reference_capsules == 53);
    CHECK(describe_coverage(*values) == "covers value of 53 ops on reference/cpu");
    // Suites that test no kernel declare nothing.
    CHECK(manifest->find(EvidenceKind::TestSuite, "vocab")->cases.empty());
    CHECK(manifest->names(EvidenceKind::FuzzOracle).empty());
    CHECK(manifest->names(EvidenceKind::SharedDefinition).empty());
  }

  TEST_CASE("the evidence manifest round-trips through its writer and reader") {
    auto built = read_evidence_manifest(CAPSULE_TEST_SUITE_MANIFEST);
    REQUIRE(built.has_value());
    // The build's file is exactly what the writer makes of what it reads.
    CHECK(write_evidence_manifest(*built) == testing::read_text(CAPSULE_TEST_SUITE_MANIFEST));
    EvidenceManifest manifest;
    manifest.sources.push_back({EvidenceKind::TestSuite, "suite b", {{Op::Relu, Provider::Reference, Device::Cpu,
                                                                     Obligation::Value}}});
    manifest.sources.push_back({EvidenceKind::FuzzOracle, "fuzz.relu",
                                {{Op::Relu, Provider::NativeCuda, Device::Cuda, Obligation::Value},
                                 {Op::Add, Provider::NativeCuda, Device::Cuda, Obligation::Vjp}}});
    manifest.sources.push_back({EvidenceKind::SharedDefinition, "Spec.relu", {}});
    manifest.sources.push_back({EvidenceKind::TestSuite, "suite a", {}});
    // A suite declared twice adds up.
    manifest.sources.push_back({EvidenceKind::TestSuite, "suite b", {{Op::Add, Provider::Reference, Device::Cpu,
                                                                     Obligation::Value}}});
    const std::string text = write_evidence_manifest(manifest);
    auto read = parse_evidence_manifest(text, "round-trip.toml");
    REQUIRE_MESSAGE(read.has_value(), (read ? std::string() : render(read.error())));
    CHECK(write_evidence_manifest(*read) == text);
    manifest.normalise();
    REQUIRE(read->sources.size() == manifest.sources.size());
    for (std::size_t i = 0; i < manifest.sources.size(); ++i) {
      CHECK(read->sources[i].kind == manifest.sources[i].kind);
      CHECK(read->sources[i].name == manifest.sources[i].name);
      CHECK(read->sources[i].cases == manifest.sources[i].cases);
    }
    CHECK(read->find(EvidenceKind::TestSuite, "suite b")->cases.size() == 2);
    CHECK(read->find(EvidenceKind::FuzzOracle, "fuzz.relu")->covers(
        {Op::Add, Provider::NativeCuda, Device::Cuda, Obligation::Vjp}));
    CHECK(read->find(EvidenceKind::TestSuite, "fuzz.relu") == nullptr);
    CHECK(has(text, "[[fuzz-oracle]]\nname = \"fuzz.relu\"\ncovers = [\n"));
  }

  TEST_CASE("a malformed evidence manifest is refused with every problem at its position") {
    auto read = parse_evidence_manifest(R"(schema = 1
[[test-suite]]
name = "ok"
covers = [{ obligation = "valeu", provider = "reference", device = "cpu", ops = ["relu", "rleu"] }]
[[test-suite]]
name = "bad\u0007name"
[[fuzz-oracle]]
covers = []
[[test-suites]]
)",
                                        "bad.toml");
    REQUIRE_FALSE(read.has_value());
    const std::string all = render(read.error());
    INFO(all);
    CHECK(has(all, "bad.toml:4:"));
    CHECK(has(all, "valeu"));
    CHECK(has(all, "rleu"));
    CHECK(has(all, "bad.toml:6:"));
    CHECK(has(all, "invalid-identifier"));
    CHECK(has(all, "missing-field"));
    CHECK(has(all, "unknown-key"));
    CHECK_FALSE(has(all, "\a"));
    CHECK_FALSE(parse_evidence_manifest("schema = 2\n", "two.toml").has_value());
    // The plain list of suite names earlier builds wrote is not a manifest: it declares no coverage.
    CHECK_FALSE(parse_evidence_manifest("# suites\nreference.values\nvocab\n", "old.txt").has_value());
  }

  TEST_CASE("a misspelled test suite on a capsule with a handler is one error with a did-you-mean") {
    ScratchTree tree("lint-suite");
    misspell_reference_suite(tree);
    const CliRun run = lint_in(tree);
    INFO(run.out);
    CHECK(run.status == 1);
    const std::string position = (tree.catalogs() / "reference.toml").string() + ":19:";
    CHECK(has(run.out, position));
    CHECK(has(run.out, "error[unknown-test-suite]: capsule `reference.matmul` value evidence names test suite "
                       "`reference.valeus`, which this build does not have"));
    CHECK(has(run.out, "  help: did you mean `reference.values`?"));
    // Written once in [defaults], reported once: the other capsules are counted in a note.
    CHECK(count(run.out, "error[unknown-test-suite]") == 1);
    CHECK(has(run.out, "  note: the same evidence backs 52 more capsules: `reference.scaled_matmul`"));
    CHECK(has(run.out, ": 1 errors, 10 warnings, 10 notes"));
  }

  TEST_CASE("a suite this build lacks on a capsule without a handler is a note and not an error") {
    ScratchTree tree("lint-suite-cuda");
    tree.replace("catalogs/native-cuda.toml", R"(name = "native_cuda.values")", R"(name = "native_cuda.valeus")");
    const CliRun run = lint_in(tree);
    INFO(run.out);
    CHECK(run.status == 0);
    CHECK(has(run.out, "test suites `native_cuda.valeus`, `native_cuda.vjps` (not in this build's manifest)"));
    CHECK_FALSE(has(run.out, "error["));
  }

  TEST_CASE("a hostile evidence manifest is refused inertly") {
    const std::filesystem::path file = testing::test_data() / "hostile" / "evidence-manifest" / "forged-names.toml";
    auto read = read_evidence_manifest(file);
    REQUIRE_FALSE(read.has_value());
    const std::string all = render(read.error());
    INFO(all);
    CHECK(has(all, "forged-names.toml:5:"));
    CHECK(has(all, "U+001B"));
    CHECK(has(all, "forged-names.toml:9:"));
    CHECK(count(all, "unknown-spelling") == 2);  // the provider and the op
    ScratchTree tree("lint-hostile-manifest");
    const CliRun run = lint_in(tree, {"--test-suites", file.string()});
    CHECK(run.status == 2);
    CHECK(has(run.err, "--test-suites: cannot read"));
    const std::string output = run.out + run.err;
    CHECK(output.find('\x1b') == std::string::npos);
    CHECK(output.find('\r') == std::string::npos);
    CHECK_FALSE(has(output, "\u202e"));
    CHECK_FALSE(has(output, "\n::error::"));
    CHECK_FALSE(has(output, "\nerror: forged"));
  }

  TEST_CASE("--test-suites reads another manifest") {
    ScratchTree tree("lint-manifest");
    EvidenceManifest only_values;
    EvidenceSource values{EvidenceKind::TestSuite, "reference.values", {}};
    for (const Capsule& c : testing::shipped_module("reference")->capsules) {
      values.cases.push_back({c.op, Provider::Reference, Device::Cpu, Obligation::Value});
    }
    only_values.sources.push_back(values);
    tree.write("suites.toml", write_evidence_manifest(only_values));
    const CliRun run = lint_in(tree, {"--test-suites", (tree.root() / "suites.toml").string()});
    INFO(run.out);
    CHECK(run.status == 1);
    CHECK(has(run.out, "error[unknown-test-suite]: capsule `reference.matmul` vjp evidence names test suite "
                       "`reference.vjps`, which this build does not have"));
    CHECK(has(run.out, "note: test suites of this build (" + (tree.root() / "suites.toml").string() +
                           "): `reference.values`"));
    CHECK(has(run.out, "help: no test suite, fuzz oracle or shared definition of this build covers vjp of matmul on "
                       "reference/cpu"));
    CHECK_FALSE(has(run.out, "uncovered-evidence"));
    const CliRun missing = lint_in(tree, {"--test-suites", (tree.root() / "none.toml").string()});
    CHECK(missing.status == 2);
    CHECK(has(missing.err, "--test-suites: cannot read"));
    // The name list earlier builds wrote is refused, not read as names without coverage.
    tree.write("suites.txt", "# only the value tests\nreference.values\n\n");
    const CliRun old = lint_in(tree, {"--test-suites", (tree.root() / "suites.txt").string()});
    CHECK(old.status == 2);
    CHECK(has(old.err, "--test-suites: cannot read"));
    CHECK(has(old.err, "line 2:"));
  }

  TEST_CASE("value evidence naming a suite that does not cover the capsule fails with the covering suite named") {
    ScratchTree tree("lint-uncovered");
    // `vocab` exists in this build, but tests the vocabulary, not a kernel.
    tree.replace("catalogs/reference.toml", R"(name = "reference.values" })", R"(name = "vocab" })");
    const CliRun run = lint_in(tree);
    INFO(run.out);
    CHECK(run.status == 1);
    CHECK(has(run.out, (tree.catalogs() / "reference.toml").string() + ":19:"));
    CHECK(has(run.out, "error[uncovered-evidence]: capsule `reference.matmul` value evidence names test suite `vocab`, "
                       "which does not cover value of matmul on reference/cpu"));
    CHECK(has(run.out, "note: `vocab` declares no cases"));
    CHECK(has(run.out, "help: name test suite `reference.values`, which covers value of matmul on reference/cpu"));
    // Written once in [defaults], reported once.
    CHECK(count(run.out, "error[uncovered-evidence]") == 1);
    CHECK(has(run.out, "note: the same evidence backs 52 more capsules"));
    CHECK(count(run.out, "error[") == 1);
  }

  TEST_CASE("a suite covering the op on another obligation, provider or device does not cover the capsule") {
    ScratchTree tree("lint-uncovered-key");
    // The value suite named for VJPs: same op, provider and device, another obligation.
    tree.replace("catalogs/reference.toml", R"(name = "reference.vjps" })", R"(name = "reference.values" })");
    // The reference suites named by CUDA capsules: the op, but not the provider or device. These
    // capsules have no handler here, and still fail: the name resolves, the coverage does not.
    tree.replace("catalogs/native-cuda.toml", R"(name = "native_cuda.values")", R"(name = "reference.values")");
    const CliRun run = lint_in(tree);
    INFO(run.out);
    CHECK(run.status == 1);
    CHECK(has(run.out, ":20:"));
    CHECK(has(run.out, "error[uncovered-evidence]: capsule `reference.matmul` vjp evidence names test suite "
                       "`reference.values`, which does not cover vjp of matmul on reference/cpu"));
    CHECK(has(run.out, "note: `reference.values` covers value of 53 ops on reference/cpu"));
    CHECK(has(run.out, "help: did you mean `reference.vjps`?\n"));
    CHECK(has(run.out, (tree.catalogs() / "native-cuda.toml").string() + ":19:"));
    CHECK(has(run.out, "value evidence names test suite `reference.values`, which does not cover value of "));
    CHECK(has(run.out, " on native-cuda/cuda"));
    CHECK(has(run.out, "help: no test suite, fuzz oracle or shared definition of this build covers value of "));
    CHECK(count(run.out, "error[uncovered-evidence]") == 2);
  }

  TEST_CASE("fuzz-oracle and shared-definition evidence resolve against the manifest like test suites") {
    ScratchTree tree("lint-oracles");
    tree.replace("catalogs/reference.toml", R"(evidence = { kind = "test-suite", name = "reference.values" })",
                 R"(evidence = { kind = "fuzz-oracle", name = "fuzz.reference" })");
    tree.replace("catalogs/reference.toml", R"(evidence = { kind = "test-suite", name = "reference.vjps" })",
                 R"(evidence = { kind = "shared-definition", name = "Spec.reference" })");
    tree.replace("catalogs/native-cuda.toml", R"(evidence = { kind = "test-suite", name = "native_cuda.values" })",
                 R"(evidence = { kind = "fuzz-oracle", name = "fuzz.cuda" })");

    // This build declares no oracle or definition: on a capsule with a handler, an error.
    const CliRun run = lint_in(tree);
    INFO(run.out);
    CHECK(run.status == 1);
    CHECK(has(run.out, "error[unknown-evidence-source]: capsule `reference.matmul` value evidence names fuzz oracle "
                       "`fuzz.reference`, which this build does not declare"));
    CHECK(has(run.out, "note: fuzz oracles of this build ("));
    CHECK(has(run.out, "): none"));
    CHECK(has(run.out, "help: name test suite `reference.values`, which covers value of matmul on reference/cpu"));
    CHECK(has(run.out, "error[unknown-evidence-source]: capsule `reference.matmul` vjp evidence names shared "
                       "definition `Spec.reference`, which this build does not declare"));
    // Without a handler, a note says why it cannot be checked here: never silently accepted.
    CHECK(has(run.out, "fuzz oracles `fuzz.cuda` (not in this build's manifest)"));
    CHECK(count(run.out, "error[") == 2);

    // A manifest that declares them: covered evidence passes, uncovered evidence fails.
    auto built = read_evidence_manifest(CAPSULE_TEST_SUITE_MANIFEST);
    REQUIRE(built.has_value());
    EvidenceManifest manifest = *built;
    EvidenceSource oracle{EvidenceKind::FuzzOracle, "fuzz.reference", {}};
    EvidenceSource definition{EvidenceKind::SharedDefinition, "Spec.reference", {}};
    for (const Capsule& c : testing::shipped_module("reference")->capsules) {
      oracle.cases.push_back({c.op, Provider::Reference, Device::Cpu, Obligation::Value});
      if (c.op != Op::Relu) definition.cases.push_back({c.op, Provider::Reference, Device::Cpu, Obligation::Vjp});
    }
    manifest.sources.push_back(oracle);
    manifest.sources.push_back(definition);
    manifest.sources.push_back({EvidenceKind::FuzzOracle, "fuzz.cuda", {}});
    manifest.normalise();
    tree.write("evidence.toml", write_evidence_manifest(manifest));
    const CliRun declared = lint_in(tree, {"--test-suites", (tree.root() / "evidence.toml").string()});
    INFO(declared.out);
    CHECK(declared.status == 1);
    CHECK_FALSE(has(declared.out, "unknown-evidence-source"));
    CHECK(has(declared.out, "error[uncovered-evidence]: capsule `reference.relu` vjp evidence names shared definition "
                            "`Spec.reference`, which does not cover vjp of relu on reference/cpu"));
    CHECK(has(declared.out, "help: name test suite `reference.vjps`, which covers vjp of relu on reference/cpu"));
    CHECK(has(declared.out, "value evidence names fuzz oracle `fuzz.cuda`, which does not cover value of "));
    CHECK(count(declared.out, "error[") == 2);
  }

  TEST_CASE("without a manifest one warning replaces the test-suite checks") {
    EvidenceCheckInputs inputs;
    inputs.manifest_searched = {"/nowhere/test-suites.toml"};
    const Diagnostics out = check_evidence(testing::shipped(), inputs);
    REQUIRE_FALSE(out.empty());
    CHECK(out.front().code == DiagCode::NoTestSuiteManifest);
    CHECK(out.front().severity == Severity::Warning);
    CHECK(out.front().notes == std::vector<std::string>{"looked for /nowhere/test-suites.toml"});
    for (const Diagnostic& d : out) CHECK(d.code != DiagCode::UnknownTestSuite);
  }

  TEST_CASE("an unknown runtime guard is an error that names the guards its handler declares") {
    ScratchTree tree("lint-guard");
    tree.replace("catalogs/reference.toml", R"(name = "typed tensor layout")", R"(name = "typed tensor layuot")");
    const CliRun run = lint_in(tree);
    INFO(run.out);
    CHECK(run.status == 1);
    CHECK(has(run.out, (tree.catalogs() / "reference.toml").string() + ":18:"));
    CHECK(has(run.out, "error[unknown-runtime-guard]: capsule `reference.matmul` layout evidence names runtime guard "
                       "`typed tensor layuot`, but its handler `TorchLean reference CPU matmul` (reference/cpu) "
                       "declares only `portable runtime shape checks`, `typed tensor layout`"));
    CHECK(has(run.out, "  help: did you mean `typed tensor layout`?"));
    CHECK(count(run.out, "error[unknown-runtime-guard]") == 1);
  }

  TEST_CASE("an expired trusted boundary fails lint while plans still run with a warning") {
    ScratchTree tree("lint-expiry");
    tree.replace("catalogs/libtorch.toml", R"(reason = "LibTorch/CUDA SDPA implementation" })",
                 R"(reason = "LibTorch/CUDA SDPA implementation", owner = "capsule maintainers", expires = 2026-06-30 })");
    cli::Environment env;
    env.today = "2026-07-01";
    const CliRun lapsed = lint_in(tree, {}, env);
    INFO(lapsed.out);
    CHECK(lapsed.status == 1);
    CHECK(has(lapsed.out, "error[expired-trust]: trusted boundary of `libtorch.sdpa_forward` value expired on "
                          "2026-06-30 (today is 2026-07-01)"));
    CHECK(lint_in(tree, {"--allow", "expired-trust"}, env).status == 0);
    env.today = "2026-06-30";
    CHECK(lint_in(tree, {}, env).status == 0);

    // The same file still plans: for `plan` an expired trust is a warning, not a load failure.
    env.today = "2026-07-01";
    const CliRun plan = testing::run_cli({"plan", "--profile", "libtorch_forward_cuda", "--ops", "scaled_dot_product_attention",
                                          "--catalogs", tree.catalogs().string(), "--profiles", tree.profiles().string()},
                                         env);
    CHECK(plan.status == 0);
    CHECK(has(plan.err, "warning[expired-trust]"));
  }

  TEST_CASE("trust without a reason is an error that cannot be allowed") {
    ScratchTree tree("lint-reason");
    tree.replace("catalogs/libtorch.toml",
                 "reason = \"LibTorch computes the SDPA forward value; TorchLean-style tape owns the backward\"\n", "");
    tree.replace("catalogs/libtorch.toml", R"(reason = "LibTorch autograd for SDPA")", R"(owner = "capsule maintainers")");
    const CliRun run = lint_in(tree);
    INFO(run.out);
    CHECK(run.status == 1);
    CHECK(has(run.out, "error[missing-trust-reason]: trusted-external capsule `libtorch.sdpa_forward` is missing `reason`"));
    CHECK(has(run.out, "error[missing-trust-reason]: trusted-boundary evidence is missing `reason`"));
    const CliRun allowed = lint_in(tree, {"--allow", "missing-trust-reason"});
    CHECK(allowed.status == 2);
    CHECK(has(allowed.err, "--allow: rule `missing-trust-reason` cannot be allowed"));
  }

  TEST_CASE("provenance must name a file under the source root that holds its symbol") {
    ScratchTree tree("lint-provenance");
    tree.write("catalogs/site.toml", std::string(testing::kCatalogHead) + R"(
[[capsule]]
name = "site.relu"
op = "relu"
contracts.shape  = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "portable runtime shape checks" }, provenance = [{ path = "handlers/reference/src/kernels_elementwise.cpp", symbol = "ReluFn" }] }
contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "typed tensor layout" }, provenance = [{ path = "handlers/reference/src/kernels_elementwse.cpp", symbol = "ReluFn" }] }
contracts.value  = { claim = "value-refinement", evidence = { kind = "test-suite", name = "reference.values" }, provenance = [{ path = "handlers/reference/src/kernels_elementwise.cpp", symbol = "ReluFunc" }] }
contracts.vjp    = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "test-suite", name = "reference.vjps" }, provenance = [{ path = "handlers/reference/src/kernels_elementwise.cpp", symbol = "Relu" }] }
)");
    const CliRun run = lint_in(tree, {"--source-root", testing::source_dir().string()});
    INFO(run.out);
    CHECK(run.status == 1);
    const std::string file = (tree.catalogs() / "site.toml").string();
    CHECK(has(run.out, file + ":19:"));
    CHECK(has(run.out, "error[missing-provenance-file]: capsule `site.relu` layout provenance names "
                       "`handlers/reference/src/kernels_elementwse.cpp`, which is not a file under the source root"));
    CHECK(has(run.out, "  help: did you mean `handlers/reference/src/kernels_elementwise.cpp`?"));
    CHECK(has(run.out, file + ":20:"));
    CHECK(has(run.out, "error[missing-provenance-symbol]: capsule `site.relu` value provenance names symbol `ReluFunc`, "
                       "which does not occur in `handlers/reference/src/kernels_elementwise.cpp`"));
    CHECK(has(run.out, "  help: did you mean `ReluFn`?"));
    // `ReluFn` and `Relu` (as in `Op::Relu`) occur as whole words: no finding for shape or vjp.
    CHECK(count(run.out, "error[missing-provenance") == 2);

    // By default paths are relative to the directory above the catalogs: the scratch tree has no
    // handlers/ directory.
    const CliRun unrooted = lint_in(tree);
    CHECK(count(unrooted.out, "error[missing-provenance-file]") == 4);
  }

  TEST_CASE("provenance outside the source root is reported and never read") {
    ScratchTree tree("lint-provenance-escape");
    tree.write("catalogs/site.toml", std::string(testing::kCatalogHead) + R"(
[[capsule]]
name = "site.relu"
op = "relu"
contracts.value  = { claim = "value-refinement", evidence = { kind = "test-suite", name = "reference.values" }, provenance = [{ path = "../../../../etc/hostname", symbol = "x" }, { path = "/etc/hostname", symbol = "x" }] }
)");
    const CliRun run = lint_in(tree, {"--source-root", testing::source_dir().string()});
    INFO(run.out);
    CHECK(run.status == 1);
    CHECK(count(run.out, "error[missing-provenance-file]") == 2);
    CHECK(has(run.out, "is absolute, leaves the source root"));
    CHECK_FALSE(has(run.out, "missing-provenance-symbol"));
  }


  TEST_CASE("provenance never follows links out of the root, never reads .git, and never echoes what it reads") {
    using Kind = HostileRoot::Kind;
    for (const Kind kind : {Kind::Plain, Kind::Git, Kind::BrokenGit}) {
      const bool git = kind == Kind::Git;
      CAPTURE(static_cast<int>(kind));
      ::setenv("CAPSULE_LINT_PROBE", "secret_env_token_abc", 1);
      const HostileRoot hostile(kind);
      // Six hostile paths, plus the untracked file under git; nothing at all when git refuses.
      const std::string all = every_lint_output(hostile, kind == Kind::BrokenGit ? 0 : git ? 7 : 6);
      INFO(all);
      for (const char* secret : {"secret_outside_token_abc", "secret_dir_token_abc", "secret_git_token_abc",
                                 "secret_env_token_abc", "secret_fifo_token_abc"}) {
        CHECK_FALSE(has(all, secret));
      }
      CHECK_FALSE(has(all, "provenance names symbol `secret_"));
      ::unsetenv("CAPSULE_LINT_PROBE");
      if (kind == Kind::BrokenGit) {
        CHECK(has(all, "error[io-error]: cannot check provenance under source root"));
        CHECK(has(all, "git refused to list its tracked files"));
        continue;
      }
      // Each hostile path is reported as a file lint will not read, never as a missing symbol.
      CHECK(has(all, "a symbolic link is on the path, and lint never follows links"));
      CHECK(has(all, "`.git/config` is absolute, leaves the source root"));
      CHECK(has(all, "looked for " + (hostile.tree.root() / "fifo.cpp").string()));
      // The one plain file is read, and its parsed symbols may be suggested.
      CHECK(has(all, "help: did you mean `tracked_symbol`?"));
      // Untracked files are outside the revision: read only when the root is not a git work tree.
      CHECK(has(all, "names `untracked.cpp`, which is not a file under the source root") == git);
      CHECK(has(all, "lint reads only files git tracks") == git);
    }
  }

  TEST_CASE("the O_NOFOLLOW walk refuses what openat2 refuses") {
    const HostileRoot hostile(HostileRoot::Kind::Plain);
    const int root = ::open(hostile.tree.root().c_str(), O_RDONLY | O_DIRECTORY);
    REQUIRE(root >= 0);
    for (const bool openat2 : {true, false}) {
      CAPTURE(openat2);
      for (const char* refused : {"outside-link.cpp", "linkdir/inner.cpp", "gitlink.cpp", "environ.cpp", "../x",
                                  "/etc/hostname"}) {
        CAPTURE(refused);
        const int fd = detail::open_beneath(root, refused, O_RDONLY, openat2);
        CHECK(fd < 0);
        if (fd >= 0) ::close(fd);
      }
      const int fd = detail::open_beneath(root, "tracked.cpp", O_RDONLY, openat2);
      CHECK(fd >= 0);
      if (fd >= 0) ::close(fd);
    }
    ::close(root);
    CHECK_FALSE(detail::SourceTree::eligible_path(".git/config"));
    CHECK_FALSE(detail::SourceTree::eligible_path("a/.GIT/config"));
    CHECK_FALSE(detail::SourceTree::eligible_path("a/../../b"));
    CHECK(detail::SourceTree::eligible_path("a/./b/../c.cpp") == std::optional<std::string>("a/c.cpp"));
  }

  TEST_CASE("a provenance file larger than the read bound is reported, not read") {
    ScratchTree tree("lint-provenance-large");
    tree.write("big.cpp", std::string(detail::kMaxProvenanceBytes + 1, 'a'));
    detail::SourceTree source(tree.root());
    REQUIRE(source.problem().empty());
    CHECK(source.read("big.cpp").status == detail::SourceRead::Status::TooLarge);
    tree.write("small.cpp", "x");
    CHECK(source.read("small.cpp").status == detail::SourceRead::Status::Read);
  }


  TEST_CASE("lint that checked nothing fails: empty or unrelated catalog directories, a missing source root") {
    namespace fs = std::filesystem;
    ScratchTree tree("lint-nothing");
    fs::create_directories(tree.root() / "empty");
    fs::create_directories(tree.root() / "src");
    tree.write("src/main.cpp", "int main() {}\n");
    for (const char* dir : {"empty", "src"}) {
      CAPTURE(dir);
      const CliRun run = testing::run_cli({"lint", "--catalogs", (tree.root() / dir).string(), "--profiles",
                                           (tree.root() / "empty").string()});
      CHECK(run.status == 2);
      CHECK(has(run.out, "error[nothing-to-lint]: no catalog files (`*.toml`) in this directory"));
      CHECK(has(run.out, "lint: 0 modules"));
    }
    const CliRun rootless = lint_in(tree, {"--source-root", (tree.root() / "nonexistent").string()});
    CHECK(rootless.status == 2);
    CHECK(has(rootless.out, "error[nothing-to-lint]: --source-root `"));
    CHECK(has(rootless.out, "` is not a directory, so no provenance could be checked"));
    // An empty profile directory beside real catalogs still lints (catalogs come first).
    fs::remove_all(tree.profiles());
    fs::create_directories(tree.profiles());
    CHECK(lint_in(tree).status == 0);
  }

  TEST_CASE("sarif and github name files relative to the repository when catalogs are not at its top") {
    namespace fs = std::filesystem;
    ScratchTree tree("lint-monorepo");
    fs::create_directories(tree.root() / "ml");
    fs::rename(tree.catalogs(), tree.root() / "ml" / "catalogs");
    fs::rename(tree.profiles(), tree.root() / "ml" / "profiles");
    const fs::path ml = tree.root() / "ml";
    tree.replace("ml/catalogs/reference.toml", R"(name = "reference.values" })", R"(name = "reference.valeus" })");
    REQUIRE(std::system(str("git init -q '", tree.root().string(), "' && git -C '", tree.root().string(),
                            "' add ml").c_str()) == 0);
    const std::vector<std::string> args{"lint", "--catalogs", (ml / "catalogs").string(), "--profiles",
                                        (ml / "profiles").string()};
    auto with = [&](std::vector<std::string> extra) {
      std::vector<std::string> all = args;
      all.insert(all.end(), extra.begin(), extra.end());
      return testing::run_cli(all);
    };
    for (const std::vector<std::string>& extra :
         {std::vector<std::string>{}, std::vector<std::string>{"--source-root", ml.string()}}) {
      const CliRun github = with({"--format", "github"});
      CHECK(github.status == 1);
      CHECK(has(github.out, "::error file=ml/catalogs/reference.toml,line=19,"));
      CHECK_FALSE(has(github.out, "file=catalogs/"));
      std::vector<std::string> sarif_args{"--format", "sarif"};
      sarif_args.insert(sarif_args.end(), extra.begin(), extra.end());
      const CliRun sarif = with(sarif_args);
      CHECK(has(sarif.out, R"("artifactLocation":{"uri":"ml/catalogs/reference.toml","uriBaseId":"PROJECTROOT"})"));
    }
  }


  TEST_CASE("profiles that can plan nothing are unplannable unless marked plans_nothing, and marked ones must plan nothing") {
    ScratchTree tree("lint-unplannable");
    const std::filesystem::path hostile = testing::test_data() / "hostile" / "profiles";
    for (const char* name : {"only-undeclared", "prefer-undeclared", "empty-evidence", "empty-trust"}) {
      std::filesystem::copy_file(hostile / str(name, ".toml"), tree.profiles() / str(name, ".toml"));
    }
    tree.replace("profiles/future_tpu.toml", "plans_nothing = true\n", "");
    tree.replace("profiles/checked_cpu.toml", "device = \"cpu\"\n", "device = \"cpu\"\nplans_nothing = true\n");
    const CliRun run = lint_in(tree);
    INFO(run.out);
    CHECK(run.status == 1);
    CHECK(has(run.out, "error[unplannable-profile]: profile `only-undeclared` plans only with provider `libtorch`, "
                       "which its own availability does not declare; every plan will fail"));
    CHECK(has(run.out, "error[unplannable-profile]: profile `prefer-undeclared` prefers provider `native-cuda`, "
                       "which its own availability does not declare; the preference can never apply"));
    CHECK(has(run.out, "error[unplannable-profile]: profile `empty-evidence` admits no evidence kind"));
    CHECK(has(run.out, "error[unplannable-profile]: profile `empty-trust` admits no trust level"));
    CHECK(has(run.out, "error[unplannable-profile]: profile `future_tpu` plans no op"));
    CHECK(has(run.out, "help: admit the capsules it should plan, or mark a placeholder profile `plans_nothing = true`"));
    CHECK(has(run.out, "error[unplannable-profile]: profile `checked_cpu` is marked `plans_nothing = true` but plans "));
    // The other placeholders are marked and plan nothing: no finding.
    CHECK_FALSE(has(run.out, "profile `future_rocm`"));
    // The shipped tree, with every future_* profile marked, is clean of this rule.
    CHECK_FALSE(has(lint_shipped().out, "unplannable-profile"));
  }

  TEST_CASE("capsule = [] fails like a missing capsule, and a profile naming a module that failed to load says so") {
    ScratchTree tree("lint-failed-module");
    std::filesystem::copy_file(testing::test_data() / "hostile" / "catalogs" / "empty-capsules.catalog.toml",
                               tree.catalogs() / "empty.toml");
    tree.replace("catalogs/reference.toml", "schema = 1", "schema = 2");
    const CliRun run = lint_in(tree);
    INFO(run.out);
    CHECK(run.status == 1);
    const std::string empty = (tree.catalogs() / "empty.toml").string();
    CHECK(has(run.out, empty + ":4:11: error[missing-field]: catalog declares no capsules (`capsule = []`)"));
    CHECK(has(run.out, "error[unknown-module]: profile `checked_cpu` names capsule module `reference`, whose catalog "
                       "failed to load"));
    CHECK(has(run.out, "note: the catalog's first error is at " + (tree.catalogs() / "reference.toml").string() + ":"));
    CHECK_FALSE(has(run.out, "names unknown capsule module `reference`"));
  }


  TEST_CASE("a checked label resting on a trusted boundary is a lint error and shows in plans by evidence") {
    namespace fs = std::filesystem;
    ScratchTree tree("lint-relabelled");
    const fs::path data = testing::test_data() / "hostile" / "boundary";
    fs::copy_file(data / "relabelled.toml", tree.catalogs() / "relabelled.toml");
    fs::copy_file(data / "admits-boundary.profile.toml", tree.profiles() / "admits-boundary.toml");
    const CliRun lint = lint_in(tree);
    INFO(lint.out);
    CHECK(lint.status == 1);
    CHECK(has(lint.out, (tree.catalogs() / "relabelled.toml").string() + ":20:60: error[checked-on-trusted-boundary]"));
    CHECK(has(lint.out, "error[checked-on-trusted-boundary]: capsule `relabelled.relu` is labelled `checked` but its "
                        "value obligation rests on trusted-boundary evidence"));
    CHECK(count(lint.out, "checked-on-trusted-boundary") == 1);
    // The inline head's guards and suites are not this build's: allow those to isolate the rule.
    CHECK(lint_in(tree, {"--allow", "unknown-runtime-guard,unknown-test-suite"}).status == 1);
    CHECK(lint_in(tree, {"--allow", "unknown-runtime-guard,unknown-test-suite,checked-on-trusted-boundary"}).status == 0);

    const std::vector<std::string> plan{"plan", "--profile", "admits_boundary", "--ops", "relu", "--catalogs",
                                        tree.catalogs().string(), "--profiles", tree.profiles().string()};
    std::vector<std::string> args = plan;
    const CliRun text = testing::run_cli(args);
    INFO(text.out, text.err);
    CHECK(text.status == 0);
    // TorchLean's line reads the label and stays as it is; the new line reads the evidence.
    CHECK(has(text.out, "\ntrusted external boundary: none\ntrusted boundaries by evidence: relu (value)\n"));
    args.insert(args.end(), {"--format", "json"});
    CHECK(has(testing::run_cli(args).out, R"("trusted_boundary_evidence":[{"op":"relu","obligations":["value"]}])"));
    args = plan;
    args.insert(args.end(), {"--format", "markdown"});
    CHECK(has(testing::run_cli(args).out, "**Trusted boundaries by evidence:** `relu` (value)"));

    tree.write("one.graph.toml", "schema = 1\nname = \"one\"\n[[node]]\nid = 0\nkind = \"input\"\n"
                                 "[[node]]\nid = 1\nkind = \"relu\"\ninputs = [0]\n");
    const CliRun dot = testing::run_cli({"plan", "--profile", "admits_boundary", "--graph",
                                         (tree.root() / "one.graph.toml").string(), "--format", "dot", "--catalogs",
                                         tree.catalogs().string(), "--profiles", tree.profiles().string()});
    INFO(dot.out, dot.err);
    CHECK(has(dot.out, "relabelled.relu\\nreference / checked\\ntrusted boundary evidence: value\""));
    CHECK(has(dot.out, "style=\"rounded,filled,dashed\""));
  }

  TEST_CASE("compiled handlers no loaded capsule mentions are one warning per provider and device") {
    ScratchTree tree("lint-unlisted");
    for (const char* name : {"reference.toml", "native-cuda.toml", "attention.toml", "libtorch.toml"}) {
      std::filesystem::remove(tree.catalogs() / name);
    }
    std::filesystem::remove_all(tree.profiles());
    std::filesystem::create_directories(tree.profiles());
    tree.write("catalogs/site.toml", std::string(testing::kCatalogHead) + R"(
[[capsule]]
name = "site.relu"
op = "relu"
contracts.shape  = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "portable runtime shape checks" } }
contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "typed tensor layout" } }
contracts.value  = { claim = "value-refinement", evidence = { kind = "test-suite", name = "reference.values" } }
contracts.vjp    = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "test-suite", name = "reference.vjps" } }
)");
    const CliRun run = lint_in(tree);
    INFO(run.out);
    CHECK(run.status == 0);
    CHECK(has(run.out, "warning[unlisted-handler]: 52 compiled handlers for reference/cpu are not mentioned by any "
                       "loaded capsule, so no plan can select them"));
    CHECK(has(run.out, "handlers/reference/src/"));
    CHECK(has(run.out, "`matmul`"));
    CHECK_FALSE(has(run.out, "`relu`"));
    CHECK(lint_in(tree, {"--deny", "unlisted-handler"}).status == 1);
  }

  TEST_CASE("a capsule whose VJP mode its compiled handler cannot run is a handler-vjp-mismatch warning") {
    ScratchTree tree("lint-vjp-mismatch");
    for (const char* name : {"native-cuda.toml", "attention.toml", "libtorch.toml"}) {
      std::filesystem::remove(tree.catalogs() / name);
    }
    std::filesystem::remove_all(tree.profiles());
    std::filesystem::create_directories(tree.profiles());
    // The reference relu handler runs under the tape only: no backward of its own, no region.
    std::string catalog(testing::kCatalogHead);
    for (const char* mode : {"external-autograd", "backend-vjp"}) {
      catalog += str(R"(
[[capsule]]
name = "site.relu_)", mode, R"("
op = "relu"
vjp = ")", mode, R"("
contracts.shape  = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "portable runtime shape checks" } }
contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "typed tensor layout" } }
contracts.value  = { claim = "value-refinement", evidence = { kind = "test-suite", name = "reference.values" } }
contracts.vjp    = { claim = "vjp-refinement", mode = ")", mode, R"(", evidence = { kind = "test-suite", name = "reference.vjps" } }
)");
    }
    tree.write("catalogs/site.toml", catalog);
    const CliRun run = lint_in(tree);
    INFO(run.out);
    CHECK(run.status == 0);
    CHECK(has(run.out, "site.toml:15:1: warning[handler-vjp-mismatch]: capsule `site.relu_external-autograd` has VJP "
                       "mode external-autograd, but its handler `TorchLean reference CPU relu` (reference/cpu) opens "
                       "no autograd region (no forward_autograd)"));
    CHECK(has(run.out, "site.toml:24:1: warning[handler-vjp-mismatch]: capsule `site.relu_backend-vjp` has VJP mode "
                       "backend-vjp, but its handler `TorchLean reference CPU relu` (reference/cpu) computes no "
                       "backward of its own"));
    CHECK(has(run.out, "binding refuses this capsule at session open"));
    CHECK(lint_in(tree, {"--deny", "handler-vjp-mismatch"}).status == 1);
  }

  TEST_CASE("--deny and --allow adjust rule severities, bad rule ids are usage errors") {
    CHECK(lint_shipped({"--deny", "warnings"}).status == 1);
    const CliRun denied = lint_shipped({"--deny", "no-compiled-handler"});
    CHECK(denied.status == 1);
    CHECK(has(denied.out, "error[no-compiled-handler]"));
    CHECK(has(denied.out, "10 errors, 0 warnings, 10 notes"));
    // Comma lists, and an allowed rule wins over --deny warnings.
    const CliRun quiet = lint_shipped({"--deny", "warnings", "--allow", "no-compiled-handler,unverifiable-evidence"});
    CHECK(quiet.status == 0);
    CHECK(has(quiet.out, "0 errors, 0 warnings, 0 notes"));

    ScratchTree tree("lint-rules");
    misspell_reference_suite(tree);
    CHECK(lint_in(tree, {"--allow", "unknown-test-suite"}).status == 0);

    const CliRun typo = lint_shipped({"--deny", "unknwn-test-suite"});
    CHECK(typo.status == 2);
    CHECK(has(typo.err, "--deny: unknown lint rule `unknwn-test-suite`; did you mean `unknown-test-suite`?"));
    CHECK(lint_shipped({"--allow", "gate-rejected"}).status == 2);  // not a lint rule
    const CliRun both = lint_shipped({"--deny", "expired-trust", "--allow", "expired-trust"});
    CHECK(both.status == 2);
    CHECK(has(both.err, "rule `expired-trust` is both denied and allowed"));
    const CliRun help = testing::run_cli({"lint", "--help"});
    CHECK(help.status == 0);
    CHECK(has(help.out, "  unknown-test-suite         error    test-suite evidence"));
    CHECK(has(help.out, "  unverifiable-evidence      note     evidence of capsules"));
  }

  TEST_CASE("every lint rule has a distinct id and a default severity") {
    std::set<DiagCode> codes;
    for (const LintRule& rule : kLintRules) {
      CAPTURE(to_string(rule.code));
      CHECK(codes.insert(rule.code).second);
      CHECK(find_lint_rule(to_string(rule.code)) == &rule);
      CHECK_FALSE(rule.checks.empty());
      // Only errors can block loading.
      if (rule.blocks_loading) CHECK(rule.severity == Severity::Error);
    }
    CHECK(find_lint_rule(DiagCode::GateRejected) == nullptr);
    // Warnings when loading for a plan, errors under lint.
    CHECK(find_lint_rule(DiagCode::ExpiredTrust)->severity == Severity::Error);
    CHECK(find_lint_rule(DiagCode::UnplannableProfile)->severity == Severity::Error);
  }

  TEST_CASE("json sarif and github render the same failing tree") {
    ScratchTree tree("lint-formats");
    misspell_reference_suite(tree);

    const CliRun json = lint_in(tree, {"--format", "json"});
    CHECK(json.status == 1);
    CHECK(testing::JsonCheck(json.out).one_object());
    CHECK(has(json.out, R"("severity":"error","code":"unknown-test-suite","file":")"));
    CHECK(has(json.out, R"("help":"did you mean `reference.values`?")"));
    CHECK(has(json.out, R"("errors":1,"warnings":10,"notes":10})"));

    const CliRun sarif = lint_in(tree, {"--format", "sarif"});
    CHECK(sarif.status == 1);
    CHECK(testing::JsonCheck(sarif.out).one_object());
    CHECK(sarif.out.find(R"({"$schema":"https://json.schemastore.org/sarif-2.1.0.json","version":"2.1.0","runs":[)") == 0);
    CHECK(has(sarif.out, R"("driver":{"name":"capsule","version":")"));
    CHECK(has(sarif.out, R"({"id":"unknown-test-suite","name":"UnknownTestSuite","shortDescription":{"text":")"));
    CHECK_FALSE(has(sarif.out, R"("id":"unknown-runtime-guard")"));  // a rule with no finding here
    CHECK(has(sarif.out, R"("defaultConfiguration":{"level":"note"})"));
    CHECK(has(sarif.out, R"("originalUriBaseIds":{"PROJECTROOT":{"uri":"file://)"));
    CHECK(has(sarif.out, R"("ruleId":"unknown-test-suite","ruleIndex":)"));
    CHECK(has(sarif.out, R"("artifactLocation":{"uri":"catalogs/reference.toml","uriBaseId":"PROJECTROOT"},"region":{"startLine":19,)"));
    CHECK(has(sarif.out, R"("ruleId":"unverifiable-evidence","ruleIndex":)"));
    check_sarif_rules(sarif.out);
    // Only the rules found here are listed (each carries its full help), not all of kLintRules.
    CHECK(count(sarif.out, R"("defaultConfiguration":)") < kLintRules.size());

    const CliRun github = lint_in(tree, {"--format", "github"});
    CHECK(github.status == 1);
    INFO(github.out);
    CHECK(github.out.find("::warning file=catalogs/attention.toml,line=7,col=10,") == 0);
    CHECK(has(github.out, "\n::error file=catalogs/reference.toml,line=19,col=160,"));
    CHECK(has(github.out, ",title=capsule unknown-test-suite::capsule `reference.matmul` value evidence"));
    CHECK(has(github.out, "%0Ahelp: did you mean `reference.values`?\n"));
    CHECK(has(github.out, "\n::warning file=catalogs/native-cuda.toml,line=8,col=10,title=capsule no-compiled-handler::"));
    CHECK(has(github.out, "\n::notice file=catalogs/native-cuda.toml,line=8,col=10,title=capsule unverifiable-evidence::"));
    CHECK(count(github.out, "\n") == 21);  // one command per finding (checker names resolve: no notes for them)
  }

  TEST_CASE("github annotations escape percent signs and line breaks and property separators") {
    const Diagnostics one{Diagnostic{Severity::Error, DiagCode::UnknownTestSuite, SourceLoc{"odd,dir:x/100%.toml", 3, 4},
                                     "50% done\r\nnext", {"a: b, c"}, {}}};
    // A line break inside the message is input, shown visibly (capsule/escape.hpp); the only
    // encoded break (%0A) is the one between the message and its note.
    CHECK(format_diagnostics(one, DiagFormat::Github, "0") ==
          "::error file=odd%2Cdir%3Ax/100%25.toml,line=3,col=4,title=capsule unknown-test-suite::"
          "50%25 done\\r\\nnext%0Anote: a: b, c\n");
    // Without a project root SARIF names the file by an absolute, percent-encoded URI; the message
    // keeps its text (JSON escapes it instead).
    const std::string sarif = format_diagnostics(one, DiagFormat::Sarif, "0");
    CHECK(testing::JsonCheck(sarif).one_object());
    CHECK(has(sarif, R"("artifactLocation":{"uri":"file:///)"));
    CHECK(has(sarif, R"(/odd%2Cdir%3Ax/100%25.toml"})"));
    CHECK(has(sarif, R"("text":"50% done\r\nnext\nnote: a: b, c")"));
    check_sarif_rules(sarif);
    CHECK(count(sarif, R"("defaultConfiguration":)") == 1);  // one finding, one rule
  }

  TEST_CASE("SARIF counts columns in code points, tracks findings by fingerprint and puts file-less findings in notifications") {
    // A character outside the BMP (U+1F600: four UTF-8 bytes, two UTF-16 units) before the
    // finding on its line: the loaders count it as one column, and SARIF says so.
    const auto root = std::filesystem::temp_directory_path() / ("capsule-sarif-columns-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root / "catalogs");
    std::filesystem::create_directories(root / "profiles");
    std::ofstream(root / "catalogs/a.toml") << "schema = 1\nmodule = \"m\"\ndefaults = { trust = \"\xF0\x9F\x98\x80\", bogus = 1 }\n";
    Workspace workspace = load_workspace({root / "catalogs"}, {root / "profiles"});
    const auto bogus = std::find_if(workspace.diagnostics.begin(), workspace.diagnostics.end(),
                                    [](const Diagnostic& d) { return d.message.find("`bogus`") != std::string::npos; });
    REQUIRE(bogus != workspace.diagnostics.end());
    CHECK(bogus->where.line == 3);
    CHECK(bogus->where.column == 27);  // code points; 30 in bytes, 28 in UTF-16 units
    Diagnostics findings{*bogus};
    findings.push_back(Diagnostic{Severity::Warning, DiagCode::NoTestSuiteManifest, SourceLoc{}, "no manifest", {}, {}});
    const std::string sarif = format_diagnostics(findings, DiagFormat::Sarif, "0", root);
    CHECK(testing::JsonCheck(sarif).one_object());
    CHECK(has(sarif, R"("columnKind":"unicodeCodePoints")"));
    CHECK(has(sarif, R"("startLine":3,"startColumn":27)"));
    CHECK(has(sarif, R"("automationDetails":{"id":"capsule/lint/"})"));
    // The file-less warning is a notification of the run, not a result without a location.
    CHECK(has(sarif, R"("toolExecutionNotifications":[{"level":"warning","message":{"text":"no manifest"},)"
                     R"("associatedRule":{"id":"no-test-suite-manifest",)"));
    CHECK(count(sarif, R"("ruleId":)") == 1);
    check_sarif_rules(sarif);  // the notification's rule is listed and indexed too
    // The fingerprint ignores the position: the same finding two lines lower keeps it.
    Diagnostic moved = *bogus;
    moved.where.line += 2;
    const std::string later = format_diagnostics(Diagnostics{moved}, DiagFormat::Sarif, "0", root);
    const auto fingerprint = [](const std::string& text) {
      const std::string key = R"("capsuleFinding/v1":")";
      const auto at = text.find(key);
      return at == std::string::npos ? std::string() : text.substr(at + key.size(), 64);
    };
    CHECK(fingerprint(sarif).size() == 64);
    CHECK(fingerprint(sarif) == fingerprint(later));
    Diagnostic other = *bogus;
    other.message += " (changed)";
    CHECK(fingerprint(format_diagnostics(Diagnostics{other}, DiagFormat::Sarif, "0", root)) != fingerprint(sarif));
    // A note (which may cite another position) leaves it alone; a second identical finding in the
    // same file gets a fingerprint of its own.
    Diagnostic noted = *bogus;
    noted.notes.push_back("first declared at a.toml:9:9");
    CHECK(fingerprint(format_diagnostics(Diagnostics{noted}, DiagFormat::Sarif, "0", root)) == fingerprint(sarif));
    const std::string twice = format_diagnostics(Diagnostics{*bogus, moved}, DiagFormat::Sarif, "0", root);
    const auto second = twice.find(R"("capsuleFinding/v1":")", twice.find(R"("capsuleFinding/v1":")") + 1);
    REQUIRE(second != std::string::npos);
    CHECK(fingerprint(twice) == fingerprint(sarif));
    CHECK(fingerprint(twice.substr(second)) != fingerprint(sarif));
    std::filesystem::remove_all(root);
  }
}

}  // namespace capsule
