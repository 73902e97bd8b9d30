// SPDX-License-Identifier: Apache-2.0
// Small text helpers shared by the engine: message assembly without <format> (libstdc++ 12 has
// none), joining, and the edit distance behind every "did you mean" hint.
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace capsule {

/// Concatenates any streamable parts into one string.
template <class... Parts>
std::string str(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

/// `text` as a TOML basic string, quotes included: `"`, `\` and control characters escaped.
std::string toml_quoted(std::string_view text);

/// Joins `items` with `separator`.
std::string join(const std::vector<std::string>& items, std::string_view separator);

/// Levenshtein distance; used only for suggestions, so quadratic cost is fine.
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `value`, or "" when none is within a useful distance (half the
/// word, at least 2). With `any_distance`, always the closest (SPEC §3 for vocabulary errors).
std::string nearest_name(std::string_view value, const std::vector<std::string_view>& candidates,
                         bool any_distance = false);

}  // namespace capsule
