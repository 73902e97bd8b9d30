// SPDX-License-Identifier: Apache-2.0
// The one table of `capsule`'s commands and their flags. Each command parses its arguments with
// options_for(command); the overview, the shell completions and the man page are generated from
// the same table, so no second list of flags can drift from what the commands accept.
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace capsule::cli {

enum class Command : std::uint8_t { Lint, List, Plan, Check, Explain, Diff, Run, Completions, Man };

/// What a flag's value is: how it parses, and what a shell completes for it.
enum class ValueKind : std::uint8_t {
  None,      ///< a switch, no value
  Text,      ///< free text, nothing to complete
  File,      ///< a file path
  Dir,       ///< a directory path
  Choice,    ///< one of FlagSpec::choices
  Profile,   ///< a loaded profile's name, or a profile file
  Op,        ///< one op name
  OpList,    ///< comma-separated op names
  Example,   ///< an example `capsule run` knows
  RuleList,  ///< comma-separated lint rule ids (and `warnings` for --deny)
};

struct FlagSpec {
  std::string_view name;  ///< the long name, without `--`
  char short_name = 0;    ///< `-h` for help; 0 for none
  ValueKind kind = ValueKind::None;
  std::string value_name;  ///< `FILE`, `NAME|FILE`; shown in --help and the man page
  std::string help;
  /// Choice: the values, in the order the command maps them. Other kinds: fixed words taken
  /// beside the loaded names (`warnings` for --deny), which completions offer too.
  std::vector<std::string> choices;
  std::string_view default_value;    ///< empty: none
  bool repeatable = false;
  /// Also taken without its flag, in this many places (-1: any number): `capsule run EXAMPLE`.
  int positional = 0;
};

struct CommandSpec {
  Command command;
  std::string_view name;
  std::string_view summary;  ///< one line for the overview and the man page
  std::string usage;         ///< the synopsis, also the caption of `--help`
  std::vector<FlagSpec> flags;  ///< the command's own flags, in --help order
  bool data_flags = false;      ///< also --root, --catalogs, --profiles
  bool hidden = false;          ///< left out of the overview and the completions (the man generator)
};

/// Every command, in the overview's order.
const std::vector<CommandSpec>& command_table();
const CommandSpec& command_spec(Command command);
/// The command named `name`, visible or hidden; nullptr when there is none.
const CommandSpec* find_command(std::string_view name);

/// --root, --catalogs, --profiles: where a command's catalogs and profiles come from.
const std::vector<FlagSpec>& data_flags();
/// Flags every command takes, before or after its name: --color (and --help after it).
const std::vector<FlagSpec>& global_flags();
/// The global flag `--name`; a programming error (abort) when there is none.
const FlagSpec& global_flag(std::string_view name);
/// --version (-V): taken only in place of a command.
const FlagSpec& version_flag();

/// Every flag `command` accepts: its own, then the data flags if it loads data, then the global
/// ones.
std::vector<const FlagSpec*> all_flags(Command command);
/// The flag `--name` of `command`; a programming error (abort) when there is none.
const FlagSpec& flag_spec(Command command, std::string_view name);

/// The parser of `command`'s flags; its caption is the usage line, so `--help` prints it.
boost::program_options::options_description options_for(Command command);
/// The flags `command` also takes without their name, in order.
boost::program_options::positional_options_description positional_for(Command command);

/// Where catalogs and profiles come from, and what the exit status means: one text each for the
/// overview and the man page (which reflows the line breaks). README.md says the same in prose.
inline constexpr std::string_view kDataSourcesText =
    "Catalogs and profiles come from --catalogs/--profiles, else CAPSULE_CATALOGS/CAPSULE_PROFILES,\n"
    "else the catalogs/ and profiles/ of --root DIR, else of the working directory or its nearest\n"
    "parent holding either, else the data installed next to the binary. Every command names the\n"
    "folders it loaded on standard error.";
inline constexpr std::string_view kExitStatusText =
    "0 success; 1 a plan, check, gate, lint or session rejected something;\n"
    "2 usage error or files that fail to load";

/// `--color` values.
enum class ColorChoice : std::uint8_t { Auto, Always, Never };

}  // namespace capsule::cli
