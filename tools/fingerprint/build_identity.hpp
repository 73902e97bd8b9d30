// SPDX-License-Identifier: Apache-2.0
// The build entries of the environment fingerprint, defined in build_identity.cpp, which
// generate.cmake writes at every build.
#pragma once

#include "capsule/fingerprint.hpp"

namespace capsule::build_info {

/// build.commit, build.compiler, build.flags, build.type, capsule.version and the reference
/// provider's provider.reference.{library,sha256,version}.
EnvironmentFingerprint build_identity();

}  // namespace capsule::build_info
