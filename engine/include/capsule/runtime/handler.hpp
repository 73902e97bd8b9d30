// SPDX-License-Identifier: Apache-2.0
// Compiled handlers and their registry (SPEC §2, semantics §2.3, §7). A handler registers under
// (op, provider, device) and declares what it can honour: the layouts it accepts, whether its
// backward is a complete backend VJP, and the runtime guards it enforces. Binding an accepted
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

/// Probes whether a device's execution runtime is usable (for example a CUDA provider asking the
/// driver for a device). Returns an empty string when usable, else the reason.
using DeviceRuntimeProbe = std::string (*)();

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
  /// Declares that `device` has a linked execution runtime, probed at session open.
  void add_device_runtime(Device device, std::string name, DeviceRuntimeProbe probe);

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

 private:
  std::vector<std::unique_ptr<RegisteredHandler>> handlers_;
  std::array<std::vector<const RegisteredHandler*>, kOpCount> by_op_;
  struct DeviceRuntime {
    Device device;
    std::string name;
    DeviceRuntimeProbe probe;
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
