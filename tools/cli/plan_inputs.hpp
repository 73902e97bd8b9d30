// SPDX-License-Identifier: Apache-2.0
// What `capsule plan` and `capsule check` plan: a profile and ops, a graph, or (check only) the
// profile's whole selection.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli_support.hpp"

namespace capsule::cli {

struct PlanInputs {
  Workspace workspace;
  ProfilePtr profile;
  std::vector<Op> ops;
  std::optional<Graph> graph;
};

/// What a command plans: ops or a graph (plan), or also the profile's whole selection (check).
enum class PlanTarget { OpsOrGraph, OpsGraphOrProfile };

/// Reads the options, loads the workspace, the profile and any graph; nullopt (exit 2) when a
/// file fails to load (its diagnostics are printed).
std::optional<PlanInputs> plan_inputs(const po::variables_map& vm, Context& ctx, PlanTarget target);

}  // namespace capsule::cli
