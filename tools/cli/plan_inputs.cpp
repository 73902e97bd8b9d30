// SPDX-License-Identifier: Apache-2.0
#include "plan_inputs.hpp"

namespace capsule::cli {

std::optional<PlanInputs> plan_inputs(const po::variables_map& vm, Context& ctx, PlanTarget target) {
  if (!vm.count("profile")) throw UsageError{"--profile NAME|FILE is required"};
  const bool has_ops = vm.count("ops") != 0;
  const bool has_graph = vm.count("graph") != 0;
  if (has_ops && has_graph) throw UsageError{"give exactly one of --ops a,b,c or --graph FILE"};
  if (!has_ops && !has_graph && target == PlanTarget::OpsOrGraph) {
    throw UsageError{"give exactly one of --ops a,b,c or --graph FILE"};
  }
  if (has_graph && vm["graph"].as<std::string>() == kStdinPath && vm["profile"].as<std::string>() == kStdinPath) {
    throw UsageError{"--profile - and --graph - both read standard input; give at most one of them as -"};
  }
  PlanInputs inputs;
  if (has_ops) inputs.ops = parse_ops(vm["ops"].as<std::string>());
  auto workspace = load(vm, ctx, ProfileChecks::Named);
  if (!workspace) return std::nullopt;
  inputs.workspace = std::move(*workspace);
  inputs.profile = find_bound_profile(inputs.workspace, vm["profile"].as<std::string>(), ctx);
  if (has_graph) {
    Diagnostics diagnostics;
    inputs.graph = load_graph(vm["graph"].as<std::string>(), diagnostics);
    ctx.err << render(diagnostics, ctx.err_style);
    if (!inputs.graph) return std::nullopt;
  }
  return inputs;
}

}  // namespace capsule::cli
