// SPDX-License-Identifier: Apache-2.0
// What lint's checks share across their files (lint.cpp, lint_ledger.cpp).
#pragma once

#include <vector>

#include "capsule/load.hpp"

namespace capsule::detail {

/// The position `pos` inside `capsule`'s file, or the capsule's own position when `pos` is unset.
SourceLoc site(const Capsule& capsule, FilePos pos);

/// The workspace's modules, then modules profiles prepend through `with_catalogs` (each file
/// once, however many profiles prepend it).
std::vector<const CapsuleModule*> loaded_modules(const Workspace& workspace);

}  // namespace capsule::detail
