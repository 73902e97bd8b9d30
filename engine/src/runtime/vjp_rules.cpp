// SPDX-License-Identifier: Apache-2.0
#include "vjp_rules.hpp"

#include <numeric>

#include "capsule/runtime/session.hpp"
#include "capsule/text.hpp"

namespace capsule {
namespace {

using Grads = std::vector<Tensor>;

OpAttrs with_axes(std::vector<std::int64_t> axes, bool keepdim) {
  OpAttrs attrs;
  attrs.axes = std::move(axes);
  attrs.keepdim = keepdim;
  return attrs;
}

OpAttrs with_shape(const Shape& shape) {
  OpAttrs attrs;
  attrs.shape = shape.to_vector();
  return attrs;
}

OpAttrs with_alpha(double alpha) {
  OpAttrs attrs;
  attrs.alpha = alpha;
  return attrs;
}

RuntimeResult<Tensor> ones_like(VjpDispatch& d, const Tensor& t) { return d.full(t.shape(), t.dtype(), 1.0); }

/// Swaps the last two axes (matmul transposes).
RuntimeResult<Tensor> transpose_last2(VjpDispatch& d, const Tensor& t) {
  OpAttrs attrs;
  attrs.axes.resize(t.rank());
  std::iota(attrs.axes.begin(), attrs.axes.end(), std::int64_t{0});
  std::swap(attrs.axes[t.rank() - 1], attrs.axes[t.rank() - 2]);
  return d.op(Op::Permute, {t}, attrs);
}

/// Broadcasts a (possibly scalar) gradient to `shape`.
RuntimeResult<Tensor> broadcast_to(VjpDispatch& d, const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  return d.op(Op::Broadcast, {t}, with_shape(shape));
}

/// Sums `g` (of a broadcast's output shape) back to `shape`.
RuntimeResult<Tensor> sum_to(VjpDispatch& d, const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const std::size_t lead = g.rank() - shape.rank();
  std::vector<std::int64_t> axes;
  for (std::size_t i = 0; i < g.rank(); ++i) {
    if (i < lead || (shape[i - lead] == 1 && g.dim(i) != 1)) axes.push_back(static_cast<std::int64_t>(i));
  }
  Tensor summed = g;
  if (!axes.empty()) {
    CAPSULE_TRY(summed, d.op(Op::ReduceSum, {g}, with_axes(axes, true)));
  }
  return d.op(Op::Reshape, {summed}, with_shape(shape));
}

/// The reduce_sum axes of a softmax-family VJP: the softmax axis, or every axis (none) for a
/// rank-0 tensor, which the softmax family treats as one lane of one entry.
RuntimeResult<std::vector<std::int64_t>> softmax_vjp_axes(std::string_view what, std::int64_t axis,
                                                          std::size_t rank) {
  if (rank == 0) return std::vector<std::int64_t>{};
  CAPSULE_TRY(std::size_t a, normalize_axis(what, axis, rank));
  return std::vector<std::int64_t>{static_cast<std::int64_t>(a)};
}

/// y·(g − Σ_axis g·y), the softmax VJP.
RuntimeResult<Tensor> softmax_vjp(VjpDispatch& d, const Tensor& y, const Tensor& g, std::int64_t axis) {
  CAPSULE_TRY(std::vector<std::int64_t> axes, softmax_vjp_axes("softmax VJP", axis, y.rank()));
  CAPSULE_TRY(Tensor gy, d.op(Op::Mul, {g, y}));
  CAPSULE_TRY(Tensor s, d.op(Op::ReduceSum, {gy}, with_axes(std::move(axes), true)));
  CAPSULE_TRY(Tensor sb, broadcast_to(d, s, y.shape()));
  CAPSULE_TRY(Tensor centered, d.op(Op::Sub, {g, sb}));
  return d.op(Op::Mul, {y, centered});
}

RuntimeResult<Tensor> matmul_grad_a(VjpDispatch& d, const Tensor& g, const Tensor& b) {
  CAPSULE_TRY(Tensor bt, transpose_last2(d, b));
  return d.op(Op::Matmul, {g, bt});
}

RuntimeResult<Tensor> matmul_grad_b(VjpDispatch& d, const Tensor& a, const Tensor& g) {
  CAPSULE_TRY(Tensor at, transpose_last2(d, a));
  return d.op(Op::Matmul, {at, g});
}

RuntimeResult<Grads> unary(const VjpCall& c, RuntimeResult<Tensor> gx) {
  if (!gx) return fail(std::move(gx).error());
  (void)c;
  return Grads{std::move(gx).value()};
}

RuntimeResult<Grads> rule(VjpDispatch& d, const VjpCall& c) {
  // Selections (relu, abs, clamp, max, min, safe_log, hard_masked_softmax), erf-based gelu, the
  // range-safe quotient rule of div, windows (conv, pools), fused statistics (norms, distill) and
  // attention: the adjoint kernel of the capsule's own handler supplies the local VJP.
  if (vjp_rule_uses_adjoint(c.op)) return d.adjoint();
  const Tensor& g = *c.grad;
  const Tensor& y = *c.output;
  const OpAttrs& attrs = *c.attrs;
  auto in = [&](std::size_t i) -> const Tensor& { return c.inputs[i]; };
  switch (c.op) {
    case Op::Add: return Grads{g, g};
    case Op::Sub: {
      CAPSULE_TRY(Tensor gb, d.op(Op::Neg, {g}));
      return Grads{g, gb};
    }
    case Op::Mul: {
      Grads out(2);
      if (c.needs_grad(0)) { CAPSULE_TRY(out[0], d.op(Op::Mul, {g, in(1)})); }
      if (c.needs_grad(1)) { CAPSULE_TRY(out[1], d.op(Op::Mul, {g, in(0)})); }
      return out;
    }
    case Op::Neg: return unary(c, d.op(Op::Neg, {g}));
    case Op::Scale: return unary(c, d.op(Op::Scale, {g}, with_alpha(attrs.alpha)));
    case Op::Exp: return unary(c, d.op(Op::Mul, {g, y}));
    case Op::Log: return unary(c, d.op(Op::Div, {g, in(0)}));
    case Op::Sqrt: {  // d√x = 1 / (2√x)
      CAPSULE_TRY(Tensor half, d.op(Op::Scale, {g}, with_alpha(0.5)));
      return unary(c, d.op(Op::Div, {half, y}));
    }
    case Op::Inv: {  // d(1/x) = −y²
      CAPSULE_TRY(Tensor y2, d.op(Op::Mul, {y, y}));
      CAPSULE_TRY(Tensor gy2, d.op(Op::Mul, {g, y2}));
      return unary(c, d.op(Op::Neg, {gy2}));
    }
    case Op::Sin: {
      CAPSULE_TRY(Tensor cosx, d.op(Op::Cos, {in(0)}));
      return unary(c, d.op(Op::Mul, {g, cosx}));
    }
    case Op::Cos: {
      CAPSULE_TRY(Tensor sinx, d.op(Op::Sin, {in(0)}));
      CAPSULE_TRY(Tensor gs, d.op(Op::Mul, {g, sinx}));
      return unary(c, d.op(Op::Neg, {gs}));
    }
    case Op::Tanh: {  // 1 − y²
      CAPSULE_TRY(Tensor one, ones_like(d, y));
      CAPSULE_TRY(Tensor y2, d.op(Op::Mul, {y, y}));
      CAPSULE_TRY(Tensor slope, d.op(Op::Sub, {one, y2}));
      return unary(c, d.op(Op::Mul, {g, slope}));
    }
    case Op::Sigmoid: {  // y(1 − y)
      CAPSULE_TRY(Tensor one, ones_like(d, y));
      CAPSULE_TRY(Tensor rest, d.op(Op::Sub, {one, y}));
      CAPSULE_TRY(Tensor slope, d.op(Op::Mul, {y, rest}));
      return unary(c, d.op(Op::Mul, {g, slope}));
    }
    case Op::Softplus: {  // σ(x)
      CAPSULE_TRY(Tensor s, d.op(Op::Sigmoid, {in(0)}));
      return unary(c, d.op(Op::Mul, {g, s}));
    }
    case Op::Silu: {  // σ(x)·(1 + x·(1 − σ(x)))
      CAPSULE_TRY(Tensor s, d.op(Op::Sigmoid, {in(0)}));
      CAPSULE_TRY(Tensor one, ones_like(d, s));
      CAPSULE_TRY(Tensor rest, d.op(Op::Sub, {one, s}));
      CAPSULE_TRY(Tensor xr, d.op(Op::Mul, {in(0), rest}));
      CAPSULE_TRY(Tensor inner, d.op(Op::Add, {one, xr}));
      CAPSULE_TRY(Tensor slope, d.op(Op::Mul, {s, inner}));
      return unary(c, d.op(Op::Mul, {g, slope}));
    }
    case Op::Softmax: return unary(c, softmax_vjp(d, y, g, attrs.axis));
    case Op::LogSoftmax: {  // g − softmax(x)·Σ_axis g, with softmax(x) = exp(y)
      CAPSULE_TRY(std::vector<std::int64_t> axes, softmax_vjp_axes("log_softmax VJP", attrs.axis, y.rank()));
      CAPSULE_TRY(Tensor s, d.op(Op::ReduceSum, {g}, with_axes(std::move(axes), true)));
      CAPSULE_TRY(Tensor sb, broadcast_to(d, s, y.shape()));
      CAPSULE_TRY(Tensor p, d.op(Op::Exp, {y}));
      CAPSULE_TRY(Tensor ps, d.op(Op::Mul, {p, sb}));
      return unary(c, d.op(Op::Sub, {g, ps}));
    }
    case Op::ReduceSum:
    case Op::ReduceMean: {
      const Tensor& x = in(0);
      std::vector<std::int64_t> kept = x.shape().to_vector();
      std::int64_t count = 1;
      if (attrs.axes.empty()) {
        for (auto& dim : kept) dim = 1;
        count = x.numel();
      } else {
        for (std::int64_t axis : attrs.axes) {
          CAPSULE_TRY(std::size_t a, normalize_axis(to_string(c.op), axis, x.rank()));
          count *= x.dim(a);
          kept[a] = 1;
        }
      }
      OpAttrs reshape;
      reshape.shape = kept;
      CAPSULE_TRY(Tensor gk, d.op(Op::Reshape, {g}, reshape));
      CAPSULE_TRY(Tensor gb, broadcast_to(d, gk, x.shape()));
      if (c.op == Op::ReduceSum || count == 0) return Grads{gb};
      return unary(c, d.op(Op::Scale, {gb}, with_alpha(1.0 / static_cast<double>(count))));
    }
    case Op::Reshape: return unary(c, d.op(Op::Reshape, {g}, with_shape(in(0).shape())));
    case Op::Permute: {
      OpAttrs inverse;
      inverse.axes.resize(attrs.axes.size());
      for (std::size_t i = 0; i < attrs.axes.size(); ++i) {
        CAPSULE_TRY(std::size_t a, normalize_axis("permute VJP", attrs.axes[i], attrs.axes.size()));
        inverse.axes[a] = static_cast<std::int64_t>(i);
      }
      return unary(c, d.op(Op::Permute, {g}, inverse));
    }
    case Op::Broadcast: return unary(c, sum_to(d, g, in(0).shape()));
    case Op::Concat: {
      CAPSULE_TRY(std::size_t a, normalize_axis("concat VJP", attrs.axis, y.rank()));
      Grads out(c.inputs.size());
      std::int64_t start = 0;
      for (std::size_t i = 0; i < c.inputs.size(); ++i) {
        OpAttrs slice;
        slice.axis = static_cast<std::int64_t>(a);
        slice.start = start;
        slice.end = start + in(i).dim(a);
        start = slice.end;
        if (c.needs_grad(i)) { CAPSULE_TRY(out[i], d.op(Op::Slice, {g}, slice)); }
      }
      return out;
    }
    case Op::Slice: {  // scatter g into zeros at positions start..end−1
      const Tensor& x = in(0);
      CAPSULE_TRY(std::size_t a, normalize_axis("slice VJP", attrs.axis, x.rank()));
      OpAttrs scatter;
      scatter.axis = static_cast<std::int64_t>(a);
      for (std::int64_t i = 0; i < g.dim(a); ++i) scatter.indices.push_back(attrs.start + i);
      CAPSULE_TRY(Tensor zero, d.full(x.shape(), x.dtype(), 0.0));
      return unary(c, d.op(Op::ScatterAdd, {zero, g}, scatter));
    }
    case Op::Gather: {
      const Tensor& x = in(0);
      CAPSULE_TRY(Tensor zero, d.full(x.shape(), x.dtype(), 0.0));
      return unary(c, d.op(Op::ScatterAdd, {zero, g}, attrs));
    }
    case Op::ScatterAdd: {
      Grads out{g, Tensor()};
      if (c.needs_grad(1)) { CAPSULE_TRY(out[1], d.op(Op::Gather, {g}, attrs)); }
      return out;
    }
    case Op::Matmul:
    case Op::ScaledMatmul: {
      Tensor gs = g;
      if (c.op == Op::ScaledMatmul) { CAPSULE_TRY(gs, d.op(Op::Scale, {g}, with_alpha(attrs.alpha))); }
      Grads out(2);
      if (c.needs_grad(0)) { CAPSULE_TRY(out[0], matmul_grad_a(d, gs, in(1))); }
      if (c.needs_grad(1)) { CAPSULE_TRY(out[1], matmul_grad_b(d, in(0), gs)); }
      return out;
    }
    case Op::SoftmaxMatmul: {  // y = S·B, S = softmax(A)
      CAPSULE_TRY(Tensor s, d.op(Op::Softmax, {in(0)}));
      Grads out(2);
      if (c.needs_grad(0)) {
        CAPSULE_TRY(Tensor gsm, matmul_grad_a(d, g, in(1)));
        CAPSULE_TRY(out[0], softmax_vjp(d, s, gsm, -1));
      }
      if (c.needs_grad(1)) { CAPSULE_TRY(out[1], matmul_grad_b(d, s, g)); }
      return out;
    }
    case Op::Linear: {  // y = x·wᵀ + b over rows of x flattened to [n, in]
      const Tensor& x = in(0);
      const Tensor& w = in(1);
      const std::int64_t features_in = w.dim(1);
      const std::int64_t features_out = w.dim(0);
      // The product of x's leading dims, not numel / in: with in = 0 there may still be rows.
      std::int64_t rows = 1;
      for (std::size_t i = 0; i + 1 < x.rank(); ++i) rows *= x.dim(i);
      OpAttrs g2_shape;
      g2_shape.shape = {rows, features_out};
      CAPSULE_TRY(Tensor g2, d.op(Op::Reshape, {g}, g2_shape));
      Grads out(c.inputs.size());
      if (c.needs_grad(0)) {
        CAPSULE_TRY(Tensor gx, d.op(Op::Matmul, {g2, w}));
        CAPSULE_TRY(out[0], d.op(Op::Reshape, {gx}, with_shape(x.shape())));
      }
      if (c.needs_grad(1)) {
        OpAttrs x2_shape;
        x2_shape.shape = {rows, features_in};
        CAPSULE_TRY(Tensor x2, d.op(Op::Reshape, {x}, x2_shape));
        CAPSULE_TRY(out[1], matmul_grad_b(d, g2, x2));
      }
      if (c.inputs.size() > 2 && c.needs_grad(2)) {
        CAPSULE_TRY(out[2], d.op(Op::ReduceSum, {g2}, with_axes({0}, false)));
      }
      return out;
    }
    case Op::MseLoss: {  // 2(p − t)/n · g
      const Tensor& p = in(0);
      CAPSULE_TRY(Tensor diff, d.op(Op::Sub, {p, in(1)}));
      const double n = p.numel() == 0 ? 1.0 : static_cast<double>(p.numel());
      CAPSULE_TRY(Tensor scaled, d.op(Op::Scale, {diff}, with_alpha(2.0 / n)));
      CAPSULE_TRY(Tensor gb, broadcast_to(d, g, p.shape()));
      CAPSULE_TRY(Tensor gp, d.op(Op::Mul, {scaled, gb}));
      Grads out{gp, Tensor()};
      if (c.needs_grad(1)) { CAPSULE_TRY(out[1], d.op(Op::Neg, {gp})); }
      return out;
    }
    case Op::CrossEntropy: {  // logits: (softmax(z)·Σ_c t − t)/n; target: −log_softmax(z)/n
      const Tensor& z = in(0);
      const Tensor& t = in(1);
      const double rows = z.rank() == 0 || z.dim(0) == 0 ? 1.0 : static_cast<double>(z.dim(0));
      CAPSULE_TRY(Tensor gb, broadcast_to(d, g, z.shape()));
      Grads out(2);
      if (c.needs_grad(0)) {
        CAPSULE_TRY(Tensor s, d.op(Op::Softmax, {z}));
        CAPSULE_TRY(Tensor mass, d.op(Op::ReduceSum, {t}, with_axes({-1}, true)));
        CAPSULE_TRY(Tensor massb, broadcast_to(d, mass, z.shape()));
        CAPSULE_TRY(Tensor sm, d.op(Op::Mul, {s, massb}));
        CAPSULE_TRY(Tensor diff, d.op(Op::Sub, {sm, t}));
        CAPSULE_TRY(Tensor per_row, d.op(Op::Scale, {diff}, with_alpha(1.0 / rows)));
        CAPSULE_TRY(out[0], d.op(Op::Mul, {per_row, gb}));
      }
      if (c.needs_grad(1)) {
        CAPSULE_TRY(Tensor ls, d.op(Op::LogSoftmax, {z}));
        CAPSULE_TRY(Tensor per_row, d.op(Op::Scale, {ls}, with_alpha(-1.0 / rows)));
        CAPSULE_TRY(out[1], d.op(Op::Mul, {per_row, gb}));
      }
      return out;
    }
    default: break;  // NOLINT: adjoint-kernel ops returned above; the rest have no VJP rule
  }
  return runtime_error(RuntimeCode::GradientUnavailable,
                       str("the TorchLean tape has no VJP rule for `", to_string(c.op), "`"));
}

}  // namespace

RuntimeResult<std::vector<Tensor>> torchlean_tape_vjp(VjpDispatch& dispatch, const VjpCall& call) {
  return rule(dispatch, call);
}

bool vjp_rule_uses_adjoint(Op op) {
  switch (op) {
    case Op::Relu:
    case Op::Abs:
    case Op::Clamp:
    case Op::Max:
    case Op::Min:
    case Op::Gelu:
    case Op::SafeLog:
    // A blocked entry's gradient is exactly 0 even when the row's sum is NaN or infinite; a
    // composition y·(g − Σ g·y) would give 0·NaN = NaN there.
    case Op::HardMaskedSoftmax:
    // −g·a/b² needs exponent scaling to stay finite where the true value is (a tiny b, an
    // infinite a), which no op of the vocabulary composes.
    case Op::Div:
    case Op::Distill:
    case Op::LayerNorm:
    case Op::BatchNorm:
    case Op::Conv:
    case Op::ConvTranspose:
    case Op::MaxPool:
    case Op::SmoothMaxPool:
    case Op::AvgPool:
    case Op::ScaledDotProductAttention: return true;
    default: return false;  // NOLINT: every other op composes its rule from runtime ops
  }
}

std::vector<Op> vjp_rule_ops(Op op) {
  // Every rule may accumulate into an input that is used twice, hence Add throughout.
  std::vector<Op> ops{Op::Add};
  auto with = [&](std::initializer_list<Op> more) { ops.insert(ops.end(), more); };
  switch (op) {
    case Op::Sub: with({Op::Neg}); break;
    case Op::Mul: with({Op::Mul}); break;
    case Op::Neg: with({Op::Neg}); break;
    case Op::Scale: with({Op::Scale}); break;
    case Op::Exp: with({Op::Mul}); break;
    case Op::Log: with({Op::Div}); break;
    case Op::Sqrt: with({Op::Scale, Op::Div}); break;
    case Op::Inv: with({Op::Mul, Op::Neg}); break;
    case Op::Sin: with({Op::Cos, Op::Mul}); break;
    case Op::Cos: with({Op::Sin, Op::Mul, Op::Neg}); break;
    case Op::Tanh:
    case Op::Sigmoid: with({Op::Mul, Op::Sub}); break;
    case Op::Softplus: with({Op::Sigmoid, Op::Mul}); break;
    case Op::Silu: with({Op::Sigmoid, Op::Sub, Op::Mul, Op::Add}); break;
    case Op::Softmax: with({Op::Mul, Op::ReduceSum, Op::Broadcast, Op::Sub}); break;
    case Op::LogSoftmax: with({Op::ReduceSum, Op::Broadcast, Op::Exp, Op::Mul, Op::Sub}); break;
    case Op::ReduceSum: with({Op::Reshape, Op::Broadcast}); break;
    case Op::ReduceMean: with({Op::Reshape, Op::Broadcast, Op::Scale}); break;
    case Op::Reshape: with({Op::Reshape}); break;
    case Op::Permute: with({Op::Permute}); break;
    case Op::Broadcast: with({Op::ReduceSum, Op::Reshape}); break;
    case Op::Concat: with({Op::Slice}); break;
    case Op::Slice:
    case Op::Gather: with({Op::ScatterAdd}); break;
    case Op::ScatterAdd: with({Op::Gather}); break;
    case Op::Matmul: with({Op::Permute, Op::Matmul}); break;
    case Op::ScaledMatmul: with({Op::Scale, Op::Permute, Op::Matmul}); break;
    case Op::SoftmaxMatmul:
      with({Op::Softmax, Op::Permute, Op::Matmul, Op::Mul, Op::ReduceSum, Op::Broadcast, Op::Sub});
      break;
    case Op::Linear: with({Op::Reshape, Op::Matmul, Op::Permute, Op::ReduceSum}); break;
    case Op::MseLoss: with({Op::Sub, Op::Scale, Op::Broadcast, Op::Mul, Op::Neg}); break;
    case Op::CrossEntropy:
      with({Op::Broadcast, Op::Softmax, Op::ReduceSum, Op::Mul, Op::Sub, Op::Scale, Op::LogSoftmax});
      break;
    default: break;  // NOLINT: adjoint-kernel rules and ops without a VJP dispatch nothing else
  }
  return ops;
}

}  // namespace capsule
