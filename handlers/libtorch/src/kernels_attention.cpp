// SPDX-License-Identifier: Apache-2.0
// LibTorch kernels of the attention family, forward and local adjoint: hard_masked_softmax,
// scaled_matmul, softmax_matmul and scaled_dot_product_attention (the SDPA bridge), with the
// conventions of capsule/runtime/op_args.hpp and the semantics of docs/special-values.md.
//
// TorchLean's hard mask wins over ATen's where they differ (docs/libtorch.md lists each case):
// a blocked entry weighs exactly 0 whatever its row holds, a fully blocked row is all zeros
// (ATen's softmax of an all −inf row is NaN), and a blocked key adds no term to the adjoints.
// Every fix is an ATen op (where, any, logical_or), so the same composition stays right under
// LibTorch autograd. Our masks are F32/F64 (nonzero = allowed); ATen needs kBool, so each mask is
// converted once per call, and counted (count_conversion).
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/any.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/isinf.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/max.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/where.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention_contracts.hpp"
#include "boundary.hpp"
#include "sdpa_shim.hpp"

namespace capsule::libtorch {

// The operand contracts and mask helpers shared with the autograd regions
// (attention_contracts.hpp).

at::Tensor allowed_of(Op op, const Tensor& mask) {
  count_conversion(op);
  return at::ne(view_input(mask), 0);
}

at::Tensor zero_like_scalar(const at::Tensor& like) { return at::scalar_tensor(0, like.options()); }

at::Tensor minus_infinity_like(const at::Tensor& like) {
  return at::scalar_tensor(-std::numeric_limits<double>::infinity(), like.options());
}

at::Tensor masked_softmax(const at::Tensor& x, const at::Tensor& allowed, std::int64_t dim) {
  const at::Tensor weights = at::_softmax(at::where(allowed, x, minus_infinity_like(x)), dim, false);
  return at::where(allowed, weights, zero_like_scalar(x));
}

RuntimeResult<std::int64_t> expect_masked(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs("hard_masked_softmax", inputs, 2, 2));
  if (inputs[0].shape() != inputs[1].shape()) {
    return shape_error("hard_masked_softmax", str("mask has shape ", to_string(inputs[1].shape()), " but scores have ",
                                                  to_string(inputs[0].shape()),
                                                  "; expected the mask to have the scores' shape"));
  }
  if (inputs[0].rank() == 0) {
    // One lane of one entry, as the reference and ATen read a rank-0 tensor.
    if (attrs.axis == 0 || attrs.axis == -1) return 0;
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("hard_masked_softmax: axis ", attrs.axis,
                             " is out of range for a rank-0 tensor; expected -1 or 0 (its one entry)"));
  }
  CAPSULE_TRY(std::size_t axis, normalize_axis("hard_masked_softmax", attrs.axis, inputs[0].rank()));
  return static_cast<std::int64_t>(axis);
}

RuntimeResult<std::vector<std::int64_t>> expect_product(std::string_view op, Inputs inputs) {
  CAPSULE_CHECK(expect_inputs(op, inputs, 2, 2));
  const Tensor& a = inputs[0];
  const Tensor& b = inputs[1];
  bool ok = a.rank() >= 2 && a.rank() == b.rank();
  for (std::size_t d = 0; ok && d + 2 < a.rank(); ++d) ok = a.dim(d) == b.dim(d);
  if (!ok || a.dim(a.rank() - 1) != b.dim(b.rank() - 2)) {
    return shape_error(op, str("operands have shapes ", to_string(a.shape()), " and ", to_string(b.shape()),
                               "; expected a [.., m, k] and b [.., k, n] of one rank >= 2 with equal leading dims"));
  }
  std::vector<std::int64_t> dims = a.shape().to_vector();
  dims.back() = b.dim(b.rank() - 1);
  return dims;
}

RuntimeStatus expect_finite_alpha(const OpAttrs& attrs) {
  if (std::isfinite(attrs.alpha)) return std::monostate{};
  return runtime_error(RuntimeCode::InvalidArgument,
                       str("scaled_matmul: alpha is ", attrs.alpha, "; expected a finite number"));
}

RuntimeResult<Attention> plan_attention(Inputs inputs, const OpAttrs& attrs) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  CAPSULE_CHECK(expect_inputs(op, inputs, 3, 4));
  const Tensor& q = inputs[0];
  const Tensor& k = inputs[1];
  const Tensor& v = inputs[2];
  const std::size_t r = q.rank();
  const std::string shapes = str("q ", to_string(q.shape()), ", k ", to_string(k.shape()), ", v ", to_string(v.shape()));
  if (r < 2 || k.rank() != r || v.rank() != r) {
    return shape_error(op, str(shapes, "; expected q [.., n, d], k [.., m, d], v [.., m, dv] of one rank >= 2"));
  }
  Attention p;
  for (std::size_t i = 0; i + 2 < r; ++i) {
    if (k.dim(i) != q.dim(i) || v.dim(i) != q.dim(i)) {
      return shape_error(op, str(shapes, " differ in batch dim ", i, "; expected equal leading dims"));
    }
    p.batch *= q.dim(i);
  }
  p.n = q.dim(r - 2);
  p.d = q.dim(r - 1);
  p.m = k.dim(r - 2);
  p.dv = v.dim(r - 1);
  if (k.dim(r - 1) != p.d || v.dim(r - 2) != p.m) {
    return shape_error(op, str(shapes, "; expected k [.., m, d] with q's d = ", p.d, " and v [.., m, dv] with k's m = ", p.m));
  }
  if (has_input(inputs, 3)) {
    const Tensor& mask = inputs[3];
    const bool plain = mask.rank() == 2 && mask.dim(0) == p.n && mask.dim(1) == p.m;
    bool batched = mask.rank() == r && mask.dim(r - 2) == p.n && mask.dim(r - 1) == p.m;
    for (std::size_t i = 0; batched && i + 2 < r; ++i) batched = mask.dim(i) == q.dim(i);
    if (!plain && !batched) {
      return shape_error(op, str("mask has shape ", to_string(mask.shape()), " for ", shapes, "; expected [", p.n, ", ",
                                 p.m, "] or the batch dims followed by [", p.n, ", ", p.m, "]"));
    }
    p.batched_mask = !plain;
  }
  if (!std::isfinite(attrs.scale)) {
    return runtime_error(RuntimeCode::InvalidArgument, str(op, ": scale is ", attrs.scale, "; expected a finite number"));
  }
  if (attrs.scale != 0.0) {
    p.scale = attrs.scale;
  } else if (p.d > 0) {
    p.scale = 1.0 / std::sqrt(static_cast<double>(p.d));
  } else {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, ": scale 0 asks for 1/sqrt(d) but q ", to_string(q.shape()),
                             " has d = 0; expected d >= 1 or an explicit scale"));
  }
  p.out_dims = q.shape().to_vector();
  p.out_dims[r - 1] = p.dv;
  return p;
}

at::Tensor attention_allowed(const Attention& p, Inputs inputs, const OpAttrs& attrs) {
  at::Tensor allowed;
  if (has_input(inputs, 3)) {
    allowed = allowed_of(Op::ScaledDotProductAttention, inputs[3]).view({p.batched_mask ? p.batch : 1, p.n, p.m});
  }
  if (attrs.causal) {
    const at::Tensor causal = at::ones({1, p.n, p.m}, view_input(inputs[0]).options().dtype(at::kBool)).tril();
    allowed = allowed.defined() ? at::logical_and(allowed, causal) : causal;
  }
  return allowed;
}

AttentionViews attention_views(const Attention& p, Inputs inputs, const OpAttrs& attrs) {
  AttentionViews a;
  a.q = view_input(inputs[0]).view({p.batch, p.n, p.d});
  a.k = view_input(inputs[1]).view({p.batch, p.m, p.d});
  a.v = view_input(inputs[2]).view({p.batch, p.m, p.dv});
  a.allowed = attention_allowed(p, inputs, attrs);
  return a;
}

at::Tensor attention_weights(const Attention& p, const AttentionViews& a) {
  const at::Tensor scores = at::mul(at::matmul(a.q, last_two_swapped(a.k)), p.scale);
  if (!a.allowed.defined()) return at::_softmax(scores, -1, false);
  return masked_softmax(scores, a.allowed, -1);
}

namespace {

// ---------------------------------------------------------------------------------------------
// hard_masked_softmax (scores, mask): mask has the scores' shape.

RuntimeResult<Tensor> hard_masked_softmax_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(const std::int64_t dim, expect_masked(inputs, attrs));
  return guarded("hard_masked_softmax", [&] {
    return write_like("hard_masked_softmax", inputs[0], [&](at::Tensor& out) {
      const at::Tensor x = view_input(inputs[0]);
      const at::Tensor allowed = allowed_of(Op::HardMaskedSoftmax, inputs[1]);
      const at::Tensor weights = at::_softmax(at::where(allowed, x, minus_infinity_like(x)), dim, false);
      at::where_out(out, allowed, weights, zero_like_scalar(x));
    });
  });
}

/// dx = y ⊙ (g − Σ_allowed g·y) on allowed entries, exactly 0 on blocked ones: a blocked entry
/// adds no term, so a NaN or infinite gradient there cannot reach its lane. The mask takes no
/// gradient.
Grads hard_masked_softmax_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_TRY(const std::int64_t dim, expect_masked(inputs, attrs));
  CAPSULE_CHECK(expect_grad("hard_masked_softmax", inputs, output, grad));
  return guarded("hard_masked_softmax", [&]() -> Grads {
    const at::Tensor y = view_input(output);
    const at::Tensor g = view_input(grad);
    CAPSULE_TRY(Tensor dx, write_like("hard_masked_softmax", inputs[0], [&](at::Tensor& out) {
      const at::Tensor allowed = allowed_of(Op::HardMaskedSoftmax, inputs[1]);
      const at::Tensor zero = zero_like_scalar(y);
      const at::Tensor dot = at::sum(at::where(allowed, at::mul(g, y), zero), {dim}, true);
      at::where_out(out, allowed, at::mul(y, at::sub(g, dot)), zero);
    }));
    return std::vector<Tensor>{dx, Tensor()};
  });
}

// ---------------------------------------------------------------------------------------------
// scaled_matmul (a, b; alpha) and softmax_matmul (a, b): a [.., m, k], b [.., k, n] of one rank
// >= 2 with equal leading dims.

/// alpha·(a·b): the product, then one scaling of each element, as the reference rounds it.
RuntimeResult<Tensor> scaled_matmul_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(const std::vector<std::int64_t> dims, expect_product("scaled_matmul", inputs));
  CAPSULE_CHECK(expect_finite_alpha(attrs));
  return guarded("scaled_matmul", [&] {
    return write_new("scaled_matmul", dims, inputs[0].dtype(), [&](at::Tensor& out) {
      at::matmul_out(out, view_input(inputs[0]), view_input(inputs[1]));
      out.mul_(attrs.alpha);
    });
  });
}

/// The incoming gradient is scaled once, then matmul's adjoints run on it (the reference's order).
Grads scaled_matmul_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_product("scaled_matmul", inputs));
  CAPSULE_CHECK(expect_finite_alpha(attrs));
  CAPSULE_CHECK(expect_grad("scaled_matmul", inputs, output, grad));
  return guarded("scaled_matmul", [&]() -> Grads {
    const at::Tensor a = view_input(inputs[0]);
    const at::Tensor b = view_input(inputs[1]);
    const at::Tensor g = at::mul(view_input(grad), attrs.alpha);
    CAPSULE_TRY(Tensor ga, write_like("scaled_matmul", inputs[0], [&](at::Tensor& out) {
      at::matmul_out(out, g, last_two_swapped(b));
    }));
    CAPSULE_TRY(Tensor gb, write_like("scaled_matmul", inputs[1], [&](at::Tensor& out) {
      at::matmul_out(out, last_two_swapped(a), g);
    }));
    return std::vector<Tensor>{ga, gb};
  });
}

RuntimeResult<Tensor> softmax_matmul_forward(Inputs inputs, const OpAttrs& /*attrs*/) {
  CAPSULE_TRY(const std::vector<std::int64_t> dims, expect_product("softmax_matmul", inputs));
  return guarded("softmax_matmul", [&] {
    return write_new("softmax_matmul", dims, inputs[0].dtype(), [&](at::Tensor& out) {
      at::matmul_out(out, at::_softmax(view_input(inputs[0]), -1, false), view_input(inputs[1]));
    });
  });
}

/// S = softmax(a); da = S ⊙ (g·bᵀ − Σ S·(g·bᵀ)) (ATen's softmax adjoint), db = Sᵀ·g.
Grads softmax_matmul_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_product("softmax_matmul", inputs));
  CAPSULE_CHECK(expect_grad("softmax_matmul", inputs, output, grad));
  return guarded("softmax_matmul", [&]() -> Grads {
    const at::Tensor s = at::_softmax(view_input(inputs[0]), -1, false);
    const at::Tensor g = view_input(grad);
    CAPSULE_TRY(Tensor ga, write_like("softmax_matmul", inputs[0], [&](at::Tensor& out) {
      const at::Tensor ds = at::matmul(g, last_two_swapped(view_input(inputs[1])));
      at::_softmax_backward_data_out(out, ds, s, -1, s.scalar_type());
    }));
    CAPSULE_TRY(Tensor gb, write_like("softmax_matmul", inputs[1], [&](at::Tensor& out) {
      at::matmul_out(out, last_two_swapped(s), g);
    }));
    return std::vector<Tensor>{ga, gb};
  });
}

// ---------------------------------------------------------------------------------------------
// scaled_dot_product_attention (q [.., n, d], k [.., m, d], v [.., m, dv], mask [n, m] |
// [.., n, m]?; scale (0 = 1/sqrt(d)), causal). Computed on 3-d views [batch, n, d] of our
// contiguous inputs.

/// Whether ATen's fused SDPA gives TorchLean's result for these operands. It adds the blocked
/// keys' −inf to the scores, so a NaN or ±inf score at a blocked key (from a non-finite q or k, or
/// a product that overflows) would make the whole row NaN where TorchLean ignores the blocked key;
/// such operands take the composed path instead, which never reads a blocked score.
bool fused_is_exact(const Attention& p, const AttentionViews& a) {
  if (p.batch == 0 || p.n == 0 || p.m == 0 || p.d == 0) return true;
  const double q_max = at::max(at::abs(a.q)).item<double>();
  const double k_max = at::max(at::abs(a.k)).item<double>();
  // Every score and partial sum is at most d·max|q|·max|k| times the largest factor q meets
  // (scale·sqrt(d) when the shim pre-scales q, scale or 1/sqrt(d) inside ATen).
  const double factor = std::max({1.0, std::abs(p.scale), std::abs(p.scale) * std::sqrt(static_cast<double>(p.d))});
  const double bound = static_cast<double>(p.d) * q_max * k_max * factor;
  const double limit = a.q.scalar_type() == at::kFloat ? double(std::numeric_limits<float>::max())
                                                        : std::numeric_limits<double>::max();
  return std::isfinite(bound) && bound < limit / 4;
}

bool all_finite(const at::Tensor& t) { return t.numel() == 0 || at::isfinite(t).all().item<bool>(); }

/// out = Σ_j w[.., r, j]·x[.., j, :] over the edges `allowed` lets through (kBool, broadcast over
/// the batch): a blocked edge adds no term, so a NaN or ±inf in x there cannot reach the row
/// (TorchLean's hard mask removes the edge; ATen's product would give 0·inf = NaN). The finite
/// part is one product with the non-finite entries of x zeroed; the non-finite entries are then
/// put back by counting, per output element, the allowed edges that meet them (0/1 products, exact
/// for any realistic length): NaN when an allowed edge meets NaN, or meets ±inf with weight 0, or
/// both infinities meet; else ±inf when one does; else the finite part. w is a softmax (>= 0 or
/// NaN on a whole row), so an infinity keeps its sign. Used only when x has a non-finite entry.
void masked_weighted_sum_out(at::Tensor& out, const at::Tensor& w, const at::Tensor& allowed, const at::Tensor& x) {
  const auto as_count = [&](const at::Tensor& flags) { return flags.to(w.scalar_type()); };
  const at::Tensor zero = zero_like_scalar(x);
  const at::Tensor finite_part = at::matmul(w, at::where(at::isfinite(x), x, zero));
  const at::Tensor positive = at::logical_and(allowed, at::gt(w, 0));
  const at::Tensor zero_weight = at::logical_and(allowed, at::eq(w, 0));
  const double inf = std::numeric_limits<double>::infinity();
  const at::Tensor nan_hits = at::add(at::matmul(as_count(allowed), as_count(at::isnan(x))),
                                      at::matmul(as_count(zero_weight), as_count(at::isinf(x))));
  const at::Tensor plus = at::gt(at::matmul(as_count(positive), as_count(at::eq(x, inf))), 0);
  const at::Tensor minus = at::gt(at::matmul(as_count(positive), as_count(at::eq(x, -inf))), 0);
  const at::Tensor poisoned = at::logical_or(at::gt(nan_hits, 0), at::logical_and(plus, minus));
  const at::Tensor infinite = at::where(plus, at::scalar_tensor(inf, x.options()),
                                        at::where(minus, at::scalar_tensor(-inf, x.options()), finite_part));
  at::where_out(out, poisoned, at::scalar_tensor(std::numeric_limits<double>::quiet_NaN(), x.options()), infinite);
}

/// Which of attention_forward's computations the operands take.
enum class AttentionPath {
  MaskedValues,  ///< a mask and a NaN or ±inf value: the weights, then a sum that skips blocked edges
  Composed,      ///< a score could overflow or be NaN: the weights, then one product
  Fused,         ///< ATen's fused SDPA, no mask
  FusedMasked,   ///< ATen's fused SDPA under the mask, fully blocked rows zeroed after
};

AttentionPath attention_path(const Attention& p, const AttentionViews& a) {
  // A NaN or ±inf value at a blocked key must add nothing, which no fused kernel knows.
  if (a.allowed.defined() && !all_finite(a.v)) return AttentionPath::MaskedValues;
  if (!fused_is_exact(p, a)) return AttentionPath::Composed;
  return a.allowed.defined() ? AttentionPath::FusedMasked : AttentionPath::Fused;
}

/// A row with no allowed key sums no term: +0, where ATen's softmax gives NaN everywhere. Such
/// rows are handed to ATen with every key allowed (`mask`), so nothing NaN is computed for them
/// (their gradient stays finite under autograd), and their result is replaced by zeros after
/// (where `any_allowed` is false).
struct FusedMask {
  at::Tensor any_allowed, mask;
};
FusedMask fused_mask(const at::Tensor& allowed) {
  const at::Tensor any_allowed = at::any(allowed, -1, true);
  return {any_allowed, at::logical_or(allowed, at::logical_not(any_allowed))};
}

RuntimeResult<Tensor> attention_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(const Attention p, plan_attention(inputs, attrs));
  return guarded("scaled_dot_product_attention", [&] {
    return write_new("scaled_dot_product_attention", p.out_dims, inputs[0].dtype(), [&](at::Tensor& out) {
      const AttentionViews a = attention_views(p, inputs, attrs);
      at::Tensor out3 = out.view({p.batch, p.n, p.dv});
      switch (attention_path(p, a)) {
        case AttentionPath::MaskedValues:
          masked_weighted_sum_out(out3, attention_weights(p, a), a.allowed, a.v);
          return;
        case AttentionPath::Composed:
          at::matmul_out(out3, attention_weights(p, a), a.v);
          return;
        case AttentionPath::Fused:
          copy_into(Op::ScaledDotProductAttention, out3, aten_sdpa(a.q, a.k, a.v, a.allowed, p.scale));
          return;
        case AttentionPath::FusedMasked: {
          const FusedMask m = fused_mask(a.allowed);
          at::where_out(out3, m.any_allowed, aten_sdpa(a.q, a.k, a.v, m.mask, p.scale), zero_like_scalar(a.v));
          return;
        }
      }
    });
  });
}

/// The tape's local adjoint, composed from ATen ops with the reference's semantics: dv = Wᵀ·g over
/// the allowed edges;
/// dS = scale·W ⊙ (dW − Σ_allowed W·dW) with dW = g·vᵀ, exactly 0 at blocked keys (which add no
/// term, so a non-finite v or g there leaves dq and dk finite); dq = dS·k, dk = dSᵀ·q.
Grads attention_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_TRY(const Attention p, plan_attention(inputs, attrs));
  CAPSULE_CHECK(expect_grad("scaled_dot_product_attention", inputs, output, grad));
  return guarded("scaled_dot_product_attention", [&]() -> Grads {
    const AttentionViews a = attention_views(p, inputs, attrs);
    const at::Tensor w = attention_weights(p, a);
    const at::Tensor g = view_input(grad).view({p.batch, p.n, p.dv});
    at::Tensor dw = at::matmul(g, last_two_swapped(a.v));
    at::Tensor ds;
    if (a.allowed.defined()) {
      const at::Tensor zero = zero_like_scalar(dw);
      dw = at::where(a.allowed, dw, zero);
      const at::Tensor dot = at::sum(at::mul(w, dw), {-1}, true);
      ds = at::mul(at::where(a.allowed, at::mul(w, at::sub(dw, dot)), zero), p.scale);
    } else {
      ds = at::mul(at::_softmax_backward_data(dw, w, -1, w.scalar_type()), p.scale);
    }
    CAPSULE_TRY(Tensor dq, write_like("scaled_dot_product_attention", inputs[0], [&](at::Tensor& out) {
      at::Tensor out3 = out.view({p.batch, p.n, p.d});
      at::matmul_out(out3, ds, a.k);
    }));
    CAPSULE_TRY(Tensor dk, write_like("scaled_dot_product_attention", inputs[1], [&](at::Tensor& out) {
      at::Tensor out3 = out.view({p.batch, p.m, p.d});
      at::matmul_out(out3, last_two_swapped(ds), a.q);
    }));
    CAPSULE_TRY(Tensor dv, write_like("scaled_dot_product_attention", inputs[2], [&](at::Tensor& out) {
      at::Tensor out3 = out.view({p.batch, p.m, p.dv});
      if (a.allowed.defined() && !all_finite(g)) {
        // A blocked query adds no term to a key's gradient: the forward's edges, transposed.
        masked_weighted_sum_out(out3, last_two_swapped(w), last_two_swapped(a.allowed), g);
      } else {
        at::matmul_out(out3, last_two_swapped(w), g);
      }
    }));
    std::vector<Tensor> grads{dq, dk, dv};
    if (inputs.size() == 4) grads.emplace_back();  // the mask takes no gradient
    return grads;
  });
}

}  // namespace

RuntimeResult<std::string> attention_route(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(const Attention p, plan_attention(inputs, attrs));
  return guarded("scaled_dot_product_attention", [&]() -> RuntimeResult<std::string> {
    const AttentionViews a = attention_views(p, inputs, attrs);
    switch (attention_path(p, a)) {
      case AttentionPath::MaskedValues:
        return std::string("composed ATen ops: the masked softmax weights, then a sum that skips blocked edges "
                           "(a value is NaN or infinite and keys are masked)");
      case AttentionPath::Composed:
        return std::string("composed ATen ops: the masked softmax weights, then one product (a score could "
                           "overflow or a q or k entry is not finite, which ATen's fused kernel would turn into NaN)");
      case AttentionPath::Fused:
        return str("ATen's fused SDPA, no mask: ", aten_sdpa_backend(a.q, a.k, a.v, a.allowed, p.scale));
      case AttentionPath::FusedMasked:
        return str("ATen's fused SDPA under the mask, fully blocked rows zeroed after: ",
                   aten_sdpa_backend(a.q, a.k, a.v, fused_mask(a.allowed).mask, p.scale));
    }
    return std::string("unknown path");
  });
}

RuntimeStatus register_attention_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(registry.add(spec_for(Op::HardMaskedSoftmax, hard_masked_softmax_forward, hard_masked_softmax_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::ScaledMatmul, scaled_matmul_forward, scaled_matmul_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::SoftmaxMatmul, softmax_matmul_forward, softmax_matmul_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::ScaledDotProductAttention, attention_forward, attention_backward)));
  return std::monostate{};
}

}  // namespace capsule::libtorch

namespace capsule {

RuntimeResult<std::string> libtorch_attention_route(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  return libtorch::attention_route(inputs, attrs);
}

std::string libtorch_sdp_backend_name(std::int64_t choice) { return libtorch::sdp_backend_name(choice); }

}  // namespace capsule
