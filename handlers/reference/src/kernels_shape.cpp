// SPDX-License-Identifier: Apache-2.0
#include "common.hpp"

namespace capsule::reference {

RuntimeStatus register_shape_handlers(HandlerRegistry& /*registry*/) { return std::monostate{}; }

}  // namespace capsule::reference
