// SPDX-License-Identifier: Apache-2.0
// The CUDA device runtime and the vendor handlers that run on it (cuBLAS here; cuDNN beside it),
// provider by provider, device cuda. This header includes no CUDA header: programs that register
// handlers, and the engine, stay free of the toolkit (docs/cuda.md).
//
// One process-wide runtime per CUDA device 0, started by the first call that needs it:
//   - one non-blocking stream; cuBLAS and cuDNN are bound to it, and every copy and launch of
//     ours goes on it (docs/cuda.md, "Stream policy");
//   - device memory from that device's stream-ordered pool (cudaMallocAsync / cudaFreeAsync),
//     never managed memory; freed blocks stay in the pool for the next op's output;
//   - a sticky-error latch: after an error that leaves the CUDA context unusable (an illegal
//     address, a launch failure), every later call of this process is refused, naming the op
//     where the error surfaced.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "capsule/fingerprint.hpp"
#include "capsule/runtime/handler.hpp"
#include "capsule/runtime/tensor.hpp"

namespace capsule {

/// The runtime guards every CUDA vendor handler enforces; the exact names the `cublas` and
/// `cudnn` catalogs' runtime-guard evidence uses.
inline constexpr std::string_view kCudaShapeGuard = "CUDA vendor operand shape checks";
inline constexpr std::string_view kCudaLayoutGuard = "contiguous CUDA device buffer checks";

/// The name the CUDA device runtime registers under (HandlerRegistry::add_device_runtime).
inline constexpr std::string_view kCudaRuntimeName = "CUDA runtime (device 0, one stream, stream-ordered pool)";

/// Registers the CUDA device runtime (its probe runs at every CUDA session open) and every cuBLAS
/// and cuDNN handler. Registering needs no device: a machine without one can register and plan, and then
/// fails at session open with the probe's reason.
RuntimeStatus register_cuda_handlers(HandlerRegistry& registry);

/// Empty when CUDA device 0 is usable; else why not, in one line: no driver, a driver older than
/// the runtime this build links, PTX built by a newer toolkit than the driver supports, no device,
/// or an earlier sticky error. The first usable probe starts the runtime.
std::string cuda_probe();

/// A copy of `host` (a CPU tensor) in device memory. A tensor moves only when asked: no handler
/// copies between host and device on its own.
RuntimeResult<Tensor> to_device(const Tensor& host);
/// A CPU copy of `device` (a CUDA tensor). Waits for the work queued before it on our stream.
RuntimeResult<Tensor> to_host(const Tensor& device);
/// Uninitialised device storage for `shape`/`dtype`, from the stream-ordered pool.
RuntimeResult<Tensor> empty_on_device(const Shape& shape, DType dtype);
/// A device tensor with every element `value` (the CUDA runtime's DeviceFill: a session's
/// backward seed and zero gradients are made on the device, never copied from the host).
RuntimeResult<Tensor> full_on_device(const Shape& shape, DType dtype, double value);

/// Debug mode: synchronise the stream after every launch, so an asynchronous error is reported
/// by the op that caused it. Off by default; `CAPSULE_CUDA_SYNC=1` in the environment turns it on
/// when the runtime starts.
void set_cuda_sync_after_launch(bool on);
bool cuda_sync_after_launch();

/// Our stream, as an opaque `cudaStream_t`, for a library that must run on it (LibTorch's
/// external-stream guard: libtorch_cuda.cpp), starting the device on first use; or why there is
/// none, naming `op`. The stream lives until the process ends.
RuntimeResult<void*> cuda_interop_stream(std::string_view op);

/// Waits for everything queued on our stream; an error names `where`.
RuntimeStatus cuda_synchronize(std::string_view where);

/// One line per cuDNN execution plan this process has built and cached: the op, the graph, the
/// dtype, cuDNN's global engine index, whether that engine is noted nondeterministic, its
/// workspace, and the plan's key (alignment, dims, attributes). For the GPU suites' reports.
std::vector<std::string> cudnn_plan_report();

/// The shared objects this process has loaded whose file name starts with `prefix` (full paths,
/// in load order). The dynamic loader maps one object per soname, so with pip's torch beside the
/// toolkit this names the copy every caller of that soname uses.
std::vector<std::string> loaded_shared_objects(std::string_view prefix);

/// The CUDA runtime, cuBLAS and cuDNN versions (compiled against and loaded) and the shared objects
/// they come from (`provider.cuda.*`), the driver (`device.cuda.driver`), and device 0's name and
/// compute capability (`device.cuda`, `device.cuda.compute_capability`; `none` without one), for
/// the environment fingerprint (docs/fingerprint.md). Never starts the runtime's stream or pool.
EnvironmentFingerprint cuda_fingerprint();

}  // namespace capsule
