// SPDX-License-Identifier: Apache-2.0
// Grid-stride kernels: one launch covers any count that fits in int64, with a grid capped so the
// launch configuration is always valid.
#include "small_kernels.hpp"

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

}  // namespace capsule::cuda
