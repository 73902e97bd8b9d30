// SPDX-License-Identifier: Apache-2.0
// The boundary between our tensors and ATen's. Inputs are wrapped with at::from_blob over our
// (immutable) storage: no copy, and ATen never owns or frees it. Outputs are allocated by us
// (Tensor::empty) and wrapped the same way (built directly, as from_blob would: wrap_output);
// that storage cannot be resized, so an ATen call that tried to reallocate an output throws
// instead of silently handing back its own buffer, and `expect_written` checks the pointer
// afterwards as well. Where ATen has no kernel that writes a
// caller's buffer, a result ATen allocated for the call is adopted (`adopt_out`). View results
// (permute, expand, slice) are never returned: they are copied into one of our contiguous outputs.
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/handlers/libtorch.hpp"
#include "capsule/text.hpp"

namespace capsule::libtorch {

using Inputs = std::span<const Tensor>;
using Grads = RuntimeResult<std::vector<Tensor>>;

/// A shape-mismatch error naming the op, shared by every kernel family's operand checks.
inline Failure<RuntimeError> shape_error(std::string_view op, const std::string& what) {
  return runtime_error(RuntimeCode::ShapeMismatch, str(op, ": ", what));
}
inline Failure<RuntimeError> shape_error(Op op, const std::string& what) { return shape_error(to_string(op), what); }

/// `[2, 3]` for payload dims that need not form a valid Shape (reshape targets, windows).
inline std::string quoted_dims(const std::vector<std::int64_t>& dims) {
  std::string text = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) text += (i == 0 ? "" : ", ") + std::to_string(dims[i]);
  return text + "]";
}

/// Whether optional input `i` was passed (present and defined).
inline bool has_input(Inputs inputs, std::size_t i) { return i < inputs.size() && inputs[i].defined(); }

/// The transpose of the last two dims (a view; ATen's products read it without a copy).
inline at::Tensor last_two_swapped(const at::Tensor& t) { return t.transpose(-1, -2); }

/// ATen's scalar type for one of ours.
c10::ScalarType aten_dtype(DType dtype);
/// ATen's device for one of ours. Only the CPU and CUDA device 0 reach the boundary:
/// expect_inputs refuses a tensor on any other device before anything is wrapped.
c10::Device aten_device(Device device);

/// How a handler call reaches a device other than the CPU. The kernels are device-generic: the
/// same function serves the CPU capsule and the CUDA one, and only the boundary (where inputs are
/// wrapped, outputs allocated and results adopted) differs by device. libtorch_cuda.cpp supplies
/// the CUDA boundary and sets it around each call of a CUDA handler (DeviceCallScope); a call with
/// none set is a CPU call.
struct DeviceBoundary {
  Device device = Device::Cpu;
  /// Fresh, uninitialised output storage on the device (never host memory).
  RuntimeResult<Tensor> (*empty)(const Shape& shape, DType dtype) = nullptr;
  /// Called on every ATen-allocated result the boundary adopts (CUDA: record our stream on it).
  void (*adopted)(const at::Tensor& result) = nullptr;
};

/// The device boundary of the handler call running on this thread; null for a CPU call.
const DeviceBoundary* device_boundary();
/// The device of the handler call running on this thread.
Device call_device();

/// Sets the device boundary for one handler call on this thread, restoring the previous one
/// when it ends (a CUDA handler's region VJP may run inside another call's scope).
class DeviceCallScope {
 public:
  explicit DeviceCallScope(const DeviceBoundary* boundary);
  ~DeviceCallScope();
  DeviceCallScope(const DeviceCallScope&) = delete;
  DeviceCallScope& operator=(const DeviceCallScope&) = delete;

 private:
  const DeviceBoundary* previous_;
};

/// An ATen tensor over `t`'s elements on `t`'s device (no copy). ATen reads it only: our handlers never pass
/// an input as an `out` argument, nor change its metadata in place (no `requires_grad_`, no
/// `resize_`, no in-place view op), because the view is cached on `t`'s storage (ForeignView)
/// and shared by every later call that reads the same elements: a tensor is wrapped once, not
/// once per call (docs/libtorch.md, "The boundary").
at::Tensor view_input(const Tensor& t);
/// A view of `t` of its own, never cached: for a caller that changes its metadata (an autograd
/// leaf is marked requires_grad).
at::Tensor fresh_view_input(const Tensor& t);
/// Caches `view`, which ATen has just written in place as `written`'s elements, as `written`'s
/// input view, so the next op that reads `written` does not wrap it again.
void keep_output_view(const Tensor& written, const at::Tensor& view);
/// An ATen tensor over `t`'s elements on `t`'s device, which the handler writes.
at::Tensor view_output(Tensor& t);

/// Fails unless ATen left `aten` on `ours`' buffer with `ours`' shape.
RuntimeStatus expect_written(std::string_view op, const at::Tensor& aten, const Tensor& ours);

/// Checks min..max inputs; the first `min` must be defined; every defined one on the call's device
/// (call_device); one dtype throughout.
RuntimeStatus expect_inputs(std::string_view op, Inputs inputs, std::size_t min, std::size_t max);
/// A backward kernel's output gradient: defined, on the call's device, the output's shape and the
/// inputs' dtype.
RuntimeStatus expect_grad(std::string_view op, Inputs inputs, const Tensor& output, const Tensor& grad);

/// A fresh output of `dims` and `dtype` on the call's device.
RuntimeResult<Tensor> new_tensor(std::span<const std::int64_t> dims, DType dtype);
RuntimeResult<Tensor> new_like(const Tensor& like);

/// Allocates an output shaped like `shape_of`, wraps it, lets `write` fill it through ATen, and
/// checks that ATen wrote in place.
template <class Write>
RuntimeResult<Tensor> write_like(std::string_view op, const Tensor& shape_of, Write&& write) {
  CAPSULE_TRY(Tensor out, new_like(shape_of));
  at::Tensor view = view_output(out);
  write(view);
  CAPSULE_CHECK(expect_written(op, view, out));
  keep_output_view(out, view);
  return out;
}

/// Same, for an output of explicit dims.
template <class Write>
RuntimeResult<Tensor> write_new(std::string_view op, std::span<const std::int64_t> dims, DType dtype, Write&& write) {
  CAPSULE_TRY(Tensor out, new_tensor(dims, dtype));
  at::Tensor view = view_output(out);
  write(view);
  CAPSULE_CHECK(expect_written(op, view, out));
  keep_output_view(out, view);
  return out;
}

/// Copies `source` (a view, or a buffer ATen allocated) into `out`, an output of ours, and counts
/// that copy against `op` (libtorch_boundary_copies). Handlers never call `copy_` themselves.
void copy_into(Op op, at::Tensor& out, const at::Tensor& source);

/// Copies an ATen result (a view or an ATen-allocated intermediate) into a fresh output of ours,
/// and counts that copy against `op` (libtorch_boundary_copies): every copy into our storage
/// goes through here, so none is silent.
RuntimeResult<Tensor> copy_out(Op op, const at::Tensor& result, DType dtype);

/// One of our tensors over an ATen result, and whether it took a copy.
struct TakenResult {
  Tensor tensor;
  bool copied = false;
};

/// One of our tensors over the elements of `result`, which an ATen call computed. Adopted without
/// a copy (Storage::adopt; the deleter's context keeps a detached ATen tensor alive) when ATen
/// allocated them: `result` contiguous, of `dtype`, on the call's device, and sharing storage with
/// none of `borrowed` (the views of our tensors the call read, from_blob over memory ATen does not own).
/// Otherwise copied once into storage of its own (`copied`). A result of another dtype or device
/// is an error. Nothing writes the adopted elements afterwards: the kept tensor is never handed to
/// an ATen call (a later op that reads the tensor wraps it anew), so they are as immutable as ours.
RuntimeResult<TakenResult> take_aten_result(Op op, at::Tensor result, DType dtype,
                                            std::span<const at::Tensor> borrowed);

/// take_aten_result for a result no ATen kernel could write into a buffer of ours: a plain
/// handler's whose ATen function has no CPU out kernel (convolution and its backward, max_pool),
/// and an external-autograd region's output and gradients (autograd_region.cpp). Counts the
/// adoption against `op` (libtorch_boundary_copies), and the copy as a materialisation when it
/// fell back to one (the clone is ATen's buffer, adopted in turn), so `capsule run` reports a
/// region's copies with every other.
RuntimeResult<Tensor> adopt_out(Op op, at::Tensor result, DType dtype,
                                std::span<const at::Tensor> borrowed);

/// The error for an exception ATen threw inside `op`'s handler: its first message line only
/// (never a backtrace), so a report stays one line per problem.
Failure<RuntimeError> aten_failure(std::string_view op, std::string_view what);

/// Runs `body` with autograd off (forward and adjoint kernels are plain computations; our tape
/// owns the backward) and turns an ATen exception into a runtime error naming the op.
/// Dispatch also starts below ATen's Autograd and ADInplaceOrView kernels: with grad off they
/// record nothing and only bump version counters, and these handlers write only outputs they
/// allocated a moment ago, never a tensor any ATen graph saved. That saves two redispatches per
/// ATen call (docs/libtorch.md, "Overhead"). The external-autograd regions, which do record a
/// graph, never run under this guard (aten_call in autograd_region.cpp).
template <class Body>
auto guarded(std::string_view op, Body&& body) -> decltype(body()) {
  try {
    c10::NoGradGuard no_grad;
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return body();
  } catch (const c10::Error& e) {
    return aten_failure(op, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return aten_failure(op, e.what());
  }
}

/// Counts one dtype conversion of an input of `op` (libtorch_boundary_copies): call it wherever a
/// handler converts one of our tensors (`.to(at::kLong)`, `.to(at::kBool)`).
void count_conversion(Op op);

/// Counts one copy of `op`'s that no helper here made (libtorch_boundary_copies): an autograd
/// region that clones an input so that the copy lies inside the recorded graph.
void count_materialisation(Op op);

/// The handler description every LibTorch CPU handler registers with (libtorch_cuda.cpp derives
/// the CUDA handlers' from these).
HandlerSpec spec_for(Op op, ForwardKernel forward, BackwardKernel backward);

/// The external-autograd forward of `op` (autograd_region.cpp), or null when the op has no region
/// formula yet. spec_for sets it on every handler that has one.
AutogradForwardKernel autograd_forward_for(Op op);

/// The name the capsules-used report gives the runtime owning those regions.
inline constexpr std::string_view kLibTorchAutogradRuntime = "LibTorch autograd";

/// Each kernel family registers its own handlers; register_libtorch_handlers calls them all.
RuntimeStatus register_pointwise_handlers(HandlerRegistry& registry);  // kernels_pointwise.cpp
RuntimeStatus register_nn_handlers(HandlerRegistry& registry);         // kernels_nn.cpp
RuntimeStatus register_attention_handlers(HandlerRegistry& registry);  // kernels_attention.cpp
RuntimeStatus register_norm_index_handlers(HandlerRegistry& registry); // kernels_norm_index.cpp

}  // namespace capsule::libtorch
