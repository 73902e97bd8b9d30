// SPDX-License-Identifier: Apache-2.0
#include "cli_support.hpp"

#include "data_dirs.hpp"
#include "linked_checkers.hpp"

#include "capsule/date.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace capsule::cli {

std::vector<fs::path> split_paths(const std::string& text) {
  std::vector<fs::path> paths;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ':')) {
    if (!item.empty()) paths.emplace_back(item);
  }
  return paths;
}

LoadOptions load_options(const Environment& env) {
  LoadOptions options;
  if (!env.today.empty()) {
    auto today = parse_date(env.today);
    if (!today) throw UsageError{str("CAPSULE_TODAY=", clipped(env.today), " is not a date: ", today.error())};
    options.today = *today;
  }
  return options;
}

void color_styles(ColorChoice choice, Context& ctx) {
  const bool auto_color = choice == ColorChoice::Auto && !ctx.env.no_color;
  ctx.out_style.color = choice == ColorChoice::Always || (auto_color && ctx.env.terminal);
  ctx.err_style.color = choice == ColorChoice::Always || (auto_color && ctx.env.error_terminal);
}

po::variables_map parse_args(const std::vector<std::string>& args, const po::options_description& options,
                        const po::positional_options_description& positional) {
  po::variables_map vm;
  // No abbreviation guessing: `--form` must not silently mean `--format` in a CI script.
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  try {
    po::store(po::command_line_parser(args).options(options).positional(positional).style(style).run(), vm);
  } catch (const po::unknown_option& error) {
    // A mistyped flag gets the nearest one the command takes, as a mistyped command does.
    const std::string typed = error.get_option_name();
    std::vector<std::string> flags;
    for (const auto& option : options.options()) {
      if (!option->long_name().empty()) flags.push_back("--" + option->long_name());
    }
    const std::string nearest = nearest_name(typed, std::vector<std::string_view>(flags.begin(), flags.end()));
    if (nearest.empty()) throw;
    throw po::error(str(error.what(), "; did you mean `", nearest, "`?"));
  }
  po::notify(vm);
  return vm;
}

po::variables_map parse_command(Command command, const std::vector<std::string>& args, Context& ctx) {
  po::variables_map vm = parse_args(args, options_for(command), positional_for(command));
  std::optional<ColorChoice> color = ctx.color_before_command;
  if (!vm["color"].defaulted()) {
    const ColorChoice after = choice_value<ColorChoice>(vm["color"].as<std::string>(), command, "color",
                                                        {ColorChoice::Auto, ColorChoice::Always, ColorChoice::Never});
    // Given twice, the two must agree: which one wins would be a guess.
    if (color && *color != after) throw UsageError{"--color is given before and after the command with different values"};
    color = after;
  }
  color_styles(color.value_or(ColorChoice::Auto), ctx);
  return vm;
}
std::vector<Op> parse_ops(const std::string& text) {
  std::vector<Op> ops;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const auto first = item.find_first_not_of(' ');
    const auto last = item.find_last_not_of(' ');
    if (first == std::string::npos) continue;
    item = item.substr(first, last - first + 1);
    ops.push_back(parse_flag_value<Op>(item, "--ops"));
  }
  if (ops.empty()) throw UsageError{"--ops needs at least one op, e.g. --ops matmul,relu"};
  return ops;
}

std::optional<Workspace> load(const po::variables_map& vm, Context& ctx, ProfileChecks checks) {
  const DataDirs dirs = data_dirs(vm, ctx.env);
  ctx.err << data_dirs_line(dirs);
  LoadOptions options = load_options(ctx.env);
  options.check_every_profile = checks == ProfileChecks::Every;
  Workspace workspace = load_workspace(dirs.catalogs, dirs.profiles, options);
  ctx.err << render(workspace.diagnostics, ctx.err_style);
  if (has_errors(workspace.diagnostics)) {
    ctx.err << "capsule: catalogs or profiles failed to load; run `capsule lint` for the full list\n";
    return std::nullopt;
  }
  return workspace;
}

ProfilePtr find_profile(Workspace& workspace, const std::string& name_or_file, Context& ctx) {
  std::error_code error;
  const bool from_stdin = name_or_file == kStdinPath;
  const bool looks_like_file =
      from_stdin || name_or_file.ends_with(".toml") || name_or_file.find('/') != std::string::npos;
  if (looks_like_file && !from_stdin && !fs::is_regular_file(name_or_file, error)) {
    throw UsageError{str("cannot read profile file `", name_or_file, "`: ",
                         fs::exists(name_or_file, error) ? "not a regular file" : "no such file")};
  }
  if (looks_like_file) {
    const std::size_t before = workspace.diagnostics.size();
    ProfilePtr profile = add_profile_file(workspace, name_or_file, load_options(ctx.env));
    ctx.err << render(Diagnostics(workspace.diagnostics.begin() + static_cast<std::ptrdiff_t>(before),
                                  workspace.diagnostics.end()),
                      ctx.err_style);
    if (!profile) {
      throw UsageError{from_stdin ? std::string("the profile read from standard input failed to load")
                                  : str("profile file `", name_or_file, "` failed to load")};
    }
    return profile;
  }
  if (ProfilePtr profile = workspace.find_profile(name_or_file)) {
    // Loaded with ProfileChecks::Named: this is the one profile the command works under.
    const Diagnostics problems = check_profile(workspace, *profile);
    ctx.err << render(problems, ctx.err_style);
    if (has_errors(problems)) {
      throw UsageError{str("profile `", profile->name, "` failed its checks; run `capsule lint` for the full list")};
    }
    return profile;
  }
  const std::string nearest = nearest_name(name_or_file, workspace.profile_names());
  std::vector<std::string> names;
  for (const std::string_view n : workspace.profile_names()) names.emplace_back(n);
  throw UsageError{str("unknown profile `", name_or_file, "` (loaded profiles: ", join(names, ", "), ")",
                       nearest.empty() ? "" : str("; did you mean `", nearest, "`?"))};
}

ProfilePtr find_bound_profile(Workspace& workspace, const std::string& name_or_file, Context& ctx) {
  const ProfilePtr profile = find_profile(workspace, name_or_file, ctx);
  bind_known_checkers(workspace, linked_known_checkers());
  if (ProfilePtr bound = workspace.find_profile(profile->name)) return bound;
  return profile;
}

ResolvedProfile resolve(const Workspace& workspace, const ProfilePtr& profile) {
  auto resolved = resolve_profile(workspace, profile);
  if (!resolved) throw UsageError{str("profile `", profile->name, "`: ", resolved.error())};
  return std::move(*resolved);
}

bool wants_help(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

}  // namespace capsule::cli
