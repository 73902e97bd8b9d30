// SPDX-License-Identifier: Apache-2.0
// The one place where the LibTorch version changes the code: the scaled dot-product attention
// call. LibTorch 1.13 has only the private `at::_scaled_dot_product_attention` (a pair: output and
// weights), which always scales the scores by 1/sqrt(d); 2.0 has the public
// `at::scaled_dot_product_attention`, still without a scale; 2.1 and later take `scale`. Where the
// call cannot take our scale, q is multiplied by scale·sqrt(d) first, so ATen's 1/sqrt(d) leaves
// scale·q·kᵀ; that adds at most about 4 roundings to each score (docs/libtorch.md bounds them).
// Only the 1.13 branch is built and tested here; the 2.x branches are unverified until a machine
// with LibTorch 2.x builds them.
//
// 2.x's fused kernels (flash, memory-efficient, cuDNN, and the CPU flash kernel) take only 4-D
// [batch, heads, n, d] operands and leave anything else to the composed math kernel, so the 2.x
// branches hand ATen our 3-D [batch, n, d] views with a heads dim of 1 (views, no copy; the mask
// [batch | 1, n, m] likewise), and drop it from the result.
//
// aten_sdpa_backend names the kernel ATen's SDPA picks: 2.0 and later ask ATen the question its
// own dispatch asks (`_fused_sdp_choice`, whose schema is (query, key, value, attn_mask?,
// dropout_p, is_causal, *, scale?, enable_gqa) -> int, the value of `sdp::SDPBackend`), on the
// operands aten_sdpa passes; 1.13 has no such choice to ask.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/api/include/torch/version.h>

#include <cmath>

#if TORCH_VERSION_MAJOR < 2
#include <ATen/ops/_scaled_dot_product_attention.h>
#else
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#endif
#include <ATen/ops/mul.h>

#include <cstdint>
#include <string>

namespace capsule::libtorch {

#if TORCH_VERSION_MAJOR >= 2
/// The operands the 2.x calls hand ATen: our 3-D views with a heads dim of 1 (see the file comment).
struct FourD {
  at::Tensor q, k, v;
  c10::optional<at::Tensor> mask;
};
inline FourD four_d(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed) {
  FourD o{q.unsqueeze(-3), k.unsqueeze(-3), v.unsqueeze(-3), c10::nullopt};
  if (allowed.defined()) o.mask = allowed.unsqueeze(-3);
  return o;
}
#endif

/// softmax(scale·q·kᵀ over the keys `allowed` lets through)·v, by ATen's SDPA kernel: no dropout,
/// no causal flag (a causal mask is folded into `allowed` by the caller). `allowed` is undefined or
/// a kBool tensor broadcastable to [.., n, m], true = the key takes part. A row with no allowed key
/// is ATen's NaN; the caller decides what such a row gives.
inline at::Tensor aten_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed,
                            double scale) {
#if TORCH_VERSION_MAJOR < 2
  c10::optional<at::Tensor> mask;
  if (allowed.defined()) mask = allowed;
  const auto d = q.size(-1);
  // d = 0: every score is the empty sum 0 whatever the scale, so q needs no factor.
  const at::Tensor q_scaled = d == 0 ? q : at::mul(q, scale * std::sqrt(static_cast<double>(d)));
  return std::get<0>(at::_scaled_dot_product_attention(q_scaled, k, v, mask, 0.0, false, false));
#else
  const FourD o = four_d(q, k, v, allowed);
#if TORCH_VERSION_MINOR >= 1 || TORCH_VERSION_MAJOR > 2
  return at::scaled_dot_product_attention(o.q, o.k, o.v, o.mask, 0.0, false, scale).squeeze(-3);
#else
  const auto d = q.size(-1);
  const at::Tensor q_scaled = d == 0 ? o.q : at::mul(o.q, scale * std::sqrt(static_cast<double>(d)));
  return at::scaled_dot_product_attention(q_scaled, o.k, o.v, o.mask, 0.0, false).squeeze(-3);
#endif
#endif
}

/// `sdp::SDPBackend`'s name for one value of `_fused_sdp_choice` (-1 error, 0 math,
/// 1 flash_attention, 2 efficient_attention, 3 cudnn_attention, 4 overrideable; a later value is
/// printed as its number).
inline std::string sdp_backend_name(std::int64_t choice) {
  switch (choice) {
    case -1: return "error (ATen's SDPA accepts none of its kernels for these operands)";
    case 0: return "math";
    case 1: return "flash_attention";
    case 2: return "efficient_attention";
    case 3: return "cudnn_attention";
    case 4: return "overrideable";
    default: return "number " + std::to_string(choice);
  }
}

/// The kernel ATen's SDPA runs for aten_sdpa(q, k, v, allowed, scale): "backend " and
/// sdp_backend_name, or why none can be named.
inline std::string aten_sdpa_backend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& allowed, double scale) {
#if TORCH_VERSION_MAJOR < 2
  (void)q, (void)k, (void)v, (void)allowed, (void)scale;
  return "backend not reported: LibTorch 1.13 has no _fused_sdp_choice to ask";
#else
  const FourD o = four_d(q, k, v, allowed);
#if TORCH_VERSION_MINOR >= 1 || TORCH_VERSION_MAJOR > 2
  const std::int64_t choice = at::_fused_sdp_choice(o.q, o.k, o.v, o.mask, 0.0, false, scale);
#else
  (void)scale;  // 2.0 takes no scale; the pre-scaled q aten_sdpa passes has q's shape and dtype
  const std::int64_t choice = at::_fused_sdp_choice(o.q, o.k, o.v, o.mask, 0.0, false);
#endif
  return "backend " + sdp_backend_name(choice);
#endif
}

}  // namespace capsule::libtorch
