// SPDX-License-Identifier: Apache-2.0
// The checkers this program links (register_standard_checkers), as the engine's lint, plan and
// check see them: plain KnownChecker descriptions, so the engine never includes a checker header.
#pragma once

#include <string_view>
#include <vector>

#include "capsule/known_checker.hpp"
#include "capsule/runtime/checker.hpp"

namespace capsule::cli {

/// Registers the checkers this program links into `registry` (what `capsule run` hands a session).
RuntimeStatus register_linked_checkers(CheckerRegistry& registry);

/// The same checkers described for the engine; a registration failure is a programming error
/// and throws std::logic_error (the standard set registers once, with unique names).
std::vector<KnownChecker> linked_known_checkers();

/// A registration site `file:line` as a position: relative files become absolute when the
/// source tree is present, like every other path lint prints.
SourceLoc registration_loc(std::string_view site);

}  // namespace capsule::cli
