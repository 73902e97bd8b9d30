// SPDX-License-Identifier: Apache-2.0
// What the bash, zsh and fish completion generators (completion_bash.cpp, completion_zsh.cpp,
// completion_fish.cpp) share: the words they take from the command table and, for bash and zsh,
// the scan of the command line and the per-command `case` block, which differ between those two
// shells only in a few spellings (CaseDialect). Internal to completion_scripts.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "command_table.hpp"

namespace capsule::cli::completion {

/// `list` joined by `separator`; each word is checked to be a plain name (maybe after `-` or `--`), so
/// a table edit can never put shell syntax into a script.
std::string words(const std::vector<std::string>& list, std::string_view separator = " ");

/// The commands the completions offer (every one but the hidden ones), in the table's order.
std::vector<const CommandSpec*> visible_commands();
std::vector<std::string> command_names();
/// `--name`, and `-s` when the flag has a short name.
std::vector<std::string> spellings(const FlagSpec& flag);
/// Every spelling of `flags`, checked like `words`, joined by `separator`: `--a|-b` for a bash or
/// zsh `case` pattern, `--a -b` for a fish `case`.
std::string spelled(const std::vector<const FlagSpec*>& flags, std::string_view separator);
/// The flags offered after `-` for a command: its flags but those it takes positionally.
std::vector<std::string> offered_flags(Command command);
/// What is offered before any command: the command names, the global flags and --version.
std::vector<std::string> leading_words();
/// The global flags that take a value (--color): the command scan skips their value.
std::vector<const FlagSpec*> valued_global_flags();
/// The data flags (--root, --catalogs, --profiles): the scripts pass them and their values to
/// `capsule completions --list`, so names follow the data the command line names.
std::vector<const FlagSpec*> lookup_flags();

/// The one-line description a completion shows beside a command or flag, from its help text in
/// the command table: the first clause (up to the first ` (`, `; `, `. ` or `, e.g. `, or a `: `
/// after three words or more; a final `.` dropped), and when that is longer than
/// kDescriptionWidth bytes, cut at the last space that leaves room for `...` (a first word longer
/// than that is kept whole, and the rest cut after it). Unescaped: each shell's script escapes it.
inline constexpr std::size_t kDescriptionWidth = 60;
std::string short_description(std::string_view help);

/// What `capsule completions --list` prints for a kind of value; empty for kinds without loaded
/// names.
std::string_view list_kind(ValueKind kind);
/// Whether a value is a comma-separated list (names complete after the last comma).
bool is_list(ValueKind kind);
/// The flag `command` takes without its name, if any.
const FlagSpec* positional_flag(Command command);

/// How bash and zsh spell the parts of `_capsule` that command_dispatch writes.
struct CaseDialect {
  /// The statement completing a value of a flag (`cur` holds the word being completed).
  std::string (*value)(const FlagSpec& flag);
  /// The statement offering fixed words.
  std::string (*offer)(const std::vector<std::string>& words);
  std::string_view words;  ///< the array of the command line's words: COMP_WORDS, words
  std::string_view index;  ///< the index of the word being completed: COMP_CWORD, CURRENT
  int first = 1;           ///< the index of the first word after `capsule`
};

/// The body of `_capsule` after its locals: the scan that finds the command and collects the data
/// flags (`data`) for the name lookups, then one `case` arm per command completing its flags,
/// their values and its positional value.
std::string command_dispatch(const CaseDialect& dialect);

std::string bash_script();
std::string zsh_script();
std::string fish_script();

}  // namespace capsule::cli::completion
