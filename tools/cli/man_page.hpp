// SPDX-License-Identifier: Apache-2.0
// capsule(1), the manual page, generated from the command table at build time (`capsule man`),
// so it lists exactly the commands and flags the program accepts.
#pragma once

#include <string>
#include <string_view>

namespace capsule::cli {

/// The roff source of capsule(1); every text goes through roff_escape (capsule/escape.hpp).
std::string man_page(std::string_view version);

}  // namespace capsule::cli
