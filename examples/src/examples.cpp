// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <utility>

#include "capsule/escape.hpp"
#include "capsule/report.hpp"
#include "capsule/resolve.hpp"
#include "capsule/text.hpp"
#include "common.hpp"

namespace capsule::examples {
namespace {

constexpr std::array<ExampleInfo, 3> kExamples{{
    {"mlp_regression", "the 4-8-1 MLP of TorchLean §10.8 trained with Adam (lr 0.01) on a synthetic regression task",
     true},
    {"causal_attention", "TorchLean §10.15: hard-masked causal softmax, and the leak of a finite sentinel", false},
    {"cnn_classifier", "conv + relu + max pool + linear, trained with cross entropy to tell horizontal from vertical bars",
     true},
}};

/// What each provider whose capsules ran copied at its boundary during this run: the counters now
/// less the counters at the start, ops that copied nothing left out.
std::vector<ProviderBoundaryCopies> copies_of_run(const Session& session, const detail::Run& run) {
  std::vector<ProviderBoundaryCopies> added;
  if (!run.options.boundary_copies) return added;
  const std::vector<CapsuleUse> uses = session.capsules_used();
  for (ProviderBoundaryCopies now : run.options.boundary_copies()) {
    const bool used = std::any_of(uses.begin(), uses.end(),
                                  [&](const CapsuleUse& use) { return use.capsule->provider == now.provider; });
    if (!used) continue;
    ProviderBoundaryCopies delta{now.provider, {}};
    for (const auto& [op, count] : now.by_op) {
      std::uint64_t before = 0;
      for (const ProviderBoundaryCopies& start : run.copies_at_start) {
        if (start.provider != now.provider) continue;
        for (const auto& [start_op, start_count] : start.by_op) before = start_op == op ? start_count : before;
      }
      if (count > before) delta.by_op.emplace_back(op, count - before);
    }
    added.push_back(std::move(delta));
  }
  return added;
}

}  // namespace

std::span<const ExampleInfo> all_examples() { return kExamples; }

const ExampleInfo* find_example(std::string_view name) {
  for (const ExampleInfo& example : kExamples) {
    if (example.name == name) return &example;
  }
  return nullptr;
}

RuntimeStatus run_example(std::string_view name, const Workspace& workspace, const HandlerRegistry& handlers,
                          const ExampleOptions& options, std::ostream& out, std::ostream& log) {
  const ExampleInfo* example = find_example(name);
  if (example == nullptr) {
    std::vector<std::string_view> names;
    for (const ExampleInfo& e : kExamples) names.push_back(e.name);
    const std::string nearest = nearest_name(name, names);
    std::vector<std::string> all(names.begin(), names.end());
    return runtime_error(RuntimeCode::UnknownExample,
                         str("unknown example `", name, "` (examples: ", join(all, ", "), ")",
                             nearest.empty() ? "" : str("; did you mean `", nearest, "`?")));
  }
  if (options.dump_graph && !example->has_model) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("--dump-graph: example `", name, "` builds no model, so it has no graph to write"));
  }
  const detail::Run run{workspace, handlers, options, out, log,
                        options.boundary_copies ? options.boundary_copies() : std::vector<ProviderBoundaryCopies>{}};
  if (name == "mlp_regression") return detail::mlp_regression(run);
  if (name == "causal_attention") return detail::causal_attention(run);
  return detail::cnn_classifier(run);
}

namespace detail {

RuntimeResult<Session> open_session(const Run& run, std::vector<Op> preselect, bool gradients) {
  SessionOptions options;
  options.profile = run.options.profile;
  options.gradients = gradients;
  options.show_backend = run.options.show_backend;
  // The examples speak to people at a command line (`capsule run`): refusals and the backend log
  // without TorchLean's `torch:` prefixes and jargon (docs/decisions.md, "Plain words in capsule run").
  options.message_style = MessageStyle::Plain;
  options.log = &run.log;
  options.preselect = std::move(preselect);
  options.repro_dir = run.options.repro_dir;
  options.fingerprint = &run.options.environment;
  auto session = run.options.checkers != nullptr
                     ? Session::open(run.workspace, run.handlers, *run.options.checkers, options)
                     : Session::open(run.workspace, run.handlers, options);
  if (session || session.error().code != RuntimeCode::DeviceUnavailable) return session;
  // Nothing runs on a device this build cannot use, but the user still learns what would have:
  // the plan for the same ops, or the planner's refusal with every candidate and its reason.
  RuntimeError refusal = std::move(session).error();
  auto plan = plan_text(run, options.preselect);
  refusal.message += str("\n\nwhat would have run under profile `", run.options.profile,
                         "` (nothing ran: the device is unusable here):\n", plan ? *plan : plan.error().message);
  return fail(std::move(refusal));
}

RuntimeResult<std::string> plan_text(const Run& run, std::span<const Op> ops) {
  const ProfilePtr profile = run.workspace.find_profile(run.options.profile);
  if (!profile) return runtime_error(RuntimeCode::UnknownProfile, str("unknown profile `", run.options.profile, "`"));
  auto resolved = resolve_profile(run.workspace, profile);
  if (!resolved) return runtime_error(RuntimeCode::ProfileInvalid, resolved.error());
  auto plan = resolved->planner.plan_ops(ops);
  if (!plan) {
    return runtime_error(RuntimeCode::PlanningFailed,
                         plan_error_report(plan.error(), ReportFormat::Text, resolved->sources, run.options.environment));
  }
  return plan_report(*resolved, *plan, ReportFormat::Text, run.options.environment);
}

namespace {

/// One platform field of a profile's [target]: `os` or `arch`, and its value.
struct PlatformField {
  std::string_view name;
  std::string value;
};

/// What a profile's [target] declares when it names another operating system or architecture than
/// this build's: the fields it declared, and this build's values of the same fields, in the same
/// order (os, then arch). Both the run report's header line and its JSON are written from it.
struct TargetDeclaration {
  std::string profile;
  std::vector<PlatformField> declared;
  std::vector<PlatformField> this_build;
};

/// The run's profile's target declaration, or nothing when the profile declares no target or its
/// declared fields all match this build. Such a profile plans and runs here, on this platform's
/// kernels: nothing about the named platform is checked or emulated.
std::optional<TargetDeclaration> target_declaration(const Run& run) {
  const ProfilePtr profile = run.workspace.find_profile(run.options.profile);
  if (!profile || !profile->target) return std::nullopt;
  const Target& target = *profile->target;
  // Only what the profile declared: an omitted os or arch (Unknown) claims no platform.
  TargetDeclaration declaration{run.options.profile, {}, {}};
  bool differs = false;
  if (target.os != OperatingSystem::Unknown) {
    declaration.declared.push_back({"os", std::string(to_string(target.os))});
    declaration.this_build.push_back({"os", std::string(to_string(this_build_os()))});
    differs = differs || target.os != this_build_os();
  }
  if (target.arch != Architecture::Unknown) {
    declaration.declared.push_back({"arch", std::string(to_string(target.arch))});
    declaration.this_build.push_back({"arch", std::string(to_string(this_build_arch()))});
    differs = differs || target.arch != this_build_arch();
  }
  if (!differs) return std::nullopt;
  return declaration;
}

/// `macos aarch64`: the values, as the header line names a platform.
std::string platform_words(const std::vector<PlatformField>& fields) {
  std::vector<std::string> words;
  for (const PlatformField& field : fields) words.push_back(field.value);
  return join(words, " ");
}

/// The header line of the run's target declaration; empty when it has none.
std::string target_declaration_line(const Run& run) {
  const std::optional<TargetDeclaration> declaration = target_declaration(run);
  if (!declaration) return {};
  const std::string platform = platform_words(declaration->declared);
  return str("target: profile ", text_escape(declaration->profile), " declares ", platform, "; this build runs on ",
             platform_words(declaration->this_build),
             ", so the target is a declaration: the plan below runs here, and nothing about ", platform,
             " is checked or emulated\n");
}

/// `"target_declaration": {"profile": P, "declared": {"os": …, "arch": …}, "this_build": {…}}`.
void write_target_declaration_json(JsonWriter& json, const TargetDeclaration& declaration) {
  json.key("target_declaration").begin_object();
  json.field("profile", declaration.profile);
  json.key("declared").begin_object();
  for (const PlatformField& field : declaration.declared) json.field(field.name, field.value);
  json.end_object();
  json.key("this_build").begin_object();
  for (const PlatformField& field : declaration.this_build) json.field(field.name, field.value);
  json.end_object();
  json.end_object();
}

}  // namespace

RuntimeResult<std::string> report_header(const Run& run, std::string_view example, std::string_view what,
                                         std::string_view task, std::span<const Op> ops,
                                         std::string_view what_dispatches) {
  CAPSULE_TRY(const std::string report, plan_text(run, ops));
  return str("example ", example, ": ", what, " under profile ", text_escape(run.options.profile), "\n",
             target_declaration_line(run), "task: ", task, "\n\n", "plan for ", what_dispatches, ":\n", report, "\n\n");
}

RuntimeStatus dump_graph(const Run& run, const Graph& graph) {
  if (!run.options.dump_graph) return std::monostate{};
  CAPSULE_CHECK(write_graph_toml(graph, *run.options.dump_graph));
  if (!run.options.json) {
    std::size_t planned = 0;
    for (const GraphNode& node : graph.nodes) planned += node.op ? 1U : 0U;
    run.out << str("wrote graph `", text_escape(graph.name), "` (", graph.nodes.size(), " nodes, ", planned,
                   " with a kernel) to ", text_escape(run.options.dump_graph->string()), "\n");
  }
  return std::monostate{};
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  // -0.000000 reads as a sign where there is none; print the zero plainly.
  std::string text = buffer;
  if (text.front() == '-' && text.find_first_not_of("-0.") == std::string::npos) text.erase(0, 1);
  return text;
}

std::string fixed_row(std::span<const double> values, int decimals) {
  std::vector<std::string> parts;
  for (const double v : values) parts.push_back(fixed(v, decimals));
  return "[" + join(parts, ", ") + "]";
}

void Progress::update(std::int64_t step, double loss) {
  if (bar_ != nullptr) {
    constexpr std::int64_t kWidth = 30;
    const std::int64_t filled = total_ > 0 ? step * kWidth / total_ : kWidth;
    *bar_ << "\r[" << std::string(static_cast<std::size_t>(filled), '#')
         << std::string(static_cast<std::size_t>(kWidth - filled), '.') << "] step " << step << "/" << total_
         << " loss " << fixed(loss) << std::flush;
    drawn_ = true;
    return;
  }
  if (step == 1 || step == total_ || (every_ > 0 && step % every_ == 0)) {
    out_ << "step " << step << "/" << total_ << " loss " << fixed(loss) << "\n";
  }
}

void Progress::finish() {
  if (drawn_ && bar_ != nullptr) *bar_ << "\n";
  drawn_ = false;
}

double uniform(std::uint64_t& state, double lo, double hi) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return lo + (hi - lo) * (static_cast<double>(z >> 11) * 0x1.0p-53);
}

void close_json(JsonWriter& json, const Session& session, const Run& run) {
  if (const std::optional<TargetDeclaration> declaration = target_declaration(run)) {
    write_target_declaration_json(json, *declaration);
  }
  const std::vector<CapsuleUse> uses = session.capsules_used();
  json.key("capsules_used");
  write_capsules_used_json(json, uses);
  const std::vector<ProviderBoundaryCopies> copies = copies_of_run(session, run);
  if (!copies.empty()) {
    // {"<provider>": {"<op>": copies, ...}, ...}: an empty object says the provider copied nothing.
    json.key("boundary_copies").begin_object();
    for (const ProviderBoundaryCopies& provider : copies) {
      json.key(to_string(provider.provider)).begin_object();
      for (const auto& [op, count] : provider.by_op) json.field(op, static_cast<std::int64_t>(count));
      json.end_object();
    }
    json.end_object();
  }
  write_sources_json(json, session.sources());
  write_environment_json(json, run.options.environment);
  json.end_object();
}

std::string capsules_used_and_copies(const Session& session, const Run& run) {
  std::string text = capsules_used_text(session.capsules_used());
  for (const ProviderBoundaryCopies& provider : copies_of_run(session, run)) {
    std::vector<std::string> ops;
    for (const auto& [op, count] : provider.by_op) ops.push_back(str(text_escape(op), " ", count));
    text += str(to_string(provider.provider), " boundary copies: ", ops.empty() ? "none" : join(ops, ", "), "\n");
  }
  return text;
}


}  // namespace detail
}  // namespace capsule::examples
