// SPDX-License-Identifier: Apache-2.0
// The window contract of conv, conv_transpose, max_pool and avg_pool, shared by the plain kernels
// (kernels_nn.cpp) and the autograd regions (autograd_region.cpp) so that both check the same
// ranks, payload lists and bias shape before ATen is called. A 1-D input runs as a 2-D one of
// height 1, as in the reference.
#pragma once

#include <ATen/ops/amax.h>
#include <ATen/ops/col2im.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/div.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/isinf.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "boundary.hpp"

namespace capsule::libtorch {


/// One value per axis of the 2-D window ATen runs (a 1-D input runs as height 1, so there are
/// always two), held inline in a fixed array: a conv or pool call fills four or five of them, and
/// a heap allocation each, then a growable inline vector, was a measurable part of the provider's
/// per-call overhead (docs/benchmarks.md, "The LibTorch provider's overhead"). ATen takes it as
/// an IntArrayRef without a copy.
using AxisValues = std::array<std::int64_t, 2>;

/// Sets `values` from `given`, one entry per spatial axis (empty = `fallback` on each), with the
/// height axis of a 1-D input (`spatial` 1) set to `lead`. `spatial` is 1 or 2: the callers check
/// the input's rank first.
inline RuntimeStatus per_axis(AxisValues& values, Op op, std::string_view what, const std::vector<std::int64_t>& given,
                              std::size_t spatial, std::int64_t fallback, std::int64_t lead) {
  if (given.empty()) {
    values = {spatial == 1 ? lead : fallback, fallback};
    return std::monostate{};
  }
  if (given.size() != spatial) {
    return runtime_error(RuntimeCode::InvalidArgument, str(to_string(op), ": ", what, " has ", given.size(),
                                                           " entries; expected ", spatial, " (one per spatial dim) or none"));
  }
  values = spatial == 1 ? AxisValues{lead, given[0]} : AxisValues{given[0], given[1]};
  return std::monostate{};
}

struct Window {
  bool one_d = false;
  AxisValues kernel, stride, padding, dilation, output_padding;
  std::vector<std::int64_t> out_dims;  ///< a pool's output shape (ours: [n, c, l] or [n, c, oh, ow])
};

// By value: a temporary passes through moved, without a reference count update.
inline at::Tensor as_2d(at::Tensor t, bool one_d) { return one_d ? t.unsqueeze(2) : std::move(t); }
inline at::Tensor from_2d(at::Tensor t, bool one_d) { return one_d ? t.squeeze(2) : std::move(t); }

/// conv's and conv_transpose's window. conv_transpose's weight is [c, o/groups, k..] (ATen's
/// transposed layout), so its bias has o = w.dim(1)·groups entries; ATen checks the channels.
/// Sets `win`'s one_d, stride, padding, dilation and output_padding (not kernel or out_dims);
/// `win` is unspecified after an error. Pass a fresh Window.
inline RuntimeStatus conv_window(Window& win, Op op, Inputs inputs, const OpAttrs& attrs) {
  const std::string_view name = to_string(op);
  CAPSULE_CHECK(expect_inputs(name, inputs, 2, 3));
  const Tensor& x = inputs[0];
  const Tensor& w = inputs[1];
  if ((x.rank() != 3 && x.rank() != 4) || w.rank() != x.rank()) {
    return shape_error(op, str("x has shape ", to_string(x.shape()), " and w ", to_string(w.shape()),
                                     "; expected [n, c, l] or [n, c, h, w] and a weight of the same rank"));
  }
  if (attrs.groups < 1) {
    return runtime_error(RuntimeCode::InvalidArgument, str(name, ": groups is ", attrs.groups, "; expected >= 1"));
  }
  const bool transposed = op == Op::ConvTranspose;
  std::int64_t out_channels = w.dim(0);
  if (transposed) {
    CAPSULE_TRY(out_channels, checked_mul(str(name, " output channels"), w.dim(1), attrs.groups));
  }
  if (has_input(inputs, 2) && (inputs[2].rank() != 1 || inputs[2].dim(0) != out_channels)) {
    return shape_error(op, str("bias has shape ", to_string(inputs[2].shape()), "; expected [", out_channels, "]"));
  }
  const std::size_t spatial = x.rank() - 2;
  win.one_d = spatial == 1;
  CAPSULE_CHECK(per_axis(win.stride, op, "stride", attrs.stride, spatial, 1, 1));
  CAPSULE_CHECK(per_axis(win.padding, op, "padding", attrs.padding, spatial, 0, 0));
  CAPSULE_CHECK(per_axis(win.dilation, op, "dilation", attrs.dilation, spatial, 1, 1));
  if (transposed) {
    CAPSULE_CHECK(per_axis(win.output_padding, op, "output_padding", attrs.output_padding, spatial, 0, 0));
  } else {
    win.output_padding = {0, 0};
  }
  return std::monostate{};
}

/// A pool's window, as the reference checks it: x [n, c, l] | [n, c, h, w], one kernel entry per
/// spatial axis, stride defaulting to the kernel, no dilation, padding at most half the kernel (so
/// every window holds a real element), a window that fits, and for smooth_max_pool a finite
/// temperature > 0. The output is floor mode: (size + 2·padding − kernel)/stride + 1 per axis.
/// Sets `win`'s one_d, kernel, stride, padding, dilation and out_dims (not output_padding); `win`
/// is unspecified after an error. Pass a fresh Window.
inline RuntimeStatus pool_window(Window& win, Op op, Inputs inputs, const OpAttrs& attrs) {
  const std::string_view name = to_string(op);
  CAPSULE_CHECK(expect_inputs(name, inputs, 1, 1));
  const Tensor& x = inputs[0];
  if (x.rank() != 3 && x.rank() != 4) {
    return shape_error(op, str("x has shape ", to_string(x.shape()), "; expected [n, c, l] or [n, c, h, w]"));
  }
  const std::size_t spatial = x.rank() - 2;
  if (attrs.kernel.size() != spatial) {
    return runtime_error(RuntimeCode::InvalidArgument, str(name, ": kernel has ", attrs.kernel.size(),
                                                           " entries; expected ", spatial));
  }
  win.one_d = spatial == 1;
  CAPSULE_CHECK(per_axis(win.kernel, op, "kernel", attrs.kernel, spatial, 1, 1));
  CAPSULE_CHECK(per_axis(win.stride, op, "stride", attrs.stride.empty() ? attrs.kernel : attrs.stride, spatial, 1, 1));
  CAPSULE_CHECK(per_axis(win.padding, op, "padding", attrs.padding, spatial, 0, 0));
  for (const std::int64_t d : attrs.dilation) {
    if (d != 1) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(name, ": dilation ", quoted_dims(attrs.dilation), " given; pools take no dilation"));
    }
  }
  win.dilation = {1, 1};
  if (op == Op::SmoothMaxPool && !(std::isfinite(attrs.temperature) && attrs.temperature > 0)) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(name, ": temperature is ", attrs.temperature, "; expected a finite value > 0"));
  }
  win.out_dims = x.shape().to_vector();
  const std::size_t first = x.rank() - spatial;
  for (std::size_t d = first; d < x.rank(); ++d) {
    const std::size_t a = win.one_d ? 1 : d - first;  // the axis in the 2-D window (1-D runs as height 1)
    // kernel − 2·padding is in [0, kernel] once padding <= kernel/2, so nothing below can overflow
    // on hostile payload near INT64_MAX.
    if (win.kernel[a] < 1 || win.stride[a] < 1 || win.padding[a] < 0 || win.padding[a] > win.kernel[a] / 2 ||
        x.dim(d) < win.kernel[a] - 2 * win.padding[a]) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(name, ": x has shape ", to_string(x.shape()), " and the window (kernel ",
                               quoted_dims(attrs.kernel), ", stride ", quoted_dims(attrs.stride), ", padding ",
                               quoted_dims(attrs.padding), ") does not fit; expected kernel and stride >= 1, "
                               "0 <= padding <= kernel / 2 and kernel <= size + 2·padding"));
    }
    win.out_dims[d] = (x.dim(d) - (win.kernel[a] - 2 * win.padding[a])) / win.stride[a] + 1;
  }
  return std::monostate{};
}

// smooth_max_pool, T·log Σ_window exp(x/T) in the reference's form: the shift m is the window
// maximum (NaN when the window holds one), or 0 when that maximum is ±inf, and y = m + T·log Σ
// exp((x − m)/T). ATen has no such pool, so it is composed: the input padded with −inf (a padded
// entry adds exp(−inf) = 0, so padding adds no term), its windows as a strided view
// [n, c, oh, ow, kh, kw] (no copy), and reductions over the last two axes. The plain handler and
// the autograd region share these, so both compute the same values.

/// The windows of a 2-D input [n, c, h, w], padded with −inf.
inline at::Tensor smooth_windows(const at::Tensor& x2d, const Window& win) {
  const at::Tensor padded =
      at::constant_pad_nd(x2d, {win.padding[1], win.padding[1], win.padding[0], win.padding[0]},
                          -std::numeric_limits<double>::infinity());
  return padded.unfold(2, win.kernel[0], win.stride[0]).unfold(3, win.kernel[1], win.stride[1]);
}

/// The shift m per window, keeping the window axes (size 1) so that it broadcasts over them.
inline at::Tensor smooth_shift(const at::Tensor& windows) {
  const at::Tensor m = at::amax(windows, {4, 5}, /*keepdim=*/true);
  return m.masked_fill(at::isinf(m), 0);
}

/// exp((x − m)/T) per window entry.
inline at::Tensor smooth_terms(const at::Tensor& windows, const at::Tensor& shift, double temperature) {
  return at::exp(at::div(at::sub(windows, shift), temperature));
}

}  // namespace capsule::libtorch
