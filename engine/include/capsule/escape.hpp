// SPDX-License-Identifier: Apache-2.0
// One escaping function per output format. Every renderer passes every input-derived field
// (names, paths, summaries, reasons, owners, revision labels, git output) through the function of
// its format, so no catalog, profile, graph, waiver or file name can forge a report line, rewrite
// a terminal, hide text from a reviewer, inject markup or make output invalid. The rules and their
// reasons are in docs/security-notes/escaping.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace capsule {

/// Plain text for a terminal or a log (diagnostics, text reports, the diff's text). Made visible:
/// - `\n`, `\r`, `\t` for those three, `\xHH` (lower-case hex) for any other C0 control and DEL;
/// - `<U+XXXX>` for C1 controls, bidi controls, zero-width and other invisible characters, line
///   and paragraph separators and Unicode tag characters (see `is_hidden_code_point`);
/// - `\xHH` for each byte that is not part of well-formed UTF-8 (overlong forms, encoded
///   surrogates, truncated sequences, bytes 0xC0, 0xC1, 0xF5-0xFF, stray continuation bytes).
/// A `:` or `#` that would be the first non-space character of the field is written `\x3a` /
/// `\x23`, so a field can never begin a GitHub workflow command (`::error::`, `##[error]`) even
/// when a renderer prints it at the start of a line. Everything else, `\` included, is unchanged.
std::string text_escape(std::string_view text);

/// Markdown inline text (outside code spans; safe in a table cell): `text_escape`, then `<`, `>`,
/// `&` as entities, the punctuation that starts inline markup mid-line (`\ ` * _ [ ] ! ~ | # $`)
/// backslash-escaped, and `@` followed by an empty HTML comment (`@<!-- -->`) so GitHub makes no
/// mention of it (GitHub honours neither `\@` nor `&#64;`). Fields never start a markdown line,
/// so line-start syntax (`-`, `+`, `1.`, `>`, `=`) needs no escape.
std::string markdown_escape(std::string_view text);

/// One line of a Markdown table cell: input text, set plain or strong (bold).
struct MarkdownLine {
  std::string text;
  bool strong = false;
};

/// A Markdown table cell (the one cell function of every Markdown renderer: plan, graph plan,
/// trust diff, environment): each line `markdown_escape`d, so no input can open an HTML tag, split
/// the cell at a `|`, end the row with a newline or start markup, a strong line wrapped in `**`,
/// and the lines joined by `<br>`, the only HTML the cell itself adds. No lines give an empty cell.
std::string markdown_cell(std::span<const MarkdownLine> lines);
/// A cell of one plain line.
std::string markdown_cell(std::string_view text);

/// Where a markdown code span goes: GitHub splits table cells at `|` even inside a code span.
enum class MarkdownPlace : std::uint8_t { Inline, TableCell };

/// `text` as one markdown code span: `text_escape`d content between backtick fences one longer
/// than the longest backtick run inside, padded with a space when the content starts or ends
/// with a backtick (or starts and ends with a space), so the span cannot be closed early; empty
/// content is a span of one space. In a table cell each `|` is written `\|`, which GitHub turns
/// back into `|` inside the span (a `|` right after a backslash never splits a GitHub cell).
std::string markdown_code(std::string_view text, MarkdownPlace place = MarkdownPlace::TableCell);

/// `text` as a quoted JSON string that is always valid UTF-8: `"` and `\` escaped, `\n`, `\r`,
/// `\t`, `\b`, `\f` as such, every other control (C0, DEL, C1) and every hidden code point that
/// `text_escape` makes visible as `\uXXXX` (surrogate pairs above U+FFFF), and each byte that is
/// not well-formed UTF-8 replaced by U+FFFD (written `\ufffd`). The string means the same to a
/// JSON reader; a consumer that echoes it unescaped still gets no raw control or bidi character.
std::string json_escape(std::string_view text);

/// Which part of a GitHub workflow command a text fills.
enum class GithubField : std::uint8_t { Property, Data };

/// `text` for a GitHub workflow command (`::error file=…::data`): `text_escape`, then `%`, CR and
/// LF percent-encoded, and in a property also `:` and `,`.
std::string github_escape(std::string_view text, GithubField field);

/// `text` for the inside of a Graphviz DOT double-quoted string: `text_escape`, then `"` and `\`
/// backslash-escaped (so a visible `\n` stays two characters instead of breaking the label).
std::string dot_escape(std::string_view text);

/// `text` for one line of a roff (man page) source: `text_escape` (so it is one line with no
/// control character), then `\` written `\(rs` and `-` written `\-` (a minus, so flags copy
/// and search as typed), and `\&` before a leading `.` or `'` so it never reads as a request.
std::string roff_escape(std::string_view text);

/// `text` for the inside of a fish single-quoted string (a completion's `-d '…'`): `text_escape`
/// (so it is one line with no control character), then `\` and `'` backslash-escaped, the only
/// two escapes fish reads between single quotes, so no text can close the string.
std::string fish_escape(std::string_view text);

/// One step of a strict UTF-8 decoder: the code point at `text[at]` and its length in bytes, or
/// kInvalidUtf8 with length 1 when the byte there does not start a well-formed sequence (Unicode
/// table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF, no truncation).
inline constexpr char32_t kInvalidUtf8 = 0xFFFFFFFF;
struct Utf8Step {
  char32_t code_point;
  std::size_t length;
};
Utf8Step decode_utf8(std::string_view text, std::size_t at);

/// True for the code points `text_escape` and `json_escape` make visible besides C0/DEL: C1
/// controls U+0080-U+009F, U+00AD, U+061C, U+180E, U+200B-U+200F, U+202A-U+202E, U+2028,
/// U+2029, U+2060-U+206F (word joiner, invisible operators, bidi isolates, deprecated format
/// characters), U+FEFF, U+FFF9-U+FFFB and the tag characters U+E0000-U+E007F.
bool is_hidden_code_point(char32_t code_point);

}  // namespace capsule
