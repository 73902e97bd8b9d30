// SPDX-License-Identifier: Apache-2.0
// The environment fingerprint of this build and this process (capsule/fingerprint.hpp): host
// collection plus the build identity that tools/fingerprint generates at every build. Programs
// that print reports link capsule_build_info and pass the result to the engine's report
// functions; the engine itself never depends on it.
#pragma once

#include "capsule/fingerprint.hpp"

namespace capsule {

/// The host entries (collect_host_fingerprint) plus this build's entries: build.commit,
/// build.compiler, build.flags, build.type, capsule.version and provider.reference.{library,
/// sha256,version}. A program linking further providers adds their entries with add_entries.
EnvironmentFingerprint current_fingerprint();

}  // namespace capsule
