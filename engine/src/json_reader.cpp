// SPDX-License-Identifier: Apache-2.0
// parse_json (capsule/json_reader.hpp): a strict RFC 8259 parser for hostile input. It is
// iterative: open arrays and objects live on a heap stack bounded by the depth limit, so no
// input can exhaust the call stack. Each byte is looked at a bounded number of times, and
// positions are counted by a cursor that only moves forward, so the time is linear.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <new>

#include "capsule/escape.hpp"
#include "capsule/json_reader.hpp"

namespace capsule {

namespace {

struct Position {
  std::uint32_t line = 1;
  std::uint32_t column = 1;
};

/// Thrown inside the parser only, caught by parse_json: the first problem ends the parse.
struct Stop {
  JsonParseError error;
};

/// `text` for a message: json_escape'd (quoted, no control or hidden character, valid UTF-8)
/// and cut after 64 code points, so a hostile key can neither forge output nor flood it.
std::string quoted_for_message(std::string_view text) {
  constexpr std::size_t kShown = 64;
  std::size_t at = 0;
  for (std::size_t shown = 0; at < text.size() && shown < kShown; ++shown) at += decode_utf8(text, at).length;
  return at < text.size() ? json_escape(text.substr(0, at)) + "..." : json_escape(text);
}

std::string code_point_name(char32_t code_point) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "U+%04X", static_cast<unsigned>(code_point));
  return buffer;
}

class Parser {
 public:
  Parser(std::string_view text, std::size_t max_depth) : text_(text), max_depth_(max_depth) {}

  JsonValue document() {
    skip_space();
    JsonValue value = parse_value_or_open();
    while (true) {
      if (stack_.empty()) {
        skip_space();
        if (at_ != text_.size()) fail(at_, "expected the end of the document");
        return value;
      }
      Frame& frame = stack_.back();
      if (frame.is_object) {
        frame.members.emplace_back(std::move(frame.key), std::move(value));
      } else {
        frame.items.push_back(std::move(value));
      }
      skip_space();
      const char close = frame.is_object ? '}' : ']';
      if (peek() == ',') {
        ++at_;
        skip_space();
        if (peek() == close) fail(at_, "expected a value after ',' (JSON has no trailing commas)");
        if (frame.is_object) member_name(frame);
        value = parse_value_or_open();
      } else if (peek() == close) {
        ++at_;
        value = close_container();
      } else {
        fail(at_, frame.is_object ? "expected ',' or '}' after an object member" : "expected ',' or ']' after an array element");
      }
    }
  }

 private:
  struct Frame {
    bool is_object = false;
    Position where;
    JsonArray items;
    JsonObject members;
    std::string key;                                      // the member whose value is being read
    std::map<std::string, Position, std::less<>> names;  // every name so far, for duplicates
  };

  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  bool at_end() const { return at_ >= text_.size(); }

  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) ++at_;
  }

  /// The line and column of byte `offset`. Queries come in increasing order while parsing, so
  /// the cursor only moves forward; an earlier offset (only when failing) recounts from the start.
  Position position(std::size_t offset) {
    if (offset < cursor_) {
      cursor_ = 0;
      cursor_position_ = Position{};
    }
    for (; cursor_ < offset && cursor_ < text_.size(); ++cursor_) {
      const auto byte = static_cast<unsigned char>(text_[cursor_]);
      if (byte == '\n') {
        ++cursor_position_.line;
        cursor_position_.column = 1;
      } else if ((byte & 0xC0) != 0x80) {  // continuation bytes belong to the previous column
        ++cursor_position_.column;
      }
    }
    return cursor_position_;
  }

  /// What stands at `offset`, for "found ..." without echoing raw bytes: 'c' for printable
  /// ASCII, U+XXXX for other characters, 0xHH for a byte that does not start valid UTF-8.
  std::string describe(std::size_t offset) const {
    if (offset >= text_.size()) return "the end of the text";
    const auto byte = static_cast<unsigned char>(text_[offset]);
    if (byte >= 0x20 && byte < 0x7F) return std::string("'") + static_cast<char>(byte) + "'";
    const Utf8Step step = decode_utf8(text_, offset);
    if (step.code_point != kInvalidUtf8) return code_point_name(step.code_point);
    char buffer[48];
    std::snprintf(buffer, sizeof buffer, "the byte 0x%02X, which is not UTF-8", static_cast<unsigned>(byte));
    return buffer;
  }

  [[noreturn]] void fail_at(Position where, std::string message) { throw Stop{JsonParseError{where.line, where.column, std::move(message)}}; }
  [[noreturn]] void fail(std::size_t offset, std::string_view expected) {
    fail_at(position(offset), "found " + describe(offset) + ", " + std::string(expected));
  }

  /// A scalar value, or the opening of an array or object (pushed on the stack). When the
  /// container is empty it is closed at once and returned; otherwise this returns the first
  /// element's value (reading further openings the same way).
  JsonValue parse_value_or_open() {
    while (true) {
      const char c = peek();
      if (c != '[' && c != '{') return scalar();
      if (stack_.size() >= max_depth_) {
        fail(at_, "expected a scalar value (arrays and objects nest at most " + std::to_string(max_depth_) + " deep)");
      }
      Frame frame;
      frame.is_object = c == '{';
      frame.where = position(at_);
      stack_.push_back(std::move(frame));
      ++at_;
      skip_space();
      if (peek() == (c == '{' ? '}' : ']')) {
        ++at_;
        return close_container();
      }
      if (c == '{') member_name(stack_.back());
    }
  }

  JsonValue close_container() {
    Frame& frame = stack_.back();
    JsonValue value = frame.is_object ? JsonValue::object(std::move(frame.members)) : JsonValue::array(std::move(frame.items));
    value.line = frame.where.line;
    value.column = frame.where.column;
    stack_.pop_back();
    return value;
  }

  /// `"name" :` inside an object, leaving the cursor at the member's value.
  void member_name(Frame& frame) {
    if (peek() != '"') fail(at_, "expected a member name in double quotes");
    const Position where = position(at_);
    std::string name = string_body();
    const auto [earlier, inserted] = frame.names.emplace(name, where);
    if (!inserted) {
      fail_at(where, "found the member name " + quoted_for_message(name) + " again (first at " +
                         std::to_string(earlier->second.line) + ":" + std::to_string(earlier->second.column) +
                         "), expected unique member names");
    }
    frame.key = std::move(name);
    skip_space();
    if (peek() != ':') fail(at_, "expected ':' after a member name");
    ++at_;
    skip_space();
  }

  JsonValue scalar() {
    const Position where = position(at_);
    JsonValue value;
    const char c = peek();
    if (c == '"') {
      value = JsonValue::string(string_body());
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      value = number();
    } else if (c == 't') {
      literal("true");
      value = JsonValue::boolean(true);
    } else if (c == 'f') {
      literal("false");
      value = JsonValue::boolean(false);
    } else if (c == 'n') {
      literal("null");
    } else {
      std::string hint;
      if (c == '/') hint = " (JSON has no comments)";
      if (c == '\'') hint = " (strings take double quotes)";
      if (c == '+') hint = " (a number never starts with '+')";
      if (c == 'N' || c == 'I') hint = " (NaN and Infinity are not JSON numbers)";
      fail(at_, "expected a value" + hint);
    }
    value.line = where.line;
    value.column = where.column;
    return value;
  }

  void literal(std::string_view word) {
    for (const char expected : word) {
      if (peek() != expected) fail(at_, "expected the literal " + std::string(word));
      ++at_;
    }
  }

  void digits(std::string_view after) {
    if (peek() < '0' || peek() > '9') fail(at_, "expected a digit after " + std::string(after));
    while (peek() >= '0' && peek() <= '9') ++at_;
  }

  JsonValue number() {
    const std::size_t start = at_;
    if (peek() == '-') ++at_;
    if (peek() == '0') {
      ++at_;
      if (peek() >= '0' && peek() <= '9') fail(at_, "expected '.', an exponent or the end of the number after a leading 0");
    } else {
      digits(at_ > start ? "'-'" : "the start of a number");
    }
    bool integer_text = true;
    if (peek() == '.') {
      ++at_;
      digits("'.'");
      integer_text = false;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++at_;
      if (peek() == '+' || peek() == '-') ++at_;
      digits("the exponent mark");
      integer_text = false;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + at_;
    double d = 0;
    const auto parsed = std::from_chars(first, last, d);
    if (parsed.ec != std::errc{} || parsed.ptr != last) {
      fail_at(position(start), "found a number a double cannot hold (magnitude above ~1.8e308 or nonzero below ~4.9e-324), "
                               "expected a number within a double's range");
    }
    // "-0" is no integer: an int64 cannot carry the sign of zero, and writing it back as 0 would
    // change the value's double.
    std::int64_t integer = 0;
    const bool exact = integer_text && !(d == 0 && text_[start] == '-') && [&] {
      const auto as_int = std::from_chars(first, last, integer);
      return as_int.ec == std::errc{} && as_int.ptr == last;
    }();
    return JsonValue::number(d, exact, integer);
  }

  unsigned hex4() {
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = peek();
      unsigned digit = 0;
      if (c >= '0' && c <= '9') {
        digit = static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<unsigned>(c - 'A' + 10);
      } else {
        fail(at_, "expected four hex digits after \\u");
      }
      value = value * 16 + digit;
      ++at_;
    }
    return value;
  }

  static void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  /// The code point of a `\u` escape whose backslash is at `at_`, combining a surrogate pair.
  char32_t unicode_escape() {
    const std::size_t start = at_;
    at_ += 2;  // the backslash and the u
    const unsigned first = hex4();
    if (first >= 0xDC00 && first <= 0xDFFF) {
      fail_at(position(start), "found the low surrogate \\u escape " + code_point_name(first) +
                                   " alone, expected a high surrogate (U+D800-U+DBFF) before it");
    }
    if (first < 0xD800 || first > 0xDBFF) return first;
    if (peek() != '\\' || at_ + 1 >= text_.size() || text_[at_ + 1] != 'u') {
      fail_at(position(start), "found the high surrogate \\u escape " + code_point_name(first) +
                                   " alone, expected a \\u escape of a low surrogate (U+DC00-U+DFFF) after it");
    }
    const std::size_t second_start = at_;
    at_ += 2;
    const unsigned second = hex4();
    if (second < 0xDC00 || second > 0xDFFF) {
      fail_at(position(second_start), "found " + code_point_name(second) + " after the high surrogate " + code_point_name(first) +
                                          ", expected a low surrogate (U+DC00-U+DFFF)");
    }
    return 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
  }

  /// A string whose opening quote is at `at_`, unescaped; leaves the cursor after the closing quote.
  std::string string_body() {
    std::string out;
    ++at_;
    while (true) {
      if (at_end()) fail(at_, "expected '\"' to close the string");
      const auto byte = static_cast<unsigned char>(text_[at_]);
      if (byte == '"') {
        ++at_;
        return out;
      }
      if (byte < 0x20) {
        fail(at_, "expected no control character in a string (write it as \\u" + code_point_name(byte).substr(2) + ")");
      }
      if (byte >= 0x80) {
        const Utf8Step step = decode_utf8(text_, at_);
        if (step.code_point == kInvalidUtf8) fail(at_, "expected well-formed UTF-8");
        out.append(text_.substr(at_, step.length));
        at_ += step.length;
        continue;
      }
      if (byte != '\\') {
        out += static_cast<char>(byte);
        ++at_;
        continue;
      }
      const char escaped = at_ + 1 < text_.size() ? text_[at_ + 1] : '\0';
      if (escaped == 'u') {
        append_utf8(out, unicode_escape());
        continue;
      }
      static constexpr std::string_view kFrom = "\"\\/bfnrt";
      static constexpr std::string_view kTo = "\"\\/\b\f\n\r\t";
      const std::size_t which = kFrom.find(escaped);
      if (escaped == '\0' || which == std::string_view::npos) {
        fail(at_ + 1, "expected an escape after '\\': one of \" \\ / b f n r t or u and four hex digits");
      }
      out += kTo[which];
      at_ += 2;
    }
  }

  std::string_view text_;
  std::size_t max_depth_;
  std::size_t at_ = 0;
  std::size_t cursor_ = 0;
  Position cursor_position_;
  std::vector<Frame> stack_;
};

}  // namespace

Result<JsonValue, JsonParseError> parse_json(std::string_view text, std::size_t max_depth) {
  if (text.size() > kMaxJsonBytes) {
    return fail(JsonParseError{1, 1, "found a text of " + std::to_string(text.size()) + " bytes, expected at most " +
                                         std::to_string(kMaxJsonBytes) + " (16 MiB)"});
  }
  try {
    Parser parser(text, std::min(max_depth, kMaxJsonDepth));
    return parser.document();
  } catch (const Stop& stop) {
    return fail(stop.error);
  } catch (const std::bad_alloc&) {
    return fail(JsonParseError{1, 1, "found a document too large for the memory available, expected a smaller one"});
  }
}

}  // namespace capsule
