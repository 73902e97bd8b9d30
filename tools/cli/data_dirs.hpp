// SPDX-License-Identifier: Apache-2.0
// Where a command's catalogs and profiles come from. One rule, documented in docs/decisions.md
// ("Where capsule finds its data"), chosen so that capsule never reads some other tree while the
// user edits their own: the working directory's project comes before anything installed, the
// source tree the binary was built from is never a default, and every command names the folders
// it loaded.
#pragma once

#include <boost/program_options.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "cli.hpp"

namespace capsule::cli {

struct DataDirs {
  std::vector<std::filesystem::path> catalogs;
  std::vector<std::filesystem::path> profiles;
  /// Why these: "--catalogs", "CAPSULE_PROFILES", "--root", "working directory", "installed data".
  std::string catalogs_from;
  std::string profiles_from;
};

/// For each of catalogs and profiles: the `--catalogs`/`--profiles` flags, else the
/// CAPSULE_CATALOGS/CAPSULE_PROFILES variables, else ROOT/catalogs and ROOT/profiles of one data
/// root: `--root DIR`, else the nearest of the working directory and its parents that holds
/// catalogs/ or profiles/, else the data installed next to the binary. A root must hold at least
/// one of the two folders; the other is then an empty set, said so in the data line.
/// Throws UsageError when no data can be found.
DataDirs data_dirs(const boost::program_options::variables_map& vm, const Environment& env);

/// The line every command prints on standard error: which folders it loaded, and why.
std::string data_dirs_line(const DataDirs& dirs);

}  // namespace capsule::cli
