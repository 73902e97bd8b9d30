// SPDX-License-Identifier: Apache-2.0
// External-autograd region formulas of the normalisations (layer_norm, batch_norm), the index and
// block ops (gather, scatter_add, concat, slice) and scaled_matmul (docs/libtorch.md, "External
// autograd"). autograd_region.cpp's generic region records each under grad mode and owns the
// boundary; this file only says what the op is in ATen's functional, differentiable ops. Each is
// the plain forward's own ATen computation, so the region's output is the plain forward's, and
// autograd's backward is the function the plain adjoint kernel calls:
// - layer_norm, batch_norm: native_layer_norm / native_batch_norm (training mode, batch
//   statistics, biased variance, no running statistics), whose autograd backward is
//   native_*_backward from the same saved mean and rstd/invstd; the plain forward's refusal of a
//   variance that overflowed ATen's accumulation is kept.
// - gather, scatter_add: index_select / index_add along the axis (never at::gather). The graph
//   saves the index tensor for the backward, past this call, so it gets a kLong copy of the
//   payload indices of its own (a counted conversion), never a view of the caller's OpAttrs.
// - concat: cat; slice: the slice view (the region copies a view into storage of ours).
// - scaled_matmul: matmul, then one multiplication by alpha; autograd scales the gradient once
//   and then runs matmul's adjoints, the reference's order.
#include <ATen/ops/cat.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_layer_norm.h>

#include "autograd_formulas_norm_index.hpp"

namespace capsule::libtorch {
namespace {

c10::optional<at::Tensor> optional_operand(const std::vector<at::Tensor>& in, Inputs ours, std::size_t i) {
  if (!has_input(ours, i)) return c10::nullopt;
  return in[i];
}

/// The payload indices in a kLong tensor ATen owns: the recorded graph keeps it until the VJP or
/// clear_tape, which the caller's OpAttrs need not outlive. One counted conversion per region
/// (on a device, index_tensor's copy to it is that tensor, counted there).
at::Tensor owned_indices(Op op, const OpAttrs& attrs) {
  if (device_boundary() != nullptr) return index_tensor(op, attrs);
  count_conversion(op);
  return index_tensor(op, attrs).clone();
}

RuntimeResult<at::Tensor> norm_formula(Op op, const std::vector<at::Tensor>& in, Inputs ours, const OpAttrs& attrs) {
  CAPSULE_TRY(NormPlan plan, norm_plan(op, ours, attrs));
  // Nothing to normalise (ATen would take the mean of no elements): the output is the empty
  // input, and gamma and beta take no gradient from it, which the engine makes zeros, as the
  // reference's adjoint gives.
  if (ours[0].numel() == 0) return in[0].clone();
  const c10::optional<at::Tensor> gamma = optional_operand(in, ours, 1);
  const c10::optional<at::Tensor> beta = optional_operand(in, ours, 2);
  if (plan.per_channel) {
    auto [y, mean, invstd] = at::native_batch_norm(in[0], gamma, beta, c10::nullopt, c10::nullopt,
                                                   /*training=*/true, /*momentum=*/0.0, plan.eps);
    CAPSULE_CHECK(expect_finite_variance(op, in[0], invstd, true));
    return y;
  }
  auto [y, mean, rstd] = at::native_layer_norm(in[0], {in[0].size(-1)}, gamma, beta, plan.eps);
  CAPSULE_CHECK(expect_finite_variance(op, in[0], rstd, false));
  return y;
}

}  // namespace

bool has_norm_index_formula(Op op) {
  switch (op) {
    case Op::LayerNorm:
    case Op::BatchNorm:
    case Op::Gather:
    case Op::ScatterAdd:
    case Op::Concat:
    case Op::Slice:
    case Op::ScaledMatmul: return true;
    default: return false;
  }
}

RuntimeStatus check_norm_index_region(Op op, Inputs inputs, const OpAttrs& attrs) {
  switch (op) {
    case Op::LayerNorm:
    case Op::BatchNorm: {
      CAPSULE_TRY(NormPlan plan, norm_plan(op, inputs, attrs));
      (void)plan;
      return std::monostate{};
    }
    case Op::Gather: {
      CAPSULE_CHECK(expect_inputs("gather", inputs, 1, 1));
      CAPSULE_TRY(std::size_t axis, index_axis(op, inputs[0], attrs));
      (void)axis;
      return std::monostate{};
    }
    case Op::ScatterAdd: {
      CAPSULE_TRY(std::size_t axis, scatter_axis(inputs, attrs));
      (void)axis;
      return std::monostate{};
    }
    case Op::Concat: {
      CAPSULE_TRY(auto plan, concat_plan(inputs, attrs));
      (void)plan;
      return std::monostate{};
    }
    case Op::Slice: {
      CAPSULE_TRY(std::size_t axis, slice_axis(inputs, attrs));
      (void)axis;
      return std::monostate{};
    }
    case Op::ScaledMatmul: {
      CAPSULE_TRY(std::vector<std::int64_t> dims, expect_product("scaled_matmul", inputs));
      (void)dims;
      return expect_finite_alpha(attrs);
    }
    default:
      return runtime_error(RuntimeCode::InvalidArgument,
                           str("LibTorch ", to_string(op), ": no norm/index region formula for this op"));
  }
}

RuntimeResult<at::Tensor> norm_index_formula(Op op, const std::vector<at::Tensor>& in, Inputs ours,
                                             const OpAttrs& attrs) {
  switch (op) {
    case Op::LayerNorm:
    case Op::BatchNorm: return norm_formula(op, in, ours, attrs);
    case Op::Gather: {
      CAPSULE_TRY(std::size_t axis, index_axis(op, ours[0], attrs));
      return at::index_select(in[0], static_cast<std::int64_t>(axis), owned_indices(op, attrs));
    }
    case Op::ScatterAdd: {
      CAPSULE_TRY(std::size_t axis, scatter_axis(ours, attrs));
      return at::index_add(in[0], static_cast<std::int64_t>(axis), owned_indices(op, attrs), in[1]);
    }
    case Op::Concat: {
      CAPSULE_TRY(auto plan, concat_plan(ours, attrs));
      return at::cat(in, static_cast<std::int64_t>(plan.first));
    }
    case Op::Slice: {
      CAPSULE_TRY(std::size_t axis, slice_axis(ours, attrs));
      return in[0].slice(static_cast<std::int64_t>(axis), attrs.start, attrs.end);
    }
    case Op::ScaledMatmul: return at::mul(at::matmul(in[0], in[1]), attrs.alpha);
    default:
      return runtime_error(RuntimeCode::InvalidArgument,
                           str("LibTorch ", to_string(op), ": no norm/index region formula for this op"));
  }
}

}  // namespace capsule::libtorch
