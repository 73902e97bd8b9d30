// SPDX-License-Identifier: Apache-2.0
// What every `capsule` subcommand shares: its streams and environment, the usage-error value,
// the data-directory rule, argument parsing, and loading the workspace and a profile.
#pragma once

#include <boost/program_options.hpp>

#include <filesystem>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "capsule/assert.hpp"
#include "capsule/load.hpp"
#include "capsule/resolve.hpp"
#include "capsule/text.hpp"
#include "capsule/vocab.hpp"
#include "capsule/text_style.hpp"
#include "cli.hpp"
#include "command_table.hpp"

namespace capsule::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

struct UsageError {
  std::string message;
};

struct Context {
  std::ostream& out;
  std::ostream& err;
  const Environment& env;
  /// What every report prints next to its sources: env.fingerprint, else current_fingerprint().
  EnvironmentFingerprint fingerprint;
  /// `--color` given before the command name (`capsule --color never lint`), if it was.
  std::optional<ColorChoice> color_before_command = std::nullopt;
  /// How text written to `out` and to `err` is coloured: set by parse_command from --color, each
  /// stream's terminal and NO_COLOR (color_styles).
  TextStyle out_style = {};
  TextStyle err_style = {};
};

/// The styles of standard output and standard error under `choice`: `always` colours both (an
/// explicit flag wins over NO_COLOR), `never` neither, `auto` each stream that is a terminal
/// when NO_COLOR is unset or empty.
void color_styles(ColorChoice choice, Context& ctx);

std::vector<fs::path> split_paths(const std::string& text);
LoadOptions load_options(const Environment& env);
po::variables_map parse_args(const std::vector<std::string>& args, const po::options_description& options,
                             const po::positional_options_description& positional = {});
/// parse_args with `command`'s row of the command table, then its --color applied to ctx.
po::variables_map parse_command(Command command, const std::vector<std::string>& args, Context& ctx);
std::vector<Op> parse_ops(const std::string& text);
/// Which profiles `load` checks against the modules: every one (lint, list), or only the one a
/// command then names (`find_profile` checks it), so that planning under one profile costs
/// what loading the files costs, not a check of every profile.
enum class ProfileChecks { Every, Named };

/// Loads the workspace (data_dirs.hpp); prints the folders it reads and the diagnostics; returns nullopt (exit 2) when any file failed.
std::optional<Workspace> load(const po::variables_map& vm, Context& ctx, ProfileChecks checks = ProfileChecks::Every);
/// `--profile NAME|FILE`: a loaded profile by name, or a profile file by path.
ProfilePtr find_profile(Workspace& workspace, const std::string& name_or_file, Context& ctx);
/// find_profile (which loads a profile file's `with_catalogs` modules), then every loaded module's
/// checker evidence bound to the checkers this program links (bind_known_checkers), and the
/// profile as bound: binding replaces a profile whose modules it rebinds by a copy. plan, check,
/// explain and run resolve their profile through here, so the gate never takes a catalog's
/// checker claim at its word and all four judge alike.
ProfilePtr find_bound_profile(Workspace& workspace, const std::string& name_or_file, Context& ctx);
ResolvedProfile resolve(const Workspace& workspace, const ProfilePtr& profile);
bool wants_help(const std::vector<std::string>& args);

template <class E>
E parse_choice(const std::string& text, std::string_view flag, const std::vector<std::pair<std::string_view, E>>& choices) {
  std::vector<std::string_view> names;
  for (const auto& [name, value] : choices) {
    if (name == text) return value;
    names.push_back(name);
  }
  const std::string nearest = nearest_name(text, names);
  throw UsageError{str("invalid value `", text, "` for ", flag, " (expected one of: ",
                       join(std::vector<std::string>(names.begin(), names.end()), ", "), ")",
                       nearest.empty() ? "" : str("; did you mean `", nearest, "`?"))};
}

/// The value of the Choice flag `spec`: the table names the choices, `meanings` gives what each
/// means, in the table's order (so the names live in one place, the command table).
template <class E>
E choice_value(const std::string& text, const FlagSpec& spec, std::initializer_list<E> meanings,
               std::string_view shown_as = {}) {
  CAPSULE_ASSERT(spec.choices.size() == meanings.size(), "a command maps every choice of its flag, in table order");
  std::vector<std::pair<std::string_view, E>> choices;
  auto meaning = meanings.begin();
  for (const std::string& name : spec.choices) choices.emplace_back(name, *meaning++);
  return parse_choice<E>(text, shown_as.empty() ? str("--", spec.name) : std::string(shown_as), choices);
}

/// The value of a Choice flag of `command` (choice_value above, with the command's flag).
template <class E>
E choice_value(const std::string& text, Command command, std::string_view flag, std::initializer_list<E> meanings,
               std::string_view shown_as = {}) {
  return choice_value<E>(text, flag_spec(command, flag), meanings, shown_as);
}

/// A vocabulary value given on the command line, or a usage error naming the flag, the valid
/// spellings and the nearest one.
template <class E>
E parse_flag_value(std::string_view text, std::string_view flag) {
  auto value = parse<E>(text);
  if (!value) throw UsageError{str(flag, ": ", value.error().message, value.error().nearest.empty() ? "" : "; " + value.error().help())};
  return *value;
}

}  // namespace capsule::cli
