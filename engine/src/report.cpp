// SPDX-License-Identifier: Apache-2.0
#include "capsule/report.hpp"

#include <algorithm>

#include "capsule/escape.hpp"
#include "capsule/json.hpp"
#include "capsule/text.hpp"
#include "report_internal.hpp"

namespace capsule {
namespace {

void write_evidence(JsonWriter& json, ClaimKind claim, const Evidence& evidence) {
  json.key("evidence").begin_object().field("kind", to_string(evidence.kind));
  if (evidence.kind == EvidenceKind::TrustedBoundary) {
    json.field("reason", evidence.reason);
    if (!evidence.owner.empty()) json.field("owner", evidence.owner);
    if (evidence.expires) json.field("expires", format_date(*evidence.expires));
  } else if (evidence.kind != EvidenceKind::NotApplicable && evidence.kind != EvidenceKind::Missing) {
    json.field("name", evidence.name);
  }
  if (evidence.kind == EvidenceKind::Checker) json.field("coverage", to_string(evidence.coverage));
  json.field("disposition", to_string(evidence_disposition(claim, evidence)));
  json.field("label", evidence_label(evidence)).end_object();
}

void write_kernel(JsonWriter& json, Op op, const Capsule& c, const std::vector<std::uint32_t>* node_ids) {
  json.begin_object()
      .field("op", to_string(op))
      .field("capsule", c.name)
      .field("provider", to_string(c.provider))
      .field("device", to_string(c.device))
      .field("trust", to_string(c.trust))
      .field("vjp", to_string(c.vjp))
      .field("reduction", to_string(c.numerical.reduction));
  json.key("contracts").begin_object();
  for (const Obligation obligation : all_values<Obligation>()) {
    const ContractDescriptor& d = c.contract(obligation);
    json.key(to_string(obligation)).begin_object().field("claim", to_string(d.claim.kind)).field("label", claim_label(d.claim));
    write_evidence(json, d.claim.kind, d.evidence);
    json.end_object();
  }
  json.end_object();
  if (node_ids != nullptr) {
    json.key("node_ids").begin_array();
    for (const std::uint32_t id : *node_ids) json.value(static_cast<std::int64_t>(id));
    json.end_array();
  }
  json.end_object();
}

void write_profile(JsonWriter& json, const Profile& profile) {
  json.key("profile")
      .begin_object()
      .field("name", profile.name)
      .field("device", to_string(profile.policy.device))
      .field("assurance", profile.policy.assurance.label())
      .field("vjp", to_string(profile.policy.vjp))
      .field("provider", profile.policy.provider.label())
      .field("lowering", to_string(profile.lowering))
      .field("recheck", profile.recheck.label())
      .field("path", profile.source.path)
      .field("sha256", profile.source.sha256)
      .end_object();
}

void write_catalogs(JsonWriter& json, std::span<const SourceFile> sources) {
  json.key("catalogs").begin_array();
  // sources[0] is the profile file, reported inside "profile".
  for (std::size_t i = 1; i < sources.size(); ++i) {
    json.begin_object().field("path", sources[i].path).field("sha256", sources[i].sha256).end_object();
  }
  json.end_array();
}

void write_trusted_ops(JsonWriter& json, std::span<const PlannedKernel> kernels) {
  json.key("trusted_external_ops").begin_array();
  for (const Op op : trusted_external_ops(kernels)) json.value(to_string(op));
  json.end_array();
  json.key("trusted_boundary_evidence").begin_array();
  for (const EvidenceBoundary& b : trusted_boundary_evidence(kernels)) {
    json.begin_object().field("op", to_string(b.op)).key("obligations").begin_array();
    for (const Obligation o : b.obligations) json.value(to_string(o));
    json.end_array().end_object();
  }
  json.end_array();
}

}  // namespace

namespace report_internal {

std::vector<Obligation> boundary_obligations(const Capsule& c) {
  std::vector<Obligation> out;
  for (const Obligation o : all_values<Obligation>()) {
    if (c.contracts[static_cast<std::size_t>(o)].evidence.kind == EvidenceKind::TrustedBoundary) out.push_back(o);
  }
  return out;
}

std::string obligation_list(const std::vector<Obligation>& obligations) {
  std::vector<std::string> names;
  for (const Obligation o : obligations) names.emplace_back(to_string(o));
  return join(names, ", ");
}

}  // namespace report_internal

using report_internal::boundary_obligations;
using report_internal::obligation_list;

std::vector<EvidenceBoundary> trusted_boundary_evidence(std::span<const PlannedKernel> kernels) {
  std::vector<EvidenceBoundary> out;
  for (const PlannedKernel& k : kernels) {
    std::vector<Obligation> obligations = boundary_obligations(*k.capsule);
    if (obligations.empty()) continue;
    if (std::any_of(out.begin(), out.end(), [&](const EvidenceBoundary& b) { return b.op == k.op; })) continue;
    out.push_back(EvidenceBoundary{k.op, std::move(obligations)});
  }
  return out;
}

std::string boundary_evidence_line(std::span<const PlannedKernel> kernels) {
  const std::vector<EvidenceBoundary> found = trusted_boundary_evidence(kernels);
  if (found.empty()) return "trusted boundaries by evidence: none";
  std::vector<std::string> names;
  for (const EvidenceBoundary& b : found) names.push_back(str(to_string(b.op), " (", obligation_list(b.obligations), ")"));
  return "trusted boundaries by evidence: " + join(names, ", ");
}

std::string profile_summary(const Profile& profile) {
  return str("profile=", text_escape(profile.name), " device=", to_string(profile.policy.device),
             " assurance=", profile.policy.assurance.label(), " vjp=", to_string(profile.policy.vjp));
}

std::string boundary_line(std::span<const PlannedKernel> kernels) {
  const std::vector<Op> ops = trusted_external_ops(kernels);
  if (ops.empty()) return "trusted external boundary: none";
  std::vector<std::string> names;
  for (const Op op : ops) names.emplace_back(to_string(op));
  return "trusted external boundary: " + join(names, ", ");
}

std::vector<std::string> detailed_lines(const PlannedKernel& kernel) {
  const Capsule& c = *kernel.capsule;
  std::vector<std::string> lines;
  lines.push_back(str("  ", to_string(kernel.op), ": ", text_escape(c.name), " provider=", to_string(c.provider),
                      " trust=", to_string(c.trust), " vjp=", to_string(c.vjp),
                      " reduction=", to_string(c.numerical.reduction)));
  for (const Obligation obligation : all_values<Obligation>()) {
    const ContractDescriptor& d = c.contract(obligation);
    lines.push_back(str("    ", to_string(obligation), ": ", text_escape(claim_label(d.claim)), "; ",
                        text_escape(evidence_label(d.evidence))));
  }
  return lines;
}

std::vector<std::string> plan_rows(const PlannedKernel& kernel) {
  const Capsule& c = *kernel.capsule;
  return {str(to_string(kernel.op), " -> ", text_escape(c.name)),
          str("  provider ", to_string(c.provider), ", trust ", to_string(c.trust)),
          str("  reduction ", to_string(c.numerical.reduction)),
          str("  value: ", text_escape(evidence_label(c.contract(Obligation::Value).evidence)))};
}

std::string group_line(const KernelGroup& group) {
  std::vector<std::string> ids;
  for (const std::uint32_t id : group.node_ids) ids.push_back(std::to_string(id));
  return str("  #[", join(ids, ", "), "] ", to_string(group.op), " ", text_escape(group.capsule->name));
}

std::string node_line(const Graph& graph, const PlannedNodeKernel& kernel) {
  const GraphNode& node = graph.nodes[kernel.node_index];
  std::string out = str("  ", node.id, " ", text_escape(node.kind));
  for (const auto& [key, value] : node.payload) out += str(" ", text_escape(key), "=", text_escape(value));
  return out + " -> " + text_escape(kernel.capsule->name);
}

void write_sources_json(JsonWriter& json, std::span<const SourceFile> sources) {
  json.key("sources").begin_array();
  for (const SourceFile& file : sources) json.begin_object().field("path", file.path).field("sha256", file.sha256).end_object();
  json.end_array();
}

std::string sources_block(std::span<const SourceFile> sources) {
  std::string out = "sources:";
  for (const SourceFile& s : sources) out += str("\n  ", text_escape(s.path), " sha256 ", text_escape(s.sha256));
  return out;
}

std::string plan_report(const ResolvedProfile& resolved, const KernelPlan& plan, ReportFormat format,
                        const EnvironmentFingerprint& environment) {
  const Profile& profile = *resolved.profile;
  std::span<const PlannedKernel> kernels = plan.kernels;
  switch (format) {
    case ReportFormat::Json: {
      JsonWriter json;
      json.begin_document();
      write_profile(json, profile);
      json.key("kernels").begin_array();
      for (const PlannedKernel& k : kernels) write_kernel(json, k.op, *k.capsule, nullptr);
      json.end_array();
      write_trusted_ops(json, kernels);
      write_catalogs(json, resolved.sources);
      write_environment_json(json, environment);
      json.end_object();
      return json.str() + "\n";
    }
    case ReportFormat::Markdown:
      return report_internal::plan_markdown(resolved, kernels, environment);
    case ReportFormat::Dot:
      return report_internal::plan_dot(resolved, kernels, environment);
    case ReportFormat::Text: {
      std::string out = profile_summary(profile) + "\n" + boundary_line(kernels) + "\n" + boundary_evidence_line(kernels);
      for (const PlannedKernel& k : kernels) {
        for (const std::string& line : detailed_lines(k)) out += "\n" + line;
      }
      return out + "\n" + sources_block(resolved.sources) + "\n" + environment_block(environment) + "\n";
    }
  }
  return {};
}

std::string graph_report(const GraphReportInput& input, ReportFormat format) {
  const Profile& profile = *input.resolved.profile;
  const std::vector<PlannedKernel> group_plan = group_kernels(input.groups);
  std::vector<SourceFile> sources = input.resolved.sources;
  if (!input.graph.source.path.empty()) sources.push_back(input.graph.source);
  switch (format) {
    case ReportFormat::Text: {
      std::string out = profile_summary(profile) + "\n" + boundary_line(group_plan) + "\n" +
                        boundary_evidence_line(group_plan) + "\n";
      out += str("nodes ", input.plan.node_count, ", planned ", input.plan.kernels.size(), "\n");
      for (const PlannedNodeKernel& k : input.plan.kernels) out += node_line(input.graph, k) + "\n";
      out += str("kernels ", input.plan.kernels.size(), ", groups ", input.groups.size(), "\n");
      for (const KernelGroup& g : input.groups) out += group_line(g) + "\n";
      return out + sources_block(sources) + "\n" + environment_block(input.environment) + "\n";
    }
    case ReportFormat::Json: {
      JsonWriter json;
      json.begin_document();
      write_profile(json, profile);
      json.key("graph")
          .begin_object()
          .field("name", input.graph.name)
          .field("path", input.graph.source.path)
          .field("sha256", input.graph.source.sha256)
          .field("nodes", static_cast<std::int64_t>(input.plan.node_count))
          .field("planned", static_cast<std::int64_t>(input.plan.kernels.size()))
          .end_object();
      json.key("nodes").begin_array();
      for (const PlannedNodeKernel& k : input.plan.kernels) {
        const GraphNode& node = input.graph.nodes[k.node_index];
        json.begin_object().field("id", static_cast<std::int64_t>(node.id)).field("kind", node.kind);
        json.key("payload").begin_object();
        for (const auto& [key, value] : node.payload) json.field(key, value);
        json.end_object().field("op", to_string(k.op)).field("capsule", k.capsule->name).end_object();
      }
      json.end_array();
      json.key("kernels").begin_array();
      for (const KernelGroup& g : input.groups) write_kernel(json, g.op, *g.capsule, &g.node_ids);
      json.end_array();
      write_trusted_ops(json, group_plan);
      write_catalogs(json, input.resolved.sources);
      write_environment_json(json, input.environment);
      json.end_object();
      return json.str() + "\n";
    }
    case ReportFormat::Markdown:
      return report_internal::graph_markdown(input, sources);
    case ReportFormat::Dot:
      return report_internal::graph_dot(input, sources);
  }
  return {};
}

std::string plan_error_report(const PlanError& error, ReportFormat format, std::span<const SourceFile> sources,
                              const EnvironmentFingerprint& environment, const TextStyle& text_style) {
  if (format != ReportFormat::Json) {
    // Markdown and DOT never carry colour.
    return error.render(format == ReportFormat::Text ? text_style : TextStyle{}) + "\n" + sources_block(sources) + "\n" + environment_block(environment) + "\n";
  }
  JsonWriter json;
  json.begin_document().key("error").begin_object().field("code", to_string(error.code)).field("message", error.message);
  json.field("op", to_string(error.op));
  if (error.node_id) json.field("node_id", static_cast<std::int64_t>(*error.node_id));
  json.key("candidates").begin_array();
  for (const CandidateVerdict& v : error.candidates) {
    json.begin_object().field("capsule", v.capsule->name).string_array("reasons", v.reasons).end_object();
  }
  json.end_array().end_object();
  write_sources_json(json, sources);
  write_environment_json(json, environment);
  json.end_object();
  return json.str() + "\n";
}

}  // namespace capsule
