// SPDX-License-Identifier: Apache-2.0
// Identity checks between a selected capsule and the code that would run it (§2.3, §3.2, §7).
// They compare names and enums only; the runtime's HandlerRegistry builds on them and adds the
// contract checks (layouts, backend VJP, runtime guards). Nothing here runs a kernel.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "capsule/capsule.hpp"

namespace capsule {

/// What a compiled handler says it implements.
struct HandlerIdentity {
  std::string name;
  Op op = Op::Custom;
  Provider provider = Provider::Reference;
  Device device = Device::Cpu;
};

/// Op, provider and device all equal (TorchLean's matchesCapsule).
bool matches_capsule(const HandlerIdentity& handler, const Capsule& capsule);

/// TorchLean's bind: checks op, then provider, then device, and returns the first mismatch's
/// text, or nothing when the handler may run the capsule.
std::optional<std::string> binding_mismatch(const HandlerIdentity& handler, const Capsule& capsule);

/// TorchLean's validateEagerRequest: the capsule must implement `op` on `device`.
std::optional<std::string> eager_request_mismatch(const Capsule& capsule, Op op, Device device);

/// The maintained profile for a device (§4.3 maintainedForDevice?): cpu → checked_cpu,
/// cuda → checked_cuda, anything else → none.
std::optional<std::string_view> maintained_profile_for(Device device);

}  // namespace capsule
