// SPDX-License-Identifier: Apache-2.0
#include "boundary.hpp"

#include <ATen/Parallel.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/api/include/torch/version.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>

namespace capsule::libtorch {
namespace {

/// One op's boundary counters. Atomic, so a handler counts without taking a lock.
struct OpCopyCounters {
  std::atomic<std::uint64_t> conversions{0};
  std::atomic<std::uint64_t> materialisations{0};
  std::atomic<std::uint64_t> adoptions{0};
};

/// Every boundary copy so far, indexed by op: every adopted output is counted, and the map keyed
/// by the op's name that this replaced cost a hash and a string comparison per count, a measurable
/// part of a small conv2d call's overhead (docs/benchmarks.md). A handler added later is counted
/// without registering anything: every op has its slot.
std::array<OpCopyCounters, kOpCount> copy_ledger;

void count_copy(Op op, std::atomic<std::uint64_t> OpCopyCounters::*kind) {
  (copy_ledger[static_cast<std::size_t>(op)].*kind).fetch_add(1, std::memory_order_relaxed);
}

at::IntArrayRef dims_of(const Tensor& t) {
  const std::span<const std::int64_t> dims = t.shape().dims();
  return {dims.data(), dims.size()};
}

/// The address of `t`'s first element, in host or device memory.
const void* buffer_of(const Tensor& t) {
  if (t.device() != Device::Cpu) return t.device_address();
  return t.dtype() == DType::F32 ? static_cast<const void*>(t.data<float>())
                                 : static_cast<const void*>(t.data<double>());
}

at::Tensor wrap(void* data, const Tensor& t) {
  const at::TensorOptions options = at::TensorOptions().dtype(aten_dtype(t.dtype())).device(aten_device(t.device()));
  if (t.device() == Device::Cpu) return at::from_blob(data, dims_of(t), options);
  // A device buffer names its device, so ATen does not ask the driver where the pointer lives: a
  // tensor of no elements has a null address, which that query refuses.
  return at::for_blob(data, dims_of(t)).options(options).target_device(aten_device(t.device())).make_tensor();
}

/// What from_blob builds for a contiguous CPU buffer, built directly: a storage that does not own
/// the bytes (no deleter), has no allocator and cannot be resized, under a dense CPU TensorImpl of
/// the tensor's sizes. A fresh output is wrapped on every call, and from_blob's general path
/// (strides, device guard, size checks) costs about 90 ns more per call (docs/libtorch.md).
at::Tensor wrap_output(void* data, const Tensor& t) {
  // A device buffer takes from_blob's general path: its overhead is a CPU call's concern.
  if (t.device() != Device::Cpu) return wrap(data, t);
  const auto bytes = static_cast<std::size_t>(t.numel()) * element_size(t.dtype());
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, c10::DataPtr(data, c10::Device(c10::kCPU)),
                       /*allocator=*/nullptr, /*resizable=*/false);
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                                   c10::scalarTypeToTypeMeta(aten_dtype(t.dtype())));
  impl->set_sizes_contiguous(dims_of(t));
  return at::Tensor(std::move(impl));
}

/// The tag whose address marks a ForeignView as this provider's. Its handle is a TensorImpl
/// holding one reference (an at::Tensor released into a raw pointer, so attaching allocates
/// nothing), a contiguous view over the storage's bytes.
constexpr char kAtenViewTag = 0;

using ImplPtr = c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

void release_aten_view(void* handle) noexcept { ImplPtr::reclaim(static_cast<c10::TensorImpl*>(handle)); }

/// `t`'s cached ATen view, or an undefined tensor when none is attached, another provider's is,
/// or the cached one has another shape or dtype (a reshape shares the storage).
at::Tensor cached_view(const Tensor& t) {
  const ForeignView* view = t.foreign_view();
  if (view == nullptr || view->provider != &kAtenViewTag) return {};
  auto* impl = static_cast<c10::TensorImpl*>(view->handle);
  if (impl->dtype() != c10::scalarTypeToTypeMeta(aten_dtype(t.dtype())) || impl->sizes() != dims_of(t)) return {};
  return at::Tensor(ImplPtr::unsafe_reclaim_from_nonowning(impl));
}

/// Caches `aten`, a contiguous view over all of `t`'s elements, on `t`'s storage, unless a view
/// is cached already.
void cache_view(const Tensor& t, const at::Tensor& aten) {
  if (t.foreign_view() != nullptr) return;
  at::Tensor reference = aten;
  (void)t.attach_foreign_view(ForeignView{&kAtenViewTag, reference.unsafeReleaseTensorImpl(), &release_aten_view});
}

}  // namespace

c10::ScalarType aten_dtype(DType dtype) { return dtype == DType::F32 ? at::kFloat : at::kDouble; }

c10::Device aten_device(Device device) {
  return device == Device::Cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
}

namespace {
thread_local const DeviceBoundary* current_boundary = nullptr;
}  // namespace

const DeviceBoundary* device_boundary() { return current_boundary; }

Device call_device() { return current_boundary == nullptr ? Device::Cpu : current_boundary->device; }

DeviceCallScope::DeviceCallScope(const DeviceBoundary* boundary) : previous_(current_boundary) {
  current_boundary = boundary;
}

DeviceCallScope::~DeviceCallScope() { current_boundary = previous_; }

at::Tensor view_input(const Tensor& t) {
  if (at::Tensor cached = cached_view(t); cached.defined()) return cached;
  at::Tensor view = fresh_view_input(t);
  cache_view(t, view);
  return view;
}

at::Tensor fresh_view_input(const Tensor& t) {
  // from_blob takes a mutable pointer; ATen only reads inputs (the boundary test checks every
  // handler leaves them bitwise unchanged).
  return wrap(const_cast<void*>(buffer_of(t)), t);
}

void keep_output_view(const Tensor& written, const at::Tensor& view) { cache_view(written, view); }

at::Tensor view_output(Tensor& t) {
  // A fresh output of ours, not yet shared with any other tensor: writing it is safe.
  return wrap_output(const_cast<void*>(buffer_of(t)), t);
}

RuntimeStatus expect_written(std::string_view op, const at::Tensor& aten, const Tensor& ours) {
  const void* mine = buffer_of(ours);
  const bool same_shape = aten.sizes() == dims_of(ours);
  // An empty tensor has no elements to adopt, and ATen reports a null data pointer for it.
  const bool same_buffer = ours.numel() == 0 || aten.data_ptr() == mine;
  if (!same_buffer || !same_shape || !aten.is_contiguous()) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("LibTorch ", op, ": ATen did not write the output in place (shape ", to_string(ours.shape()),
                             "); refusing its buffer"));
  }
  return std::monostate{};
}

RuntimeStatus expect_inputs(std::string_view op, Inputs inputs, std::size_t min, std::size_t max) {
  if (inputs.size() < min || inputs.size() > max) {
    const std::string expected = min == max ? std::to_string(min) : str(min, "..", max);
    return runtime_error(RuntimeCode::InvalidArgument, str(op, ": got ", inputs.size(), " inputs; expected ", expected));
  }
  const Device device = call_device();
  // The dtype check rides along this loop, and expect_same_dtype runs only to word a mismatch
  // after every device is checked: a second pass over the inputs cost about 50 instructions per
  // call (docs/benchmarks.md, "The LibTorch provider's overhead").
  bool mixed = false;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      if (i < min) {
        return runtime_error(RuntimeCode::InvalidArgument, str(op, ": input ", i, " is undefined; expected a tensor"));
      }
      continue;
    }
    if (inputs[i].device() != device) {
      return runtime_error(RuntimeCode::DeviceMismatch,
                           str(op, ": input ", i, " lives on device `", to_string(inputs[i].device()),
                               "`; the LibTorch ", to_string(device), " handler expects device `", to_string(device),
                               "` (nothing is copied between devices implicitly)"));
    }
    mixed = mixed || inputs[i].dtype() != inputs.front().dtype();
  }
  if (mixed) [[unlikely]] return expect_same_dtype(op, inputs);
  return std::monostate{};
}

RuntimeStatus expect_grad(std::string_view op, Inputs inputs, const Tensor& output, const Tensor& grad) {
  if (!output.defined() || !grad.defined() || grad.device() != call_device()) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, " backward: the forward output and its gradient must be defined tensors on device `",
                             to_string(call_device()), "`"));
  }
  if (grad.shape() != output.shape()) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, " backward: output gradient has shape ", to_string(grad.shape()),
                             "; expected the output's shape ", to_string(output.shape())));
  }
  if (!inputs.empty() && grad.dtype() != inputs.front().dtype()) {
    return runtime_error(RuntimeCode::DTypeMismatch,
                         str(op, " backward: output gradient is ", to_string(grad.dtype()), "; expected the inputs' ",
                             to_string(inputs.front().dtype())));
  }
  return std::monostate{};
}

namespace {
RuntimeResult<Tensor> new_on_call_device(const Shape& shape, DType dtype) {
  const DeviceBoundary* boundary = device_boundary();
  return boundary == nullptr ? Tensor::empty(shape, dtype) : boundary->empty(shape, dtype);
}
}  // namespace

RuntimeResult<Tensor> new_tensor(std::span<const std::int64_t> dims, DType dtype) {
  CAPSULE_TRY(Shape shape, Shape::make(dims));
  return new_on_call_device(shape, dtype);
}

RuntimeResult<Tensor> new_like(const Tensor& like) { return new_on_call_device(like.shape(), like.dtype()); }

RuntimeResult<Tensor> copy_out(Op op, const at::Tensor& result, DType dtype) {
  const std::vector<std::int64_t> dims = result.sizes().vec();
  return write_new(to_string(op), dims, dtype, [&](at::Tensor& written) { copy_into(op, written, result); });
}

void copy_into(Op op, at::Tensor& out, const at::Tensor& source) {
  out.copy_(source);
  count_copy(op, &OpCopyCounters::materialisations);
}

namespace {

/// The deleter of an adopted result's storage. Its context is the TensorImpl of the ATen tensor
/// over those elements (detached: no grad_fn, so never a graph), holding the one reference that
/// keeps them alive: released into a raw pointer, as the cached views are, so that adopting an
/// output allocates no keeper object.
void release_adopted(void* /*data*/, void* context) noexcept {
  ImplPtr::reclaim(static_cast<c10::TensorImpl*>(context));
}

bool aliases_any(const at::Tensor& t, std::span<const at::Tensor> borrowed) {
  for (const at::Tensor& b : borrowed) {
    if (b.defined() && t.storage().is_alias_of(b.storage())) return true;
  }
  return false;
}

}  // namespace

RuntimeResult<TakenResult> take_aten_result(Op op, at::Tensor result, DType dtype,
                                            std::span<const at::Tensor> borrowed) {
  // Detached so that a result of an external-autograd region keeps no graph alive. A plain
  // handler's result, computed with grad off below the Autograd kernels, has none: it is kept as
  // it is, which spares a TensorImpl per call. requires_grad() alone decides: a tensor with a
  // grad_fn always requires grad (AutogradMeta::requires_grad is `requires_grad_ || grad_fn_`),
  // and asking for grad_fn() itself would copy a shared_ptr on every call. Taken by value and
  // moved: a handler passes ATen's temporary, so adopting it costs no reference count update.
  at::Tensor owned = result.requires_grad() ? result.detach() : std::move(result);
  const Device device = call_device();
  if (owned.scalar_type() != aten_dtype(dtype) || owned.device() != aten_device(device)) {
    return runtime_error(RuntimeCode::DTypeMismatch,
                         str("LibTorch ", to_string(op), ": ATen returned ", std::string(c10::toString(owned.scalar_type())),
                             " on ", owned.device().str(), "; expected ", to_string(dtype), " on ",
                             aten_device(device).str()));
  }
  TakenResult taken;
  if (!owned.is_contiguous() || aliases_any(owned, borrowed)) {
    owned = owned.clone(at::MemoryFormat::Contiguous);
    taken.copied = true;
  }
  CAPSULE_TRY(Shape shape, Shape::make(std::span<const std::int64_t>(owned.sizes().data(), owned.sizes().size())));
  void* data = owned.numel() == 0 ? nullptr : owned.data_ptr();
  const std::size_t bytes = static_cast<std::size_t>(owned.numel()) * element_size(dtype);
  if (const DeviceBoundary* boundary = device_boundary(); boundary != nullptr && boundary->adopted != nullptr) {
    boundary->adopted(owned);
  }
  std::shared_ptr<Storage> storage =
      Storage::adopt(data, bytes, device, &release_adopted, owned.unsafeGetTensorImpl());
  (void)owned.unsafeReleaseTensorImpl();  // adopted: the storage's deleter owns this reference now
  CAPSULE_TRY(taken.tensor, Tensor::over(std::move(storage), shape, dtype));
  return taken;
}

RuntimeResult<Tensor> adopt_out(Op op, at::Tensor result, DType dtype,
                                std::span<const at::Tensor> borrowed) {
  CAPSULE_TRY(TakenResult taken, take_aten_result(op, std::move(result), dtype, borrowed));
  // A copy is a clone ATen allocated, adopted in turn: both are counted.
  if (taken.copied) count_copy(op, &OpCopyCounters::materialisations);
  if (taken.tensor.numel() > 0) count_copy(op, &OpCopyCounters::adoptions);  // none for no elements
  return std::move(taken.tensor);
}

Failure<RuntimeError> aten_failure(std::string_view op, std::string_view what) {
  std::string_view line = what.substr(0, what.find('\n'));
  if (line.size() > 300) line = line.substr(0, 300);
  return runtime_error(RuntimeCode::InvalidArgument, str("LibTorch ", op, ": ATen rejected the call: ", line));
}

void count_conversion(Op op) { count_copy(op, &OpCopyCounters::conversions); }

void count_materialisation(Op op) { count_copy(op, &OpCopyCounters::materialisations); }

HandlerSpec spec_for(Op op, ForwardKernel forward, BackwardKernel backward) {
  HandlerSpec spec;
  spec.name = str("LibTorch CPU ", to_string(op));
  spec.op = op;
  spec.provider = Provider::Libtorch;
  spec.device = Device::Cpu;
  spec.layouts = {Layout::CanonicalTensor, Layout::FlatRowMajor};
  spec.guards = {std::string(kLibTorchShapeGuard), std::string(kLibTorchLayoutGuard)};
  spec.forward = forward;
  spec.backward = backward;
  spec.backend_vjp = false;  // the libtorch_cpu profile lets our tape own every VJP
  // libtorch_autograd_cpu hands each call's backward to LibTorch autograd instead.
  spec.forward_autograd = autograd_forward_for(op);
  if (spec.forward_autograd != nullptr) spec.autograd_runtime = std::string(kLibTorchAutogradRuntime);
  return spec;
}

}  // namespace capsule::libtorch

namespace capsule {

RuntimeStatus register_libtorch_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(libtorch::register_pointwise_handlers(registry));
  CAPSULE_CHECK(libtorch::register_nn_handlers(registry));
  CAPSULE_CHECK(libtorch::register_attention_handlers(registry));
  CAPSULE_CHECK(libtorch::register_norm_index_handlers(registry));
  return std::monostate{};
}

void set_libtorch_threads(int threads) { at::set_num_threads(threads); }

std::string libtorch_version() { return TORCH_VERSION; }

LibTorchBoundaryCopies libtorch_boundary_copies_of(Op op) {
  const libtorch::OpCopyCounters& counters = libtorch::copy_ledger[static_cast<std::size_t>(op)];
  LibTorchBoundaryCopies copies{std::string(to_string(op))};
  copies.conversions = counters.conversions.load(std::memory_order_relaxed);
  copies.materialisations = counters.materialisations.load(std::memory_order_relaxed);
  copies.adoptions = counters.adoptions.load(std::memory_order_relaxed);
  return copies;
}

std::vector<LibTorchBoundaryCopies> libtorch_boundary_copies() {
  std::vector<LibTorchBoundaryCopies> copies;
  for (std::size_t i = 0; i < kOpCount; ++i) {
    LibTorchBoundaryCopies entry = libtorch_boundary_copies_of(static_cast<Op>(i));
    if (entry.conversions + entry.materialisations + entry.adoptions > 0) copies.push_back(std::move(entry));
  }
  std::sort(copies.begin(), copies.end(), [](const auto& a, const auto& b) { return a.op < b.op; });
  return copies;
}

}  // namespace capsule
