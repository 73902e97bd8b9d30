// SPDX-License-Identifier: Apache-2.0
// The `capsule` command line (README.md#command-line): the overview and the dispatch to one file per command.
#include "cli.hpp"

#include <algorithm>
#include <iostream>
#include <optional>

#include "command_table.hpp"
#include "commands.hpp"
#include "ledger_options.hpp"
#include "linked_handlers.hpp"

#include "capsule/escape.hpp"

namespace capsule::cli {
namespace {

constexpr std::string_view kOverviewHead =
    "capsule: decide, before anything runs, which implementation computes each tensor op and on\n"
    "what evidence.\n\n"
    "usage: capsule <command> [options]\n\n"
    "commands:\n";

/// `text` with every line but the first indented by `indent` spaces.
std::string indented(std::string_view text, std::size_t indent) {
  std::string out;
  for (const char c : text) {
    out += c;
    if (c == '\n') out.append(indent, ' ');
  }
  return out;
}

/// The overview: its commands section comes from the command table, the data sources and exit
/// status from the texts the man page shares.
std::string overview() {
  std::string out(kOverviewHead);
  for (const CommandSpec& spec : command_table()) {
    if (spec.hidden) continue;
    std::string name(spec.name);
    name.resize(std::max<std::size_t>(name.size() + 1, 12), ' ');
    out += str("  ", name, spec.summary, "\n");
  }
  const FlagSpec& color = global_flag("color");
  return str(out, "\nRun `capsule <command> --help` for a command's options.\n", kDataSourcesText, "\n\n--color ",
             join(color.choices, "|"), ", before or after the command, colours the text output (auto: on a\n",
             "terminal, unless NO_COLOR is set).\n\n", "exit status: ", indented(kExitStatusText, 13), "\n");
}

/// `--color WHEN` or `--color=WHEN` before the command name; removes it from `args`.
std::optional<ColorChoice> leading_color(std::vector<std::string>& args) {
  const FlagSpec& spec = global_flag("color");
  const std::string flag = str("--", spec.name);
  std::optional<ColorChoice> color;
  while (!args.empty() && (args[0] == flag || args[0].starts_with(flag + "="))) {
    std::string value;
    if (args[0] == flag) {
      if (args.size() < 2) throw UsageError{str(flag, " needs a value: ", join(spec.choices, ", "))};
      value = args[1];
      args.erase(args.begin(), args.begin() + 2);
    } else {
      value = args[0].substr(flag.size() + 1);
      args.erase(args.begin());
    }
    const ColorChoice choice =
        choice_value<ColorChoice>(value, spec, {ColorChoice::Auto, ColorChoice::Always, ColorChoice::Never});
    if (color && *color != choice) throw UsageError{str(flag, " is given twice with different values")};
    color = choice;
  }
  return color;
}

int run_command(std::vector<std::string> args, std::ostream& out, std::ostream& err, const Environment& env) {
  Context ctx{out, err, env, env.fingerprint ? *env.fingerprint : linked_fingerprint(), std::nullopt, TextStyle{},
              TextStyle{}};
  try {
    ctx.color_before_command = leading_color(args);
  } catch (const UsageError& error) {
    err << "capsule: " << text_escape(error.message) << "\n";
    return kUsage;
  }
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    if (args.size() >= 2) return run_command({args[1], "--help"}, out, err, env);
    (args.empty() ? err : out) << overview();
    return args.empty() ? kUsage : kOk;
  }
  if (args[0] == "--version" || args[0] == "-V" || args[0] == "version") {
    out << "capsule " << CAPSULE_VERSION << " (catalog schema 1, " << kOpCount << " ops)\n";
    return kOk;
  }
  const std::string command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (command == "lint") return cmd_lint(rest, ctx);
    if (command == "list") return cmd_list(rest, ctx);
    if (command == "plan") return cmd_plan(rest, ctx);
    if (command == "check") return cmd_check(rest, ctx);
    if (command == "explain") return cmd_explain(rest, ctx);
    if (command == "run") return cmd_run(rest, ctx);
    if (command == "diff") return cmd_diff(rest, ctx);
    if (command == "completions") return cmd_completions(rest, ctx);
    if (command == "man") return cmd_man(rest, ctx);
    std::vector<std::string_view> names;
    for (const CommandSpec& spec : command_table()) {
      if (!spec.hidden) names.push_back(spec.name);
    }
    const std::string nearest = nearest_name(command, names);
    err << "capsule: unknown command `" << text_escape(command) << "`"
        << (nearest.empty() ? std::string() : "; did you mean `" + nearest + "`?") << "\n\n"
        << overview();
    return kUsage;
  } catch (const LedgerLoadFailed&) {
    return kUsage;  // its diagnostics are already printed
  } catch (const UsageError& error) {
    err << "capsule " << text_escape(command) << ": " << text_escape(error.message) << "\n";
    return kUsage;
  } catch (const po::error& error) {
    err << "capsule " << text_escape(command) << ": " << text_escape(error.what()) << " (see `capsule "
        << text_escape(command) << " --help`)\n";
    return kUsage;
  } catch (const std::exception& error) {
    // Nothing expected reaches here (the engine reports problems as values); if something does,
    // say so plainly instead of aborting.
    err << "capsule " << text_escape(command) << ": unexpected failure: " << text_escape(error.what()) << "\n";
    return kUsage;
  }
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const Environment& env) {
  const int status = run_command(args, out, err, env);
  // Output that could not be written is never a success (main() also checks the C stream).
  if (!out.flush()) {
    err << "capsule: cannot write the output; the report is incomplete\n";
    return kUsage;
  }
  return status;
}

}  // namespace capsule::cli
