// SPDX-License-Identifier: Apache-2.0
#include "capsule/toml_limits.hpp"

#include <vector>

namespace capsule::detail {
namespace {

bool is_bare_key_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

/// An iterative lexer: containers open inside values live on an explicit stack, so the scan's
/// own stack use does not grow with the input's nesting.
class NestingScanner {
 public:
  NestingScanner(std::string_view text, std::size_t max_depth) : text_(text), max_depth_(max_depth) {}

  NestingScan run() {
    skip_byte_order_mark();
    while (!at_end() && !result_.exceeded) {
      const std::size_t before = pos_;
      if (open_.empty()) {
        document_step();
      } else if (open_.back().is_array) {
        array_step();
      } else {
        inline_table_step();
      }
      // Text the lexer does not understand is not TOML; toml++ will say where. Step over it
      // one character at a time so the scan always ends.
      if (pos_ == before) advance();
    }
    return result_;
  }

 private:
  struct Container {
    bool is_array = false;
    std::size_t level = 0;  ///< level of the value that is this container
  };

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(std::size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool starts_with(std::string_view s) const { return text_.substr(pos_).starts_with(s); }

  void advance() {
    if (at_end()) return;
    const char c = text_[pos_++];
    if (c == '\n') {
      ++where_.line;
      where_.column = 1;
    } else if (!is_utf8_continuation(c)) {
      ++where_.column;
    }
  }
  void advance(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) advance();
  }

  void note(std::size_t level) {
    if (level <= result_.depth) return;
    result_.depth = level;
    result_.deepest = where_;
    if (level > max_depth_) result_.exceeded = true;
  }

  void skip_byte_order_mark() {
    if (starts_with("\xEF\xBB\xBF")) advance(3);
  }

  void skip_blanks() {
    while (peek() == ' ' || peek() == '\t') advance();
  }
  void skip_comment() {
    if (peek() != '#') return;
    while (!at_end() && peek() != '\n') advance();
  }
  /// Blanks, comments and newlines: what may separate array elements or document lines.
  void skip_space() {
    for (;;) {
      skip_blanks();
      skip_comment();
      if (peek() == '\n') {
        advance();
      } else if (peek() == '\r' && peek(1) == '\n') {
        advance(2);
      } else {
        return;
      }
    }
  }

  /// A string of any of the four kinds; `pos_` is on its opening quote.
  void skip_string() {
    const char quote = peek();
    const bool basic = quote == '"';
    if (peek(1) == quote && peek(2) == quote) {
      advance(3);
      skip_multiline_body(quote, basic);
      return;
    }
    advance();
    while (!at_end() && peek() != '\n') {
      if (basic && peek() == '\\') {
        advance(2);
        continue;
      }
      if (peek() == quote) {
        advance();
        return;
      }
      advance();
    }
  }
  /// Up to the closing triple quote; a run of 4 or 5 quotes ends the string with 1 or 2 quotes
  /// of content, as TOML allows.
  void skip_multiline_body(char quote, bool basic) {
    while (!at_end()) {
      if (basic && peek() == '\\') {
        advance(2);
        continue;
      }
      if (peek() == quote) {
        std::size_t run = 0;
        while (peek(run) == quote) ++run;
        advance(run);
        if (run >= 3) return;
        continue;
      }
      advance();
    }
  }

  /// A key of one or more components (`a`, `"a.b"`, `'x'`, `a . "b" . c`), each component noted
  /// one level below `base`. Returns the number of components; 0 when no key starts here.
  std::size_t key(std::size_t base) {
    std::size_t components = 0;
    for (;;) {
      skip_blanks();
      const char c = peek();
      if (c == '"' || c == '\'') {
        note(base + components + 1);
        skip_string();
      } else if (is_bare_key_char(c)) {
        note(base + components + 1);
        while (is_bare_key_char(peek())) advance();
      } else {
        return components;
      }
      ++components;
      if (result_.exceeded) return components;
      skip_blanks();
      if (peek() != '.') return components;
      advance();
    }
  }

  /// A value held at `level`: strings and scalars are skipped, arrays and inline tables opened.
  void value(std::size_t level) {
    skip_blanks();
    const char c = peek();
    if (c == '"' || c == '\'') {
      skip_string();
    } else if (c == '[') {
      advance();
      open_.push_back(Container{true, level});
    } else if (c == '{') {
      advance();
      open_.push_back(Container{false, level});
    } else {
      // Numbers, booleans and date-times (which may hold a space): none contains a delimiter.
      while (!at_end()) {
        const char d = peek();
        if (d == ',' || d == ']' || d == '}' || d == '[' || d == '{' || d == '#' || d == '\n' || d == '"' ||
            d == '\'') {
          break;
        }
        advance();
      }
    }
  }

  /// `key = value`, the key's components below `base`.
  void key_value(std::size_t base) {
    const std::size_t components = key(base);
    if (components == 0 || result_.exceeded) return;
    skip_blanks();
    if (peek() != '=') return;
    advance();
    value(base + components);
  }

  /// One line of the document: a table header, a key/value pair, or nothing.
  void document_step() {
    if (line_done_) {
      skip_blanks();
      skip_comment();
      if (peek() == '\r' && peek(1) == '\n') advance();
      if (peek() != '\n') return;  // not TOML; stepped over by run()
      advance();
      line_done_ = false;
    }
    skip_space();
    if (at_end()) return;
    line_done_ = true;
    if (peek() != '[') {
      key_value(table_level_);
      return;
    }
    advance();
    const bool array_of_tables = peek() == '[';
    if (array_of_tables) advance();
    const std::size_t components = key(0);
    if (components == 0 || result_.exceeded) return;
    table_level_ = components;
    if (array_of_tables) {
      ++table_level_;
      note(table_level_);
    }
    skip_blanks();
    if (peek() == ']') advance();
    if (array_of_tables && peek() == ']') advance();
  }

  void array_step() {
    skip_space();
    if (at_end()) return;
    const Container array = open_.back();
    if (peek() == ']') {
      advance();
      open_.pop_back();
    } else if (peek() == ',') {
      advance();
    } else {
      note(array.level + 1);
      if (!result_.exceeded) value(array.level + 1);
    }
  }

  void inline_table_step() {
    skip_space();
    if (at_end()) return;
    const Container table = open_.back();
    if (peek() == '}') {
      advance();
      open_.pop_back();
    } else if (peek() == ',') {
      advance();
    } else {
      key_value(table.level);
    }
  }

  std::string_view text_;
  std::size_t max_depth_;
  std::size_t pos_ = 0;
  TextPosition where_;
  std::vector<Container> open_;
  std::size_t table_level_ = 0;  ///< level of the table the last header opened
  bool line_done_ = false;       ///< a document line was read; its end comes next
  NestingScan result_;
};

}  // namespace

NestingScan scan_nesting(std::string_view text, std::size_t max_depth) {
  return NestingScanner(text, max_depth).run();
}

TextPosition position_of(std::string_view text, std::size_t offset) {
  TextPosition where;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++where.line;
      where.column = 1;
    } else if (!is_utf8_continuation(text[i])) {
      ++where.column;
    }
  }
  return where;
}

}  // namespace capsule::detail
