// SPDX-License-Identifier: Apache-2.0
#include "capsule/build_info.hpp"

#include "build_identity.hpp"

namespace capsule {

EnvironmentFingerprint current_fingerprint() {
  EnvironmentFingerprint fingerprint = collect_host_fingerprint();
  add_entries(fingerprint, build_info::build_identity());
  return fingerprint;
}

}  // namespace capsule
