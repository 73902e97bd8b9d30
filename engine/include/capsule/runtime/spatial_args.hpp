// SPDX-License-Identifier: Apache-2.0
// The spatial payload and shape rules of the conv and pool ops (conventions in op_args.hpp), one
// copy for the reference and the cuDNN providers: the per-spatial-dim payloads (stride, padding,
// dilation, kernel, output padding), the [n, c, l] | [n, c, h, w] rank, and the window count.
// Both refuse the same call with the same code and message, so a swap between them never changes
// which calls fail or how they are explained. (The LibTorch provider still checks windows its own
// way, handlers/libtorch/src/windows.hpp, with its own wording.) A 1-D op's height axis is trivial
// (kernel 1, stride 1, padding 0, dilation 1), so a [n, c, l] input runs as [n, c, 1, l].
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/runtime/op_args.hpp"
#include "capsule/runtime/tensor.hpp"

namespace capsule {

/// [height, width] of a per-spatial-dim payload.
using SpatialPair = std::array<std::int64_t, 2>;

/// "[a, b, c]": a payload's values as they appear in messages.
std::string join_ints(const std::vector<std::int64_t>& values);

/// Reads one per-spatial-dim payload (`stride`, `padding`, ...) into [height, width] form. Empty
/// means `fallback` on every axis; otherwise it needs exactly one entry per spatial dim, each >=
/// `min`. For 1-D ops the height entry is `trivial` (the value that leaves the axis inert).
RuntimeResult<SpatialPair> spatial_param(std::string_view op, std::string_view name,
                                         const std::vector<std::int64_t>& values, std::size_t spatial,
                                         std::int64_t fallback, std::int64_t min, std::int64_t trivial);

/// The number of spatial dims of a conv/pool input: 1 for [n, c, l], 2 for [n, c, h, w]; any
/// other rank is a shape-mismatch.
RuntimeResult<std::size_t> spatial_rank(std::string_view op, const Tensor& x);

/// floor((in + 2·pad − (dil·(k−1) + 1)) / stride) + 1, failing (shape-mismatch) when the window
/// does not fit the padded input and (overflow) when a step overflows int64.
RuntimeResult<std::int64_t> window_count(std::string_view op, std::int64_t in, std::int64_t k, std::int64_t stride,
                                         std::int64_t pad, std::int64_t dil);

/// The output shape with x's rank and batch, `channels`, and spatial size [h, w] (w alone for a
/// rank-3 x).
std::vector<std::int64_t> spatial_shape(const Tensor& x, std::int64_t channels, std::int64_t h, std::int64_t w);

/// A pool's validated window over x: kernel (one entry per spatial dim, required), stride (the
/// kernel when empty), padding (at most half the kernel, so every window holds a real element),
/// no dilation other than 1, and the output it gives.
struct PoolWindow {
  SpatialPair kernel{1, 1};
  SpatialPair stride{1, 1};
  SpatialPair pad{0, 0};
  SpatialPair out_size{1, 1};  ///< the output's [h, w]
  std::vector<std::int64_t> out_shape;
};

/// The window rules of max_pool, avg_pool and smooth_max_pool. `smooth` also checks the payload
/// temperature (finite, > 0), at its place in the order of checks: after the rank, the kernel's
/// entry count and the dilation, before the window values.
RuntimeResult<PoolWindow> pool_window(std::string_view op, const Tensor& x, const OpAttrs& attrs,
                                      bool smooth = false);

}  // namespace capsule
