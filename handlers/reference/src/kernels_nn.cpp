// SPDX-License-Identifier: Apache-2.0
// Reference kernels of the network layers: layer_norm, batch_norm, conv, conv_transpose, the three
// pools and scaled_dot_product_attention, forward and local adjoint.
#include <array>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "capsule/runtime/spatial_args.hpp"
#include "common.hpp"
#include "matmul_gemm.hpp"
#include "kernel_support.hpp"
#include "nn_conv.hpp"
#include "rowwise.hpp"

namespace capsule::reference {
namespace {

// ---------------------------------------------------------------------------------------------
// Spatial extents (the payload rules, shared with the cuDNN handlers, are capsule/runtime/spatial_args.hpp)
// ---------------------------------------------------------------------------------------------

Extent4 extent_of(const Tensor& t) {
  Extent4 e;
  e.n = t.dim(0);
  e.c = t.dim(1);
  if (t.rank() == 4) {
    e.h = t.dim(2);
    e.w = t.dim(3);
  } else {
    e.h = 1;
    e.w = t.dim(2);
  }
  return e;
}

// ---------------------------------------------------------------------------------------------
// conv and conv_transpose
// ---------------------------------------------------------------------------------------------

/// Everything a conv or conv_transpose call needs once its inputs are validated.
struct ConvPlan {
  ConvGeometry geo;
  std::int64_t groups = 1;
  std::int64_t kh = 1, kw = 1;
  Extent4 in, out;
  std::vector<std::int64_t> out_shape;
  bool has_bias = false;
};

/// Validates conv (transposed = false) or conv_transpose inputs and payload.
RuntimeResult<ConvPlan> plan_conv(std::string_view op, std::span<const Tensor> inputs, const OpAttrs& attrs,
                                  bool transposed) {
  CAPSULE_CHECK(expect_inputs(op, inputs, 2, 3));
  const Tensor& x = inputs[0];
  const Tensor& w = inputs[1];
  CAPSULE_TRY(std::size_t spatial, spatial_rank(op, x));
  const char* layout = transposed ? "[c, o/groups, k..]" : "[o, c/groups, k..]";
  if (w.rank() != x.rank()) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": weight has shape ", to_string(w.shape()), " for input ", to_string(x.shape()),
                             "; expected a weight ", layout, " of rank ", x.rank()));
  }
  ConvPlan plan;
  plan.groups = attrs.groups;
  if (plan.groups < 1) {
    return runtime_error(RuntimeCode::InvalidArgument, str(op, ": groups is ", attrs.groups, "; expected >= 1"));
  }
  CAPSULE_TRY(auto stride, spatial_param(op, "stride", attrs.stride, spatial, 1, 1, 1));
  CAPSULE_TRY(auto pad, spatial_param(op, "padding", attrs.padding, spatial, 0, 0, 0));
  CAPSULE_TRY(auto dil, spatial_param(op, "dilation", attrs.dilation, spatial, 1, 1, 1));
  for (std::size_t a = 0; a < 2; ++a) {
    plan.geo.stride[a] = stride[a];
    plan.geo.pad[a] = pad[a];
    plan.geo.dil[a] = dil[a];
  }
  plan.in = extent_of(x);
  const Extent4 we = extent_of(w);
  plan.kh = we.h;
  plan.kw = we.w;
  const std::int64_t c = plan.in.c;
  const std::int64_t g = plan.groups;
  std::int64_t out_channels = 0;
  if (!transposed) {
    if (c % g != 0 || we.n % g != 0 || we.c * g != c) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str(op, ": input ", to_string(x.shape()), " and weight ", to_string(w.shape()),
                               " with groups ", g, " disagree; expected c and o divisible by groups and weight ",
                               layout, " with c/groups = ", c % g == 0 ? c / g : c, " input channels"));
    }
    out_channels = we.n;
  } else {
    if (c % g != 0 || we.n != c) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str(op, ": input ", to_string(x.shape()), " and weight ", to_string(w.shape()),
                               " with groups ", g, " disagree; expected c divisible by groups and a weight ", layout,
                               " whose first dim is c = ", c));
    }
    CAPSULE_TRY(out_channels, checked_mul(str(op, " output channels"), we.c, g));
  }
  if (plan.kh < 1 || plan.kw < 1) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": weight ", to_string(w.shape()), " has an empty kernel; expected kernel sizes >= 1"));
  }
  std::array<std::int64_t, 2> out_size{};
  const std::array<std::int64_t, 2> in_size = {plan.in.h, plan.in.w};
  const std::array<std::int64_t, 2> kernel = {plan.kh, plan.kw};
  if (!transposed) {
    for (std::size_t a = 0; a < 2; ++a) {
      CAPSULE_TRY(out_size[a], window_count(op, in_size[a], kernel[a], stride[a], pad[a], dil[a]));
    }
  } else {
    CAPSULE_TRY(auto out_pad, spatial_param(op, "output_padding", attrs.output_padding, spatial, 0, 0, 0));
    for (std::size_t a = 0; a < 2; ++a) {
      // As in the usual definition, output_padding only resolves which of the `stride` input
      // sizes that map to one output size is meant, so it must stay below stride or dilation.
      if (out_pad[a] >= stride[a] && out_pad[a] >= dil[a]) {
        return runtime_error(RuntimeCode::InvalidArgument,
                             str(op, ": output_padding ", join_ints(attrs.output_padding),
                                 " is not below stride ", join_ints(attrs.stride), " or dilation ",
                                 join_ints(attrs.dilation), "; expected output_padding < max(stride, dilation)"));
      }
      if (in_size[a] < 1) {
        return runtime_error(RuntimeCode::ShapeMismatch,
                             str(op, ": input ", to_string(x.shape()), " has an empty spatial dim; expected sizes >= 1"));
      }
      // (in − 1)·stride − 2·pad + dil·(k − 1) + output_padding + 1
      CAPSULE_TRY(std::int64_t size, checked_mul(str(op, " output size"), in_size[a] - 1, stride[a]));
      CAPSULE_TRY(std::int64_t span, checked_mul(str(op, " output size"), dil[a], kernel[a] - 1));
      CAPSULE_TRY(size, checked_add(str(op, " output size"), size, span));
      CAPSULE_TRY(size, checked_add(str(op, " output size"), size, out_pad[a] + 1));
      CAPSULE_TRY(std::int64_t twice, checked_mul(str(op, " padding"), pad[a], 2));
      size = size - twice;  // both operands are >= 0, so this cannot overflow
      if (size < 1) {
        return runtime_error(RuntimeCode::ShapeMismatch,
                             str(op, ": input ", to_string(x.shape()), " with weight ", to_string(w.shape()),
                                 " and padding ", join_ints(attrs.padding), " gives output size ", size,
                                 "; expected a positive size"));
      }
      out_size[a] = size;
    }
  }
  plan.out = Extent4{plan.in.n, out_channels, out_size[0], out_size[1]};
  plan.out_shape = spatial_shape(x, out_channels, out_size[0], out_size[1]);
  plan.has_bias = has_input(inputs, 2);
  if (plan.has_bias && (inputs[2].rank() != 1 || inputs[2].dim(0) != out_channels)) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": bias has shape ", to_string(inputs[2].shape()), "; expected [", out_channels,
                             "] (the output channels of weight ", to_string(w.shape()), ")"));
  }
  return plan;
}

/// Adds bias[c] to every element of channel c, once, after the fixed-left sum.
template <class T>
void add_channel_bias(T* out, Extent4 e, const T* bias) {
  for (std::int64_t n = 0; n < e.n; ++n) {
    for (std::int64_t c = 0; c < e.c; ++c) {
      T* p = out + e.at(n, c, 0, 0);
      for (std::int64_t s = 0; s < e.h * e.w; ++s) p[s] = p[s] + bias[c];
    }
  }
}

RuntimeResult<Tensor> conv_forward_impl(std::string_view op, std::span<const Tensor> inputs, const OpAttrs& attrs,
                                        bool transposed) {
  CAPSULE_TRY(ConvPlan plan, plan_conv(op, inputs, attrs, transposed));
  CAPSULE_TRY(Tensor out, new_tensor(plan.out_shape, inputs[0].dtype()));
  with_dtype(out.dtype(), [&]<class T>() {
    T* o = out.mutable_data<T>();
    if (transposed) {
      conv_transpose_core(inputs[0].data<T>(), plan.in, inputs[1].data<T>(), plan.kh, plan.kw, o, plan.out,
                          plan.groups, plan.geo);
    } else {
      conv_core(inputs[0].data<T>(), plan.in, inputs[1].data<T>(), plan.kh, plan.kw, o, plan.out, plan.groups,
                plan.geo);
    }
    if (plan.has_bias) add_channel_bias(o, plan.out, inputs[2].data<T>());
  });
  return out;
}

RuntimeResult<std::vector<Tensor>> conv_backward_impl(std::string_view op, std::span<const Tensor> inputs,
                                                      const Tensor& output, const Tensor& grad_output,
                                                      const OpAttrs& attrs, bool transposed) {
  CAPSULE_TRY(ConvPlan plan, plan_conv(op, inputs, attrs, transposed));
  CAPSULE_CHECK(expect_grad(op, inputs, output, grad_output));
  std::vector<Tensor> grads(inputs.size());
  CAPSULE_TRY(grads[0], Tensor::empty(inputs[0].shape(), inputs[0].dtype()));
  CAPSULE_TRY(grads[1], Tensor::empty(inputs[1].shape(), inputs[1].dtype()));
  if (plan.has_bias) {
    CAPSULE_TRY(grads[2], Tensor::empty(inputs[2].shape(), inputs[2].dtype()));
  }
  with_dtype(output.dtype(), [&]<class T>() {
    const T* g = grad_output.data<T>();
    const T* x = inputs[0].data<T>();
    const T* w = inputs[1].data<T>();
    T* dx = grads[0].mutable_data<T>();
    T* dw = grads[1].mutable_data<T>();
    // Each direction's input adjoint is the other direction with the same weight and geometry,
    // evaluated at exactly the input's size.
    if (transposed) {
      conv_core(g, plan.out, w, plan.kh, plan.kw, dx, plan.in, plan.groups, plan.geo);
      conv_weight_grad(x, plan.in, g, plan.out, dw, plan.kh, plan.kw, plan.groups, plan.geo);
    } else {
      conv_transpose_core(g, plan.out, w, plan.kh, plan.kw, dx, plan.in, plan.groups, plan.geo);
      conv_weight_grad(g, plan.out, x, plan.in, dw, plan.kh, plan.kw, plan.groups, plan.geo);
    }
    if (plan.has_bias) channel_sum(g, plan.out, grads[2].mutable_data<T>());
  });
  return grads;
}

RuntimeResult<Tensor> conv_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  return conv_forward_impl("conv", inputs, attrs, false);
}
RuntimeResult<std::vector<Tensor>> conv_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                 const Tensor& grad_output, const OpAttrs& attrs) {
  return conv_backward_impl("conv", inputs, output, grad_output, attrs, false);
}
RuntimeResult<Tensor> conv_transpose_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  return conv_forward_impl("conv_transpose", inputs, attrs, true);
}
RuntimeResult<std::vector<Tensor>> conv_transpose_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                           const Tensor& grad_output, const OpAttrs& attrs) {
  return conv_backward_impl("conv_transpose", inputs, output, grad_output, attrs, true);
}

// ---------------------------------------------------------------------------------------------
// Pools
// ---------------------------------------------------------------------------------------------

enum class PoolKind : std::uint8_t { Max, Smooth, Avg };

struct PoolPlan {
  std::int64_t kh = 1, kw = 1;
  ConvGeometry geo;  // dilation stays 1: pools take none
  Extent4 in, out;
  std::vector<std::int64_t> out_shape;
};

RuntimeResult<PoolPlan> plan_pool(std::string_view op, std::span<const Tensor> inputs, const OpAttrs& attrs,
                                  PoolKind kind) {
  CAPSULE_CHECK(expect_inputs(op, inputs, 1, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(PoolWindow window, pool_window(op, x, attrs, kind == PoolKind::Smooth));
  PoolPlan plan;
  plan.kh = window.kernel[0];
  plan.kw = window.kernel[1];
  plan.in = extent_of(x);
  for (std::size_t a = 0; a < 2; ++a) {
    plan.geo.stride[a] = window.stride[a];
    plan.geo.pad[a] = window.pad[a];
  }
  plan.out = Extent4{plan.in.n, plan.in.c, window.out_size[0], window.out_size[1]};
  plan.out_shape = std::move(window.out_shape);
  return plan;
}

/// Calls visit(offset within the channel plane) for every real (non-padding) element of the
/// window of output (y, x), in row-major window order.
template <class Visit>
void for_window(const PoolPlan& p, std::int64_t y, std::int64_t x, Visit&& visit) {
  for (std::int64_t ky = 0; ky < p.kh; ++ky) {
    const std::int64_t iy = y * p.geo.stride[0] - p.geo.pad[0] + ky;
    if (iy < 0 || iy >= p.in.h) continue;
    for (std::int64_t kx = 0; kx < p.kw; ++kx) {
      const std::int64_t ix = x * p.geo.stride[1] - p.geo.pad[1] + kx;
      if (ix < 0 || ix >= p.in.w) continue;
      visit(iy * p.in.w + ix);
    }
  }
}

/// Runs `per_output(in_plane, out_plane index, y, x)` for every output element.
template <class PerOutput>
void for_outputs(const PoolPlan& p, PerOutput&& per_output) {
  for (std::int64_t n = 0; n < p.in.n; ++n) {
    for (std::int64_t c = 0; c < p.in.c; ++c) {
      const std::int64_t in_plane = p.in.at(n, c, 0, 0);
      const std::int64_t out_plane = p.out.at(n, c, 0, 0);
      for (std::int64_t y = 0; y < p.out.h; ++y) {
        for (std::int64_t x = 0; x < p.out.w; ++x) per_output(in_plane, out_plane + y * p.out.w + x, y, x);
      }
    }
  }
}

/// Window statistics of smooth_max_pool: the shift m and Σ exp((x − m)/T). The shift is the
/// window maximum, or 0 when that maximum is ±inf (as LibTorch's logsumexp), so a +inf entry gives
/// +inf and an all −inf window gives −inf instead of inf − inf = NaN.
template <class T>
struct SmoothStats {
  T max = T(0);
  T sum = T(0);
};

/// True when `v` replaces `best` as a window's maximum: the first element, any larger one, or the
/// first NaN (a NaN anywhere in the window is the window's maximum, as in LibTorch's max_pool;
/// once a NaN is held it stays, so the first NaN wins).
template <class T>
bool takes_window_max(bool first, T best, T v) {
  if (first) return true;
  if (std::isnan(best)) return false;
  return std::isnan(v) || v > best;
}

template <class T>
SmoothStats<T> smooth_stats(const PoolPlan& p, const T* plane, std::int64_t y, std::int64_t x, T temperature) {
  SmoothStats<T> s;
  bool any = false;
  for_window(p, y, x, [&](std::int64_t off) {
    s.max = takes_window_max(!any, s.max, plane[off]) ? plane[off] : s.max;
    any = true;
  });
  if (std::isinf(s.max)) s.max = T(0);
  for_window(p, y, x, [&](std::int64_t off) { s.sum = s.sum + std::exp((plane[off] - s.max) / temperature); });
  return s;
}

RuntimeResult<Tensor> pool_forward(std::string_view op, std::span<const Tensor> inputs, const OpAttrs& attrs,
                                   PoolKind kind) {
  CAPSULE_TRY(PoolPlan plan, plan_pool(op, inputs, attrs, kind));
  CAPSULE_TRY(Tensor out, new_tensor(plan.out_shape, inputs[0].dtype()));
  with_dtype(out.dtype(), [&]<class T>() {
    const T* xs = inputs[0].data<T>();
    T* o = out.mutable_data<T>();
    const T temperature = static_cast<T>(attrs.temperature);
    const T window = static_cast<T>(plan.kh * plan.kw);
    for_outputs(plan, [&](std::int64_t in_plane, std::int64_t oi, std::int64_t y, std::int64_t x) {
      const T* plane = xs + in_plane;
      switch (kind) {
        case PoolKind::Max: {
          T best = T(0);
          bool any = false;
          for_window(plan, y, x, [&](std::int64_t off) {
            if (takes_window_max(!any, best, plane[off])) best = plane[off];
            any = true;
          });
          o[oi] = best;
          return;
        }
        case PoolKind::Smooth: {
          const SmoothStats<T> s = smooth_stats(plan, plane, y, x, temperature);
          o[oi] = s.max + temperature * std::log(s.sum);
          return;
        }
        case PoolKind::Avg: {
          T acc = T(0);
          for_window(plan, y, x, [&](std::int64_t off) { acc = acc + plane[off]; });
          o[oi] = acc / window;
          return;
        }
      }
    });
  });
  return out;
}

RuntimeResult<std::vector<Tensor>> pool_backward(std::string_view op, std::span<const Tensor> inputs,
                                                 const Tensor& output, const Tensor& grad_output, const OpAttrs& attrs,
                                                 PoolKind kind) {
  CAPSULE_TRY(PoolPlan plan, plan_pool(op, inputs, attrs, kind));
  CAPSULE_CHECK(expect_grad(op, inputs, output, grad_output));
  CAPSULE_TRY(Tensor dx, zeros_like(inputs[0]));
  with_dtype(output.dtype(), [&]<class T>() {
    const T* xs = inputs[0].data<T>();
    const T* g = grad_output.data<T>();
    T* d = dx.mutable_data<T>();
    const T temperature = static_cast<T>(attrs.temperature);
    const T window = static_cast<T>(plan.kh * plan.kw);
    // Contributions are scattered in output order, so each input gradient is a fixed-left sum
    // over the windows that contain it, in increasing output index.
    for_outputs(plan, [&](std::int64_t in_plane, std::int64_t oi, std::int64_t y, std::int64_t x) {
      const T* plane = xs + in_plane;
      T* dplane = d + in_plane;
      switch (kind) {
        case PoolKind::Max: {
          T best = T(0);
          std::int64_t arg = -1;
          for_window(plan, y, x, [&](std::int64_t off) {
            if (takes_window_max(arg < 0, best, plane[off])) {
              best = plane[off];
              arg = off;
            }
          });
          if (arg >= 0) dplane[arg] = dplane[arg] + g[oi];
          return;
        }
        case PoolKind::Smooth: {
          const SmoothStats<T> s = smooth_stats(plan, plane, y, x, temperature);
          for_window(plan, y, x, [&](std::int64_t off) {
            const T weight = std::exp((plane[off] - s.max) / temperature) / s.sum;
            dplane[off] = dplane[off] + g[oi] * weight;
          });
          return;
        }
        case PoolKind::Avg: {
          const T share = g[oi] / window;
          for_window(plan, y, x, [&](std::int64_t off) { dplane[off] = dplane[off] + share; });
          return;
        }
      }
    });
  });
  return std::vector<Tensor>{dx};
}

RuntimeResult<Tensor> max_pool_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  return pool_forward("max_pool", inputs, attrs, PoolKind::Max);
}
RuntimeResult<std::vector<Tensor>> max_pool_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                     const Tensor& grad_output, const OpAttrs& attrs) {
  return pool_backward("max_pool", inputs, output, grad_output, attrs, PoolKind::Max);
}
RuntimeResult<Tensor> smooth_max_pool_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  return pool_forward("smooth_max_pool", inputs, attrs, PoolKind::Smooth);
}
RuntimeResult<std::vector<Tensor>> smooth_max_pool_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                            const Tensor& grad_output, const OpAttrs& attrs) {
  return pool_backward("smooth_max_pool", inputs, output, grad_output, attrs, PoolKind::Smooth);
}
RuntimeResult<Tensor> avg_pool_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  return pool_forward("avg_pool", inputs, attrs, PoolKind::Avg);
}
RuntimeResult<std::vector<Tensor>> avg_pool_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                     const Tensor& grad_output, const OpAttrs& attrs) {
  return pool_backward("avg_pool", inputs, output, grad_output, attrs, PoolKind::Avg);
}

// ---------------------------------------------------------------------------------------------
// layer_norm and batch_norm
// ---------------------------------------------------------------------------------------------

RuntimeResult<double> norm_eps(std::string_view op, const OpAttrs& attrs) {
  if (attrs.eps == 0.0) return 1e-5;
  if (!std::isfinite(attrs.eps) || attrs.eps < 0) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, ": eps is ", attrs.eps, "; expected a finite value >= 0 (0 = default 1e-5)"));
  }
  return attrs.eps;
}

/// Checks the optional affine parameters: each absent or of shape [size].
RuntimeStatus expect_affine(std::string_view op, std::span<const Tensor> inputs, std::int64_t size,
                            std::string_view over) {
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    if (inputs[i].rank() != 1 || inputs[i].dim(0) != size) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str(op, ": ", i == 1 ? "gamma" : "beta", " has shape ", to_string(inputs[i].shape()),
                               "; expected [", size, "] (", over, " of input ", to_string(inputs[0].shape()), ")"));
    }
  }
  return std::monostate{};
}

/// The statistics of one normalisation group, on the group scaled by 2^-shift (exact): the
/// normalised value of element x is (ldexp(x, -shift) − mean)·rstd, and the true 1/σ is
/// ldexp(rstd, -shift).
template <class T>
struct GroupStats {
  int shift = 0;
  T mean = T(0);
  T rstd = T(0);

  T xhat(T x) const { return (std::ldexp(x, -shift) - mean) * rstd; }
  T true_rstd() const { return std::ldexp(rstd, -shift); }
};

/// A normalisation group: `count` elements at offsets at(e), each with its affine index aff(e).
/// Every sum is fixed-left in e order; the arithmetic avoids cancellation and overflow:
/// - scale: when the largest magnitude is at least 1, the group is scaled by a power of two
///   (exact) so that it lies within ±1; sums and squares then cannot overflow (a float32 row
///   such as {1e20, -1e20, 1e20, 0} squares to 5.6e39 and used to normalise to all zeros), and
///   every later step commutes with the scaling, so it changes no bit unless an element or eps
///   falls into the denormal range once scaled;
/// - mean: Σx/n, then corrected by the mean of the residuals Σ(x − mean)/n. A float32 sum of
///   1,000 values near 100 is off by ~1e-4 relative to the spread; the residuals are small and
///   nearly exact, so the corrected mean is accurate to a few ulps of the spread;
/// - variance: the centred squares Σ(x − mean)²/n (two passes, no cancelling formula).
/// NaN or ±inf in a group makes the whole group NaN (IEEE propagation, as LibTorch).
template <class T, class At>
GroupStats<T> group_stats(const T* x, std::int64_t count, At at, T eps) {
  GroupStats<T> s;
  T largest = T(0);
  for (std::int64_t e = 0; e < count; ++e) largest = std::max(largest, std::abs(x[at(e)]));
  if (std::isfinite(largest) && largest >= T(1)) (void)std::frexp(largest, &s.shift);
  auto scaled = [&](std::int64_t e) { return std::ldexp(x[at(e)], -s.shift); };
  const T n = static_cast<T>(count);
  T sum = T(0);
  for (std::int64_t e = 0; e < count; ++e) sum = sum + scaled(e);
  s.mean = sum / n;
  T residual = T(0);
  for (std::int64_t e = 0; e < count; ++e) residual = residual + (scaled(e) - s.mean);
  s.mean = s.mean + residual / n;
  T squares = T(0);
  for (std::int64_t e = 0; e < count; ++e) {
    const T d = scaled(e) - s.mean;
    squares = squares + d * d;
  }
  // var = 4^shift·squares/n, so 1/sqrt(var + eps) = 2^-shift / sqrt(squares/n + eps·4^-shift).
  s.rstd = T(1) / std::sqrt(squares / n + std::ldexp(eps, -2 * s.shift));
  return s;
}

template <class T, class At, class Aff>
void group_forward(const T* x, T* y, std::int64_t count, At at, Aff aff, T eps, const T* gamma, const T* beta) {
  if (count == 0) return;
  const GroupStats<T> s = group_stats(x, count, at, eps);
  for (std::int64_t e = 0; e < count; ++e) {
    T v = s.xhat(x[at(e)]);
    if (gamma != nullptr) v = v * gamma[aff(e)];
    if (beta != nullptr) v = v + beta[aff(e)];
    y[at(e)] = v;
  }
}

/// dx of one group; dgamma/dbeta (when wanted) accumulate g·x̂ and g into their aff(e) slots.
template <class T, class At, class Aff>
void group_backward(const T* x, const T* g, T* dx, std::int64_t count, At at, Aff aff, T eps, const T* gamma,
                    T* dgamma, T* dbeta) {
  if (count == 0) return;
  const GroupStats<T> s = group_stats(x, count, at, eps);
  T sum_d = T(0);
  T sum_dx = T(0);
  for (std::int64_t e = 0; e < count; ++e) {
    const T xhat = s.xhat(x[at(e)]);
    const T dxhat = gamma != nullptr ? g[at(e)] * gamma[aff(e)] : g[at(e)];
    sum_d = sum_d + dxhat;
    sum_dx = sum_dx + dxhat * xhat;
    if (dgamma != nullptr) dgamma[aff(e)] = dgamma[aff(e)] + g[at(e)] * xhat;
    if (dbeta != nullptr) dbeta[aff(e)] = dbeta[aff(e)] + g[at(e)];
  }
  const T mean_d = sum_d / static_cast<T>(count);
  const T mean_dx = sum_dx / static_cast<T>(count);
  const T rstd = s.true_rstd();
  for (std::int64_t e = 0; e < count; ++e) {
    const T xhat = s.xhat(x[at(e)]);
    const T dxhat = gamma != nullptr ? g[at(e)] * gamma[aff(e)] : g[at(e)];
    dx[at(e)] = rstd * (dxhat - mean_d - xhat * mean_dx);
  }
}

template <class T>
const T* optional_data(std::span<const Tensor> inputs, std::size_t i) {
  return has_input(inputs, i) ? inputs[i].data<T>() : nullptr;
}

/// The per-group layout of layer_norm (rows of the last axis) or batch_norm (channels over n and
/// the spatial positions), so forward and backward walk the same groups in the same order.
struct NormLayout {
  bool per_channel = false;
  std::int64_t groups = 0, count = 0;  // groups of `count` elements
  std::int64_t n = 0, c = 0, spatial = 0;
};

RuntimeResult<NormLayout> norm_layout(std::string_view op, std::span<const Tensor> inputs, bool per_channel) {
  CAPSULE_CHECK(expect_inputs(op, inputs, 1, 3));
  const Tensor& x = inputs[0];
  NormLayout l;
  l.per_channel = per_channel;
  if (!per_channel) {
    if (x.rank() < 1) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str(op, ": input has shape ", to_string(x.shape()), "; expected rank >= 1"));
    }
    l.count = x.dim(x.rank() - 1);
    l.groups = l.count == 0 ? 0 : x.numel() / l.count;
    CAPSULE_CHECK(expect_affine(op, inputs, l.count, "the last axis"));
    return l;
  }
  if (x.rank() < 2) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": input has shape ", to_string(x.shape()), "; expected [n, c, ..] of rank >= 2"));
  }
  l.n = x.dim(0);
  l.c = x.dim(1);
  CAPSULE_TRY(l.spatial, dims_product(str(op, " spatial size"), x.shape().dims(), 2, x.rank()));
  CAPSULE_TRY(l.count, checked_mul(str(op, " batch count"), l.n, l.spatial));
  l.groups = l.c;
  CAPSULE_CHECK(expect_affine(op, inputs, l.c, "the channels"));
  return l;
}

RuntimeResult<Tensor> norm_forward(std::string_view op, std::span<const Tensor> inputs, const OpAttrs& attrs,
                                   bool per_channel) {
  CAPSULE_TRY(NormLayout l, norm_layout(op, inputs, per_channel));
  CAPSULE_TRY(double eps_value, norm_eps(op, attrs));
  CAPSULE_TRY(Tensor out, Tensor::empty(inputs[0].shape(), inputs[0].dtype()));
  // Nothing to normalise; the group loop below would still walk every (possibly huge) channel.
  if (out.numel() == 0) return out;
  with_dtype(out.dtype(), [&]<class T>() {
    const T eps = static_cast<T>(eps_value);
    const T* x = inputs[0].data<T>();
    T* y = out.mutable_data<T>();
    const T* gamma = optional_data<T>(inputs, 1);
    const T* beta = optional_data<T>(inputs, 2);
    for (std::int64_t grp = 0; grp < l.groups; ++grp) {
      if (!per_channel) {
        const std::int64_t base = grp * l.count;
        group_forward(x, y, l.count, [&](std::int64_t e) { return base + e; }, [](std::int64_t e) { return e; }, eps,
                      gamma, beta);
      } else {
        auto at = [&](std::int64_t e) { return ((e / l.spatial) * l.c + grp) * l.spatial + e % l.spatial; };
        group_forward(x, y, l.count, at, [&](std::int64_t) { return grp; }, eps, gamma, beta);
      }
    }
  });
  return out;
}

RuntimeResult<std::vector<Tensor>> norm_backward(std::string_view op, std::span<const Tensor> inputs,
                                                 const Tensor& output, const Tensor& grad_output, const OpAttrs& attrs,
                                                 bool per_channel) {
  CAPSULE_TRY(NormLayout l, norm_layout(op, inputs, per_channel));
  CAPSULE_TRY(double eps_value, norm_eps(op, attrs));
  CAPSULE_CHECK(expect_grad(op, inputs, output, grad_output));
  std::vector<Tensor> grads(inputs.size());
  CAPSULE_TRY(grads[0], Tensor::empty(inputs[0].shape(), inputs[0].dtype()));
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].defined()) {
      CAPSULE_TRY(grads[i], zeros_like(inputs[i]));
    }
  }
  if (inputs[0].numel() == 0) return grads;
  with_dtype(output.dtype(), [&]<class T>() {
    const T eps = static_cast<T>(eps_value);
    const T* x = inputs[0].data<T>();
    const T* g = grad_output.data<T>();
    T* dx = grads[0].mutable_data<T>();
    const T* gamma = optional_data<T>(inputs, 1);
    T* dgamma = gamma != nullptr ? grads[1].mutable_data<T>() : nullptr;
    T* dbeta = has_input(inputs, 2) ? grads[2].mutable_data<T>() : nullptr;
    for (std::int64_t grp = 0; grp < l.groups; ++grp) {
      if (!per_channel) {
        const std::int64_t base = grp * l.count;
        group_backward(x, g, dx, l.count, [&](std::int64_t e) { return base + e; }, [](std::int64_t e) { return e; },
                       eps, gamma, dgamma, dbeta);
      } else {
        auto at = [&](std::int64_t e) { return ((e / l.spatial) * l.c + grp) * l.spatial + e % l.spatial; };
        group_backward(x, g, dx, l.count, at, [&](std::int64_t) { return grp; }, eps, gamma, dgamma, dbeta);
      }
    }
  });
  return grads;
}

RuntimeResult<Tensor> layer_norm_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  return norm_forward("layer_norm", inputs, attrs, false);
}
RuntimeResult<std::vector<Tensor>> layer_norm_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                       const Tensor& grad_output, const OpAttrs& attrs) {
  return norm_backward("layer_norm", inputs, output, grad_output, attrs, false);
}
RuntimeResult<Tensor> batch_norm_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  return norm_forward("batch_norm", inputs, attrs, true);
}
RuntimeResult<std::vector<Tensor>> batch_norm_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                       const Tensor& grad_output, const OpAttrs& attrs) {
  return norm_backward("batch_norm", inputs, output, grad_output, attrs, true);
}

// ---------------------------------------------------------------------------------------------
// scaled_dot_product_attention
// ---------------------------------------------------------------------------------------------

struct AttentionPlan {
  std::int64_t batch = 1, n = 0, m = 0, d = 0, dv = 0;
  double scale = 1.0;
  bool has_mask = false;
  bool batched_mask = false;
  std::vector<std::int64_t> out_shape;
};

RuntimeResult<AttentionPlan> plan_attention(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  CAPSULE_CHECK(expect_inputs(op, inputs, 3, 4));
  const Tensor& q = inputs[0];
  const Tensor& k = inputs[1];
  const Tensor& v = inputs[2];
  const std::size_t r = q.rank();
  auto shapes = [&] {
    return str("q ", to_string(q.shape()), ", k ", to_string(k.shape()), ", v ", to_string(v.shape()));
  };
  if (r < 2 || k.rank() != r || v.rank() != r) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": ", shapes(), "; expected q [.., n, d], k [.., m, d], v [.., m, dv] of one rank >= 2"));
  }
  for (std::size_t i = 0; i + 2 < r; ++i) {
    if (k.dim(i) != q.dim(i) || v.dim(i) != q.dim(i)) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str(op, ": ", shapes(), " differ in batch dim ", i, "; expected equal leading dims"));
    }
  }
  AttentionPlan p;
  p.n = q.dim(r - 2);
  p.d = q.dim(r - 1);
  p.m = k.dim(r - 2);
  p.dv = v.dim(r - 1);
  if (k.dim(r - 1) != p.d || v.dim(r - 2) != p.m) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": ", shapes(), "; expected k [.., m, d] with q's d = ", p.d,
                             " and v [.., m, dv] with k's m = ", p.m));
  }
  CAPSULE_TRY(p.batch, dims_product(str(op, " batch size"), q.shape().dims(), 0, r - 2));
  CAPSULE_CHECK(checked_mul(str(op, " score count"), p.n, p.m));  // the [n, m] score buffers
  p.out_shape = q.shape().to_vector();
  p.out_shape[r - 1] = p.dv;
  p.has_mask = has_input(inputs, 3);
  if (p.has_mask) {
    const Tensor& mask = inputs[3];
    const bool plain = mask.rank() == 2 && mask.dim(0) == p.n && mask.dim(1) == p.m;
    bool batched = mask.rank() == r && mask.dim(r - 2) == p.n && mask.dim(r - 1) == p.m;
    for (std::size_t i = 0; batched && i + 2 < r; ++i) batched = mask.dim(i) == q.dim(i);
    if (!plain && !batched) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str(op, ": mask has shape ", to_string(mask.shape()), " for ", shapes(), "; expected [",
                               p.n, ", ", p.m, "] or the batch dims followed by [", p.n, ", ", p.m, "]"));
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
  return p;
}

/// Whether query i may attend to key j: not past the diagonal under `causal`, and a nonzero mask.
template <class T>
bool attention_allowed(const AttentionPlan& p, const OpAttrs& attrs, const T* mask, std::int64_t i, std::int64_t j) {
  if (attrs.causal && j > i) return false;
  return mask == nullptr || mask[i * p.m + j] != T(0);
}

/// The attention weights of one batch entry: W = hard_masked_softmax(scale · q·kᵀ) [n, m].
template <class T>
void attention_weights(const AttentionPlan& p, const OpAttrs& attrs, const T* q, const T* k, const T* mask, T* w,
                       std::vector<T>& scratch) {
  scratch.resize(idx(std::max<std::int64_t>(p.d * p.m, p.n * p.m)));
  transpose_into(k, scratch.data(), p.m, p.d);  // kᵀ [d, m]
  std::vector<T> scores(idx(p.n * p.m));
  gemm_fixed_left(q, scratch.data(), scores.data(), p.n, p.d, p.m);
  const T scale = static_cast<T>(p.scale);
  for (T& s : scores) s = s * scale;
  for (std::int64_t i = 0; i < p.n; ++i) {
    auto allowed = [&](std::int64_t j) { return attention_allowed(p, attrs, mask, i, j); };
    hard_masked_softmax_row(scores.data() + i * p.m, allowed, w + i * p.m, p.m);
  }
}

template <class T>
const T* mask_for(const AttentionPlan& p, std::span<const Tensor> inputs, std::int64_t b) {
  if (!p.has_mask) return nullptr;
  const T* base = inputs[3].data<T>();
  return p.batched_mask ? base + b * p.n * p.m : base;
}

/// dst[rows×cols] = Σ_j w[r, j]·x[j, :] over the edges (r, j) that `edge` allows, each element the
/// fixed-left sum from +0 (gemm_fixed_left's fold restricted to allowed terms). A blocked edge adds
/// no term, so a non-finite x there cannot reach the row: TorchLean's hard mask removes the edge,
/// not only its weight (docs/special-values.md). With every edge allowed it equals the gemm bit
/// for bit; it is used only when a mask or the causal flag blocks something.
template <class T, class Edge>
void masked_product(const T* w, const T* x, T* dst, std::int64_t rows, std::int64_t inner, std::int64_t cols,
                    Edge&& edge) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      T acc = T(0);
      for (std::int64_t j = 0; j < inner; ++j) {
        if (edge(r, j)) acc = acc + w[r * inner + j] * x[j * cols + c];
      }
      dst[r * cols + c] = acc;
    }
  }
}

RuntimeResult<Tensor> attention_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(AttentionPlan p, plan_attention(inputs, attrs));
  CAPSULE_TRY(Tensor out, new_tensor(p.out_shape, inputs[0].dtype()));
  with_dtype(out.dtype(), [&]<class T>() {
    std::vector<T> w(idx(p.n * p.m));
    std::vector<T> scratch;
    for (std::int64_t b = 0; b < p.batch; ++b) {
      attention_weights(p, attrs, inputs[0].data<T>() + b * p.n * p.d, inputs[1].data<T>() + b * p.m * p.d,
                        mask_for<T>(p, inputs, b), w.data(), scratch);
      // out = W·v over the allowed keys: a blocked key adds no term, so a NaN or ±inf value there
      // leaves the query's output untouched (and a fully blocked row is +0).
      const T* v = inputs[2].data<T>() + b * p.m * p.dv;
      T* o = out.mutable_data<T>() + b * p.n * p.dv;
      const T* mask = mask_for<T>(p, inputs, b);
      if (mask == nullptr && !attrs.causal) {
        gemm_fixed_left(w.data(), v, o, p.n, p.m, p.dv);
      } else {
        masked_product(w.data(), v, o, p.n, p.m, p.dv,
                       [&](std::int64_t i, std::int64_t j) { return attention_allowed(p, attrs, mask, i, j); });
      }
    }
  });
  return out;
}

RuntimeResult<std::vector<Tensor>> attention_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                      const Tensor& grad_output, const OpAttrs& attrs) {
  CAPSULE_TRY(AttentionPlan p, plan_attention(inputs, attrs));
  CAPSULE_CHECK(expect_grad("scaled_dot_product_attention", inputs, output, grad_output));
  std::vector<Tensor> grads(inputs.size());
  for (std::size_t i = 0; i < 3; ++i) {
    CAPSULE_TRY(grads[i], Tensor::empty(inputs[i].shape(), inputs[i].dtype()));
  }
  with_dtype(output.dtype(), [&]<class T>() {
    const std::size_t nm = idx(p.n * p.m);
    std::vector<T> w(nm), wt(nm), dw(nm), vt(idx(p.m * p.dv)), scratch;
    const T scale = static_cast<T>(p.scale);
    for (std::int64_t b = 0; b < p.batch; ++b) {
      const T* q = inputs[0].data<T>() + b * p.n * p.d;
      const T* k = inputs[1].data<T>() + b * p.m * p.d;
      const T* v = inputs[2].data<T>() + b * p.m * p.dv;
      const T* g = grad_output.data<T>() + b * p.n * p.dv;
      const T* mask = mask_for<T>(p, inputs, b);
      attention_weights(p, attrs, q, k, mask, w.data(), scratch);
      transpose_into(w.data(), wt.data(), p.n, p.m);
      // dv = Wᵀ·g over the allowed edges: a blocked query adds no term to a key's gradient, so a
      // non-finite g there leaves dv finite (the forward's edges, transposed).
      T* dv = grads[2].mutable_data<T>() + b * p.m * p.dv;
      if (mask == nullptr && !attrs.causal) {
        gemm_fixed_left(wt.data(), g, dv, p.m, p.n, p.dv);
      } else {
        masked_product(wt.data(), g, dv, p.m, p.n, p.dv,
                       [&](std::int64_t j, std::int64_t i) { return attention_allowed(p, attrs, mask, i, j); });
      }
      // dW = g·vᵀ, then the softmax adjoint dS = W ⊙ (dW − Σ_j W·dW), scaled once. A blocked
      // key adds no term and gets exactly 0, as in hard_masked_softmax's adjoint.
      transpose_into(v, vt.data(), p.m, p.dv);
      gemm_fixed_left(g, vt.data(), dw.data(), p.n, p.dv, p.m);
      for (std::int64_t i = 0; i < p.n; ++i) {
        T* row = dw.data() + i * p.m;
        const T* wr = w.data() + i * p.m;
        T dot = T(0);
        for (std::int64_t j = 0; j < p.m; ++j) {
          if (attention_allowed(p, attrs, mask, i, j)) dot = dot + wr[j] * row[j];
        }
        for (std::int64_t j = 0; j < p.m; ++j) {
          row[j] = attention_allowed(p, attrs, mask, i, j) ? (wr[j] * (row[j] - dot)) * scale : T(0);
        }
      }
      // dq = dS·k and dk = dSᵀ·q.
      gemm_fixed_left(dw.data(), k, grads[0].mutable_data<T>() + b * p.n * p.d, p.n, p.m, p.d);
      transpose_into(dw.data(), wt.data(), p.n, p.m);
      gemm_fixed_left(wt.data(), q, grads[1].mutable_data<T>() + b * p.m * p.d, p.m, p.n, p.d);
    }
  });
  return grads;  // the mask (if any) takes no gradient: grads[3] stays undefined
}

}  // namespace

RuntimeStatus register_nn_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(registry.add(spec_for(Op::LayerNorm, layer_norm_forward, layer_norm_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::BatchNorm, batch_norm_forward, batch_norm_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Conv, conv_forward, conv_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::ConvTranspose, conv_transpose_forward, conv_transpose_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::MaxPool, max_pool_forward, max_pool_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::SmoothMaxPool, smooth_max_pool_forward, smooth_max_pool_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::AvgPool, avg_pool_forward, avg_pool_backward)));
  CAPSULE_CHECK(registry.add(
      spec_for(Op::ScaledDotProductAttention, attention_forward, attention_backward)));
  return std::monostate{};
}

}  // namespace capsule::reference
