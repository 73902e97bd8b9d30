// SPDX-License-Identifier: Apache-2.0
// Grid-stride kernels: one launch covers any count that fits in int64, with a grid capped so the
// launch configuration is always valid.
#include "small_kernels.hpp"
#include "transpose_index.hpp"

namespace capsule::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65535;

unsigned blocks_for(std::int64_t count) {
  const std::int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

__global__ void probe_kernel(int* flag, int value) { *flag = value; }

template <class T>
__global__ void broadcast_rows_kernel(T* out, const T* row, std::int64_t rows, std::int64_t cols) {
  const std::int64_t total = rows * cols;
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    out[i] = row[i % cols];
  }
}

template <class T>
__global__ void fill_kernel(T* out, T value, std::int64_t count) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    out[i] = value;
  }
}

template <class T>
cudaError_t broadcast_rows(T* out, const T* row, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  broadcast_rows_kernel<T><<<blocks_for(rows * cols), kThreads, 0, stream>>>(out, row, rows, cols);
  return cudaGetLastError();
}

template <class T>
cudaError_t fill(T* out, T value, std::int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  fill_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(out, value, count);
  return cudaGetLastError();
}

template <class T>
__global__ void add_channel_bias_kernel(T* out, const T* bias, std::int64_t total, std::int64_t channels,
                                        std::int64_t spatial) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    out[i] = out[i] + bias[(i / spatial) % channels];
  }
}

// Launched with kThreads threads: each sums a fixed stride of the channel's n·spatial elements
// in increasing order, then a fixed halving tree combines the partial sums.
template <class T>
__global__ void channel_sum_kernel(const T* in, T* out, std::int64_t n, std::int64_t channels, std::int64_t spatial) {
  __shared__ T partial[kThreads];
  const std::int64_t count = n * spatial;
  for (std::int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    T acc = T(0);
    for (std::int64_t j = threadIdx.x; j < count; j += kThreads) {
      acc = acc + in[((j / spatial) * channels + c) * spatial + j % spatial];
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] = partial[threadIdx.x] + partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[c] = partial[0];
    __syncthreads();  // partial is reused by this block's next channel
  }
}

// o indexes out [batch, cols, out_stride]: (b, j, i) reads in [batch, rows, in_stride] at (b, i, j)
// for i < rows; the lanes rows <= i < out_stride are zero (a channel-padded copy). The index is
// padded_transpose_source, which a device-free test runs on the host.
template <class T>
__global__ void transpose_padded_kernel(const T* in, T* out, std::int64_t total, std::int64_t rows, std::int64_t cols,
                                        std::int64_t in_stride, std::int64_t out_stride) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total; o += stride) {
    const std::int64_t source = padded_transpose_source(o, rows, cols, in_stride, out_stride);
    out[o] = source >= 0 ? in[source] : T(0);
  }
}

template <class T>
cudaError_t transpose_padded(const T* in, T* out, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                             std::int64_t in_stride, std::int64_t out_stride, cudaStream_t stream) {
  const std::int64_t total = batch * cols * out_stride;
  if (total <= 0) return cudaSuccess;
  if (in_stride < cols || out_stride < rows) return cudaErrorInvalidValue;
  transpose_padded_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(in, out, total, rows, cols, in_stride,
                                                                          out_stride);
  return cudaGetLastError();
}

template <class T>
cudaError_t add_channel_bias(T* out, const T* bias, std::int64_t n, std::int64_t channels, std::int64_t spatial,
                             cudaStream_t stream) {
  const std::int64_t total = n * channels * spatial;
  if (total <= 0) return cudaSuccess;
  add_channel_bias_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(out, bias, total, channels, spatial);
  return cudaGetLastError();
}

template <class T>
cudaError_t channel_sum(const T* in, T* out, std::int64_t n, std::int64_t channels, std::int64_t spatial,
                        cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(channels < kMaxBlocks ? channels : kMaxBlocks);
  channel_sum_kernel<T><<<blocks, kThreads, 0, stream>>>(in, out, n, channels, spatial);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_probe_kernel(int* flag, int value, cudaStream_t stream) {
  probe_kernel<<<1, 1, 0, stream>>>(flag, value);
  return cudaGetLastError();
}

cudaError_t launch_broadcast_rows(float* out, const float* row, std::int64_t rows, std::int64_t cols,
                                  cudaStream_t stream) {
  return broadcast_rows(out, row, rows, cols, stream);
}
cudaError_t launch_broadcast_rows(double* out, const double* row, std::int64_t rows, std::int64_t cols,
                                  cudaStream_t stream) {
  return broadcast_rows(out, row, rows, cols, stream);
}
cudaError_t launch_fill(float* out, float value, std::int64_t count, cudaStream_t stream) {
  return fill(out, value, count, stream);
}
cudaError_t launch_fill(double* out, double value, std::int64_t count, cudaStream_t stream) {
  return fill(out, value, count, stream);
}

cudaError_t launch_add_channel_bias(float* out, const float* bias, std::int64_t n, std::int64_t channels,
                                    std::int64_t spatial, cudaStream_t stream) {
  return add_channel_bias(out, bias, n, channels, spatial, stream);
}
cudaError_t launch_add_channel_bias(double* out, const double* bias, std::int64_t n, std::int64_t channels,
                                    std::int64_t spatial, cudaStream_t stream) {
  return add_channel_bias(out, bias, n, channels, spatial, stream);
}
cudaError_t launch_channel_sum(const float* in, float* out, std::int64_t n, std::int64_t channels,
                               std::int64_t spatial, cudaStream_t stream) {
  return channel_sum(in, out, n, channels, spatial, stream);
}
cudaError_t launch_channel_sum(const double* in, double* out, std::int64_t n, std::int64_t channels,
                               std::int64_t spatial, cudaStream_t stream) {
  return channel_sum(in, out, n, channels, spatial, stream);
}

cudaError_t launch_transpose_padded(const float* in, float* out, std::int64_t batch, std::int64_t rows,
                                    std::int64_t cols, std::int64_t in_stride, std::int64_t out_stride,
                                    cudaStream_t stream) {
  return transpose_padded(in, out, batch, rows, cols, in_stride, out_stride, stream);
}
cudaError_t launch_transpose_padded(const double* in, double* out, std::int64_t batch, std::int64_t rows,
                                    std::int64_t cols, std::int64_t in_stride, std::int64_t out_stride,
                                    cudaStream_t stream) {
  return transpose_padded(in, out, batch, rows, cols, in_stride, out_stride, stream);
}

}  // namespace capsule::cuda
