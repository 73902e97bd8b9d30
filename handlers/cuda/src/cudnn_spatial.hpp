// SPDX-License-Identifier: Apache-2.0
// The cuDNN conv and pool handlers' view of a spatial tensor. Their payload and shape rules are
// the engine's (capsule/runtime/spatial_args.hpp), shared with the reference, so each refuses a
// call with the reference's code and message. A 1-D tensor [n, c, l] runs as the 2-D
// [n, c, 1, l] with a trivial height axis (kernel 1, stride 1, padding 0, dilation 1).
#pragma once

#include <array>
#include <cstdint>

#include "capsule/runtime/spatial_args.hpp"
#include "capsule/runtime/tensor.hpp"

namespace capsule::cuda {

using Pair = SpatialPair;  ///< [height, width]

/// A rank-3 or rank-4 tensor's dims as [n, c, h, w] (height 1 for rank 3).
std::array<std::int64_t, 4> dims4(const Tensor& t);

}  // namespace capsule::cuda
