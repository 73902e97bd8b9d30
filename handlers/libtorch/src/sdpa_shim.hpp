// SPDX-License-Identifier: Apache-2.0
// The one place where the LibTorch version changes the code: the scaled dot-product attention
// call. LibTorch 1.13 has only the private `at::_scaled_dot_product_attention` (a pair: output and
// weights), which always scales the scores by 1/sqrt(d); 2.0 has the public
// `at::scaled_dot_product_attention`, still without a scale; 2.1 and later take `scale`. Where the
// call cannot take our scale, q is multiplied by scale·sqrt(d) first, so ATen's 1/sqrt(d) leaves
// scale·q·kᵀ; that adds at most about 4 roundings to each score (docs/libtorch.md bounds them).
// Only the 1.13 branch is built and tested here; the 2.x branches are unverified until a machine
// with LibTorch 2.x builds them.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/api/include/torch/version.h>

#include <cmath>

#if TORCH_VERSION_MAJOR < 2
#include <ATen/ops/_scaled_dot_product_attention.h>
#else
#include <ATen/ops/scaled_dot_product_attention.h>
#endif
#include <ATen/ops/mul.h>

namespace capsule::libtorch {

/// softmax(scale·q·kᵀ over the keys `allowed` lets through)·v, by ATen's SDPA kernel: no dropout,
/// no causal flag (a causal mask is folded into `allowed` by the caller). `allowed` is undefined or
/// a kBool tensor broadcastable to [.., n, m], true = the key takes part. A row with no allowed key
/// is ATen's NaN; the caller decides what such a row gives.
inline at::Tensor aten_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed,
                            double scale) {
  c10::optional<at::Tensor> mask;
  if (allowed.defined()) mask = allowed;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, scale);
#else
  const auto d = q.size(-1);
  // d = 0: every score is the empty sum 0 whatever the scale, so q needs no factor.
  const at::Tensor q_scaled = d == 0 ? q : at::mul(q, scale * std::sqrt(static_cast<double>(d)));
#if TORCH_VERSION_MAJOR < 2
  return std::get<0>(at::_scaled_dot_product_attention(q_scaled, k, v, mask, 0.0, false, false));
#else
  return at::scaled_dot_product_attention(q_scaled, k, v, mask, 0.0, false);
#endif
#endif
}

}  // namespace capsule::libtorch
