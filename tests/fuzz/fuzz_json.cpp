// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the strict JSON reader (capsule/json_reader.hpp) that reads evidence
// ledgers. Every input is parsed; the parser must never crash, hang or leak (ASan + UBSan), and:
//   - on success, the value written back with JsonWriter (write_json) parses again to an equal
//     value, and writing that value gives the same text (the round trip is a fixed point, which
//     also pins the sign of zero and the exact bits of every double);
//   - on failure, the error's line and column lie inside the text and its message is inert: valid
//     UTF-8 with no control or hidden character, whatever bytes the input held.
//   - every accepted document is also read as an evidence ledger (capsule/evidence_ledger.hpp):
//     a ledger that reads writes back to a text that reads to the same ledger text again, and a
//     refused one yields diagnostics whose rendered text is inert.
// A violation aborts, which libFuzzer reports as a crash.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "capsule/escape.hpp"
#include "capsule/evidence_ledger.hpp"
#include "capsule/json.hpp"
#include "capsule/json_reader.hpp"

namespace {

using namespace capsule;

void require(bool condition) {
  if (!condition) std::abort();
}

std::string written(const JsonValue& value) {
  JsonWriter writer;
  write_json(writer, value);
  return writer.str();
}

void require_inert(std::string_view message) {
  for (std::size_t i = 0; i < message.size();) {
    const Utf8Step step = decode_utf8(message, i);
    require(step.code_point != kInvalidUtf8);
    require(step.code_point >= 0x20 && step.code_point != 0x7F && !is_hidden_code_point(step.code_point));
    i += step.length;
  }
}

/// The error's position names a place in `text`: a line that exists and a column at most one
/// past that line's last code point.
void require_inside(std::string_view text, const JsonParseError& error) {
  require(error.line >= 1 && error.column >= 1);
  std::size_t line_start = 0;
  for (std::uint32_t line = 1; line < error.line; ++line) {
    const std::size_t newline = text.find('\n', line_start);
    require(newline != std::string_view::npos);
    line_start = newline + 1;
  }
  const std::string_view line = text.substr(line_start, text.find('\n', line_start) - line_start);
  std::size_t columns = 0;
  for (const char c : line) columns += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  require(error.column <= columns + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto result = parse_json(text);
  if (!result) {
    require_inside(text, result.error());
    require(!result.error().message.empty());
    require_inert(result.error().message);
    return 0;
  }
  if (auto ledger = parse_evidence_ledger(text, "fuzz.json")) {
    const std::string text_once = write_evidence_ledger(*ledger);
    auto reread = parse_evidence_ledger(text_once, "fuzz.json");
    require(reread.has_value());
    require(write_evidence_ledger(*reread) == text_once);
  } else {
    // Rendered as `capsule lint` prints them: every line inert.
    const std::string rendered = render(ledger.error());
    for (std::size_t start = 0; start < rendered.size();) {
      const std::size_t end = std::min(rendered.find('\n', start), rendered.size());
      require_inert(std::string_view(rendered).substr(start, end - start));
      start = end + 1;
    }
  }
  const std::string once = written(*result);
  if (once.size() > kMaxJsonBytes) return 0;  // escaping can grow a text past the size limit
  const auto again = parse_json(once);
  require(again.has_value());
  require(*again == *result);
  require(written(*again) == once);
  return 0;
}
