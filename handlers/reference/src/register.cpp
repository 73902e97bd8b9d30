// SPDX-License-Identifier: Apache-2.0
#include "capsule/handlers/reference.hpp"

#include "common.hpp"

namespace capsule {

RuntimeStatus register_reference_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(reference::register_elementwise_handlers(registry));
  CAPSULE_CHECK(reference::register_shape_handlers(registry));
  CAPSULE_CHECK(reference::register_linalg_handlers(registry));
  CAPSULE_CHECK(reference::register_nn_handlers(registry));
  return std::monostate{};
}

}  // namespace capsule
