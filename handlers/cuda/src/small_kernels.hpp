// SPDX-License-Identifier: Apache-2.0
// The few device kernels of our own that the vendor handlers need around a library call, and the
// probe kernel of cuda_probe. Compiled by nvcc (small_kernels.cu); declared here in plain C++ so
// the handlers' translation units are ordinary host code.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace capsule::cuda {

/// Writes `value` to `*flag` on the device: a launch that proves this build's kernel image (SASS
/// or PTX) loads on the device. Returns the launch's error.
cudaError_t launch_probe_kernel(int* flag, int value, cudaStream_t stream);

/// out[r, c] = row[c] for every row r < rows (the bias of linear, before the product adds onto it).
cudaError_t launch_broadcast_rows(float* out, const float* row, std::int64_t rows, std::int64_t cols,
                                  cudaStream_t stream);
cudaError_t launch_broadcast_rows(double* out, const double* row, std::int64_t rows, std::int64_t cols,
                                  cudaStream_t stream);

/// out[i] = value for i < count.
cudaError_t launch_fill(float* out, float value, std::int64_t count, cudaStream_t stream);
cudaError_t launch_fill(double* out, double value, std::int64_t count, cudaStream_t stream);

/// out[n, c, s] += bias[c] over a contiguous [n, channels, spatial] tensor (the conv bias, added
/// once after the convolution's own sum, as the reference adds it).
cudaError_t launch_add_channel_bias(float* out, const float* bias, std::int64_t n, std::int64_t channels,
                                    std::int64_t spatial, cudaStream_t stream);
cudaError_t launch_add_channel_bias(double* out, const double* bias, std::int64_t n, std::int64_t channels,
                                    std::int64_t spatial, cudaStream_t stream);

/// out[c] = Σ_{n, s} in[n, c, s] over a contiguous [n, channels, spatial] tensor (the conv bias
/// gradient). One block per channel, a fixed split over its threads and a fixed tree: the same
/// inputs give the same bits on every run (no atomics).
cudaError_t launch_channel_sum(const float* in, float* out, std::int64_t n, std::int64_t channels,
                               std::int64_t spatial, cudaStream_t stream);
cudaError_t launch_channel_sum(const double* in, double* out, std::int64_t n, std::int64_t channels,
                               std::int64_t spatial, cudaStream_t stream);

/// The NCHW <-> NHWC copy for cuDNN graphs that run channels-last only, with row strides for
/// channel-padded copies: out [batch, cols, out_stride] gets
/// out[b, j, i] = in[b, i, j] for i < rows, j < cols, reading in [batch, rows, in_stride]
/// (in_stride >= cols), and zero in the lanes rows <= i < out_stride (out_stride >= rows; else
/// cudaErrorInvalidValue). Pad: (n, c, S) with strides (S, c_padded); unpad: (n, S, c) with
/// strides (c_padded, S); the plain transpose has in_stride = cols and out_stride = rows.
cudaError_t launch_transpose_padded(const float* in, float* out, std::int64_t batch, std::int64_t rows,
                                    std::int64_t cols, std::int64_t in_stride, std::int64_t out_stride,
                                    cudaStream_t stream);
cudaError_t launch_transpose_padded(const double* in, double* out, std::int64_t batch, std::int64_t rows,
                                    std::int64_t cols, std::int64_t in_stride, std::int64_t out_stride,
                                    cudaStream_t stream);

}  // namespace capsule::cuda
