// SPDX-License-Identifier: Apache-2.0
// The files lint may read to check provenance. A catalog is written by whoever opened the pull
// request, so a provenance path is hostile: it may climb out of the tree, run through a symlink
// to /proc/self/environ, or name `.git/config` (which can hold a CI token). The rule:
//   - in a git work tree, only files the index tracks, asked of `git ls-files -z` (spawned
//     without a shell); outside one, any regular file beneath the root;
//   - never a path with a `.git` component, `..`, or an absolute path;
//   - opened relative to the root's descriptor without following any symbolic link
//     (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, or component
//     by component with O_NOFOLLOW where openat2 is unavailable), never resolved then opened;
//   - only regular files, and at most kMaxProvenanceBytes of each.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace capsule::detail {

/// The most lint reads of one provenance file; a larger file is reported, not read in part.
inline constexpr std::size_t kMaxProvenanceBytes = std::size_t{8} << 20;

/// A file lint tried to read, or why it could not.
struct SourceRead {
  enum class Status { Read, NotEligible, Missing, NotRegular, SymbolicLink, TooLarge, Unreadable };
  Status status = Status::Missing;
  std::string text;  ///< the contents, when Read
};

/// One line saying why a read failed (no file contents, only the rule that refused it).
std::string_view describe(SourceRead::Status status);

/// Opens `relative` beneath the directory `root_fd` without following any symbolic link.
/// Returns a descriptor or -1 with errno set (ELOOP or ENOTDIR for a link on the way, EXDEV for
/// an escape). `use_openat2 = false` forces the component-by-component path (for tests).
int open_beneath(int root_fd, std::string_view relative, int flags, bool use_openat2 = true);

/// The top directory of the git work tree holding `dir`, as a lexical ancestor of `dir`'s
/// absolute path (so paths under it stay relative), or nullopt outside a work tree or without git.
std::optional<std::filesystem::path> git_work_tree_top(const std::filesystem::path& dir);

/// Whether `dir` or a directory above it has a `.git` entry: a repository, whether or not git can
/// read it. Where git_work_tree_top finds nothing but this holds, git refused the repository
/// (safe.directory, a broken `.git`) or is missing, and the tree's extent is unknown.
bool inside_repository(const std::filesystem::path& dir);

class SourceTree {
 public:
  /// Opens `root`. Never throws; `problem()` says why the tree cannot be read.
  explicit SourceTree(const std::filesystem::path& root, bool use_openat2 = true);
  ~SourceTree();
  SourceTree(const SourceTree&) = delete;
  SourceTree& operator=(const SourceTree&) = delete;

  /// Empty when the tree can be read; else why not (a missing root, git refusing to list).
  const std::string& problem() const { return problem_; }
  bool tracked_by_git() const { return git_; }
  /// The rule lint reads this tree under, for notes.
  std::string rule() const;

  /// The normal relative form of `path`, or nullopt when it is absolute, climbs out, or names
  /// something under `.git`.
  static std::optional<std::string> eligible_path(std::string_view path);

  /// Reads a file the rule allows, bounded by kMaxProvenanceBytes.
  SourceRead read(std::string_view relative) const;

  /// Names of readable files in the directory `relative_dir` ("" for the root), for "did you
  /// mean": plain ASCII names of at most 128 characters, never `.git`.
  std::vector<std::string> names_in(std::string_view relative_dir) const;

 private:
  int root_fd_ = -1;
  bool git_ = false;
  bool use_openat2_ = true;
  std::set<std::string, std::less<>> tracked_;
  std::string problem_;
};

}  // namespace capsule::detail
