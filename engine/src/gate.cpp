// SPDX-License-Identifier: Apache-2.0
#include "capsule/gate.hpp"

#include <array>
#include <unordered_set>

#include "capsule/assert.hpp"
#include "capsule/text.hpp"

namespace capsule {

std::vector<Op> trusted_external_ops(std::span<const PlannedKernel> kernels) {
  std::vector<Op> ops;
  for (const PlannedKernel& k : kernels) {
    if (k.capsule->trust == Trust::TrustedExternal) ops.push_back(k.op);
  }
  return ops;
}

std::vector<std::string> distinct_capsule_names(std::span<const PlannedKernel> kernels) {
  std::vector<std::string> names;
  std::unordered_set<std::string_view> seen;
  for (const PlannedKernel& k : kernels) {
    if (seen.insert(k.capsule->name).second) names.push_back(k.capsule->name);
  }
  return names;
}

std::vector<KernelGroup> coalesce(const GraphKernelPlan& plan) {
  std::vector<KernelGroup> groups;
  groups.reserve(plan.kernels.size() / 4 + 1);
  for (const PlannedNodeKernel& k : plan.kernels) {
    if (!groups.empty()) {
      KernelGroup& last = groups.back();
      // Full structural equality, not identity: a same-named capsule with other trust, evidence
      // or numerics must start its own group (§5.3).
      if (last.op == k.op && (last.capsule == k.capsule || *last.capsule == *k.capsule)) {
        last.node_ids.push_back(k.node_id);
        continue;
      }
    }
    groups.push_back(KernelGroup{{k.node_id}, k.op, k.capsule});
  }
  return groups;
}

std::vector<KernelGroup> singleton_groups(const GraphKernelPlan& plan) {
  std::vector<KernelGroup> groups;
  groups.reserve(plan.kernels.size());
  for (const PlannedNodeKernel& k : plan.kernels) groups.push_back(KernelGroup{{k.node_id}, k.op, k.capsule});
  return groups;
}

std::vector<KernelGroup> group(const GraphKernelPlan& plan, Lowering lowering) {
  return lowering == Lowering::Coalesced ? coalesce(plan) : singleton_groups(plan);
}

std::vector<PlannedKernel> group_kernels(std::span<const KernelGroup> groups) {
  std::vector<PlannedKernel> kernels;
  kernels.reserve(groups.size());
  for (const KernelGroup& g : groups) kernels.push_back(g.kernel());
  return kernels;
}

GateFailureClass gate_failure_class(Disposition disposition) {
  switch (disposition) {
    case Disposition::Missing: return GateFailureClass::Missing;
    case Disposition::Guarded: return GateFailureClass::Guarded;
    case Disposition::Tested: return GateFailureClass::Tested;
    case Disposition::Trusted: return GateFailureClass::Trusted;
    case Disposition::Fuzzed: return GateFailureClass::Fuzzed;
    case Disposition::Proved:
    case Disposition::Checked:
    case Disposition::NotApplicable: return GateFailureClass::NotAdmitted;
  }
  return GateFailureClass::NotAdmitted;
}

std::vector<ObligationReport> rejected_reports(const AssurancePolicy& policy, std::span<const PlannedKernel> kernels) {
  std::vector<ObligationReport> reports;
  for (const GateFailure& failure : gate_failures(policy, kernels)) {
    reports.insert(reports.end(), failure.reports.begin(), failure.reports.end());
  }
  return reports;
}

std::vector<GateFailure> gate_failures(const AssurancePolicy& policy, std::span<const PlannedKernel> kernels) {
  std::array<GateFailure, kCount<GateFailureClass>> by_class;
  for (const GateFailureClass kind : all_values<GateFailureClass>()) by_class[static_cast<std::size_t>(kind)].kind = kind;
  for (const PlannedKernel& k : kernels) {
    for (const Obligation obligation : all_values<Obligation>()) {
      const ContractDescriptor& d = k.capsule->contract(obligation);
      if (policy.accepts_evidence(d.claim.kind, d.evidence)) continue;
      const ObligationReport report{k.op, k.capsule, obligation};
      by_class[static_cast<std::size_t>(report.failure_class())].reports.push_back(report);
    }
  }
  std::vector<GateFailure> failures;
  for (GateFailure& failure : by_class) {
    if (!failure.reports.empty()) failures.push_back(std::move(failure));
  }
  return failures;
}

std::string gate_failure_summary(std::span<const GateFailure> failures) {
  std::vector<std::string> parts;
  for (const GateFailure& f : failures) parts.push_back(str(to_string(f.kind), " ", f.reports.size()));
  return join(parts, ", ");
}

std::string AcceptanceFailure::message() const {
  using K = AcceptanceFailure::Kind;
  const std::string_view planned = to_string(op);
  const Capsule& c = *capsule;
  switch (kind) {
    case K::OperationMismatch:
      return str("planned operation ", planned, " does not match capsule operation ", to_string(c.op));
    case K::ForwardUnsupported: return str(c.name, " has no forward implementation for ", planned);
    case K::ContractsMisaligned: return str(c.name, " has misaligned contract claims for ", planned);
    case K::TrustRejected: return str(c.name, " uses rejected trust level ", to_string(c.trust), " for ", planned);
    case K::ProviderRejected: return str(c.name, " uses rejected provider ", to_string(c.provider), " for ", planned);
    case K::DeviceMismatch:
      return str(c.name, " targets ", to_string(c.device), ", not requested ", to_string(requested_device), ", for ",
                 planned);
    case K::VjpMismatch:
      return str(c.name, " offers ", to_string(c.vjp), ", not requested ", to_string(requested_vjp), ", for ", planned);
    case K::EvidenceRejected:
      return str(c.name, " has rejected ", to_string(obligation), " evidence for ", planned, ": ",
                 evidence_label(c.contract(obligation).evidence));
  }
  return {};
}

std::vector<AcceptanceFailure> acceptance_failures(const PlannedKernel& kernel, const KernelPolicy& policy) {
  using K = AcceptanceFailure::Kind;
  CAPSULE_ASSERT(kernel.capsule != nullptr, "a planned kernel always names a capsule");
  std::vector<AcceptanceFailure> failures;
  const Capsule& c = *kernel.capsule;
  const auto add = [&](K kind, Obligation obligation = Obligation::Shape) {
    AcceptanceFailure failure;
    failure.kind = kind;
    failure.op = kernel.op;
    failure.capsule = kernel.capsule;
    failure.obligation = obligation;
    failure.requested_device = policy.device;
    failure.requested_vjp = policy.vjp;
    failures.push_back(failure);
  };
  if (kernel.op != c.op) add(K::OperationMismatch);
  if (!c.supports_forward) add(K::ForwardUnsupported);
  if (!contracts_aligned(c)) add(K::ContractsMisaligned);
  if (!allowed_by(policy, c)) add(K::TrustRejected);
  if (!matches_preference(policy, c)) add(K::ProviderRejected);
  if (!matches_device(policy, c)) add(K::DeviceMismatch);
  if (!matches_vjp(policy, c)) add(K::VjpMismatch);
  for (const Obligation obligation : all_values<Obligation>()) {
    const ContractDescriptor& d = c.contract(obligation);
    if (!policy.assurance.accepts_evidence(d.claim.kind, d.evidence)) add(K::EvidenceRejected, obligation);
  }
  return failures;
}

Result<AcceptedKernel, std::vector<AcceptanceFailure>> accept(const PlannedKernel& kernel, const KernelPolicy& policy) {
  std::vector<AcceptanceFailure> failures = acceptance_failures(kernel, policy);
  if (!failures.empty()) return fail(std::move(failures));
  return AcceptedKernel(kernel.op, std::make_shared<const Capsule>(*kernel.capsule), policy);
}

Result<AcceptedGraphKernelPlan, GraphRejection> accept_graph(const GraphKernelPlan& plan, const KernelPolicy& policy,
                                                             Lowering lowering) {
  std::vector<KernelGroup> groups = group(plan, lowering);
  std::vector<AcceptanceFailure> failures;
  for (const KernelGroup& g : groups) {
    std::vector<AcceptanceFailure> own = acceptance_failures(g.kernel(), policy);
    failures.insert(failures.end(), own.begin(), own.end());
  }
  if (!failures.empty()) return fail(GraphRejection{std::move(groups), std::move(failures)});
  return AcceptedGraphKernelPlan(plan, std::move(groups), policy, lowering);
}

std::vector<std::uint32_t> AcceptedGraphKernelPlan::node_ids() const {
  std::vector<std::uint32_t> ids;
  for (const KernelGroup& g : groups_) ids.insert(ids.end(), g.node_ids.begin(), g.node_ids.end());
  return ids;
}

std::vector<std::string> AcceptedGraphKernelPlan::capsule_names() const {
  std::vector<std::string> names;
  for (const KernelGroup& g : groups_) names.push_back(g.capsule->name);
  return names;
}

}  // namespace capsule
