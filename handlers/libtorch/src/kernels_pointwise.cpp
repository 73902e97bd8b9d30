// SPDX-License-Identifier: Apache-2.0
// LibTorch kernels of the elementwise, softmax-family and reduction ops, forward and local
// adjoint. Where ATen's own function differs from docs/special-values.md the difference is
// fixed with ATen ops (at::where, a composed formula); docs/libtorch.md lists each one.
#include <ATen/ops/abs.h>
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/add.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/div.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/erfc.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/le.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sigmoid_backward.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/tanh_backward.h>
#include <ATen/ops/threshold.h>
#include <ATen/ops/threshold_backward.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>

#include <cmath>
#include <numbers>

#include "boundary.hpp"
#include "pointwise_semantics.hpp"

namespace capsule::libtorch {
namespace {

// ---------------------------------------------------------------------------------------------
// Binary elementwise ops: (a, b) of equal shapes (broadcasting is the explicit broadcast op, so
// ATen's implicit broadcasting is refused before the call).

RuntimeStatus expect_binary(Op op, Inputs inputs) {
  CAPSULE_CHECK(expect_inputs(to_string(op), inputs, 2, 2));
  return expect_same_shape(to_string(op), inputs[0], inputs[1]);
}

/// max/min select `a` when a is NaN or a >= b (a <= b for min): NaN from either operand, ties
/// (−0 against +0 included) to `a`. ATen's maximum/minimum do not promise which zero a tie
/// returns, so the selection is made explicitly.
at::Tensor selects_a(Op op, const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ordered = op == Op::Max ? at::ge(a, b) : at::le(a, b);
  return at::logical_or(at::isnan(a), ordered);
}

template <Op kOp>
RuntimeResult<Tensor> binary_forward(Inputs inputs, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_binary(kOp, inputs));
  return guarded(to_string(kOp), [&] {
    return write_like(to_string(kOp), inputs[0], [&](at::Tensor& out) {
      const at::Tensor a = view_input(inputs[0]);
      const at::Tensor b = view_input(inputs[1]);
      if constexpr (kOp == Op::Add) at::add_out(out, a, b);
      else if constexpr (kOp == Op::Sub) at::sub_out(out, a, b);
      else if constexpr (kOp == Op::Mul) at::mul_out(out, a, b);
      else if constexpr (kOp == Op::Div) at::div_out(out, a, b);
      else at::where_out(out, selects_a(kOp, a, b), a, b);
    });
  });
}

template <Op kOp>
Grads binary_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_binary(kOp, inputs));
  CAPSULE_CHECK(expect_grad(to_string(kOp), inputs, output, grad));
  constexpr std::string_view op = to_string(kOp);
  return guarded(op, [&]() -> Grads {
    const at::Tensor a = view_input(inputs[0]);
    const at::Tensor b = view_input(inputs[1]);
    const at::Tensor g = view_input(grad);
    CAPSULE_TRY(Tensor ga, write_like(op, grad, [&](at::Tensor& out) {
      if constexpr (kOp == Op::Add || kOp == Op::Sub) copy_into(kOp, out, g);
      else if constexpr (kOp == Op::Mul) at::mul_out(out, g, b);
      else if constexpr (kOp == Op::Div) at::div_out(out, g, b);
      else at::where_out(out, selects_a(kOp, a, b), g, at::zeros_like(g));
    }));
    CAPSULE_TRY(Tensor gb, write_like(op, grad, [&](at::Tensor& out) {
      if constexpr (kOp == Op::Add) copy_into(kOp, out, g);
      else if constexpr (kOp == Op::Sub) at::neg_out(out, g);
      else if constexpr (kOp == Op::Mul) at::mul_out(out, g, a);
      // ATen's order, −g·((a/b)/b): see docs/libtorch.md for where it leaves the finite range
      // earlier than the reference's exponent-split form.
      else if constexpr (kOp == Op::Div) at::neg_out(out, at::mul(g, at::div(at::div(a, b), b)));
      else at::where_out(out, selects_a(kOp, a, b), at::zeros_like(g), g);
    }));
    return std::vector<Tensor>{ga, gb};
  });
}

// ---------------------------------------------------------------------------------------------
// Unary elementwise ops.

/// NaN where x is NaN, else `slope`: the reference's "slope at NaN is NaN" for relu and abs
/// (ATen's threshold_backward and sign give g and 0 there).
void nan_slope(at::Tensor& out, const at::Tensor& x, const at::Tensor& slope) {
  at::where_out(out, at::isnan(x), x, slope);
}

template <Op kOp>
RuntimeResult<Tensor> unary_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(to_string(kOp), inputs, 1, 1));
  CAPSULE_CHECK(check_unary_payload(kOp, attrs));
  return guarded(to_string(kOp), [&] {
    return write_like(to_string(kOp), inputs[0], [&](at::Tensor& out) {
      const at::Tensor x = view_input(inputs[0]);
      if constexpr (kOp == Op::Neg) at::neg_out(out, x);
      else if constexpr (kOp == Op::Abs) at::abs_out(out, x);
      else if constexpr (kOp == Op::Sqrt) at::sqrt_out(out, x);
      // threshold: x <= 0 gives +0 (so relu(−0) = +0) and NaN is kept, as the table says.
      else if constexpr (kOp == Op::Relu) at::threshold_out(out, x, 0, 0);
      else if constexpr (kOp == Op::Gelu) at::mul_out(out, x, normal_cdf(x));
      else if constexpr (kOp == Op::Sigmoid) at::sigmoid_out(out, x);
      else if constexpr (kOp == Op::Tanh) at::tanh_out(out, x);
      else if constexpr (kOp == Op::Exp) at::exp_out(out, x);
      else if constexpr (kOp == Op::Log) at::log_out(out, x);
      else if constexpr (kOp == Op::Sin) at::sin_out(out, x);
      else if constexpr (kOp == Op::Cos) at::cos_out(out, x);
      else if constexpr (kOp == Op::Inv) at::reciprocal_out(out, x);
      // clamp: min(max(x, lo), hi) selected explicitly. ATen's clamp does not promise which zero
      // a ±0 tie with a bound returns (its vector max/min take the second operand); the table
      // keeps x there, and NaN stays NaN (both comparisons are false).
      else if constexpr (kOp == Op::Clamp) {
        const at::Tensor lo = at::scalar_tensor(payload_scalar(attrs.lo, x), x.options());
        const at::Tensor hi = at::scalar_tensor(payload_scalar(attrs.hi, x), x.options());
        const at::Tensor low = at::where(at::lt(x, lo), lo, x);
        at::where_out(out, at::lt(hi, low), hi, low);
      }
      else if constexpr (kOp == Op::SafeLog) at::log_out(out, at::clamp_min(x, safe_log_eps(attrs, x)));
      // softplus: max(x, 0) + log1p(e^−|x|), the reference's form. ATen's softplus returns x
      // itself above its threshold (20), which differs in float64 (by e^−x), so it is composed.
      else if constexpr (kOp == Op::Softplus) at::add_out(out, at::clamp_min(x, 0), at::log1p(at::exp(at::neg(at::abs(x)))));
      else if constexpr (kOp == Op::Silu) at::mul_out(out, x, stable_sigmoid(x));
      else at::mul_out(out, x, at::scalar_tensor(attrs.alpha, x.options()));  // scale
    });
  });
}

template <Op kOp>
Grads unary_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(to_string(kOp), inputs, 1, 1));
  CAPSULE_CHECK(check_unary_payload(kOp, attrs));
  CAPSULE_CHECK(expect_grad(to_string(kOp), inputs, output, grad));
  constexpr std::string_view op = to_string(kOp);
  return guarded(op, [&]() -> Grads {
    const at::Tensor x = view_input(inputs[0]);
    const at::Tensor y = view_input(output);
    const at::Tensor g = view_input(grad);
    CAPSULE_TRY(Tensor gx, write_like(op, grad, [&](at::Tensor& out) {
      if constexpr (kOp == Op::Neg) at::neg_out(out, g);
      // abs′(±0) = +0 whatever g holds (g·sign(0) would be NaN for an infinite or NaN g).
      else if constexpr (kOp == Op::Abs) {
        nan_slope(out, x, at::where(at::eq(x, 0), at::zeros_like(g), at::mul(g, at::sign(x))));
      }
      else if constexpr (kOp == Op::Sqrt) at::div_out(out, g, at::mul(y, 2));
      else if constexpr (kOp == Op::Relu) nan_slope(out, x, at::threshold_backward(g, x, 0));
      else if constexpr (kOp == Op::Gelu) at::mul_out(out, g, gelu_slope(x));
      else if constexpr (kOp == Op::Sigmoid) at::sigmoid_backward_out(out, g, y);
      else if constexpr (kOp == Op::Tanh) at::tanh_backward_out(out, g, y);
      else if constexpr (kOp == Op::Exp) at::mul_out(out, g, y);
      else if constexpr (kOp == Op::Log) at::div_out(out, g, x);
      else if constexpr (kOp == Op::Sin) at::mul_out(out, g, at::cos(x));
      else if constexpr (kOp == Op::Cos) at::neg_out(out, at::mul(g, at::sin(x)));
      else if constexpr (kOp == Op::Inv) at::neg_out(out, at::mul(g, at::mul(y, y)));
      else if constexpr (kOp == Op::Clamp) {
        // both bounds pass the gradient (lo <= x <= hi, as ATen's clamp_backward); NaN slope at NaN
        const at::Tensor inside = at::logical_and(at::ge(x, payload_scalar(attrs.lo, x)),
                                                  at::le(x, payload_scalar(attrs.hi, x)));
        nan_slope(out, x, at::where(inside, g, at::zeros_like(g)));
      } else if constexpr (kOp == Op::SafeLog) {
        // the right-hand derivative at x = eps, none below it; NaN slope at NaN
        nan_slope(out, x, at::where(at::ge(x, safe_log_eps(attrs, x)), at::div(g, x), at::zeros_like(g)));
      } else if constexpr (kOp == Op::Softplus) at::mul_out(out, g, stable_sigmoid(x));
      else if constexpr (kOp == Op::Silu) at::mul_out(out, g, silu_slope(x));
      else at::mul_out(out, g, at::scalar_tensor(attrs.alpha, g.options()));  // scale
    }));
    return std::vector<Tensor>{gx};
  });
}

// ---------------------------------------------------------------------------------------------
// Softmax family along one axis.

template <Op kOp>
RuntimeResult<Tensor> softmax_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(to_string(kOp), inputs, 1, 1));
  CAPSULE_TRY(std::size_t axis, normalize_axis(to_string(kOp), attrs.axis, inputs[0].rank()));
  return guarded(to_string(kOp), [&] {
    return write_like(to_string(kOp), inputs[0], [&](at::Tensor& out) {
      const at::Tensor x = view_input(inputs[0]);
      const auto dim = static_cast<std::int64_t>(axis);
      if constexpr (kOp == Op::Softmax) at::_softmax_out(out, x, dim, false);
      else at::_log_softmax_out(out, x, dim, false);
    });
  });
}

template <Op kOp>
Grads softmax_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(to_string(kOp), inputs, 1, 1));
  CAPSULE_CHECK(expect_grad(to_string(kOp), inputs, output, grad));
  CAPSULE_TRY(std::size_t axis, normalize_axis(to_string(kOp), attrs.axis, inputs[0].rank()));
  constexpr std::string_view op = to_string(kOp);
  return guarded(op, [&]() -> Grads {
    const at::Tensor y = view_input(output);
    const at::Tensor g = view_input(grad);
    const auto dim = static_cast<std::int64_t>(axis);
    CAPSULE_TRY(Tensor gx, write_like(op, grad, [&](at::Tensor& out) {
      if constexpr (kOp == Op::Softmax) at::_softmax_backward_data_out(out, g, y, dim, y.scalar_type());
      else at::_log_softmax_backward_data_out(out, g, y, dim, y.scalar_type());
    }));
    return std::vector<Tensor>{gx};
  });
}

// ---------------------------------------------------------------------------------------------
// Reductions over `axes` (empty = all).

/// The normalised, distinct axes; `reduced[d]` marks the reduced dims.
RuntimeResult<std::vector<std::int64_t>> reduce_axes(Op op, const OpAttrs& attrs, std::size_t rank,
                                                     std::vector<bool>& reduced) {
  reduced.assign(rank, attrs.axes.empty());
  for (const std::int64_t a : attrs.axes) {
    CAPSULE_TRY(std::size_t axis, normalize_axis(to_string(op), a, rank));
    if (reduced[axis]) {
      return runtime_error(RuntimeCode::InvalidArgument, str(to_string(op), ": axis ", a, " is listed twice"));
    }
    reduced[axis] = true;
  }
  std::vector<std::int64_t> dims;
  for (std::size_t d = 0; d < rank; ++d) {
    if (reduced[d]) dims.push_back(static_cast<std::int64_t>(d));
  }
  return dims;
}

template <Op kOp>
RuntimeResult<Tensor> reduce_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(to_string(kOp), inputs, 1, 1));
  std::vector<bool> reduced;
  CAPSULE_TRY(std::vector<std::int64_t> dims, reduce_axes(kOp, attrs, inputs[0].rank(), reduced));
  std::vector<std::int64_t> out_dims;
  for (std::size_t d = 0; d < inputs[0].rank(); ++d) {
    if (!reduced[d]) out_dims.push_back(inputs[0].dim(d));
    else if (attrs.keepdim) out_dims.push_back(1);
  }
  return guarded(to_string(kOp), [&] {
    return write_new(to_string(kOp), out_dims, inputs[0].dtype(), [&](at::Tensor& out) {
      const at::Tensor x = view_input(inputs[0]);
      if (dims.empty()) {
        copy_into(kOp, out, x);  // a rank-0 input: nothing to reduce
      } else if constexpr (kOp == Op::ReduceSum) {
        at::sum_out(out, x, dims, attrs.keepdim);
      } else {
        at::mean_out(out, x, dims, attrs.keepdim);
      }
    });
  });
}

template <Op kOp>
Grads reduce_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(to_string(kOp), inputs, 1, 1));
  CAPSULE_CHECK(expect_grad(to_string(kOp), inputs, output, grad));
  std::vector<bool> reduced;
  CAPSULE_TRY(std::vector<std::int64_t> dims, reduce_axes(kOp, attrs, inputs[0].rank(), reduced));
  constexpr std::string_view op = to_string(kOp);
  return guarded(op, [&]() -> Grads {
    at::Tensor g = view_input(grad);
    if (!attrs.keepdim) {
      for (const std::int64_t d : dims) g = g.unsqueeze(d);
    }
    std::int64_t count = 1;
    for (const std::int64_t d : dims) count *= inputs[0].dim(static_cast<std::size_t>(d));
    CAPSULE_TRY(Tensor gx, write_like(op, inputs[0], [&](at::Tensor& out) {
      const at::Tensor spread = g.expand(out.sizes());
      if constexpr (kOp == Op::ReduceSum) copy_into(kOp, out, spread);
      // The divisor is a 0-dim tensor on g's device, not a Scalar: ATen's CUDA div multiplies by a
      // rounded reciprocal when the divisor is a host scalar, which would not be the reference's
      // one correctly rounded division.
      else at::div_out(out, spread, at::scalar_tensor(static_cast<double>(count), g.options()));
    }));
    return std::vector<Tensor>{gx};
  });
}

}  // namespace

RuntimeStatus register_pointwise_handlers(HandlerRegistry& registry) {
#define CAPSULE_LIBTORCH_BINARY(OP) CAPSULE_CHECK(registry.add(spec_for(OP, binary_forward<OP>, binary_backward<OP>)))
#define CAPSULE_LIBTORCH_UNARY(OP) CAPSULE_CHECK(registry.add(spec_for(OP, unary_forward<OP>, unary_backward<OP>)))
  CAPSULE_LIBTORCH_BINARY(Op::Add);
  CAPSULE_LIBTORCH_BINARY(Op::Sub);
  CAPSULE_LIBTORCH_BINARY(Op::Mul);
  CAPSULE_LIBTORCH_BINARY(Op::Div);
  CAPSULE_LIBTORCH_BINARY(Op::Max);
  CAPSULE_LIBTORCH_BINARY(Op::Min);
  CAPSULE_LIBTORCH_UNARY(Op::Neg);
  CAPSULE_LIBTORCH_UNARY(Op::Abs);
  CAPSULE_LIBTORCH_UNARY(Op::Sqrt);
  CAPSULE_LIBTORCH_UNARY(Op::Relu);
  CAPSULE_LIBTORCH_UNARY(Op::Gelu);
  CAPSULE_LIBTORCH_UNARY(Op::Sigmoid);
  CAPSULE_LIBTORCH_UNARY(Op::Tanh);
  CAPSULE_LIBTORCH_UNARY(Op::Exp);
  CAPSULE_LIBTORCH_UNARY(Op::Log);
  CAPSULE_LIBTORCH_UNARY(Op::Sin);
  CAPSULE_LIBTORCH_UNARY(Op::Cos);
  CAPSULE_LIBTORCH_UNARY(Op::Inv);
  CAPSULE_LIBTORCH_UNARY(Op::Scale);
  // The remaining elementwise activations
  CAPSULE_LIBTORCH_UNARY(Op::Clamp);
  CAPSULE_LIBTORCH_UNARY(Op::SafeLog);
  CAPSULE_LIBTORCH_UNARY(Op::Softplus);
  CAPSULE_LIBTORCH_UNARY(Op::Silu);
#undef CAPSULE_LIBTORCH_BINARY
#undef CAPSULE_LIBTORCH_UNARY
  CAPSULE_CHECK(registry.add(spec_for(Op::Softmax, softmax_forward<Op::Softmax>, softmax_backward<Op::Softmax>)));
  CAPSULE_CHECK(
      registry.add(spec_for(Op::LogSoftmax, softmax_forward<Op::LogSoftmax>, softmax_backward<Op::LogSoftmax>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::ReduceSum, reduce_forward<Op::ReduceSum>, reduce_backward<Op::ReduceSum>)));
  CAPSULE_CHECK(
      registry.add(spec_for(Op::ReduceMean, reduce_forward<Op::ReduceMean>, reduce_backward<Op::ReduceMean>)));
  return std::monostate{};
}

}  // namespace capsule::libtorch
