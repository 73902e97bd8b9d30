// SPDX-License-Identifier: Apache-2.0
// `capsule run EXAMPLE --profile NAME` (issue item 8), driven in-process: TorchLean §10.15's
// numbers, a falling loss, JSON output, the graph dump, and the exit statuses of README.md#command-line.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "capsule/examples.hpp"
#include "capsule/policy.hpp"
#include "json_check.hpp"
#include "test_support.hpp"

using capsule::testing::CliRun;
using capsule::testing::has;
using capsule::testing::source_dir;

namespace {

CliRun run(std::vector<std::string> args) {
  args.insert(args.begin(), "run");
  args.push_back("--catalogs");
  args.push_back((source_dir() / "catalogs").string());
  args.push_back("--profiles");
  args.push_back((source_dir() / "profiles").string());
  return capsule::testing::run_cli(std::move(args));
}


/// The numbers after `loss ` on each `step K/N loss X` line.
std::vector<double> step_losses(const std::string& out) {
  std::vector<double> losses;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("step ", 0) != 0) continue;
    const auto at = line.find(" loss ");
    if (at != std::string::npos) losses.push_back(std::stod(line.substr(at + 6)));
  }
  return losses;
}


}  // namespace

TEST_SUITE("examples") {
  TEST_CASE("causal_attention reproduces TorchLean's section 10.15 numbers") {
    const CliRun r = run({"causal_attention", "--profile", "checked_cpu"});
    CHECK_MESSAGE(r.status == 0, r.err);
    CHECK(has(r.out, "  [1.000000, 0.000000, 0.000000]\n  [0.622459, 0.377541, 0.000000]\n"
                     "  [0.333333, 0.333333, 0.333333]\n"));
    CHECK(has(r.out, "hard_masked_softmax:          [0.000000, 0.000000, 0.000000]"));
    CHECK(has(r.out, "softmax with sentinel -30:    [0.333333, 0.333333, 0.333333]"));
    CHECK(has(r.out, "softmax with sentinel -30:    0.034425"));
    CHECK(has(r.out, "softmax with sentinel -1e30:  0.000000"));
    CHECK(has(r.out, "(exactly 0)"));
    CHECK(has(r.out, "capsules used (7):\n"));
    CHECK(has(r.out, "scaled_dot_product_attention -> reference.attention"));
    CHECK(r.err.empty());
  }

  TEST_CASE("mlp_regression trains with a falling loss and lists the capsules used") {
    const CliRun r = run({"mlp_regression", "--profile", "checked_cpu"});
    REQUIRE_MESSAGE(r.status == 0, r.err);
    CHECK(has(r.out, "profile=checked_cpu device=cpu assurance=checked vjp=torchlean-tape\n"));
    CHECK(has(r.out, "trusted external boundary: none\n"));
    CHECK(has(r.out, "sources:\n"));
    const std::vector<double> losses = step_losses(r.out);
    REQUIRE(losses.size() == 11);  // step 1, every 20th, and the last
    CHECK(losses.back() < losses.front() / 10);
    CHECK(has(r.out, "step 200/200 loss "));
    CHECK(has(r.out, "(falling)"));
    CHECK(has(r.out, "capsules used ("));
    CHECK(has(r.out, "  mse_loss -> reference.mse_loss (reference/cpu, checked, vjp=torchlean-tape): 200 forward"));
    CHECK_FALSE(has(r.out, "\r"));  // not a terminal: plain lines, no progress bar
  }

  TEST_CASE("a terminal gets a progress bar on standard error, never in the report") {
    capsule::cli::Environment env;
    env.terminal = true;
    env.error_terminal = true;
    const std::vector<std::string> args{"run", "cnn_classifier", "--profile", "checked_cpu", "--catalogs",
                                        (source_dir() / "catalogs").string(), "--profiles",
                                        (source_dir() / "profiles").string()};
    const CliRun r = capsule::testing::run_cli(args, env);
    REQUIRE(r.status == 0);
    CHECK(has(r.err, "\r[##############################] step 25/25 loss "));
    CHECK_FALSE(has(r.out, "\r"));
    CHECK_FALSE(has(r.out, "step 25/25"));  // the bar replaces the step lines
    CHECK(has(r.out, "capsules used ("));
    // Standard error redirected (a log file): no bar anywhere, the step lines are in the report.
    env.error_terminal = false;
    const CliRun logged = capsule::testing::run_cli(args, env);
    REQUIRE(logged.status == 0);
    CHECK_FALSE(has(logged.err, "\r"));
    CHECK(has(logged.out, "step 25/25 loss "));
  }

  TEST_CASE("cnn_classifier trains conv and pool layers for a few steps") {
    const CliRun r = run({"cnn_classifier", "--profile", "checked_cpu"});
    REQUIRE_MESSAGE(r.status == 0, r.err);
    const std::vector<double> losses = step_losses(r.out);
    REQUIRE(losses.size() == 25);
    CHECK(losses.back() < losses.front() / 2);
    CHECK(has(r.out, "accuracy 16/16"));
    CHECK(has(r.out, "  conv -> reference.conv"));
    CHECK(has(r.out, "  max_pool -> reference.max_pool"));
  }

  TEST_CASE("--format json prints one object with the capsules used and the sources") {
    for (const char* example : {"mlp_regression", "causal_attention", "cnn_classifier"}) {
      INFO(example);
      const CliRun r = run({example, "--profile", "checked_cpu", "--format", "json"});
      REQUIRE_MESSAGE(r.status == 0, r.err);
      capsule::testing::JsonCheck json(r.out);
      REQUIRE_MESSAGE(json.one_object(), r.out);
      const std::vector<std::string>& keys = json.top_keys();
      REQUIRE(keys.size() >= 2);
      CHECK(keys[0] == "format_version");  // first in every JSON document the CLI prints
      CHECK(keys[1] == "example");
      CHECK(std::find(keys.begin(), keys.end(), "capsules_used") != keys.end());
      CHECK(std::find(keys.begin(), keys.end(), "sources") != keys.end());
      CHECK(has(r.out, std::string("{\"format_version\":1,\"example\":\"") + example + "\",\"profile\":\"checked_cpu\""));
      CHECK(has(r.out, "\"capsules_used\":[{\"op\":"));
      CHECK(has(r.out, "\"sources\":[{\"path\":"));
    }
    const CliRun mlp = run({"mlp_regression", "--profile", "checked_cpu", "--format", "json"});
    CHECK(has(mlp.out, "\"losses\":[0."));
    CHECK(has(mlp.out, "\"final_loss\":0.0"));
    const CliRun attention = run({"causal_attention", "--profile", "checked_cpu", "--format", "json"});
    CHECK(has(attention.out, "\"sentinel_minus_1e30\":0,\"hard_masked_softmax\":0}"));
    CHECK(has(attention.out, "\"sentinel_minus_30\":3.44247"));
  }

  TEST_CASE("every example's report opens with the same header and names the handler behind each capsule") {
    for (const char* example : {"mlp_regression", "causal_attention", "cnn_classifier"}) {
      INFO(example);
      const CliRun r = run({example, "--profile", "checked_cpu"});
      REQUIRE_MESSAGE(r.status == 0, r.err);
      CHECK(r.out.rfind(std::string("example ") + example + ": ", 0) == 0);
      const auto task = r.out.find("\ntask: ");
      const auto plan = r.out.find("\n\nplan for the ops ");
      const auto evidence = r.out.find("; covered by test suite reference.values\n");
      const auto sources = r.out.find("\nsources:\n");
      const auto used = r.out.find("\ncapsules used (");
      CHECK(task < plan);
      CHECK(plan < evidence);
      CHECK(evidence < sources);
      CHECK(sources < used);
      REQUIRE(used != std::string::npos);
      // Every capsule used is followed by the handler that ran it.
      std::istringstream lines(r.out.substr(used + 1));
      std::string line;
      std::getline(lines, line);
      std::size_t capsules = 0;
      std::size_t handlers = 0;
      while (std::getline(lines, line) && line.rfind("  ", 0) == 0) {
        if (line.rfind("  ", 0) == 0 && line[2] != ' ') ++capsules;
        if (line.rfind("    handler: TorchLean reference CPU ", 0) == 0) ++handlers;
      }
      CHECK(capsules > 0);
      CHECK(handlers == capsules);
    }
  }

  TEST_CASE("a profile whose target names another platform says that the target is a declaration") {
    // macos_cpu declares macOS on aarch64; windows_cpu declares Windows. On any other platform the
    // header says the run happens here; checked_cpu declares no target and gets no such line.
    for (const char* profile : {"macos_cpu", "windows_cpu"}) {
      INFO(profile);
      const CliRun r = run({"causal_attention", "--profile", profile});
      REQUIRE_MESSAGE(r.status == 0, r.err);
      const bool here = std::string_view(profile) == "macos_cpu"
                            ? capsule::this_build_os() == capsule::OperatingSystem::Macos &&
                                  capsule::this_build_arch() == capsule::Architecture::Aarch64
                            : capsule::this_build_os() == capsule::OperatingSystem::Windows &&
                                  capsule::this_build_arch() == capsule::Architecture::X86_64;
      const auto line = r.out.find(std::string("\ntarget: profile ") + profile + " declares ");
      CHECK((line != std::string::npos) == !here);
      if (!here) CHECK(has(r.out, "so the target is a declaration: the plan below runs here"));
    }
    const CliRun plain = run({"causal_attention", "--profile", "checked_cpu"});
    REQUIRE(plain.status == 0);
    CHECK_FALSE(has(plain.out, "\ntarget: "));
  }

  TEST_CASE("under --format json a profile whose target names another platform carries target_declaration") {
    const std::string os(capsule::to_string(capsule::this_build_os()));
    const std::string arch(capsule::to_string(capsule::this_build_arch()));
    const bool macos_here = capsule::this_build_os() == capsule::OperatingSystem::Macos &&
                            capsule::this_build_arch() == capsule::Architecture::Aarch64;
    const CliRun macos = run({"causal_attention", "--profile", "macos_cpu", "--format", "json"});
    REQUIRE_MESSAGE(macos.status == 0, macos.err);
    capsule::testing::JsonCheck document(macos.out);
    REQUIRE_MESSAGE(document.one_object(), macos.out);
    const std::vector<std::string> keys = document.top_keys();
    const bool carried = std::find(keys.begin(), keys.end(), "target_declaration") != keys.end();
    CHECK(carried == !macos_here);
    if (!macos_here) {
      // The same facts as the text header's `target:` line, field by field.
      CHECK(has(macos.out, "\"target_declaration\":{\"profile\":\"macos_cpu\",\"declared\":{\"os\":\"macos\","
                           "\"arch\":\"aarch64\"},\"this_build\":{\"os\":\"" + os + "\",\"arch\":\"" + arch +
                           "\"}},\"capsules_used\":["));
      const CliRun text = run({"causal_attention", "--profile", "macos_cpu"});
      CHECK(has(text.out,
                "target: profile macos_cpu declares macos aarch64; this build runs on " + os + " " + arch + ","));
    }

    // Only the declared fields: a target naming just another os compares just the os.
    const std::string other_os = capsule::this_build_os() == capsule::OperatingSystem::Wasi ? "linux" : "wasi";
    const auto file = std::filesystem::temp_directory_path() / "capsule-examples-os-only.toml";
    {
      std::ofstream profile(file);
      profile << "schema = 1\nname = \"os_only_cpu\"\ndevice = \"cpu\"\nprovider = \"auto\"\n"
                 "assurance = \"checked\"\nvjp = \"torchlean-tape\"\nmodules = [\"attention\", \"reference\"]\n"
                 "[target]\nos = \"" << other_os << "\"\n";
    }
    const CliRun os_only = run({"causal_attention", "--profile", file.string(), "--format", "json"});
    REQUIRE_MESSAGE(os_only.status == 0, os_only.err);
    CHECK(has(os_only.out, "\"target_declaration\":{\"profile\":\"os_only_cpu\",\"declared\":{\"os\":\"" + other_os +
                               "\"},\"this_build\":{\"os\":\"" + os + "\"}},"));
    const CliRun os_only_text = run({"causal_attention", "--profile", file.string()});
    CHECK(has(os_only_text.out,
              "target: profile os_only_cpu declares " + other_os + "; this build runs on " + os + ","));
    std::filesystem::remove(file);

    const CliRun plain = run({"causal_attention", "--profile", "checked_cpu", "--format", "json"});
    REQUIRE(plain.status == 0);
    CHECK(capsule::testing::JsonCheck(plain.out).one_object());
    CHECK_FALSE(has(plain.out, "target_declaration"));
  }

  TEST_CASE("a refusal says what would have run, and under --format json it is the JSON document") {
    const CliRun cuda = run({"mlp_regression", "--profile", "checked_cuda"});
    CHECK(cuda.status == 1);
    CHECK(cuda.out.empty());
    CHECK(has(cuda.err, "error[device-unavailable]: "));
    CHECK(has(cuda.err, "nothing falls back to the CPU\n\nwhat would have run under profile `checked_cuda` "
                        "(nothing ran: the device is unusable here):\nprofile=checked_cuda device=cuda"));
    CHECK(has(cuda.err, "  matmul: native_cuda.matmul provider=native-cuda"));
    // A future device plans nothing: the planner's refusal lists every candidate and its reason.
    const CliRun metal = run({"cnn_classifier", "--profile", "future_metal"});
    CHECK(metal.status == 1);
    CHECK(has(metal.err, "what would have run under profile `future_metal`"));
    CHECK(has(metal.err, "no admissible kernel capsule for op "));
    CHECK(has(metal.err, "    - targets cpu, not requested metal\n"));

    const CliRun json = run({"causal_attention", "--profile", "checked_cuda", "--format", "json"});
    CHECK(json.status == 1);
    capsule::testing::JsonCheck document(json.out);
    REQUIRE_MESSAGE(document.one_object(), json.out);
    CHECK(document.top_keys() == std::vector<std::string>{"format_version", "example", "profile", "error"});
    CHECK(json.out.rfind("{\"format_version\":1,\"example\":\"causal_attention\",\"profile\":\"checked_cuda\","
                         "\"error\":{\"code\":\"device-unavailable\",\"message\":\"", 0) == 0);
    CHECK(has(json.out, "what would have run under profile `checked_cuda`"));
    CHECK(has(json.err, "error[device-unavailable]: "));
    // Plain words, not TorchLean's session prefix and "CPU parity stubs".
    CHECK(has(json.err, "error[device-unavailable]: profile `checked_cuda` targets `cuda`, but this build has no "
                        "CUDA runtime linked"));
    CHECK_FALSE(has(json.out + json.err, "torch eager session"));
    CHECK_FALSE(has(json.out + json.err, "parity stubs"));
  }

  TEST_CASE("--show-backend prints the session's backend report") {
    const CliRun r = run({"causal_attention", "--profile", "checked_cpu", "--show-backend"});
    REQUIRE(r.status == 0);
    // `capsule run` words the session's log plainly (MessageStyle::Plain).
    CHECK(r.out.rfind("capsules bound, in the order the session selects them:\n", 0) == 0);
    CHECK_FALSE(has(r.out, "TorchLean]"));
    CHECK(has(r.out, "  softmax: reference.softmax provider=reference"));
    const CliRun json = run({"causal_attention", "--profile", "checked_cpu", "--show-backend", "--format", "json"});
    REQUIRE(json.status == 0);
    CHECK(capsule::testing::JsonCheck(json.out).one_object());
    CHECK(has(json.err, "capsules bound, in the order the session selects them:"));
  }

  TEST_CASE("--dump-graph writes the lowered model as a graph file that plans") {
    const auto file = std::filesystem::temp_directory_path() / "capsule-examples-mlp.graph.toml";
    std::filesystem::remove(file);
    const CliRun r = run({"mlp_regression", "--profile", "checked_cpu", "--dump-graph", file.string()});
    REQUIRE_MESSAGE(r.status == 0, r.err);
    CHECK(has(r.out, "wrote graph `mlp-4-8-1` (18 nodes, 13 with a kernel)"));
    capsule::Diagnostics diagnostics;
    const auto graph = capsule::load_graph(file, diagnostics);
    REQUIRE(graph);
    CHECK(graph->nodes.size() == 18);
    const CliRun plan = capsule::testing::run_cli({"plan", "--profile", "checked_cpu", "--graph", file.string(),
                                                   "--catalogs", (source_dir() / "catalogs").string(), "--profiles",
                                                   (source_dir() / "profiles").string()});
    CHECK(plan.status == 0);
    CHECK(has(plan.out, "nodes 18, planned 13\n"));

    const CliRun no_model = run({"causal_attention", "--profile", "checked_cpu", "--dump-graph", file.string()});
    CHECK(no_model.status == 2);
    CHECK(has(no_model.err, "builds no model"));
    const CliRun no_dir = run({"mlp_regression", "--profile", "checked_cpu", "--dump-graph", "/nonexistent-dir/x.toml"});
    CHECK(no_dir.status == 2);
    CHECK(has(no_dir.err, "does not exist"));
  }

  TEST_CASE("an unknown example exits 2 with a suggestion") {
    const CliRun r = run({"mlp_regresion", "--profile", "checked_cpu"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "unknown example `mlp_regresion`"));
    CHECK(has(r.err, "did you mean `mlp_regression`?"));
    CHECK(r.out.empty());
    const CliRun none = run({"--profile", "checked_cpu"});
    CHECK(none.status == 2);
    CHECK(has(none.err, "run needs an example: mlp_regression, causal_attention, cnn_classifier"));
    const CliRun no_profile = run({"mlp_regression"});
    CHECK(no_profile.status == 2);
    const CliRun bad_profile = run({"mlp_regression", "--profile", "checked_cpux"});
    CHECK(bad_profile.status == 2);
    CHECK(has(bad_profile.err, "did you mean `checked_cpu`?"));
  }

  TEST_CASE("checked_cuda without a usable CUDA device exits 1 before anything runs") {
    const CliRun r = run({"mlp_regression", "--profile", "checked_cuda"});
    CHECK(r.status == 1);
    CHECK(has(r.err, "error[device-unavailable]: "));
    CHECK(has(r.err, "no usable CUDA device"));
    CHECK_FALSE(has(r.out, "step 1/"));
  }

  TEST_CASE("a future target profile stops at open with the missing-capsule error") {
    const CliRun r = run({"causal_attention", "--profile", "future_metal"});
    CHECK(r.status == 1);
    CHECK(has(r.err, "error["));
    CHECK(r.out.empty());
  }

  TEST_CASE("run --help lists the examples") {
    const CliRun r = capsule::testing::run_cli({"run", "--help"});
    CHECK(r.status == 0);
    for (const capsule::examples::ExampleInfo& e : capsule::examples::all_examples()) {
      CHECK(has(r.out, std::string("  ") + std::string(e.name)));
    }
  }

  TEST_CASE("run_example reports an unknown example as a value") {
    capsule::HandlerRegistry handlers;
    std::ostringstream out;
    capsule::examples::ExampleOptions options;
    options.profile = "checked_cpu";
    auto status = capsule::examples::run_example("nope", capsule::testing::shipped(), handlers, options, out, out);
    REQUIRE_FALSE(status);
    CHECK(status.error().code == capsule::RuntimeCode::UnknownExample);
  }
}

// --- provider boundary copies in the run report (issue 10, copy accounting) ---
TEST_SUITE("examples") {
  TEST_CASE("a run reports the boundary copies its providers added, by op, and says none when there are none") {
    // A provider's counters are cumulative in the process; the report prints what the run added,
    // and only for a provider whose capsules ran (checked_cpu runs reference capsules only).
    std::uint64_t calls = 0;
    capsule::examples::ExampleOptions options;
    options.profile = "checked_cpu";
    options.boundary_copies = [&calls] {
      ++calls;
      using capsule::examples::ProviderBoundaryCopies;
      const std::uint64_t grown = calls == 1 ? 0 : 7;  // the counters grow during the run
      return std::vector<ProviderBoundaryCopies>{
          {capsule::Provider::Reference, {{"matmul", 5}, {"permute\n::error::x", 3 + grown}}},
          {capsule::Provider::Libtorch, {{"conv", 9 + grown}}}};
    };
    std::ostringstream out;
    auto status = capsule::examples::run_example("mlp_regression", capsule::testing::shipped(),
                                                 capsule::testing::reference_handlers(), options, out, out);
    REQUIRE_MESSAGE(status, (status ? std::string() : status.error().message));
    CHECK(calls == 2);
    // The op name is escaped: a counter key can never start a line of its own.
    CHECK(has(out.str(), "\nreference boundary copies: permute\\n::error::x 7\n"));
    CHECK_FALSE(has(out.str(), "libtorch boundary copies"));  // no LibTorch capsule ran
    CHECK_FALSE(has(out.str(), "matmul 5"));                  // copied before the run, not in it

    options.boundary_copies = [] {
      return std::vector<capsule::examples::ProviderBoundaryCopies>{{capsule::Provider::Reference, {}}};
    };
    std::ostringstream quiet;
    REQUIRE(capsule::examples::run_example("mlp_regression", capsule::testing::shipped(),
                                           capsule::testing::reference_handlers(), options, quiet, quiet));
    CHECK(has(quiet.str(), "\nreference boundary copies: none\n"));
    options.json = true;
    std::ostringstream json;
    REQUIRE(capsule::examples::run_example("mlp_regression", capsule::testing::shipped(),
                                           capsule::testing::reference_handlers(), options, json, json));
    CHECK(has(json.str(), R"("boundary_copies":{"reference":{}})"));
  }
}
