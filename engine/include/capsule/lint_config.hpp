// SPDX-License-Identifier: Apache-2.0
// A repository's lint configuration, `capsule-lint.toml`: which rules it allows, denies or gives
// another severity, the way ruff's and clang-tidy's configuration files do, so the choice is
// reviewed in the repository instead of repeated in every CI script and hook. The command line's
// `--allow`/`--deny` still win for one run. Format and search: docs/format.md#lint-configuration and
// docs/decisions.md ("The lint configuration file").
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "capsule/diag.hpp"
#include "capsule/lint.hpp"
#include "capsule/result.hpp"

namespace capsule {

/// The file name lint looks for.
inline constexpr std::string_view kLintConfigName = "capsule-lint.toml";

/// Parses a configuration file's text. Every problem is reported at its position; a file with any
/// error yields no overrides at all, since half a configuration would silently change verdicts.
Result<RuleOverrides, Diagnostics> parse_lint_config(std::string_view text, const std::string& path);

/// Reads and parses `path`. With `discovered`, the file was found rather than named on the command
/// line, so it is attacker-controlled tree content: a symbolic link or any other non-regular file
/// is refused (non-regular-file) instead of followed.
Result<RuleOverrides, Diagnostics> read_lint_config(const std::filesystem::path& path, bool discovered);

/// The configuration that applies to `scope`: the nearest `capsule-lint.toml` in the directory
/// above the first catalog directory or one of its ancestors, never above the top of the git work
/// tree holding the catalogs, and nowhere when that directory is itself the top; without git, the
/// directory above the catalogs only. Nothing outside the linted tree is read.
std::optional<std::filesystem::path> find_lint_config(const LintScope& scope);

/// The command line over the file: a rule the command line denies is no longer allowed or
/// re-ranked by the file, and one it allows is no longer denied or re-ranked.
RuleOverrides merge_rule_overrides(RuleOverrides from_file, const RuleOverrides& from_command_line);

}  // namespace capsule
