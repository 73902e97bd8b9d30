// SPDX-License-Identifier: Apache-2.0
// `capsule check`: plan under a profile, run the acceptance gate, and with --ledger require
// that evidence passed on this build.
#include <algorithm>

#include "capsule/escape.hpp"
#include "capsule/evidence_ledger.hpp"
#include "capsule/gate.hpp"
#include "capsule/report.hpp"
#include "commands.hpp"
#include "ledger_options.hpp"
#include "plan_inputs.hpp"

namespace capsule::cli {

namespace {

/// The ops `capsule check --profile P` gates when given neither --ops nor --graph: every op some
/// capsule of the profile's modules declares on the profile's device. `elsewhere` gets the ops
/// that have capsules only on other devices (they are listed, not failed).
std::vector<Op> profile_ops(const ResolvedProfile& resolved, Device device, std::vector<Op>& elsewhere) {
  std::vector<Op> ops;
  for (const Op op : all_values<Op>()) {
    bool on_device = false;
    bool any = false;
    for (const CandidateVerdict& v : resolved.planner.explain(op)) {
      any = true;
      on_device |= v.capsule->device == device;
    }
    if (on_device) ops.push_back(op);
    else if (any) elsewhere.push_back(op);
  }
  return ops;
}

/// Prints every ledger-backed obligation of `kernels` with its verdict; returns true when one
/// has no passing entry for this build on its device.
bool report_ledger(const EvidenceLedger& ledger, std::span<const PlannedKernel> kernels, const std::string& label,
                   Context& ctx) {
  ctx.out << ledger_summary_line(ledger) << "\n";
  std::size_t passed = 0;
  std::vector<const LedgerRejection*> rejections;
  const std::vector<LedgerRejection> verdicts = ledger_verdicts(ledger, ctx.fingerprint, kernels);
  for (const LedgerRejection& v : verdicts) {
    if (v.verdict.status != LedgerStatus::Passed) {
      rejections.push_back(&v);
      continue;
    }
    ++passed;
    ctx.out << text_escape(str("  ", v.capsule->name, " ", to_string(v.obligation), ": ", v.verdict.reason)) << "\n";
  }
  for (const LedgerRejection* r : rejections) {
    ctx.out << str(label, ": ledger ", ctx.out_style.paint(Tone::Bad, "rejected"), " ", text_escape(r->capsule->name), " ", to_string(r->obligation), "\n  ",
                   text_escape(r->verdict.reason), "\n");
  }
  ctx.out << str("ledger: ", passed, " obligation", passed == 1 ? "" : "s", " passed on this build, ",
                 rejections.size(), " without a passing entry\n");
  return !rejections.empty();
}

/// `LABEL: gate failures by class: tested 2, trusted 1`, then one line per class naming its
/// obligations (`  tested: reference.relu value, reference.relu vjp`).
std::string gate_failure_lines(const std::string& label, std::span<const GateFailure> failures) {
  std::string out = str(label, ": gate failures by class: ", gate_failure_summary(failures), "\n");
  for (const GateFailure& failure : failures) {
    std::vector<std::string> items;
    for (const ObligationReport& r : failure.reports) {
      items.push_back(str(text_escape(r.capsule->name), " ", to_string(r.obligation)));
    }
    out += str("  ", to_string(failure.kind), ": ", join(items, ", "), "\n");
  }
  return out;
}

}  // namespace

int cmd_check(const std::vector<std::string>& args, Context& ctx) {
  if (wants_help(args)) {
    ctx.out << options_for(Command::Check)
            << "\nPlans under the profile, then runs the acceptance gate: admissibility and the evidence\n"
               "of every obligation under the assurance policy. Without --ops or --graph it gates every op\n"
               "the profile's modules declare a capsule for on its device. With --ledger, every test-suite\n"
               "and fuzz-oracle evidence of the planned capsules must also have a passing ledger entry for\n"
               "this build on the capsule's device; evidence that never ran here is rejected as \"not run\n"
               "here\". Exit 1 when anything is rejected, 2 when a file fails to load.\n";
    return kOk;
  }
  const po::variables_map vm = parse_command(Command::Check, args, ctx);
  if (vm.count("ops") && vm.count("graph")) throw UsageError{"give at most one of --ops a,b,c or --graph FILE"};
  const bool whole_profile = !vm.count("ops") && !vm.count("graph");
  auto inputs = plan_inputs(vm, ctx, PlanTarget::OpsGraphOrProfile);
  if (!inputs) return kUsage;
  const std::optional<EvidenceLedger> ledger = load_ledgers(vm, ctx);
  const ResolvedProfile resolved = resolve(inputs->workspace, inputs->profile);
  KernelPolicy gate_policy = inputs->profile->policy;
  if (vm.count("assurance")) {
    // The command table lists kAssurancePresets as the flag's choices.
    std::vector<std::pair<std::string_view, AssurancePolicy>> presets;
    for (const std::string& name : flag_spec(Command::Check, "assurance").choices) {
      presets.emplace_back(name, *assurance_preset(name));
    }
    gate_policy.assurance = parse_choice<AssurancePolicy>(vm["assurance"].as<std::string>(), "--assurance", presets);
  }
  const std::string label = text_escape(gate_policy.assurance.label());

  std::vector<SourceFile> sources = resolved.sources;
  if (inputs->graph) sources.push_back(inputs->graph->source);
  std::vector<PlannedKernel> kernels;
  std::optional<GraphKernelPlan> graph_plan;
  if (whole_profile) {
    std::vector<Op> elsewhere;
    inputs->ops = profile_ops(resolved, inputs->profile->policy.device, elsewhere);
    ctx.out << str("checking every op the profile's modules declare on ", to_string(inputs->profile->policy.device),
                   ": ", inputs->ops.size(), " ops\n");
    if (!elsewhere.empty()) {
      std::vector<std::string> names;
      for (const Op op : elsewhere) names.emplace_back(to_string(op));
      ctx.out << str("not checked (capsules only on other devices): ", join(names, ", "), "\n");
    }
  }
  if (inputs->graph) {
    auto plan = resolved.planner.plan_graph(*inputs->graph);
    if (!plan) {
      ctx.err << plan_error_report(plan.error(), ReportFormat::Text, sources, ctx.fingerprint, ctx.err_style);
      return kRejected;
    }
    graph_plan = std::move(*plan);
  } else {
    auto plan = resolved.planner.plan_ops(inputs->ops);
    if (!plan) {
      ctx.err << plan_error_report(plan.error(), ReportFormat::Text, sources, ctx.fingerprint, ctx.err_style);
      return kRejected;
    }
    kernels = std::move(plan->kernels);
  }

  if (graph_plan) {
    auto accepted = accept_graph(*graph_plan, gate_policy, inputs->profile->lowering);
    const std::vector<KernelGroup>& groups = accepted ? accepted->groups() : accepted.error().groups;
    ctx.out << str("kernels ", graph_plan->kernels.size(), ", groups ", groups.size(), "\n");
    for (const KernelGroup& g : groups) ctx.out << group_line(g) << "\n";
    bool rejected = !accepted;
    if (accepted) {
      const auto names = distinct_capsule_names(group_kernels(groups));
      ctx.out << str(ctx.out_style.paint(Tone::Good, "accepted"), " under ", label, "\n", groups.size(),
                     " rows, distinct capsules:\n");
      for (const std::string& name : names) ctx.out << "  " << text_escape(name) << "\n";
    } else {
      ctx.out << str(ctx.out_style.paint(Tone::Bad, "rejected"), " under ", label, ":\n");
      for (const AcceptanceFailure& f : accepted.error().failures) ctx.out << "  " << text_escape(f.message()) << "\n";
      const std::vector<GateFailure> failures = gate_failures(gate_policy.assurance, group_kernels(groups));
      if (!failures.empty()) ctx.out << gate_failure_lines(label, failures);
    }
    if (ledger) rejected |= report_ledger(*ledger, group_kernels(groups), label, ctx);
    ctx.out << sources_block(sources) << "\n" << environment_block(ctx.fingerprint) << "\n";
    return rejected ? kRejected : kOk;
  }

  // Seed 002's contract-check lines first (its exact text), grouped by TorchLean's failure class
  // in its fixed order (missing, guarded, tested, trusted, fuzzed); then the classes, each with
  // its obligations; then any other gate failure; then the verdict.
  bool rejected = false;
  const std::vector<GateFailure> failures = gate_failures(gate_policy.assurance, kernels);
  for (const GateFailure& failure : failures) {
    for (const ObligationReport& report : failure.reports) {
      ctx.out << str(label, ": ", ctx.out_style.paint(Tone::Bad, "rejected"), " ", text_escape(report.capsule->name), " ", to_string(report.obligation), "\n  ",
                     text_escape(evidence_label(report.descriptor().evidence)), "\n");
      rejected = true;
    }
  }
  if (!failures.empty()) ctx.out << gate_failure_lines(label, failures);
  for (const PlannedKernel& k : kernels) {
    auto verdict = accept(k, gate_policy);
    if (verdict) continue;
    rejected = true;
    for (const AcceptanceFailure& f : verdict.error()) {
      if (f.kind != AcceptanceFailure::Kind::EvidenceRejected) {
        ctx.out << str(label, ": gate ", ctx.out_style.paint(Tone::Bad, "rejected"), " ", text_escape(k.capsule->name), ": ", text_escape(f.message()), "\n");
      }
    }
  }
  // The verdict comes last, after the ledger, so "accepted" is never followed by a rejection.
  const bool gate_rejected = rejected;
  if (ledger && report_ledger(*ledger, kernels, label, ctx)) rejected = true;
  if (!rejected) ctx.out << label << ": " << ctx.out_style.paint(Tone::Good, "accepted") << "\n";
  else if (!gate_rejected) ctx.out << label << ": " << ctx.out_style.paint(Tone::Bad, "rejected") << " by the evidence ledger\n";
  ctx.out << sources_block(sources) << "\n" << environment_block(ctx.fingerprint) << "\n";
  return rejected ? kRejected : kOk;
}

}  // namespace capsule::cli
