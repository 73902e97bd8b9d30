// SPDX-License-Identifier: Apache-2.0
// SHA-256 (FIPS 180-4) of file contents, so every report can name the exact catalog and profile
// bytes it was computed from. Written here to avoid a crypto dependency for one digest.
#pragma once

#include <string>
#include <string_view>

namespace capsule {

/// Lower-case hex digest of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace capsule
