// SPDX-License-Identifier: Apache-2.0
#include "cli.hpp"

#include <boost/program_options.hpp>

#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "capsule/diag_format.hpp"
#include "capsule/diff.hpp"
#include "capsule/examples.hpp"
#include "capsule/gate.hpp"
#include "capsule/handlers/reference.hpp"
#include "capsule/json.hpp"
#include "capsule/lint.hpp"
#include "capsule/load.hpp"
#include "capsule/report.hpp"
#include "capsule/resolve.hpp"
#include "capsule/text.hpp"

namespace capsule::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;

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
    "Run `capsule <command> --help` for a command's options. Catalogs and profiles default to the\n"
    "directories installed next to the binary, then the source tree; CAPSULE_CATALOGS and\n"
    "CAPSULE_PROFILES override them, and --catalogs/--profiles override those.\n\n"
    "exit status: 0 success; 1 a plan, check, gate, lint or session rejected something;\n"
    "             2 usage error or files that fail to load\n";

struct UsageError {
  std::string message;
};

struct Context {
  std::ostream& out;
  std::ostream& err;
  const Environment& env;
};

std::vector<fs::path> split_paths(const std::string& text) {
  std::vector<fs::path> paths;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ':')) {
    if (!item.empty()) paths.emplace_back(item);
  }
  return paths;
}

/// Flags, then the environment variable, then next to the binary, then the source tree.
std::vector<fs::path> data_dirs(const po::variables_map& vm, const char* flag, const char* variable,
                                const char* leaf, const Environment& env) {
  if (vm.count(flag)) {
    std::vector<fs::path> dirs;
    for (const std::string& dir : vm[flag].as<std::vector<std::string>>()) dirs.emplace_back(dir);
    return dirs;
  }
  if (const char* value = std::getenv(variable); value != nullptr && *value != '\0') return split_paths(value);
  const fs::path installed = env.executable_dir / ".." / CAPSULE_DATA_SUBDIR / leaf;
  std::error_code error;
  if (!env.executable_dir.empty() && fs::is_directory(installed, error)) return {installed.lexically_normal()};
  return {fs::path(CAPSULE_SOURCE_DIR) / leaf};
}

LoadOptions load_options(const Environment& env) {
  LoadOptions options;
  if (!env.today.empty()) {
    int y = 0;
    unsigned m = 0, d = 0;
    char extra = 0;
    if (std::sscanf(env.today.c_str(), "%d-%u-%u%c", &y, &m, &d, &extra) != 3 ||
        !Date{std::chrono::year{y}, std::chrono::month{m}, std::chrono::day{d}}.ok()) {
      throw UsageError{str("CAPSULE_TODAY=", env.today, " is not a date (expected YYYY-MM-DD)")};
    }
    options.today = Date{std::chrono::year{y}, std::chrono::month{m}, std::chrono::day{d}};
  }
  return options;
}

po::options_description data_options() {
  po::options_description options("data");
  options.add_options()
      ("catalogs", po::value<std::vector<std::string>>()->composing(), "catalog directory (repeatable)")
      ("profiles", po::value<std::vector<std::string>>()->composing(), "profile directory (repeatable)");
  return options;
}

po::variables_map parse_args(const std::vector<std::string>& args, const po::options_description& options,
                        const po::positional_options_description& positional = {}) {
  po::variables_map vm;
  // No abbreviation guessing: `--form` must not silently mean `--format` in a CI script.
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(options).positional(positional).style(style).run(), vm);
  po::notify(vm);
  return vm;
}

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

/// A vocabulary value given on the command line, or a usage error naming the flag, the valid
/// spellings and the nearest one.
template <class E>
E parse_flag_value(std::string_view text, std::string_view flag) {
  auto value = parse<E>(text);
  if (!value) throw UsageError{str(flag, ": ", value.error().message, value.error().nearest.empty() ? "" : "; " + value.error().help())};
  return *value;
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

/// Loads the workspace; prints diagnostics; returns nullopt (exit 2) when any file failed.
std::optional<Workspace> load(const po::variables_map& vm, Context& ctx) {
  Workspace workspace = load_workspace(data_dirs(vm, "catalogs", "CAPSULE_CATALOGS", "catalogs", ctx.env),
                                       data_dirs(vm, "profiles", "CAPSULE_PROFILES", "profiles", ctx.env),
                                       load_options(ctx.env));
  ctx.err << render(workspace.diagnostics);
  if (has_errors(workspace.diagnostics)) {
    ctx.err << "capsule: catalogs or profiles failed to load; run `capsule lint` for the full list\n";
    return std::nullopt;
  }
  return workspace;
}

/// `--profile NAME|FILE`: a loaded profile by name, or a profile file by path.
ProfilePtr find_profile(Workspace& workspace, const std::string& name_or_file, Context& ctx) {
  std::error_code error;
  const bool looks_like_file = name_or_file.ends_with(".toml") || name_or_file.find('/') != std::string::npos;
  if (looks_like_file && !fs::is_regular_file(name_or_file, error)) {
    throw UsageError{str("cannot read profile file `", name_or_file, "`: ",
                         fs::exists(name_or_file, error) ? "not a regular file" : "no such file")};
  }
  if (looks_like_file) {
    const std::size_t before = workspace.diagnostics.size();
    ProfilePtr profile = add_profile_file(workspace, name_or_file, load_options(ctx.env));
    ctx.err << render(Diagnostics(workspace.diagnostics.begin() + static_cast<std::ptrdiff_t>(before),
                                  workspace.diagnostics.end()));
    if (!profile) throw UsageError{str("profile file `", name_or_file, "` failed to load")};
    return profile;
  }
  if (ProfilePtr profile = workspace.find_profile(name_or_file)) return profile;
  const std::string nearest = nearest_name(name_or_file, workspace.profile_names());
  std::vector<std::string> names;
  for (const std::string_view n : workspace.profile_names()) names.emplace_back(n);
  throw UsageError{str("unknown profile `", name_or_file, "` (loaded profiles: ", join(names, ", "), ")",
                       nearest.empty() ? "" : str("; did you mean `", nearest, "`?"))};
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

// ---- lint ---------------------------------------------------------------------------------

/// `--deny` / `--allow` values (repeatable, or comma-separated) as rule overrides. An unknown
/// rule, allowing a rule that blocks loading, or naming one rule both ways is a usage error.
RuleOverrides rule_overrides(const po::variables_map& vm) {
  const auto values = [&](const char* flag) {
    std::vector<std::string> items;
    if (!vm.count(flag)) return items;
    for (const std::string& value : vm[flag].as<std::vector<std::string>>()) {
      std::stringstream stream(value);
      std::string item;
      while (std::getline(stream, item, ',')) {
        if (!item.empty()) items.push_back(item);
      }
    }
    return items;
  };
  const auto rule = [](const std::string& id, std::string_view flag) -> const LintRule& {
    if (const LintRule* found = find_lint_rule(std::string_view(id))) return *found;
    std::vector<std::string_view> ids{"warnings"};
    for (const LintRule& r : kLintRules) ids.push_back(to_string(r.code));
    const std::string nearest = nearest_name(id, ids);
    throw UsageError{str(flag, ": unknown lint rule `", id, "`",
                         nearest.empty() ? std::string() : str("; did you mean `", nearest, "`?"),
                         " (`capsule lint --help` lists the rules)")};
  };
  RuleOverrides overrides;
  for (const std::string& id : values("deny")) {
    if (id == "warnings") overrides.deny_warnings = true;
    else overrides.deny.push_back(rule(id, "--deny").code);
  }
  for (const std::string& id : values("allow")) {
    const LintRule& allowed = rule(id, "--allow");
    if (allowed.blocks_loading) {
      throw UsageError{str("--allow: rule `", id, "` cannot be allowed: a file with that error does not load, so every ",
                           "other command would still refuse it")};
    }
    if (std::find(overrides.deny.begin(), overrides.deny.end(), allowed.code) != overrides.deny.end()) {
      throw UsageError{str("rule `", id, "` is both denied and allowed")};
    }
    overrides.allow.push_back(allowed.code);
  }
  return overrides;
}

/// The compiled handlers this CLI links, as lint sees them. Registration sites are relative to
/// the source tree; they become absolute when that tree is present, like every other path lint prints.
std::vector<LintHandler> lint_handlers(const HandlerRegistry& registry) {
  std::vector<LintHandler> handlers;
  for (const RegisteredHandler* handler : registry.all()) {
    LintHandler item{handler->spec.name, handler->spec.op, handler->spec.provider, handler->spec.device,
                     handler->spec.guards, {}};
    const auto colon = handler->site.rfind(':');
    if (colon != std::string::npos) {
      fs::path file = handler->site.substr(0, colon);
      std::error_code error;
      if (file.is_relative() && fs::is_regular_file(fs::path(CAPSULE_SOURCE_DIR) / file, error)) {
        file = fs::path(CAPSULE_SOURCE_DIR) / file;
      }
      const unsigned long line = std::strtoul(handler->site.c_str() + colon + 1, nullptr, 10);
      item.where = SourceLoc{file.string(), static_cast<std::uint32_t>(line), 1};
    }
    handlers.push_back(std::move(item));
  }
  return handlers;
}

/// `--test-suites FILE`, else the manifest installed next to the binary's data, else the one
/// this build wrote. Records where it looked, for the warning when there is none.
std::optional<TestSuiteManifest> test_suites(const po::variables_map& vm, const Environment& env,
                                             std::vector<std::string>& searched) {
  if (vm.count("test-suites")) {
    const std::string file = vm["test-suites"].as<std::string>();
    auto manifest = read_test_suite_manifest(file);
    if (!manifest) throw UsageError{str("--test-suites: cannot read `", file, "`")};
    return std::move(*manifest);
  }
  std::vector<fs::path> candidates;
  if (!env.executable_dir.empty()) {
    candidates.push_back((env.executable_dir / ".." / CAPSULE_DATA_SUBDIR / "test-suites.txt").lexically_normal());
  }
  candidates.emplace_back(CAPSULE_TEST_SUITE_MANIFEST);
  for (const fs::path& candidate : candidates) {
    std::error_code error;
    if (!fs::is_regular_file(candidate, error)) {
      searched.push_back(candidate.string());
      continue;
    }
    if (auto manifest = read_test_suite_manifest(candidate)) return std::move(*manifest);
    searched.push_back(candidate.string());
  }
  return std::nullopt;
}

std::string rules_help() {
  std::string out = "rules (id, default severity, what it checks):\n";
  for (const LintRule& rule : kLintRules) {
    std::string id(to_string(rule.code));
    std::string severity(to_string(rule.severity));
    id.resize(std::max<std::size_t>(id.size() + 1, 27), ' ');
    severity.resize(std::max<std::size_t>(severity.size() + 1, 9), ' ');
    out += str("  ", id, severity, rule.checks, rule.blocks_loading ? " (cannot be allowed)" : "", "\n");
  }
  return out;
}

int cmd_lint(const std::vector<std::string>& args, Context& ctx) {
  po::options_description options(
      "capsule lint [--catalogs DIR]... [--profiles DIR]... [--format text|json|sarif|github]\n"
      "             [--deny RULE|warnings]... [--allow RULE]... [--test-suites FILE] [--source-root DIR]");
  options.add(data_options());
  options.add_options()("format", po::value<std::string>()->default_value("text"), "text | json | sarif | github")
      ("deny", po::value<std::vector<std::string>>()->composing(), "make RULE an error (`warnings`: every warning)")
      ("allow", po::value<std::vector<std::string>>()->composing(), "do not report RULE")
      ("test-suites", po::value<std::string>(), "manifest of this build's test suites (default: the one the build wrote)")
      ("source-root", po::value<std::string>(), "directory provenance paths are relative to (default: above each catalog directory)")
      ("help,h", "show this help");
  if (wants_help(args)) {
    ctx.out << options
            << "\nLoads every catalog and profile, checks that evidence points at something real in this build\n"
               "(test suites, runtime guards of the compiled handlers, provenance files and symbols), and reports\n"
               "every problem in one run. Exit 0 when no error remains after --deny/--allow, 1 when one does,\n"
               "2 for usage errors or unreadable directories.\n\n"
            << rules_help();
    return kOk;
  }
  const po::variables_map vm = parse_args(args, options);
  const DiagFormat format = parse_choice<DiagFormat>(vm["format"].as<std::string>(), "--format",
      {{"text", DiagFormat::Text}, {"json", DiagFormat::Json}, {"sarif", DiagFormat::Sarif}, {"github", DiagFormat::Github}});
  const RuleOverrides overrides = rule_overrides(vm);
  LintScope scope{data_dirs(vm, "catalogs", "CAPSULE_CATALOGS", "catalogs", ctx.env),
                  data_dirs(vm, "profiles", "CAPSULE_PROFILES", "profiles", ctx.env), std::nullopt};
  if (vm.count("source-root")) scope.source_root = fs::path(vm["source-root"].as<std::string>());
  Workspace workspace = load_workspace(scope.catalog_dirs, scope.profile_dirs, load_options(ctx.env));
  Diagnostics nothing = check_lint_scope(workspace, scope);

  HandlerRegistry registry;
  if (auto registered = register_reference_handlers(registry); !registered) {
    ctx.err << registered.error() << "\n";
    return kRejected;
  }
  EvidenceCheckInputs inputs;
  inputs.handlers = lint_handlers(registry);
  inputs.suites = test_suites(vm, ctx.env, inputs.manifest_searched);
  inputs.source_root = scope.source_root;
  Diagnostics evidence = check_evidence(workspace, inputs);
  workspace.diagnostics.insert(workspace.diagnostics.begin(), nothing.begin(), nothing.end());
  workspace.diagnostics.insert(workspace.diagnostics.end(), evidence.begin(), evidence.end());
  const Diagnostics findings = apply_lint_rules(std::move(workspace.diagnostics), overrides);

  // SARIF and GitHub name files relative to the repository (see annotation_root).
  const fs::path root = annotation_root(scope);
  ctx.out << format_diagnostics(findings, format, CAPSULE_VERSION, root);
  std::size_t capsules = 0;
  for (const ModulePtr& m : workspace.modules) capsules += m->capsules.size();
  const std::array<std::size_t, 3> counts = severity_counts(findings);
  const std::size_t errors = counts[static_cast<std::size_t>(Severity::Error)];
  if (format == DiagFormat::Text) {
    ctx.out << str("lint: ", workspace.modules.size(), " modules, ", capsules, " capsules, ", workspace.profiles.size(),
                   " profiles: ", errors, " errors, ", counts[static_cast<std::size_t>(Severity::Warning)], " warnings, ",
                   counts[static_cast<std::size_t>(Severity::Note)], " notes\n");
  }
  const bool unreadable = std::any_of(findings.begin(), findings.end(), [](const Diagnostic& d) {
    return d.code == DiagCode::IoError || d.code == DiagCode::NothingToLint;
  });
  if (unreadable) return kUsage;
  return errors == 0 ? kOk : kRejected;
}

// ---- list ---------------------------------------------------------------------------------

int cmd_list(const std::vector<std::string>& args, Context& ctx) {
  po::options_description options("capsule list capsules|profiles|ops [--op OP] [--device D] [--format text|json]");
  options.add(data_options());
  options.add_options()("what", po::value<std::string>(), "capsules | profiles | ops")
      ("op", po::value<std::string>(), "only capsules of this op")
      ("device", po::value<std::string>(), "only capsules or profiles for this device")
      ("format", po::value<std::string>()->default_value("text"), "text | json")("help,h", "show this help");
  po::positional_options_description positional;
  positional.add("what", 1);
  if (wants_help(args)) {
    ctx.out << options;
    return kOk;
  }
  const po::variables_map vm = parse_args(args, options, positional);
  if (!vm.count("what")) throw UsageError{"list needs what to list: capsules, profiles or ops"};
  enum class What { Capsules, Profiles, Ops };
  const What what = parse_choice<What>(vm["what"].as<std::string>(), "list",
                                       {{"capsules", What::Capsules}, {"profiles", What::Profiles}, {"ops", What::Ops}});
  const bool json = parse_choice<bool>(vm["format"].as<std::string>(), "--format", {{"text", false}, {"json", true}});
  std::optional<Op> op_filter;
  if (vm.count("op")) {
    op_filter = parse_flag_value<Op>(vm["op"].as<std::string>(), "--op");
  }
  std::optional<Device> device_filter;
  if (vm.count("device")) {
    device_filter = parse_flag_value<Device>(vm["device"].as<std::string>(), "--device");
  }
  auto workspace = load(vm, ctx);
  if (!workspace) return kUsage;
  JsonWriter out;
  if (what == What::Ops) {
    out.begin_array();
    for (const Op op : all_values<Op>()) {
      std::map<Device, int> per_device;
      for (const ModulePtr& m : workspace->modules) {
        for (const Capsule& c : m->capsules) per_device[c.device] += c.op == op ? 1 : 0;
      }
      std::vector<std::string> counts;
      for (const auto& [device, count] : per_device) {
        if (count != 0) counts.push_back(str(to_string(device), "=", count));
      }
      if (json) {
        out.begin_object().field("op", to_string(op)).field("requires_vjp", requires_vjp(op)).key("capsules").begin_object();
        for (const auto& [device, count] : per_device) {
          if (count != 0) out.field(to_string(device), static_cast<std::int64_t>(count));
        }
        out.end_object().end_object();
      } else {
        ctx.out << str(to_string(op), requires_vjp(op) ? "" : " (no vjp required)", ": ",
                       counts.empty() ? std::string("no capsules") : join(counts, ", "), "\n");
      }
    }
    out.end_array();
  } else if (what == What::Profiles) {
    out.begin_array();
    for (const ProfilePtr& p : workspace->profiles) {
      if (device_filter && p->policy.device != *device_filter) continue;
      if (json) {
        out.begin_object().field("name", p->name).field("device", to_string(p->policy.device))
            .field("provider", p->policy.provider.label()).field("assurance", p->policy.assurance.label())
            .field("vjp", to_string(p->policy.vjp)).field("summary", p->summary).field("path", p->source.path).end_object();
      } else {
        ctx.out << str(p->name, ": device=", to_string(p->policy.device), " provider=", p->policy.provider.label(),
                       " assurance=", p->policy.assurance.label(), " vjp=", to_string(p->policy.vjp), "\n    ",
                       p->summary, "\n");
      }
    }
    out.end_array();
  } else {
    out.begin_array();
    for (const ModulePtr& m : workspace->modules) {
      for (const Capsule& c : m->capsules) {
        if (op_filter && c.op != *op_filter) continue;
        if (device_filter && c.device != *device_filter) continue;
        if (json) {
          out.begin_object().field("name", c.name).field("module", m->name).field("op", to_string(c.op))
              .field("provider", to_string(c.provider)).field("device", to_string(c.device))
              .field("trust", to_string(c.trust)).field("vjp", to_string(c.vjp))
              .field("reduction", to_string(c.numerical.reduction))
              .field("file", c.where.file).field("line", static_cast<std::int64_t>(c.where.line)).end_object();
        } else {
          ctx.out << str(c.name, " op=", to_string(c.op), " provider=", to_string(c.provider), " device=",
                         to_string(c.device), " trust=", to_string(c.trust), " vjp=", to_string(c.vjp),
                         " reduction=", to_string(c.numerical.reduction), " module=", m->name, "\n");
        }
      }
    }
    out.end_array();
  }
  if (json) ctx.out << out.str() << "\n";
  return kOk;
}

// ---- plan / check / explain ---------------------------------------------------------------

struct PlanInputs {
  Workspace workspace;
  ProfilePtr profile;
  std::vector<Op> ops;
  std::optional<Graph> graph;
};

po::options_description plan_options(const std::string& caption) {
  po::options_description options(caption);
  options.add(data_options());
  options.add_options()("profile", po::value<std::string>(), "profile name, or a profile file path")
      ("ops", po::value<std::string>(), "comma-separated ops, e.g. matmul,relu")
      ("graph", po::value<std::string>(), "an IR graph file (*.graph.toml)")("help,h", "show this help");
  return options;
}

std::optional<PlanInputs> plan_inputs(const po::variables_map& vm, Context& ctx, bool allow_graph) {
  if (!vm.count("profile")) throw UsageError{"--profile NAME|FILE is required"};
  const bool has_ops = vm.count("ops") != 0;
  const bool has_graph = vm.count("graph") != 0;
  if (has_ops == has_graph && allow_graph) throw UsageError{"give exactly one of --ops a,b,c or --graph FILE"};
  if (!has_ops && !allow_graph) throw UsageError{"--ops a,b,c is required"};
  PlanInputs inputs;
  if (has_ops) inputs.ops = parse_ops(vm["ops"].as<std::string>());
  auto workspace = load(vm, ctx);
  if (!workspace) return std::nullopt;
  inputs.workspace = std::move(*workspace);
  inputs.profile = find_profile(inputs.workspace, vm["profile"].as<std::string>(), ctx);
  if (has_graph) {
    Diagnostics diagnostics;
    inputs.graph = load_graph(vm["graph"].as<std::string>(), diagnostics);
    ctx.err << render(diagnostics);
    if (!inputs.graph) return std::nullopt;
  }
  return inputs;
}

int cmd_plan(const std::vector<std::string>& args, Context& ctx) {
  po::options_description options =
      plan_options("capsule plan --profile NAME|FILE (--ops a,b,c | --graph FILE) [--format text|json|markdown|dot]");
  options.add_options()("format", po::value<std::string>()->default_value("text"), "text | json | markdown | dot");
  if (wants_help(args)) {
    ctx.out << options << "\nSelects one capsule per op (or graph node) and reports it. Exit 1 when some op has\n"
                          "no admissible capsule; the error lists every candidate and why it was rejected.\n";
    return kOk;
  }
  const po::variables_map vm = parse_args(args, options);
  const ReportFormat format = parse_choice<ReportFormat>(vm["format"].as<std::string>(), "--format",
      {{"text", ReportFormat::Text}, {"json", ReportFormat::Json}, {"markdown", ReportFormat::Markdown}, {"dot", ReportFormat::Dot}});
  if (format == ReportFormat::Dot && !vm.count("graph")) throw UsageError{"--format dot draws graphs; use it with --graph"};
  auto inputs = plan_inputs(vm, ctx, true);
  if (!inputs) return kUsage;
  const ResolvedProfile resolved = resolve(inputs->workspace, inputs->profile);
  if (inputs->graph) {
    auto plan = resolved.planner.plan_graph(*inputs->graph);
    if (!plan) {
      std::vector<SourceFile> sources = resolved.sources;
      sources.push_back(inputs->graph->source);
      (format == ReportFormat::Json ? ctx.out : ctx.err) << plan_error_report(plan.error(), format, sources);
      return kRejected;
    }
    const std::vector<KernelGroup> groups = group(*plan, inputs->profile->lowering);
    ctx.out << graph_report(GraphReportInput{resolved, *inputs->graph, *plan, groups}, format);
    return kOk;
  }
  auto plan = resolved.planner.plan_ops(inputs->ops);
  if (!plan) {
    (format == ReportFormat::Json ? ctx.out : ctx.err) << plan_error_report(plan.error(), format, resolved.sources);
    return kRejected;
  }
  ctx.out << plan_report(resolved, *plan, format);
  return kOk;
}

int cmd_check(const std::vector<std::string>& args, Context& ctx) {
  po::options_description options =
      plan_options("capsule check --profile NAME (--ops a,b,c | --graph FILE) [--assurance checked|external]");
  options.add_options()("assurance", po::value<std::string>(), "gate under this assurance instead of the profile's");
  if (wants_help(args)) {
    ctx.out << options << "\nPlans under the profile, then runs the acceptance gate: admissibility and the evidence\n"
                          "of every obligation under the assurance policy. Exit 1 when anything is rejected.\n";
    return kOk;
  }
  const po::variables_map vm = parse_args(args, options);
  auto inputs = plan_inputs(vm, ctx, true);
  if (!inputs) return kUsage;
  const ResolvedProfile resolved = resolve(inputs->workspace, inputs->profile);
  KernelPolicy gate_policy = inputs->profile->policy;
  if (vm.count("assurance")) {
    gate_policy.assurance = parse_choice<AssurancePolicy>(vm["assurance"].as<std::string>(), "--assurance",
        {{"checked", AssurancePolicy::checked()}, {"external", AssurancePolicy::external()}});
  }
  const std::string label = gate_policy.assurance.label();

  std::vector<SourceFile> sources = resolved.sources;
  if (inputs->graph) sources.push_back(inputs->graph->source);
  std::vector<PlannedKernel> kernels;
  std::optional<GraphKernelPlan> graph_plan;
  if (inputs->graph) {
    auto plan = resolved.planner.plan_graph(*inputs->graph);
    if (!plan) {
      ctx.err << plan_error_report(plan.error(), ReportFormat::Text, sources);
      return kRejected;
    }
    graph_plan = std::move(*plan);
  } else {
    auto plan = resolved.planner.plan_ops(inputs->ops);
    if (!plan) {
      ctx.err << plan_error_report(plan.error(), ReportFormat::Text, sources);
      return kRejected;
    }
    kernels = std::move(plan->kernels);
  }

  if (graph_plan) {
    auto accepted = accept_graph(*graph_plan, gate_policy, inputs->profile->lowering);
    const std::vector<KernelGroup>& groups = accepted ? accepted->groups() : accepted.error().groups;
    ctx.out << str("kernels ", graph_plan->kernels.size(), ", groups ", groups.size(), "\n");
    for (const KernelGroup& g : groups) ctx.out << group_line(g) << "\n";
    if (accepted) {
      const auto names = distinct_capsule_names(group_kernels(groups));
      ctx.out << str("accepted under ", label, "\n", groups.size(), " rows, distinct capsules:\n");
      for (const std::string& name : names) ctx.out << "  " << name << "\n";
      ctx.out << sources_block(sources) << "\n";
      return kOk;
    }
    ctx.out << str("rejected under ", label, ":\n");
    for (const AcceptanceFailure& f : accepted.error().failures) ctx.out << "  " << f.message() << "\n";
    ctx.out << sources_block(sources) << "\n";
    return kRejected;
  }

  // Seed 002's contract-check lines first, then any other gate failure, then the verdict.
  bool rejected = false;
  for (const ObligationReport& report : rejected_reports(gate_policy.assurance, kernels)) {
    ctx.out << str(label, ": rejected ", report.capsule->name, " ", to_string(report.obligation), "\n  ",
                   evidence_label(report.descriptor().evidence), "\n");
    rejected = true;
  }
  for (const PlannedKernel& k : kernels) {
    auto verdict = accept(k, gate_policy);
    if (verdict) continue;
    rejected = true;
    for (const AcceptanceFailure& f : verdict.error()) {
      if (f.kind != AcceptanceFailure::Kind::EvidenceRejected) {
        ctx.out << str(label, ": gate rejected ", k.capsule->name, ": ", f.message(), "\n");
      }
    }
  }
  if (!rejected) ctx.out << label << ": accepted\n";
  ctx.out << sources_block(sources) << "\n";
  return rejected ? kRejected : kOk;
}

int cmd_explain(const std::vector<std::string>& args, Context& ctx) {
  po::options_description options("capsule explain --profile NAME --op OP [--format text|json]");
  options.add(data_options());
  options.add_options()("profile", po::value<std::string>(), "profile name, or a profile file path")
      ("op", po::value<std::string>(), "the op to explain")
      ("format", po::value<std::string>()->default_value("text"), "text | json")("help,h", "show this help");
  if (wants_help(args)) {
    ctx.out << options << "\nLists every capsule for the op in catalog order with the planner's verdict.\n";
    return kOk;
  }
  const po::variables_map vm = parse_args(args, options);
  if (!vm.count("profile") || !vm.count("op")) throw UsageError{"explain needs --profile NAME and --op OP"};
  const Op op = parse_flag_value<Op>(vm["op"].as<std::string>(), "--op");
  const bool json = parse_choice<bool>(vm["format"].as<std::string>(), "--format", {{"text", false}, {"json", true}});
  auto workspace = load(vm, ctx);
  if (!workspace) return kUsage;
  const ProfilePtr profile = find_profile(*workspace, vm["profile"].as<std::string>(), ctx);
  const ResolvedProfile resolved = resolve(*workspace, profile);
  const std::vector<CandidateVerdict> verdicts = resolved.planner.explain(op);
  const Capsule* chosen = resolved.planner.chosen(op);
  if (json) {
    JsonWriter out;
    out.begin_object().field("profile", profile->name).field("op", to_string(op));
    out.key("chosen");
    if (chosen != nullptr) out.value(chosen->name);
    else out.null();
    out.key("candidates").begin_array();
    for (const CandidateVerdict& v : verdicts) {
      out.begin_object().field("capsule", v.capsule->name).field("provider", to_string(v.capsule->provider))
          .field("device", to_string(v.capsule->device)).field("trust", to_string(v.capsule->trust))
          .field("vjp", to_string(v.capsule->vjp)).field("available", v.available).field("admissible", v.admissible)
          .field("chosen", v.chosen).string_array("reasons", v.reasons).string_array("gate_notes", v.gate_notes)
          .end_object();
    }
    out.end_array();
    write_sources_json(out, resolved.sources);
    out.end_object();
    ctx.out << out.str() << "\n";
  } else {
    ctx.out << profile_summary(*profile) << " provider=" << profile->policy.provider.label() << "\n";
    ctx.out << str("op ", to_string(op), ": ", verdicts.size(), " candidate", verdicts.size() == 1 ? "" : "s",
                   " in catalog order\n");
    for (const CandidateVerdict& v : verdicts) {
      const std::string status = v.chosen ? "chosen" : v.admissible ? "passed over" : "rejected";
      ctx.out << str("  ", v.capsule->name, " (", to_string(v.capsule->provider), "/", to_string(v.capsule->device),
                     ", ", to_string(v.capsule->trust), ", vjp ", to_string(v.capsule->vjp), "): ", status, "\n");
      for (const std::string& reason : v.reasons) ctx.out << "    - " << reason << "\n";
      for (const std::string& note : v.gate_notes) ctx.out << "    ! gate: " << note << "\n";
    }
    if (chosen != nullptr) {
      ctx.out << str("result: ", to_string(op), " -> ", chosen->name, "\n");
    } else {
      ctx.out << str("result: no admissible kernel capsule for op ", to_string(op), " on device ",
                     to_string(profile->policy.device), "\n");
    }
    ctx.out << sources_block(resolved.sources) << "\n";
  }
  return chosen != nullptr ? kOk : kRejected;
}

// ---- run ----------------------------------------------------------------------------------

int cmd_run(const std::vector<std::string>& args, Context& ctx) {
  po::options_description options(
      "capsule run EXAMPLE --profile NAME|FILE [--dump-graph FILE] [--show-backend] [--format text|json]");
  options.add(data_options());
  options.add_options()("example", po::value<std::string>(), "the example to run (see below)")
      ("profile", po::value<std::string>(), "profile name, or a profile file path")
      ("dump-graph", po::value<std::string>(), "write the model's lowered IR graph (*.graph.toml) to FILE")
      ("show-backend", po::bool_switch(), "print the capsule bound to each op as the session selects it")
      ("format", po::value<std::string>()->default_value("text"), "text | json")("help,h", "show this help");
  po::positional_options_description positional;
  positional.add("example", 1);
  std::vector<std::string_view> names;
  for (const examples::ExampleInfo& e : examples::all_examples()) names.push_back(e.name);
  if (wants_help(args)) {
    ctx.out << options << "\nOpens an eager session on the profile, runs the example through it (every op on the\n"
                          "capsule the profile selects, nothing falling back), then lists the capsules used.\n"
                          "Exit 1 when the session, gate or a handler binding rejects.\n\nexamples:\n";
    for (const examples::ExampleInfo& e : examples::all_examples()) {
      ctx.out << "  " << e.name << std::string(18 - std::min<std::size_t>(17, e.name.size()), ' ') << e.summary << "\n";
    }
    return kOk;
  }
  const po::variables_map vm = parse_args(args, options, positional);
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
  run_options.json = parse_choice<bool>(vm["format"].as<std::string>(), "--format", {{"text", false}, {"json", true}});
  run_options.show_backend = vm["show-backend"].as<bool>();
  run_options.terminal = ctx.env.terminal && !run_options.json;
  if (vm.count("dump-graph")) {
    if (!example->has_model) {
      throw UsageError{str("--dump-graph: example `", name, "` builds no model, so it has no graph to write")};
    }
    const fs::path file = vm["dump-graph"].as<std::string>();
    std::error_code error;
    const fs::path parent = file.parent_path();
    if (!parent.empty() && !fs::is_directory(parent, error)) {
      throw UsageError{str("--dump-graph: directory `", parent.string(), "` does not exist")};
    }
    run_options.dump_graph = file;
  }
  auto workspace = load(vm, ctx);
  if (!workspace) return kUsage;
  run_options.profile = find_profile(*workspace, vm["profile"].as<std::string>(), ctx)->name;

  // Handlers are registered explicitly: the examples run whatever this binary links.
  HandlerRegistry handlers;
  if (auto registered = register_reference_handlers(handlers); !registered) {
    ctx.err << registered.error() << "\n";
    return kRejected;
  }
  // JSON keeps stdout to one object, so the session's backend log goes to stderr.
  auto status = examples::run_example(name, *workspace, handlers, run_options, ctx.out,
                                      run_options.json ? ctx.err : ctx.out);
  if (!status) {
    ctx.err << status.error() << "\n";
    const RuntimeCode code = status.error().code;
    return code == RuntimeCode::UnknownExample || code == RuntimeCode::UnknownProfile ? kUsage : kRejected;
  }
  return kOk;
}

// ---- diff ---------------------------------------------------------------------------------

/// A scratch directory removed when the diff is done, whatever happens.
struct ScratchDir {
  fs::path path;
  ~ScratchDir() {
    std::error_code ignored;
    if (!path.empty()) fs::remove_all(path, ignored);
  }
};

int cmd_diff(const std::vector<std::string>& args, Context& ctx) {
  po::options_description options(
      "capsule diff BASE HEAD [--git] [--repo DIR] [--format text|markdown|json] [--accept FILE]");
  options.add_options()("base", po::value<std::string>(), "the tree before: a directory holding catalogs/ and profiles/")
      ("head", po::value<std::string>(), "the tree after")
      ("git", po::bool_switch(), "BASE and HEAD are git revisions of the repository (read blob by blob with git, no checkout)")
      ("repo", po::value<std::string>()->default_value("."), "with --git: a directory inside the repository")
      ("format", po::value<std::string>()->default_value("text"), "text | markdown | json")
      ("accept", po::value<std::string>(), "a reviewed waivers file (TOML) whose changes do not fail the run")
      ("help,h", "show this help");
  po::positional_options_description positional;
  positional.add("base", 1).add("head", 1);
  if (wants_help(args)) {
    ctx.out << options
            << "\nReports changes in meaning, not text: capsules added, removed or renamed; trust, evidence,\n"
               "VJP mode, layout, reduction, provider, device and expiry changes, each strengthened, weakened\n"
               "or neutral; profile assurance, preference, module order and availability. Then the impact:\n"
               "every op planned under every HEAD profile in both trees.\n"
               "Exit 0 when nothing is weakened; 1 when trust is weakened, a profile newly admits a trusted\n"
               "boundary, or a waiver expired; 2 for usage errors or trees that fail to load.\n"
               "See docs/trust-diff.md.\n";
    return kOk;
  }
  const po::variables_map vm = parse_args(args, options, positional);
  if (!vm.count("base") || !vm.count("head")) throw UsageError{"diff needs BASE and HEAD"};
  enum class Format { Text, Markdown, Json };
  const Format format = parse_choice<Format>(vm["format"].as<std::string>(), "--format",
                                             {{"text", Format::Text}, {"markdown", Format::Markdown}, {"json", Format::Json}});
  const LoadOptions load = load_options(ctx.env);

  std::optional<std::vector<Waiver>> waivers;
  if (vm.count("accept")) {
    auto loaded = load_waivers(vm["accept"].as<std::string>());
    if (!loaded) {
      ctx.err << render(loaded.error());
      ctx.err << "capsule diff: the waivers file failed to load\n";
      return kUsage;
    }
    waivers = std::move(*loaded);
  }

  const std::string base_arg = vm["base"].as<std::string>();
  const std::string head_arg = vm["head"].as<std::string>();
  ScratchDir scratch;
  fs::path base_root = base_arg;
  fs::path head_root = head_arg;
  if (vm["git"].as<bool>()) {
    // A fresh private directory (mkdtemp), never one somebody prepared under a guessable name.
    std::error_code error;
    std::string pattern = (fs::temp_directory_path(error) / "capsule-diff-XXXXXX").string();
    if (error || mkdtemp(pattern.data()) == nullptr) throw UsageError{"cannot create a scratch directory for --git"};
    scratch.path = pattern;
    const fs::path repo = vm["repo"].as<std::string>();
    auto base_tree = materialize_git_tree(base_arg, repo, scratch.path / "base");
    if (!base_tree) throw UsageError{base_tree.error()};
    auto head_tree = materialize_git_tree(head_arg, repo, scratch.path / "head");
    if (!head_tree) throw UsageError{head_tree.error()};
    base_root = *base_tree;
    head_root = *head_tree;
  } else {
    for (const fs::path& root : {base_root, head_root}) {
      std::error_code error;
      if (!fs::is_directory(root, error)) {
        throw UsageError{str("`", root.string(), "` is not a directory (pass --git to compare git revisions)")};
      }
    }
  }
  auto base = load_tree(base_root, base_arg, load);
  auto head = load_tree(head_root, head_arg, load);
  if (!base || !head) {
    if (!base) ctx.err << render(base.error());
    if (!head) ctx.err << render(head.error());
    ctx.err << "capsule diff: a tree failed to load; run `capsule lint` on it for the full list\n";
    return kUsage;
  }
  DiffOptions diff_options;
  diff_options.today = load.today;
  TrustDiff diff = diff_trees(*base, *head, diff_options);
  if (waivers) apply_waivers(diff, *waivers);
  switch (format) {
    case Format::Text: ctx.out << render_text(diff); break;
    case Format::Markdown: ctx.out << render_markdown(diff); break;
    case Format::Json: ctx.out << render_json(diff); break;
  }
  return exit_status(diff) == 0 ? kOk : kRejected;
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const Environment& env) {
  Context ctx{out, err, env};
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    if (args.size() >= 2) return run({args[1], "--help"}, out, err, env);
    (args.empty() ? err : out) << kOverview;
    return args.empty() ? kUsage : kOk;
  }
  if (args[0] == "--version" || args[0] == "version") {
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
    err << "capsule: unknown command `" << command << "`"
        << (nearest.empty() ? std::string() : "; did you mean `" + nearest + "`?") << "\n\n"
        << kOverview;
    return kUsage;
  } catch (const UsageError& error) {
    err << "capsule " << command << ": " << error.message << "\n";
    return kUsage;
  } catch (const po::error& error) {
    err << "capsule " << command << ": " << error.what() << " (see `capsule " << command << " --help`)\n";
    return kUsage;
  } catch (const std::exception& error) {
    // Nothing expected reaches here (the engine reports problems as values); if something does,
    // say so plainly instead of aborting.
    err << "capsule " << command << ": unexpected failure: " << error.what() << "\n";
    return kUsage;
  }
}

}  // namespace capsule::cli
