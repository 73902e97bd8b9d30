// SPDX-License-Identifier: Apache-2.0
// LibTorch on CUDA: the LibTorch provider's device-generic kernels, registered a second time for
// device `cuda`, running on our device tensors and our stream. Built only when LibTorch has CUDA
// (its `torch_cuda` target) and the CUDA provider is built (handlers/libtorch/CMakeLists.txt);
// docs/libtorch.md, "LibTorch on CUDA", says what is and is not verified.
//
// One kernel, two devices: a CUDA handler is the CPU handler's kernel called inside a CUDA call
// scope (`on_our_stream`), which
//   - starts (or finds) our CUDA device runtime, and refuses the call with its reason when there
//     is none or an earlier sticky error poisoned it;
//   - makes our stream ATen's current stream for the call (c10's external-stream guard), so every
//     ATen kernel, and the cuBLAS and cuDNN calls ATen makes, are ordered with our own work;
//   - sets the boundary (boundary.hpp, DeviceBoundary): inputs are wrapped as CUDA tensors over our
//     device memory, outputs come from our stream-ordered pool, and an output ATen allocated is
//     adopted with our stream recorded on it.
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attention_contracts.hpp"
#include "boundary.hpp"
#include "capsule/handlers/cuda.hpp"
#include "capsule/text.hpp"

namespace capsule::libtorch {
namespace {

/// ATen's caching allocator gives a freed block back to the stream it was allocated on. An output
/// ATen allocates inside a call scope comes from our stream (it is ATen's current one), and our
/// later readers are queued on the same stream, so its reuse is already ordered after them.
/// Recording our stream anyway keeps that true for a block ATen took from a stream of its own (a
/// side stream inside an ATen kernel): the allocator then waits for our stream before reusing it.
/// A pointer the allocator did not hand out (never adopted: take_aten_result refuses our own
/// memory) is ignored by recordStream.
void record_our_stream(const at::Tensor& result) {
  c10::cuda::CUDACachingAllocator::recordStream(result.storage().data_ptr(), c10::cuda::getCurrentCUDAStream());
}

const DeviceBoundary& cuda_boundary() {
  static const DeviceBoundary boundary{Device::Cuda, &empty_on_device, &record_our_stream};
  return boundary;
}

/// Runs `body` (a CPU handler's kernel) as a CUDA call: see the file comment. ATen reports its
/// CUDA errors as exceptions inside the kernels (guarded() turns them into errors naming the op);
/// an asynchronous error surfaces later, so after a failed call, and after every call in debug
/// mode (CAPSULE_CUDA_SYNC=1), the stream is synchronised and its error, latched when sticky, is
/// the one reported.
template <class Body>
auto on_our_stream(std::string_view op, Body&& body) -> decltype(body()) {
  CAPSULE_TRY(void* stream, cuda_interop_stream(op));
  std::optional<decltype(body())> result;
  try {
    const c10::cuda::CUDAStreamGuard stream_guard(
        c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream), /*device_index=*/0));
    const DeviceCallScope scope(&cuda_boundary());
    result.emplace(body());
  } catch (const c10::Error& e) {
    result.emplace(aten_failure(op, e.what_without_backtrace()));
  } catch (const std::exception& e) {
    result.emplace(aten_failure(op, e.what()));
  }
  // A failure, thrown or returned, may be the first sign of an asynchronous error: synchronising
  // names it and latches it when sticky, and then it is the error reported.
  if (!result->has_value() || cuda_sync_after_launch()) CAPSULE_CHECK(cuda_synchronize(op));
  return std::move(*result);
}

/// The CPU handlers' kernels, by op, that the CUDA entry points below call.
struct CpuKernels {
  ForwardKernel forward = nullptr;
  BackwardKernel backward = nullptr;
  SavingForwardKernel forward_saving = nullptr;
  SavedBackwardKernel backward_saved = nullptr;
  AutogradForwardKernel forward_autograd = nullptr;
};

/// Filled by register_libtorch_cuda_handlers before any CUDA handler is registered; the same
/// values on every registration (they are the CPU registration's function addresses).
std::array<CpuKernels, kOpCount>& cpu_kernels() {
  static std::array<CpuKernels, kOpCount> kernels;
  return kernels;
}

constexpr std::string_view op_name(std::size_t i) { return to_string(static_cast<Op>(i)); }

/// An external-autograd region recorded on the device: its VJP runs in a CUDA call scope too.
class CudaRegion final : public AutogradBoundary {
 public:
  CudaRegion(std::string_view op, std::unique_ptr<AutogradBoundary> region) : op_(op), region_(std::move(region)) {}
  RuntimeResult<std::vector<Tensor>> vjp(const Tensor& grad_output) override {
    return on_our_stream(op_, [&] { return region_->vjp(grad_output); });
  }

 private:
  std::string_view op_;
  std::unique_ptr<AutogradBoundary> region_;
};

template <std::size_t I>
RuntimeResult<Tensor> cuda_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  return on_our_stream(op_name(I), [&] { return cpu_kernels()[I].forward(inputs, attrs); });
}

template <std::size_t I>
RuntimeResult<std::vector<Tensor>> cuda_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                 const Tensor& grad_output, const OpAttrs& attrs) {
  return on_our_stream(op_name(I), [&] { return cpu_kernels()[I].backward(inputs, output, grad_output, attrs); });
}

template <std::size_t I>
RuntimeResult<SavingForwardResult> cuda_forward_saving(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  return on_our_stream(op_name(I), [&] { return cpu_kernels()[I].forward_saving(inputs, attrs); });
}

template <std::size_t I>
RuntimeResult<std::vector<Tensor>> cuda_backward_saved(std::span<const Tensor> inputs, const Tensor& output,
                                                       const Tensor& grad_output, const OpAttrs& attrs,
                                                       const SavedState* saved) {
  return on_our_stream(op_name(I),
                       [&] { return cpu_kernels()[I].backward_saved(inputs, output, grad_output, attrs, saved); });
}

template <std::size_t I>
RuntimeResult<AutogradForwardResult> cuda_forward_autograd(std::span<const Tensor> inputs, const OpAttrs& attrs,
                                                           const std::vector<bool>& requires_grad) {
  return on_our_stream(op_name(I), [&]() -> RuntimeResult<AutogradForwardResult> {
    CAPSULE_TRY(AutogradForwardResult result, cpu_kernels()[I].forward_autograd(inputs, attrs, requires_grad));
    if (result.boundary != nullptr) result.boundary = std::make_unique<CudaRegion>(op_name(I), std::move(result.boundary));
    return result;
  });
}

/// One entry point per op and kernel kind: a kernel is a plain function pointer, so the op it
/// serves is a template argument rather than captured state.
struct CudaEntries {
  std::array<ForwardKernel, kOpCount> forward;
  std::array<BackwardKernel, kOpCount> backward;
  std::array<SavingForwardKernel, kOpCount> forward_saving;
  std::array<SavedBackwardKernel, kOpCount> backward_saved;
  std::array<AutogradForwardKernel, kOpCount> forward_autograd;
};

template <std::size_t... I>
constexpr CudaEntries make_entries(std::index_sequence<I...>) {
  return CudaEntries{{&cuda_forward<I>...},
                     {&cuda_backward<I>...},
                     {&cuda_forward_saving<I>...},
                     {&cuda_backward_saved<I>...},
                     {&cuda_forward_autograd<I>...}};
}

constexpr CudaEntries kCudaEntries = make_entries(std::make_index_sequence<kOpCount>{});

/// The CUDA twin of a CPU handler's description: the same guards (the kernels enforce them on
/// either device) plus the CUDA view guard, the CUDA view layout, and the CUDA entry points.
HandlerSpec cuda_spec(const HandlerSpec& cpu) {
  const auto i = static_cast<std::size_t>(cpu.op);
  HandlerSpec spec = cpu;
  spec.name = str("LibTorch CUDA ", to_string(cpu.op));
  spec.device = Device::Cuda;
  spec.layouts.insert(Layout::LibtorchCudaView);
  spec.guards.push_back(std::string(kLibTorchCudaLayoutGuard));
  spec.forward = cpu.forward != nullptr ? kCudaEntries.forward[i] : nullptr;
  spec.backward = cpu.backward != nullptr ? kCudaEntries.backward[i] : nullptr;
  spec.forward_saving = cpu.forward_saving != nullptr ? kCudaEntries.forward_saving[i] : nullptr;
  spec.backward_saved = cpu.backward_saved != nullptr ? kCudaEntries.backward_saved[i] : nullptr;
  spec.forward_autograd = cpu.forward_autograd != nullptr ? kCudaEntries.forward_autograd[i] : nullptr;
  return spec;
}

/// LibTorch's CUDA math modes, which ATen keeps process-wide in its global context and which
/// decide the values our capsules claim: no TF32 in cuBLAS or cuDNN (ATen lets cuDNN's
/// convolutions use TF32 unless told otherwise, so float32 conv would round its inputs to 10
/// mantissa bits), cuDNN's deterministic algorithms (its atomics-based backward-filter engines
/// are excluded), and no cuDNN benchmarking (which picks algorithms by timing them, so differently
/// from run to run). Set when the CUDA handlers register and again by the fingerprint, which reads
/// them back.
void set_exact_math_modes() {
  at::Context& context = at::globalContext();
  context.setAllowTF32CuBLAS(false);
  context.setAllowTF32CuDNN(false);
  context.setDeterministicCuDNN(true);
  context.setBenchmarkCuDNN(false);
}

}  // namespace
}  // namespace capsule::libtorch

namespace capsule {

RuntimeStatus register_libtorch_cuda_handlers(HandlerRegistry& registry) {
  if (registry.device_runtime(Device::Cuda) == nullptr) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         "register_libtorch_cuda_handlers: no CUDA device runtime is registered; call "
                         "register_cuda_handlers first (the LibTorch CUDA handlers run on its device, stream and pool)");
  }
  try {
    libtorch::set_exact_math_modes();
  } catch (const std::exception& e) {
    return runtime_error(RuntimeCode::DeviceError,
                         str("register_libtorch_cuda_handlers: LibTorch refused its CUDA math modes (no TF32, "
                             "deterministic cuDNN): ",
                             std::string_view(e.what()).substr(0, 300)));
  }
  HandlerRegistry cpu;
  CAPSULE_CHECK(register_libtorch_handlers(cpu));
  for (const RegisteredHandler* handler : cpu.all()) {
    const HandlerSpec& spec = handler->spec;
    libtorch::cpu_kernels()[static_cast<std::size_t>(spec.op)] = {spec.forward, spec.backward, spec.forward_saving,
                                                                  spec.backward_saved, spec.forward_autograd};
  }
  for (const RegisteredHandler* handler : cpu.all()) CAPSULE_CHECK(registry.add(libtorch::cuda_spec(handler->spec)));
  return std::monostate{};
}

EnvironmentFingerprint libtorch_cuda_fingerprint() {
  EnvironmentFingerprint fingerprint;
  const auto add = [&](std::string key, std::string value) { fingerprint.set(std::move(key), std::move(value)); };
  // pip's torch brings its own CUDA runtime, cuBLAS and cuDNN, and they share sonames with the
  // toolkit's that the CUDA provider links: the dynamic loader maps one object per soname, so
  // the paths below are the copies every handler of this process calls, whichever linked them.
  for (const std::string_view library : {"libcudart", "libcublas", "libcublasLt", "libcudnn", "libtorch_cuda"}) {
    const std::vector<std::string> paths = loaded_shared_objects(str(library, "."));
    add(str("provider.libtorch.cuda.", library), paths.empty() ? std::string("not loaded") : join(paths, ", "));
  }
  try {
    const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
    add("provider.libtorch.cuda.available", hooks.hasCUDA() ? "yes" : "no");
    // The cuDNN LibTorch was built against; the one loaded is `.libcudnn` above.
    add("provider.libtorch.cuda.cudnn_built_against",
        hooks.hasCuDNN() ? std::to_string(hooks.versionCuDNN()) : "none");
  } catch (const std::exception& e) {
    add("provider.libtorch.cuda.available", str("unknown: ", std::string_view(e.what()).substr(0, 200)));
  }
  // The modes are this provider's and process-wide. The CLI takes its fingerprint before it
  // registers any handler, so without setting them here its `check` reported ATen's defaults
  // (TF32 allowed in cuDNN), which no handler runs with. What is read back is what ATen holds now.
  try {
    libtorch::set_exact_math_modes();
    const at::Context& context = at::globalContext();
    add("provider.libtorch.cuda.math",
        str("tf32 cublas ", context.allowTF32CuBLAS() ? "allowed" : "off", ", tf32 cudnn ",
            context.allowTF32CuDNN() ? "allowed" : "off", ", cudnn ",
            context.deterministicCuDNN() ? "deterministic" : "nondeterministic allowed", ", benchmark ",
            context.benchmarkCuDNN() ? "on" : "off"));
  } catch (const std::exception& e) {
    add("provider.libtorch.cuda.math", str("not set: ", std::string_view(e.what()).substr(0, 200)));
  }
  return fingerprint;
}

RuntimeResult<std::string> libtorch_cuda_attention_route(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  return libtorch::on_our_stream("scaled_dot_product_attention",
                                 [&] { return libtorch::attention_route(inputs, attrs); });
}

}  // namespace capsule
