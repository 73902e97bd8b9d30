// SPDX-License-Identifier: Apache-2.0
// Turns a loaded profile into a ready planner: the profile's modules (with any prepended
// `with_modules`) in order, validated as TorchLean's BackendProfile does before planning, and the
// list of source files every report must name.
#pragma once

#include <string>
#include <vector>

#include "capsule/load.hpp"
#include "capsule/planner.hpp"

namespace capsule {

/// A profile ready to plan: its planner (registry in module order) and the files it came from.
struct ResolvedProfile {
  ProfilePtr profile;
  Planner planner;
  /// The profile file, then each module's catalog file, in module order.
  std::vector<SourceFile> sources;
};

/// Fails with TorchLean's validateModules text, or `unknown capsule module `X``.
Result<ResolvedProfile, std::string> resolve_profile(const Workspace& workspace, const ProfilePtr& profile);

/// The profile's modules in catalog order, or an error naming the first unknown module.
Result<std::vector<ModulePtr>, std::string> profile_modules(const Workspace& workspace, const Profile& profile);

}  // namespace capsule
