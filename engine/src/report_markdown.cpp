// SPDX-License-Identifier: Apache-2.0
// The plan report as Markdown, for a pull-request comment or a job summary. Every table cell of
// input text goes through markdown_cell and every name through markdown_code, the functions the
// trust diff's Markdown uses (capsule/escape.hpp), so a reason, owner, summary or file name can
// neither open an HTML tag nor split a cell. The contracts are a table too, not a fenced block of
// text lines: a fence would carry the input's `<`, `&` and backticks through raw, safe only for as
// long as every renderer honours the fence.
#include "capsule/escape.hpp"
#include "capsule/text.hpp"
#include "report_internal.hpp"

namespace capsule::report_internal {
namespace {

std::string markdown_sources(std::span<const SourceFile> sources) {
  std::string out = "\n**Sources**\n\n| file | sha256 |\n|---|---|\n";
  for (const SourceFile& s : sources) out += str("| ", markdown_code(s.path), " | ", markdown_code(s.sha256), " |\n");
  return out;
}

std::string trust_cell(const Capsule& c) {
  const MarkdownLine line{std::string(to_string(c.trust)), c.trust == Trust::TrustedExternal};
  return markdown_cell(std::span<const MarkdownLine>(&line, 1));
}

std::string markdown_kernel_table(std::span<const PlannedKernel> kernels,
                                  const std::vector<std::vector<std::uint32_t>>* node_ids) {
  // A graph's table leads with a nodes column; the other columns are the same.
  constexpr std::string_view kColumns =
      "| op | capsule | provider | trust | vjp | reduction | value evidence | value disposition |\n";
  constexpr std::string_view kDelimiters = "|---|---|---|---|---|---|---|---|\n";
  std::string out = node_ids != nullptr ? str("| nodes ", kColumns, "|---", kDelimiters) : str(kColumns, kDelimiters);
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const Capsule& c = *kernels[i].capsule;
    if (node_ids != nullptr) {
      std::vector<std::string> ids;
      for (const std::uint32_t id : (*node_ids)[i]) ids.push_back(std::to_string(id));
      out += str("| ", join(ids, ", "), " ");
    }
    const Evidence& value = c.contract(Obligation::Value).evidence;
    out += str("| ", to_string(kernels[i].op), " | ", markdown_code(c.name), " | ", to_string(c.provider), " | ",
               trust_cell(c), " | ", to_string(c.vjp), " | ", to_string(c.numerical.reduction), " | ",
               markdown_cell(evidence_label(value)), " | ",
               to_string(evidence_disposition(ClaimKind::ValueRefinement, value)), " |\n");
  }
  return out;
}

/// One row per kernel and obligation: the claim, its evidence and the evidence's disposition.
std::string markdown_contracts(std::span<const PlannedKernel> kernels) {
  std::string out = "\n<details><summary>Contracts</summary>\n\n"
                    "| op | capsule | obligation | claim | evidence | disposition |\n|---|---|---|---|---|---|\n";
  for (const PlannedKernel& k : kernels) {
    for (const Obligation obligation : all_values<Obligation>()) {
      const ContractDescriptor& d = k.capsule->contract(obligation);
      out += str("| ", to_string(k.op), " | ", markdown_code(k.capsule->name), " | ", to_string(obligation), " | ",
                 markdown_cell(claim_label(d.claim)), " | ", markdown_cell(evidence_label(d.evidence)), " | ",
                 to_string(evidence_disposition(d.claim.kind, d.evidence)), " |\n");
    }
  }
  return out + "\n</details>\n";
}

std::string boundary_markdown(std::span<const PlannedKernel> kernels) {
  const std::vector<Op> ops = trusted_external_ops(kernels);
  if (ops.empty()) return "**Trusted external boundary:** none\n";
  std::vector<std::string> names;
  for (const Op op : ops) names.push_back(str("`", to_string(op), "`"));
  return str("**Trusted external boundary:** ", join(names, ", "), "\n");
}

std::string boundary_evidence_markdown(std::span<const PlannedKernel> kernels) {
  const std::vector<EvidenceBoundary> found = trusted_boundary_evidence(kernels);
  if (found.empty()) return "**Trusted boundaries by evidence:** none\n";
  std::vector<std::string> names;
  for (const EvidenceBoundary& b : found) names.push_back(str("`", to_string(b.op), "` (", obligation_list(b.obligations), ")"));
  return str("**Trusted boundaries by evidence:** ", join(names, ", "), "\n");
}

}  // namespace

std::string plan_markdown(const ResolvedProfile& resolved, std::span<const PlannedKernel> kernels,
                          const EnvironmentFingerprint& environment) {
  const Profile& profile = *resolved.profile;
  std::string out = str("### Kernel plan under ", markdown_code(profile.name, MarkdownPlace::Inline), "\n\n",
                        markdown_code(profile_summary(profile), MarkdownPlace::Inline), "\n\n");
  out += boundary_markdown(kernels) + "\n" + boundary_evidence_markdown(kernels) + "\n";
  out += markdown_kernel_table(kernels, nullptr);
  out += markdown_contracts(kernels);
  return out + markdown_sources(resolved.sources) + environment_markdown(environment);
}

std::string graph_markdown(const GraphReportInput& input, std::span<const SourceFile> sources) {
  const Profile& profile = *input.resolved.profile;
  const std::vector<PlannedKernel> group_plan = group_kernels(input.groups);
  std::string out = str("### Graph plan ", markdown_code(input.graph.name, MarkdownPlace::Inline), " under ",
                        markdown_code(profile.name, MarkdownPlace::Inline), "\n\n",
                        markdown_code(profile_summary(profile), MarkdownPlace::Inline), "\n\n");
  out += str("nodes ", input.plan.node_count, ", planned ", input.plan.kernels.size(), "; kernels ",
             input.plan.kernels.size(), ", groups ", input.groups.size(), "\n\n");
  out += boundary_markdown(group_plan) + "\n" + boundary_evidence_markdown(group_plan) + "\n";
  std::vector<std::vector<std::uint32_t>> ids;
  for (const KernelGroup& g : input.groups) ids.push_back(g.node_ids);
  out += markdown_kernel_table(group_plan, &ids);
  out += markdown_contracts(group_plan);
  return out + markdown_sources(sources) + environment_markdown(input.environment);
}

}  // namespace capsule::report_internal
