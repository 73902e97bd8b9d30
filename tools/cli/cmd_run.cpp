// SPDX-License-Identifier: Apache-2.0
// `capsule run`: an example under a profile, through an eager session.
#include "commands.hpp"

#include <algorithm>
#include <optional>

#include "capsule/examples.hpp"
#include "capsule/json.hpp"
#include "linked_checkers.hpp"
#include "linked_handlers.hpp"

namespace capsule::cli {
namespace {

/// Every file this run read: catalogs, profiles (loaded or given by path) and prepended catalogs.
std::vector<fs::path> files_read(const Workspace& workspace) {
  std::vector<fs::path> files;
  for (const ModulePtr& m : workspace.modules) files.emplace_back(m->source.path);
  for (const ProfilePtr& p : workspace.profiles) {
    files.emplace_back(p->source.path);
    for (const ModulePtr& m : p->with_modules) files.emplace_back(m->source.path);
  }
  return files;
}

/// `--dump-graph` writes an output; it must never replace an input of the same run, whatever
/// path (relative, `..`, a symlink or a hard link) names it.
void refuse_to_overwrite_inputs(const fs::path& target, const Workspace& workspace) {
  std::error_code error;
  if (!fs::exists(target, error)) return;
  for (const fs::path& input : files_read(workspace)) {
    if (input.empty()) continue;
    std::error_code same_error;
    if (fs::equivalent(target, input, same_error)) {
      throw UsageError{str("--dump-graph: `", target.string(), "` is `", input.string(),
                           "`, a file this run read; refusing to overwrite an input (choose another path)")};
    }
  }
}

}  // namespace

int cmd_run(const std::vector<std::string>& args, Context& ctx) {
  std::vector<std::string_view> names;
  for (const examples::ExampleInfo& e : examples::all_examples()) names.push_back(e.name);
  if (wants_help(args)) {
    ctx.out << options_for(Command::Run) << "\nOpens an eager session on the profile, runs the example through it (every op on the\n"
                          "capsule the profile selects, nothing falling back), then lists the capsules used.\n"
                          "Exit 1 when the session, gate or a handler binding rejects.\n\nexamples:\n";
    for (const examples::ExampleInfo& e : examples::all_examples()) {
      ctx.out << "  " << e.name << std::string(18 - std::min<std::size_t>(17, e.name.size()), ' ') << e.summary << "\n";
    }
    return kOk;
  }
  const po::variables_map vm = parse_command(Command::Run, args, ctx);
  std::vector<std::string> listed(names.begin(), names.end());
  if (!vm.count("example")) throw UsageError{str("run needs an example: ", join(listed, ", "))};
  const std::string name = vm["example"].as<std::string>();
  const examples::ExampleInfo* example = examples::find_example(name);
  if (example == nullptr) {
    const std::string nearest = nearest_name(name, names);
    throw UsageError{str("unknown example `", name, "` (examples: ", join(listed, ", "), ")",
                         nearest.empty() ? "" : str("; did you mean `", nearest, "`?"))};
  }
  if (!vm.count("profile")) throw UsageError{"--profile NAME|FILE is required (for example --profile checked_cpu)"};
  examples::ExampleOptions run_options;
  run_options.json = choice_value<bool>(vm["format"].as<std::string>(), Command::Run, "format", {false, true});
  run_options.show_backend = vm["show-backend"].as<bool>();
  // The bar is drawn on standard error, never in the report; only when someone watches both.
  if (ctx.env.terminal && ctx.env.error_terminal && !run_options.json) run_options.progress_bar = &ctx.err;
  run_options.environment = ctx.fingerprint;
  run_options.boundary_copies = linked_boundary_copies;
  std::optional<fs::path> dump_graph;
  if (vm.count("dump-graph")) {
    if (!example->has_model) {
      throw UsageError{str("--dump-graph: example `", name, "` builds no model, so it has no graph to write")};
    }
    dump_graph = fs::path(vm["dump-graph"].as<std::string>());
    std::error_code error;
    const fs::path parent = dump_graph->parent_path();
    if (!parent.empty() && !fs::is_directory(parent, error)) {
      throw UsageError{str("--dump-graph: directory `", parent.string(), "` does not exist")};
    }
    const fs::file_status existing = fs::symlink_status(*dump_graph, error);
    if (fs::exists(existing) && !fs::is_regular_file(existing)) {
      throw UsageError{str("--dump-graph: `", dump_graph->string(), "` exists and is not a regular file; refusing to replace it")};
    }
    run_options.dump_graph = dump_graph;
  }
  if (vm.count("repro-dir")) {
    run_options.repro_dir = fs::path(vm["repro-dir"].as<std::string>());
    std::error_code error;
    if (!fs::is_directory(run_options.repro_dir, error)) {
      throw UsageError{str("--repro-dir: `", run_options.repro_dir.string(), "` is not an existing directory")};
    }
  }
  auto workspace = load(vm, ctx, ProfileChecks::Named);
  if (!workspace) return kUsage;
  // Bound as plan binds, so `run` selects what `plan` shows (a capsule whose catalog coverage
  // disagrees with its checker's is then refused when the session binds the checker).
  run_options.profile = find_bound_profile(*workspace, vm["profile"].as<std::string>(), ctx)->name;
  if (dump_graph) refuse_to_overwrite_inputs(*dump_graph, *workspace);

  // Handlers are registered explicitly: the examples run whatever this binary links.
  HandlerRegistry handlers;
  if (auto registered = register_linked_handlers(handlers); !registered) {
    ctx.err << registered.error() << "\n";
    return kRejected;
  }
  // Checkers too: a capsule whose evidence is a checker is rechecked under the profile's policy.
  CheckerRegistry checkers;
  if (auto registered = register_linked_checkers(checkers); !registered) {
    ctx.err << registered.error() << "\n";
    return kRejected;
  }
  run_options.checkers = &checkers;
  // JSON keeps stdout to one object, so the session's backend log goes to stderr.
  auto status = examples::run_example(name, *workspace, handlers, run_options, ctx.out,
                                      run_options.json ? ctx.err : ctx.out);
  if (!status) {
    if (run_options.json) {
      // Under --format json the refusal is the document on standard output, as success is, so a
      // consumer parses one JSON object either way; the text goes to standard error for people.
      JsonWriter json;
      json.begin_document().field("example", name).field("profile", run_options.profile);
      json.key("error").begin_object().field("code", to_string(status.error().code))
          .field("message", status.error().message).end_object();
      json.end_object();
      ctx.out << json.str() << "\n";
    }
    ctx.err << status.error() << "\n";
    const RuntimeCode code = status.error().code;
    return code == RuntimeCode::UnknownExample || code == RuntimeCode::UnknownProfile ? kUsage : kRejected;
  }
  return kOk;
}

}  // namespace capsule::cli
