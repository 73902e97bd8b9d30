// SPDX-License-Identifier: Apache-2.0
// The process's CUDA device runtime, as the vendor handlers see it: the started device (its
// stream and pool), the CUDA error → RuntimeError conversion that names the op and latches sticky
// errors, the after-launch check, and device outputs. Only handlers/cuda includes this header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "capsule/handlers/cuda.hpp"
#include "capsule/runtime/tensor.hpp"
#include "capsule/text.hpp"

namespace capsule::cuda {

using Inputs = std::span<const Tensor>;

/// The started runtime of device 0. Lives until the process ends (never destroyed: tensors freed
/// during static destruction still find their stream).
struct StartedDevice {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
};

/// The started device, starting it on first use; or why there is none (the probe's reason, or an
/// earlier sticky error), as a device-unavailable error naming `op`.
RuntimeResult<const StartedDevice*> started(std::string_view op);

/// A device-error naming `op` and the failed `call` with CUDA's own name and text for `status`.
/// A sticky error (the context is unusable afterwards) is latched: every later call of this
/// process is refused with it.
Failure<RuntimeError> cuda_failure(std::string_view op, std::string_view call, cudaError_t status);
inline RuntimeStatus check_cuda(std::string_view op, std::string_view call, cudaError_t status) {
  if (status == cudaSuccess) return std::monostate{};
  return cuda_failure(op, call, status);
}

/// After a launch: our launch's error, and in debug mode (set_cuda_sync_after_launch) the
/// stream's completion, so an asynchronous error names the op that caused it. After a cuBLAS or
/// cuDNN call only the debug-mode synchronisation sees its kernels' errors (their runtime is
/// their own: after_library_failure).
RuntimeStatus after_launch(std::string_view op, const StartedDevice& device);

/// After a cuBLAS or cuDNN call failed: the CUDA error behind it, if any, is the better report.
/// Those libraries carry their own static CUDA runtime, so our cudaGetLastError never sees
/// their launches' errors; a sticky error is the context's, though, and cudaStreamQuery on our
/// stream returns it (and check_cuda latches it). "Not ready" means only that work is queued.
RuntimeStatus after_library_failure(std::string_view op, const StartedDevice& device);

/// A fresh output of `dims` and `dtype` in device memory (shape checked, pool-allocated).
RuntimeResult<Tensor> new_device_tensor(std::string_view op, std::span<const std::int64_t> dims, DType dtype);

/// Checks min..max inputs: the first `min` defined, every defined one a CUDA tensor (device-
/// mismatch otherwise: nothing is copied implicitly), one dtype throughout.
RuntimeStatus expect_device_inputs(std::string_view op, Inputs inputs, std::size_t min, std::size_t max);
/// A backward kernel's output gradient: defined, on the device, the output's shape and dtype,
/// and the inputs' dtype (the gradients are allocated with it and the gradient is read as it).
RuntimeStatus expect_device_grad(std::string_view op, Inputs inputs, const Tensor& output, const Tensor& grad);

/// A shape-mismatch error naming the op.
inline Failure<RuntimeError> shape_error(std::string_view op, const std::string& what) {
  return runtime_error(RuntimeCode::ShapeMismatch, str(op, ": ", what));
}

/// Typed device addresses (never dereferenced on the host).
template <class T>
const T* device_ptr(const Tensor& t) { return static_cast<const T*>(t.device_address()); }
template <class T>
T* mutable_device_ptr(Tensor& t) { return static_cast<T*>(t.mutable_device_address()); }

}  // namespace capsule::cuda
