// SPDX-License-Identifier: Apache-2.0
// `capsule plan` and `explain`: plan under a profile, and explain a choice.
#include "commands.hpp"
#include "plan_inputs.hpp"

#include "capsule/escape.hpp"
#include "capsule/json.hpp"
#include "capsule/report.hpp"

namespace capsule::cli {

int cmd_plan(const std::vector<std::string>& args, Context& ctx) {
  if (wants_help(args)) {
    ctx.out << options_for(Command::Plan) << "\nSelects one capsule per op (or graph node) and reports it. Exit 1 when some op has\n"
                          "no admissible capsule; the error lists every candidate and why it was rejected.\n";
    return kOk;
  }
  const po::variables_map vm = parse_command(Command::Plan, args, ctx);
  const ReportFormat format = choice_value<ReportFormat>(vm["format"].as<std::string>(), Command::Plan, "format",
      {ReportFormat::Text, ReportFormat::Json, ReportFormat::Markdown, ReportFormat::Dot});
  auto inputs = plan_inputs(vm, ctx, PlanTarget::OpsOrGraph);
  if (!inputs) return kUsage;
  const ResolvedProfile resolved = resolve(inputs->workspace, inputs->profile);
  if (inputs->graph) {
    auto plan = resolved.planner.plan_graph(*inputs->graph);
    if (!plan) {
      std::vector<SourceFile> sources = resolved.sources;
      sources.push_back(inputs->graph->source);
      (format == ReportFormat::Json ? ctx.out : ctx.err) << plan_error_report(plan.error(), format, sources, ctx.fingerprint, ctx.err_style);
      return kRejected;
    }
    const std::vector<KernelGroup> groups = group(*plan, inputs->profile->lowering);
    ctx.out << graph_report(GraphReportInput{resolved, *inputs->graph, *plan, groups, ctx.fingerprint}, format);
    return kOk;
  }
  auto plan = resolved.planner.plan_ops(inputs->ops);
  if (!plan) {
    (format == ReportFormat::Json ? ctx.out : ctx.err)
        << plan_error_report(plan.error(), format, resolved.sources, ctx.fingerprint, ctx.err_style);
    return kRejected;
  }
  ctx.out << plan_report(resolved, *plan, format, ctx.fingerprint);
  return kOk;
}

int cmd_explain(const std::vector<std::string>& args, Context& ctx) {
  if (wants_help(args)) {
    ctx.out << options_for(Command::Explain) << "\nLists every capsule for the op in catalog order with the planner's verdict.\n";
    return kOk;
  }
  const po::variables_map vm = parse_command(Command::Explain, args, ctx);
  if (!vm.count("profile") || !vm.count("op")) throw UsageError{"explain needs --profile NAME and --op OP"};
  const Op op = parse_flag_value<Op>(vm["op"].as<std::string>(), "--op");
  const bool json = choice_value<bool>(vm["format"].as<std::string>(), Command::Explain, "format", {false, true});
  auto workspace = load(vm, ctx, ProfileChecks::Named);
  if (!workspace) return kUsage;
  const ProfilePtr profile = find_bound_profile(*workspace, vm["profile"].as<std::string>(), ctx);
  const ResolvedProfile resolved = resolve(*workspace, profile);
  const std::vector<CandidateVerdict> verdicts = resolved.planner.explain(op);
  const Capsule* chosen = resolved.planner.chosen(op);
  if (json) {
    JsonWriter out;
    out.begin_document().field("profile", profile->name).field("op", to_string(op));
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
      const std::string status = v.chosen       ? ctx.out_style.paint(Tone::Good, "chosen")
                                 : v.admissible ? std::string("passed over")
                                                : ctx.out_style.paint(Tone::Bad, "rejected");
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
