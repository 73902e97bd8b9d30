// SPDX-License-Identifier: Apache-2.0
// Reference kernels of the elementwise, softmax-family, reduction and random ops, forward and
// local adjoint, with the conventions of capsule/runtime/op_args.hpp. Sums are fixed-left
// (`acc = acc + term` from 0 in increasing index order) so every build gives the same bits.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <span>
#include <type_traits>
#include <vector>

#include "common.hpp"
#include "kernel_support.hpp"
#include "rowwise.hpp"

namespace capsule::reference {
namespace {

using Inputs = std::span<const Tensor>;
using Grads = RuntimeResult<std::vector<Tensor>>;

/// The adjoint of a / b with respect to b, −g·a/b², without an intermediate that overflows or
/// underflows where the result is finite. Each finite nonzero operand is split into a significand
/// in [0.5, 1) and a power of two (exact), the significands are combined (magnitude within
/// [0.25, 4], so nothing leaves the range) and the exponents are added as integers; ldexp rounds
/// once at the end. Zeros, infinities and NaN take LibTorch's order, −g·((a/b)/b), which gives
/// IEEE's answer there (±inf at b = 0, NaN for 0·inf).
template <class T>
T quotient_b_adjoint(T a, T b, T g) {
  if (!std::isfinite(a) || !std::isfinite(b) || !std::isfinite(g) || a == T(0) || b == T(0) || g == T(0)) {
    return -(g * ((a / b) / b));
  }
  int ea = 0;
  int eb = 0;
  int eg = 0;
  const T ma = std::frexp(a, &ea);
  const T mb = std::frexp(b, &eb);
  const T mg = std::frexp(g, &eg);
  return std::ldexp(-((mg * ma) / (mb * mb)), eg + ea - 2 * eb);
}

// ---------------------------------------------------------------------------------------------
// Binary elementwise ops: (a, b) of equal shapes.

struct AddFn {
  template <class T> static T f(T a, T b) { return a + b; }
  template <class T> static void df(T, T, T g, T& ga, T& gb) { ga = g; gb = g; }
};
struct SubFn {
  template <class T> static T f(T a, T b) { return a - b; }
  template <class T> static void df(T, T, T g, T& ga, T& gb) { ga = g; gb = -g; }
};
struct MulFn {
  template <class T> static T f(T a, T b) { return a * b; }
  template <class T> static void df(T a, T b, T g, T& ga, T& gb) { ga = g * b; gb = g * a; }
};
struct DivFn {
  template <class T> static T f(T a, T b) { return a / b; }
  template <class T> static void df(T a, T b, T g, T& ga, T& gb) {
    ga = g / b;
    gb = quotient_b_adjoint(a, b, g);
  }
};
// max and min propagate a NaN from either operand (IEEE's maximum, as LibTorch): a NaN `a` wins,
// else a NaN `b`. Ties (including -0 against +0) select `a` and send it the whole gradient
// (op_args.hpp); a NaN output routes the gradient to the NaN operand it came from.
struct MaxFn {
  template <class T> static bool takes_a(T a, T b) { return std::isnan(a) || (!std::isnan(b) && a >= b); }
  template <class T> static T f(T a, T b) { return takes_a(a, b) ? a : b; }
  template <class T> static void df(T a, T b, T g, T& ga, T& gb) {
    const bool to_a = takes_a(a, b);
    ga = to_a ? g : T(0);
    gb = to_a ? T(0) : g;
  }
};
struct MinFn {
  template <class T> static bool takes_a(T a, T b) { return std::isnan(a) || (!std::isnan(b) && a <= b); }
  template <class T> static T f(T a, T b) { return takes_a(a, b) ? a : b; }
  template <class T> static void df(T a, T b, T g, T& ga, T& gb) {
    const bool to_a = takes_a(a, b);
    ga = to_a ? g : T(0);
    gb = to_a ? T(0) : g;
  }
};

template <Op kOp, class Fn>
RuntimeResult<Tensor> binary_forward(Inputs inputs, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_inputs(kOp, inputs, 2));
  CAPSULE_CHECK(expect_same_shape(to_string(kOp), inputs[0], inputs[1]));
  CAPSULE_TRY(Tensor out, Tensor::empty(inputs[0].shape(), inputs[0].dtype()));
  with_dtype(out.dtype(), [&]<class T>() {
    const T* a = inputs[0].data<T>();
    const T* b = inputs[1].data<T>();
    T* y = out.mutable_data<T>();
    const auto n = static_cast<std::size_t>(out.numel());
    for (std::size_t i = 0; i < n; ++i) y[i] = Fn::f(a[i], b[i]);
  });
  return out;
}

template <Op kOp, class Fn>
Grads binary_backward(Inputs inputs, const Tensor& /*output*/, const Tensor& grad, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_inputs(kOp, inputs, 2));
  CAPSULE_CHECK(expect_same_shape(to_string(kOp), inputs[0], inputs[1]));
  CAPSULE_CHECK(expect_like_output(kOp, "gradient", grad, inputs[0].shape(), inputs[0].dtype()));
  CAPSULE_TRY(Tensor grad_a, Tensor::empty(inputs[0].shape(), inputs[0].dtype()));
  CAPSULE_TRY(Tensor grad_b, Tensor::empty(inputs[0].shape(), inputs[0].dtype()));
  with_dtype(grad.dtype(), [&]<class T>() {
    const T* a = inputs[0].data<T>();
    const T* b = inputs[1].data<T>();
    const T* g = grad.data<T>();
    T* ga = grad_a.mutable_data<T>();
    T* gb = grad_b.mutable_data<T>();
    const auto n = static_cast<std::size_t>(grad.numel());
    for (std::size_t i = 0; i < n; ++i) Fn::df(a[i], b[i], g[i], ga[i], gb[i]);
  });
  return std::vector<Tensor>{grad_a, grad_b};
}

// ---------------------------------------------------------------------------------------------
// Unary elementwise ops: f(x) and the local adjoint g·f'(x), which may read the output y = f(x).

/// Payload values converted once per call to the element type.
template <class T>
struct Params {
  T alpha;
  T lo;
  T hi;
  T eps;
};

constexpr double kSafeLogDefaultEps = 1e-12;

/// σ(x) without overflow: exp is only ever taken of a non-positive number.
template <class T>
T stable_sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

/// Φ(x), the standard normal CDF, as erfc(−x/√2)/2: the same function as (1 + erf(x/√2))/2
/// without its cancellation for negative x (7 float32 ulps at x = −2 in gelu).
template <class T>
T normal_cdf(T x) {
  return T(0.5) * std::erfc(-x * T(1.0 / std::numbers::sqrt2));
}

struct NegFn {
  template <class T> static T f(T x, const Params<T>&) { return -x; }
  template <class T> static T df(T, T, T g, const Params<T>&) { return -g; }
};
struct AbsFn {
  template <class T> static T f(T x, const Params<T>&) { return std::abs(x); }
  // abs'(0) = 0: the subgradient TorchLean's rule picks. The slope at NaN is NaN.
  template <class T> static T df(T x, T, T g, const Params<T>&) {
    if (std::isnan(x)) return x;
    return x > T(0) ? g : (x < T(0) ? -g : T(0));
  }
};
struct SqrtFn {
  template <class T> static T f(T x, const Params<T>&) { return std::sqrt(x); }
  template <class T> static T df(T, T y, T g, const Params<T>&) { return g / (T(2) * y); }
};
struct ReluFn {
  // NaN propagates rather than being clamped to 0.
  template <class T> static T f(T x, const Params<T>&) { return (std::isnan(x) || x > T(0)) ? x : T(0); }
  // relu'(0) = 0; the slope at NaN is NaN, so a NaN input never yields a clean 0 gradient.
  template <class T> static T df(T x, T, T g, const Params<T>&) {
    if (std::isnan(x)) return x;
    return x > T(0) ? g : T(0);
  }
};
struct GeluFn {
  template <class T> static T f(T x, const Params<T>&) { return x * normal_cdf(x); }
  /// d/dx x·Φ(x) = Φ(x) + x·φ(x), φ(x) = exp(-x²/2)/√(2π).
  template <class T> static T df(T x, T, T g, const Params<T>&) {
    const T pdf = std::exp(-(x * x) / T(2)) * T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
    return g * (normal_cdf(x) + x * pdf);
  }
};
struct SigmoidFn {
  template <class T> static T f(T x, const Params<T>&) { return stable_sigmoid(x); }
  template <class T> static T df(T, T y, T g, const Params<T>&) { return g * (y * (T(1) - y)); }
};
struct SiluFn {
  template <class T> static T f(T x, const Params<T>&) { return x * stable_sigmoid(x); }
  /// d/dx x·σ(x) = σ(x)·(1 + x·(1 - σ(x))).
  template <class T> static T df(T x, T, T g, const Params<T>&) {
    const T s = stable_sigmoid(x);
    return g * (s * (T(1) + x * (T(1) - s)));
  }
};
struct TanhFn {
  template <class T> static T f(T x, const Params<T>&) { return std::tanh(x); }
  template <class T> static T df(T, T y, T g, const Params<T>&) { return g * (T(1) - y * y); }
};
struct SoftplusFn {
  /// log(1 + eˣ) = max(x, 0) + log1p(e^-|x|): no overflow for large x, no lost digits for very
  /// negative x.
  template <class T> static T f(T x, const Params<T>&) {
    return (x > T(0) ? x : T(0)) + std::log1p(std::exp(-std::abs(x)));
  }
  template <class T> static T df(T x, T, T g, const Params<T>&) { return g * stable_sigmoid(x); }
};
struct ExpFn {
  template <class T> static T f(T x, const Params<T>&) { return std::exp(x); }
  template <class T> static T df(T, T y, T g, const Params<T>&) { return g * y; }
};
struct LogFn {
  template <class T> static T f(T x, const Params<T>&) { return std::log(x); }
  template <class T> static T df(T x, T, T g, const Params<T>&) { return g / x; }
};
struct SinFn {
  template <class T> static T f(T x, const Params<T>&) { return std::sin(x); }
  template <class T> static T df(T x, T, T g, const Params<T>&) { return g * std::cos(x); }
};
struct CosFn {
  template <class T> static T f(T x, const Params<T>&) { return std::cos(x); }
  template <class T> static T df(T x, T, T g, const Params<T>&) { return -(g * std::sin(x)); }
};
struct InvFn {
  template <class T> static T f(T x, const Params<T>&) { return T(1) / x; }
  template <class T> static T df(T, T y, T g, const Params<T>&) { return -(g * (y * y)); }
};
struct ScaleFn {
  template <class T> static T f(T x, const Params<T>& p) { return p.alpha * x; }
  template <class T> static T df(T, T, T g, const Params<T>& p) { return p.alpha * g; }
};
struct ClampFn {
  // NaN stays NaN: both comparisons are false for it.
  template <class T> static T f(T x, const Params<T>& p) {
    const T low = x < p.lo ? p.lo : x;
    return p.hi < low ? p.hi : low;
  }
  // Both bounds pass the gradient (lo <= x <= hi, as LibTorch's clamp); the slope at NaN is NaN.
  template <class T> static T df(T x, T, T g, const Params<T>& p) {
    if (std::isnan(x)) return x;
    return p.lo <= x && x <= p.hi ? g : T(0);
  }
};
struct SafeLogFn {
  template <class T> static T f(T x, const Params<T>& p) { return std::log(x < p.eps ? p.eps : x); }
  // Below eps the output is the constant log(eps), so no gradient flows there. At x = eps the
  // right-hand derivative g/eps applies: log(max(x, eps)) passes the gradient where x >= eps,
  // as LibTorch's log(clamp_min(x, eps)) does. The slope at NaN is NaN.
  template <class T> static T df(T x, T, T g, const Params<T>& p) {
    if (std::isnan(x)) return x;
    return x >= p.eps ? g / x : T(0);
  }
};


template <class T>
Params<T> params_of(const OpAttrs& attrs) {
  const double eps = attrs.eps == 0.0 ? kSafeLogDefaultEps : attrs.eps;
  return Params<T>{static_cast<T>(attrs.alpha), static_cast<T>(attrs.lo), static_cast<T>(attrs.hi),
                   static_cast<T>(eps)};
}

template <Op kOp, class Fn>
RuntimeResult<Tensor> unary_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(kOp, inputs, 1));
  CAPSULE_CHECK(check_unary_payload(kOp, attrs));
  CAPSULE_TRY(Tensor out, Tensor::empty(inputs[0].shape(), inputs[0].dtype()));
  with_dtype(out.dtype(), [&]<class T>() {
    const Params<T> p = params_of<T>(attrs);
    const T* x = inputs[0].data<T>();
    T* y = out.mutable_data<T>();
    const auto n = static_cast<std::size_t>(out.numel());
    for (std::size_t i = 0; i < n; ++i) y[i] = Fn::f(x[i], p);
  });
  return out;
}

template <Op kOp, class Fn>
Grads unary_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(kOp, inputs, 1));
  CAPSULE_CHECK(check_unary_payload(kOp, attrs));
  const Tensor& x = inputs[0];
  CAPSULE_CHECK(expect_like_output(kOp, "gradient", grad, x.shape(), x.dtype()));
  CAPSULE_CHECK(expect_like_output(kOp, "output", output, x.shape(), x.dtype()));
  CAPSULE_TRY(Tensor dx, Tensor::empty(x.shape(), x.dtype()));
  with_dtype(x.dtype(), [&]<class T>() {
    const Params<T> p = params_of<T>(attrs);
    const T* xs = x.data<T>();
    const T* ys = output.data<T>();
    const T* g = grad.data<T>();
    T* d = dx.mutable_data<T>();
    const auto n = static_cast<std::size_t>(x.numel());
    for (std::size_t i = 0; i < n; ++i) d[i] = Fn::df(xs[i], ys[i], g[i], p);
  });
  return std::vector<Tensor>{dx};
}

// ---------------------------------------------------------------------------------------------
// Softmax family and top_k_mask: per lane along attrs.axis (any axis). A lane of a non-last axis
// is strided, so it is copied into a contiguous buffer, processed with the rowwise.hpp
// primitives, and copied back; a last-axis lane is processed in place.

/// One lane: n entries from `base`, `stride` apart. load/store move it between a tensor and a
/// contiguous buffer of n entries.
struct Lane {
  std::int64_t base = 0;
  std::int64_t stride = 1;
  std::int64_t n = 0;

  template <class T>
  void load(const T* src, std::vector<T>& buf) const {
    for (std::int64_t j = 0; j < n; ++j) buf[static_cast<std::size_t>(j)] = src[base + j * stride];
  }
  template <class T>
  void store(const std::vector<T>& buf, T* dst) const {
    for (std::int64_t j = 0; j < n; ++j) dst[base + j * stride] = buf[static_cast<std::size_t>(j)];
  }
};

/// Calls `fn(lane)` for every lane of `lanes`, outer index first.
template <class Fn>
void for_each_lane(const Lanes& lanes, Fn&& fn) {
  for (std::int64_t o = 0; o < lanes.outer; ++o) {
    for (std::int64_t i = 0; i < lanes.inner; ++i) fn(Lane{o * lanes.n * lanes.inner + i, lanes.inner, lanes.n});
  }
}

/// Scratch for one lane. Empty when there are no lanes at all, so an empty tensor with a huge
/// axis (say [0, 2^40]) allocates nothing.
template <class T>
std::vector<T> lane_buffer(const Lanes& lanes) {
  if (lanes.outer == 0 || lanes.inner == 0) return {};
  return std::vector<T>(static_cast<std::size_t>(lanes.n));
}

/// The lanes of the softmax family around attrs.axis. A rank-0 tensor is one lane of one entry
/// with axis 0 or -1, as in LibTorch (its softmax is 1, its log_softmax 0).
RuntimeResult<Lanes> softmax_lanes(Op op, std::int64_t axis, const Shape& shape) {
  if (shape.rank() == 0) {
    if (axis == 0 || axis == -1) return Lanes{1, 1, 1};
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(to_string(op), ": axis ", axis,
                             " is out of range for a rank-0 tensor; expected -1 or 0 (its one entry)"));
  }
  CAPSULE_TRY(std::size_t a, normalize_axis(to_string(op), axis, shape.rank()));
  return lanes_around(shape, a);
}

/// Applies `row` (softmax_row or log_softmax_row) to every lane of the one input around attrs.axis.
template <class Row>
RuntimeResult<Tensor> lanewise_row_forward(Op op, Inputs inputs, const OpAttrs& attrs, Row row) {
  CAPSULE_CHECK(expect_inputs(op, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(const Lanes lanes, softmax_lanes(op, attrs.axis, x.shape()));
  CAPSULE_TRY(Tensor out, Tensor::empty(x.shape(), x.dtype()));
  with_dtype(x.dtype(), [&]<class T>() {
    std::vector<T> xb = lane_buffer<T>(lanes), yb = lane_buffer<T>(lanes);
    for_each_lane(lanes, [&](const Lane& lane) {
      lane.load(x.data<T>(), xb);
      row(xb.data(), yb.data(), lane.n);
      lane.store(yb, out.mutable_data<T>());
    });
  });
  return out;
}

RuntimeResult<Tensor> softmax_forward(Inputs inputs, const OpAttrs& attrs) {
  return lanewise_row_forward(Op::Softmax, inputs, attrs,
                              []<class T>(const T* x, T* y, std::int64_t n) { softmax_row(x, y, n); });
}

RuntimeResult<Tensor> log_softmax_forward(Inputs inputs, const OpAttrs& attrs) {
  return lanewise_row_forward(Op::LogSoftmax, inputs, attrs,
                              []<class T>(const T* x, T* y, std::int64_t n) { log_softmax_row(x, y, n); });
}

/// Checks (scores, mask) of hard_masked_softmax and returns the lanes around the axis.
RuntimeResult<Lanes> check_masked(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::HardMaskedSoftmax, inputs, 2));
  if (inputs[0].shape() != inputs[1].shape()) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str("hard_masked_softmax: mask has shape ", to_string(inputs[1].shape()), " but scores have ",
                             to_string(inputs[0].shape()), "; expected the mask to have the scores' shape"));
  }
  return softmax_lanes(Op::HardMaskedSoftmax, attrs.axis, inputs[0].shape());
}

RuntimeResult<Tensor> hard_masked_softmax_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(const Lanes lanes, check_masked(inputs, attrs));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(Tensor out, Tensor::empty(x.shape(), x.dtype()));
  with_dtype(x.dtype(), [&]<class T>() {
    std::vector<T> xb = lane_buffer<T>(lanes), mb = lane_buffer<T>(lanes), yb = lane_buffer<T>(lanes);
    for_each_lane(lanes, [&](const Lane& lane) {
      lane.load(x.data<T>(), xb);
      lane.load(inputs[1].data<T>(), mb);
      hard_masked_softmax_row(xb.data(), [&](std::int64_t j) { return mb[static_cast<std::size_t>(j)] != T(0); },
                              yb.data(), lane.n);
      lane.store(yb, out.mutable_data<T>());
    });
  });
  return out;
}

/// dx = y ⊙ (g - Σ g·y) per lane, the softmax Jacobian-vector product (sum fixed-left). Entries
/// where `allowed` is false get exactly 0 (hard_masked_softmax's blocked entries) and add no term
/// to the sum, so an infinite or NaN gradient on a blocked entry (0·inf) cannot reach the rest.
template <class T, class Allowed>
void softmax_lane_backward(const std::vector<T>& y, const std::vector<T>& g, Allowed allowed, std::vector<T>& dx) {
  T dot = T(0);
  for (std::size_t j = 0; j < y.size(); ++j) {
    if (allowed(j)) dot = dot + g[j] * y[j];
  }
  for (std::size_t j = 0; j < y.size(); ++j) dx[j] = allowed(j) ? y[j] * (g[j] - dot) : T(0);
}

Grads softmax_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::Softmax, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(const Lanes lanes, softmax_lanes(Op::Softmax, attrs.axis, x.shape()));
  CAPSULE_CHECK(expect_like_output(Op::Softmax, "gradient", grad, x.shape(), x.dtype()));
  CAPSULE_CHECK(expect_like_output(Op::Softmax, "output", output, x.shape(), x.dtype()));
  CAPSULE_TRY(Tensor dx, Tensor::empty(x.shape(), x.dtype()));
  with_dtype(x.dtype(), [&]<class T>() {
    std::vector<T> yb = lane_buffer<T>(lanes), gb = lane_buffer<T>(lanes), db = lane_buffer<T>(lanes);
    for_each_lane(lanes, [&](const Lane& lane) {
      lane.load(output.data<T>(), yb);
      lane.load(grad.data<T>(), gb);
      softmax_lane_backward(yb, gb, [](std::size_t) { return true; }, db);
      lane.store(db, dx.mutable_data<T>());
    });
  });
  return std::vector<Tensor>{dx};
}

/// dx = g - softmax(x)·Σ g per lane, with softmax(x) = exp(log_softmax(x)) from the output.
Grads log_softmax_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::LogSoftmax, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(const Lanes lanes, softmax_lanes(Op::LogSoftmax, attrs.axis, x.shape()));
  CAPSULE_CHECK(expect_like_output(Op::LogSoftmax, "gradient", grad, x.shape(), x.dtype()));
  CAPSULE_CHECK(expect_like_output(Op::LogSoftmax, "output", output, x.shape(), x.dtype()));
  CAPSULE_TRY(Tensor dx, Tensor::empty(x.shape(), x.dtype()));
  with_dtype(x.dtype(), [&]<class T>() {
    std::vector<T> yb = lane_buffer<T>(lanes), gb = lane_buffer<T>(lanes), db = lane_buffer<T>(lanes);
    for_each_lane(lanes, [&](const Lane& lane) {
      lane.load(output.data<T>(), yb);
      lane.load(grad.data<T>(), gb);
      T total = T(0);
      for (std::size_t j = 0; j < gb.size(); ++j) total = total + gb[j];
      for (std::size_t j = 0; j < gb.size(); ++j) db[j] = gb[j] - std::exp(yb[j]) * total;
      lane.store(db, dx.mutable_data<T>());
    });
  });
  return std::vector<Tensor>{dx};
}

/// Gradient for the scores only; the mask is a selector and takes none (undefined Tensor).
Grads hard_masked_softmax_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_TRY(const Lanes lanes, check_masked(inputs, attrs));
  const Tensor& x = inputs[0];
  CAPSULE_CHECK(expect_like_output(Op::HardMaskedSoftmax, "gradient", grad, x.shape(), x.dtype()));
  CAPSULE_CHECK(expect_like_output(Op::HardMaskedSoftmax, "output", output, x.shape(), x.dtype()));
  CAPSULE_TRY(Tensor dx, Tensor::empty(x.shape(), x.dtype()));
  with_dtype(x.dtype(), [&]<class T>() {
    std::vector<T> yb = lane_buffer<T>(lanes), gb = lane_buffer<T>(lanes), mb = lane_buffer<T>(lanes),
                   db = lane_buffer<T>(lanes);
    for_each_lane(lanes, [&](const Lane& lane) {
      lane.load(output.data<T>(), yb);
      lane.load(grad.data<T>(), gb);
      lane.load(inputs[1].data<T>(), mb);
      softmax_lane_backward(yb, gb, [&](std::size_t j) { return mb[j] != T(0); }, db);
      lane.store(db, dx.mutable_data<T>());
    });
  });
  return std::vector<Tensor>{dx, Tensor()};
}

/// 1 for the k largest entries of each lane, ties broken by lower index. NaN ranks above every
/// number (as the largest value), so the order is a strict weak order even with NaN present.
RuntimeResult<Tensor> top_k_mask_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::TopKMask, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(std::size_t axis, normalize_axis("top_k_mask", attrs.axis, x.rank()));
  const std::int64_t n = x.dim(axis);
  if (attrs.k < 0 || attrs.k > n) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("top_k_mask: k = ", attrs.k, " for axis ", axis, " of size ", n, " in shape ",
                             to_string(x.shape()), "; expected 0 <= k <= ", n));
  }
  CAPSULE_TRY(Tensor out, Tensor::empty(x.shape(), x.dtype()));
  const Lanes lanes = lanes_around(x.shape(), axis);
  const auto k = static_cast<std::size_t>(attrs.k);
  with_dtype(x.dtype(), [&]<class T>() {
    std::vector<T> xb = lane_buffer<T>(lanes), yb = lane_buffer<T>(lanes);
    std::vector<std::size_t> order(static_cast<std::size_t>(n));
    for_each_lane(lanes, [&](const Lane& lane) {
      lane.load(x.data<T>(), xb);
      for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
      // Stable: entries that compare equal keep increasing index order, which breaks ties.
      std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const T va = xb[a];
        const T vb = xb[b];
        if (std::isnan(vb)) return false;
        return std::isnan(va) || va > vb;
      });
      std::fill(yb.begin(), yb.end(), T(0));
      for (std::size_t r = 0; r < k; ++r) yb[order[r]] = T(1);
      lane.store(yb, out.mutable_data<T>());
    });
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reductions: reduce_sum and reduce_mean over attrs.axes (empty = all), keepdim.

struct ReducePlan {
  Shape out_shape;                                         ///< the output (keepdim applied)
  std::array<std::int64_t, Shape::kMaxRank> out_strides{}; ///< per input dim; 0 on reduced dims
  std::int64_t count = 1;                                  ///< elements summed per output
};

/// Validates the reduced axes and maps each input index to its output element: the output's
/// strides laid over the input's dims, with 0 on reduced dims.
RuntimeResult<ReducePlan> plan_reduce(Op op, const Tensor& x, const OpAttrs& attrs) {
  const std::size_t rank = x.rank();
  std::array<bool, Shape::kMaxRank> reduced{};
  if (attrs.axes.empty()) {
    for (std::size_t d = 0; d < rank; ++d) reduced[d] = true;
  }
  for (const std::int64_t axis : attrs.axes) {
    CAPSULE_TRY(std::size_t d, normalize_axis(to_string(op), axis, rank));
    if (reduced[d]) {
      return runtime_error(RuntimeCode::InvalidArgument, str(to_string(op), ": axis ", axis, " (dimension ", d,
                                                             ") is listed twice; expected distinct axes"));
    }
    reduced[d] = true;
  }
  ReducePlan plan;
  std::vector<std::int64_t> kept_dims;  // keepdim form: reduced dims become 1
  std::vector<std::int64_t> out_dims;
  for (std::size_t d = 0; d < rank; ++d) {
    kept_dims.push_back(reduced[d] ? 1 : x.dim(d));
    if (!reduced[d] || attrs.keepdim) out_dims.push_back(reduced[d] ? 1 : x.dim(d));
    // Checked: with a 0-sized kept dim the reduced dims' product is not bounded by numel.
    if (reduced[d]) {
      CAPSULE_TRY(plan.count, checked_mul(str(to_string(op), ": reduced element count"), plan.count, x.dim(d)));
    }
  }
  CAPSULE_TRY(plan.out_shape, Shape::make(out_dims));
  CAPSULE_TRY(Shape kept, Shape::make(kept_dims));
  plan.out_strides = kept.strides();
  for (std::size_t d = 0; d < rank; ++d) {
    if (reduced[d]) plan.out_strides[d] = 0;
  }
  return plan;
}

/// Every output element starts at 0 and adds its inputs in increasing flat input index, which is
/// row-major order over the reduced dims: the fixed-left sum.
template <Op kOp>
RuntimeResult<Tensor> reduce_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(kOp, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(ReducePlan plan, plan_reduce(kOp, x, attrs));
  CAPSULE_TRY(Tensor out, Tensor::zeros(plan.out_shape, x.dtype()));
  with_dtype(x.dtype(), [&]<class T>() {
    const T* xs = x.data<T>();
    T* ys = out.mutable_data<T>();
    StridedWalk walk(x.shape().dims(), plan.out_strides);
    for (std::int64_t i = 0; i < x.numel(); ++i, walk.next()) ys[walk.offset()] = ys[walk.offset()] + xs[i];
    if constexpr (kOp == Op::ReduceMean) {
      // An empty reduction divides 0 by 0: NaN, as the mean of nothing.
      const T count = static_cast<T>(plan.count);
      for (std::int64_t j = 0; j < out.numel(); ++j) ys[j] = ys[j] / count;
    }
  });
  return out;
}

/// Each input element receives its output's gradient (divided by the count for the mean).
template <Op kOp>
Grads reduce_backward(Inputs inputs, const Tensor& /*output*/, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(kOp, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(ReducePlan plan, plan_reduce(kOp, x, attrs));
  CAPSULE_CHECK(expect_like_output(kOp, "gradient", grad, plan.out_shape, x.dtype()));
  CAPSULE_TRY(Tensor dx, Tensor::empty(x.shape(), x.dtype()));
  with_dtype(x.dtype(), [&]<class T>() {
    const T* g = grad.data<T>();
    T* d = dx.mutable_data<T>();
    const T count = static_cast<T>(plan.count);
    StridedWalk walk(x.shape().dims(), plan.out_strides);
    for (std::int64_t i = 0; i < x.numel(); ++i, walk.next()) {
      d[i] = kOp == Op::ReduceMean ? g[walk.offset()] / count : g[walk.offset()];
    }
  });
  return std::vector<Tensor>{dx};
}

// ---------------------------------------------------------------------------------------------
// Random ops: counter-based, so element i depends only on (seed, i) and a tensor is the same
// whatever order or chunking computes it.

/// splitmix64's output for step index+1 from state `seed`: a stateless hash of (seed, index).
std::uint64_t counter_bits(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A uniform draw in [0, 1) with as many random bits as T's significand holds, so rounding can
/// never produce 1: 24 bits for float, 53 for double.
template <class T>
T unit_draw(std::uint64_t bits) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(bits >> 40) * 0x1.0p-24f;
  } else {
    return static_cast<double>(bits >> 11) * 0x1.0p-53;
  }
}

RuntimeResult<Tensor> random_output(Op op, Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(op, inputs, 0));
  CAPSULE_TRY(Shape shape, Shape::make(attrs.shape));
  return Tensor::empty(shape, attrs.dtype);
}

RuntimeResult<Tensor> rand_uniform_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(Tensor out, random_output(Op::RandUniform, inputs, attrs));
  with_dtype(out.dtype(), [&]<class T>() {
    T* y = out.mutable_data<T>();
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      y[i] = unit_draw<T>(counter_bits(attrs.seed, static_cast<std::uint64_t>(i)));
    }
  });
  return out;
}

/// 1 where rand_uniform's draw for the same seed, element and dtype (24 bits in float32, 53 in
/// float64) is below p, compared exactly (the draw is exact in double): the mask equals
/// `rand_uniform < p` element for element, p = 0 gives all zeros and p = 1 all ones.
RuntimeResult<Tensor> bernoulli_mask_forward(Inputs inputs, const OpAttrs& attrs) {
  if (!(attrs.p >= 0.0 && attrs.p <= 1.0)) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("bernoulli_mask: p = ", attrs.p, "; expected a probability in [0, 1]"));
  }
  CAPSULE_TRY(Tensor out, random_output(Op::BernoulliMask, inputs, attrs));
  with_dtype(out.dtype(), [&]<class T>() {
    T* y = out.mutable_data<T>();
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      const T u = unit_draw<T>(counter_bits(attrs.seed, static_cast<std::uint64_t>(i)));
      y[i] = static_cast<double>(u) < attrs.p ? T(1) : T(0);
    }
  });
  return out;
}

}  // namespace

RuntimeStatus register_elementwise_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(registry.add(spec_for(Op::Add, binary_forward<Op::Add, AddFn>, binary_backward<Op::Add, AddFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Sub, binary_forward<Op::Sub, SubFn>, binary_backward<Op::Sub, SubFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Mul, binary_forward<Op::Mul, MulFn>, binary_backward<Op::Mul, MulFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Div, binary_forward<Op::Div, DivFn>, binary_backward<Op::Div, DivFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Max, binary_forward<Op::Max, MaxFn>, binary_backward<Op::Max, MaxFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Min, binary_forward<Op::Min, MinFn>, binary_backward<Op::Min, MinFn>)));

  CAPSULE_CHECK(registry.add(spec_for(Op::Neg, unary_forward<Op::Neg, NegFn>, unary_backward<Op::Neg, NegFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Abs, unary_forward<Op::Abs, AbsFn>, unary_backward<Op::Abs, AbsFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Sqrt, unary_forward<Op::Sqrt, SqrtFn>, unary_backward<Op::Sqrt, SqrtFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Relu, unary_forward<Op::Relu, ReluFn>, unary_backward<Op::Relu, ReluFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Gelu, unary_forward<Op::Gelu, GeluFn>, unary_backward<Op::Gelu, GeluFn>)));
  CAPSULE_CHECK(registry.add(
      spec_for(Op::Sigmoid, unary_forward<Op::Sigmoid, SigmoidFn>, unary_backward<Op::Sigmoid, SigmoidFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Silu, unary_forward<Op::Silu, SiluFn>, unary_backward<Op::Silu, SiluFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Tanh, unary_forward<Op::Tanh, TanhFn>, unary_backward<Op::Tanh, TanhFn>)));
  CAPSULE_CHECK(registry.add(
      spec_for(Op::Softplus, unary_forward<Op::Softplus, SoftplusFn>, unary_backward<Op::Softplus, SoftplusFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Exp, unary_forward<Op::Exp, ExpFn>, unary_backward<Op::Exp, ExpFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Log, unary_forward<Op::Log, LogFn>, unary_backward<Op::Log, LogFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Sin, unary_forward<Op::Sin, SinFn>, unary_backward<Op::Sin, SinFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Cos, unary_forward<Op::Cos, CosFn>, unary_backward<Op::Cos, CosFn>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Inv, unary_forward<Op::Inv, InvFn>, unary_backward<Op::Inv, InvFn>)));
  CAPSULE_CHECK(
      registry.add(spec_for(Op::Scale, unary_forward<Op::Scale, ScaleFn>, unary_backward<Op::Scale, ScaleFn>)));
  CAPSULE_CHECK(
      registry.add(spec_for(Op::Clamp, unary_forward<Op::Clamp, ClampFn>, unary_backward<Op::Clamp, ClampFn>)));
  CAPSULE_CHECK(registry.add(
      spec_for(Op::SafeLog, unary_forward<Op::SafeLog, SafeLogFn>, unary_backward<Op::SafeLog, SafeLogFn>)));

  CAPSULE_CHECK(registry.add(spec_for(Op::Softmax, softmax_forward, softmax_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::LogSoftmax, log_softmax_forward, log_softmax_backward)));
  CAPSULE_CHECK(
      registry.add(spec_for(Op::HardMaskedSoftmax, hard_masked_softmax_forward, hard_masked_softmax_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::TopKMask, top_k_mask_forward, nullptr)));

  CAPSULE_CHECK(registry.add(
      spec_for(Op::ReduceSum, reduce_forward<Op::ReduceSum>, reduce_backward<Op::ReduceSum>)));
  CAPSULE_CHECK(registry.add(
      spec_for(Op::ReduceMean, reduce_forward<Op::ReduceMean>, reduce_backward<Op::ReduceMean>)));

  CAPSULE_CHECK(registry.add(spec_for(Op::RandUniform, rand_uniform_forward, nullptr)));
  CAPSULE_CHECK(registry.add(spec_for(Op::BernoulliMask, bernoulli_mask_forward, nullptr)));
  return std::monostate{};
}

}  // namespace capsule::reference
