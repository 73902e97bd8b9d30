// SPDX-License-Identifier: Apache-2.0
#include "capsule/text_style.hpp"

#include <algorithm>

#include "capsule/escape.hpp"

namespace capsule {
namespace {

std::string_view sgr(Tone tone) {
  switch (tone) {
    case Tone::Error: return "\x1b[1;31m";
    case Tone::Warning: return "\x1b[1;33m";
    case Tone::Note: return "\x1b[1;36m";
    case Tone::Help: return "\x1b[1;34m";
    case Tone::Locus: return "\x1b[1m";
    case Tone::Good: return "\x1b[1;32m";
    case Tone::Bad: return "\x1b[1;31m";
  }
  return "";
}

bool has_control(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
}

}  // namespace

std::string TextStyle::paint(Tone tone, std::string_view text) const {
  std::string body = has_control(text) ? text_escape(text) : std::string(text);
  if (!color || body.empty()) return body;
  return std::string(sgr(tone)) + body + "\x1b[0m";
}

}  // namespace capsule
