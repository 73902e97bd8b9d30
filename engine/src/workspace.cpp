// SPDX-License-Identifier: Apache-2.0
// Directory loading and the cross-file checks that no single file can make.
#include <algorithm>
#include <map>
#include <tuple>

#include "capsule/load.hpp"
#include "capsule/resolve.hpp"
#include "capsule/text.hpp"
#include "load_internal.hpp"
#include "toml_reader.hpp"

namespace capsule {
namespace {

std::string position(const SourceLoc& where) { return str(where.file, ":", where.line, ":", where.column); }

/// A module named in `modules` that a `with_catalogs` module of the same name replaces.
bool replaced_by_prepended(const Profile& profile, std::string_view name) {
  return std::any_of(profile.with_modules.begin(), profile.with_modules.end(),
                     [&](const ModulePtr& m) { return m->name == name; });
}

/// What a directory entry is, for the message that refuses it.
std::string_view entry_kind(std::filesystem::file_type type) {
  using T = std::filesystem::file_type;
  switch (type) {
    case T::directory: return "a directory";
    case T::symlink: return "a symbolic link";
    case T::block: return "a block device";
    case T::character: return "a character device";
    case T::fifo: return "a FIFO";
    case T::socket: return "a socket";
    default: return "not a regular file";
  }
}

/// Note [Non-regular entries]: every `*.toml` entry of a catalog or profile directory must be a
/// regular file. A directory, FIFO, device, socket or symbolic link (wherever it points) named
/// `*.toml` is an error that names it, never skipped: a skipped file is a file nobody checked,
/// and a link's target is not what a reviewer sees in the directory's diff. `capsule diff --git`
/// applies the same rule to the revision's tree entries (symlinks, gitlinks, subtrees), so a
/// directory and a revision of it load alike (docs/security-notes/diff-git.md).
std::vector<std::filesystem::path> toml_files(const std::filesystem::path& dir, Diagnostics& out) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    out.push_back(Diagnostic{Severity::Error, DiagCode::IoError, SourceLoc{dir.string(), 0, 0},
                             "not a readable directory", {}, {}});
    return files;
  }
  // error_code overloads throughout: a dangling link or a symlink loop is a diagnostic, not a
  // crash.
  std::filesystem::directory_iterator it(dir, error);
  for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::filesystem::path& path = it->path();
    const std::string name = path.filename().string();
    if (path.extension() != ".toml" || name.ends_with(".graph.toml")) continue;
    std::error_code status;
    const std::filesystem::file_type type = it->symlink_status(status).type();
    if (status) {
      out.push_back(Diagnostic{Severity::Error, DiagCode::IoError, SourceLoc{path.string(), 0, 0},
                               str("cannot read: ", status.message()), {}, {}});
      continue;
    }
    if (type != std::filesystem::file_type::regular) {
      out.push_back(Diagnostic{Severity::Error, DiagCode::NonRegularFile, SourceLoc{path.string(), 0, 0},
                               str("`", name, "` is ", entry_kind(type), ", not a regular file; catalog and profile "
                                   "directories load only regular `*.toml` files"),
                               {},
                               "replace it with the file itself, or rename it so it does not end in `.toml`"});
      continue;
    }
    files.push_back(path);
  }
  if (error) {
    out.push_back(Diagnostic{Severity::Error, DiagCode::IoError, SourceLoc{dir.string(), 0, 0},
                             str("cannot list directory: ", error.message()), {}, {}});
  }
  std::sort(files.begin(), files.end());
  return files;
}

/// Checks one profile against the loaded modules; adds diagnostics at the profile's positions.
/// Duplicate identities (duplicate, first) of each distinct combination of modules.
using DuplicateCache = std::map<std::vector<const CapsuleModule*>, std::vector<std::pair<const Capsule*, const Capsule*>>>;

void check_profile_into(const Workspace& workspace, const Profile& profile, Diagnostics& out, DuplicateCache& duplicates) {
  std::vector<ModulePtr> modules;
  std::map<std::string_view, std::size_t> listed;
  for (std::size_t i = 0; i < profile.module_names.size(); ++i) {
    const std::string& name = profile.module_names[i];
    const SourceLoc where = i < profile.module_name_locs.size() ? profile.module_name_locs[i] : profile.where;
    if (auto [it, inserted] = listed.emplace(name, i); !inserted) {
      out.push_back(Diagnostic{Severity::Error, DiagCode::DuplicateModule, where,
                               str("duplicate backend capsule module `", name, "`"),
                               {str("profile `", profile.name, "` lists it twice in `modules`")}, {}});
      continue;
    }
    const auto failed = std::find_if(workspace.failed_modules.begin(), workspace.failed_modules.end(),
                                     [&](const auto& f) { return f.first == name; });
    if (workspace.find_module(name) == nullptr && !replaced_by_prepended(profile, name) &&
        failed != workspace.failed_modules.end()) {
      out.push_back(Diagnostic{Severity::Error, DiagCode::UnknownModule, where,
                               str("profile `", profile.name, "` names capsule module `", name,
                                   "`, whose catalog failed to load"),
                               {str("the catalog's first error is at ", position(failed->second))},
                               "fix that catalog; this profile loads once it does"});
      continue;
    }
    if (workspace.find_module(name) == nullptr && !replaced_by_prepended(profile, name)) {
      std::vector<std::string_view> names;
      for (const ModulePtr& m : workspace.modules) names.push_back(m->name);
      const std::string nearest = nearest_name(name, names);
      out.push_back(Diagnostic{Severity::Error, DiagCode::UnknownModule, where,
                               str("profile `", profile.name, "` names unknown capsule module `", clipped(name), "`"),
                               {str("loaded modules: ", join(std::vector<std::string>(names.begin(), names.end()), ", "))},
                               nearest.empty() ? std::string() : "did you mean `" + nearest + "`?"});
    }
  }
  auto resolved = profile_modules(workspace, profile);
  if (!resolved) return;
  // A module listed twice is already reported above; its capsules are not duplicates too.
  std::vector<const CapsuleModule*> visited;
  for (const ModulePtr& module : *resolved) {
    if (std::find(visited.begin(), visited.end(), module.get()) == visited.end()) visited.push_back(module.get());
  }
  // Profiles combining the same modules share one answer, computed once (issue 8, item 10:
  // thousands of profiles over one large catalog must not cost profiles x capsules).
  auto cached = duplicates.find(visited);
  if (cached == duplicates.end()) {
    // Identity duplicates across the modules this profile combines (TorchLean validateModules).
    using Identity = std::tuple<std::string_view, Op, Provider, Device>;
    std::map<Identity, const Capsule*> seen;
    std::vector<std::pair<const Capsule*, const Capsule*>> found;
    for (const CapsuleModule* module : visited) {
      for (const Capsule& c : module->capsules) {
        auto [it, inserted] = seen.emplace(Identity{c.name, c.op, c.provider, c.device}, &c);
        if (!inserted) found.emplace_back(&c, it->second);
      }
    }
    cached = duplicates.emplace(visited, std::move(found)).first;
  }
  for (const auto& [duplicate, first] : cached->second) {
    out.push_back(Diagnostic{Severity::Error, DiagCode::DuplicateIdentity, duplicate->where,
                             str("duplicate backend capsule identity `", duplicate->name, "`"),
                             {str("first declared at ", position(first->where)),
                              str("both are combined by profile `", profile.name, "` (", position(profile.where), ")")},
                             {}});
  }
}

/// Remembers the module a catalog that failed to load declares (read again, errors discarded:
/// they are already reported), with the position of its first error.
void record_failed_module(Workspace& workspace, const std::filesystem::path& file, std::size_t first_diagnostic) {
  SourceLoc first_error{file.string(), 0, 0};
  for (std::size_t i = first_diagnostic; i < workspace.diagnostics.size(); ++i) {
    if (workspace.diagnostics[i].severity == Severity::Error) {
      first_error = workspace.diagnostics[i].where;
      break;
    }
  }
  Diagnostics ignored;
  auto contents = detail::read_file(file.string(), ignored);
  if (!contents) return;
  auto root = detail::parse_toml(contents->text, file.string(), ignored);
  if (!root) return;
  if (const auto* name = root->get("module"); name != nullptr && name->as_string() != nullptr) {
    workspace.failed_modules.emplace_back(name->as_string()->get(), first_error);
  }
}

void add_profile(Workspace& workspace, ProfilePtr profile) {
  if (ProfilePtr existing = workspace.find_profile(profile->name)) {
    workspace.diagnostics.push_back(Diagnostic{Severity::Error, DiagCode::DuplicateProfile, profile->where,
                                               str("duplicate profile `", profile->name, "`"),
                                               {str("first declared at ", position(existing->where))}, {}});
    return;
  }
  workspace.profiles.push_back(std::move(profile));
}

}  // namespace

Date LoadOptions::today_utc() {
  return Date{std::chrono::floor<std::chrono::days>(std::chrono::system_clock::now())};
}

const CapsuleModule* Workspace::find_module(std::string_view name) const {
  for (const ModulePtr& module : modules) {
    if (module->name == name) return module.get();
  }
  return nullptr;
}

ProfilePtr Workspace::find_profile(std::string_view name) const {
  for (const ProfilePtr& profile : profiles) {
    if (profile->name == name) return profile;
  }
  return nullptr;
}

std::vector<std::string_view> Workspace::profile_names() const {
  std::vector<std::string_view> names;
  for (const ProfilePtr& profile : profiles) names.push_back(profile->name);
  return names;
}

Workspace load_workspace(const std::vector<std::filesystem::path>& catalog_dirs,
                         const std::vector<std::filesystem::path>& profile_dirs, const LoadOptions& options) {
  Workspace workspace;
  for (const auto& dir : catalog_dirs) {
    for (const auto& file : toml_files(dir, workspace.diagnostics)) {
      const std::size_t before = workspace.diagnostics.size();
      auto module = load_catalog(file, options, workspace.diagnostics);
      if (!module) {
        record_failed_module(workspace, file, before);
        continue;
      }
      if (const CapsuleModule* existing = workspace.find_module(module->name)) {
        workspace.diagnostics.push_back(Diagnostic{Severity::Error, DiagCode::DuplicateModule, module->where,
                                                   str("duplicate backend capsule module `", module->name, "`"),
                                                   {str("first declared at ", position(existing->where))}, {}});
        continue;
      }
      workspace.modules.push_back(std::make_shared<const CapsuleModule>(std::move(*module)));
    }
  }
  std::vector<Profile> incomplete;  // profiles with errors still get their module names checked
  for (const auto& dir : profile_dirs) {
    for (const auto& file : toml_files(dir, workspace.diagnostics)) {
      bool complete = false;
      auto profile = detail::load_profile_partial(file, options, workspace.diagnostics, complete);
      if (!profile) continue;
      if (complete) add_profile(workspace, std::make_shared<const Profile>(std::move(*profile)));
      else incomplete.push_back(std::move(*profile));
    }
  }
  DuplicateCache duplicates;
  if (options.check_every_profile) {
    for (const ProfilePtr& profile : workspace.profiles) {
      check_profile_into(workspace, *profile, workspace.diagnostics, duplicates);
    }
  }
  // A profile with errors is already a failure; its module names are checked in any case, so
  // that every problem in it is reported in one run.
  for (const Profile& profile : incomplete) check_profile_into(workspace, profile, workspace.diagnostics, duplicates);
  return workspace;
}

Diagnostics check_profile(const Workspace& workspace, const Profile& profile) {
  Diagnostics problems;
  DuplicateCache duplicates;
  check_profile_into(workspace, profile, problems, duplicates);
  return problems;
}

ProfilePtr add_profile_file(Workspace& workspace, const std::filesystem::path& file, const LoadOptions& options) {
  auto profile = load_profile(file, options, workspace.diagnostics);
  if (!profile) return nullptr;
  auto shared = std::make_shared<const Profile>(std::move(*profile));
  Diagnostics problems = check_profile(workspace, *shared);
  const bool rejected = has_errors(problems);
  workspace.diagnostics.insert(workspace.diagnostics.end(), problems.begin(), problems.end());
  if (rejected) return nullptr;
  // A file given by path replaces a loaded profile of the same name: the user asked for it.
  std::erase_if(workspace.profiles, [&](const ProfilePtr& p) { return p->name == shared->name; });
  workspace.profiles.push_back(shared);
  return shared;
}

Result<std::vector<ModulePtr>, std::string> profile_modules(const Workspace& workspace, const Profile& profile) {
  std::vector<ModulePtr> base;
  for (const std::string& name : profile.module_names) {
    if (replaced_by_prepended(profile, name)) continue;
    const auto found = std::find_if(workspace.modules.begin(), workspace.modules.end(),
                                    [&](const ModulePtr& m) { return m->name == name; });
    if (found == workspace.modules.end()) return fail(str("unknown capsule module `", name, "`"));
    base.push_back(*found);
  }
  return with_capsule_modules(base, profile.with_modules);
}

Result<ResolvedProfile, std::string> resolve_profile(const Workspace& workspace, const ProfilePtr& profile) {
  auto modules = profile_modules(workspace, *profile);
  if (!modules) return fail(modules.error());
  std::vector<SourceFile> sources;
  sources.push_back(profile->source);
  for (const ModulePtr& module : *modules) {
    if (!module->source.path.empty()) sources.push_back(module->source);
  }
  auto registry = Registry::from_modules(std::move(*modules));
  if (!registry) return fail(registry.error());
  return ResolvedProfile{profile, Planner(std::move(*registry), profile->availability, profile->policy),
                         std::move(sources)};
}

}  // namespace capsule
