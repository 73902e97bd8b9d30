// SPDX-License-Identifier: Apache-2.0
// What the plan report's renderers share (report.cpp: text and JSON, and the public entry points;
// report_markdown.cpp: Markdown; report_dot.cpp: Graphviz DOT). Private to the engine.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "capsule/report.hpp"

namespace capsule::report_internal {

/// Obligations of `c` that rest on trusted-boundary evidence.
std::vector<Obligation> boundary_obligations(const Capsule& c);

/// `shape, value`: the obligations' names joined by `, `.
std::string obligation_list(const std::vector<Obligation>& obligations);

/// An op-list plan as Markdown: heading, boundary lines, kernel table, contracts, sources,
/// environment.
std::string plan_markdown(const ResolvedProfile& resolved, std::span<const PlannedKernel> kernels,
                          const EnvironmentFingerprint& environment);
/// A graph plan as Markdown; `sources` include the graph file.
std::string graph_markdown(const GraphReportInput& input, std::span<const SourceFile> sources);

/// An op-list plan as DOT: one node per requested op, in the order given, and no edges.
std::string plan_dot(const ResolvedProfile& resolved, std::span<const PlannedKernel> kernels,
                     const EnvironmentFingerprint& environment);
/// A graph plan as DOT: one node per graph node, one edge per distinct input; `sources` include
/// the graph file.
std::string graph_dot(const GraphReportInput& input, std::span<const SourceFile> sources);

}  // namespace capsule::report_internal
