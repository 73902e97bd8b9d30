// SPDX-License-Identifier: Apache-2.0
// A strict JSON reader (RFC 8259) for the files capsule reads back as JSON, first of all the
// evidence ledger (capsule/evidence_ledger.hpp). Ledgers arrive from other machines and from
// pull requests, so the reader treats its input as hostile: it bounds size and nesting, never
// recurses without a depth check, rejects invalid UTF-8, lone surrogates, duplicate keys,
// leading zeros, trailing garbage and every other deviation from the grammar, and reports the
// first problem with its 1-based line and column (columns in code points).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "capsule/json.hpp"
#include "capsule/result.hpp"

namespace capsule {

/// The largest JSON text capsule reads (the same budget as a TOML file) and its deepest nesting.
inline constexpr std::size_t kMaxJsonBytes = std::size_t{16} << 20;
inline constexpr std::size_t kMaxJsonDepth = 128;

class JsonValue;
/// Object members in document order (keys are unique: a duplicate key is a parse error).
using JsonObject = std::vector<std::pair<std::string, JsonValue>>;
using JsonArray = std::vector<JsonValue>;

/// A parsed JSON value. Numbers keep their text's value as a double, and as an int64 when the
/// text is an integer (no fraction, no exponent) that fits one exactly (`-0` does not). The
/// accessor of another kind than kind() returns an empty or zero value. The payload is one
/// variant, so a value costs 48 bytes (64-bit) whatever its kind: a 16 MiB text of `[0,0,...]`
/// holds 8 million of them.
class JsonValue {
 public:
  enum class Kind : std::uint8_t { Null, Bool, Number, String, Array, Object };

  JsonValue() = default;
  static JsonValue boolean(bool b);
  static JsonValue number(double d, bool is_integer, std::int64_t integer);
  static JsonValue string(std::string s);
  static JsonValue array(JsonArray items);
  static JsonValue object(JsonObject members);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_null() const { return kind() == Kind::Null; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_number() const { return kind() == Kind::Number; }
  bool is_integer() const { return is_number() && std::get<Number>(data_).is_integer; }
  bool is_string() const { return kind() == Kind::String; }
  bool is_array() const { return kind() == Kind::Array; }
  bool is_object() const { return kind() == Kind::Object; }

  bool as_bool() const { return is_bool() && std::get<bool>(data_); }
  double as_double() const { return is_number() ? std::get<Number>(data_).value : 0.0; }
  std::int64_t as_int() const { return is_number() ? std::get<Number>(data_).integer : 0; }
  const std::string& as_string() const;
  const JsonArray& as_array() const;
  const JsonObject& as_object() const;

  /// The member named `key` of an object, or nullptr (also when this is not an object).
  const JsonValue* find(std::string_view key) const;

  /// The same JSON value: same kind; numbers with equal doubles (so -0 equals 0) and, when both
  /// are integers, equal int64s; strings byte for byte; arrays element by element; objects with
  /// the same members in the same order. Positions (line, column) are not compared.
  friend bool operator==(const JsonValue& a, const JsonValue& b);

  /// Where the value starts in the text it was parsed from (1-based; 0 when built in code).
  std::uint32_t line = 0;
  std::uint32_t column = 0;

 private:
  struct Number {
    double value = 0;
    std::int64_t integer = 0;
    bool is_integer = false;
  };
  // Alternatives in the order of Kind, so kind() is the variant's index.
  std::variant<std::monostate, bool, Number, std::string, JsonArray, JsonObject> data_;
};

/// Writes `value` through `writer` (integers as int64, other numbers as doubles), so that
/// parse_json(writer.str()) gives a value equal to `value`. Recurses once per nesting level:
/// meant for parsed values, whose depth parse_json bounds.
JsonWriter& write_json(JsonWriter& writer, const JsonValue& value);

/// Why a text is not JSON capsule accepts: the first problem found.
struct JsonParseError {
  std::uint32_t line = 1;
  std::uint32_t column = 1;
  std::string message;  ///< lower-case, says what was found and what was expected; never echoes raw input bytes
};

/// Parses one JSON document: RFC 8259's grammar and nothing more.
/// - Whitespace is space, tab, LF and CR, around the document and between tokens; lines end at
///   LF. No byte order mark, comments, trailing commas, single quotes or bare words.
/// - Literals `true`, `false`, `null` in lower case only.
/// - Numbers: `-`? (`0` | [1-9][0-9]*) (`.` [0-9]+)? ([eE] [+-]? [0-9]+)?; no `+`, leading zeros,
///   NaN or Infinity. Read with std::from_chars (correctly rounded); a number whose magnitude a
///   double cannot hold (above ~1.8e308, or nonzero below ~4.9e-324) is an error, never inf or 0.
///   Text without fraction or exponent that fits an int64 also keeps its exact integer value
///   (except `-0`, whose sign only the double holds).
/// - Strings: strict UTF-8 (decode_utf8), no raw control character U+0000-U+001F, escapes
///   \" \\ \/ \b \f \n \r \t and \uXXXX (hex in either case); a high surrogate escape must be
///   followed by a low one and the pair is combined; a lone surrogate escape is an error. A
///   string may hold U+0000 through \u0000.
/// - Objects: member names unique (byte for byte after unescaping); document order is kept.
/// - Limits: a text above kMaxJsonBytes is rejected before any parsing; arrays and objects nest
///   at most max_depth deep (a scalar document has depth 0, `[]` depth 1). max_depth can only
///   tighten kMaxJsonDepth, which also bounds the recursion of destroying, comparing and
///   writing a parsed value. The parser itself keeps its open containers on the heap and runs in
///   time linear in the text (times log n for the duplicate-key check).
/// Errors name the first problem's line and column (columns count code points), what was found
/// (a character as 'c' or U+XXXX, a byte that is not UTF-8 as 0xHH) and what was expected.
Result<JsonValue, JsonParseError> parse_json(std::string_view text, std::size_t max_depth = kMaxJsonDepth);

}  // namespace capsule
