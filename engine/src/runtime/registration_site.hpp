// SPDX-License-Identifier: Apache-2.0
// Where a handler or a checker was registered, for duplicate reports.
#pragma once

#include <source_location>
#include <string>

namespace capsule {

/// "file:line" of a registration, the path kept from its top-level project directory (handlers/,
/// tests/, engine/, tools/, examples/) so that reports do not depend on the build machine.
std::string registration_site(const std::source_location& site);

}  // namespace capsule
