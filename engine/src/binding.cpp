// SPDX-License-Identifier: Apache-2.0
#include "capsule/binding.hpp"

#include "capsule/text.hpp"

namespace capsule {

bool matches_capsule(const HandlerIdentity& handler, const Capsule& capsule) {
  return handler.op == capsule.op && handler.provider == capsule.provider && handler.device == capsule.device;
}

std::optional<std::string> binding_mismatch(const HandlerIdentity& handler, const Capsule& capsule) {
  if (handler.op != capsule.op) {
    return str("handler `", handler.name, "` implements `", to_string(handler.op), "`, but capsule `", capsule.name,
               "` implements `", to_string(capsule.op), "`");
  }
  if (handler.provider != capsule.provider) {
    return str("handler `", handler.name, "` uses provider `", to_string(handler.provider), "`, but capsule `",
               capsule.name, "` selects `", to_string(capsule.provider), "`");
  }
  if (handler.device != capsule.device) {
    return str("handler `", handler.name, "` targets `", to_string(handler.device), "`, but capsule `", capsule.name,
               "` targets `", to_string(capsule.device), "`");
  }
  return std::nullopt;
}

std::optional<std::string> eager_request_mismatch(const Capsule& capsule, Op op, Device device) {
  if (capsule.op != op) {
    return str("capsule `", capsule.name, "` implements `", to_string(capsule.op), "`, not `", to_string(op), "`");
  }
  if (capsule.device != device) {
    return str("capsule `", capsule.name, "` targets `", to_string(capsule.device), "`, not `", to_string(device), "`");
  }
  return std::nullopt;
}

std::optional<std::string_view> maintained_profile_for(Device device) {
  if (device == Device::Cpu) return "checked_cpu";
  if (device == Device::Cuda) return "checked_cuda";
  return std::nullopt;
}

}  // namespace capsule
