// SPDX-License-Identifier: Apache-2.0
// `capsule plan`, `check` and `explain`: plan under a profile, gate, and explain a choice.
#include "commands.hpp"

#include "capsule/escape.hpp"
#include "capsule/gate.hpp"
#include "capsule/json.hpp"
#include "capsule/report.hpp"

namespace capsule::cli {
namespace {

struct PlanInputs {
  Workspace workspace;
  ProfilePtr profile;
  std::vector<Op> ops;
  std::optional<Graph> graph;
};

po::options_description plan_options(const std::string& caption) {
  po::options_description options(caption);
  options.add(data_options());
  options.add_options()("profile", po::value<std::string>(), "profile name, or a profile file path")
      ("ops", po::value<std::string>(), "comma-separated ops, e.g. matmul,relu")
      ("graph", po::value<std::string>(), "an IR graph file (*.graph.toml)")("help,h", "show this help");
  return options;
}

std::optional<PlanInputs> plan_inputs(const po::variables_map& vm, Context& ctx, bool allow_graph) {
  if (!vm.count("profile")) throw UsageError{"--profile NAME|FILE is required"};
  const bool has_ops = vm.count("ops") != 0;
  const bool has_graph = vm.count("graph") != 0;
  if (has_ops == has_graph && allow_graph) throw UsageError{"give exactly one of --ops a,b,c or --graph FILE"};
  if (!has_ops && !allow_graph) throw UsageError{"--ops a,b,c is required"};
  PlanInputs inputs;
  if (has_ops) inputs.ops = parse_ops(vm["ops"].as<std::string>());
  auto workspace = load(vm, ctx, ProfileChecks::Named);
  if (!workspace) return std::nullopt;
  inputs.workspace = std::move(*workspace);
  inputs.profile = find_profile(inputs.workspace, vm["profile"].as<std::string>(), ctx);
  if (has_graph) {
    Diagnostics diagnostics;
    inputs.graph = load_graph(vm["graph"].as<std::string>(), diagnostics);
    ctx.err << render(diagnostics);
    if (!inputs.graph) return std::nullopt;
  }
  return inputs;
}

}  // namespace

int cmd_plan(const std::vector<std::string>& args, Context& ctx) {
  po::options_description options =
      plan_options("capsule plan --profile NAME|FILE (--ops a,b,c | --graph FILE) [--format text|json|markdown|dot]");
  options.add_options()("format", po::value<std::string>()->default_value("text"), "text | json | markdown | dot");
  if (wants_help(args)) {
    ctx.out << options << "\nSelects one capsule per op (or graph node) and reports it. Exit 1 when some op has\n"
                          "no admissible capsule; the error lists every candidate and why it was rejected.\n";
    return kOk;
  }
  const po::variables_map vm = parse_args(args, options);
  const ReportFormat format = parse_choice<ReportFormat>(vm["format"].as<std::string>(), "--format",
      {{"text", ReportFormat::Text}, {"json", ReportFormat::Json}, {"markdown", ReportFormat::Markdown}, {"dot", ReportFormat::Dot}});
  if (format == ReportFormat::Dot && !vm.count("graph")) throw UsageError{"--format dot draws graphs; use it with --graph"};
  auto inputs = plan_inputs(vm, ctx, true);
  if (!inputs) return kUsage;
  const ResolvedProfile resolved = resolve(inputs->workspace, inputs->profile);
  if (inputs->graph) {
    auto plan = resolved.planner.plan_graph(*inputs->graph);
    if (!plan) {
      std::vector<SourceFile> sources = resolved.sources;
      sources.push_back(inputs->graph->source);
      (format == ReportFormat::Json ? ctx.out : ctx.err) << plan_error_report(plan.error(), format, sources, ctx.fingerprint);
      return kRejected;
    }
    const std::vector<KernelGroup> groups = group(*plan, inputs->profile->lowering);
    ctx.out << graph_report(GraphReportInput{resolved, *inputs->graph, *plan, groups, ctx.fingerprint}, format);
    return kOk;
  }
  auto plan = resolved.planner.plan_ops(inputs->ops);
  if (!plan) {
    (format == ReportFormat::Json ? ctx.out : ctx.err)
        << plan_error_report(plan.error(), format, resolved.sources, ctx.fingerprint);
    return kRejected;
  }
  ctx.out << plan_report(resolved, *plan, format, ctx.fingerprint);
  return kOk;
}

int cmd_check(const std::vector<std::string>& args, Context& ctx) {
  po::options_description options =
      plan_options("capsule check --profile NAME (--ops a,b,c | --graph FILE) [--assurance checked|external]");
  options.add_options()("assurance", po::value<std::string>(), "gate under this assurance instead of the profile's");
  if (wants_help(args)) {
    ctx.out << options << "\nPlans under the profile, then runs the acceptance gate: admissibility and the evidence\n"
                          "of every obligation under the assurance policy. Exit 1 when anything is rejected.\n";
    return kOk;
  }
  const po::variables_map vm = parse_args(args, options);
  auto inputs = plan_inputs(vm, ctx, true);
  if (!inputs) return kUsage;
  const ResolvedProfile resolved = resolve(inputs->workspace, inputs->profile);
  KernelPolicy gate_policy = inputs->profile->policy;
  if (vm.count("assurance")) {
    gate_policy.assurance = parse_choice<AssurancePolicy>(vm["assurance"].as<std::string>(), "--assurance",
        {{"checked", AssurancePolicy::checked()}, {"external", AssurancePolicy::external()}});
  }
  const std::string label = text_escape(gate_policy.assurance.label());

  std::vector<SourceFile> sources = resolved.sources;
  if (inputs->graph) sources.push_back(inputs->graph->source);
  std::vector<PlannedKernel> kernels;
  std::optional<GraphKernelPlan> graph_plan;
  if (inputs->graph) {
    auto plan = resolved.planner.plan_graph(*inputs->graph);
    if (!plan) {
      ctx.err << plan_error_report(plan.error(), ReportFormat::Text, sources, ctx.fingerprint);
      return kRejected;
    }
    graph_plan = std::move(*plan);
  } else {
    auto plan = resolved.planner.plan_ops(inputs->ops);
    if (!plan) {
      ctx.err << plan_error_report(plan.error(), ReportFormat::Text, sources, ctx.fingerprint);
      return kRejected;
    }
    kernels = std::move(plan->kernels);
  }

  if (graph_plan) {
    auto accepted = accept_graph(*graph_plan, gate_policy, inputs->profile->lowering);
    const std::vector<KernelGroup>& groups = accepted ? accepted->groups() : accepted.error().groups;
    ctx.out << str("kernels ", graph_plan->kernels.size(), ", groups ", groups.size(), "\n");
    for (const KernelGroup& g : groups) ctx.out << group_line(g) << "\n";
    if (accepted) {
      const auto names = distinct_capsule_names(group_kernels(groups));
      ctx.out << str("accepted under ", label, "\n", groups.size(), " rows, distinct capsules:\n");
      for (const std::string& name : names) ctx.out << "  " << text_escape(name) << "\n";
      ctx.out << sources_block(sources) << "\n" << environment_block(ctx.fingerprint) << "\n";
      return kOk;
    }
    ctx.out << str("rejected under ", label, ":\n");
    for (const AcceptanceFailure& f : accepted.error().failures) ctx.out << "  " << text_escape(f.message()) << "\n";
    ctx.out << sources_block(sources) << "\n" << environment_block(ctx.fingerprint) << "\n";
    return kRejected;
  }

  // Seed 002's contract-check lines first, then any other gate failure, then the verdict.
  bool rejected = false;
  for (const ObligationReport& report : rejected_reports(gate_policy.assurance, kernels)) {
    ctx.out << str(label, ": rejected ", text_escape(report.capsule->name), " ", to_string(report.obligation), "\n  ",
                   text_escape(evidence_label(report.descriptor().evidence)), "\n");
    rejected = true;
  }
  for (const PlannedKernel& k : kernels) {
    auto verdict = accept(k, gate_policy);
    if (verdict) continue;
    rejected = true;
    for (const AcceptanceFailure& f : verdict.error()) {
      if (f.kind != AcceptanceFailure::Kind::EvidenceRejected) {
        ctx.out << str(label, ": gate rejected ", text_escape(k.capsule->name), ": ", text_escape(f.message()), "\n");
      }
    }
  }
  if (!rejected) ctx.out << label << ": accepted\n";
  ctx.out << sources_block(sources) << "\n" << environment_block(ctx.fingerprint) << "\n";
  return rejected ? kRejected : kOk;
}

int cmd_explain(const std::vector<std::string>& args, Context& ctx) {
  po::options_description options("capsule explain --profile NAME --op OP [--format text|json]");
  options.add(data_options());
  options.add_options()("profile", po::value<std::string>(), "profile name, or a profile file path")
      ("op", po::value<std::string>(), "the op to explain")
      ("format", po::value<std::string>()->default_value("text"), "text | json")("help,h", "show this help");
  if (wants_help(args)) {
    ctx.out << options << "\nLists every capsule for the op in catalog order with the planner's verdict.\n";
    return kOk;
  }
  const po::variables_map vm = parse_args(args, options);
  if (!vm.count("profile") || !vm.count("op")) throw UsageError{"explain needs --profile NAME and --op OP"};
  const Op op = parse_flag_value<Op>(vm["op"].as<std::string>(), "--op");
  const bool json = parse_choice<bool>(vm["format"].as<std::string>(), "--format", {{"text", false}, {"json", true}});
  auto workspace = load(vm, ctx, ProfileChecks::Named);
  if (!workspace) return kUsage;
  const ProfilePtr profile = find_profile(*workspace, vm["profile"].as<std::string>(), ctx);
  const ResolvedProfile resolved = resolve(*workspace, profile);
  const std::vector<CandidateVerdict> verdicts = resolved.planner.explain(op);
  const Capsule* chosen = resolved.planner.chosen(op);
  if (json) {
    JsonWriter out;
    out.begin_object().field("profile", profile->name).field("op", to_string(op));
    out.key("chosen");
    if (chosen != nullptr) out.value(chosen->name);
    else out.null();
    out.key("candidates").begin_array();
    for (const CandidateVerdict& v : verdicts) {
      out.begin_object().field("capsule", v.capsule->name).field("provider", to_string(v.capsule->provider))
          .field("device", to_string(v.capsule->device)).field("trust", to_string(v.capsule->trust))
          .field("vjp", to_string(v.capsule->vjp)).field("available", v.available).field("admissible", v.admissible)
          .field("chosen", v.chosen).string_array("reasons", v.reasons).string_array("gate_notes", v.gate_notes)
          .end_object();
    }
    out.end_array();
    write_sources_json(out, resolved.sources);
    write_environment_json(out, ctx.fingerprint);
    out.end_object();
    ctx.out << out.str() << "\n";
  } else {
    ctx.out << profile_summary(*profile) << " provider=" << text_escape(profile->policy.provider.label()) << "\n";
    ctx.out << str("op ", to_string(op), ": ", verdicts.size(), " candidate", verdicts.size() == 1 ? "" : "s",
                   " in catalog order\n");
    for (const CandidateVerdict& v : verdicts) {
      const std::string status = v.chosen ? "chosen" : v.admissible ? "passed over" : "rejected";
      ctx.out << str("  ", text_escape(v.capsule->name), " (", to_string(v.capsule->provider), "/",
                     to_string(v.capsule->device), ", ", to_string(v.capsule->trust), ", vjp ", to_string(v.capsule->vjp), "): ", status, "\n");
      for (const std::string& reason : v.reasons) ctx.out << "    - " << text_escape(reason) << "\n";
      for (const std::string& note : v.gate_notes) ctx.out << "    ! gate: " << text_escape(note) << "\n";
    }
    if (chosen != nullptr) {
      ctx.out << str("result: ", to_string(op), " -> ", text_escape(chosen->name), "\n");
    } else {
      ctx.out << str("result: no admissible kernel capsule for op ", to_string(op), " on device ",
                     to_string(profile->policy.device), "\n");
    }
    ctx.out << sources_block(resolved.sources) << "\n" << environment_block(ctx.fingerprint) << "\n";
  }
  return chosen != nullptr ? kOk : kRejected;
}

}  // namespace capsule::cli
