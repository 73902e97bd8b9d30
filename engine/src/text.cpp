// SPDX-License-Identifier: Apache-2.0
#include "capsule/text.hpp"

#include <algorithm>
#include <cctype>

namespace capsule {

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i != 0) out += separator;
    out += items[i];
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest_name(std::string_view value, const std::vector<std::string_view>& candidates) {
  std::string_view best;
  std::size_t best_distance = static_cast<std::size_t>(-1);
  for (const std::string_view candidate : candidates) {
    const std::size_t distance = edit_distance(value, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  // A suggestion further away than half the word is noise, not help.
  const std::size_t limit = std::max<std::size_t>(2, value.size() / 2);
  if (best.empty() || best_distance > limit) return {};
  return std::string(best);
}

}  // namespace capsule
