// SPDX-License-Identifier: Apache-2.0
// Renderings of a diagnostic list for people and machines: GCC-style text, JSON, SARIF 2.1.0
// (code-scanning views) and GitHub workflow-command annotations.
#pragma once

#include <filesystem>
#include <string>

#include "capsule/diag.hpp"

namespace capsule {

/// `capsule lint --format` values.
enum class DiagFormat : std::uint8_t { Text, Json, Sarif, Github };

/// Renders `diagnostics`:
/// - text: `file:line:col: severity[rule]: message`, then indented `note:` and `help:` lines;
/// - JSON: `{"diagnostics": [{severity, code, file, line, column, message, notes, help}],
///   "errors", "warnings", "notes"}`;
/// - SARIF 2.1.0: one run whose driver lists the rules its diagnostics use (lint rules in
///   kLintRules order, capsule/lint.hpp, then other codes) with their default level, name,
///   descriptions, help and helpUri (capsule/lint_rule_docs.hpp), and one result per diagnostic
///   with a file (a notification of the run for one without), its ruleIndex into that list;
/// - GitHub: one `::error|warning|notice file=…,line=…,col=…,title=capsule RULE::message` command
///   per diagnostic, each part through github_escape (capsule/escape.hpp): controls shown
///   visibly, then `%`, CR, LF (and `,`/`:` in properties) encoded; notes follow as `%0Anote: …`.
/// Text goes through text_escape, JSON and SARIF through json_escape (always valid UTF-8).
/// `root` is the project root: SARIF names files under it relative to the base id `PROJECTROOT`
/// and GitHub names them relative to it (as annotations need); other files keep absolute paths.
/// `text_style` colours the text format only; the machine formats never carry colour.
std::string format_diagnostics(const Diagnostics& diagnostics, DiagFormat format, const std::string& tool_version,
                               const std::filesystem::path& root = {}, const TextStyle& text_style = {});

}  // namespace capsule
