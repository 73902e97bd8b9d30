// SPDX-License-Identifier: Apache-2.0
#include "capsule/planner.hpp"

#include "capsule/escape.hpp"
#include "capsule/text.hpp"

namespace capsule {

bool allowed_by(const KernelPolicy& policy, const Capsule& c) { return policy.assurance.accepts_trust(c.trust); }

bool matches_preference(const KernelPolicy& policy, const Capsule& c) {
  return policy.provider.kind != ProviderPreference::Kind::Only || policy.provider.provider == c.provider;
}

bool matches_device(const KernelPolicy& policy, const Capsule& c) { return policy.device == c.device; }

bool matches_vjp(const KernelPolicy& policy, const Capsule& c) {
  if (policy.vjp == VjpMode::None || !requires_vjp(c.op)) return true;
  switch (policy.vjp) {
    case VjpMode::None: return true;
    // The engine owns the tape; a backend routine may still supply the local VJP.
    case VjpMode::TorchleanTape: return c.vjp == VjpMode::TorchleanTape || c.vjp == VjpMode::BackendVjp;
    case VjpMode::BackendVjp: return c.vjp == VjpMode::BackendVjp;
    // A policy asking the external runtime to own autograd admits only such capsules (seed 003).
    case VjpMode::ExternalAutograd: return c.vjp == VjpMode::ExternalAutograd;
  }
  return false;
}

bool admissible(const KernelPolicy& policy, const Capsule& c) {
  // A plain conjunction in TorchLean's order; every predicate is pure.
  return c.supports_forward && contracts_aligned(c) && allowed_by(policy, c) && matches_preference(policy, c) &&
         matches_device(policy, c) && matches_vjp(policy, c);
}

std::vector<std::string> rejection_reasons(const KernelPolicy& policy, const Capsule& c) {
  std::vector<std::string> reasons;
  if (!c.supports_forward) reasons.push_back("has no forward implementation");
  if (!contracts_aligned(c)) {
    for (const Obligation obligation : all_values<Obligation>()) {
      const Claim& claim = c.contract(obligation).claim;
      if (!matches_obligation(c.op, c.vjp, obligation, claim)) {
        reasons.push_back(str("misaligned: its ", to_string(obligation), " contract holds a ",
                              to_string(claim.kind), " claim for ", to_string(claim.op),
                              claim.kind == ClaimKind::VjpRefinement ? str(" (mode ", to_string(claim.mode), ")") : "",
                              ", which is not the ", to_string(obligation), " obligation of a ",
                              to_string(c.vjp), " capsule for ", to_string(c.op)));
      }
    }
  }
  if (!allowed_by(policy, c)) {
    reasons.push_back(str("trust level ", to_string(c.trust), " is not admitted by assurance ",
                          policy.assurance.label()));
  }
  if (!matches_preference(policy, c)) {
    reasons.push_back(str("provider ", to_string(c.provider), " is excluded by `", policy.provider.label(), "`"));
  }
  if (!matches_device(policy, c)) {
    reasons.push_back(str("targets ", to_string(c.device), ", not requested ", to_string(policy.device)));
  }
  if (!matches_vjp(policy, c)) {
    reasons.push_back(str("offers vjp ", to_string(c.vjp), ", not requested ", to_string(policy.vjp)));
  }
  return reasons;
}

const Capsule* choose(const KernelPolicy& policy, Op op, std::span<const Capsule* const> candidates) {
  const Capsule* first = nullptr;
  for (const Capsule* c : candidates) {
    if (c->op != op || !admissible(policy, *c)) continue;
    if (policy.provider.kind != ProviderPreference::Kind::Prefer) return c;
    if (c->provider == policy.provider.provider) return c;
    if (first == nullptr) first = c;
  }
  return first;
}

std::string PlanError::render(const TextStyle& style) const {
  // TorchLean's first line, unchanged for plain input; every part that may quote input is escaped.
  std::string out = style.paint(Tone::Bad, text_escape(message));
  if (node_id) out += str("\n  at graph node ", *node_id);
  if (candidates.empty()) {
    out += str("\n  no capsule in the profile's modules implements ", to_string(op));
  }
  for (const CandidateVerdict& verdict : candidates) {
    out += str("\n  candidate ", text_escape(verdict.capsule->name), " (", to_string(verdict.capsule->provider), "/",
               to_string(verdict.capsule->device), ", ", to_string(verdict.capsule->trust), ", vjp ",
               to_string(verdict.capsule->vjp), "):");
    for (const std::string& reason : verdict.reasons) out += "\n    - " + text_escape(reason);
  }
  return out;
}

Planner::Planner(Registry registry, Availability availability, KernelPolicy policy)
    : registry_(std::move(registry)),
      available_(registry_.filtered(availability)),
      availability_(availability),
      policy_(policy) {
  for (const Op op : all_values<Op>()) {
    choice_[static_cast<std::size_t>(op)] = choose(policy_, op, available_.for_op(op));
  }
}

PlanError Planner::no_capsule(Op op) const {
  PlanError error;
  error.op = op;
  error.message = str("no admissible kernel capsule for op ", to_string(op), " on device ", to_string(policy_.device));
  error.candidates = explain(op);
  return error;
}

Result<PlannedKernel, PlanError> Planner::plan_op(Op op) const {
  const Capsule* capsule = chosen(op);
  if (capsule == nullptr) return fail(no_capsule(op));
  return PlannedKernel{op, capsule};
}

Result<KernelPlan, PlanError> Planner::plan_ops(std::span<const Op> ops) const {
  KernelPlan plan;
  plan.kernels.reserve(ops.size());
  for (const Op op : ops) {
    const Capsule* capsule = choice_[static_cast<std::size_t>(op)];
    if (capsule == nullptr) return fail(no_capsule(op));
    plan.kernels.push_back(PlannedKernel{op, capsule});
  }
  return plan;
}

Result<GraphKernelPlan, PlanError> Planner::plan_graph(const Graph& graph) const {
  Diagnostics problems = check_well_formed(graph);
  if (!problems.empty()) {
    PlanError error;
    error.code = DiagCode::InvalidGraph;
    error.message = str("graph `", graph.name, "` is not well formed: ", problems.front().message);
    return fail(std::move(error));
  }
  GraphKernelPlan plan;
  plan.node_count = graph.nodes.size();
  plan.kernels.reserve(graph.nodes.size());
  for (std::size_t index = 0; index < graph.nodes.size(); ++index) {
    const GraphNode& node = graph.nodes[index];
    if (!node.op) continue;  // input, const and detach get no kernel
    const Capsule* capsule = choice_[static_cast<std::size_t>(*node.op)];
    if (capsule == nullptr) {
      PlanError error = no_capsule(*node.op);
      error.node_id = node.id;
      return fail(std::move(error));
    }
    plan.kernels.push_back(PlannedNodeKernel{node.id, static_cast<std::uint32_t>(index), *node.op, capsule});
  }
  return plan;
}

std::vector<CandidateVerdict> Planner::explain(Op op) const {
  std::vector<CandidateVerdict> verdicts;
  const Capsule* winner = chosen(op);
  for (const Capsule* c : registry_.for_op(op)) {
    CandidateVerdict verdict;
    verdict.capsule = c;
    verdict.available = availability_.admits(*c);
    verdict.reasons = rejection_reasons(policy_, *c);
    if (!availability_.devices.contains(c->device)) {
      verdict.reasons.push_back(str("not available in profile: device ", to_string(c->device), " is not declared"));
    }
    if (!availability_.providers.contains(c->provider)) {
      verdict.reasons.push_back(str("not available in profile: provider ", to_string(c->provider), " is not declared"));
    }
    verdict.admissible = verdict.available && admissible(policy_, *c);
    verdict.chosen = c == winner;
    if (verdict.admissible && !verdict.chosen && winner != nullptr) {
      verdict.reasons.push_back(
          policy_.provider.kind == ProviderPreference::Kind::Prefer && winner->provider == policy_.provider.provider
              ? str("admissible, but `", winner->name, "` has the preferred provider ", to_string(winner->provider))
              : str("admissible, but `", winner->name, "` comes first in catalog order"));
    }
    for (const Obligation obligation : all_values<Obligation>()) {
      const ContractDescriptor& d = c->contract(obligation);
      const Evidence& evidence = d.evidence;
      if (!policy_.assurance.accepts_evidence(d.claim.kind, evidence)) {
        verdict.gate_notes.push_back(str(to_string(obligation), " evidence (", evidence_label(evidence), ", ",
                                         to_string(evidence_disposition(d.claim.kind, evidence)),
                                         ") is not admitted by assurance ", policy_.assurance.label()));
      }
    }
    verdicts.push_back(std::move(verdict));
  }
  return verdicts;
}

}  // namespace capsule
