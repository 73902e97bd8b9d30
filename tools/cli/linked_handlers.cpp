// SPDX-License-Identifier: Apache-2.0
#include "linked_handlers.hpp"

#include "capsule/handlers/reference.hpp"
#if defined(CAPSULE_HAVE_LIBTORCH)
#include "capsule/handlers/libtorch.hpp"
#endif

namespace capsule::cli {

RuntimeStatus register_linked_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(register_reference_handlers(registry));
#if defined(CAPSULE_HAVE_LIBTORCH)
  CAPSULE_CHECK(register_libtorch_handlers(registry));
#endif
  return std::monostate{};
}

}  // namespace capsule::cli
