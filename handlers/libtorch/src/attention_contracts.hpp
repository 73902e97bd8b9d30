// SPDX-License-Identifier: Apache-2.0
// The operand contracts and mask helpers of the attention family (defined in
// kernels_attention.cpp), shared by its plain kernels and its external-autograd regions
// (autograd_formulas_attention.cpp), so both accept the same inputs with the same messages and
// read a mask the same way.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "boundary.hpp"

namespace capsule::libtorch {

/// ATen's kBool form of one of our masks (nonzero = allowed, so NaN is allowed and −0 blocked, as
/// the reference reads it). This is the counted conversion copy of the boundary (count_conversion).
at::Tensor allowed_of(Op op, const Tensor& mask);

/// A 0-dim +0 and −inf of `like`'s dtype and device.
at::Tensor zero_like_scalar(const at::Tensor& like);
at::Tensor minus_infinity_like(const at::Tensor& like);

/// TorchLean's hard-masked softmax along `dim`: blocked entries enter ATen's softmax as −inf
/// (weight 0 beside any allowed entry) and leave it as exactly 0, which also turns the NaN of a
/// fully blocked lane into zeros. An allowed NaN or +inf still makes the allowed entries NaN.
/// Under autograd the outer `where` routes exactly 0 to every blocked entry and the inner one
/// drops whatever the softmax's backward computes there, so a blocked entry takes no gradient.
at::Tensor masked_softmax(const at::Tensor& x, const at::Tensor& allowed, std::int64_t dim);

/// hard_masked_softmax (scores, mask): the mask has the scores' shape; returns the softmax dim.
RuntimeResult<std::int64_t> expect_masked(Inputs inputs, const OpAttrs& attrs);

/// scaled_matmul and softmax_matmul (a, b): a [.., m, k], b [.., k, n] of one rank >= 2 with
/// equal leading dims; returns the output dims.
RuntimeResult<std::vector<std::int64_t>> expect_product(std::string_view op, Inputs inputs);
/// scaled_matmul's alpha is finite.
RuntimeStatus expect_finite_alpha(const OpAttrs& attrs);

/// scaled_dot_product_attention (q [.., n, d], k [.., m, d], v [.., m, dv], mask [n, m] |
/// [.., n, m]?; scale (0 = 1/sqrt(d)), causal), computed on 3-d views [batch, n, d] of our
/// contiguous inputs.
struct Attention {
  std::int64_t batch = 1, n = 0, m = 0, d = 0, dv = 0;
  double scale = 1.0;
  bool batched_mask = false;
  std::vector<std::int64_t> out_dims;
};

RuntimeResult<Attention> plan_attention(Inputs inputs, const OpAttrs& attrs);

/// kBool [batch | 1, n, m]: the mask (one counted conversion) and the causal triangle, or
/// undefined when every key takes part.
at::Tensor attention_allowed(const Attention& p, Inputs inputs, const OpAttrs& attrs);

struct AttentionViews {
  at::Tensor q, k, v;
  at::Tensor allowed;  ///< kBool [batch | 1, n, m], or undefined when every key takes part
};

/// from_blob views of the plain kernels' inputs, and attention_allowed.
AttentionViews attention_views(const Attention& p, Inputs inputs, const OpAttrs& attrs);

/// W = hard_masked_softmax(scale·q·kᵀ) [batch, n, m], composed from ATen ops in the reference's
/// order (the product, then one scaling): exactly 0 at blocked keys and on fully blocked rows.
at::Tensor attention_weights(const Attention& p, const AttentionViews& a);

/// Which computation attention_forward (the plain, untaped forward) runs for these operands, in
/// words: one of its composed paths and why, or ATen's fused SDPA and the backend ATen picks
/// (aten_sdpa_backend). Converts the mask as a call does, and counts that conversion.
/// libtorch_attention_route and its CUDA twin.
RuntimeResult<std::string> attention_route(Inputs inputs, const OpAttrs& attrs);

}  // namespace capsule::libtorch
