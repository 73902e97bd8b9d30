// SPDX-License-Identifier: Apache-2.0
// The compiled handlers this program links, registered by explicit calls: the reference handlers
// always, the LibTorch ones in the handler set built with CAPSULE_HAVE_LIBTORCH (defined on that
// library only; the engine never sees LibTorch). capsule_cli calls this and each program links
// one handler set that defines it (tools/cli/CMakeLists.txt).
#pragma once

#include "capsule/runtime/handler.hpp"

namespace capsule::cli {

RuntimeStatus register_linked_handlers(HandlerRegistry& registry);

}  // namespace capsule::cli
