// SPDX-License-Identifier: Apache-2.0
// The TorchLean tape's local VJP rules. A rule composes its VJP from runtime ops that the session
// dispatches through its own capsules (so the capsules used report shows them); for the ops
// listed by vjp_rule_uses_adjoint, the selection, window or fused-statistics part of the rule is
// the capsule handler's adjoint kernel, since no op of the vocabulary composes it exactly.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "capsule/runtime/op_args.hpp"

namespace capsule {

/// What a rule may call: ops through the session's capsules, and the node's own adjoint kernel.
class VjpDispatch {
 public:
  virtual RuntimeResult<Tensor> op(Op op, std::span<const Tensor> inputs, const OpAttrs& attrs) = 0;
  virtual RuntimeResult<std::vector<Tensor>> adjoint() = 0;
  /// A new tensor filled with `value` on the session's device (the ones and zeros a rule needs).
  virtual RuntimeResult<Tensor> full(const Shape& shape, DType dtype, double value) = 0;

  RuntimeResult<Tensor> op(Op op, std::initializer_list<Tensor> inputs, const OpAttrs& attrs = {}) {
    return this->op(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
  }

 protected:
  ~VjpDispatch() = default;
};

/// One taped call, as a rule sees it.
struct VjpCall {
  Op op = Op::Custom;
  std::span<const Tensor> inputs;
  const Tensor* output = nullptr;
  const Tensor* grad = nullptr;  ///< gradient of the output
  const OpAttrs* attrs = nullptr;
  std::uint32_t needs = ~0u;     ///< bit i: input i needs a gradient (inputs from 32 on: always)

  bool needs_grad(std::size_t i) const { return i >= 32 || ((needs >> i) & 1u) != 0; }
};

/// The VJP of one taped call: one gradient per input (undefined where none is needed or defined).
RuntimeResult<std::vector<Tensor>> torchlean_tape_vjp(VjpDispatch& dispatch, const VjpCall& call);

}  // namespace capsule
