// SPDX-License-Identifier: Apache-2.0
#include "plan_inputs.hpp"

#include "linked_checkers.hpp"

namespace capsule::cli {

po::options_description plan_options(const std::string& caption) {
  po::options_description options(caption);
  options.add(data_options());
  options.add_options()("profile", po::value<std::string>(), "profile name, or a profile file path")
      ("ops", po::value<std::string>(), "comma-separated ops, e.g. matmul,relu")
      ("graph", po::value<std::string>(), "an IR graph file (*.graph.toml)")("help,h", "show this help");
  return options;
}

std::optional<PlanInputs> plan_inputs(const po::variables_map& vm, Context& ctx, PlanTarget target) {
  if (!vm.count("profile")) throw UsageError{"--profile NAME|FILE is required"};
  const bool has_ops = vm.count("ops") != 0;
  const bool has_graph = vm.count("graph") != 0;
  if (has_ops && has_graph) throw UsageError{"give exactly one of --ops a,b,c or --graph FILE"};
  if (!has_ops && !has_graph && target == PlanTarget::OpsOrGraph) {
    throw UsageError{"give exactly one of --ops a,b,c or --graph FILE"};
  }
  PlanInputs inputs;
  if (has_ops) inputs.ops = parse_ops(vm["ops"].as<std::string>());
  auto workspace = load(vm, ctx, ProfileChecks::Named);
  if (!workspace) return std::nullopt;
  inputs.workspace = std::move(*workspace);
  // The profile first: a profile file loads its `with_catalogs` modules into the workspace, and
  // those must be bound too.
  inputs.profile = find_profile(inputs.workspace, vm["profile"].as<std::string>(), ctx);
  // The gate judges checker evidence by the checkers this program registers, never by the
  // catalog's word alone (capsule/known_checker.hpp).
  bind_known_checkers(inputs.workspace, linked_known_checkers());
  // Binding replaces a profile whose modules it rebinds by a copy: work under that copy.
  if (ProfilePtr bound = inputs.workspace.find_profile(inputs.profile->name)) inputs.profile = std::move(bound);
  if (has_graph) {
    Diagnostics diagnostics;
    inputs.graph = load_graph(vm["graph"].as<std::string>(), diagnostics);
    ctx.err << render(diagnostics);
    if (!inputs.graph) return std::nullopt;
  }
  return inputs;
}


}  // namespace capsule::cli
