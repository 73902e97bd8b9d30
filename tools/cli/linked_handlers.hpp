// SPDX-License-Identifier: Apache-2.0
// The compiled handlers this program links, registered by explicit calls: the reference handlers
// always, the LibTorch ones in the handler set built with CAPSULE_HAVE_LIBTORCH (defined on that
// library only; the engine never sees LibTorch). capsule_cli calls this and each program links
// one handler set that defines it (tools/cli/CMakeLists.txt).
#pragma once

#include <vector>

#include "capsule/examples.hpp"
#include "capsule/fingerprint.hpp"
#include "capsule/runtime/handler.hpp"

namespace capsule::cli {

RuntimeStatus register_linked_handlers(HandlerRegistry& registry);

/// This build's fingerprint (current_fingerprint()) with the entries of every linked provider
/// that has some (the LibTorch version, BLAS, core and threads when LibTorch is linked).
EnvironmentFingerprint linked_fingerprint();

/// The copies each linked provider counts at its boundary, so far in this process, per op (the
/// LibTorch provider's libtorch_boundary_copies; the reference provider never copies). `capsule
/// run` reports what its run added (examples::ExampleOptions::boundary_copies).
std::vector<examples::ProviderBoundaryCopies> linked_boundary_copies();

}  // namespace capsule::cli
