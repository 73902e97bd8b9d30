// SPDX-License-Identifier: Apache-2.0
// The CUDA device runtime: the probe that says why a device is unusable, the start (one stream,
// the device's stream-ordered pool), the error conversion with its sticky-error latch, explicit
// host↔device copies, and device outputs (docs/cuda.md).
#include "device.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "small_kernels.hpp"

#ifndef CAPSULE_CUDA_ARCHITECTURES
#define CAPSULE_CUDA_ARCHITECTURES "unknown"
#endif

namespace capsule {
namespace cuda {
namespace {

/// Everything the runtime keeps. Allocated once and never destroyed: a tensor released during
/// static destruction still finds its stream (the CUDA driver reclaims everything at exit).
struct RuntimeState {
  std::once_flag start_once;
  std::string unusable;  ///< the probe's reason; empty once started
  StartedDevice device;
  std::atomic<bool> sync_after_launch{false};
  std::atomic<bool> poisoned{false};
  std::mutex poison_mutex;
  std::string poison_reason;  ///< the first sticky error, with the op where it surfaced
};

RuntimeState& state() {
  static RuntimeState* const runtime = new RuntimeState();
  return *runtime;
}

/// "13.0" for CUDA's 13000.
std::string cuda_version_text(int version) { return str(version / 1000, ".", (version % 1000) / 10); }

std::string describe(cudaError_t status) {
  return str(cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
}

/// Errors after which CUDA's context is corrupt for the rest of the process: every later call
/// fails the same way, so we refuse up front and say why.
bool is_sticky(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

void free_on_stream(void* data, void* context) noexcept {
  // Stream-ordered: the block returns to the pool after every launch queued before it on our one
  // stream, so a kernel still reading the tensor finishes first. At process teardown CUDA may
  // already be unloading; the driver reclaims the block then, so the status is not an error.
  (void)cudaFreeAsync(data, static_cast<const StartedDevice*>(context)->stream);
}

/// Probes device 0 and starts the runtime on it. Returns "" when started, else the reason.
std::string start(RuntimeState& s) {
  int driver = 0;
  if (cudaError_t status = cudaDriverGetVersion(&driver); status != cudaSuccess) {
    return str("cudaDriverGetVersion failed: ", describe(status));
  }
  if (driver == 0) return "no CUDA driver is installed (libcuda.so.1 was not found)";
  int runtime = 0;
  if (cudaError_t status = cudaRuntimeGetVersion(&runtime); status != cudaSuccess) {
    return str("cudaRuntimeGetVersion failed: ", describe(status));
  }
  // Within one major version CUDA's minor-version compatibility lets an older driver run the
  // runtime; only its JIT of newer PTX can fail, which the probe launch below finds.
  if (driver / 1000 < runtime / 1000) {
    return str("the CUDA driver supports CUDA ", cuda_version_text(driver), ", older than the CUDA ",
               cuda_version_text(runtime), " runtime this build links; install a driver for CUDA ", runtime / 1000,
               ".x or newer");
  }
  int count = 0;
  const cudaError_t count_status = cudaGetDeviceCount(&count);
  if (count_status == cudaErrorNoDevice || (count_status == cudaSuccess && count == 0)) {
    return "no CUDA device is visible to this process (cudaGetDeviceCount found none; check the driver and "
           "CUDA_VISIBLE_DEVICES)";
  }
  if (count_status == cudaErrorInsufficientDriver) {
    return str("the CUDA driver (CUDA ", cuda_version_text(driver), ") is too old for the CUDA ",
               cuda_version_text(runtime), " runtime this build links");
  }
  if (count_status != cudaSuccess) return str("cudaGetDeviceCount failed: ", describe(count_status));

  StartedDevice& d = s.device;
  d.device = 0;
  if (cudaError_t status = cudaSetDevice(d.device); status != cudaSuccess) {
    return str("cudaSetDevice(0) failed: ", describe(status));
  }
  int major = 0, minor = 0;
  (void)cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d.device);
  (void)cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d.device);
  int pools_supported = 0;
  (void)cudaDeviceGetAttribute(&pools_supported, cudaDevAttrMemoryPoolsSupported, d.device);
  if (pools_supported == 0) {
    return str("device 0 (compute capability ", major, ".", minor,
               ") has no stream-ordered memory pools, which this runtime allocates from");
  }
  if (cudaError_t status = cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking); status != cudaSuccess) {
    return str("cudaStreamCreateWithFlags failed: ", describe(status));
  }
  if (cudaError_t status = cudaDeviceGetDefaultMemPool(&d.pool, d.device); status != cudaSuccess) {
    return str("cudaDeviceGetDefaultMemPool failed: ", describe(status));
  }
  // Keep freed blocks in the pool across synchronisations: every op allocates a fresh output,
  // and returning memory to the driver at each sync would make the next allocation a real one.
  std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
  if (cudaError_t status = cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
      status != cudaSuccess) {
    return str("cudaMemPoolSetAttribute(release threshold) failed: ", describe(status));
  }

  // One launch of our own kernel proves the build's image loads here: a missing SASS for this
  // architecture, or PTX from a newer toolkit than the driver can compile, fails now, not in an op.
  int* flag = nullptr;
  if (cudaError_t status = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&flag), sizeof(int), d.pool, d.stream);
      status != cudaSuccess) {
    return str("allocating the probe's 4 bytes failed: ", describe(status));
  }
  const cudaError_t launch = launch_probe_kernel(flag, 42, d.stream);
  if (launch == cudaErrorUnsupportedPtxVersion) {
    return str("this build's PTX comes from CUDA ", cuda_version_text(CUDART_VERSION), ", newer than the driver (CUDA ",
               cuda_version_text(driver), ") can compile for device 0 (compute capability ", major, ".", minor,
               "); update the driver, or build SASS for this architecture (CAPSULE_CUDA_ARCHITECTURES, built for ",
               CAPSULE_CUDA_ARCHITECTURES, ")");
  }
  if (launch == cudaErrorNoKernelImageForDevice || launch == cudaErrorInvalidKernelImage) {
    return str("this build has no kernel image for device 0 (compute capability ", major, ".", minor,
               "; built for CAPSULE_CUDA_ARCHITECTURES ", CAPSULE_CUDA_ARCHITECTURES, ")");
  }
  if (launch != cudaSuccess) return str("the probe kernel failed to launch: ", describe(launch));
  int seen = 0;
  cudaError_t status = cudaMemcpyAsync(&seen, flag, sizeof(int), cudaMemcpyDeviceToHost, d.stream);
  if (status == cudaSuccess) status = cudaFreeAsync(flag, d.stream);
  if (status == cudaSuccess) status = cudaStreamSynchronize(d.stream);
  if (status != cudaSuccess) return str("the probe kernel failed: ", describe(status));
  if (seen != 42) return str("the probe kernel ran but wrote ", seen, " instead of 42");

  // The variable only turns debug mode on: a program's earlier set_cuda_sync_after_launch(true)
  // stays in force.
  if (const char* sync = std::getenv("CAPSULE_CUDA_SYNC"); sync != nullptr && std::strcmp(sync, "1") == 0) {
    s.sync_after_launch.store(true, std::memory_order_relaxed);
  }
  return {};
}

RuntimeState& started_state() {
  RuntimeState& s = state();
  std::call_once(s.start_once, [&s] { s.unusable = start(s); });
  return s;
}

std::string poison_refusal(RuntimeState& s) {
  std::lock_guard lock(s.poison_mutex);
  return str("an earlier CUDA error left this process's CUDA context unusable (", s.poison_reason,
             "); every later CUDA call is refused: start a new process");
}

}  // namespace

RuntimeResult<const StartedDevice*> started(std::string_view op) {
  RuntimeState& s = started_state();
  if (!s.unusable.empty()) {
    return runtime_error(RuntimeCode::DeviceUnavailable, str(op, ": no usable CUDA device: ", s.unusable));
  }
  if (s.poisoned.load(std::memory_order_acquire)) {
    return runtime_error(RuntimeCode::DeviceError, str(op, ": refused: ", poison_refusal(s)));
  }
  return &s.device;
}

Failure<RuntimeError> cuda_failure(std::string_view op, std::string_view call, cudaError_t status) {
  RuntimeState& s = state();
  const bool sticky = is_sticky(status);
  std::string message = str(op, ": ", call, " failed: ", describe(status));
  if (status == cudaErrorMemoryAllocation) message += "; the device is out of memory";
  if (sticky) {
    {
      std::lock_guard lock(s.poison_mutex);
      if (s.poison_reason.empty()) s.poison_reason = str(describe(status), ", surfaced in `", op, "`");
    }
    s.poisoned.store(true, std::memory_order_release);
    message += "; this error is sticky: every later CUDA call of this process is refused";
    if (!s.sync_after_launch.load(std::memory_order_relaxed)) {
      message += ". CUDA reports errors asynchronously, so an earlier launch may have caused it: run with "
                 "CAPSULE_CUDA_SYNC=1 to report each error at the op that caused it";
    }
  }
  return runtime_error(RuntimeCode::DeviceError, std::move(message));
}

RuntimeStatus after_launch(std::string_view op, const StartedDevice& device) {
  CAPSULE_CHECK(check_cuda(op, "the launch", cudaGetLastError()));
  if (state().sync_after_launch.load(std::memory_order_relaxed)) {
    CAPSULE_CHECK(check_cuda(op, "cudaStreamSynchronize (CAPSULE_CUDA_SYNC=1)", cudaStreamSynchronize(device.stream)));
  }
  return std::monostate{};
}

RuntimeStatus after_library_failure(std::string_view op, const StartedDevice& device) {
  CAPSULE_CHECK(after_launch(op, device));
  const cudaError_t queued = cudaStreamQuery(device.stream);
  if (queued == cudaErrorNotReady) return std::monostate{};
  return check_cuda(op, "cudaStreamQuery after the library call failed", queued);
}

RuntimeResult<Tensor> new_device_tensor(std::string_view op, std::span<const std::int64_t> dims, DType dtype) {
  CAPSULE_TRY(const StartedDevice* device, started(op));
  CAPSULE_TRY(Shape shape, Shape::make(dims));
  CAPSULE_TRY(std::int64_t bytes,
              checked_mul(str(op, " output bytes"), shape.numel(), static_cast<std::int64_t>(element_size(dtype))));
  if (bytes == 0) return Tensor::over(Storage::adopt(nullptr, 0, Device::Cuda, nullptr, nullptr), shape, dtype);
  void* data = nullptr;
  if (cudaError_t status = cudaMallocFromPoolAsync(&data, static_cast<std::size_t>(bytes), device->pool, device->stream);
      status != cudaSuccess) {
    return cuda_failure(op, str("allocating ", bytes, " bytes of device memory"), status);
  }
  return Tensor::over(Storage::adopt(data, static_cast<std::size_t>(bytes), Device::Cuda, &free_on_stream,
                                     const_cast<StartedDevice*>(device)),
                      shape, dtype);
}

RuntimeStatus expect_device_inputs(std::string_view op, Inputs inputs, std::size_t min, std::size_t max) {
  if (inputs.size() < min || inputs.size() > max) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, ": expected ", min == max ? str(min) : str(min, " to ", max), " inputs, got ",
                             inputs.size()));
  }
  const Tensor* first = nullptr;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) {
      if (i < min) return runtime_error(RuntimeCode::InvalidArgument, str(op, ": input ", i, " is undefined"));
      continue;
    }
    if (t.device() != Device::Cuda) {
      return runtime_error(RuntimeCode::DeviceMismatch,
                           str(op, ": input ", i, " is on `", to_string(t.device()),
                               "`, but this handler reads CUDA device memory; move it with to_device first"));
    }
    if (first == nullptr) {
      first = &t;
    } else if (t.dtype() != first->dtype()) {
      return runtime_error(RuntimeCode::DTypeMismatch, str(op, ": input ", i, " is ", to_string(t.dtype()),
                                                           ", expected ", to_string(first->dtype()),
                                                           " like the inputs before it"));
    }
  }
  return std::monostate{};
}

RuntimeStatus expect_device_grad(std::string_view op, Inputs inputs, const Tensor& output, const Tensor& grad) {
  if (!grad.defined()) return runtime_error(RuntimeCode::InvalidArgument, str(op, ": the output gradient is undefined"));
  if (grad.device() != Device::Cuda) {
    return runtime_error(RuntimeCode::DeviceMismatch,
                         str(op, ": the output gradient is on `", to_string(grad.device()), "`, expected `cuda`"));
  }
  if (!(grad.shape() == output.shape()) || grad.dtype() != output.dtype()) {
    return shape_error(op, str("the output gradient is ", to_string(grad.dtype()), to_string(grad.shape()),
                               ", expected the output's ", to_string(output.dtype()), to_string(output.shape())));
  }
  if (!inputs.empty() && inputs[0].defined() && grad.dtype() != inputs[0].dtype()) {
    return shape_error(op, str("the output gradient is ", to_string(grad.dtype()), ", expected the inputs' ",
                               to_string(inputs[0].dtype())));
  }
  return std::monostate{};
}

}  // namespace cuda

std::string cuda_probe() {
  cuda::RuntimeState& s = cuda::started_state();
  if (!s.unusable.empty()) return s.unusable;
  if (s.poisoned.load(std::memory_order_acquire)) return cuda::poison_refusal(s);
  return {};
}

void set_cuda_sync_after_launch(bool on) { cuda::state().sync_after_launch.store(on, std::memory_order_relaxed); }
bool cuda_sync_after_launch() { return cuda::state().sync_after_launch.load(std::memory_order_relaxed); }

RuntimeStatus cuda_synchronize(std::string_view where) {
  CAPSULE_TRY(const cuda::StartedDevice* device, cuda::started(where));
  return cuda::check_cuda(where, "cudaStreamSynchronize", cudaStreamSynchronize(device->stream));
}

RuntimeResult<void*> cuda_interop_stream(std::string_view op) {
  CAPSULE_TRY(const cuda::StartedDevice* device, cuda::started(op));
  return static_cast<void*>(device->stream);
}

RuntimeResult<Tensor> empty_on_device(const Shape& shape, DType dtype) {
  return cuda::new_device_tensor("empty_on_device", shape.dims(), dtype);
}

RuntimeResult<Tensor> full_on_device(const Shape& shape, DType dtype, double value) {
  constexpr std::string_view kWhere = "full_on_device";
  CAPSULE_TRY(Tensor out, cuda::new_device_tensor(kWhere, shape.dims(), dtype));
  if (out.numel() == 0) return out;
  CAPSULE_TRY(const cuda::StartedDevice* device, cuda::started(kWhere));
  const cudaError_t launched =
      dtype == DType::F32 ? cuda::launch_fill(static_cast<float*>(out.mutable_device_address()),
                                              static_cast<float>(value), out.numel(), device->stream)
                          : cuda::launch_fill(static_cast<double*>(out.mutable_device_address()), value, out.numel(),
                                              device->stream);
  CAPSULE_CHECK(cuda::check_cuda(kWhere, "the fill kernel", launched));
  CAPSULE_CHECK(cuda::after_launch(kWhere, *device));
  return out;
}

RuntimeResult<Tensor> to_device(const Tensor& host) {
  constexpr std::string_view kWhere = "to_device";
  if (!host.defined()) return runtime_error(RuntimeCode::InvalidArgument, str(kWhere, ": the tensor is undefined"));
  if (host.device() != Device::Cpu) {
    return runtime_error(RuntimeCode::DeviceMismatch,
                         str(kWhere, ": the tensor is on `", to_string(host.device()), "`, expected `cpu`"));
  }
  CAPSULE_TRY(Tensor out, cuda::new_device_tensor(kWhere, host.shape().dims(), host.dtype()));
  const std::size_t bytes = static_cast<std::size_t>(host.numel()) * element_size(host.dtype());
  if (bytes == 0) return out;
  CAPSULE_TRY(const cuda::StartedDevice* device, cuda::started(kWhere));
  CAPSULE_CHECK(cuda::check_cuda(kWhere, "cudaMemcpyAsync host to device",
                                 cudaMemcpyAsync(out.mutable_device_address(), host.device_address(), bytes,
                                                 cudaMemcpyHostToDevice, device->stream)));
  // From pageable memory the call returns once the bytes are staged, but `host` may be adopted
  // pinned memory (a foreign runtime's), which the copy reads asynchronously: wait, so the host
  // tensor may die as soon as this returns whatever memory it lives in.
  CAPSULE_CHECK(cuda::check_cuda(kWhere, "cudaStreamSynchronize", cudaStreamSynchronize(device->stream)));
  return out;
}

RuntimeResult<Tensor> to_host(const Tensor& on_device) {
  constexpr std::string_view kWhere = "to_host";
  if (!on_device.defined()) return runtime_error(RuntimeCode::InvalidArgument, str(kWhere, ": the tensor is undefined"));
  if (on_device.device() != Device::Cuda) {
    return runtime_error(RuntimeCode::DeviceMismatch,
                         str(kWhere, ": the tensor is on `", to_string(on_device.device()), "`, expected `cuda`"));
  }
  CAPSULE_TRY(Tensor out, Tensor::empty(on_device.shape(), on_device.dtype()));
  const std::size_t bytes = static_cast<std::size_t>(on_device.numel()) * element_size(on_device.dtype());
  if (bytes == 0) return out;
  CAPSULE_TRY(const cuda::StartedDevice* device, cuda::started(kWhere));
  CAPSULE_CHECK(cuda::check_cuda(kWhere, "cudaMemcpyAsync device to host",
                                 cudaMemcpyAsync(out.mutable_device_address(), on_device.device_address(), bytes,
                                                 cudaMemcpyDeviceToHost, device->stream)));
  CAPSULE_CHECK(cuda::check_cuda(kWhere, "cudaStreamSynchronize", cudaStreamSynchronize(device->stream)));
  return out;
}

}  // namespace capsule
