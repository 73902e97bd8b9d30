// SPDX-License-Identifier: Apache-2.0
// The environment fingerprint (capsule/fingerprint.hpp, capsule/build_info.hpp): entries, digest
// and value cap; host collection with hostile environment values; the build identity; and its
// rendering in every report that prints sources. tests/fingerprint_env_check.cmake runs the real
// binary with different OPENBLAS_CORETYPE values.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <optional>

#include "capsule/build_info.hpp"
#include "capsule/escape.hpp"
#include "capsule/fingerprint.hpp"
#include "capsule/json.hpp"
#include "capsule/report.hpp"
#include "capsule/sha256.hpp"
#include "linked_handlers.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

using testing::has;
using testing::source_dir;

/// A value an attacker can export: it tries to end the report line, forge a GitHub workflow
/// command, split a Markdown cell, hide text with a bidi override and break out of JSON.
constexpr std::string_view kHostile = "Haswell\n::error::forged\r\n##[error]x | y\xe2\x80\xae\"}\x1b[2J\xff";

EnvironmentLookup lookup_from(std::map<std::string, std::string, std::less<>> variables) {
  return [variables = std::move(variables)](std::string_view name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = text.find('\n', start);
    lines.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return lines;
}

bool is_hex(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

TEST_SUITE("fingerprint") {
  TEST_CASE("set keeps entries sorted and unique, get returns the value or empty") {
    EnvironmentFingerprint fp;
    fp.set("host.os", "Linux 6.1");
    fp.set("build.commit", "abc");
    fp.set("env.X", "1");
    fp.set("host.os", "Linux 6.2");
    REQUIRE(fp.entries.size() == 3);
    CHECK(fp.entries[0].first == "build.commit");
    CHECK(fp.entries[1].first == "env.X");
    CHECK(fp.entries[2].first == "host.os");
    CHECK(fp.get("host.os") == "Linux 6.2");
    CHECK(fp.get("host") == "");
    CHECK(fp.get("zzz") == "");
  }

  TEST_CASE("the digest covers every entry and cannot be forged by a value holding a newline") {
    EnvironmentFingerprint a;
    a.set("a", "1");
    a.set("b", "2");
    EnvironmentFingerprint same;
    same.set("b", "2");
    same.set("a", "1");
    CHECK(a.digest() == same.digest());
    CHECK(is_hex(a.digest()));
    CHECK(a.digest().size() == 64);
    // The documented form: key=<length>:<value>\n per entry in key order.
    CHECK(a.digest() == sha256_hex("a=1:1\nb=1:2\n"));
    EnvironmentFingerprint changed = a;
    changed.set("b", "3");
    CHECK(changed.digest() != a.digest());
    // One entry whose value spells a second entry is not the two entries.
    EnvironmentFingerprint forged;
    forged.set("a", "1:1\nb=1:2");
    CHECK(forged.digest() != a.digest());
    EnvironmentFingerprint forged_plain;
    forged_plain.set("a", "1\nb=2");
    CHECK(forged_plain.digest() != a.digest());
    CHECK(EnvironmentFingerprint{}.digest() == sha256_hex(""));
  }

  TEST_CASE("add_entries lets a provider contribute entries, later values win") {
    EnvironmentFingerprint fp;
    fp.set("host.os", "Linux");
    EnvironmentFingerprint provider;
    provider.set("provider.libtorch.version", "2.5.1");
    provider.set("host.os", "Linux (as the provider saw it)");
    add_entries(fp, provider);
    CHECK(fp.get("provider.libtorch.version") == "2.5.1");
    CHECK(fp.get("host.os") == "Linux (as the provider saw it)");
    CHECK(fp.entries.size() == 2);
  }

  TEST_CASE("values longer than the cap are cut, and values differing after the cut still differ") {
    const std::string long_a = std::string(10000, 'a');
    std::string long_b = long_a;
    long_b.back() = 'b';
    EnvironmentFingerprint a;
    a.set("env.OPENBLAS_CORETYPE", long_a);
    EnvironmentFingerprint b;
    b.set("env.OPENBLAS_CORETYPE", long_b);
    const std::string stored = a.get("env.OPENBLAS_CORETYPE");
    CHECK(stored.size() < kMaxFingerprintValue + 200);
    CHECK(stored.starts_with(std::string(kMaxFingerprintValue, 'a') + "... (9488 more bytes; sha256 of the whole value "));
    CHECK(a.digest() != b.digest());
    CHECK(capped_fingerprint_value("short") == "short");
    CHECK(capped_fingerprint_value(std::string(kMaxFingerprintValue, 'x')) == std::string(kMaxFingerprintValue, 'x'));
  }

  TEST_CASE("host collection reports the host, the thread settings and the BLAS, keeping env values as given") {
    const EnvironmentFingerprint fp =
        collect_host_fingerprint(lookup_from({{"OPENBLAS_CORETYPE", std::string(kHostile)}, {"OMP_NUM_THREADS", "4"}}));
    CHECK(fp.get("env.OPENBLAS_CORETYPE") == kHostile);  // stored as it is; renderers escape
    CHECK(fp.get("env.OMP_NUM_THREADS") == "4");
    CHECK(fp.get("env.OPENBLAS_NUM_THREADS") == "unset");
    CHECK(fp.get("env.MKL_NUM_THREADS") == "unset");
    CHECK(!fp.get(std::string(fingerprint_key::kHostOs)).empty());
    CHECK(!fp.get(std::string(fingerprint_key::kHostArch)).empty());
    CHECK(!fp.get(std::string(fingerprint_key::kCpuModel)).empty());
    CHECK(std::stoi(fp.get(std::string(fingerprint_key::kHostCpus))) >= 1);
    CHECK(!fp.get(std::string(fingerprint_key::kHardwareThreads)).empty());
    // This test binary links no OpenBLAS; a build that does must report its configuration.
    const std::string blas = fp.get(std::string(fingerprint_key::kOpenblas));
    if (blas == "no OpenBLAS loaded in this process") {
      CHECK(fp.get(std::string(fingerprint_key::kOpenblasCore)).empty());
    } else {
      CHECK(!blas.empty());
      CHECK(!fp.get(std::string(fingerprint_key::kOpenblasCore)).empty());
    }
    const EnvironmentFingerprint other = collect_host_fingerprint(lookup_from({{"OPENBLAS_CORETYPE", "Zen"}, {"OMP_NUM_THREADS", "4"}}));
    CHECK(other.digest() != fp.digest());
    const EnvironmentFingerprint again =
        collect_host_fingerprint(lookup_from({{"OPENBLAS_CORETYPE", std::string(kHostile)}, {"OMP_NUM_THREADS", "4"}}));
    CHECK(again.digest() == fp.digest());
  }

  TEST_CASE("an OpenBLAS loaded in the process is found with dlsym and its own text is escaped too") {
    // Before it is loaded (and when no earlier test in this process loaded it: dlclose need not
    // unload), the fingerprint says there is none rather than leaving the entry out.
    if (dlsym(RTLD_DEFAULT, "openblas_get_config") == nullptr) {
      const EnvironmentFingerprint without = collect_host_fingerprint(lookup_from({}));
      CHECK(without.get(std::string(fingerprint_key::kOpenblas)) == "no OpenBLAS loaded in this process");
      CHECK(without.get(std::string(fingerprint_key::kOpenblasCore)).empty());
      CHECK(without.get(std::string(fingerprint_key::kOpenblasThreads)).empty());
    }
    // Loaded with RTLD_GLOBAL so RTLD_DEFAULT lookups see it, as they would a linked OpenBLAS.
    void* library = dlopen(CAPSULE_FAKE_OPENBLAS, RTLD_NOW | RTLD_GLOBAL);
    REQUIRE_MESSAGE(library != nullptr, dlerror());
    const EnvironmentFingerprint fp = collect_host_fingerprint(lookup_from({}));
    dlclose(library);
    CHECK(fp.get(std::string(fingerprint_key::kOpenblas)) == "OpenBLAS 0.3.99 (fake) DYNAMIC_ARCH\n::error::forged by the BLAS");
    CHECK(fp.get(std::string(fingerprint_key::kOpenblasCore)) == "Haswell");
    CHECK(fp.get(std::string(fingerprint_key::kOpenblasThreads)) == "3");
    const std::string text = environment_block(fp);
    CHECK(has(text, "\n  blas.openblas OpenBLAS 0.3.99 (fake) DYNAMIC_ARCH\\n::error::forged by the BLAS\n"));
    for (const std::string& line : lines_of(text)) CHECK_FALSE(line.starts_with("::"));
  }

  TEST_CASE("a hostile environment value cannot start a line in text, GitHub, Markdown, DOT or JSON output") {
    EnvironmentFingerprint fp;
    fp.set("env.OPENBLAS_CORETYPE", std::string(kHostile));
    fp.set("host.os", "Linux");

    const std::string text = environment_block(fp);
    const std::vector<std::string> text_lines = lines_of(text);
    REQUIRE(text_lines.size() == 3);  // header and one line per entry
    CHECK(text_lines[0] == "environment: sha256 " + fp.digest());
    CHECK(text_lines[1].starts_with("  env.OPENBLAS_CORETYPE Haswell\\n::error::forged\\r\\n##[error]x | y<U+202E>\"}\\x1b[2J\\xff"));
    CHECK(text_lines[2] == "  host.os Linux");
    for (const std::string& line : text_lines) {
      CHECK_FALSE(line.starts_with("::"));
      CHECK_FALSE(line.starts_with("##"));
      CHECK(line.find('\r') == std::string::npos);
      CHECK(line.find('\x1b') == std::string::npos);
    }

    // A GitHub annotation built from the value stays one command.
    const std::string github = "::notice::" + github_escape(fp.get("env.OPENBLAS_CORETYPE"), GithubField::Data);
    CHECK(github.find('\n') == std::string::npos);
    CHECK(github.find('\r') == std::string::npos);

    const std::string markdown = environment_markdown(fp);
    const std::vector<std::string> md_lines = lines_of(markdown);
    // blank, heading, blank, header, rule, two rows, final empty piece after the last newline
    REQUIRE(md_lines.size() == 8);
    CHECK(md_lines[1] == "**Environment** (sha256 `" + fp.digest() + "`)");
    CHECK_MESSAGE(md_lines[5] == (R"(| env.OPENBLAS\_CORETYPE | Haswell\\n::error::forged\\r\\n\#\#\[error\]x \| y&lt;U+202E&gt;"}\\x1b\[2J\\xff |)"), md_lines[5]);
    CHECK(md_lines[6] == "| host.os | Linux |");
    // Exactly the three cell borders of a two-column row: the value's `|` is escaped.
    const std::string& row = md_lines[5];
    std::size_t borders = 0;
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (row[i] == '|' && (i == 0 || row[i - 1] != '\\')) ++borders;
    }
    CHECK(borders == 3);

    const std::string dot = environment_dot_comments(fp);
    for (const std::string& line : lines_of(dot)) CHECK((line.empty() || line.starts_with("  //")));

    JsonWriter json;
    json.begin_object();
    write_environment_json(json, fp);
    json.end_object();
    CHECK(json.str().starts_with(R"({"environment":{"sha256":")" + fp.digest() + R"(","entries":{"env.OPENBLAS_CORETYPE":"Haswell\n::error::forged\r\n##[error]x | y\u202e\"}\u001b[2J\ufffd","host.os":"Linux"}}})"));
    CHECK(json.str().find('\n') == std::string::npos);
  }

  TEST_CASE("the build identity names the commit, compiler, flags and the built reference library") {
    const EnvironmentFingerprint fp = current_fingerprint();
    const std::string commit = fp.get(std::string(fingerprint_key::kCommit));
    const std::string bare = commit.ends_with("-dirty") ? commit.substr(0, commit.size() - 6) : commit;
    CHECK_MESSAGE((commit == "unknown" || (is_hex(bare) && bare.size() >= 40)), commit);
    CHECK(!fp.get(std::string(fingerprint_key::kCompiler)).empty());
    // The handler target's own options reach build.flags.
    CHECK(has(fp.get(std::string(fingerprint_key::kFlags)), "-ffp-contract=off"));
    CHECK(fp.get(std::string(fingerprint_key::kBuildType)) == CAPSULE_BUILD_TYPE);
    CHECK(fp.get(std::string(fingerprint_key::kCapsuleVersion)) == CAPSULE_PROJECT_VERSION);
    CHECK(fp.get(fingerprint_key::provider_version("reference")) == std::string("capsule ") + CAPSULE_PROJECT_VERSION);
    const std::filesystem::path library = CAPSULE_REFERENCE_LIBRARY;
    CHECK(fp.get(fingerprint_key::provider_library_file("reference")) == library.filename().string());
    CHECK(fp.get(fingerprint_key::provider_library_digest("reference")) == sha256_hex(testing::read_text(library)));
    // Host entries are there too.
    CHECK(!fp.get(std::string(fingerprint_key::kHostOs)).empty());
    CHECK(!fp.get("env.OPENBLAS_CORETYPE").empty());
  }
}

TEST_SUITE("fingerprint") {
  TEST_CASE("every report that prints sources prints this build's fingerprint next to them") {
    const std::string data[] = {"--catalogs", (source_dir() / "catalogs").string(), "--profiles",
                                (source_dir() / "profiles").string()};
    const auto run = [&](std::vector<std::string> args) {
      args.insert(args.end(), std::begin(data), std::end(data));
      return testing::run_cli(std::move(args));  // no fixed fingerprint: the real one
    };
    // The build's and the host's entries, and those of every provider this binary links.
    const std::string digest = cli::linked_fingerprint().digest();
    const std::string graph = (source_dir() / "examples/graphs/mlp-4-8-1.graph.toml").string();
    const std::vector<std::vector<std::string>> text_reports = {
        {"plan", "--profile", "checked_cpu", "--ops", "matmul,relu"},
        {"plan", "--profile", "checked_cpu", "--graph", graph},
        {"check", "--profile", "checked_cpu", "--ops", "matmul,relu"},
        {"check", "--profile", "checked_cpu", "--graph", graph},
        {"explain", "--profile", "checked_cpu", "--op", "relu"},
        {"run", "causal_attention", "--profile", "checked_cpu"},
        {"run", "mlp_regression", "--profile", "checked_cpu"}};
    for (const auto& args : text_reports) {
      const testing::CliRun r = run(args);
      INFO(args[0], " ", args[1], "\n", r.out, r.err);
      CHECK(r.status == 0);
      const std::size_t sources = r.out.find("sources:\n");
      const std::size_t environment = r.out.find("environment: sha256 " + digest + "\n");
      REQUIRE(sources != std::string::npos);
      REQUIRE(environment != std::string::npos);
      CHECK(environment > sources);
      CHECK(has(r.out, "\n  host.os "));
      CHECK(has(r.out, "\n  provider.reference.sha256 "));
    }
    const std::vector<std::vector<std::string>> json_reports = {
        {"plan", "--profile", "checked_cpu", "--ops", "matmul,relu", "--format", "json"},
        {"plan", "--profile", "checked_cpu", "--graph", graph, "--format", "json"},
        {"explain", "--profile", "checked_cpu", "--op", "relu", "--format", "json"},
        {"run", "causal_attention", "--profile", "checked_cpu", "--format", "json"}};
    for (const auto& args : json_reports) {
      const testing::CliRun r = run(args);
      INFO(args[0], " ", args[1], "\n", r.out, r.err);
      CHECK(r.status == 0);
      CHECK(has(r.out, R"("environment":{"sha256":")" + digest + R"(","entries":{)"));
    }
    for (const std::string& ops_or_graph : {std::string("--ops"), std::string("--graph")}) {
      const testing::CliRun md = run({"plan", "--profile", "checked_cpu", ops_or_graph,
                                      ops_or_graph == "--ops" ? "matmul,relu" : graph, "--format", "markdown"});
      CHECK(md.status == 0);
      CHECK(has(md.out, "**Environment** (sha256 `" + digest + "`)\n\n| key | value |\n|---|---|\n"));
    }
    const testing::CliRun dot = run({"plan", "--profile", "checked_cpu", "--graph", graph, "--format", "dot"});
    CHECK(has(dot.out, "  // environment sha256 " + digest + "\n"));
    // A planning failure names its sources and the environment too.
    const testing::CliRun failed = run({"plan", "--profile", "checked_cpu", "--ops", "selective_scan"});
    CHECK(failed.status == 1);
    CHECK(has(failed.err, "environment: sha256 " + digest + "\n"));
    const testing::CliRun failed_json = run({"plan", "--profile", "checked_cpu", "--ops", "selective_scan", "--format", "json"});
    CHECK(has(failed_json.out, R"("environment":{"sha256":")" + digest));
  }

  TEST_CASE("the trust diff, which names the folders it read, prints the fingerprint in every format") {
    const auto root = testing::test_data() / "diff" / "evidence-weakened";
    const std::string digest = cli::linked_fingerprint().digest();
    const auto diff = [&](std::string format) {
      return testing::run_cli({"diff", (root / "base").string(), (root / "head").string(), "--format", std::move(format)});
    };
    const testing::CliRun text = diff("text");
    CHECK(text.status == 1);  // the fixture weakens evidence
    // The block ends the report: after its header, only `  key value` lines follow.
    const std::string header = "\n\nenvironment: sha256 " + digest + "\n";
    const std::size_t at = text.out.find(header);
    REQUIRE(at != std::string::npos);
    const std::vector<std::string> entries = lines_of(std::string_view(text.out).substr(at + header.size()));
    CHECK(entries.size() == cli::linked_fingerprint().entries.size() + 1);  // and the empty piece after the last newline
    for (std::size_t i = 0; i + 1 < entries.size(); ++i) CHECK(entries[i].starts_with("  "));
    CHECK(has(text.out, "\n  host.os "));
    CHECK(has(diff("json").out, R"(},"environment":{"sha256":")" + digest + R"(","entries":{)"));
    CHECK(has(diff("markdown").out, "\n**Environment** (sha256 `" + digest + "`)\n\n| key | value |\n"));
  }
}

}  // namespace capsule
