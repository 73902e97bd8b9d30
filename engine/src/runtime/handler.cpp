// SPDX-License-Identifier: Apache-2.0
#include "capsule/runtime/handler.hpp"

#include <algorithm>

#include "capsule/runtime/message_style.hpp"
#include "capsule/text.hpp"
#include "registration_site.hpp"

namespace capsule {

std::string registration_site(const std::source_location& site) {
  std::string_view file = site.file_name();
  // Registration sites name the file relative to the project: keep the path from the last
  // top-level directory a handler can live in.
  for (std::string_view root : {"handlers/", "tests/", "engine/", "tools/", "examples/"}) {
    if (auto at = file.rfind(root); at != std::string_view::npos) {
      file = file.substr(at);
      break;
    }
  }
  return str(file, ":", site.line());
}

namespace {

std::string handler_label(const HandlerSpec& spec) {
  return str(spec.name, " (", to_string(spec.provider), "/", to_string(spec.device), ")");
}

}  // namespace

RuntimeStatus HandlerRegistry::add(HandlerSpec spec, std::source_location site) {
  if (const RegisteredHandler* existing = find(spec.op, spec.provider, spec.device)) {
    return runtime_error(RuntimeCode::DuplicateHandler,
                         str("duplicate handler for (", to_string(spec.op), ", ", to_string(spec.provider), ", ",
                             to_string(spec.device), "): `", spec.name, "` at ", registration_site(site), " and `",
                             existing->spec.name, "` at ", existing->site,
                             "; expected one handler per (op, provider, device)"));
  }
  if (spec.forward == nullptr) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("handler `", spec.name, "` at ", registration_site(site), " has no forward kernel"));
  }
  if (spec.backend_vjp && !spec.has_backward()) {
    return runtime_error(RuntimeCode::InvalidArgument, str("handler `", spec.name, "` at ", registration_site(site),
                                                           " declares a backend VJP but has no backward kernel"));
  }
  // A saving forward whose state no backward reads, or a backward waiting for state no forward
  // keeps, is a registration mistake: refuse it rather than run a backward with null state.
  if ((spec.forward_saving == nullptr) != (spec.backward_saved == nullptr)) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("handler `", spec.name, "` at ", registration_site(site), " has ",
                             spec.forward_saving != nullptr ? "a saving forward but no backward_saved kernel"
                                                            : "a backward_saved kernel but no saving forward",
                             "; expected both or neither"));
  }
  if (spec.forward_autograd != nullptr && spec.autograd_runtime.empty()) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("handler `", spec.name, "` at ", registration_site(site),
                             " has an autograd forward but names no autograd runtime; expected `autograd_runtime`"));
  }
  auto entry = std::make_unique<RegisteredHandler>(RegisteredHandler{std::move(spec), registration_site(site)});
  by_op_[static_cast<std::size_t>(entry->spec.op)].push_back(entry.get());
  handlers_.push_back(std::move(entry));
  return std::monostate{};
}

void HandlerRegistry::add_device_runtime(Device device, std::string name, DeviceRuntimeProbe probe,
                                         DeviceFill fill) {
  runtimes_.push_back(DeviceRuntime{device, std::move(name), probe, fill});
}

DeviceFill HandlerRegistry::device_fill(Device device) const {
  for (const DeviceRuntime& runtime : runtimes_) {
    if (runtime.device == device) return runtime.fill;
  }
  return nullptr;
}

const RegisteredHandler* HandlerRegistry::find(Op op, Provider provider, Device device) const {
  for (const RegisteredHandler* handler : for_op(op)) {
    if (handler->spec.provider == provider && handler->spec.device == device) return handler;
  }
  return nullptr;
}

std::vector<const RegisteredHandler*> HandlerRegistry::all() const {
  std::vector<const RegisteredHandler*> out;
  out.reserve(handlers_.size());
  for (const auto& handler : handlers_) out.push_back(handler.get());
  return out;
}

const std::string* HandlerRegistry::device_runtime(Device device) const {
  for (const DeviceRuntime& runtime : runtimes_) {
    if (runtime.device == device) return &runtime.name;
  }
  return nullptr;
}

std::string HandlerRegistry::probe_device(Device device) const {
  for (const DeviceRuntime& runtime : runtimes_) {
    if (runtime.device == device) return runtime.probe != nullptr ? runtime.probe() : std::string{};
  }
  return "no linked runtime";
}

namespace {

/// The runtime guard TorchLean's LibTorch SDPA capsule names as its VJP evidence. No handler
/// enforces it: the planner does, whichever handler binds, by admitting a torchlean-tape capsule
/// only under a policy whose VJP mode is torchlean-tape (or none, where nothing is differentiated;
/// planner.cpp). So binding does not ask the handler to declare it.
constexpr std::string_view kPlannerVjpGuard = "backend profile requires vjp=torchlean-tape";

bool enforced_by_planner(const Capsule& capsule, const Evidence& evidence) {
  return capsule.vjp == VjpMode::TorchleanTape && evidence.name == kPlannerVjpGuard;
}

}  // namespace

std::optional<std::string> contract_mismatch(const HandlerSpec& handler, const Capsule& capsule) {
  const ContractDescriptor& layout = capsule.contracts[static_cast<std::size_t>(Obligation::Layout)];
  if (layout.claim.kind == ClaimKind::LayoutCompatibility && !handler.layouts.contains(layout.claim.layout)) {
    std::vector<std::string> accepted;
    for (Layout l : handler.layouts.values()) accepted.emplace_back(to_string(l));
    return str("handler `", handler.name, "` accepts layouts [", join(accepted, ", "), "], but capsule `",
               capsule.name, "` claims layout `", to_string(layout.claim.layout), "`");
  }
  if (capsule.vjp == VjpMode::BackendVjp && !handler.backend_vjp) {
    return str("capsule `", capsule.name, "` has VJP mode backend-vjp, but handler `", handler.name,
               "` computes no backward of its own");
  }
  if (capsule.vjp == VjpMode::ExternalAutograd && handler.forward_autograd == nullptr) {
    return str("capsule `", capsule.name, "` has VJP mode external-autograd, but handler `", handler.name,
               "` opens no autograd boundary (no forward_autograd)");
  }
  for (std::size_t i = 0; i < capsule.contracts.size(); ++i) {
    const Evidence& evidence = capsule.contracts[i].evidence;
    if (evidence.kind != EvidenceKind::RuntimeGuard || enforced_by_planner(capsule, evidence)) continue;
    if (std::find(handler.guards.begin(), handler.guards.end(), evidence.name) != handler.guards.end()) continue;
    std::vector<std::string> quoted;
    for (const std::string& guard : handler.guards) quoted.push_back(str("`", guard, "`"));
    return str("capsule `", capsule.name, "` ", to_string(static_cast<Obligation>(i)),
               " evidence names runtime guard `", evidence.name, "`, but handler `", handler.name,
               "` declares ", quoted.empty() ? std::string("no guards") : str("only ", join(quoted, ", ")));
  }
  return std::nullopt;
}

RuntimeResult<ExecutableKernel> bind(const AcceptedKernel& kernel, const HandlerRegistry& registry) {
  const Capsule& capsule = kernel.capsule();
  const RegisteredHandler* handler = registry.find(capsule.op, capsule.provider, capsule.device);
  if (handler == nullptr) {
    std::string message = str(kTorchLeanBackendPrefix, "`", to_string(kernel.op()), "` selected capsule `", capsule.name, "` (",
                              to_string(capsule.provider), "/", to_string(capsule.device),
                              "), but no matching executable handler is linked");
    std::vector<std::string> linked;
    for (const RegisteredHandler* h : registry.for_op(kernel.op())) linked.push_back(handler_label(h->spec));
    if (!linked.empty()) {
      message += str("; available handlers: ", join(linked, ", "));
    } else {
      message += str("; no handler for `", to_string(kernel.op()), "` is linked (", registry.size(),
                     " handlers for other ops)");
    }
    return runtime_error(RuntimeCode::NoHandler, std::move(message));
  }
  HandlerIdentity identity{handler->spec.name, handler->spec.op, handler->spec.provider, handler->spec.device};
  if (auto mismatch = binding_mismatch(identity, capsule)) {
    return runtime_error(RuntimeCode::BindingRejected, str(kTorchLeanBackendPrefix, "invalid executable backend binding: ", *mismatch));
  }
  if (auto mismatch = contract_mismatch(handler->spec, capsule)) {
    return runtime_error(RuntimeCode::BindingRejected, str(kTorchLeanBackendPrefix, "invalid executable backend binding: ", *mismatch));
  }
  return ExecutableKernel(kernel, handler);
}

}  // namespace capsule
