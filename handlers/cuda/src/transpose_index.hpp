// SPDX-License-Identifier: Apache-2.0
// The index arithmetic of the padded transpose kernel (small_kernels.cu), in a header nvcc and
// the host compiler both read, so a device-free test (tests/gpu/test_cuda_device_free.cpp) runs
// the very function the kernel runs.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CAPSULE_HOST_DEVICE __host__ __device__
#else
#define CAPSULE_HOST_DEVICE
#endif

namespace capsule::cuda {

/// For element `o` of out [batch, cols, out_stride]: the index in in [batch, rows, in_stride] it
/// copies, out[b, j, i] = in[b, i, j], or -1 for a zero lane (rows <= i < out_stride).
/// Requires out_stride > 0 and cols > 0 (the launcher returns before any element otherwise).
CAPSULE_HOST_DEVICE inline std::int64_t padded_transpose_source(std::int64_t o, std::int64_t rows, std::int64_t cols,
                                                                std::int64_t in_stride, std::int64_t out_stride) {
  const std::int64_t i = o % out_stride;
  const std::int64_t j = (o / out_stride) % cols;
  const std::int64_t b = o / (out_stride * cols);
  return i < rows ? (b * rows + i) * in_stride + j : -1;
}

}  // namespace capsule::cuda
