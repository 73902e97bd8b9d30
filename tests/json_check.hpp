// SPDX-License-Identifier: Apache-2.0
// A strict JSON syntax check for tests of JSON output (the project writes JSON but parses none).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace capsule::testing {

/// A strict JSON syntax check (RFC 8259 grammar, no extensions), enough to say that the output
/// parses; it collects the keys of the top-level object.
class JsonCheck {
 public:
  explicit JsonCheck(std::string_view text) : text_(text) {}

  /// True when the whole text is one JSON object (trailing whitespace allowed).
  bool one_object() {
    skip_space();
    if (peek() != '{' || !value(0)) return false;
    skip_space();
    return at_ == text_.size();
  }
  const std::vector<std::string>& top_keys() const { return top_keys_; }

 private:
  char peek() const { return at_ < text_.size() ? text_[at_] : '\0'; }
  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t' || text_[at_] == '\r')) ++at_;
  }
  bool literal(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  bool string(std::string* out) {
    if (peek() != '"') return false;
    ++at_;
    while (at_ < text_.size() && text_[at_] != '"') {
      if (static_cast<unsigned char>(text_[at_]) < 0x20) return false;
      if (text_[at_] == '\\') ++at_;
      if (out != nullptr) out->push_back(text_[at_]);
      ++at_;
    }
    if (at_ >= text_.size()) return false;
    ++at_;
    return true;
  }
  bool number() {
    const std::size_t start = at_;
    if (peek() == '-') ++at_;
    const auto digits = [this] {
      const std::size_t from = at_;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
      return at_ > from;
    };
    if (!digits()) return false;
    if (peek() == '.' && (++at_, !digits())) return false;
    if (peek() == 'e' || peek() == 'E') {
      ++at_;
      if (peek() == '+' || peek() == '-') ++at_;
      if (!digits()) return false;
    }
    return at_ > start;
  }
  bool value(int depth) {
    skip_space();
    switch (peek()) {
      case '{': {
        ++at_;
        skip_space();
        if (peek() == '}') return ++at_, true;
        while (true) {
          skip_space();
          std::string key;
          if (!string(&key)) return false;
          if (depth == 0) top_keys_.push_back(key);
          skip_space();
          if (peek() != ':') return false;
          ++at_;
          if (!value(depth + 1)) return false;
          skip_space();
          if (peek() == '}') return ++at_, true;
          if (peek() != ',') return false;
          ++at_;
        }
      }
      case '[': {
        ++at_;
        skip_space();
        if (peek() == ']') return ++at_, true;
        while (true) {
          if (!value(depth + 1)) return false;
          skip_space();
          if (peek() == ']') return ++at_, true;
          if (peek() != ',') return false;
          ++at_;
        }
      }
      case '"': return string(nullptr);
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }

  std::string_view text_;
  std::size_t at_ = 0;
  std::vector<std::string> top_keys_;
};

}  // namespace capsule::testing
