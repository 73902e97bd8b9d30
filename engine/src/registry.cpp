// SPDX-License-Identifier: Apache-2.0
#include "capsule/registry.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "capsule/text.hpp"

namespace capsule {

std::string validate_modules(const std::vector<ModulePtr>& modules) {
  std::set<std::string_view> names;
  for (const ModulePtr& module : modules) {
    if (!names.insert(module->name).second) return str("duplicate backend capsule module `", module->name, "`");
  }
  std::set<std::tuple<std::string_view, Op, Provider, Device>> identities;
  for (const ModulePtr& module : modules) {
    for (const Capsule& capsule : module->capsules) {
      if (!identities.emplace(capsule.name, capsule.op, capsule.provider, capsule.device).second) {
        return str("duplicate backend capsule identity `", capsule.name, "`");
      }
    }
  }
  return {};
}

std::vector<ModulePtr> with_capsule_modules(const std::vector<ModulePtr>& base, const std::vector<ModulePtr>& added) {
  std::vector<ModulePtr> out = added;
  for (const ModulePtr& module : base) {
    const bool replaced = std::any_of(added.begin(), added.end(),
                                      [&](const ModulePtr& m) { return m->name == module->name; });
    if (!replaced) out.push_back(module);
  }
  return out;
}

Result<Registry, std::string> Registry::from_modules(std::vector<ModulePtr> modules) {
  std::string problem = validate_modules(modules);
  if (!problem.empty()) return fail(std::move(problem));
  Registry registry;
  registry.modules_ = std::move(modules);
  for (const ModulePtr& module : registry.modules_) {
    for (const Capsule& capsule : module->capsules) registry.capsules_.push_back(&capsule);
  }
  registry.index();
  return registry;
}

Registry Registry::filtered(const Availability& availability) const {
  Registry registry;
  registry.modules_ = modules_;
  for (const Capsule* capsule : capsules_) {
    if (availability.admits(*capsule)) registry.capsules_.push_back(capsule);
  }
  registry.index();
  return registry;
}

void Registry::index() {
  for (auto& bucket : by_op_) bucket.clear();
  for (const Capsule* capsule : capsules_) by_op_[static_cast<std::size_t>(capsule->op)].push_back(capsule);
}

bool Registry::has_device_capsule(Device device) const {
  return std::any_of(capsules_.begin(), capsules_.end(), [&](const Capsule* c) { return c->device == device; });
}

}  // namespace capsule
