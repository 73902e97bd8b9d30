// SPDX-License-Identifier: Apache-2.0
// Reading provenance files under lint's rule (see source_tree.hpp).
#include "capsule/source_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "capsule/text.hpp"
#include "spawn.hpp"

#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define CAPSULE_HAVE_OPENAT2 1
#endif

namespace capsule::detail {
namespace {

namespace fs = std::filesystem;

/// `git ls-files` of a huge monorepo stays well under this; more is refused, not truncated.
constexpr std::size_t kMaxGitOutput = std::size_t{256} << 20;
constexpr std::size_t kMaxSuggestedName = 128;

bool is_git_component(std::string_view name) {
  if (name.size() != 4) return false;
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return lower == ".git";
}

/// A name safe to print in a "did you mean": plain ASCII file-name characters, bounded length.
bool printable_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxSuggestedName || is_git_component(name)) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-' || c == '+';
  });
}

/// What git said, or why it could not be asked.
struct GitAnswer {
  bool started = false;   ///< false: no git program (or no pipe)
  int exit_status = -1;
  bool truncated = false;
  std::string out;
};

/// Runs git with no shell (detail::run_program), keeping at most kMaxGitOutput bytes.
GitAnswer ask_git(const std::vector<std::string>& args) {
  GitAnswer answer;
  auto output = detail::run_program(args, kMaxGitOutput);
  if (!output) return answer;
  answer.started = true;
  answer.exit_status = output->exit_code;
  answer.truncated = output->truncated;
  answer.out = std::move(output->out);
  return answer;
}

std::vector<std::string> git_args(const fs::path& root, std::initializer_list<const char*> command) {
  // A repository's own config may name an fsmonitor hook; listing files must run nothing else.
  std::vector<std::string> args{"git", "-c", "core.fsmonitor=false", "-C", root.string()};
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

std::vector<std::string_view> components(std::string_view relative) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= relative.size()) {
    const std::size_t slash = relative.find('/', start);
    const std::size_t end = slash == std::string_view::npos ? relative.size() : slash;
    if (end > start) parts.push_back(relative.substr(start, end - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return parts;
}

int open_by_components(int root_fd, std::string_view relative, int flags) {
  const std::vector<std::string_view> parts = components(relative);
  if (parts.empty()) {
    errno = ENOENT;
    return -1;
  }
  int dir = root_fd;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == "." || parts[i] == "..") {
      if (dir != root_fd) close(dir);
      errno = EXDEV;
      return -1;
    }
    const std::string name(parts[i]);
    const bool last = i + 1 == parts.size();
    const int next = openat(dir, name.c_str(),
                            last ? (flags | O_NOFOLLOW | O_CLOEXEC) : (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    const int saved = errno;
    if (dir != root_fd) close(dir);
    if (next < 0) {
      errno = saved;
      return -1;
    }
    dir = next;
  }
  return dir;
}

}  // namespace

bool inside_repository(const fs::path& dir) {
  std::error_code error;
  fs::path at = fs::absolute(dir, error).lexically_normal();
  for (;;) {
    struct stat info{};
    if (lstat((at / ".git").c_str(), &info) == 0) return true;
    if (!at.has_relative_path()) return false;
    at = at.parent_path();
  }
}

std::string_view describe(SourceRead::Status status) {
  switch (status) {
    case SourceRead::Status::Read: return "read";
    case SourceRead::Status::NotEligible: return "not a file lint may read (absolute, climbing out, or under .git)";
    case SourceRead::Status::Missing: return "no such file";
    case SourceRead::Status::NotRegular: return "not a regular file";
    case SourceRead::Status::SymbolicLink: return "a symbolic link is on the path, and lint never follows links";
    case SourceRead::Status::TooLarge: return "larger than the 8 MiB lint reads of a provenance file";
    case SourceRead::Status::Unreadable: return "cannot be read";
  }
  return "cannot be read";
}

int open_beneath(int root_fd, std::string_view relative, int flags, bool use_openat2) {
  if (relative.find('\0') != std::string_view::npos) {
    errno = EINVAL;
    return -1;
  }
#if defined(CAPSULE_HAVE_OPENAT2) && defined(SYS_openat2)
  if (use_openat2) {
    open_how how{};
    how.flags = static_cast<unsigned>(flags | O_CLOEXEC | O_NOFOLLOW);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const std::string path(relative);
    for (;;) {
      const long fd = syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof how);
      if (fd >= 0) return static_cast<int>(fd);
      if (errno == EINTR || errno == EAGAIN) continue;
      // Kernels before 5.6 (ENOSYS) and seccomp filters that refuse the call (EPERM) get the
      // component walk, which enforces the same rule.
      if (errno != ENOSYS && errno != EPERM) return -1;
      break;
    }
  }
#else
  (void)use_openat2;
#endif
  return open_by_components(root_fd, relative, flags);
}

std::optional<fs::path> git_work_tree_top(const fs::path& dir) {
  const GitAnswer top = ask_git(git_args(dir, {"rev-parse", "--show-toplevel"}));
  if (!top.started || top.exit_status != 0 || top.truncated) return std::nullopt;
  std::string text = top.out;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) return std::nullopt;
  std::error_code error;
  const fs::path wanted = fs::weakly_canonical(text, error);
  if (error) return std::nullopt;
  // git prints the real path; annotations need the spelling the catalogs were loaded under.
  for (fs::path at = fs::absolute(dir, error).lexically_normal();; at = at.parent_path()) {
    std::error_code same;
    if (fs::weakly_canonical(at, same) == wanted && !same) return at;
    if (!at.has_relative_path()) break;
  }
  return wanted;
}

SourceTree::SourceTree(const fs::path& root, bool use_openat2) : use_openat2_(use_openat2) {
  for (const fs::path& part : fs::absolute(root).lexically_normal()) {
    if (is_git_component(part.string())) {
      problem_ = "the source root lies inside a .git directory";
      return;
    }
  }
  root_fd_ = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd_ < 0) {
    problem_ = errno == ENOENT ? "the source root does not exist"
               : errno == ENOTDIR ? "the source root is not a directory"
                                  : std::string(std::strerror(errno));
    return;
  }
  const GitAnswer probe = ask_git(git_args(root, {"rev-parse", "--is-inside-work-tree"}));
  if (probe.started && probe.exit_status == 0) {
    if (probe.out.rfind("true", 0) != 0) {
      problem_ = "the source root lies inside a git directory, not a work tree";
      return;
    }
    const GitAnswer listed = ask_git(git_args(root, {"ls-files", "-z", "--cached"}));
    if (!listed.started || listed.exit_status != 0 || listed.truncated) {
      problem_ = listed.truncated ? "git lists more tracked files than lint reads"
                                  : str("git could not list the tracked files (exit status ", listed.exit_status, ")");
      return;
    }
    git_ = true;
    for (std::size_t start = 0; start < listed.out.size();) {
      const std::size_t end = std::min(listed.out.find('\0', start), listed.out.size());
      if (end > start) tracked_.emplace(listed.out.substr(start, end - start));
      start = end + 1;
    }
    return;
  }
  // No git, or git refused (not a repository, safe.directory, ...). Outside any repository
  // every regular file beneath the root is eligible; inside one, reading untracked files would
  // be a silent fallback, so the tree is refused.
  if (inside_repository(root)) {
    problem_ = probe.started ? str("the source root is in a git repository, but git refused to list its tracked files "
                                      "(exit status ", probe.exit_status, "; check safe.directory)")
                             : "the source root is in a git repository, but no `git` program was found to list its "
                               "tracked files";
  }
}

SourceTree::~SourceTree() {
  if (root_fd_ >= 0) close(root_fd_);
}

std::string SourceTree::rule() const {
  return git_ ? "only files git tracks, never under .git, never through a symbolic link"
              : "only regular files beneath it, never under .git, never through a symbolic link";
}

std::optional<std::string> SourceTree::eligible_path(std::string_view path) {
  if (path.empty() || path.front() == '/' || path.find('\0') != std::string_view::npos) return std::nullopt;
  const fs::path normal = fs::path(std::string(path)).lexically_normal();
  if (normal.empty() || normal.is_absolute()) return std::nullopt;
  for (const fs::path& part : normal) {
    const std::string name = part.string();
    if (name == ".." || is_git_component(name)) return std::nullopt;
  }
  std::string text = normal.generic_string();
  if (text == "." || text.ends_with('/')) return std::nullopt;
  return text;
}

SourceRead SourceTree::read(std::string_view relative) const {
  SourceRead result;
  const std::optional<std::string> path = eligible_path(relative);
  if (!path || root_fd_ < 0) {
    result.status = SourceRead::Status::NotEligible;
    return result;
  }
  if (git_ && tracked_.find(*path) == tracked_.end()) {
    result.status = SourceRead::Status::Missing;  // untracked files are not part of the revision
    return result;
  }
  // O_NONBLOCK: a FIFO must not hang lint; the descriptor is checked to be a regular file.
  const int fd = open_beneath(root_fd_, *path, O_RDONLY | O_NOCTTY | O_NONBLOCK, use_openat2_);
  if (fd < 0) {
    result.status = errno == ENOENT ? SourceRead::Status::Missing
                    : (errno == ELOOP || errno == ENOTDIR || errno == EXDEV) ? SourceRead::Status::SymbolicLink
                                                                              : SourceRead::Status::Unreadable;
    if (errno == ENOTDIR) {
      // A plain file used as a directory is missing, not a link; tell them apart.
      result.status = SourceRead::Status::Missing;
      for (std::size_t slash = path->find('/'); slash != std::string::npos; slash = path->find('/', slash + 1)) {
        struct stat info{};
        if (fstatat(root_fd_, path->substr(0, slash).c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(info.st_mode)) {
          result.status = SourceRead::Status::SymbolicLink;
        }
      }
    }
    return result;
  }
  struct stat info{};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    result.status = SourceRead::Status::NotRegular;
    return result;
  }
  if (static_cast<std::uint64_t>(info.st_size) > kMaxProvenanceBytes) {
    close(fd);
    result.status = SourceRead::Status::TooLarge;
    return result;
  }
  // The size may change while reading: the bound is enforced on the bytes, not on fstat.
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      close(fd);
      result.status = SourceRead::Status::Unreadable;
      return result;
    }
    if (got == 0) break;
    if (text.size() + static_cast<std::size_t>(got) > kMaxProvenanceBytes) {
      close(fd);
      result.status = SourceRead::Status::TooLarge;
      return result;
    }
    text.append(buffer, static_cast<std::size_t>(got));
  }
  close(fd);
  result.status = SourceRead::Status::Read;
  result.text = std::move(text);
  return result;
}

std::vector<std::string> SourceTree::names_in(std::string_view relative_dir) const {
  std::vector<std::string> names;
  if (root_fd_ < 0) return names;
  std::string dir;
  if (!relative_dir.empty()) {
    const std::optional<std::string> normal = eligible_path(relative_dir);
    if (!normal) return names;
    dir = *normal;
  }
  if (git_) {
    const std::string prefix = dir.empty() ? std::string() : dir + "/";
    for (auto it = tracked_.lower_bound(prefix); it != tracked_.end() && it->starts_with(prefix); ++it) {
      const std::string_view rest = std::string_view(*it).substr(prefix.size());
      if (rest.find('/') == std::string_view::npos && printable_name(rest)) names.emplace_back(rest);
    }
    return names;
  }
  const int fd = dir.empty() ? dup(root_fd_) : open_beneath(root_fd_, dir, O_RDONLY | O_DIRECTORY, use_openat2_);
  if (fd < 0) return names;
  DIR* stream = fdopendir(fd);
  if (stream == nullptr) {
    close(fd);
    return names;
  }
  while (const dirent* entry = readdir(stream)) {
    const std::string_view name = entry->d_name;
    if (!printable_name(name) || name == "." || name == "..") continue;
    struct stat info{};
    if (fstatat(dirfd(stream), entry->d_name, &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(info.st_mode)) {
      names.emplace_back(name);
    }
  }
  closedir(stream);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace capsule::detail
