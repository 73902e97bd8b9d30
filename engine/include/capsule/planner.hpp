// SPDX-License-Identifier: Apache-2.0
// The planner (§3.2–§3.4, §5.1): admissibility in TorchLean's order, `choose` under auto, prefer
// and only, availability filtering, and op-list and graph planning. A Planner decides the choice
// for every op once, at construction; planning a list is then one table lookup per op.
// Plans borrow capsule pointers from the planner's registry: keep the Planner alive while a plan
// is used.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "capsule/catalog.hpp"
#include "capsule/policy.hpp"
#include "capsule/registry.hpp"
#include "capsule/result.hpp"
#include "capsule/text_style.hpp"

namespace capsule {

// §3.2 predicates, each pure. `admissible` is their conjunction in TorchLean's order.

/// The assurance policy admits the capsule's trust level.
bool allowed_by(const KernelPolicy& policy, const Capsule& c);
/// `only p` admits provider p alone; `auto` and `prefer` admit every provider.
bool matches_preference(const KernelPolicy& policy, const Capsule& c);
/// The capsule targets the policy's device.
bool matches_device(const KernelPolicy& policy, const Capsule& c);
/// Inference (vjp none) and ops without a VJP accept any capsule; otherwise the capsule's VJP
/// ownership must satisfy the policy's (tape: tape or backend; backend: backend; external:
/// external).
bool matches_vjp(const KernelPolicy& policy, const Capsule& c);
/// supports_forward ∧ contracts_aligned ∧ allowed_by ∧ matches_preference ∧ matches_device ∧ matches_vjp.
bool admissible(const KernelPolicy& policy, const Capsule& c);

/// The reasons `c` is not admissible under `policy`, in admissibility order (empty when it is).
std::vector<std::string> rejection_reasons(const KernelPolicy& policy, const Capsule& c);

/// §3.3 chooseCapsuleFor?: prefer p → first eligible of provider p, else first eligible;
/// auto/only → first eligible. `candidates` are the capsules for `op` in catalog order.
const Capsule* choose(const KernelPolicy& policy, Op op, std::span<const Capsule* const> candidates);

/// One op and the capsule chosen for it. `capsule` points into the planner's registry.
struct PlannedKernel {
  Op op = Op::Custom;
  const Capsule* capsule = nullptr;
};

/// Planned kernels in the order of the requested ops.
struct KernelPlan {
  std::vector<PlannedKernel> kernels;
};

/// A planned graph node; nodes without a kernel (input, const, detach) have no entry.
struct PlannedNodeKernel {
  std::uint32_t node_id = 0;
  std::uint32_t node_index = 0;  ///< position in Graph::nodes, to print kind and payload
  Op op = Op::Custom;
  const Capsule* capsule = nullptr;
};

/// Planned nodes in graph order, and how many nodes the graph had in all.
struct GraphKernelPlan {
  std::vector<PlannedNodeKernel> kernels;
  std::size_t node_count = 0;
};

/// One capsule considered for an op, and what the planner made of it.
struct CandidateVerdict {
  const Capsule* capsule = nullptr;
  bool available = true;   ///< admitted by the profile's availability
  bool admissible = false;
  bool chosen = false;
  std::vector<std::string> reasons;  ///< why it was rejected or passed over
  std::vector<std::string> gate_notes;  ///< evidence the assurance policy would reject at the gate
};

/// A planning failure: TorchLean's first line, then every candidate for the op with reasons.
struct PlanError {
  DiagCode code = DiagCode::NoAdmissibleCapsule;
  std::string message;
  Op op = Op::Custom;
  std::optional<std::uint32_t> node_id;  ///< set when planning a graph node
  std::vector<CandidateVerdict> candidates;

  /// `message`, then one indented line per candidate and reason. With `style.color` the
  /// message, the refusal's verdict, is red.
  std::string render(const TextStyle& style = {}) const;
};

class Planner {
 public:
  /// `registry` is the profile's full registry; candidates outside `availability` are still
  /// listed (as unavailable) when explaining, but never chosen.
  Planner(Registry registry, Availability availability, KernelPolicy policy);

  const KernelPolicy& policy() const { return policy_; }
  const Availability& availability() const { return availability_; }
  const Registry& registry() const { return registry_; }
  const Registry& available() const { return available_; }

  /// The chosen capsule for `op`, or null when none is admissible.
  const Capsule* chosen(Op op) const { return choice_[static_cast<std::size_t>(op)]; }

  Result<PlannedKernel, PlanError> plan_op(Op op) const;
  /// Plans in order; the first failure aborts (TorchLean's planOps).
  Result<KernelPlan, PlanError> plan_ops(std::span<const Op> ops) const;
  /// Checks well-formedness, then plans every node whose kind has an op (§5.1).
  Result<GraphKernelPlan, PlanError> plan_graph(const Graph& graph) const;

  /// Every capsule for `op` in catalog order with the planner's verdict.
  std::vector<CandidateVerdict> explain(Op op) const;

 private:
  PlanError no_capsule(Op op) const;

  Registry registry_;
  Registry available_;
  Availability availability_;
  KernelPolicy policy_;
  std::array<const Capsule*, kOpCount> choice_{};
};

}  // namespace capsule
