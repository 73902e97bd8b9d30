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

/// Names longer than this get no "did you mean" (and candidates longer than this are never
/// suggested): nobody mistypes that much, and comparing costs time.
inline constexpr std::size_t kMaxSuggestionLength = 256;

/// Edit distance (Levenshtein plus adjacent transpositions), ignoring ASCII case. With `bound`,
/// gives up once the distance must exceed it and returns `bound + 1`: linear memory and
/// O(|a| * bound) time.
std::size_t edit_distance(std::string_view a, std::string_view b,
                          std::size_t bound = static_cast<std::size_t>(-1));

/// The candidate closest to `value`, or "" when none is within a useful distance (half the
/// word, at least 2). With `any_distance`, always the closest (for vocabulary errors, docs/format.md#vocabulary).
/// No suggestion for a value longer than kMaxSuggestionLength.
std::string nearest_name(std::string_view value, const std::vector<std::string_view>& candidates,
                         bool any_distance = false);

/// The longest part of a value a message quotes, in bytes.
inline constexpr std::size_t kMaxQuotedBytes = 120;

/// `text` for quoting in a message: whole when short, else its first `max_bytes` (never
/// splitting a UTF-8 character) followed by "… (N bytes)", so a 5 MB name is never echoed.
std::string clipped(std::string_view text, std::size_t max_bytes = kMaxQuotedBytes);

}  // namespace capsule
