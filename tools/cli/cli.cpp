// SPDX-License-Identifier: Apache-2.0
// The `capsule` command line (README.md#command-line): the overview and the dispatch to one file per command.
#include "cli.hpp"

#include <iostream>

#include "commands.hpp"
#include "ledger_options.hpp"
#include "linked_handlers.hpp"

#include "capsule/escape.hpp"

namespace capsule::cli {
namespace {

constexpr std::string_view kOverview =
    "capsule: decide, before anything runs, which implementation computes each tensor op and on\n"
    "what evidence.\n\n"
    "usage: capsule <command> [options]\n\n"
    "commands:\n"
    "  lint      validate every catalog and profile; report every problem with file:line:col\n"
    "  list      list capsules, profiles or ops (capsule list capsules --op matmul)\n"
    "  plan      select one capsule per op or graph node under a profile and report it\n"
    "  check     run the acceptance gate (admissibility + evidence) under a profile\n"
    "  explain   show every candidate capsule for an op and why it was or was not chosen\n"
    "  diff      semantic trust diff between two catalog/profile trees or git revisions\n"
    "  run       run an example under a profile (capsule run mlp_regression --profile checked_cpu)\n\n"
    "Run `capsule <command> --help` for a command's options. Catalogs and profiles come from\n"
    "--catalogs/--profiles, else CAPSULE_CATALOGS/CAPSULE_PROFILES, else the catalogs/ and profiles/\n"
    "of --root DIR, else of the working directory or its nearest parent holding either, else the\n"
    "data installed next to the binary. Every command names the folders it loaded on stderr.\n\n"
    "exit status: 0 success; 1 a plan, check, gate, lint or session rejected something;\n"
    "             2 usage error or files that fail to load\n";

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const Environment& env) {
  Context ctx{out, err, env, env.fingerprint ? *env.fingerprint : linked_fingerprint()};
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    if (args.size() >= 2) return run_command({args[1], "--help"}, out, err, env);
    (args.empty() ? err : out) << kOverview;
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
    const std::string nearest = nearest_name(command, {"lint", "list", "plan", "check", "explain", "run", "diff"});
    err << "capsule: unknown command `" << text_escape(command) << "`"
        << (nearest.empty() ? std::string() : "; did you mean `" + nearest + "`?") << "\n\n"
        << kOverview;
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
