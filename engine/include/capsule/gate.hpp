// SPDX-License-Identifier: Apache-2.0
// Audit, grouping, contract check and the acceptance gate (§5.2–§5.4). The gate is the only
// code that can make an AcceptedKernel or an AcceptedGraphKernelPlan: their constructors are
// private and `accept`/`accept_graph` are their only friends, so no caller can forge a plan
// that skipped admissibility or the evidence check.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "capsule/planner.hpp"

namespace capsule {

// ---- Audit (§5.2) ---------------------------------------------------------------------------

/// Op names of kernels whose capsule is labelled trusted-external, in plan order.
std::vector<Op> trusted_external_ops(std::span<const PlannedKernel> kernels);
/// Distinct capsule names in first-seen order.
std::vector<std::string> distinct_capsule_names(std::span<const PlannedKernel> kernels);

// ---- Grouping (§5.3) ------------------------------------------------------------------------

/// Adjacent node kernels audited as one unit (§5.3); grouping never fuses or rewrites anything.
struct KernelGroup {
  std::vector<std::uint32_t> node_ids;
  Op op = Op::Custom;
  const Capsule* capsule = nullptr;

  PlannedKernel kernel() const { return PlannedKernel{op, capsule}; }
};

/// Adjacent node kernels merge when the op is equal and the capsules are structurally equal.
std::vector<KernelGroup> coalesce(const GraphKernelPlan& plan);
/// One group per node kernel (A's singleton lowering).
std::vector<KernelGroup> singleton_groups(const GraphKernelPlan& plan);
std::vector<KernelGroup> group(const GraphKernelPlan& plan, Lowering lowering);
std::vector<PlannedKernel> group_kernels(std::span<const KernelGroup> groups);

// ---- Contract check (§5.4) ------------------------------------------------------------------

/// TorchLean's gate-failure classes (§9.3), in their fixed order: missing, guarded, tested,
/// trusted, fuzzed. `not-admitted` comes last and is this engine's own: proved, checked or
/// not-applicable evidence whose kind a custom `{ trust, evidence }` list leaves out.
enum class GateFailureClass : std::uint8_t { Missing, Guarded, Tested, Trusted, Fuzzed, NotAdmitted };

template <>
struct VocabTable<GateFailureClass> {
  static constexpr std::string_view kind = "gate failure class";
  static constexpr std::array<std::pair<GateFailureClass, std::string_view>, 6> entries{{
      {GateFailureClass::Missing, "missing"}, {GateFailureClass::Guarded, "guarded"},
      {GateFailureClass::Tested, "tested"}, {GateFailureClass::Trusted, "trusted"},
      {GateFailureClass::Fuzzed, "fuzzed"}, {GateFailureClass::NotAdmitted, "not-admitted"}}};
};
static_assert(detail::table_is_dense(VocabTable<GateFailureClass>::entries));

/// The class a rejected piece of evidence of this disposition fails in.
GateFailureClass gate_failure_class(Disposition disposition);

/// One obligation of one planned kernel, as the contract check sees it.
struct ObligationReport {
  Op op = Op::Custom;
  const Capsule* capsule = nullptr;
  Obligation obligation = Obligation::Shape;

  const ContractDescriptor& descriptor() const { return capsule->contract(obligation); }
  Disposition disposition() const { return evidence_disposition(descriptor().claim.kind, descriptor().evidence); }
  GateFailureClass failure_class() const { return gate_failure_class(disposition()); }
};

/// Obligation reports whose evidence `policy` rejects, in failure-class order (missing, guarded,
/// tested, trusted, fuzzed, not-admitted) and, within a class, kernel by kernel, shape→vjp.
std::vector<ObligationReport> rejected_reports(const AssurancePolicy& policy, std::span<const PlannedKernel> kernels);

/// TorchLean's `gateFailures`: at most one entry per class, in class order, each non-empty.
struct GateFailure {
  GateFailureClass kind = GateFailureClass::Missing;
  std::vector<ObligationReport> reports;
};
std::vector<GateFailure> gate_failures(const AssurancePolicy& policy, std::span<const PlannedKernel> kernels);

/// `guarded 2, trusted 1`: the classes of `failures` with their report counts, in order.
std::string gate_failure_summary(std::span<const GateFailure> failures);

// ---- Acceptance gate (§5.4) -----------------------------------------------------------------

struct AcceptanceFailure {
  enum class Kind : std::uint8_t {
    OperationMismatch, ForwardUnsupported, ContractsMisaligned, TrustRejected, ProviderRejected,
    DeviceMismatch, VjpMismatch, EvidenceRejected
  };
  Kind kind = Kind::OperationMismatch;
  Op op = Op::Custom;            ///< the planned op
  const Capsule* capsule = nullptr;
  Obligation obligation = Obligation::Shape;  ///< EvidenceRejected only
  Device requested_device = Device::Cpu;      ///< DeviceMismatch only
  VjpMode requested_vjp = VjpMode::None;      ///< VjpMismatch only

  /// TorchLean's message text for this failure.
  std::string message() const;
};

template <>
struct VocabTable<AcceptanceFailure::Kind> {
  using K = AcceptanceFailure::Kind;
  static constexpr std::string_view kind = "acceptance failure";
  static constexpr std::array<std::pair<K, std::string_view>, 8> entries{{
      {K::OperationMismatch, "operation-mismatch"}, {K::ForwardUnsupported, "forward-unsupported"},
      {K::ContractsMisaligned, "contracts-misaligned"}, {K::TrustRejected, "trust-rejected"},
      {K::ProviderRejected, "provider-rejected"}, {K::DeviceMismatch, "device-mismatch"},
      {K::VjpMismatch, "vjp-mismatch"}, {K::EvidenceRejected, "evidence-rejected"}}};
};
static_assert(detail::table_is_dense(VocabTable<AcceptanceFailure::Kind>::entries));

/// Every failing check for one kernel, in TorchLean's order.
std::vector<AcceptanceFailure> acceptance_failures(const PlannedKernel& kernel, const KernelPolicy& policy);

class AcceptedKernel;
class AcceptedGraphKernelPlan;
struct GraphRejection;

/// The gate for one kernel: op match, admissibility, and the evidence check under the policy's
/// assurance. Availability is not rechecked (§5.4).
Result<AcceptedKernel, std::vector<AcceptanceFailure>> accept(const PlannedKernel& kernel, const KernelPolicy& policy);

/// Groups the graph plan per `lowering`, then gates every group.
Result<AcceptedGraphKernelPlan, GraphRejection> accept_graph(const GraphKernelPlan& plan, const KernelPolicy& policy,
                                                             Lowering lowering = Lowering::Coalesced);

/// A kernel the gate accepted under `policy()`. It owns an immutable copy of the capsule it
/// accepted, so later edits to (or the destruction of) the planner's registry cannot change what
/// was accepted. Only `accept` can construct one.
class AcceptedKernel {
 public:
  Op op() const { return op_; }
  const Capsule& capsule() const { return *capsule_; }
  const KernelPolicy& policy() const { return policy_; }

 private:
  AcceptedKernel(Op op, std::shared_ptr<const Capsule> capsule, KernelPolicy policy)
      : op_(op), capsule_(std::move(capsule)), policy_(policy) {}
  friend Result<AcceptedKernel, std::vector<AcceptanceFailure>> accept(const PlannedKernel&, const KernelPolicy&);

  Op op_;
  std::shared_ptr<const Capsule> capsule_;
  KernelPolicy policy_;
};

/// A graph plan the gate accepted. Its groups point at capsules of the registry that planned
/// them; registries share ownership of their (immutable) modules, so keep that Planner or
/// Registry alive while using this plan. Only `accept_graph` can construct one.
class AcceptedGraphKernelPlan {
 public:
  const GraphKernelPlan& graph_plan() const { return graph_plan_; }
  const std::vector<KernelGroup>& groups() const { return groups_; }
  const KernelPolicy& policy() const { return policy_; }
  Lowering lowering() const { return lowering_; }
  std::vector<std::uint32_t> node_ids() const;
  std::vector<std::string> capsule_names() const;

 private:
  AcceptedGraphKernelPlan(GraphKernelPlan plan, std::vector<KernelGroup> groups, KernelPolicy policy, Lowering lowering)
      : graph_plan_(std::move(plan)), groups_(std::move(groups)), policy_(policy), lowering_(lowering) {}
  friend Result<AcceptedGraphKernelPlan, GraphRejection> accept_graph(const GraphKernelPlan&, const KernelPolicy&,
                                                                      Lowering);

  GraphKernelPlan graph_plan_;
  std::vector<KernelGroup> groups_;
  KernelPolicy policy_;
  Lowering lowering_;
};

/// Why a graph plan was refused: its groups and every failure, group by group.
struct GraphRejection {
  std::vector<KernelGroup> groups;
  std::vector<AcceptanceFailure> failures;
};

}  // namespace capsule
