// SPDX-License-Identifier: Apache-2.0
// The payload of one op call and the calling convention of every op. Handlers of every provider
// implement exactly these conventions, so a capsule swap never changes what an op means.
//
// Inputs are listed in order (their counts are the table op_arity() in capsule/op_arity.hpp,
// which the graph loader checks); "payload" names the OpAttrs fields an op reads. Binary elementwise
// ops need equal shapes (broadcasting is the explicit `broadcast` op, as in TorchLean's IR).
// Every input and the output share one dtype. "axis" may be negative (counted from the end).
//
//   rand_uniform        ()                         payload shape, dtype, seed      U[0,1), counter-based
//   bernoulli_mask      ()                         payload shape, dtype, seed, p   1 with probability p else 0
//   add sub mul div max min (a, b)                 equal shapes; max/min pass the gradient to `a` on ties
//   neg abs sqrt relu gelu sigmoid silu tanh softplus exp log sin cos inv (x)
//                                                  gelu is the exact erf form; inv is 1/x
//   scale               (x)                        payload alpha                   alpha*x
//   clamp               (x)                        payload lo, hi                  min(max(x, lo), hi)
//   safe_log            (x)                        payload eps (default 1e-12)     log(max(x, eps))
//   softmax log_softmax (x)                        payload axis (default -1)
//   hard_masked_softmax (scores, mask)             payload axis; mask has the scores' shape, nonzero
//                                                  = allowed; a blocked entry weighs exactly 0 and a
//                                                  fully blocked row is all zeros (§10.15)
//   top_k_mask          (x)                        payload k, axis; 1 for the k largest along axis,
//                                                  ties broken by lower index; else 0
//   reduce_sum reduce_mean (x)                     payload axes (empty = all), keepdim
//   reshape             (x)                        payload shape (one entry may be -1)
//   permute             (x)                        payload axes (a permutation)
//   broadcast           (x)                        payload shape; numpy rules, x aligned right
//   concat              (x0, x1, ...)              payload axis
//   slice               (x)                        payload axis, start, end (half-open, step 1)
//   gather              (x)                        payload axis, indices   out[.., i, ..] = x[.., indices[i], ..]
//   scatter_add         (base, src)                payload axis, indices   out = base; out[.., indices[i], ..] += src[.., i, ..]
//                                                  in increasing i (fixed-left)
//   matmul              (a [.., m, k], b [.., k, n]) equal leading (batch) dims; rank >= 2
//   scaled_matmul       (a, b)                     payload alpha           alpha*(a·b)
//   softmax_matmul      (a, b)                     softmax(a along its last axis)·b
//   linear              (x [.., in], w [out, in], b [out]?)   x·wᵀ + b
//   mse_loss            (pred, target)             mean((pred-target)^2), a scalar
//   cross_entropy       (logits [n, c], target [n, c])  mean over rows of -Σ target·log_softmax(logits)
//   distill             (student [n, c], teacher [n, c])  payload temperature T:
//                                                  T²·mean over rows of KL(softmax(teacher/T) ‖ softmax(student/T))
//   layer_norm          (x, gamma?, beta?)         over the last axis; payload eps (default 1e-5)
//   batch_norm          (x [n, c, ..], gamma [c]?, beta [c]?)  batch statistics, biased variance;
//                                                  payload eps
//   conv                (x [n, c, l] | [n, c, h, w], w [o, c/groups, k..], bias [o]?)
//                                                  payload stride, padding, dilation (one entry per
//                                                  spatial dim, or empty for 1/0/1), groups
//   conv_transpose      (x [n, c, ..], w [c, o/groups, k..], bias [o]?)  payload stride, padding,
//                                                  output_padding, dilation, groups
//   max_pool avg_pool   (x [n, c, l] | [n, c, h, w])   payload kernel, stride (empty = kernel), padding;
//                                                  avg_pool divides by the full window (padding counts
//                                                  as zeros); max_pool ignores padding
//   smooth_max_pool     (x)                        as max_pool, plus temperature T:
//                                                  T·log Σ_window exp(x/T) (padding ignored)
//   scaled_dot_product_attention (q [.., n, d], k [.., m, d], v [.., m, dv], mask [n, m] | [.., n, m]?)
//                                                  payload scale (0 = 1/sqrt(d)), causal;
//                                                  softmax uses hard_masked_softmax's semantics
#pragma once

#include <cstdint>
#include <vector>

#include "capsule/runtime/error.hpp"
#include "capsule/runtime/tensor.hpp"
#include "capsule/vocab.hpp"

namespace capsule {

struct OpAttrs {
  std::vector<std::int64_t> shape;           ///< reshape/broadcast target; random output shape
  std::vector<std::int64_t> axes;            ///< permute order; reduce axes
  std::vector<std::int64_t> indices;         ///< gather/scatter_add positions along `axis`
  std::vector<std::int64_t> kernel;          ///< pooling window
  std::vector<std::int64_t> stride;          ///< conv/pool strides
  std::vector<std::int64_t> padding;         ///< conv/pool zero padding, per spatial dim
  std::vector<std::int64_t> dilation;        ///< conv dilation
  std::vector<std::int64_t> output_padding;  ///< conv_transpose extra output size
  std::int64_t axis = -1;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::int64_t groups = 1;
  std::int64_t k = 1;
  double alpha = 1.0;        ///< scale and scaled_matmul factor
  double lo = 0.0;           ///< clamp bounds
  double hi = 0.0;
  double eps = 0.0;          ///< 0 = the op's default (safe_log 1e-12, norms 1e-5)
  double temperature = 1.0;  ///< distill, smooth_max_pool
  double p = 0.5;            ///< bernoulli_mask probability of 1
  double scale = 0.0;        ///< attention score scale; 0 = 1/sqrt(d)
  std::uint64_t seed = 0;    ///< random ops
  DType dtype = DType::F32;  ///< random ops' output type
  bool keepdim = false;
  bool causal = false;       ///< attention: key j allowed iff j <= i
};

/// Whether input `index` of `op` ever takes a gradient. Ops that need no VJP (§1.3: random sources,
/// top_k_mask) take none, and neither do selector inputs: the masks of hard_masked_softmax and
/// scaled_dot_product_attention. (Gather and scatter indices are payload, not inputs.)
constexpr bool input_takes_gradient(Op op, std::size_t index) {
  if (!requires_vjp(op)) return false;
  if (op == Op::HardMaskedSoftmax) return index != 1;
  if (op == Op::ScaledDotProductAttention) return index != 3;
  return true;
}

/// The payload limits of the unary ops that read one, shared by every provider so that each
/// refuses exactly what the reference refuses, with the same code and message: scale's alpha
/// finite, clamp's bounds ordered (NaN is not), safe_log's eps finite and >= 0. Other ops pass.
RuntimeStatus check_unary_payload(Op op, const OpAttrs& attrs);

}  // namespace capsule
