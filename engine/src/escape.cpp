// SPDX-License-Identifier: Apache-2.0
#include "capsule/escape.hpp"

#include <algorithm>
#include <cstdio>

namespace capsule {

Utf8Step decode_utf8(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {lead, 1};
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  char32_t value = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    value = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    value = lead & 0x0F;
    if (lead == 0xE0) low = 0xA0;   // else overlong
    if (lead == 0xED) high = 0x9F;  // else a surrogate
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    value = lead & 0x07;
    if (lead == 0xF0) low = 0x90;   // else overlong
    if (lead == 0xF4) high = 0x8F;  // else above U+10FFFF
  } else {
    return {kInvalidUtf8, 1};
  }
  if (at + length > text.size()) return {kInvalidUtf8, 1};
  for (std::size_t i = 1; i < length; ++i) {
    const unsigned char next = byte(i);
    if (i == 1 ? (next < low || next > high) : (next & 0xC0) != 0x80) return {kInvalidUtf8, 1};
    value = (value << 6) | (next & 0x3F);
  }
  return {value, length};
}

namespace {


void append_hex(std::string& out, std::string_view prefix, unsigned value, int digits, bool upper) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, upper ? "%0*X" : "%0*x", digits, value);
  out += prefix;
  out += buffer;
}

}  // namespace

bool is_hidden_code_point(char32_t c) {
  return (c >= 0x80 && c <= 0x9F) || c == 0xAD || c == 0x061C || c == 0x180E || (c >= 0x200B && c <= 0x200F) ||
         (c >= 0x202A && c <= 0x202E) || c == 0x2028 || c == 0x2029 || (c >= 0x2060 && c <= 0x206F) || c == 0xFEFF ||
         (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0xE0000 && c <= 0xE007F);
}

std::string text_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  // Where a line-start check applies: the first character that is not a space.
  const std::size_t first_visible = std::min(text.find_first_not_of(' '), text.size());
  for (std::size_t at = 0; at < text.size();) {
    const Utf8Step d = decode_utf8(text, at);
    if (d.code_point == kInvalidUtf8) {
      append_hex(out, "\\x", static_cast<unsigned char>(text[at]), 2, false);
    } else if (d.code_point == '\n') {
      out += "\\n";
    } else if (d.code_point == '\r') {
      out += "\\r";
    } else if (d.code_point == '\t') {
      out += "\\t";
    } else if (d.code_point < 0x20 || d.code_point == 0x7F) {
      append_hex(out, "\\x", static_cast<unsigned>(d.code_point), 2, false);
    } else if (is_hidden_code_point(d.code_point)) {
      append_hex(out, "<U+", static_cast<unsigned>(d.code_point), 4, true);
      out += '>';
    } else if ((d.code_point == ':' || d.code_point == '#') && at == first_visible) {
      // A workflow command is a line whose first non-space characters are `::` or `##[`.
      append_hex(out, "\\x", static_cast<unsigned>(d.code_point), 2, false);
    } else {
      out.append(text.substr(at, d.length));
    }
    at += d.length;
  }
  return out;
}

std::string markdown_escape(std::string_view text) {
  const std::string visible = text_escape(text);
  std::string out;
  out.reserve(visible.size());
  for (const char c : visible) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '@': out += "@<!-- -->"; break;
      case '\\': case '`': case '*': case '_': case '[': case ']': case '!': case '~': case '|': case '#': case '$':
        out += '\\';
        out += c;
        break;
      default: out += c;
    }
  }
  return out;
}

std::string markdown_cell(std::span<const MarkdownLine> lines) {
  std::string out;
  for (const MarkdownLine& line : lines) {
    if (&line != lines.data()) out += "<br>";
    // markdown_escape escapes `*`, so the text cannot close the emphasis early.
    out += line.strong ? "**" + markdown_escape(line.text) + "**" : markdown_escape(line.text);
  }
  return out;
}

std::string markdown_cell(std::string_view text) {
  const MarkdownLine line{std::string(text)};
  return markdown_cell(std::span<const MarkdownLine>(&line, 1));
}

std::string markdown_code(std::string_view text, MarkdownPlace place) {
  std::string content = text_escape(text);
  if (place == MarkdownPlace::TableCell) {
    std::string piped;
    for (const char c : content) {
      if (c == '|') piped += '\\';
      piped += c;
    }
    content = std::move(piped);
  }
  std::size_t longest = 0;
  for (std::size_t run = 0; const char c : content) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  // CommonMark strips one space from each end when both ends are spaces, and a span cannot start
  // or end with a backtick next to its fence; a space on each side keeps the content exact.
  if (content.empty()) return "` `";  // a span must hold something; one space shows as itself
  const bool pad = content.front() == '`' || content.back() == '`' ||
                   (content.front() == ' ' && content.back() == ' ');
  const std::string_view space = pad ? " " : "";
  return fence + std::string(space) + content + std::string(space) + fence;
}

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (std::size_t at = 0; at < text.size();) {
    const Utf8Step d = decode_utf8(text, at);
    const char32_t c = d.code_point;
    if (c == kInvalidUtf8) {
      out += "\\ufffd";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\b') {
      out += "\\b";
    } else if (c == '\f') {
      out += "\\f";
    } else if (c < 0x20 || c == 0x7F || is_hidden_code_point(c)) {
      if (c > 0xFFFF) {
        const char32_t v = c - 0x10000;
        append_hex(out, "\\u", static_cast<unsigned>(0xD800 + (v >> 10)), 4, false);
        append_hex(out, "\\u", static_cast<unsigned>(0xDC00 + (v & 0x3FF)), 4, false);
      } else {
        append_hex(out, "\\u", static_cast<unsigned>(c), 4, false);
      }
    } else {
      out.append(text.substr(at, d.length));
    }
    at += d.length;
  }
  out += '"';
  return out;
}

std::string github_escape(std::string_view text, GithubField field) {
  const std::string visible = text_escape(text);
  std::string out;
  out.reserve(visible.size());
  for (const char c : visible) {
    // text_escape leaves no CR or LF; encoding them anyway keeps this function safe on its own.
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else if (field == GithubField::Property && c == ':') out += "%3A";
    else if (field == GithubField::Property && c == ',') out += "%2C";
    else out += c;
  }
  return out;
}

std::string dot_escape(std::string_view text) {
  std::string out;
  for (const char c : text_escape(text)) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string roff_escape(std::string_view text) {
  const std::string visible = text_escape(text);
  std::string out;
  if (!visible.empty() && (visible.front() == '.' || visible.front() == '\'')) out += "\\&";
  for (const char c : visible) {
    if (c == '\\') out += "\\(rs";
    else if (c == '-') out += "\\-";
    else out += c;
  }
  return out;
}

std::string fish_escape(std::string_view text) {
  std::string out;
  for (const char c : text_escape(text)) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace capsule
