// SPDX-License-Identifier: Apache-2.0
// The capsule registry (§4.2): modules flattened in profile order, validated for duplicate module
// names and duplicate identities, and indexed by op so planning cost does not grow with the
// catalog. A Registry shares ownership of its modules, so capsule pointers stay valid for as long
// as any Registry (or plan holding one) is alive.
#pragma once

#include <array>
#include <span>
#include <string>
#include <vector>

#include "capsule/catalog.hpp"
#include "capsule/result.hpp"

namespace capsule {

/// TorchLean's validateModules: the first repeated module name, then the first repeated capsule
/// identity, with TorchLean's exact texts. Empty on success.
std::string validate_modules(const std::vector<ModulePtr>& modules);

/// TorchLean's withCapsuleModules: `added` go first; any module of `base` whose name matches an
/// added module is dropped. Duplicates inside `added` survive (validation rejects them later).
std::vector<ModulePtr> with_capsule_modules(const std::vector<ModulePtr>& base, const std::vector<ModulePtr>& added);

class Registry {
 public:
  /// Validates and indexes `modules`; fails with validate_modules' text.
  static Result<Registry, std::string> from_modules(std::vector<ModulePtr> modules);

  /// The same registry restricted to capsules `availability` admits, order kept (§4.1).
  Registry filtered(const Availability& availability) const;

  const std::vector<ModulePtr>& modules() const { return modules_; }
  /// Every capsule in catalog order (modules in order, then local order).
  const std::vector<const Capsule*>& capsules() const { return capsules_; }
  /// The capsules implementing `op`, in catalog order.
  std::span<const Capsule* const> for_op(Op op) const { return by_op_[static_cast<std::size_t>(op)]; }
  /// True when some capsule targets `device` (TorchLean's hasDeviceCapsule).
  bool has_device_capsule(Device device) const;

 private:
  Registry() = default;
  void index();

  std::vector<ModulePtr> modules_;
  std::vector<const Capsule*> capsules_;
  std::array<std::vector<const Capsule*>, kOpCount> by_op_;
};

}  // namespace capsule
