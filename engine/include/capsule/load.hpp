// SPDX-License-Identifier: Apache-2.0
// TOML loaders for catalogs, profiles and graphs (docs/format.md), built on toml++. Each
// loader reports every problem it finds, with file:line:col and a stable code, into a
// `Diagnostics` sink and returns a value only when the file had no error. `load_workspace`
// loads whole directories and adds the cross-file checks (duplicate modules and profiles,
// unknown modules, duplicate identities within a profile's registry).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/catalog.hpp"
#include "capsule/diag.hpp"

namespace capsule {

struct LoadOptions {
  /// The date trust expiry is judged against. Defaults to the system clock's today.
  Date today = today_utc();
  /// Whether `load_workspace` checks every profile against the modules it combines (duplicate
  /// identities, unknown modules). `lint` must; a command that works under one named profile
  /// leaves it off and calls `check_profile` on that one, so its cost does not grow with
  /// profiles x capsules.
  bool check_every_profile = true;

  static Date today_utc();
};

/// Parses catalog text (docs/format.md#catalogs); `path` names it in diagnostics. Returns the module only when
/// no error was reported; warnings (expired trust) still return it.
std::optional<CapsuleModule> parse_catalog(std::string_view text, const std::string& path,
                                           const LoadOptions& options, Diagnostics& out);
/// Reads and parses a catalog file and records its SHA-256.
std::optional<CapsuleModule> load_catalog(const std::filesystem::path& file,
                                          const LoadOptions& options, Diagnostics& out);

/// Parses profile text (docs/format.md#profiles). `with_catalogs` are recorded, not loaded (see load_profile).
std::optional<Profile> parse_profile(std::string_view text, const std::string& path,
                                     const LoadOptions& options, Diagnostics& out);
/// Loads a profile and, relative to it, the catalogs named by `with_catalogs`; `-` (kStdinPath,
/// below) reads standard input.
std::optional<Profile> load_profile(const std::filesystem::path& file, const LoadOptions& options,
                                    Diagnostics& out);

/// Parses an IR graph (docs/format.md#graphs): unique ids, inputs naming earlier nodes, known node kinds.
std::optional<Graph> parse_graph(std::string_view text, const std::string& path, Diagnostics& out);
/// Reads and parses a graph file and records its SHA-256; `-` (kStdinPath, below) reads standard
/// input.
std::optional<Graph> load_graph(const std::filesystem::path& file, Diagnostics& out);

/// Everything a command works from. Modules and profiles are shared, immutable values.
struct Workspace {
  std::vector<ModulePtr> modules;    ///< in file-name order across the catalog directories
  std::vector<ProfilePtr> profiles;  ///< in file-name order across the profile directories
  Diagnostics diagnostics;           ///< errors and warnings from every file
  /// Modules whose catalog failed to load, by the `module` name the file declares, with the
  /// position of the file's first error: a profile naming one is told why it is missing.
  std::vector<std::pair<std::string, SourceLoc>> failed_modules;

  const CapsuleModule* find_module(std::string_view name) const;
  ProfilePtr find_profile(std::string_view name) const;
  /// Loaded profile names, for "did you mean" on an unknown `--profile`.
  std::vector<std::string_view> profile_names() const;
};

/// The path that means standard input to load_graph, load_profile and load_waivers (the
/// command-line convention): the whole of standard input is read once, to the size limit of a
/// file, and diagnostics and the source name it `<stdin>`. A profile read so resolves its
/// `with_catalogs` against the working directory.
inline constexpr std::string_view kStdinPath = "-";

/// Loads every `*.toml` in the given directories (graph files, `*.graph.toml`, are skipped).
Workspace load_workspace(const std::vector<std::filesystem::path>& catalog_dirs,
                         const std::vector<std::filesystem::path>& profile_dirs,
                         const LoadOptions& options = {});

/// Checks one loaded profile against the workspace's modules (what `load_workspace` does for
/// every profile when `check_every_profile` is set): unknown or repeated modules, duplicate
/// identities among the modules it combines.
Diagnostics check_profile(const Workspace& workspace, const Profile& profile);

/// Adds one profile file to a workspace (for `--profile FILE`), with the same cross-checks.
ProfilePtr add_profile_file(Workspace& workspace, const std::filesystem::path& file,
                            const LoadOptions& options = {});

}  // namespace capsule
