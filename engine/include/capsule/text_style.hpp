// SPDX-License-Identifier: Apache-2.0
// Colour for the text formats (diagnostics and the text reports' verdicts), the way rustc and
// ruff colour theirs. The program decides whether to colour (a terminal, --color, NO_COLOR) and
// passes a TextStyle; the engine only applies it, so no renderer looks at a terminal. JSON, SARIF,
// GitHub annotations, Markdown and DOT never take a style.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace capsule {

/// The role of a piece of text, which decides its colour.
enum class Tone : std::uint8_t {
  Error,    ///< `error` severity: bold red
  Warning,  ///< `warning` severity: bold yellow
  Note,     ///< `note` severity and note lines: bold cyan
  Help,     ///< help lines: bold blue
  Locus,    ///< `file:line:col`: bold
  Good,     ///< accepted, passed, chosen: bold green
  Bad,      ///< rejected, failed: bold red
};

struct TextStyle {
  /// Write ANSI SGR colour sequences; false (the default) leaves text unchanged.
  bool color = false;

  /// `text` marked as `tone`. The only place escape sequences are written, so they come from
  /// this code alone: `text` is one of our own tokens or text already passed through
  /// text_escape, and as a guard any control byte still in it (an ESC from an input) is made
  /// visible by text_escape before the colour is put around it.
  std::string paint(Tone tone, std::string_view text) const;
};

}  // namespace capsule
