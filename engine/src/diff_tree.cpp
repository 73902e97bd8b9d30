// SPDX-License-Identifier: Apache-2.0
// The trees the trust diff compares: a directory on disk, or the catalogs and profiles of a git
// revision extracted blob by blob into a scratch directory.
#include "capsule/diff.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>

#include "capsule/text.hpp"

namespace capsule {
namespace {

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

struct CommandResult {
  int status = -1;
  std::string output;
};

/// Runs `command` through the shell and captures its stdout. Messages and paths lose their
/// trailing newlines; file contents (`keep_trailing_space`) are kept byte for byte.
CommandResult run_command(const std::string& command, bool keep_trailing_space = false) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    result.output = "cannot start a shell";
    return result;
  }
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  if (status != -1 && WIFEXITED(status)) result.status = WEXITSTATUS(status);
  while (!keep_trailing_space && !result.output.empty() &&
         (result.output.back() == '\n' || result.output.back() == '\r')) {
    result.output.pop_back();
  }
  return result;
}
}  // namespace

Result<Tree, Diagnostics> load_tree(const std::filesystem::path& root, std::string label, const LoadOptions& options) {
  // A tree without catalogs/ or profiles/ (say, the base of the pull request that adds them) is
  // an empty tree, not an unreadable one.
  std::vector<std::filesystem::path> catalogs;
  std::vector<std::filesystem::path> profiles;
  std::error_code error;
  if (std::filesystem::exists(root / "catalogs", error)) catalogs.push_back(root / "catalogs");
  if (std::filesystem::exists(root / "profiles", error)) profiles.push_back(root / "profiles");
  Tree tree{load_workspace(catalogs, profiles, options), std::move(label), root};
  if (has_errors(tree.workspace.diagnostics)) return fail(std::move(tree.workspace.diagnostics));
  return tree;
}

Result<std::filesystem::path, std::string> materialize_git_tree(std::string_view rev,
                                                                const std::filesystem::path& repo_dir,
                                                                const std::filesystem::path& scratch_dir) {
  // A revision starting with '-' would be read as an option by git, quoting or not.
  if (rev.empty() || rev.front() == '-') return fail(str("invalid git revision `", rev, "`"));
  std::error_code error;
  std::filesystem::create_directories(scratch_dir, error);
  if (error) return fail(str("cannot create ", scratch_dir.string(), ": ", error.message()));
  const std::filesystem::path scratch = std::filesystem::absolute(scratch_dir, error);
  if (error) return fail(str("cannot resolve ", scratch_dir.string(), ": ", error.message()));
  // Pathspecs are relative to git's working directory: work from the top level so any directory
  // inside the repository works. stderr is dropped here so a warning cannot become the path.
  const CommandResult top =
      run_command(str("git -C ", shell_quote(repo_dir.string()), " rev-parse --show-toplevel 2>/dev/null"));
  if (top.status != 0 || top.output.empty()) {
    return fail(str("`", repo_dir.string(), "` is not inside a git repository"));
  }
  const std::string top_dir = top.output;
  const CommandResult verify =
      run_command(str("git -C ", shell_quote(top_dir), " rev-parse --verify --quiet ", shell_quote(str(rev, "^{commit}")),
                      " 2>&1"));
  if (verify.status != 0) return fail(str("`", rev, "` is not a commit of the repository at ", top_dir));
  // The blobs exactly as committed: `git archive` would apply the revision's own .gitattributes
  // (export-ignore, export-subst), so a change could hide itself from review.
  const CommandResult listing = run_command(str("git -C ", shell_quote(top_dir), " ls-tree -r -z --name-only ",
                                                shell_quote(rev), " -- catalogs profiles 2>&1"));
  if (listing.status != 0) {
    return fail(str("listing `", rev, "` failed: ", listing.output.empty() ? "no output" : listing.output));
  }
  for (std::string_view dir : {"catalogs", "profiles"}) {
    std::filesystem::create_directories(scratch / dir, error);
    if (error) return fail(str("cannot create ", (scratch / dir).string(), ": ", error.message()));
  }
  std::size_t start = 0;
  while (start < listing.output.size()) {
    std::size_t stop = listing.output.find('\0', start);
    if (stop == std::string::npos) stop = listing.output.size();
    const std::string path = listing.output.substr(start, stop - start);
    start = stop + 1;
    if (path.empty()) continue;
    // ls-tree names paths under catalogs/ or profiles/ only; refuse anything that would climb out.
    const std::filesystem::path relative = std::filesystem::path(path).lexically_normal();
    if (relative.is_absolute() || relative.empty() || *relative.begin() == "..") {
      return fail(str("refusing path `", path, "` from `", rev, "`"));
    }
    const CommandResult blob = run_command(str("git -C ", shell_quote(top_dir), " cat-file blob ",
                                               shell_quote(str(rev, ":", path)), " 2>/dev/null"),
                                           /*keep_trailing_space=*/true);
    if (blob.status != 0) return fail(str("reading `", rev, ":", path, "` failed"));
    const std::filesystem::path target = scratch / relative;
    std::filesystem::create_directories(target.parent_path(), error);
    std::ofstream out(target, std::ios::binary);
    out << blob.output;
    if (!out) return fail(str("cannot write ", target.string()));
  }
  return scratch;
}

}  // namespace capsule
