// SPDX-License-Identifier: Apache-2.0
// The compiled handlers this binary links, registered by explicit calls: the reference handlers
// always, the LibTorch ones when the build has them (CAPSULE_HAVE_LIBTORCH, set on this target
// only; the engine never sees LibTorch).
#pragma once

#include "capsule/runtime/handler.hpp"

namespace capsule::cli {

RuntimeStatus register_linked_handlers(HandlerRegistry& registry);

}  // namespace capsule::cli
