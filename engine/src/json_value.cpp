// SPDX-License-Identifier: Apache-2.0
// JsonValue (capsule/json_reader.hpp): construction, access, equality and writing back through
// JsonWriter. The parser is in json_reader.cpp.
#include "capsule/json_reader.hpp"

namespace capsule {

namespace {

// What the accessors of another kind return, so a caller that checked nothing still reads an
// empty value instead of undefined behaviour.
const std::string kNoString;
const JsonArray kNoArray;
const JsonObject kNoObject;

}  // namespace

JsonValue JsonValue::boolean(bool b) {
  JsonValue v;
  v.data_ = b;
  return v;
}

JsonValue JsonValue::number(double d, bool is_integer, std::int64_t integer) {
  JsonValue v;
  v.data_ = Number{d, is_integer ? integer : 0, is_integer};
  return v;
}

JsonValue JsonValue::string(std::string s) {
  JsonValue v;
  v.data_ = std::move(s);
  return v;
}

JsonValue JsonValue::array(JsonArray items) {
  JsonValue v;
  v.data_ = std::move(items);
  return v;
}

JsonValue JsonValue::object(JsonObject members) {
  JsonValue v;
  v.data_ = std::move(members);
  return v;
}

const std::string& JsonValue::as_string() const {
  const auto* s = std::get_if<std::string>(&data_);
  return s != nullptr ? *s : kNoString;
}

const JsonArray& JsonValue::as_array() const {
  const auto* a = std::get_if<JsonArray>(&data_);
  return a != nullptr ? *a : kNoArray;
}

const JsonObject& JsonValue::as_object() const {
  const auto* o = std::get_if<JsonObject>(&data_);
  return o != nullptr ? *o : kNoObject;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [name, value] : as_object()) {
    if (name == key) return &value;
  }
  return nullptr;
}

bool operator==(const JsonValue& a, const JsonValue& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case JsonValue::Kind::Null:
      return true;
    case JsonValue::Kind::Bool:
      return a.as_bool() == b.as_bool();
    case JsonValue::Kind::Number:
      // Both integers: the int64s decide (doubles cannot tell 2^53 from 2^53 + 1).
      if (a.is_integer() && b.is_integer()) return a.as_int() == b.as_int();
      return a.as_double() == b.as_double();
    case JsonValue::Kind::String:
      return a.as_string() == b.as_string();
    case JsonValue::Kind::Array:
      return a.as_array() == b.as_array();
    case JsonValue::Kind::Object:
      return a.as_object() == b.as_object();
  }
  return false;
}

JsonWriter& write_json(JsonWriter& writer, const JsonValue& value) {
  switch (value.kind()) {
    case JsonValue::Kind::Null:
      return writer.null();
    case JsonValue::Kind::Bool:
      return writer.value(value.as_bool());
    case JsonValue::Kind::Number:
      return value.is_integer() ? writer.value(value.as_int()) : writer.value(value.as_double());
    case JsonValue::Kind::String:
      return writer.value(std::string_view(value.as_string()));
    case JsonValue::Kind::Array:
      writer.begin_array();
      for (const JsonValue& item : value.as_array()) write_json(writer, item);
      return writer.end_array();
    case JsonValue::Kind::Object:
      writer.begin_object();
      for (const auto& [name, member] : value.as_object()) {
        writer.key(name);
        write_json(writer, member);
      }
      return writer.end_object();
  }
  return writer;
}

}  // namespace capsule
