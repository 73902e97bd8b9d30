// SPDX-License-Identifier: Apache-2.0
// The external-autograd region formulas of layer_norm, batch_norm, gather, scatter_add, concat,
// slice and scaled_matmul (autograd_formulas_norm_index.cpp), which autograd_region.cpp's generic
// region calls; and the plain forwards' contract checks they reuse (defined in
// kernels_norm_index.cpp; scaled_matmul's are in attention_contracts.hpp), so a region refuses
// exactly what the plain forward refuses, with the same message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "attention_contracts.hpp"  // expect_product, expect_finite_alpha (scaled_matmul)
#include "boundary.hpp"

namespace capsule::libtorch {

// ---------------------------------------------------------------------------------------------
// The region formulas (autograd_formulas_norm_index.cpp).

/// Whether `op`'s region formula lives in autograd_formulas_norm_index.cpp.
bool has_norm_index_formula(Op op);

/// The plain forward's checks of `op` (one of has_norm_index_formula's ops), before ATen runs.
RuntimeStatus check_norm_index_region(Op op, Inputs inputs, const OpAttrs& attrs);

/// `op` on ATen tensors `in` (from_blob views of `ours`, those that take a gradient marked), as
/// ATen functional ops with the plain forward's semantics, so autograd differentiates the
/// reference's function. Inputs already passed check_norm_index_region.
RuntimeResult<at::Tensor> norm_index_formula(Op op, const std::vector<at::Tensor>& in, Inputs ours,
                                             const OpAttrs& attrs);

// ---------------------------------------------------------------------------------------------
// The plain forwards' contracts (kernels_norm_index.cpp).

/// layer_norm's or batch_norm's groups and eps, after the operand checks.
struct NormPlan {
  bool per_channel = false;  ///< batch_norm
  double eps = 1e-5;
  std::int64_t features = 0;  ///< layer_norm: the last axis; batch_norm: the channels
};
RuntimeResult<NormPlan> norm_plan(Op op, Inputs inputs, const OpAttrs& attrs);

/// Refuses a finite group whose variance overflowed ATen's accumulation (`rstd` is ATen's rstd or
/// invstd for input `x`).
RuntimeStatus expect_finite_variance(Op op, const at::Tensor& x, const at::Tensor& rstd, bool per_channel);

/// The payload indices as a kLong tensor: over attrs.indices on a CPU call (no copy: it lives as
/// long as attrs); on a device call, a copy on the device, counted as a conversion of `op`.
at::Tensor index_tensor(Op op, const OpAttrs& attrs);
/// The axis of gather or scatter_add, every index in range.
RuntimeResult<std::size_t> index_axis(Op op, const Tensor& indexed, const OpAttrs& attrs);
/// scatter_add's axis, with src of the shape base and the indices need.
RuntimeResult<std::size_t> scatter_axis(Inputs inputs, const OpAttrs& attrs);
/// concat's axis and output dims.
RuntimeResult<std::pair<std::size_t, std::vector<std::int64_t>>> concat_plan(Inputs inputs, const OpAttrs& attrs);
/// slice's axis, the range inside it.
RuntimeResult<std::size_t> slice_axis(Inputs inputs, const OpAttrs& attrs);

}  // namespace capsule::libtorch
