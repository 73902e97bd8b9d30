// SPDX-License-Identifier: Apache-2.0
// `capsule lint`: load everything, check evidence against this build, report every finding.
#include "commands.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "capsule/diag_format.hpp"
#include "capsule/escape.hpp"
#include "capsule/lint.hpp"
#include "capsule/lint_config.hpp"
#include "capsule/lint_rule_ids.hpp"
#include "linked_checkers.hpp"
#include "linked_handlers.hpp"
#include "data_dirs.hpp"
#include "ledger_options.hpp"

namespace capsule::cli {
namespace {

/// `--deny` / `--allow` values (repeatable, or comma-separated) as rule overrides. An unknown
/// rule, allowing a rule that blocks loading, or naming one rule both ways is a usage error; a
/// rule named twice the same way is harmless here (scripts compose flags).
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
  ResolvedRuleIds resolved = resolve_rule_ids(values("deny"), values("allow"));
  for (const RuleIdProblem& problem : resolved.problems) {
    const std::string_view flag = problem.list == RuleList::Deny ? "--deny" : "--allow";
    switch (problem.kind) {
      case RuleIdProblem::Kind::Repeated: continue;
      case RuleIdProblem::Kind::Unknown:
        throw UsageError{str(flag, ": ", describe(problem),
                             problem.suggestion.empty() ? std::string() : str("; did you mean `", problem.suggestion, "`?"),
                             " (`capsule lint --help` lists the rules)")};
      case RuleIdProblem::Kind::CannotBeAllowed: throw UsageError{str(flag, ": ", describe(problem))};
      case RuleIdProblem::Kind::DeniedAndAllowed: throw UsageError{describe(problem)};
    }
  }
  return std::move(resolved.overrides);
}

/// The compiled handlers this CLI links, as lint sees them. With `probe_devices` (lint --ledger),
/// each non-CPU device's runtime is probed once, so a handler whose device is unusable here (a
/// CUDA handler on a machine without a GPU) counts as not run here rather than as failing.
std::vector<LintHandler> lint_handlers(const HandlerRegistry& registry, bool probe_devices) {
  std::vector<LintHandler> handlers;
  std::map<Device, std::string> unusable;
  for (const RegisteredHandler* handler : registry.all()) {
    handlers.push_back(LintHandler{handler->spec.name, handler->spec.op, handler->spec.provider,
                                   handler->spec.device, handler->spec.guards, registration_loc(handler->site),
                                   handler->spec.backend_vjp, handler->spec.forward_autograd != nullptr, {}});
    const Device device = handler->spec.device;
    if (!probe_devices || device == Device::Cpu) continue;
    auto [at, added] = unusable.try_emplace(device);
    if (added) at->second = registry.probe_device(device);
    handlers.back().device_unusable = at->second;
  }
  return handlers;
}

/// `--test-suites FILE`, else the manifest installed next to the binary's data, else the one
/// this build wrote. Records where it looked, and why a manifest found there was refused, for the
/// warning when there is none.
std::optional<EvidenceManifest> test_suites(const po::variables_map& vm, const Environment& env,
                                            std::vector<std::string>& searched) {
  const auto first_problem = [](const Diagnostics& problems) {
    if (problems.empty()) return std::string("unreadable");
    const Diagnostic& d = problems.front();
    return d.where.line == 0 ? d.message : str("line ", d.where.line, ":", d.where.column, ": ", d.message);
  };
  if (vm.count("test-suites")) {
    const std::string file = vm["test-suites"].as<std::string>();
    auto manifest = read_evidence_manifest(file);
    if (!manifest) throw UsageError{str("--test-suites: cannot read `", file, "`: ", first_problem(manifest.error()))};
    return std::move(*manifest);
  }
  std::vector<fs::path> candidates;
  if (!env.executable_dir.empty()) {
    candidates.push_back((env.executable_dir / ".." / CAPSULE_DATA_SUBDIR / "test-suites.toml").lexically_normal());
  }
  candidates.emplace_back(CAPSULE_TEST_SUITE_MANIFEST);
  for (const fs::path& candidate : candidates) {
    std::error_code error;
    if (!fs::is_regular_file(candidate, error)) {
      searched.push_back(candidate.string());
      continue;
    }
    auto manifest = read_evidence_manifest(candidate);
    if (manifest) return std::move(*manifest);
    searched.push_back(str(candidate.string(), " (refused: ", first_problem(manifest.error()), ")"));
  }
  return std::nullopt;
}

/// The files `capsule lint FILE...` names, each resolved to its canonical path. A named file
/// must be a regular `*.toml` inside one of the loaded catalog or profile directories: it is
/// linted in the context of its tree, never on its own.
std::vector<fs::path> named_files(const std::vector<std::string>& files, const DataDirs& dirs) {
  // Each loaded directory resolved once, not once per named file.
  std::vector<fs::path> dir_paths;
  for (const auto* group : {&dirs.catalogs, &dirs.profiles}) {
    for (const fs::path& d : *group) {
      std::error_code e;
      const fs::path resolved = fs::weakly_canonical(d, e);
      if (!e) dir_paths.push_back(resolved);
    }
  }
  std::vector<fs::path> named;
  for (const std::string& file : files) {
    std::error_code error;
    // The entry itself, not what a link points to: the loaders refuse links too.
    const fs::file_status status = fs::symlink_status(file, error);
    if (!fs::exists(status)) throw UsageError{str("cannot lint `", file, "`: no such file")};
    if (!fs::is_regular_file(status)) throw UsageError{str("cannot lint `", file, "`: not a regular file")};
    // Only what the loaders read: a catalog or profile, never a graph or another file.
    const std::string name = fs::path(file).filename().string();
    if (!name.ends_with(".toml") || name.ends_with(".graph.toml")) {
      throw UsageError{str("cannot lint `", file, "`: lint reads catalog and profile files (*.toml, not *.graph.toml)")};
    }
    const fs::path canonical = fs::weakly_canonical(file, error);
    const bool inside = std::find(dir_paths.begin(), dir_paths.end(), canonical.parent_path()) != dir_paths.end();
    if (error || !inside) {
      throw UsageError{str("`", file, "` is not in a loaded catalogs or profiles directory; lint names files of the "
                           "tree it loads (give --root, --catalogs or --profiles for the file's tree)")};
    }
    named.push_back(canonical);
  }
  return named;
}

/// Keeps the findings located in one of `named` (every finding when `named` is empty).
Diagnostics in_named_files(Diagnostics findings, const std::vector<fs::path>& named) {
  if (named.empty()) return findings;
  // Many findings share a file: each distinct path is resolved once.
  std::map<std::string, bool, std::less<>> kept_file;
  std::erase_if(findings, [&](const Diagnostic& d) {
    if (d.where.file.empty()) return true;
    auto [it, fresh] = kept_file.try_emplace(d.where.file, false);
    if (fresh) {
      std::error_code error;
      const fs::path canonical = fs::weakly_canonical(d.where.file, error);
      it->second = !error && std::find(named.begin(), named.end(), canonical) != named.end();
    }
    return !it->second;
  });
  return findings;
}

/// The command line's rule overrides over those of the lint configuration file (`--config`, else
/// the nearest capsule-lint.toml; none with `--no-config`). The file used is named on standard
/// error, so a verdict never changes without saying why. A file with problems contributes
/// nothing; its problems go to `problems` and fail the run.
RuleOverrides configured_rule_overrides(const po::variables_map& vm, const LintScope& scope,
                                        const std::optional<fs::path>& work_tree_top, Context& ctx,
                                        Diagnostics& problems) {
  const RuleOverrides from_command_line = rule_overrides(vm);
  const bool no_config = vm["no-config"].as<bool>();  // a switch: always present, true when given
  if (vm.count("config") && no_config) throw UsageError{"--config and --no-config exclude each other"};
  if (no_config) return from_command_line;
  const bool discovered = !vm.count("config");
  std::optional<fs::path> file;
  if (discovered) {
    auto found = find_lint_config(scope, work_tree_top);
    if (!found) {
      problems = std::move(found.error());
      return from_command_line;
    }
    file = std::move(*found);
  } else {
    file = fs::path(vm["config"].as<std::string>());
  }
  if (!file) return from_command_line;
  ctx.err << "capsule: lint configuration: " << text_escape(file->string()) << "\n";
  auto from_file = read_lint_config(*file, discovered);
  if (!from_file) {
    problems = std::move(from_file.error());
    return from_command_line;
  }
  return merge_rule_overrides(std::move(*from_file), from_command_line);
}

/// `N errors, M warnings` of the summary line, its verdict: errors red (green when none),
/// warnings yellow when there are some.
std::string lint_tally(std::size_t errors, std::size_t warnings, const TextStyle& style) {
  const std::string error_words = str(errors, " errors");
  const std::string warning_words = str(warnings, " warnings");
  return str(style.paint(errors == 0 ? Tone::Good : Tone::Bad, error_words), ", ",
             warnings == 0 ? warning_words : style.paint(Tone::Warning, warning_words));
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

}  // namespace

int cmd_lint(const std::vector<std::string>& args, Context& ctx) {
  if (wants_help(args)) {
    ctx.out << options_for(Command::Lint)
            << "\nLoads every catalog and profile, checks that evidence points at something real in this build\n"
               "(test suites, fuzz oracles and shared definitions that cover the capsule's op, provider, device and\n"
               "obligation, runtime guards of the compiled handlers, checkers this program registers for the\n"
               "capsule's op, device and obligation with the claimed coverage, provenance files and symbols), and reports\n"
               "every problem in one run. With --ledger, evidence must also have passed on this build: test-suite\n"
               "and fuzz-oracle evidence of every capsule with a compiled handler needs a passing ledger entry\n"
               "(evidence-not-passed), and capsules this build cannot run are listed as not run here\n"
               "(evidence-not-run-here). Named FILEs (for pre-commit hooks and editors) are checked in the\n"
               "context of the whole tree, which still loads, and only their findings are reported. Exit 0 when\n"
               "no error remains after --deny/--allow, 1 when one does, 2 for usage errors or unreadable\n"
               "directories.\n\n"
            << rules_help();
    return kOk;
  }
  const po::variables_map vm = parse_command(Command::Lint, args, ctx);
  const DiagFormat format = choice_value<DiagFormat>(vm["format"].as<std::string>(), Command::Lint, "format",
      {DiagFormat::Text, DiagFormat::Json, DiagFormat::Sarif, DiagFormat::Github});
  const DataDirs dirs = data_dirs(vm, ctx.env);
  ctx.err << data_dirs_line(dirs);
  const std::vector<fs::path> named =
      named_files(vm.count("file") ? vm["file"].as<std::vector<std::string>>() : std::vector<std::string>{}, dirs);
  LintScope scope{dirs.catalogs, dirs.profiles, std::nullopt};
  if (vm.count("source-root")) scope.source_root = fs::path(vm["source-root"].as<std::string>());
  Workspace workspace = load_workspace(scope.catalog_dirs, scope.profile_dirs, load_options(ctx.env));
  Diagnostics nothing = check_lint_scope(workspace, scope);
  // Asked of git once: it bounds the configuration search and roots SARIF and GitHub paths.
  const std::optional<fs::path> work_tree_top = catalogs_work_tree_top(scope);
  Diagnostics config_problems;
  const RuleOverrides overrides = configured_rule_overrides(vm, scope, work_tree_top, ctx, config_problems);

  HandlerRegistry registry;
  if (auto registered = register_linked_handlers(registry); !registered) {
    ctx.err << registered.error() << "\n";
    return kRejected;
  }
  EvidenceCheckInputs inputs;
  inputs.handlers = lint_handlers(registry, vm.count("ledger") > 0);
  inputs.checkers = linked_known_checkers();
  inputs.suites = test_suites(vm, ctx.env, inputs.manifest_searched);
  inputs.source_root = scope.source_root;
  Diagnostics evidence = check_evidence(workspace, inputs);
  if (vm.count("ledger")) {
    // Lint reports a ledger that does not load among its findings instead of stopping.
    auto ledger = read_evidence_ledgers(ledger_files(vm));
    Diagnostics judged = ledger ? check_ledger(workspace, inputs.handlers, *ledger, ctx.fingerprint)
                                : std::move(ledger.error());
    evidence.insert(evidence.end(), judged.begin(), judged.end());
  }
  workspace.diagnostics.insert(workspace.diagnostics.begin(), nothing.begin(), nothing.end());
  workspace.diagnostics.insert(workspace.diagnostics.end(), evidence.begin(), evidence.end());
  Diagnostics findings = in_named_files(apply_lint_rules(std::move(workspace.diagnostics), overrides), named);
  // The configuration's own problems are reported whatever files were named: they changed (or
  // failed to change) how every finding was ranked.
  findings.insert(findings.begin(), config_problems.begin(), config_problems.end());

  // SARIF and GitHub name files relative to the repository (see annotation_root).
  const fs::path root = annotation_root(scope, work_tree_top);
  ctx.out << format_diagnostics(findings, format, CAPSULE_VERSION, root, ctx.out_style);
  std::size_t capsules = 0;
  for (const ModulePtr& m : workspace.modules) capsules += m->capsules.size();
  const std::array<std::size_t, 3> counts = severity_counts(findings);
  const std::size_t errors = counts[static_cast<std::size_t>(Severity::Error)];
  const std::size_t warnings = counts[static_cast<std::size_t>(Severity::Warning)];
  if (format == DiagFormat::Text) {
    ctx.out << str("lint: ", named.empty() ? std::string() : str(named.size(), named.size() == 1 ? " named file of " : " named files of "),
                   workspace.modules.size(), " modules, ", capsules, " capsules, ", workspace.profiles.size(),
                   " profiles: ", lint_tally(errors, warnings, ctx.out_style), ", ", counts[static_cast<std::size_t>(Severity::Note)],
                   " notes\n");
  }
  const bool unreadable = std::any_of(findings.begin(), findings.end(),
                                      [](const Diagnostic& d) {
                                        // A `*.toml` entry that is no regular file is as unreadable as a missing one.
                                        return d.code == DiagCode::IoError || d.code == DiagCode::NonRegularFile ||
                                               d.code == DiagCode::NothingToLint;
                                      });
  if (unreadable) return kUsage;
  return errors == 0 ? kOk : kRejected;
}

}  // namespace capsule::cli
