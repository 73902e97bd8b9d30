// SPDX-License-Identifier: Apache-2.0
// The plan report as Graphviz DOT. Every input-derived text (graph and profile names, node kinds,
// capsule names, payload values, source paths) goes through dot_escape inside a quoted string, or
// text_escape in a `//` comment; vocabulary words and colours are the program's own.
//
// A graph plan draws the graph: one node per graph node, one edge per distinct input. An op list
// states no data flow, so its drawing has one node per requested op, in the order given, and no
// edges: Graphviz sets edgeless nodes side by side in that order. Both end with a legend
// (`cluster_legend`) for the provider colours and the boundary outlines.
#include <algorithm>
#include <map>

#include "capsule/escape.hpp"
#include "capsule/text.hpp"
#include "report_internal.hpp"

namespace capsule::report_internal {
namespace {

// One colour per provider so a reader sees at a glance which code computes each node; providers
// not listed are drawn white.
const std::map<Provider, std::string_view>& provider_colours() {
  static const std::map<Provider, std::string_view> colours{
      {Provider::Reference, "#cfe8cf"}, {Provider::Torchlean, "#cfdcf5"}, {Provider::NativeCuda, "#f5e3b8"},
      {Provider::Libtorch, "#f2c7c7"},  {Provider::External, "#e0c8f0"}};
  return colours;
}

std::string_view provider_colour(Provider provider) {
  const auto it = provider_colours().find(provider);
  return it == provider_colours().end() ? "#ffffff" : it->second;
}

constexpr std::string_view kNoKernelColour = "#eeeeee";
// Trusted-external capsules get a red double border (the trust boundary); a checked capsule whose
// obligation rests on a trusted boundary by evidence gets a dashed red border.
constexpr std::string_view kTrustedExternalOutline = ", color=\"#c00000\", penwidth=2, peripheries=2";
constexpr std::string_view kBoundaryEvidenceOutline = ", color=\"#c00000\", penwidth=2, style=\"rounded,filled,dashed\"";

/// `id [label="…", attributes];` for a planned kernel; `heading` is already DOT-escaped.
std::string kernel_node(std::string_view id, const std::string& heading, const Capsule& c) {
  std::string attributes = str("fillcolor=\"", provider_colour(c.provider), "\"");
  std::string label = str(heading, "\\n", dot_escape(c.name), "\\n", to_string(c.provider), " / ", to_string(c.trust));
  const std::vector<Obligation> by_evidence = boundary_obligations(c);
  if (c.trust == Trust::TrustedExternal) {
    attributes += kTrustedExternalOutline;
    label += "\\ntrusted external boundary";
  } else if (!by_evidence.empty()) {
    attributes += kBoundaryEvidenceOutline;  // labelled checked, yet an obligation rests on a boundary
  }
  if (!by_evidence.empty()) label += str("\\ntrusted boundary evidence: ", obligation_list(by_evidence));
  return str("  ", id, " [label=\"", label, "\", ", attributes, "];\n");
}

std::string header(std::string_view name, const Profile& profile) {
  return str("digraph \"", dot_escape(name), "\" {\n",
             "  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n",
             "  label=\"", dot_escape(profile_summary(profile)), "\";\n  labelloc=t;\n");
}

/// The legend: one entry per provider drawn (in vocabulary order), the no-kernel ellipse when a
/// graph has such nodes, and both boundary outlines always, so their absence reads as "none".
std::string legend(const std::vector<Provider>& providers, bool no_kernel_nodes) {
  std::string out = "  subgraph cluster_legend {\n    label=\"legend\";\n    style=\"rounded\";\n    color=\"#999999\";\n";
  for (const Provider provider : all_values<Provider>()) {
    if (std::find(providers.begin(), providers.end(), provider) == providers.end()) continue;
    out += str("    \"legend_", to_string(provider), "\" [label=\"provider ", to_string(provider), "\", fillcolor=\"",
               provider_colour(provider), "\"];\n");
  }
  if (no_kernel_nodes) {
    out += str("    legend_no_kernel [label=\"no kernel\\n(input, const, detach)\", shape=ellipse, fillcolor=\"",
               kNoKernelColour, "\"];\n");
  }
  out += str("    legend_trusted_external [label=\"trusted external boundary\\n(trust trusted-external)\", "
             "fillcolor=\"#ffffff\"", kTrustedExternalOutline, "];\n");
  out += str("    legend_boundary_evidence [label=\"trusted boundary by evidence\\n(trust checked)\", "
             "fillcolor=\"#ffffff\"", kBoundaryEvidenceOutline, "];\n");
  return out + "  }\n";
}

std::string footer(std::span<const SourceFile> sources, const EnvironmentFingerprint& environment) {
  std::string out = "  // sources\n";
  for (const SourceFile& s : sources) out += str("  // ", text_escape(s.path), " sha256 ", text_escape(s.sha256), "\n");
  return out + environment_dot_comments(environment) + "}\n";
}

void note_provider(std::vector<Provider>& providers, Provider provider) {
  if (std::find(providers.begin(), providers.end(), provider) == providers.end()) providers.push_back(provider);
}

/// `\nshape [2, 4, 8]` when the node's payload gives a shape (the graph's own TOML text), else
/// nothing: shapes the graph does not state are not inferred.
std::string shape_line(const GraphNode& node) {
  for (const auto& [key, value] : node.payload) {
    if (key == "shape") return "\\nshape " + dot_escape(value);
  }
  return {};
}

}  // namespace

std::string plan_dot(const ResolvedProfile& resolved, std::span<const PlannedKernel> kernels,
                     const EnvironmentFingerprint& environment) {
  std::string out = header("ops", *resolved.profile);
  out += "  // an op list: one node per requested op, in the order given; no edges, as it states no data flow\n";
  std::vector<Provider> providers;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const PlannedKernel& k = kernels[i];
    note_provider(providers, k.capsule->provider);
    out += kernel_node(str("op", i), str("#", i + 1, " ", to_string(k.op)), *k.capsule);
  }
  return out + legend(providers, false) + footer(resolved.sources, environment);
}

std::string graph_dot(const GraphReportInput& input, std::span<const SourceFile> sources) {
  std::map<std::uint32_t, const PlannedNodeKernel*> planned;
  for (const PlannedNodeKernel& k : input.plan.kernels) planned[k.node_id] = &k;
  std::string out = header(input.graph.name.empty() ? "graph" : input.graph.name, *input.resolved.profile);
  std::vector<Provider> providers;
  bool no_kernel_nodes = false;
  for (const GraphNode& node : input.graph.nodes) {
    const std::string heading = dot_escape(str(node.id, " ", node.kind)) + shape_line(node);
    const auto it = planned.find(node.id);
    if (it == planned.end()) {
      no_kernel_nodes = true;
      out += str("  n", node.id, " [label=\"", heading, "\", shape=ellipse, fillcolor=\"",
                 kNoKernelColour, "\"];\n");
      continue;
    }
    note_provider(providers, it->second->capsule->provider);
    out += kernel_node(str("n", node.id), heading, *it->second->capsule);
  }
  for (const GraphNode& node : input.graph.nodes) {
    // A node may read the same input several times (attention's q, k, v); draw one edge.
    std::vector<std::uint32_t> drawn;
    for (const std::uint32_t input_id : node.inputs) {
      if (std::find(drawn.begin(), drawn.end(), input_id) != drawn.end()) continue;
      drawn.push_back(input_id);
      out += str("  n", input_id, " -> n", node.id, ";\n");
    }
  }
  return out + legend(providers, no_kernel_nodes) + footer(sources, input.environment);
}

}  // namespace capsule::report_internal
