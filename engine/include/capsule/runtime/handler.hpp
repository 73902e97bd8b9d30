// SPDX-License-Identifier: Apache-2.0
// Compiled handlers and their registry (docs/providers.md; semantics §2.3, §7). A handler registers under
// (op, provider, device) and declares what it can honour: the layouts it accepts, whether its
// backward is a complete backend VJP, and the runtime guards it enforces; optionally it keeps
// state from its forward for its backward, or hands its backward to an external autograd runtime
// through a per-call boundary (docs/runtime.md, "Tape autograd"). Binding an accepted
// capsule to a handler checks identity with TorchLean's texts, then the loaded contract; only a
// bound ExecutableKernel can run. Handler sets are registered by explicit calls such as
// register_reference_handlers(registry); nothing registers itself.
#pragma once

#include <array>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "capsule/binding.hpp"
#include "capsule/gate.hpp"
#include "capsule/runtime/op_args.hpp"

namespace capsule {

/// Computes an op's output from its inputs (conventions in op_args.hpp).
using ForwardKernel = RuntimeResult<Tensor> (*)(std::span<const Tensor> inputs, const OpAttrs& attrs);

/// Given the forward inputs, the forward output and the gradient of the output, returns one
/// gradient per input (undefined Tensor for an input that takes none, such as a mask).
using BackwardKernel = RuntimeResult<std::vector<Tensor>> (*)(std::span<const Tensor> inputs, const Tensor& output,
                                                              const Tensor& grad_output, const OpAttrs& attrs);

/// State a handler's forward keeps for its own backward (max_pool's argmax indices, layer_norm's
/// mean and rstd, batch_norm's invstd). Handlers derive from it; the engine never looks inside.
/// The tape owns the object on the node it belongs to and destroys it once that node's backward
/// has run or the tape is cleared, whichever comes first.
class SavedState {
 public:
  virtual ~SavedState() = default;
};

/// What a saving forward returns: the output, and the state its backward will receive (may be
/// null when there is nothing to keep).
struct SavingForwardResult {
  Tensor output;
  std::unique_ptr<SavedState> saved;
};

/// A forward that also keeps state for the backward. The session calls it instead of `forward`
/// only for calls it records on the tape and whose backward calls the handler's adjoint.
using SavingForwardKernel = RuntimeResult<SavingForwardResult> (*)(std::span<const Tensor> inputs,
                                                                   const OpAttrs& attrs);

/// BackwardKernel plus the state the node's saving forward returned (null when it kept none).
using SavedBackwardKernel = RuntimeResult<std::vector<Tensor>> (*)(std::span<const Tensor> inputs,
                                                                   const Tensor& output,
                                                                   const Tensor& grad_output,
                                                                   const OpAttrs& attrs, const SavedState* saved);

/// One region of the computation handed to an external autograd runtime (an `external-autograd`
/// capsule's call; the region is that one op, see docs/runtime.md). The tape keeps it as the
/// node's boundary. Destroying it frees everything the region retained (the runtime's recorded
/// graph, saved tensors); the tape does so right after its `vjp` ran and at `clear_tape`.
class AutogradBoundary {
 public:
  virtual ~AutogradBoundary() = default;
  /// The region's VJP, computed by the external runtime: one gradient per input of the call, an
  /// undefined Tensor where the runtime computed none (an unused input). Called at most once.
  virtual RuntimeResult<std::vector<Tensor>> vjp(const Tensor& grad_output) = 0;
};

/// What an autograd forward returns: the output, and the boundary that owns its backward.
struct AutogradForwardResult {
  Tensor output;
  std::unique_ptr<AutogradBoundary> boundary;
};

/// The forward of an `external-autograd` capsule for calls the session records on the tape: it
/// runs the op under the external runtime's autograd and returns the boundary. `requires_grad[i]`
/// says whether input i needs a gradient (it is on the tape and the op differentiates it: masks
/// never do); the runtime must track exactly those.
using AutogradForwardKernel = RuntimeResult<AutogradForwardResult> (*)(std::span<const Tensor> inputs,
                                                                       const OpAttrs& attrs,
                                                                       const std::vector<bool>& requires_grad);

/// Probes whether a device's execution runtime is usable (for example a CUDA provider asking the
/// driver for a device). Returns an empty string when usable, else the reason.
using DeviceRuntimeProbe = std::string (*)();

/// A new tensor of `shape` and `dtype`, every element `value`, in a device's memory. The session
/// makes its own tensors through it (the backward seed of ones, zero gradients, the ones and zeros
/// of VJP rules), so a device session's backward never meets a host tensor.
using DeviceFill = RuntimeResult<Tensor> (*)(const Shape& shape, DType dtype, double value);

struct HandlerSpec {
  std::string name;  ///< e.g. "TorchLean reference CPU relu"
  Op op = Op::Custom;
  Provider provider = Provider::Reference;
  Device device = Device::Cpu;
  EnumSet<Layout> layouts;          ///< layouts whose buffers this handler reads and writes
  std::vector<std::string> guards;  ///< runtime guards this handler enforces (exact names)
  ForwardKernel forward = nullptr;
  /// The op's local adjoint kernel. For `torchlean-tape` capsules the engine's tape may call it
  /// for the parts of a VJP rule that no op composes (see docs/runtime.md); for `backend-vjp`
  /// capsules it is the whole local VJP and `backend_vjp` must be true.
  BackwardKernel backward = nullptr;
  /// The handler computes its own complete backward (it may run `backend-vjp` capsules).
  bool backend_vjp = false;

  /// Optional pair for handlers whose backward needs forward intermediates. When both are set,
  /// taped calls whose backward calls this handler's adjoint (`backend-vjp`, or a `torchlean-tape`
  /// rule that uses the adjoint kernel) run `forward_saving`, and their backward calls
  /// `backward_saved` with the node's state instead of `backward`. Untaped calls run `forward`.
  SavingForwardKernel forward_saving = nullptr;
  SavedBackwardKernel backward_saved = nullptr;

  /// The forward of `external-autograd` capsules for taped calls; untaped calls run `forward`.
  /// Required for binding an `external-autograd` capsule.
  AutogradForwardKernel forward_autograd = nullptr;
  /// The external autograd runtime that owns those regions, named in the capsules-used report
  /// (for example "LibTorch autograd"). Required with `forward_autograd`.
  std::string autograd_runtime;

  /// True when the handler has an adjoint kernel of either form.
  bool has_backward() const { return backward != nullptr || backward_saved != nullptr; }
};

/// A registered handler and where it was registered (for duplicate reports).
struct RegisteredHandler {
  HandlerSpec spec;
  std::string site;  ///< "file:line"
};

class HandlerRegistry {
 public:
  /// Adds a handler. A second handler for the same (op, provider, device) is rejected with both
  /// registration sites; the first stays registered.
  RuntimeStatus add(HandlerSpec spec, std::source_location site = std::source_location::current());
  /// Declares that `device` has a linked execution runtime, probed at session open, and how it
  /// fills a new tensor (null: the session cannot make tensors there, so a backward fails).
  void add_device_runtime(Device device, std::string name, DeviceRuntimeProbe probe, DeviceFill fill = nullptr);

  const RegisteredHandler* find(Op op, Provider provider, Device device) const;
  /// Handlers of one op in registration order.
  std::span<const RegisteredHandler* const> for_op(Op op) const { return by_op_[static_cast<std::size_t>(op)]; }
  /// Every handler in registration order.
  std::vector<const RegisteredHandler*> all() const;
  std::size_t size() const { return handlers_.size(); }

  /// The device runtime's name, or nullptr when none is linked.
  const std::string* device_runtime(Device device) const;
  /// "" when usable, the probe's reason otherwise; "no linked runtime" when none is linked.
  std::string probe_device(Device device) const;
  /// The device runtime's fill, or null (none linked, or it has none).
  DeviceFill device_fill(Device device) const;

 private:
  std::vector<std::unique_ptr<RegisteredHandler>> handlers_;
  std::array<std::vector<const RegisteredHandler*>, kOpCount> by_op_;
  struct DeviceRuntime {
    Device device;
    std::string name;
    DeviceRuntimeProbe probe;
    DeviceFill fill;
  };
  std::vector<DeviceRuntime> runtimes_;
};

/// A capsule bound to the handler that runs it. Only `bind` makes one.
class ExecutableKernel {
 public:
  const Capsule& capsule() const { return kernel_.capsule(); }
  const AcceptedKernel& accepted() const { return kernel_; }
  const HandlerSpec& handler() const { return handler_->spec; }
  RuntimeResult<Tensor> run(std::span<const Tensor> inputs, const OpAttrs& attrs) const {
    return handler_->spec.forward(inputs, attrs);
  }

 private:
  ExecutableKernel(AcceptedKernel kernel, const RegisteredHandler* handler)
      : kernel_(std::move(kernel)), handler_(handler) {}
  friend RuntimeResult<ExecutableKernel> bind(const AcceptedKernel&, const HandlerRegistry&);

  AcceptedKernel kernel_;
  const RegisteredHandler* handler_;
};

/// Why `handler` cannot honour `capsule`'s loaded contract, or nothing: the layout claim must be
/// one the handler accepts, a backend-vjp capsule needs a handler with its own backward, and every
/// runtime-guard evidence name must be a guard the handler declares. Identity is not checked here.
std::optional<std::string> contract_mismatch(const HandlerSpec& handler, const Capsule& capsule);

/// Finds the handler with the capsule's (op, provider, device) and binds it. With no such handler
/// it fails with TorchLean's executeSelected text, listing the handlers linked for the op (code of
/// another provider never runs in its place); with one that fails the contract check it fails
/// with `torch: invalid executable backend binding: ...`.
RuntimeResult<ExecutableKernel> bind(const AcceptedKernel& kernel, const HandlerRegistry& registry);

}  // namespace capsule
