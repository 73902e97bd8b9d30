// SPDX-License-Identifier: Apache-2.0
// Reports (§6; README.md#command-line): TorchLean's text line formats, plus JSON, Markdown and Graphviz DOT.
// Every report ends with, or carries, the path and SHA-256 of each profile and catalog file it
// was computed from, and next to them the environment fingerprint it was computed in
// (capsule/fingerprint.hpp). The engine takes the fingerprint as data: the program collects it
// (capsule/build_info.hpp), tests pass a fixed one.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "capsule/environment_report.hpp"
#include "capsule/fingerprint.hpp"
#include "capsule/gate.hpp"
#include "capsule/json.hpp"
#include "capsule/resolve.hpp"

namespace capsule {

/// Output formats of `plan`. DOT draws a graph as its nodes and edges, an op list as one node per
/// op in the order given with no edges (an op list states no data flow), each with a legend.
enum class ReportFormat : std::uint8_t { Text, Json, Markdown, Dot };

/// `profile={name} device={cli} assurance={label} vjp={vjp}` (§4.3).
std::string profile_summary(const Profile& profile);
/// `trusted external boundary: none` or `trusted external boundary: op1, op2`.
std::string boundary_line(std::span<const PlannedKernel> kernels);

/// A planned op whose capsule rests an obligation on trusted-boundary evidence, whatever its
/// trust label says (a `checked` capsule can still rest its value on a boundary).
struct EvidenceBoundary {
  Op op;
  std::vector<Obligation> obligations;
};
std::vector<EvidenceBoundary> trusted_boundary_evidence(std::span<const PlannedKernel> kernels);

/// `trusted boundaries by evidence: none` or `trusted boundaries by evidence: op (value, vjp), ...`:
/// the boundary line above reads the trust label (as TorchLean's does); this one reads evidence.
std::string boundary_evidence_line(std::span<const PlannedKernel> kernels);
/// The kernel row and its four contract lines (§6 detailedReportLines).
std::vector<std::string> detailed_lines(const PlannedKernel& kernel);
/// Seed 002's plan rows: `{op} -> {capsule}`, provider/trust, reduction, value evidence.
std::vector<std::string> plan_rows(const PlannedKernel& kernel);
/// One `  #[ids] op capsule` line per group.
std::string group_line(const KernelGroup& group);
/// `  {id} {kind} {payload} -> {capsule}`.
std::string node_line(const Graph& graph, const PlannedNodeKernel& kernel);

/// Text: summary line, boundary line, detailed lines, then the sources (planReport + sources) and
/// the environment.
std::string plan_report(const ResolvedProfile& resolved, const KernelPlan& plan, ReportFormat format,
                        const EnvironmentFingerprint& environment);

/// Everything a graph report shows: the profile and its sources, the graph, its node plan and
/// its audit groups.
struct GraphReportInput {
  const ResolvedProfile& resolved;
  const Graph& graph;
  const GraphKernelPlan& plan;
  std::span<const KernelGroup> groups;
  const EnvironmentFingerprint& environment;
};
/// Text: summary and boundary lines, `nodes N, planned M`, one line per planned node, the groups,
/// then the sources (the graph file included) and the environment.
std::string graph_report(const GraphReportInput& input, ReportFormat format);

/// A planning failure in the requested format (JSON: `{"error": {...}}`), naming the files the
/// failed decision was made from and the environment. `text_style` colours the text format only.
std::string plan_error_report(const PlanError& error, ReportFormat format, std::span<const SourceFile> sources,
                              const EnvironmentFingerprint& environment, const TextStyle& text_style = {});

/// Writes `"sources": [{"path", "sha256"}, ...]` into an open JSON object.
void write_sources_json(JsonWriter& json, std::span<const SourceFile> sources);

/// `sources:` followed by one `  {path} sha256 {hex}` line per file.
std::string sources_block(std::span<const SourceFile> sources);


}  // namespace capsule
