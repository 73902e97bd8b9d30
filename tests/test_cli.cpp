// SPDX-License-Identifier: Apache-2.0
// The `capsule` command line, driven in-process: exit codes, golden outputs and error texts.
// Goldens live in tests/golden; source paths print as <src> and digests as <sha256>.
#include <doctest/doctest.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "test_support.hpp"

using capsule::testing::CliRun;
using capsule::testing::read_text;
using capsule::testing::source_dir;
using capsule::testing::has;
using capsule::testing::test_data;

namespace {

std::vector<std::string> with_data(std::vector<std::string> args) {
  args.push_back("--catalogs");
  args.push_back((source_dir() / "catalogs").string());
  args.push_back("--profiles");
  args.push_back((source_dir() / "profiles").string());
  return args;
}

// A fixed fingerprint keeps machine-dependent values out of the goldens.
CliRun cli(std::vector<std::string> args) {
  return capsule::testing::run_cli(with_data(std::move(args)), capsule::testing::golden_environment());
}

std::string normalize(std::string text) {
  const std::string src = source_dir().string();
  for (std::size_t at = text.find(src); at != std::string::npos; at = text.find(src, at)) text.replace(at, src.size(), "<src>");
  return capsule::testing::mask_digests(text);
}

/// Compares with tests/golden/NAME; set CAPSULE_UPDATE_GOLDENS=1 to rewrite after a reviewed change.
void check_golden(const std::string& name, const std::string& actual) {
  const auto file = source_dir() / "tests/golden" / name;
  if (std::getenv("CAPSULE_UPDATE_GOLDENS") != nullptr) {
    std::ofstream(file, std::ios::binary) << actual;
  }
  CHECK_MESSAGE(read_text(file) == actual, "golden " << name << " differs; actual:\n" << actual);
}

std::filesystem::path scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("capsule-cli-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("lint passes over the shipped catalogs and profiles") {
    const CliRun run = cli({"lint"});
    CHECK(run.status == 0);
    // Warnings and notes only: the CUDA, attention and LibTorch capsules have no handler in this
    // build (tests/test_lint.cpp checks them).
    // This binary's CLI links the reference handlers only (tests/CMakeLists.txt), so the LibTorch
    // CPU capsules have no handler here in every build.
    CHECK(run.out.ends_with("lint: 11 modules, 275 capsules, 20 profiles: 0 errors, 10 warnings, 10 notes\n"));
    CHECK(run.err.empty());
  }

  TEST_CASE("lint rejects a value claim in the shape field and names file, line and obligation") {
    const auto dir = scratch_dir("misfiled");
    std::filesystem::create_directories(dir / "catalogs");
    std::filesystem::create_directories(dir / "profiles");
    std::filesystem::copy_file(test_data() / "lint/misfiled.toml", dir / "catalogs/misfiled.toml");
    const CliRun run = capsule::testing::run_cli(
        {"lint", "--catalogs", (dir / "catalogs").string(), "--profiles", (dir / "profiles").string()});
    CHECK(run.status == 1);
    const std::string expected_position = (dir / "catalogs/misfiled.toml").string() + ":22:19: error[misaligned-contract]: ";
    CHECK_MESSAGE(run.out.find(expected_position) != std::string::npos, run.out);
    CHECK(run.out.find("value-refinement claim in its shape contract") != std::string::npos);
    CHECK(run.out.find(": 1 errors, ") != std::string::npos);

    const CliRun github = capsule::testing::run_cli({"lint", "--format", "github", "--catalogs",
                                                     (dir / "catalogs").string(), "--profiles", (dir / "profiles").string()});
    CHECK(github.status == 1);
    CHECK(github.out.find("::error file=") == 0);
    CHECK(github.out.find(",line=22,col=19,title=capsule misaligned-contract::") != std::string::npos);
    const CliRun sarif = capsule::testing::run_cli({"lint", "--format", "sarif", "--catalogs",
                                                    (dir / "catalogs").string(), "--profiles", (dir / "profiles").string()});
    CHECK(sarif.out.find("\"version\":\"2.1.0\"") != std::string::npos);
    CHECK(sarif.out.find("\"ruleId\":\"misaligned-contract\"") != std::string::npos);
    CHECK(sarif.out.find("\"startLine\":22") != std::string::npos);
  }

  TEST_CASE("plan --ops prints TorchLean's planReport with sources") {
    const CliRun run = cli({"plan", "--profile", "checked_cpu", "--ops", "matmul,relu"});
    CHECK(run.status == 0);
    check_golden("plan_checked_cpu_matmul_relu.txt", normalize(run.out));
  }

  TEST_CASE("plan --ops for the hybrid profile shows the trusted boundary") {
    const CliRun run = cli({"plan", "--profile", "libtorch_forward_cuda", "--ops", "add,scaled_dot_product_attention,relu"});
    CHECK(run.status == 0);
    check_golden("plan_libtorch_forward_cuda.txt", normalize(run.out));
  }

  TEST_CASE("plan --graph prints the node plan and the groups") {
    const CliRun mlp = cli({"plan", "--profile", "checked_cpu", "--graph",
                            (source_dir() / "examples/graphs/mlp-4-8-1.graph.toml").string()});
    CHECK(mlp.status == 0);
    check_golden("plan_graph_mlp.txt", normalize(mlp.out));
    const CliRun relu = cli({"plan", "--profile", "checked_cpu", "--graph",
                             (source_dir() / "examples/graphs/relu-chain.graph.toml").string()});
    CHECK(relu.status == 0);
    CHECK(relu.out.find("kernels 3, groups 1\n  #[1, 2, 3] relu reference.relu\n") != std::string::npos);
  }

  TEST_CASE("plan formats: json, markdown and dot") {
    const CliRun json = cli({"plan", "--profile", "libtorch_forward_cuda", "--ops", "add,scaled_dot_product_attention",
                             "--format", "json"});
    CHECK(json.status == 0);
    check_golden("plan_libtorch_forward_cuda.json", normalize(json.out));
    const CliRun markdown = cli({"plan", "--profile", "checked_cpu", "--ops", "matmul,relu", "--format", "markdown"});
    CHECK(markdown.status == 0);
    check_golden("plan_checked_cpu.md", normalize(markdown.out));
    const CliRun dot = cli({"plan", "--profile", "libtorch_forward_cuda", "--format", "dot", "--graph",
                            (test_data() / "graphs/attention-block.graph.toml").string()});
    CHECK(dot.status == 0);
    check_golden("plan_attention_block.dot", normalize(dot.out));
    const CliRun dot_ops = cli({"plan", "--profile", "libtorch_forward_cuda", "--ops", "add,scaled_dot_product_attention",
                                "--format", "dot"});
    CHECK(dot_ops.status == 0);
    check_golden("plan_ops_libtorch_forward_cuda.dot", normalize(dot_ops.out));
  }

  TEST_CASE("a planning failure lists every candidate, JSON carries the error object") {
    const CliRun text = cli({"plan", "--profile", "checked_cpu", "--ops", "matmul,selective_scan"});
    CHECK(text.status == 1);
    CHECK(text.out.empty());
    check_golden("plan_error_selective_scan.txt", normalize(text.err));
    const CliRun json = cli({"plan", "--profile", "checked_cpu", "--ops", "selective_scan", "--format", "json"});
    CHECK(json.status == 1);
    CHECK(json.out.find("{\"format_version\":1,\"error\":{\"code\":\"no-admissible-capsule\",\"message\":\"no admissible kernel capsule "
                        "for op selective_scan on device cpu\"") == 0);
    CHECK(json.out.find("\"candidates\":[{\"capsule\":\"native_cuda.selective_scan\",\"reasons\":[\"targets cuda, "
                        "not requested cpu\"") != std::string::npos);
  }

  TEST_CASE("future profiles fail to plan rather than fall back") {
    const CliRun run = cli({"plan", "--profile", "future_metal", "--ops", "matmul"});
    CHECK(run.status == 1);
    CHECK(run.err.find("no admissible kernel capsule for op matmul on device metal\n") == 0);
  }

  TEST_CASE("check: seed 002's evidence lines under checked, accepted under external") {
    const CliRun strict = cli({"check", "--profile", "libtorch_forward_cuda", "--ops", "scaled_dot_product_attention",
                               "--assurance", "checked"});
    CHECK(strict.status == 1);
    CHECK(strict.out.find("checked: rejected libtorch.sdpa_forward value\n"
                          "  trusted boundary: LibTorch/CUDA SDPA implementation\n") == 0);
    CHECK(strict.out.find("checked: gate rejected libtorch.sdpa_forward: libtorch.sdpa_forward uses rejected trust "
                          "level trusted-external for scaled_dot_product_attention\n") != std::string::npos);
    const CliRun external = cli({"check", "--profile", "libtorch_forward_cuda", "--ops", "scaled_dot_product_attention"});
    CHECK(external.status == 0);
    CHECK(external.out.find("external: accepted\nsources:\n  ") == 0);
    CHECK(external.out.find("catalogs/libtorch.toml sha256 ") != std::string::npos);
  }

  TEST_CASE("check --graph prints groups and the verdict") {
    const CliRun run = cli({"check", "--profile", "checked_cpu", "--graph",
                            (source_dir() / "examples/graphs/mlp-4-8-1.graph.toml").string()});
    CHECK(run.status == 0);
    check_golden("check_graph_mlp.txt", normalize(run.out));
  }

  TEST_CASE("explain shows every candidate and the result") {
    const CliRun run = cli({"explain", "--profile", "libtorch_forward_strict", "--op", "scaled_dot_product_attention"});
    CHECK(run.status == 0);
    check_golden("explain_strict_sdpa.txt", normalize(run.out));
  }

  TEST_CASE("list capsules, profiles and ops") {
    const CliRun capsules = cli({"list", "capsules", "--op", "scaled_dot_product_attention", "--device", "cuda"});
    CHECK(capsules.status == 0);
    CHECK(capsules.out ==
          "native_cuda.direct_attention op=scaled_dot_product_attention provider=native-cuda device=cuda trust=checked "
          "vjp=backend-vjp reduction=implementation-defined module=attention\n"
          "torchlean.composed_attention op=scaled_dot_product_attention provider=torchlean device=cuda trust=checked "
          "vjp=torchlean-tape reduction=implementation-defined module=attention\n"
          "libtorch.sdpa_forward op=scaled_dot_product_attention provider=libtorch device=cuda trust=trusted-external "
          "vjp=torchlean-tape reduction=implementation-defined module=libtorch\n"
          "libtorch.sdpa_autograd op=scaled_dot_product_attention provider=libtorch device=cuda trust=trusted-external "
          "vjp=external-autograd reduction=implementation-defined module=libtorch\n");
    const CliRun profiles = cli({"list", "profiles", "--format", "json"});
    CHECK(profiles.status == 0);
    CHECK(profiles.out.find("{\"format_version\":1,\"profiles\":[{") == 0);  // a document, not a bare array
    CHECK(profiles.out.ends_with("]}\n"));
    CHECK(profiles.out.find("{\"name\":\"checked_cpu\",\"device\":\"cpu\",\"provider\":\"auto\",\"assurance\":\"checked\"") !=
          std::string::npos);
    CHECK(has(profiles.out, "\"name\":\"libtorch_checked_cpu\""));
    CHECK(has(profiles.out, "\"vjp\":\"torchlean-tape\",\"recheck\":\"every call\""));
    const CliRun profiles_text = cli({"list", "profiles"});
    CHECK(profiles_text.status == 0);
    CHECK(has(profiles_text.out, "libtorch_checked_cpu: device=cpu provider=prefer libtorch assurance=checked-runtime "
                                 "vjp=torchlean-tape recheck=every call\n"));
    const CliRun ops = cli({"list", "ops"});
    CHECK(ops.status == 0);
    CHECK(ops.out.find("rand_uniform (no vjp required): cpu=1, cuda=1\n") == 0);
    CHECK(ops.out.find("custom: no capsules\n") != std::string::npos);
  }

  TEST_CASE("usage errors exit 2 with a suggestion") {
    const CliRun profile = cli({"plan", "--profile", "checked_cpuu", "--ops", "relu"});
    CHECK(profile.status == 2);
    CHECK(profile.err.find("unknown profile `checked_cpuu`") != std::string::npos);
    CHECK(profile.err.find("did you mean `checked_cpu`?") != std::string::npos);
    const CliRun op = cli({"plan", "--profile", "checked_cpu", "--ops", "matmul,rleu"});
    CHECK(op.status == 2);
    CHECK(op.err.find("did you mean `relu`?") != std::string::npos);
    const CliRun command = capsule::testing::run_cli({"plna"});
    CHECK(command.status == 2);
    CHECK(command.err.find("did you mean `plan`?") != std::string::npos);
    const CliRun both = cli({"plan", "--profile", "checked_cpu"});
    CHECK(both.status == 2);
    const CliRun flag = cli({"plan", "--profile", "checked_cpu", "--ops", "relu", "--bogus"});
    CHECK(flag.status == 2);
    CHECK(capsule::testing::run_cli({}).status == 2);
  }

  TEST_CASE("files that fail to load exit 2, --help and --version exit 0") {
    const auto dir = scratch_dir("broken");
    std::filesystem::create_directories(dir / "catalogs");
    std::ofstream(dir / "catalogs/broken.toml") << "schema = 1\nmodule = \n";
    const CliRun run = capsule::testing::run_cli({"plan", "--profile", "checked_cpu", "--ops", "relu", "--catalogs",
                                                  (dir / "catalogs").string(), "--profiles",
                                                  (source_dir() / "profiles").string()});
    CHECK(run.status == 2);
    CHECK(run.err.find("broken.toml:2:10: error[parse-error]") != std::string::npos);
    const CliRun help = capsule::testing::run_cli({"--help"});
    CHECK(help.status == 0);
    CHECK(help.out.find("usage: capsule <command>") != std::string::npos);
    const CliRun plan_help = capsule::testing::run_cli({"plan", "--help"});
    CHECK(plan_help.status == 0);
    CHECK(plan_help.out.find("--graph") != std::string::npos);
    const CliRun version = capsule::testing::run_cli({"--version"});
    CHECK(version.status == 0);
    CHECK(version.out.find("capsule 0.1.0") == 0);
    const CliRun short_version = capsule::testing::run_cli({"-V"});
    CHECK(short_version.status == 0);
    CHECK(short_version.out == version.out);
  }

  TEST_CASE("- reads --profile, --graph or --accept from standard input, named <stdin> in diagnostics") {
    // Standard input, for this in-process run: std::cin reads `text` until the scope ends.
    struct StdinFrom {
      std::istringstream text;
      std::streambuf* previous;
      explicit StdinFrom(const std::string& t) : text(t), previous(std::cin.rdbuf(text.rdbuf())) {}
      ~StdinFrom() { std::cin.rdbuf(previous); }
      StdinFrom(const StdinFrom&) = delete;
      StdinFrom& operator=(const StdinFrom&) = delete;
    };
    std::string profile = read_text(source_dir() / "profiles/checked_cpu.toml");
    profile.replace(profile.find("name = \"checked_cpu\""), 20, "name = \"piped_cpu\"");
    {
      const StdinFrom in(profile);
      const CliRun run = cli({"plan", "--profile", "-", "--ops", "relu"});
      CHECK(run.status == 0);
      CHECK(has(run.out, "piped_cpu"));
      CHECK(has(run.out, "relu"));
    }
    {
      const StdinFrom in(read_text(source_dir() / "examples/graphs/relu-chain.graph.toml"));
      const CliRun run = cli({"plan", "--profile", "checked_cpu", "--graph", "-", "--format", "json"});
      CHECK(run.status == 0);
      CHECK(has(run.out, "<stdin>"));  // the graph's source in the report
    }
    {
      const StdinFrom in("schema = 1\nname = \n");
      const CliRun run = cli({"plan", "--profile", "-", "--ops", "relu"});
      CHECK(run.status == 2);
      CHECK(has(run.err, "<stdin>:2:8: error[parse-error]"));
      CHECK(has(run.err, "the profile read from standard input failed to load"));
    }
    {
      const StdinFrom in("[[waiver]]\n");
      const CliRun run = capsule::testing::run_cli(
          {"diff", (source_dir() / "catalogs").string(), (source_dir() / "catalogs").string(), "--accept", "-"});
      CHECK(run.status == 2);
      CHECK(has(run.err, "<stdin>:1:1: error[missing-field]: [[waiver]] is missing `change`"));
    }
    const CliRun both = cli({"plan", "--profile", "-", "--graph", "-"});
    CHECK(both.status == 2);
    CHECK(has(both.err, "give at most one of them as -"));
  }

  TEST_CASE("lint FILE... reports only the named files' findings, checked in the context of their tree") {
    const auto dir = scratch_dir("lint-named");
    std::filesystem::copy(source_dir() / "catalogs", dir / "catalogs");
    std::filesystem::copy(source_dir() / "profiles", dir / "profiles");
    std::ofstream(dir / "catalogs/broken.toml") << "schema = 1\nmodule = \"broken\"\nbogus = 1\n";
    const std::string broken = (dir / "catalogs/broken.toml").string();
    const std::string clean = (dir / "profiles/checked_cpu.toml").string();
    const std::vector<std::string> root{"--root", dir.string(), "--allow", "no-compiled-handler", "--allow",
                                        "unverifiable-evidence", "--allow", "unlisted-handler", "--allow",
                                        "handler-vjp-mismatch"};
    auto lint = [&](std::vector<std::string> files) {
      std::vector<std::string> args{"lint"};
      args.insert(args.end(), files.begin(), files.end());
      args.insert(args.end(), root.begin(), root.end());
      return capsule::testing::run_cli(args);
    };
    const CliRun whole = lint({});
    CHECK(whole.status == 1);
    CHECK(has(whole.out, "broken.toml:3:1: error[unknown-key]"));
    // The clean profile, named: the broken catalog still loads beside it, but is not reported.
    const CliRun named_clean = lint({clean});
    CHECK(named_clean.status == 0);
    CHECK_FALSE(has(named_clean.out, "broken.toml"));
    CHECK(has(named_clean.out, "lint: 1 named file of "));
    const CliRun named_broken = lint({broken, clean});
    CHECK(named_broken.status == 1);
    CHECK(has(named_broken.out, "broken.toml:3:1: error[unknown-key]"));
    CHECK(has(named_broken.out, "lint: 2 named files of "));
    // A file outside the loaded tree, or none at all, is a usage error, never silently skipped.
    std::ofstream(dir / "outside.toml") << "schema = 1\n";
    const CliRun outside = lint({(dir / "outside.toml").string()});
    CHECK(outside.status == 2);
    CHECK(has(outside.err, "is not in a loaded catalogs or profiles directory"));
    const CliRun missing = lint({(dir / "catalogs/nope.toml").string()});
    CHECK(missing.status == 2);
    CHECK(has(missing.err, "no such file"));
    // Files the loaders never read are not "clean": a non-TOML file, a graph, a link.
    std::ofstream(dir / "catalogs/notes.txt") << "not a catalog\n";
    std::ofstream(dir / "profiles/x.graph.toml") << "schema = 1\n";
    std::filesystem::create_symlink(dir / "profiles/checked_cpu.toml", dir / "profiles/link.toml");
    for (const char* name : {"catalogs/notes.txt", "profiles/x.graph.toml", "profiles/link.toml"}) {
      INFO(name);
      const CliRun refused = lint({(dir / name).string()});
      CHECK(refused.status == 2);
      CHECK(refused.out.empty());
    }
  }

  TEST_CASE("a mistyped flag gets the nearest flag of its command, and an unlike one gets none") {
    const CliRun typo = capsule::testing::run_cli({"plan", "--profil", "checked_cpu", "--ops", "relu"});
    CHECK(typo.status == 2);
    CHECK(typo.out.empty());
    CHECK(typo.err.find("capsule plan: unrecognised option '--profil'; did you mean `--profile`? (see `capsule plan "
                        "--help`)") != std::string::npos);
    const CliRun lint_typo = capsule::testing::run_cli({"lint", "--formt", "json"});
    CHECK(lint_typo.status == 2);
    CHECK(lint_typo.err.find("did you mean `--format`?") != std::string::npos);
    const CliRun unlike = capsule::testing::run_cli({"plan", "--zzzzzzzzzz"});
    CHECK(unlike.status == 2);
    CHECK(unlike.err.find("unrecognised option '--zzzzzzzzzz'") != std::string::npos);
    CHECK(unlike.err.find("did you mean") == std::string::npos);
  }

  TEST_CASE("hostile inputs are diagnostics, never crashes") {
    const auto dir = scratch_dir("hostile");
    std::filesystem::create_directories(dir / "catalogs");
    std::filesystem::create_symlink(dir / "catalogs/loop.toml", dir / "catalogs/loop.toml");
    const CliRun loop = capsule::testing::run_cli({"lint", "--catalogs", (dir / "catalogs").string(), "--profiles",
                                                   (source_dir() / "profiles").string()});
    CHECK(loop.status == 2);
    // A symbolic link is refused whatever it points to (Note [Non-regular entries]), a loop included.
    CHECK(loop.out.find("loop.toml: error[non-regular-file]: `loop.toml` is a symbolic link") != std::string::npos);

    const CliRun missing = cli({"plan", "--profile", "no/such/profile.toml", "--ops", "relu"});
    CHECK(missing.status == 2);
    CHECK(missing.err.find("cannot read profile file `no/such/profile.toml`: no such file") != std::string::npos);

    const CliRun graph_dir = cli({"plan", "--profile", "checked_cpu", "--graph", dir.string()});
    CHECK(graph_dir.status == 2);
    CHECK(graph_dir.err.find("error[io-error]: not a regular file") != std::string::npos);

    const CliRun guessed = cli({"plan", "--profile", "checked_cpu", "--ops", "relu", "--form", "json"});
    CHECK(guessed.status == 2);  // no abbreviation guessing

    capsule::cli::Environment env;
    env.today = "2019-13-45";
    const CliRun today = capsule::testing::run_cli(with_data({"lint"}), env);
    CHECK(today.status == 2);
    CHECK(today.err.find("CAPSULE_TODAY=2019-13-45 is not a date") != std::string::npos);
  }

  TEST_CASE("CAPSULE_TODAY judges trust expiry") {
    const auto dir = scratch_dir("expiry");
    std::filesystem::create_directories(dir / "catalogs");
    std::filesystem::create_directories(dir / "profiles");
    std::ofstream(dir / "catalogs/vendor.toml") << read_text(test_data() / "lint/expiring.toml");
    capsule::cli::Environment env;
    env.today = "2027-01-01";
    const std::vector<std::string> args{"lint", "--catalogs", (dir / "catalogs").string(), "--profiles",
                                        (dir / "profiles").string()};
    const CliRun lapsed = capsule::testing::run_cli(args, env);
    CHECK(lapsed.status == 1);
    // A warning when loading for a plan, an error under lint: lapsed trust fails CI.
    CHECK(lapsed.out.find("error[expired-trust]: trust in capsule `vendor.relu` expired on 2026-12-31") !=
          std::string::npos);
    env.today = "2026-12-31";
    CHECK(capsule::testing::run_cli(args, env).status == 0);
  }

  TEST_CASE("editing a catalog changes the plan without a rebuild") {
    const auto dir = scratch_dir("edit");
    std::filesystem::copy(source_dir() / "catalogs", dir / "catalogs");
    const auto run_plan = [&] {
      return capsule::testing::run_cli({"plan", "--profile", "libtorch_forward_cuda", "--ops", "scaled_dot_product_attention",
                                        "--catalogs", (dir / "catalogs").string(), "--profiles",
                                        (source_dir() / "profiles").string()});
    };
    CHECK(run_plan().out.find("scaled_dot_product_attention: libtorch.sdpa_forward") != std::string::npos);
    // Remove the LibTorch capsules: the same profile now selects native CUDA attention.
    std::filesystem::remove(dir / "catalogs/libtorch.toml");
    // A module must declare a capsule (`capsule = []` is an error, like a missing `capsule`):
    // keep the module with one CPU relu capsule that this CUDA profile never selects.
    std::string head(capsule::testing::kCatalogHead);
    head.replace(head.find("module = \"inline\""), 17, "module = \"libtorch\"");
    std::ofstream(dir / "catalogs/libtorch.toml") << head << "\n[[capsule]]\nname = \"libtorch.placeholder\"\nop = \"relu\"\n";
    const CliRun after = run_plan();
    CHECK(after.status == 0);
    CHECK(after.out.find("scaled_dot_product_attention: native_cuda.direct_attention") != std::string::npos);
  }
}
