// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the TOML loaders. Every input is read as a catalog, a profile, a graph and
// a lint configuration (the parsers must never crash, hang or leak on any bytes), and whatever parses is pushed
// through the rest of the engine:
//   - a catalog becomes a Registry and Planners under several policies; every op is planned,
//     explained, gated and reported, alone and combined with the shipped modules;
//   - a profile is resolved against the shipped catalogs and plans every op;
//   - a graph is planned under the shipped `checked_cpu` profile, grouped, gated and reported.
// Diagnostics are rendered in every format, so arbitrary bytes reach the escaping code too, and
// every rendered text must be inert (require_inert): a forged line or invalid UTF-8 is a crash.
//
// Every input also checks the nesting scan (capsule/toml_limits.hpp) against toml++, a
// differential check: whenever the scan keeps a document within the limit and toml++ reads it,
// the scan's depth D and the parsed tree's depth T must satisfy D <= T (the scan never rejects
// what toml++ accepts within the limit) and T <= 2 D (the scan never lets deeper trees through).
// A violation aborts, which libFuzzer reports as a crash.
#include <toml++/toml.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/diag_format.hpp"
#include "capsule/escape.hpp"
#include "capsule/gate.hpp"
#include "capsule/lint_config.hpp"
#include "capsule/load.hpp"
#include "capsule/planner.hpp"
#include "capsule/registry.hpp"
#include "capsule/report.hpp"
#include "capsule/resolve.hpp"
#include "capsule/toml_limits.hpp"

namespace {

using namespace capsule;

/// A fixed day, so expired-trust warnings do not depend on when the fuzzer runs.
LoadOptions fixed_day() {
  LoadOptions options;
  options.today = Date{std::chrono::year{2026}, std::chrono::month{11}, std::chrono::day{29}};
  return options;
}

/// The shipped catalogs and profiles, loaded once.
const Workspace& shipped() {
  static const Workspace workspace = load_workspace({std::filesystem::path(CAPSULE_SOURCE_DIR) / "catalogs"},
                                                    {std::filesystem::path(CAPSULE_SOURCE_DIR) / "profiles"},
                                                    fixed_day());
  return workspace;
}

/// The shipped `checked_cpu` profile, resolved once; null if the shipped data is broken.
const ResolvedProfile* checked_cpu() {
  static const std::optional<ResolvedProfile> resolved = []() -> std::optional<ResolvedProfile> {
    const ProfilePtr profile = shipped().find_profile("checked_cpu");
    if (profile == nullptr) return std::nullopt;
    auto result = resolve_profile(shipped(), profile);
    if (!result) return std::nullopt;
    return std::move(*result);
  }();
  return resolved ? &*resolved : nullptr;
}

/// Aborts (a libFuzzer crash) unless `out` is inert whatever the input was (issue 8, report
/// forgery): valid UTF-8; no control character but the newline; none of the hidden code points
/// (bidi controls, zero-width characters, escape.hpp); and no line that GitHub's runner would
/// read as a workflow command (`::` or `##[` after leading blanks), except the `::error`,
/// `::warning` and `::notice` lines of the GitHub format itself.
void require_inert(std::string_view out, bool github_commands = false) {
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < out.size();) {
    const Utf8Step step = decode_utf8(out, i);
    if (step.code_point == kInvalidUtf8) std::abort();
    const char32_t code = step.code_point;
    const std::size_t length = step.length;
    if ((code < 0x20 && code != '\n') || code == 0x7f || is_hidden_code_point(code)) std::abort();
    if (i == line_start) {
      std::size_t first = i;
      while (first < out.size() && (out[first] == ' ' || out[first] == '\t')) ++first;
      const std::string_view rest = out.substr(first);
      const bool command = rest.starts_with("::") || rest.starts_with("##[");
      const bool ours = github_commands && (rest.starts_with("::error ") || rest.starts_with("::warning ") ||
                                            rest.starts_with("::notice "));
      if (command && !ours) std::abort();
    }
    i += length;
    if (code == '\n') line_start = i;
  }
}

std::size_t sink = 0;  // keeps the optimiser from dropping rendered text
void consume(const std::string& text) {
  require_inert(text);
  sink += text.size();
}
void consume(const std::vector<std::string>& lines) {
  for (const std::string& line : lines) consume(line);
}

void render_all(const Diagnostics& diagnostics) {
  consume(render(diagnostics));
  for (const DiagFormat format : {DiagFormat::Text, DiagFormat::Json, DiagFormat::Sarif, DiagFormat::Github}) {
    const std::string out = format_diagnostics(diagnostics, format, "fuzz");
    require_inert(out, format == DiagFormat::Github);
    sink += out.size();
  }
}

/// Plans, explains, gates and reports every op under `planner`.
void exercise(const Planner& planner) {
  for (const Op op : all_values<Op>()) {
    for (const CandidateVerdict& verdict : planner.explain(op)) consume(verdict.reasons);
    auto planned = planner.plan_op(op);
    if (!planned) {
      consume(planned.error().render());
      for (const ReportFormat format : {ReportFormat::Text, ReportFormat::Json}) {
        consume(plan_error_report(planned.error(), format, {}, EnvironmentFingerprint{}));
      }
      continue;
    }
    consume(detailed_lines(*planned));
    consume(plan_rows(*planned));
    auto accepted = accept(*planned, planner.policy());
    if (!accepted) {
      for (const AcceptanceFailure& failure : accepted.error()) consume(failure.message());
    }
  }
  const auto every_op = all_values<Op>();
  const std::vector<Op> ops(every_op.begin(), every_op.end());
  auto plan = planner.plan_ops(ops);
  if (plan) {
    consume(boundary_line(plan->kernels));
    consume(distinct_capsule_names(plan->kernels));
    sink += rejected_reports(planner.policy().assurance, plan->kernels).size();
  }
}

std::vector<KernelPolicy> policies_for(const CapsuleModule& module) {
  KernelPolicy checked;  // cpu, auto, checked, torchlean-tape
  std::vector<KernelPolicy> policies{checked};
  if (module.capsules.empty()) return policies;
  const Capsule& first = module.capsules.front();
  KernelPolicy external;
  external.device = first.device;
  external.provider = ProviderPreference::prefer(first.provider);
  external.assurance = AssurancePolicy::external();
  external.vjp = first.vjp;
  policies.push_back(external);
  KernelPolicy only = external;
  only.provider = ProviderPreference::only(first.provider);
  only.assurance = AssurancePolicy::checked();
  policies.push_back(only);
  return policies;
}

Availability everything() {
  Availability availability;
  for (const Device device : all_values<Device>()) availability.devices.insert(device);
  for (const Provider provider : all_values<Provider>()) availability.providers.insert(provider);
  return availability;
}

void fuzz_catalog(std::string_view text) {
  Diagnostics diagnostics;
  auto module = parse_catalog(text, "fuzz/catalog.toml", fixed_day(), diagnostics);
  render_all(diagnostics);
  if (!module) return;
  const auto shared = std::make_shared<const CapsuleModule>(std::move(*module));
  if (auto registry = Registry::from_modules({shared})) {
    const Registry cpu_only = registry->filtered(Availability{});
    sink += cpu_only.capsules().size();
    for (const KernelPolicy& policy : policies_for(*shared)) exercise(Planner(*registry, everything(), policy));
  } else {
    consume(registry.error());
  }
  // Combined with the shipped modules, first in order (TorchLean's withCapsuleModules).
  const std::vector<ModulePtr> combined = with_capsule_modules(shipped().modules, {shared});
  consume(validate_modules(combined));
  if (auto registry = Registry::from_modules(combined)) {
    exercise(Planner(*registry, everything(), KernelPolicy{}));
  }
}

void fuzz_profile(std::string_view text) {
  Diagnostics diagnostics;
  auto profile = parse_profile(text, "fuzz/profile.toml", fixed_day(), diagnostics);
  render_all(diagnostics);
  if (!profile) return;
  const auto shared = std::make_shared<const Profile>(std::move(*profile));
  consume(profile_summary(*shared));
  auto resolved = resolve_profile(shipped(), shared);
  if (!resolved) {
    consume(resolved.error());
    return;
  }
  exercise(resolved->planner);
  consume(sources_block(resolved->sources));
}

void fuzz_graph(std::string_view text) {
  Diagnostics diagnostics;
  auto graph = parse_graph(text, "fuzz/input.graph.toml", diagnostics);
  render_all(diagnostics);
  if (!graph) return;
  render_all(check_well_formed(*graph));
  const ResolvedProfile* resolved = checked_cpu();
  if (resolved == nullptr) return;
  auto plan = resolved->planner.plan_graph(*graph);
  if (!plan) {
    consume(plan.error().render());
    consume(plan_error_report(plan.error(), ReportFormat::Json, resolved->sources, EnvironmentFingerprint{}));
    return;
  }
  for (const PlannedNodeKernel& kernel : plan->kernels) consume(node_line(*graph, kernel));
  for (const Lowering lowering : {Lowering::Coalesced, Lowering::Singleton}) {
    const std::vector<KernelGroup> groups = group(*plan, lowering);
    for (const KernelGroup& g : groups) consume(group_line(g));
    for (const ReportFormat format : {ReportFormat::Text, ReportFormat::Json, ReportFormat::Markdown, ReportFormat::Dot}) {
      const EnvironmentFingerprint environment;
      consume(graph_report(GraphReportInput{*resolved, *graph, *plan, groups, environment}, format));
    }
    auto accepted = accept_graph(*plan, resolved->planner.policy(), lowering);
    if (accepted) {
      sink += accepted->node_ids().size() + accepted->capsule_names().size();
    } else {
      for (const AcceptanceFailure& failure : accepted.error().failures) consume(failure.message());
    }
  }
}

/// The lint configuration parser; what it accepts is applied to every diagnostic code, whose
/// rendering must stay inert.
void fuzz_lint_config(std::string_view text) {
  auto overrides = parse_lint_config(text, "fuzz/capsule-lint.toml");
  if (!overrides) {
    render_all(overrides.error());
    return;
  }
  // Applied to one finding of every rule: what the overrides leave is well-formed. It is checked,
  // not rendered: a SARIF log of every rule carries all their help (about 57 KB), and rendering
  // fixed findings adds nothing the loaders' diagnostics do not already exercise.
  Diagnostics findings;
  for (const LintRule& rule : kLintRules) {
    findings.push_back(Diagnostic{rule.severity, rule.code, SourceLoc{"fuzz/a.toml", 1, 1}, "finding", {}, {}});
  }
  for (const Diagnostic& d : apply_lint_rules(std::move(findings), *overrides)) {
    const LintRule* rule = find_lint_rule(d.code);
    if (rule == nullptr || (rule->blocks_loading && d.severity != Severity::Error)) std::abort();
  }
}

/// Depth of a parsed tree as the scan counts it: root 0, each table entry or element one deeper.
std::size_t tree_depth(const toml::node& node, std::size_t level) {
  std::size_t deepest = level;
  if (const auto* table = node.as_table()) {
    for (auto&& [key, value] : *table) deepest = std::max(deepest, tree_depth(value, level + 1));
  } else if (const auto* array = node.as_array()) {
    for (const toml::node& element : *array) deepest = std::max(deepest, tree_depth(element, level + 1));
  }
  return deepest;
}

void check_nesting_scan(std::string_view text) {
  if (text.size() > detail::kMaxTomlBytes) return;
  const detail::NestingScan scan = detail::scan_nesting(text);
  if (scan.exceeded) return;  // toml++ must not see it: the loaders reject it first
  toml::table parsed;
  try {
    parsed = toml::parse(text);
  } catch (const toml::parse_error&) {
    return;
  }
  const std::size_t tree = tree_depth(parsed, 0);
  if (scan.depth > tree || tree > 2 * scan.depth) {
    std::fprintf(stderr, "nesting scan disagrees with toml++: scan depth %zu, tree depth %zu\n", scan.depth, tree);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_nesting_scan(text);
  fuzz_catalog(text);
  fuzz_profile(text);
  fuzz_graph(text);
  fuzz_lint_config(text);
  return 0;
}
