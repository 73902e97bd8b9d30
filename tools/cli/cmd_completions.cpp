// SPDX-License-Identifier: Apache-2.0
// `capsule completions bash|zsh|fish` prints a completion script; `capsule completions --list
// KIND` prints the names the scripts complete, from the data the command would load.
#include "commands.hpp"

#include <iostream>
#include <set>

#include "capsule/examples.hpp"
#include "capsule/lint.hpp"
#include "completion_scripts.hpp"
#include "man_page.hpp"
#include "data_dirs.hpp"

namespace capsule::cli {
namespace {

enum class ListKind { Profiles, Ops, Examples, Rules };

/// The names of `kind`, shell-safe ones only (is_shell_safe_name), one a line. Profiles and ops
/// come from the loaded data (the ops some loaded capsule implements), so they follow the user's
/// catalogs; what fails to load is reported on stderr and the status is 2, but the names that
/// did load are still printed.
int list_names(ListKind kind, const po::variables_map& vm, Context& ctx) {
  std::vector<std::string> names;
  bool failed = false;
  if (kind == ListKind::Examples) {
    for (const examples::ExampleInfo& e : examples::all_examples()) names.emplace_back(e.name);
  } else if (kind == ListKind::Rules) {
    for (const LintRule& rule : kLintRules) names.emplace_back(to_string(rule.code));
  } else {
    const DataDirs dirs = data_dirs(vm, ctx.env);
    ctx.err << data_dirs_line(dirs);
    LoadOptions options = load_options(ctx.env);
    options.check_every_profile = false;  // names only: no profile is planned under
    const Workspace workspace = load_workspace(dirs.catalogs, dirs.profiles, options);
    ctx.err << render(workspace.diagnostics, ctx.err_style);
    failed = has_errors(workspace.diagnostics);
    if (kind == ListKind::Profiles) {
      for (const ProfilePtr& p : workspace.profiles) names.push_back(p->name);
    } else {
      std::set<Op> implemented;
      for (const ModulePtr& m : workspace.modules) {
        for (const Capsule& c : m->capsules) implemented.insert(c.op);
      }
      for (const Op op : implemented) names.emplace_back(to_string(op));
    }
  }
  for (const std::string& name : names) {
    if (is_shell_safe_name(name)) ctx.out << name << "\n";
  }
  return failed ? kUsage : kOk;
}

}  // namespace

int cmd_completions(const std::vector<std::string>& args, Context& ctx) {
  if (wants_help(args)) {
    ctx.out << options_for(Command::Completions)
            << "\nPrints a completion script for the shell. It completes commands, flags, fixed flag values, and\n"
               "profile, op, example and lint rule names, which it asks `capsule completions --list KIND` for,\n"
               "passing the command line's --root, --catalogs and --profiles, so names follow your catalogs.\n"
               "  bash: capsule completions bash > ~/.local/share/bash-completion/completions/capsule\n"
               "  zsh:  capsule completions zsh > ~/.zfunc/_capsule   (a directory on $fpath)\n"
               "  fish: capsule completions fish > ~/.config/fish/completions/capsule.fish\n";
    return kOk;
  }
  const po::variables_map vm = parse_command(Command::Completions, args, ctx);
  if (vm.count("list") && vm.count("shell")) throw UsageError{"give a shell or --list KIND, not both"};
  if (vm.count("list")) {
    return list_names(choice_value<ListKind>(vm["list"].as<std::string>(), Command::Completions, "list",
                                             {ListKind::Profiles, ListKind::Ops, ListKind::Examples, ListKind::Rules}),
                      vm, ctx);
  }
  if (!vm.count("shell")) throw UsageError{"completions needs a shell: bash, zsh or fish"};
  ctx.out << completion_script(choice_value<Shell>(vm["shell"].as<std::string>(), Command::Completions, "shell",
                                                   {Shell::Bash, Shell::Zsh, Shell::Fish}, "completions"));
  return kOk;
}

int cmd_man(const std::vector<std::string>& args, Context& ctx) {
  if (wants_help(args)) {
    ctx.out << options_for(Command::Man) << "\nPrints the capsule(1) manual page (roff); the build installs it.\n";
    return kOk;
  }
  parse_command(Command::Man, args, ctx);
  ctx.out << man_page(CAPSULE_VERSION);
  return kOk;
}

}  // namespace capsule::cli
