// SPDX-License-Identifier: Apache-2.0
#include "capsule/text.hpp"

#include <algorithm>
#include <cctype>
#include <limits>

namespace capsule {

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i != 0) out += separator;
    out += items[i];
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t bound) {
  // Optimal string alignment: Levenshtein plus adjacent transpositions, since swapped letters
  // ("cdua") are the most common typo in hand-edited catalogs.
  //
  // Three rows (a transposition looks two rows back) instead of the whole table, and only the
  // band of cells within `bound` of the diagonal: a cell further out costs more than `bound`
  // already. Memory is linear in |b|, time O(|a| * min(|b|, 2 bound + 1)).
  const auto same = [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  };
  // No distance exceeds the longer length, so a larger bound changes nothing (and cannot overflow).
  bound = std::min(bound, std::max(a.size(), b.size()));
  const std::size_t far = bound + 1;  // stands for every cell outside the band, and "too far"
  const std::size_t length_gap = a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
  if (length_gap > bound) return far;
  std::vector<std::size_t> two_back(b.size() + 1, far), previous(b.size() + 1, far), current(b.size() + 1, far);
  for (std::size_t j = 0; j <= b.size() && j <= bound; ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    const std::size_t first = i > bound ? i - bound : 1;
    const std::size_t last = std::min(b.size(), i + bound);
    // The cell left of the band: column 0 while the band touches it, else outside the band.
    current[first - 1] = first == 1 ? std::min(i, far) : far;
    std::size_t row_best = current[first - 1];
    for (std::size_t j = first; j <= last; ++j) {
      const std::size_t cost = same(a[i - 1], b[j - 1]) ? 0 : 1;
      std::size_t best = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1])) {
        best = std::min(best, two_back[j - 2] + 1);
      }
      current[j] = std::min(best, far);
      row_best = std::min(row_best, current[j]);
    }
    // The cell right of the band, which the next row reads.
    if (last + 1 <= b.size()) current[last + 1] = far;
    // A row's minimum never decreases further down (a transposition from two rows back costs
    // no less than the cell it jumps over), so once a whole row is past the bound, so is the end.
    if (row_best > bound) return far;
    std::swap(two_back, previous);
    std::swap(previous, current);
  }
  return std::min(previous[b.size()], far);
}

std::string nearest_name(std::string_view value, const std::vector<std::string_view>& candidates,
                         bool any_distance) {
  // Nobody mistypes 257 characters: a longer value is garbage or an attack, and comparing it
  // would only cost time.
  if (value.size() > kMaxSuggestionLength) return {};
  // A suggestion further away than half the word is noise, not help.
  const std::size_t useful = std::max<std::size_t>(2, value.size() / 2);
  std::string_view best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const std::string_view candidate : candidates) {
    if (candidate.size() > kMaxSuggestionLength) continue;
    // Only a strictly closer candidate matters, so the search never looks past the best so far.
    std::size_t bound = best_distance == std::numeric_limits<std::size_t>::max() ? best_distance : best_distance - 1;
    if (!any_distance) bound = std::min(bound, useful);
    const std::size_t distance = edit_distance(value, candidate, bound);
    if (distance <= bound && distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  if (best.empty()) return {};
  return std::string(best);
}

std::string clipped(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t cut = max_bytes;
  // Never split a UTF-8 sequence: back up to the start of the character that crosses the cut.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return str(text.substr(0, cut), "… (", text.size(), " bytes)");
}

std::string toml_quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          static constexpr char kHex[] = "0123456789ABCDEF";
          const auto byte = static_cast<unsigned char>(c);
          out += "\\u00";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xF];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace capsule
