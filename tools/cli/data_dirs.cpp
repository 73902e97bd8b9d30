// SPDX-License-Identifier: Apache-2.0
#include "data_dirs.hpp"

#include <cstdlib>
#include <optional>
#include <sstream>

#include "capsule/escape.hpp"
#include "cli_support.hpp"

namespace capsule::cli {
namespace {

bool is_dir(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}

bool holds_data(const fs::path& dir) { return is_dir(dir / "catalogs") || is_dir(dir / "profiles"); }

struct Root {
  fs::path dir;
  std::string why;
};

/// `--root`, else the working directory or the nearest parent holding data, else the installed data.
Root data_root(const po::variables_map& vm, const Environment& env) {
  if (vm.count("root")) {
    const fs::path dir = vm["root"].as<std::string>();
    if (!is_dir(dir)) throw UsageError{str("--root: `", dir.string(), "` is not a directory")};
    if (!holds_data(dir)) {
      throw UsageError{str("--root: `", dir.string(), "` holds neither catalogs/ nor profiles/; nothing to load")};
    }
    return {dir, "--root"};
  }
  std::error_code error;
  fs::path start = env.working_dir.empty() ? fs::current_path(error) : env.working_dir;
  if (!error) {
    start = fs::absolute(start, error).lexically_normal();
    for (fs::path dir = start; !error; dir = dir.parent_path()) {
      if (holds_data(dir)) return {dir, dir == start ? "working directory" : "nearest parent of the working directory"};
      if (dir == dir.parent_path()) break;
    }
  }
  const fs::path installed = (env.executable_dir / ".." / CAPSULE_DATA_SUBDIR).lexically_normal();
  if (!env.executable_dir.empty() && holds_data(installed)) return {installed, "installed data"};
  throw UsageError{str("no catalogs/ or profiles/ in `", start.string(), "` or any parent directory, and no data installed at `",
                       installed.string(), "`; run from your project, or pass --root DIR or --catalogs DIR --profiles DIR")};
}

std::vector<fs::path> from_flag(const po::variables_map& vm, const char* flag) {
  std::vector<fs::path> dirs;
  if (vm.count(flag)) {
    for (const std::string& dir : vm[flag].as<std::vector<std::string>>()) dirs.emplace_back(dir);
  }
  return dirs;
}

std::optional<std::vector<fs::path>> from_variable(const char* variable) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return split_paths(value);
}

std::string folders_words(const std::vector<fs::path>& dirs) {
  if (dirs.empty()) return "none";
  std::vector<std::string> names;
  for (const fs::path& d : dirs) names.push_back(d.string());
  return join(names, ", ");
}

}  // namespace

DataDirs data_dirs(const po::variables_map& vm, const Environment& env) {
  DataDirs dirs;
  std::optional<Root> root;
  if (vm.count("root")) root = data_root(vm, env);  // checked even when flags name both folders
  const auto pick = [&](const char* flag, const char* variable, const char* leaf, std::vector<fs::path>& out,
                        std::string& from) {
    if (out = from_flag(vm, flag); !out.empty()) {
      from = str("--", flag);
      return;
    }
    if (auto listed = from_variable(variable)) {
      out = std::move(*listed);
      from = variable;
      return;
    }
    if (!root) root = data_root(vm, env);
    // A root holds at least one of the two folders; a missing one is an empty set, not an error,
    // and the data line says so.
    if (is_dir(root->dir / leaf)) {
      out = {(root->dir / leaf).lexically_normal()};
      from = root->why;
    } else {
      from = str(root->why, "; `", root->dir.string(), "` has no ", leaf, "/");
    }
  };
  pick("catalogs", "CAPSULE_CATALOGS", "catalogs", dirs.catalogs, dirs.catalogs_from);
  pick("profiles", "CAPSULE_PROFILES", "profiles", dirs.profiles, dirs.profiles_from);
  return dirs;
}

std::string data_dirs_line(const DataDirs& dirs) {
  return str("capsule: catalogs: ", text_escape(folders_words(dirs.catalogs)), " (", text_escape(dirs.catalogs_from),
             "); profiles: ", text_escape(folders_words(dirs.profiles)), " (", text_escape(dirs.profiles_from), ")\n");
}

}  // namespace capsule::cli
