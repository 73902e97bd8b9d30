// SPDX-License-Identifier: Apache-2.0
// The portable reference CPU handlers: one per op of the `reference` catalog, forward and local
// adjoint, with the canonical semantics of engine/include/capsule/runtime/op_args.hpp.
#pragma once

#include "capsule/runtime/handler.hpp"

namespace capsule {

/// The runtime guards every reference handler enforces. These are the exact names the
/// `reference` catalog's runtime-guard evidence uses.
inline constexpr std::string_view kReferenceShapeGuard = "portable runtime shape checks";
inline constexpr std::string_view kReferenceLayoutGuard = "typed tensor layout";
inline constexpr std::string_view kReferenceAttentionGuard = "typed attention shapes";

/// Registers every reference handler (provider reference, device cpu). Fails, naming both sites,
/// if any of them is already registered.
RuntimeStatus register_reference_handlers(HandlerRegistry& registry);

}  // namespace capsule
