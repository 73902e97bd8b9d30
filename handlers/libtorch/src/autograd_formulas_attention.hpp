// SPDX-License-Identifier: Apache-2.0
// The external-autograd region formulas of the attention family (hard_masked_softmax,
// softmax_matmul, scaled_dot_product_attention), dispatched by autograd_region.cpp's
// check_region and region_formula (docs/libtorch.md, "External autograd").
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "boundary.hpp"

namespace capsule::libtorch {

/// The plain forward's operand checks for `op` (the same contracts and messages).
RuntimeStatus check_attention_region(Op op, Inputs inputs, const OpAttrs& attrs);

/// `op` on `in` (from_blob views of `ours`, those that take a gradient marked requires_grad),
/// from differentiable ATen ops whose autograd gradient is the reference's adjoint. A mask is
/// converted to kBool once (counted) and never requires grad.
RuntimeResult<at::Tensor> attention_region_formula(Op op, const std::vector<at::Tensor>& in, Inputs ours,
                                                   const OpAttrs& attrs);

}  // namespace capsule::libtorch
