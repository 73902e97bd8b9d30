// SPDX-License-Identifier: Apache-2.0
// The limits every TOML file capsule reads must respect (catalogs, profiles, graphs, waivers),
// and the nesting scan that enforces the depth limit before toml++ sees the text.
//
// Why a scan of our own: toml++ builds a tree as deep as the keys and table headers it reads
// (`a.a.a.…` 40,000 levels deep fits in 80 KB) and walks and frees it recursively, so a deep
// file overflows the stack inside the library. The scan is a small lexer that understands just
// enough TOML (strings of all four kinds, comments, bare, quoted and dotted keys, table and
// array-of-tables headers, arrays, inline tables) to measure nesting, in linear time and
// constant stack.
//
// Depth is counted the way the parsed tree nests: the root table is level 0, each key
// component is one level below the table it is written in (`[a.b]` puts the table `b` at
// level 2, and `x.y = 1` inside it puts `y` at level 4), each array element is one level below
// its array, and an array-of-tables header adds one level for the element table. For a
// document toml++ accepts, the scan's depth D and the parsed tree's depth T satisfy
// D <= T <= 2 D (a header can pass through an earlier array of tables, one hidden level per
// component). So a document whose tree is within the limit is never rejected, and toml++
// never nests more than twice the limit. tests/fuzz checks both inequalities on every input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace capsule::detail {

/// The largest TOML file capsule reads, in bytes (16 MiB: a 20,000-capsule catalog is about
/// 6 MB; a larger one is far more likely an attack than a catalog).
inline constexpr std::size_t kMaxTomlBytes = std::size_t{16} << 20;
/// The deepest nesting capsule reads (the shipped files nest at most 4 levels).
inline constexpr std::size_t kMaxTomlDepth = 128;

/// A 1-based position in the text, columns counted in UTF-8 code points as toml++ does.
struct TextPosition {
  std::uint32_t line = 1;    ///< as SourceLoc holds it; a 16 MiB file has fewer lines
  std::uint32_t column = 1;
};

/// What the nesting scan found.
struct NestingScan {
  std::size_t depth = 0;      ///< deepest level seen (up to the first level past the limit)
  TextPosition deepest;       ///< where that level starts
  bool exceeded = false;      ///< a level past `max_depth` was seen; the scan stopped there
};

/// Measures how deep `text` nests, stopping at the first level deeper than `max_depth`. Never
/// fails: text that is not TOML is scanned leniently (toml++ reports the syntax error).
NestingScan scan_nesting(std::string_view text, std::size_t max_depth = kMaxTomlDepth);

/// The position of byte `offset` in `text`.
TextPosition position_of(std::string_view text, std::size_t offset);

}  // namespace capsule::detail
