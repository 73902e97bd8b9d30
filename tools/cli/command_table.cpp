// SPDX-License-Identifier: Apache-2.0
#include "command_table.hpp"

#include <algorithm>
#include <cctype>

#include "capsule/assert.hpp"
#include "capsule/policy.hpp"
#include "capsule/text.hpp"
#include "capsule/vocab.hpp"

namespace capsule::cli {
namespace po = boost::program_options;

namespace {

FlagSpec flag(std::string_view name, ValueKind kind, std::string value_name, std::string help) {
  FlagSpec spec;
  spec.name = name;
  spec.kind = kind;
  spec.value_name = std::move(value_name);
  spec.help = std::move(help);
  return spec;
}

FlagSpec choice(std::string_view name, std::vector<std::string> choices, std::string_view default_value,
                std::string help = {}) {
  std::string value_name(name);
  for (char& c : value_name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  FlagSpec spec = flag(name, ValueKind::Choice, value_name, help.empty() ? join(choices, " | ") : std::move(help));
  spec.choices = std::move(choices);
  spec.default_value = default_value;
  return spec;
}

FlagSpec repeatable(FlagSpec spec) {
  spec.repeatable = true;
  return spec;
}

FlagSpec positional(FlagSpec spec, int count) {
  spec.positional = count;
  return spec;
}

FlagSpec help_flag() {
  FlagSpec spec = flag("help", ValueKind::None, "", "show this help");
  spec.short_name = 'h';
  return spec;
}

FlagSpec profile_flag() {
  return flag("profile", ValueKind::Profile, "NAME|FILE", "profile name, or a profile file path (- reads standard input)");
}

std::vector<std::string> device_names() {
  std::vector<std::string> names;
  for (const Device device : all_values<Device>()) names.emplace_back(to_string(device));
  return names;
}

std::vector<std::string> assurance_names() {
  return std::vector<std::string>(kAssurancePresets.begin(), kAssurancePresets.end());
}

FlagSpec ledger_flag() {
  return repeatable(flag("ledger", ValueKind::File, "FILE",
                         "an evidence ledger the tests wrote (build/ledger.json); repeatable, merged in order"));
}

/// --profile, --ops, --graph: what plan and check plan.
std::vector<FlagSpec> plan_flags() {
  return {profile_flag(), flag("ops", ValueKind::OpList, "OP,...", "comma-separated ops, e.g. matmul,relu"),
          flag("graph", ValueKind::File, "FILE", "an IR graph file (*.graph.toml; - reads standard input)")};
}

std::vector<CommandSpec> build_table() {
  std::vector<CommandSpec> table;
  table.push_back(CommandSpec{
      Command::Lint, "lint", "validate every catalog and profile; report every problem with file:line:col",
      "capsule lint [FILE]... [--root DIR] [--catalogs DIR]... [--profiles DIR]... [--format text|json|sarif|github]\n"
      "             [--deny RULE|warnings]... [--allow RULE]... [--test-suites FILE] [--source-root DIR]\n"
      "             [--ledger FILE]... [--config FILE | --no-config]",
      {choice("format", {"text", "json", "sarif", "github"}, "text"),
       [] {
         FlagSpec deny = repeatable(flag("deny", ValueKind::RuleList, "RULE", "make RULE an error (`warnings`: every warning)"));
         deny.choices = {"warnings"};
         return deny;
       }(),
       repeatable(flag("allow", ValueKind::RuleList, "RULE", "do not report RULE")),
       flag("test-suites", ValueKind::File, "FILE",
            "this build's evidence manifest: its test suites and what each covers (default: the one the build wrote)"),
       flag("source-root", ValueKind::Dir, "DIR",
            "directory provenance paths are relative to (default: above each catalog directory)"),
       flag("config", ValueKind::File, "FILE",
            "the lint configuration (default: the nearest capsule-lint.toml above the catalogs, within the git work tree)"),
       flag("no-config", ValueKind::None, "", "ignore every lint configuration file"),
       positional(repeatable(flag("file", ValueKind::File, "FILE", "report only the findings in these files (positional)")), -1),
       ledger_flag()},
      true, false});
  table.push_back(CommandSpec{
      Command::List, "list", "list capsules, profiles or ops (capsule list capsules --op matmul)",
      "capsule list capsules|profiles|ops [--op OP] [--device D] [--format text|json]",
      {positional(choice("what", {"capsules", "profiles", "ops"}, "", "capsules | profiles | ops"), 1),
       flag("op", ValueKind::Op, "OP", "only capsules of this op"),
       choice("device", device_names(), "", "only capsules or profiles for this device"),
       choice("format", {"text", "json"}, "text")},
      true, false});
  {
    CommandSpec plan{Command::Plan, "plan", "select one capsule per op or graph node under a profile and report it",
                     "capsule plan --profile NAME|FILE (--ops a,b,c | --graph FILE) [--format text|json|markdown|dot]",
                     plan_flags(), true, false};
    plan.flags.push_back(choice("format", {"text", "json", "markdown", "dot"}, "text"));
    table.push_back(std::move(plan));
  }
  {
    CommandSpec check{Command::Check, "check", "run the acceptance gate (admissibility + evidence) under a profile",
                      "capsule check --profile NAME [--ops a,b,c | --graph FILE] "
                      "[--assurance checked|external|strict|checked-runtime|allow-trusted-runtime] [--ledger FILE]...",
                      plan_flags(), true, false};
    check.flags.push_back(choice("assurance", assurance_names(), "", "gate under this assurance instead of the profile's"));
    check.flags.push_back(ledger_flag());
    table.push_back(std::move(check));
  }
  table.push_back(CommandSpec{
      Command::Explain, "explain", "show every candidate capsule for an op and why it was or was not chosen",
      "capsule explain --profile NAME --op OP [--format text|json]",
      {profile_flag(), flag("op", ValueKind::Op, "OP", "the op to explain"), choice("format", {"text", "json"}, "text")},
      true, false});
  table.push_back(CommandSpec{
      Command::Diff, "diff", "semantic trust diff between two catalog/profile trees or git revisions",
      "capsule diff BASE HEAD [--git] [--repo DIR] [--format text|markdown|json] [--accept FILE]",
      {positional(flag("base", ValueKind::Dir, "BASE", "the tree before: a directory holding catalogs/ and profiles/"), 1),
       positional(flag("head", ValueKind::Dir, "HEAD", "the tree after"), 1),
       flag("git", ValueKind::None, "",
            "BASE and HEAD are git revisions of the repository (read blob by blob with git, no shell, no checkout)"),
       [] {
         FlagSpec repo = flag("repo", ValueKind::Dir, "DIR",
                              "with --git: the directory in the repository that holds catalogs/ and profiles/");
         repo.default_value = ".";
         return repo;
       }(),
       choice("format", {"text", "markdown", "json"}, "text"),
       flag("accept", ValueKind::File, "FILE",
            "a reviewed waivers file (TOML; - reads standard input) whose changes do not fail the run")},
      false, false});
  table.push_back(CommandSpec{
      Command::Run, "run", "run an example under a profile (capsule run mlp_regression --profile checked_cpu)",
      "capsule run EXAMPLE --profile NAME|FILE [--dump-graph FILE] [--repro-dir DIR] [--show-backend] [--format text|json]",
      {positional(flag("example", ValueKind::Example, "EXAMPLE", "the example to run (see below)"), 1), profile_flag(),
       flag("dump-graph", ValueKind::File, "FILE", "write the model's lowered IR graph (*.graph.toml) to FILE"),
       flag("repro-dir", ValueKind::Dir, "DIR",
            "where a failed recheck writes its reproduction bundle (default: the system temp directory)"),
       flag("show-backend", ValueKind::None, "", "print the capsule bound to each op as the session selects it"),
       choice("format", {"text", "json"}, "text")},
      true, false});
  table.push_back(CommandSpec{
      Command::Completions, "completions", "print a bash, zsh or fish completion script (capsule completions bash)",
      "capsule completions bash|zsh|fish",
      {positional(choice("shell", {"bash", "zsh", "fish"}, "", "bash | zsh | fish"), 1),
       choice("list", {"profiles", "ops", "examples", "rules"}, "",
              "print the loaded names of one kind, one a line (what the completion scripts call)")},
      true, false});
  table.push_back(CommandSpec{Command::Man, "man", "print the capsule(1) manual page (roff)", "capsule man", {}, false,
                              true});
  return table;
}

}  // namespace

const std::vector<CommandSpec>& command_table() {
  static const std::vector<CommandSpec> table = build_table();
  return table;
}

const CommandSpec& command_spec(Command command) {
  for (const CommandSpec& spec : command_table()) {
    if (spec.command == command) return spec;
  }
  CAPSULE_ASSERT(false, "every command has a row in the command table");
  std::abort();
}

const CommandSpec* find_command(std::string_view name) {
  for (const CommandSpec& spec : command_table()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const std::vector<FlagSpec>& data_flags() {
  static const std::vector<FlagSpec> flags{
      flag("root", ValueKind::Dir, "DIR",
           "the project whose catalogs/ and profiles/ to load (default: the working "
           "directory or its nearest parent holding either, else the installed data)"),
      repeatable(flag("catalogs", ValueKind::Dir, "DIR", "catalog directory (repeatable; overrides --root)")),
      repeatable(flag("profiles", ValueKind::Dir, "DIR", "profile directory (repeatable; overrides --root)"))};
  return flags;
}

const std::vector<FlagSpec>& global_flags() {
  static const std::vector<FlagSpec> flags{
      [] {
        FlagSpec color = choice("color", {"auto", "always", "never"}, "auto",
                                "colour the text output: auto (when the stream is a terminal and NO_COLOR is unset), "
                                "always, never");
        color.value_name = "WHEN";
        return color;
      }(),
      help_flag()};
  return flags;
}

const FlagSpec& global_flag(std::string_view name) {
  for (const FlagSpec& f : global_flags()) {
    if (f.name == name) return f;
  }
  CAPSULE_ASSERT(false, "only flags of the global table are read as global");
  std::abort();
}

const FlagSpec& version_flag() {
  static const FlagSpec version = [] {
    FlagSpec spec = flag("version", ValueKind::None, "", "print the version (before any command)");
    spec.short_name = 'V';
    return spec;
  }();
  return version;
}

std::vector<const FlagSpec*> all_flags(Command command) {
  const CommandSpec& spec = command_spec(command);
  std::vector<const FlagSpec*> flags;
  for (const FlagSpec& f : spec.flags) flags.push_back(&f);
  if (spec.data_flags) {
    for (const FlagSpec& f : data_flags()) flags.push_back(&f);
  }
  for (const FlagSpec& f : global_flags()) flags.push_back(&f);
  return flags;
}

const FlagSpec& flag_spec(Command command, std::string_view name) {
  for (const FlagSpec* f : all_flags(command)) {
    if (f->name == name) return *f;
  }
  CAPSULE_ASSERT(false, "a command reads only flags of its row in the command table");
  std::abort();
}

namespace {

void add_flag(po::options_description& options, const FlagSpec& spec) {
  const std::string names = spec.short_name != 0 ? str(spec.name, ",", spec.short_name) : std::string(spec.name);
  const std::string& value_name = spec.value_name;
  if (spec.kind == ValueKind::None) {
    options.add_options()(names.c_str(), po::bool_switch(), spec.help.c_str());
  } else if (spec.repeatable) {
    options.add_options()(names.c_str(), po::value<std::vector<std::string>>()->composing()->value_name(value_name),
                          spec.help.c_str());
  } else if (!spec.default_value.empty()) {
    options.add_options()(names.c_str(), po::value<std::string>()->default_value(std::string(spec.default_value))
                                             ->value_name(value_name),
                          spec.help.c_str());
  } else {
    options.add_options()(names.c_str(), po::value<std::string>()->value_name(value_name), spec.help.c_str());
  }
}

}  // namespace

po::options_description options_for(Command command) {
  const CommandSpec& spec = command_spec(command);
  po::options_description options(spec.usage);
  for (const FlagSpec& f : spec.flags) add_flag(options, f);
  for (const FlagSpec& f : global_flags()) add_flag(options, f);
  if (spec.data_flags) {
    po::options_description data("data");
    for (const FlagSpec& f : data_flags()) add_flag(data, f);
    options.add(data);
  }
  return options;
}

po::positional_options_description positional_for(Command command) {
  po::positional_options_description positional;
  for (const FlagSpec& f : command_spec(command).flags) {
    if (f.positional != 0) positional.add(std::string(f.name).c_str(), f.positional);
  }
  return positional;
}

}  // namespace capsule::cli
