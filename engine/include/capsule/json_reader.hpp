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
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

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
/// text is an integer that fits one exactly.
class JsonValue {
 public:
  enum class Kind : std::uint8_t { Null, Bool, Number, String, Array, Object };

  JsonValue() = default;
  static JsonValue boolean(bool b);
  static JsonValue number(double d, bool is_integer, std::int64_t integer);
  static JsonValue string(std::string s);
  static JsonValue array(JsonArray items);
  static JsonValue object(JsonObject members);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_number() const { return kind_ == Kind::Number; }
  bool is_integer() const { return kind_ == Kind::Number && is_integer_; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }

  bool as_bool() const { return bool_; }
  double as_double() const { return number_; }
  std::int64_t as_int() const { return integer_; }
  const std::string& as_string() const { return string_; }
  const JsonArray& as_array() const { return array_; }
  const JsonObject& as_object() const { return object_; }

  /// The member named `key` of an object, or nullptr (also when this is not an object).
  const JsonValue* find(std::string_view key) const;

  /// Where the value starts in the text it was parsed from (1-based; 0 when built in code).
  std::uint32_t line = 0;
  std::uint32_t column = 0;

 private:
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  bool is_integer_ = false;
  double number_ = 0;
  std::int64_t integer_ = 0;
  std::string string_;
  JsonArray array_;
  JsonObject object_;
};

/// Why a text is not JSON capsule accepts: the first problem found.
struct JsonParseError {
  std::uint32_t line = 1;
  std::uint32_t column = 1;
  std::string message;  ///< lower-case, says what was found and what was expected; never echoes raw input bytes
};

/// Parses one JSON document (surrounding whitespace allowed, nothing else).
Result<JsonValue, JsonParseError> parse_json(std::string_view text, std::size_t max_depth = kMaxJsonDepth);

}  // namespace capsule
