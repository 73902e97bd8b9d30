// SPDX-License-Identifier: Apache-2.0
// A minimal streaming JSON writer for reports: objects, arrays, strings (escaped per RFC 8259),
// numbers and booleans, with commas managed for the caller. Output is compact and deterministic.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/escape.hpp"  // json_escape: every string the writer emits

namespace capsule {

/// The version of every JSON document the CLI prints (plan, explain, list, lint, diff, run),
/// carried as its first field `format_version`. Raised when a field changes meaning or goes away;
/// a new field does not raise it (docs/decisions.md).
inline constexpr std::int64_t kJsonFormatVersion = 1;

/// Writes compact JSON; the caller pairs begin/end calls, the writer places the commas.
class JsonWriter {
 public:
  /// Starts a top-level output document: an object whose first field is `format_version`.
  JsonWriter& begin_document();
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  /// Writes `"name":`; the next value call supplies its value.
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(std::int64_t number);
  JsonWriter& value(bool flag);
  /// The shortest text that reads back as the same double; NaN and infinities (which JSON cannot
  /// spell) are written as null.
  JsonWriter& value(double number);
  JsonWriter& null();
  /// Shorthand for key(name).value(v).
  template <class T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }
  JsonWriter& string_array(std::string_view name, const std::vector<std::string>& items);

  const std::string& str() const { return out_; }

 private:
  void separate();

  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace capsule
