// SPDX-License-Identifier: Apache-2.0
// capsule_bench: planning and loading throughput (Google Benchmark), then the project's speed
// targets checked in the same process with a best-of-N timing loop:
//   - plan 1,000,000 ops under checked_cpu at >= 5 million ops/s;
//   - plan time with +10,000 capsules for other ops within 1.5x of +100 (index by op);
//   - load_catalog of a 10,000-capsule catalog within 3x of toml::parse_file on the same file.
// Extra flags (besides --benchmark_*):
//   --capsule_targets_only   skip the Google Benchmark runs, check the targets only
//   --capsule_no_targets     run the benchmarks only
//   --capsule_strict         exit 1 when a target is missed
#include <benchmark/benchmark.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/gate.hpp"
#include "capsule/load.hpp"
#include "capsule/resolve.hpp"
#include "synthetic_catalog.hpp"
#include "workloads.hpp"

#ifndef CAPSULE_SOURCE_DIR
#error "CAPSULE_SOURCE_DIR must name the source tree (catalogs/ and profiles/)"
#endif
#ifndef CAPSULE_BENCH_BUILD_TYPE
#define CAPSULE_BENCH_BUILD_TYPE "unknown"
#endif

namespace fs = std::filesystem;
using namespace capsule;

namespace {

constexpr std::size_t kOps = 1'000'000;
constexpr std::size_t kNodes = 1'000'000;
constexpr std::size_t kLoadCapsules = 10'000;
constexpr std::size_t kExtraSmall = 100;
constexpr std::size_t kExtraLarge = 10'000;

[[noreturn]] void die(const std::string& message) {
  std::cerr << "capsule_bench: " << message << "\n";
  std::exit(2);
}

// ---- Fixtures: built once, on first use -----------------------------------------------------

struct CheckedCpu {
  Workspace workspace;
  std::optional<ResolvedProfile> resolved;
};

const CheckedCpu& checked_cpu() {
  static const CheckedCpu env = [] {
    CheckedCpu e;
    const fs::path source = CAPSULE_SOURCE_DIR;
    e.workspace = load_workspace({source / "catalogs"}, {source / "profiles"});
    if (has_errors(e.workspace.diagnostics)) die("shipped catalogs failed to load:\n" + render(e.workspace.diagnostics));
    const ProfilePtr profile = e.workspace.find_profile("checked_cpu");
    if (!profile) die("profile checked_cpu not found under " + (source / "profiles").string());
    auto resolved = resolve_profile(e.workspace, profile);
    if (!resolved) die("checked_cpu does not resolve: " + resolved.error());
    e.resolved.emplace(std::move(*resolved));
    return e;
  }();
  return env;
}

const Planner& checked_cpu_planner() { return checked_cpu().resolved->planner; }

const std::vector<Op>& op_mix() {
  static const std::vector<Op> ops = [] {
    std::vector<Op> out = bench::checked_cpu_op_mix(kOps);
    for (const Op op : out) {
      if (checked_cpu_planner().chosen(op) == nullptr) die(std::string("checked_cpu cannot plan ") + std::string(to_string(op)));
    }
    // The measured call must do the real work: one kernel per op, each with its op's capsule.
    auto plan = checked_cpu_planner().plan_ops(out);
    if (!plan || plan->kernels.size() != out.size() || plan->kernels.back().op != out.back() ||
        plan->kernels.back().capsule != checked_cpu_planner().chosen(out.back())) {
      die("plan_ops did not return one kernel per op");
    }
    return out;
  }();
  return ops;
}

const Graph& mlp_graph() {
  static const Graph graph = bench::mlp_graph(kNodes);
  return graph;
}

const GraphKernelPlan& mlp_plan() {
  static const GraphKernelPlan plan = [] {
    auto result = checked_cpu_planner().plan_graph(mlp_graph());
    if (!result) die("planning the MLP graph failed: " + result.error().render());
    if (result->node_count != kNodes || result->kernels.empty()) die("the MLP graph plan is incomplete");
    return std::move(*result);
  }();
  return plan;
}

const GraphKernelPlan& relu_chain_plan() {
  static const GraphKernelPlan plan =
      bench::uniform_plan(Op::Relu, checked_cpu_planner().chosen(Op::Relu), kNodes);
  return plan;
}

/// A registry holding the capsules of the MLP ops (from checked_cpu's modules) plus `extra`
/// synthetic capsules for every other op, placed first in catalog order: the worst case for a
/// planner that scans instead of indexing.
struct PaddedRegistry {
  std::optional<Planner> planner;
  std::vector<ModulePtr> modules;
};

std::vector<ModulePtr> padded_modules(std::size_t extra) {
  const std::vector<Op> own = bench::mlp_ops();
  bench::SyntheticCatalogOptions options;
  options.capsules = extra;
  options.module = "synthetic_other_ops";
  options.ops = bench::ops_except(own);
  const std::string text = bench::synthetic_catalog(options);
  Diagnostics diagnostics;
  auto module = parse_catalog(text, "<synthetic " + std::to_string(extra) + ">", LoadOptions{}, diagnostics);
  if (!module || !diagnostics.empty()) die("generated catalog does not load cleanly:\n" + render(diagnostics));
  std::vector<ModulePtr> modules{std::make_shared<const CapsuleModule>(std::move(*module))};
  for (ModulePtr& m : bench::restrict_to_ops(checked_cpu_planner().registry().modules(), own)) {
    modules.push_back(std::move(m));
  }
  return modules;
}

Planner make_planner(std::vector<ModulePtr> modules) {
  auto registry = Registry::from_modules(std::move(modules));
  if (!registry) die("padded registry is invalid: " + registry.error());
  const Profile& profile = *checked_cpu().resolved->profile;
  return Planner(std::move(*registry), profile.availability, profile.policy);
}

const PaddedRegistry& padded(std::size_t extra) {
  static std::map<std::size_t, std::unique_ptr<PaddedRegistry>> cache;
  auto& slot = cache[extra];
  if (!slot) {
    slot = std::make_unique<PaddedRegistry>();
    slot->modules = padded_modules(extra);
    slot->planner.emplace(make_planner(slot->modules));
  }
  return *slot;
}

const std::vector<Op>& mlp_op_list() {
  static const std::vector<Op> ops = bench::op_list(bench::mlp_ops(), kOps);
  return ops;
}

/// The 10,000-capsule catalog, written once to a private temporary directory that is removed
/// at exit. Built in place (never copied), so only one object owns the directory.
struct CatalogFile {
  fs::path dir;
  fs::path file;
  std::size_t bytes = 0;

  CatalogFile() {
    dir = fs::temp_directory_path() / ("capsule_bench_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    file = dir / "synthetic_10000.toml";
    bench::SyntheticCatalogOptions options;
    options.capsules = kLoadCapsules;
    const std::string text = bench::synthetic_catalog(options);
    std::ofstream(file, std::ios::binary) << text;
    bytes = text.size();
    Diagnostics diagnostics;
    if (!load_catalog(file, LoadOptions{}, diagnostics) || !diagnostics.empty()) {
      die("generated catalog does not load cleanly:\n" + render(diagnostics));
    }
  }
  CatalogFile(const CatalogFile&) = delete;
  CatalogFile& operator=(const CatalogFile&) = delete;
  ~CatalogFile() {
    std::error_code error;
    fs::remove_all(dir, error);
  }
};

const CatalogFile& catalog_file() {
  static const CatalogFile catalog;
  return catalog;
}

// ---- Google Benchmark programs -------------------------------------------------------------

/// `count` items (or bytes) per iteration, over every iteration run.
std::int64_t per_run(const benchmark::State& state, std::size_t count) {
  return state.iterations() * static_cast<std::int64_t>(count);
}

void BM_PlanOps_CheckedCpu(benchmark::State& state) {
  const Planner& planner = checked_cpu_planner();
  const std::vector<Op>& ops = op_mix();
  for (auto _ : state) {
    auto plan = planner.plan_ops(ops);
    if (!plan) {
      state.SkipWithError("plan_ops failed");
      break;
    }
    benchmark::DoNotOptimize(plan->kernels.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(per_run(state, ops.size()));
  state.counters["ops"] = static_cast<double>(ops.size());
}
BENCHMARK(BM_PlanOps_CheckedCpu)->Unit(benchmark::kMillisecond)->MinTime(0.5);

void BM_PlanGraph_Mlp(benchmark::State& state) {
  const Planner& planner = checked_cpu_planner();
  const Graph& graph = mlp_graph();
  std::size_t kernels = 0;
  for (auto _ : state) {
    auto plan = planner.plan_graph(graph);
    if (!plan) {
      state.SkipWithError("plan_graph failed");
      break;
    }
    kernels = plan->kernels.size();
    benchmark::DoNotOptimize(plan->kernels.data());
  }
  state.SetItemsProcessed(per_run(state, graph.nodes.size()));
  state.counters["nodes"] = static_cast<double>(graph.nodes.size());
  state.counters["kernels"] = static_cast<double>(kernels);
}
BENCHMARK(BM_PlanGraph_Mlp)->Unit(benchmark::kMillisecond)->MinTime(0.5);

// The well-formedness check plan_graph runs first, alone.
void BM_CheckWellFormed_Mlp(benchmark::State& state) {
  const Graph& graph = mlp_graph();
  for (auto _ : state) {
    Diagnostics problems = check_well_formed(graph);
    benchmark::DoNotOptimize(problems.data());
  }
  state.SetItemsProcessed(per_run(state, graph.nodes.size()));
}
BENCHMARK(BM_CheckWellFormed_Mlp)->Unit(benchmark::kMillisecond)->MinTime(0.3);

void run_coalesce(benchmark::State& state, const GraphKernelPlan& plan) {
  std::size_t groups = 0;
  for (auto _ : state) {
    std::vector<KernelGroup> result = coalesce(plan);
    groups = result.size();
    benchmark::DoNotOptimize(result.data());
  }
  state.SetItemsProcessed(per_run(state, plan.kernels.size()));
  state.counters["kernels"] = static_cast<double>(plan.kernels.size());
  state.counters["groups"] = static_cast<double>(groups);
}

// MLP plan: neighbours differ, so nearly every kernel starts a group.
void BM_Coalesce_Mlp(benchmark::State& state) { run_coalesce(state, mlp_plan()); }
BENCHMARK(BM_Coalesce_Mlp)->Unit(benchmark::kMillisecond)->MinTime(0.3);

// 1,000,000 relu kernels with one capsule: everything merges into one group.
void BM_Coalesce_ReluChain(benchmark::State& state) { run_coalesce(state, relu_chain_plan()); }
BENCHMARK(BM_Coalesce_ReluChain)->Unit(benchmark::kMillisecond)->MinTime(0.3);

// Index by op: the same 1M MLP op list against a registry padded with N capsules of other ops.
void BM_PlanOps_ExtraCapsules(benchmark::State& state) {
  const auto extra = static_cast<std::size_t>(state.range(0));
  const Planner& planner = *padded(extra).planner;
  const std::vector<Op>& ops = mlp_op_list();
  for (auto _ : state) {
    auto plan = planner.plan_ops(ops);
    if (!plan) {
      state.SkipWithError("plan_ops failed");
      break;
    }
    benchmark::DoNotOptimize(plan->kernels.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(per_run(state, ops.size()));
  state.counters["registry_capsules"] = static_cast<double>(planner.registry().capsules().size());
}
BENCHMARK(BM_PlanOps_ExtraCapsules)->Arg(kExtraSmall)->Arg(kExtraLarge)->Unit(benchmark::kMillisecond)->MinTime(0.5);

// What a padded registry costs once: validation, indexing, and one choice per op.
void BM_BuildPlanner_ExtraCapsules(benchmark::State& state) {
  const auto extra = static_cast<std::size_t>(state.range(0));
  const std::vector<ModulePtr>& modules = padded(extra).modules;
  for (auto _ : state) {
    Planner planner = make_planner(modules);
    benchmark::DoNotOptimize(&planner);
  }
  state.counters["registry_capsules"] = static_cast<double>(padded(extra).planner->registry().capsules().size());
}
BENCHMARK(BM_BuildPlanner_ExtraCapsules)->Arg(kExtraSmall)->Arg(kExtraLarge)->Unit(benchmark::kMicrosecond)->MinTime(0.3);

void BM_LoadCatalog_10k(benchmark::State& state) {
  const CatalogFile& catalog = catalog_file();
  for (auto _ : state) {
    Diagnostics diagnostics;
    auto module = load_catalog(catalog.file, LoadOptions{}, diagnostics);
    if (!module) {
      state.SkipWithError("load_catalog failed");
      break;
    }
    benchmark::DoNotOptimize(module->capsules.data());
  }
  state.SetItemsProcessed(per_run(state, kLoadCapsules));
  state.SetBytesProcessed(per_run(state, catalog.bytes));
}
BENCHMARK(BM_LoadCatalog_10k)->Unit(benchmark::kMillisecond)->MinTime(0.5);

void BM_TomlParseFile_10k(benchmark::State& state) {
  const CatalogFile& catalog = catalog_file();
  for (auto _ : state) {
    toml::table table = toml::parse_file(catalog.file.string());
    benchmark::DoNotOptimize(&table);
  }
  state.SetItemsProcessed(per_run(state, kLoadCapsules));
  state.SetBytesProcessed(per_run(state, catalog.bytes));
}
BENCHMARK(BM_TomlParseFile_10k)->Unit(benchmark::kMillisecond)->MinTime(0.5);

// ---- Targets: best-of-N wall time in this process ---------------------------------------------

using Clock = std::chrono::steady_clock;

template <class F>
double seconds(F&& f) {
  const auto start = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string millis(double s) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f ms", s * 1e3);
  return buffer;
}

struct Verdicts {
  int missed = 0;
  const char* mark(bool pass) {
    if (!pass) ++missed;
    return pass ? "PASS" : "MISS";
  }
};

int check_targets() {
  Verdicts verdicts;
  std::printf("\n== capsule targets: best of N wall-clock runs in this process (build type %s%s) ==\n",
              CAPSULE_BENCH_BUILD_TYPE,
#ifdef NDEBUG
              ""
#else
              "; assertions ON, numbers are not representative"
#endif
  );

  // (a) plan_ops under checked_cpu.
  {
    const Planner& planner = checked_cpu_planner();
    const std::vector<Op>& ops = op_mix();
    double best = 1e30;
    for (int run = 0; run < 9; ++run) {
      best = std::min(best, seconds([&] {
                        auto plan = planner.plan_ops(ops);
                        benchmark::DoNotOptimize(plan->kernels.data());
                      }));
    }
    const double rate = static_cast<double>(ops.size()) / best;
    std::printf("plan_ops checked_cpu, %zu ops: %s = %.1f M ops/s (target >= 5 M ops/s): %s\n", ops.size(),
                millis(best).c_str(), rate / 1e6, verdicts.mark(rate >= 5e6));
  }

  // (b) plan_graph and coalescing: reported, no target. Each measured in its own loop: heap
  // state left by one (777,777 freed groups) would otherwise tax the next.
  {
    const Planner& planner = checked_cpu_planner();
    const Graph& graph = mlp_graph();
    double plan_best = 1e30, mlp_best = 1e30, relu_best = 1e30;
    std::size_t mlp_groups = 0;
    for (int run = 0; run < 5; ++run) {
      plan_best = std::min(plan_best, seconds([&] {
                             auto plan = planner.plan_graph(graph);
                             benchmark::DoNotOptimize(plan->kernels.data());
                           }));
    }
    for (int run = 0; run < 5; ++run) {
      mlp_best = std::min(mlp_best, seconds([&] {
                            auto groups = coalesce(mlp_plan());
                            mlp_groups = groups.size();
                            benchmark::DoNotOptimize(groups.data());
                          }));
    }
    for (int run = 0; run < 5; ++run) {
      relu_best = std::min(relu_best, seconds([&] {
                             auto groups = coalesce(relu_chain_plan());
                             benchmark::DoNotOptimize(groups.data());
                           }));
    }
    std::printf("plan_graph MLP, %zu nodes (%zu kernels): %s = %.1f M nodes/s (no target)\n", graph.nodes.size(),
                mlp_plan().kernels.size(), millis(plan_best).c_str(), static_cast<double>(graph.nodes.size()) / plan_best / 1e6);
    std::printf("coalesce MLP plan, %zu kernels -> %zu groups: %s = %.1f M kernels/s (no target)\n",
                mlp_plan().kernels.size(), mlp_groups, millis(mlp_best).c_str(),
                static_cast<double>(mlp_plan().kernels.size()) / mlp_best / 1e6);
    std::printf("coalesce relu chain, %zu kernels -> 1 group: %s = %.1f M kernels/s (no target)\n",
                relu_chain_plan().kernels.size(), millis(relu_best).c_str(),
                static_cast<double>(relu_chain_plan().kernels.size()) / relu_best / 1e6);
  }

  // (c) index by op: interleaved so drift hits both sides alike.
  {
    const Planner& small = *padded(kExtraSmall).planner;
    const Planner& large = *padded(kExtraLarge).planner;
    const std::vector<Op>& ops = mlp_op_list();
    double small_best = 1e30, large_best = 1e30;
    for (int run = 0; run < 11; ++run) {
      small_best = std::min(small_best, seconds([&] {
                              auto plan = small.plan_ops(ops);
                              benchmark::DoNotOptimize(plan->kernels.data());
                            }));
      large_best = std::min(large_best, seconds([&] {
                              auto plan = large.plan_ops(ops);
                              benchmark::DoNotOptimize(plan->kernels.data());
                            }));
    }
    const double ratio = large_best / small_best;
    std::printf("ratio index-by-op time(+%zu)/time(+%zu) = %.2fx (target <= 1.5x): %s  [%zu ops: +%zu capsules %s, +%zu capsules %s]\n",
                kExtraLarge, kExtraSmall, ratio, verdicts.mark(ratio <= 1.5), ops.size(), kExtraSmall,
                millis(small_best).c_str(), kExtraLarge, millis(large_best).c_str());
  }

  // (d) load_catalog against toml::parse_file on the same file, interleaved.
  {
    const CatalogFile& catalog = catalog_file();
    double load_best = 1e30, parse_best = 1e30;
    for (int run = 0; run < 7; ++run) {
      load_best = std::min(load_best, seconds([&] {
                             Diagnostics diagnostics;
                             auto module = load_catalog(catalog.file, LoadOptions{}, diagnostics);
                             if (!module) die("load_catalog failed");
                             benchmark::DoNotOptimize(module->capsules.data());
                           }));
      parse_best = std::min(parse_best, seconds([&] {
                              toml::table table = toml::parse_file(catalog.file.string());
                              benchmark::DoNotOptimize(&table);
                            }));
    }
    const double ratio = load_best / parse_best;
    std::printf("ratio load/parse = %.2fx (target <= 3x): %s  [%zu capsules, %.1f MB: load_catalog %s, toml::parse_file %s]\n",
                ratio, verdicts.mark(ratio <= 3.0), kLoadCapsules, static_cast<double>(catalog.bytes) / 1e6,
                millis(load_best).c_str(), millis(parse_best).c_str());
  }

  std::printf("targets: %s\n", verdicts.missed == 0 ? "all met" : (std::to_string(verdicts.missed) + " missed").c_str());
  std::fflush(stdout);
  return verdicts.missed;
}

}  // namespace

int main(int argc, char** argv) {
  bool targets = true;
  bool benchmarks = true;
  bool strict = false;
  bool listing = false;
  // Take our flags out before Google Benchmark sees the rest.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--capsule_targets_only") {
      benchmarks = false;
    } else if (arg == "--capsule_no_targets") {
      targets = false;
    } else if (arg == "--capsule_strict") {
      strict = true;
    } else {
      if (arg.starts_with("--benchmark_list_tests")) listing = true;
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (benchmarks) benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (listing || !targets) return 0;
  const int missed = check_targets();
  return strict && missed != 0 ? 1 : 0;
}
