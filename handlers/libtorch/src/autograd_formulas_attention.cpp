// SPDX-License-Identifier: Apache-2.0
// External-autograd region formulas of the attention family (autograd_formulas_attention.hpp).
// Each is composed from differentiable ATen functional ops (matmul, _softmax, where, mul, sum),
// never ATen's fused SDPA kernel: 1.13's private `_scaled_dot_product_attention` differentiates
// its math path, whose gradient at a blocked NaN/±inf value is NaN for the whole row, and whose
// forward gives NaN for a fully blocked row (docs/libtorch.md, "External autograd"). The hard
// mask is applied with `where`, so autograd's gradient is the reference's adjoint: a blocked
// entry takes exactly 0 and adds no term to its row, and a fully blocked row is zeros with a zero
// gradient.
#include "autograd_formulas_attention.hpp"

#include <ATen/ops/_softmax.h>
#include <ATen/ops/all.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>

#include <cstdint>

#include "attention_contracts.hpp"

namespace capsule::libtorch {
namespace {

bool has_non_finite(const at::Tensor& t) { return t.numel() != 0 && !at::isfinite(t).all().item<bool>(); }

/// out[b, i, :] = Σ_j W[b, i, j]·v[b, j, :] over the allowed edges only, formed edge by edge
/// ([batch, n, m, dv]) so that `where` can drop a blocked edge's product: a NaN or ±inf value at
/// a blocked key then adds nothing to the output, and autograd's gradient of v is Σ_i W·g over
/// the allowed edges (the reference's masked product), whatever v holds. Used only when v has a
/// non-finite entry, because it costs n·m·dv elements where the product costs n·dv.
at::Tensor masked_edge_sum(const at::Tensor& w, const at::Tensor& allowed, const at::Tensor& v) {
  const at::Tensor products = at::mul(w.unsqueeze(-1), v.unsqueeze(1));
  return at::sum(at::where(allowed.unsqueeze(-1), products, zero_like_scalar(v)), {2});
}

/// The most elements the edge-wise product may take (2^27: 512 MiB in float32, 1 GiB in float64),
/// so that an input crafted with a non-finite v cannot make one call allocate without bound.
constexpr std::int64_t kEdgeProductLimit = std::int64_t{1} << 27;

RuntimeResult<at::Tensor> attention(const std::vector<at::Tensor>& in, Inputs ours, const OpAttrs& attrs) {
  CAPSULE_TRY(const Attention p, plan_attention(ours, attrs));
  AttentionViews a;
  a.q = in[0].reshape({p.batch, p.n, p.d});
  a.k = in[1].reshape({p.batch, p.m, p.d});
  a.v = in[2].reshape({p.batch, p.m, p.dv});
  a.allowed = attention_allowed(p, ours, attrs);
  const bool edge_wise = a.allowed.defined() && has_non_finite(a.v);
  // In double: the product of four int64 dims may overflow int64, never a double's range here.
  const double edges = double(p.batch) * double(p.n) * double(p.m) * double(p.dv);
  if (edge_wise && edges > static_cast<double>(kEdgeProductLimit)) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("scaled_dot_product_attention: v holds a NaN or infinity and a mask or the causal flag "
                             "blocks keys, so the autograd region must form every allowed edge's product (batch·n·m·dv "
                             "= ",
                             edges, " elements), above its limit of ", kEdgeProductLimit,
                             "; expected a finite v or a smaller call (docs/libtorch.md, \"External autograd\")"));
  }
  const at::Tensor w = attention_weights(p, a);
  const at::Tensor out = edge_wise ? masked_edge_sum(w, a.allowed, a.v) : at::matmul(w, a.v);
  return out.reshape(p.out_dims);
}

}  // namespace

RuntimeStatus check_attention_region(Op op, Inputs inputs, const OpAttrs& attrs) {
  switch (op) {
    case Op::HardMaskedSoftmax: {
      CAPSULE_TRY(const std::int64_t dim, expect_masked(inputs, attrs));
      (void)dim;
      return std::monostate{};
    }
    case Op::SoftmaxMatmul: {
      CAPSULE_TRY(const std::vector<std::int64_t> dims, expect_product("softmax_matmul", inputs));
      (void)dims;
      return std::monostate{};
    }
    case Op::ScaledDotProductAttention: {
      CAPSULE_TRY(const Attention p, plan_attention(inputs, attrs));
      (void)p;
      return std::monostate{};
    }
    default:
      return runtime_error(RuntimeCode::InvalidArgument,
                           str("LibTorch ", to_string(op), ": not an attention-family region"));
  }
}

RuntimeResult<at::Tensor> attention_region_formula(Op op, const std::vector<at::Tensor>& in, Inputs ours,
                                                   const OpAttrs& attrs) {
  switch (op) {
    case Op::HardMaskedSoftmax: {
      CAPSULE_TRY(const std::int64_t dim, expect_masked(ours, attrs));
      return masked_softmax(in[0], allowed_of(op, ours[1]), dim);
    }
    // S = softmax(a) along the last axis, then S·b; autograd's softmax adjoint is the reference's.
    case Op::SoftmaxMatmul: return at::matmul(at::_softmax(in[0], -1, false), in[1]);
    case Op::ScaledDotProductAttention: return attention(in, ours, attrs);
    default:
      return runtime_error(RuntimeCode::InvalidArgument,
                           str("LibTorch ", to_string(op), ": not an attention-family region"));
  }
}

}  // namespace capsule::libtorch
