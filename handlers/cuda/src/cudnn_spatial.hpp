// SPDX-License-Identifier: Apache-2.0
// The spatial payload and shape rules shared by the cuDNN conv and pool handlers, with the
// reference's exact checks and messages (handlers/reference/src/kernels_nn.cpp): per-spatial-dim
// payloads, the [n, c, l] | [n, c, h, w] rank, the window count. A 1-D tensor [n, c, l] runs as
// the 2-D [n, c, 1, l] with a trivial height axis (kernel 1, stride 1, padding 0, dilation 1).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/runtime/tensor.hpp"

namespace capsule::cuda {

using Pair = std::array<std::int64_t, 2>;  ///< [height, width]

std::string join_ints(const std::vector<std::int64_t>& values);

/// A per-spatial-dim payload as [height, width]: empty means `fallback` on every axis, else one
/// entry per spatial dim, each >= `min`; a 1-D op's height entry is `trivial`.
RuntimeResult<Pair> spatial_param(std::string_view op, std::string_view name, const std::vector<std::int64_t>& values,
                                  std::size_t spatial, std::int64_t fallback, std::int64_t min, std::int64_t trivial);

/// The number of spatial dims of a conv/pool input: 1 for [n, c, l], 2 for [n, c, h, w].
RuntimeResult<std::size_t> spatial_rank(std::string_view op, const Tensor& x);

/// A rank-3 or rank-4 tensor's dims as [n, c, h, w] (height 1 for rank 3).
std::array<std::int64_t, 4> dims4(const Tensor& t);

/// floor((in + 2·pad − (dil·(k−1) + 1)) / stride) + 1, failing when the window does not fit.
RuntimeResult<std::int64_t> window_count(std::string_view op, std::int64_t in, std::int64_t k, std::int64_t stride,
                                         std::int64_t pad, std::int64_t dil);

/// The output shape with x's rank and batch, `channels`, and spatial size [h, w].
std::vector<std::int64_t> spatial_shape(const Tensor& x, std::int64_t channels, std::int64_t h, std::int64_t w);

}  // namespace capsule::cuda
