// SPDX-License-Identifier: Apache-2.0
// A repository's lint configuration, `capsule-lint.toml`: which rules it allows, denies or gives
// another severity, the way ruff's and clang-tidy's configuration files do, so the choice is
// reviewed in the repository instead of repeated in every CI script and hook. The command line's
// `--allow`/`--deny` still win for one run. Format and search: docs/format.md#lint-configuration and
// docs/decisions.md ("The lint configuration file").
#pragma once

#include <cstdint>
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
/// line, so it is tree content any writer of its directory could have put there: it is opened
/// without following a link, and refused unless it is a regular file (non-regular-file) that you
/// or root own, in a directory no other user can write (io-error; see trust_problem). A file
/// named on the command line is the user's own choice and is read as named.
Result<RuleOverrides, Diagnostics> read_lint_config(const std::filesystem::path& path, bool discovered);

/// The configuration that applies to `scope`: the nearest `capsule-lint.toml` in the directory
/// above the first catalog directory or one of its ancestors, never above `work_tree_top` (the
/// top of the git work tree holding the catalogs, catalogs_work_tree_top), and nowhere when the
/// catalogs directory is itself the top; outside any repository, the directory above the
/// catalogs only. When the catalogs lie in a repository (a `.git` at or above them) whose top git
/// could not name (no git, safe.directory, a broken `.git`), nothing is searched: an io-error at
/// the catalogs says so, since the directory above them may lie outside the work tree.
Result<std::optional<std::filesystem::path>, Diagnostics> find_lint_config(
    const LintScope& scope, const std::optional<std::filesystem::path>& work_tree_top);

namespace detail {
/// Who owns a file system entry, and its permission bits (st_uid, st_mode).
struct Ownership {
  std::uint32_t owner = 0;
  std::uint32_t mode = 0;
};
/// Why a discovered configuration with these owners is not trusted, or "" when it is: the file
/// must belong to `euid` or to root (and then be writable by its owner only), and its directory
/// must belong to `euid` or be writable by its owner only (a sticky bit does not exempt it). So
/// a file another user planted, in /tmp or a shared directory, is never read.
std::string trust_problem(const Ownership& file, const Ownership& directory, std::uint32_t euid);
}  // namespace detail

/// The command line over the file: a rule the command line denies is no longer allowed or
/// re-ranked by the file, and one it allows is no longer denied or re-ranked.
RuleOverrides merge_rule_overrides(RuleOverrides from_file, const RuleOverrides& from_command_line);

}  // namespace capsule
