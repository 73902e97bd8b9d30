// SPDX-License-Identifier: Apache-2.0
// What the parts of the trust diff share (diff.cpp compares, diff_impact.cpp plans, diff_tree.cpp
// reads revisions, diff_waivers.cpp applies reviews, diff_render.cpp prints). Private to the engine.
#pragma once

#include <filesystem>
#include <string>

#include "capsule/diff.hpp"

namespace capsule::diff_internal {

/// The evidence as a reviewer reads it: its kind and the suite or reason behind it.
std::string evidence_words(const Evidence& e);

/// `where` relative to a tree's root, so output does not depend on where the tree was read.
SourceLoc relative(const SourceLoc& where, const std::filesystem::path& root);

/// `file:line:col`, or nothing for a value without a place.
std::string location_words(const SourceLoc& where);

/// Plans every op under every HEAD profile that also exists in BASE, in both trees, and appends
/// the ops whose selection moved to `out.impacts`.
void plan_impact(const Tree& base, const Tree& head, TrustDiff& out);

/// Links weakened impacts to the capsule changes that explain them (Note [Impact causes]).
void attribute_causes(TrustDiff& diff);

}  // namespace capsule::diff_internal
