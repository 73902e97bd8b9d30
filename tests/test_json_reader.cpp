// SPDX-License-Identifier: Apache-2.0
// The strict JSON reader (capsule/json_reader.hpp) that the evidence ledger is read with:
// every kind of valid document, the round trip through JsonWriter, each rejection class with its
// line:column, the size and depth limits, and the hostile files under tests/data/hostile/json.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/escape.hpp"
#include "capsule/json.hpp"
#include "capsule/json_reader.hpp"
#include "test_support.hpp"

using namespace capsule;
using capsule::testing::has;
using namespace std::string_literals;

namespace {

JsonValue parsed(std::string_view text) {
  auto result = parse_json(text);
  if (!result) FAIL_CHECK("unexpected error at ", result.error().line, ":", result.error().column, ": ", result.error().message);
  return result ? *result : JsonValue{};
}

std::string written(const JsonValue& value) {
  JsonWriter writer;
  write_json(writer, value);
  return writer.str();
}

/// True when `message` is printable ASCII: no byte of the input can reach it raw.
bool printable_ascii(std::string_view message) {
  for (const char c : message) {
    if (c < 0x20 || c > 0x7E) return false;
  }
  return true;
}

struct Rejection {
  std::string text;
  std::uint32_t line;
  std::uint32_t column;
  std::string found;     // expected in the message
  std::string expected;  // expected in the message too
};

}  // namespace

TEST_SUITE("json reader") {

TEST_CASE("scalars of every kind parse with their values and positions") {
  CHECK(parsed("null").is_null());
  CHECK(parsed("true").as_bool());
  CHECK_FALSE(parsed("false").as_bool());
  CHECK(parsed("false").is_bool());
  CHECK(parsed(" \t\r\n\"text\" \n").as_string() == "text");
  CHECK(parsed("\"\"").as_string().empty());

  const JsonValue zero = parsed("0");
  CHECK(zero.is_integer());
  CHECK(zero.as_int() == 0);
  // -0 keeps its sign as a double; no int64 can hold it, so it is no integer.
  const JsonValue minus_zero = parsed("-0");
  CHECK(minus_zero.is_number());
  CHECK_FALSE(minus_zero.is_integer());
  CHECK(std::signbit(minus_zero.as_double()));
  CHECK(parsed("-17").as_int() == -17);
  CHECK(parsed("9223372036854775807").as_int() == std::numeric_limits<std::int64_t>::max());
  CHECK(parsed("-9223372036854775808").as_int() == std::numeric_limits<std::int64_t>::min());
  const JsonValue past_int64 = parsed("9223372036854775808");
  CHECK(past_int64.is_number());
  CHECK_FALSE(past_int64.is_integer());
  CHECK(past_int64.as_double() == 9223372036854775808.0);
  // 2^53 + 1 keeps its exact integer though the double rounds it.
  CHECK(parsed("9007199254740993").as_int() == 9007199254740993);
  CHECK_FALSE(parsed("1.0").is_integer());
  CHECK_FALSE(parsed("1e2").is_integer());
  CHECK(parsed("1e2").as_double() == 100.0);
  CHECK(parsed("-1.25E+2").as_double() == -125.0);
  CHECK(parsed("2.5e-3").as_double() == 0.0025);
  CHECK(parsed("0.1").as_double() == 0.1);
  CHECK(parsed("1.7976931348623157e308").as_double() == std::numeric_limits<double>::max());
  CHECK(parsed("5e-324").as_double() == std::numeric_limits<double>::denorm_min());

  // Accessors of another kind give empty values, find on a non-object gives nullptr.
  const JsonValue text = parsed("\"x\"");
  CHECK(text.as_array().empty());
  CHECK(text.as_object().empty());
  CHECK(text.as_int() == 0);
  CHECK(text.find("x") == nullptr);
  CHECK(parsed("1").as_string().empty());
}

TEST_CASE("arrays and objects keep document order and every value's line and column") {
  const JsonValue doc = parsed("{\n  \"b\": [1, \"two\", null, {}],\n  \"a\": {\"x\": true, \"y\": []},\n  \"c\": -0.5\n}");
  REQUIRE(doc.is_object());
  CHECK(doc.line == 1);
  CHECK(doc.column == 1);
  const JsonObject& members = doc.as_object();
  REQUIRE(members.size() == 3);
  CHECK(members[0].first == "b");
  CHECK(members[1].first == "a");
  CHECK(members[2].first == "c");
  const JsonValue* b = doc.find("b");
  REQUIRE(b != nullptr);
  REQUIRE(b->as_array().size() == 4);
  CHECK(b->line == 2);
  CHECK(b->column == 8);
  CHECK(b->as_array()[1].as_string() == "two");
  CHECK(b->as_array()[1].column == 12);
  CHECK(b->as_array()[3].is_object());
  CHECK(b->as_array()[3].as_object().empty());
  const JsonValue* a = doc.find("a");
  REQUIRE(a != nullptr);
  REQUIRE(a->find("x") != nullptr);
  CHECK(a->find("x")->as_bool());
  CHECK(a->find("x")->line == 3);
  CHECK(a->find("x")->column == 14);
  CHECK(a->find("y")->is_array());
  CHECK(a->find("z") == nullptr);
  CHECK(doc.find("c")->as_double() == -0.5);
  CHECK(doc.find("c")->line == 4);
  CHECK(parsed("[]").as_array().empty());
  CHECK(parsed("[ [ ] , { } ]").as_array().size() == 2);
}

TEST_CASE("escapes, non-ASCII and astral characters decode and round-trip through JsonWriter") {
  CHECK(parsed(R"("\" \\ \/ \b \f \n \r \t")").as_string() == "\" \\ / \b \f \n \r \t");
  CHECK(parsed(R"("\u0041\u00e9\u20AC\ud83d\ude00\u0000")").as_string() == "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\0"s);
  CHECK(parsed("\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"").as_string() == "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  CHECK(parsed(R"("\uDBFF\uDFFF")").as_string() == "\xf4\x8f\xbf\xbf");  // U+10FFFF

  const std::vector<std::string> strings{
      "", "plain", "quote \" backslash \\ slash /", "\b\f\n\r\t", "nul \0 inside"s, "c0 \x01\x1b\x1f del \x7f",
      "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xe4\xb8\xad\xe6\x96\x87", "astral \xf0\x9f\x98\x80 \xf0\x90\x8d\x88 \xf4\x8f\xbf\xbf",
      "hidden \xe2\x80\xae rlo \xef\xbb\xbf bom \xc2\x85 nel \xe2\x80\xa8 ls \xf3\xa0\x80\x81 tag"};
  JsonWriter writer;
  writer.begin_object();
  for (std::size_t i = 0; i < strings.size(); ++i) writer.field(strings[i] + std::to_string(i), strings[i]);
  writer.key("numbers").begin_array();
  writer.value(std::int64_t{-9223372036854775807 - 1}).value(0.1).value(-0.0).value(1e300).value(5e-324).value(123.0);
  writer.end_array().key("flags").begin_array().value(true).value(false).null().end_array();
  writer.end_object();
  const JsonValue doc = parsed(writer.str());
  REQUIRE(doc.as_object().size() == strings.size() + 2);
  for (std::size_t i = 0; i < strings.size(); ++i) {
    CAPTURE(i);
    CHECK(doc.as_object()[i].first == strings[i] + std::to_string(i));
    CHECK(doc.as_object()[i].second.as_string() == strings[i]);
  }
  const JsonArray& numbers = doc.find("numbers")->as_array();
  REQUIRE(numbers.size() == 6);
  CHECK(numbers[0].as_int() == std::numeric_limits<std::int64_t>::min());
  CHECK(numbers[1].as_double() == 0.1);
  CHECK(std::signbit(numbers[2].as_double()));
  CHECK(numbers[3].as_double() == 1e300);
  CHECK(numbers[4].as_double() == 5e-324);
  CHECK(numbers[5].as_double() == 123.0);
  // Written back and read again: the same value, and the same text the second time.
  const std::string again = written(doc);
  CHECK(parsed(again) == doc);
  CHECK(written(parsed(again)) == again);
}

TEST_CASE("writing a parsed value back is a fixed point: the second write gives the first text") {
  // Found by the fuzzer: -0e+2 is the double -0.0, written "-0", which once read back as the
  // integer 0 and was then written "0".
  for (const std::string_view text : {"[0,-0e+2,1E-3,92372]", "-0", "-0.0", "[1.0, 1e2, -1e-2, 123456789012345678901]",
                                      "9223372036854775808", "-9223372036854775809", "[5e-324, 1.7976931348623157e308]",
                                      "\"\\u0000\\u202e\\ud83d\\ude00\""}) {
    CAPTURE(text);
    const JsonValue first = parsed(text);
    const std::string once = written(first);
    const JsonValue second = parsed(once);
    CHECK(second == first);
    CHECK(std::signbit(second.as_double()) == std::signbit(first.as_double()));
    CHECK(written(second) == once);
  }
}

TEST_CASE("equality compares values, not positions or spelling") {
  CHECK(parsed("[1, 2.50, \"\\u0061\"]") == parsed("[1,2.5,\"a\"]"));
  CHECK(parsed("1.0") == parsed("1"));
  CHECK(parsed("-0") == parsed("0"));
  CHECK_FALSE(parsed("9007199254740993") == parsed("9007199254740992"));
  CHECK_FALSE(parsed("[1]") == parsed("[1,1]"));
  CHECK_FALSE(parsed("{\"a\":1,\"b\":2}") == parsed("{\"b\":2,\"a\":1}"));
  CHECK_FALSE(parsed("null") == parsed("false"));
  CHECK_FALSE(parsed("\"1\"") == parsed("1"));
}

TEST_CASE("every deviation from RFC 8259 is rejected at its line and column, saying what was found and expected") {
  const std::vector<Rejection> rejections{
      {"", 1, 1, "the end of the text", "expected a value"},
      {"  \n ", 2, 2, "the end of the text", "expected a value"},
      {"// comment\n1", 1, 1, "'/'", "no comments"},
      {"[1 /* c */]", 1, 4, "'/'", "expected ',' or ']'"},
      {"[1,]", 1, 4, "']'", "no trailing commas"},
      {"{\"a\": 1,\n}", 2, 1, "'}'", "no trailing commas"},
      {"[1,,2]", 1, 4, "','", "expected a value"},
      {"NaN", 1, 1, "'N'", "not JSON numbers"},
      {"[Infinity]", 1, 2, "'I'", "not JSON numbers"},
      {"-Infinity", 1, 2, "'I'", "digit after '-'"},
      {"+1", 1, 1, "'+'", "never starts with '+'"},
      {"01", 1, 2, "'1'", "leading 0"},
      {"-007", 1, 3, "'0'", "leading 0"},
      {"1.", 1, 3, "the end of the text", "digit after '.'"},
      {".5", 1, 1, "'.'", "expected a value"},
      {"1.e3", 1, 3, "'e'", "digit after '.'"},
      {"1e", 1, 3, "the end of the text", "digit after the exponent"},
      {"[1e+]", 1, 5, "']'", "digit after the exponent"},
      {"0x10", 1, 2, "'x'", "end of the document"},
      {"1e400", 1, 1, "a number a double cannot hold", "within a double's range"},
      {"[0, -1e309]", 1, 5, "a number a double cannot hold", "within a double's range"},
      {"1e-400", 1, 1, "a number a double cannot hold", "within a double's range"},
      {"tru", 1, 4, "the end of the text", "literal true"},
      {"True", 1, 1, "'T'", "expected a value"},
      {"[nul]", 1, 5, "']'", "literal null"},
      {"falsey", 1, 6, "'y'", "end of the document"},
      {"'a'", 1, 1, "'''", "double quotes"},
      {"\"abc", 1, 5, "the end of the text", "to close the string"},
      {"\"a\x07z\"", 1, 3, "U+0007", "\\u0007"},
      {"\"line\nbreak\"", 1, 6, "U+000A", "no control character"},
      {"\"tab\there\"", 1, 5, "U+0009", "no control character"},
      {"\"nul\0\""s, 1, 5, "U+0000", "no control character"},
      {R"("\x41")", 1, 3, "'x'", "an escape after"},
      {R"("\')", 1, 3, "'''", "an escape after"},
      {"\"\\", 1, 3, "the end of the text", "an escape after"},
      {R"("\u12G4")", 1, 6, "'G'", "four hex digits"},
      {R"("\u12")", 1, 6, "'\"'", "four hex digits"},
      {R"("ok \ud800 then")", 1, 5, "the high surrogate", "low surrogate"},
      {R"("\uD83D\u0041")", 1, 8, "U+0041 after the high surrogate U+D83D", "low surrogate"},
      {R"("\uD83D\uD83D")", 1, 8, "U+D83D after the high surrogate", "low surrogate"},
      {R"("\udc00")", 1, 2, "the low surrogate", "high surrogate"},
      {"\"\xff\"", 1, 2, "the byte 0xFF", "well-formed UTF-8"},
      {"\"overlong \xc0\xaf\"", 1, 11, "the byte 0xC0", "well-formed UTF-8"},
      {"\"surrogate \xed\xa0\x80\"", 1, 12, "the byte 0xED", "well-formed UTF-8"},
      {"\"cut \xe2\x82\"", 1, 6, "the byte 0xE2", "well-formed UTF-8"},
      {"\"above \xf4\x90\x80\x80\"", 1, 8, "the byte 0xF4", "well-formed UTF-8"},
      {"\x80", 1, 1, "the byte 0x80", "expected a value"},
      {"\xef\xbb\xbf{}", 1, 1, "U+FEFF", "expected a value"},
      {"{\"a\": 1,\n \"a\": 2}", 2, 2, "the member name \"a\" again (first at 1:2)", "unique member names"},
      {"{\"\": 1, \"\": 2}", 1, 9, "the member name \"\" again", "unique member names"},
      {"{\"\\u0061\": 1, \"a\": 2}", 1, 15, "the member name \"a\" again", "unique member names"},
      {"{} x", 1, 4, "'x'", "end of the document"},
      {"1 2", 1, 3, "'2'", "end of the document"},
      {"[1] ]", 1, 5, "']'", "end of the document"},
      {"[1", 1, 3, "the end of the text", "expected ',' or ']'"},
      {"[1 2]", 1, 4, "'2'", "expected ',' or ']'"},
      {"{\"a\" 1}", 1, 6, "'1'", "expected ':'"},
      {"{\"a\": 1 \"b\": 2}", 1, 9, "'\"'", "expected ',' or '}'"},
      {"{1: 2}", 1, 2, "'1'", "member name in double quotes"},
      {"{a: 2}", 1, 2, "'a'", "member name in double quotes"},
      {"{\"a\"}", 1, 5, "'}'", "expected ':'"},
      {"{\"a\":}", 1, 6, "'}'", "expected a value"},
      {"]", 1, 1, "']'", "expected a value"},
      {"[\n  1,\n  @\n]", 3, 3, "'@'", "expected a value"},
  };
  for (const Rejection& r : rejections) {
    CAPTURE(r.text);
    const auto result = parse_json(r.text);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().line == r.line);
    CHECK(result.error().column == r.column);
    CHECK(has(result.error().message, "found " + r.found));
    CHECK(has(result.error().message, r.expected));
    CHECK(printable_ascii(result.error().message));
  }
}

TEST_CASE("columns count code points, so errors after multi-byte characters point at the character") {
  // [ " é € 😀 " ,   x  -> x is the 9th code point (13 bytes in).
  auto result = parse_json("[\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", x]");
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().line == 1);
  CHECK(result.error().column == 9);
  result = parse_json("{\"\xe4\xb8\xad\": 1,\n \"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\": 2, \"\xe4\xb8\xad\": 3}");
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().line == 2);
  CHECK(result.error().column == 11);
  CHECK(has(result.error().message, "first at 1:2"));
  result = parse_json("\"\xc3\xa9\xc3\xa9\x01\"");
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().column == 4);
  result = parse_json("[\"\xf0\x9f\x98\x80\", \"\xf0\x9f\x98\x80\xff\"]");
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().column == 9);
  // Values parsed after multi-byte text carry code-point columns too.
  const JsonValue doc = parsed("[\"\xe2\x82\xac\xe2\x82\xac\", 7]");
  CHECK(doc.as_array()[1].column == 8);
}

TEST_CASE("a duplicate member name is quoted escaped and cut short in the message") {
  const std::string name = "\x1b[2J\n::error::forged \xe2\x80\xae" + std::string(500, 'k');
  const std::string text = "{\"" + json_escape(name).substr(1, std::string::npos) + ": 1, " + json_escape(name) + ": 2}";
  const auto result = parse_json(text);
  REQUIRE_FALSE(result.has_value());
  const std::string& message = result.error().message;
  CHECK(has(message, "\\u001b[2J\\n::error::forged \\u202e"));
  CHECK(has(message, "kkk\"... again"));
  CHECK(message.size() < 300);
  CHECK(printable_ascii(message));
}

TEST_CASE("nesting is accepted exactly at the depth limit and rejected one past it") {
  const auto nested = [](std::size_t depth, std::string_view open, std::string_view inner, std::string_view close) {
    std::string text;
    for (std::size_t i = 0; i < depth; ++i) text += open;
    text += inner;
    for (std::size_t i = 0; i < depth; ++i) text += close;
    return text;
  };
  const auto at_limit = parse_json(nested(kMaxJsonDepth, "[", "", "]"));
  REQUIRE(at_limit.has_value());
  const JsonValue* innermost = &*at_limit;
  for (std::size_t i = 1; i < kMaxJsonDepth; ++i) innermost = &innermost->as_array().at(0);
  CHECK(innermost->is_array());
  CHECK(innermost->as_array().empty());
  CHECK(parse_json(nested(kMaxJsonDepth, "{\"k\":", "0", "}")).has_value());

  auto past = parse_json(nested(kMaxJsonDepth + 1, "[", "", "]"));
  REQUIRE_FALSE(past.has_value());
  CHECK(past.error().line == 1);
  CHECK(past.error().column == kMaxJsonDepth + 1);
  CHECK(has(past.error().message, "nest at most 128 deep"));
  past = parse_json(nested(kMaxJsonDepth + 1, "{\"k\":", "0", "}"));
  REQUIRE_FALSE(past.has_value());
  CHECK(past.error().column == kMaxJsonDepth * 5 + 1);

  // A caller's tighter limit holds; a looser one is capped at kMaxJsonDepth.
  CHECK(parse_json("[[1]]", 2).has_value());
  CHECK_FALSE(parse_json("[[[1]]]", 2).has_value());
  CHECK(parse_json("1", 0).has_value());
  CHECK_FALSE(parse_json("[]", 0).has_value());
  CHECK_FALSE(parse_json(nested(kMaxJsonDepth + 1, "[", "", "]"), kMaxJsonDepth * 10).has_value());
  // A million open brackets: rejected at the limit, no stack overflow.
  past = parse_json(std::string(1'000'000, '['));
  REQUIRE_FALSE(past.has_value());
  CHECK(past.error().column == kMaxJsonDepth + 1);
}

TEST_CASE("large documents: a 1 MB string, a wide array and the size limit") {
  std::string big(1'000'000, 'x');
  for (std::size_t i = 0; i < big.size(); i += 1000) big[i] = '\xc3', big[i + 1] = '\xa9';  // some é
  const JsonValue string = parsed("\"" + big + "\"");
  CHECK(string.as_string() == big);
  const JsonValue escaped = parsed(json_escape(std::string(1'000'000, '\n')));
  CHECK(escaped.as_string().size() == 1'000'000);

  std::string wide = "[";
  for (int i = 0; i < 200'000; ++i) wide += "0,";
  wide += "{\"last\": true}]";
  const JsonValue array = parsed(wide);
  REQUIRE(array.as_array().size() == 200'001);
  CHECK(array.as_array().back().column == 400'002);

  std::string members = "{";
  for (int i = 0; i < 50'000; ++i) members += "\"" + std::string(40, 'p') + std::to_string(i) + "\": " + std::to_string(i) + ",\n";
  members += "\"end\": 0}";
  const JsonValue object = parsed(members);
  CHECK(object.as_object().size() == 50'001);

  std::string too_big(kMaxJsonBytes + 1, ' ');
  too_big[0] = '0';
  const auto rejected = parse_json(too_big);
  REQUIRE_FALSE(rejected.has_value());
  CHECK(rejected.error().line == 1);
  CHECK(rejected.error().column == 1);
  CHECK(has(rejected.error().message, "expected at most 16777216"));
  too_big.pop_back();
  CHECK(parse_json(too_big).has_value());
}

TEST_CASE("hostile files under tests/data/hostile/json are rejected at the expected place") {
  const std::map<std::string, std::pair<std::uint32_t, std::uint32_t>> expected{
      {"bom.json", {1, 1}},           {"comment.json", {1, 1}},         {"control-in-string.json", {1, 16}},
      {"deep-arrays.json", {1, 129}}, {"deep-objects.json", {1, 641}},  {"duplicate-key.json", {2, 2}},
      {"huge-exponent.json", {1, 12}}, {"invalid-utf8.json", {1, 20}}, {"leading-zero.json", {1, 13}},
      {"lone-surrogate.json", {1, 14}}, {"nan.json", {1, 12}},          {"trailing-comma.json", {1, 19}},
      {"trailing-garbage.json", {2, 1}},
  };
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(capsule::testing::test_data() / "hostile" / "json")) {
    const std::string name = entry.path().filename().string();
    CAPTURE(name);
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto result = parse_json(text);
    REQUIRE_FALSE(result.has_value());
    CHECK(printable_ascii(result.error().message));
    const auto where = expected.find(name);
    REQUIRE_MESSAGE(where != expected.end(), "a hostile file without an expected position");
    CHECK(result.error().line == where->second.first);
    CHECK(result.error().column == where->second.second);
    ++files;
  }
  CHECK(files == expected.size());
}

}  // TEST_SUITE
