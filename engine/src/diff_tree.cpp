// SPDX-License-Identifier: Apache-2.0
// The trees the trust diff compares: a directory on disk, or the catalogs and profiles of a git
// revision. A revision is read blob by blob through git (posix_spawn, no shell) into a private
// scratch directory, and only what the revision holds is ever written there, so the loaders that
// then read the scratch copy cannot reach a file the reviewer never saw.
#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "capsule/diff.hpp"
#include "capsule/text.hpp"
#include "load_internal.hpp"
#include "spawn.hpp"

namespace capsule {
namespace {

namespace fs = std::filesystem;

/// No catalog or profile is near this size; a larger blob is refused before it is read, so a
/// revision cannot exhaust memory through the diff.
constexpr std::size_t kMaxBlobBytes = 16u << 20;

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t stop = std::min(text.find(separator, start), text.size());
    parts.emplace_back(text.substr(start, stop - start));
    start = stop + 1;
  }
  if (!parts.empty() && parts.back().empty()) parts.pop_back();  // a trailing separator ends the last part
  return parts;
}

Diagnostic git_error(std::string where, std::string message, std::vector<std::string> notes = {}, std::string help = {}) {
  return Diagnostic{Severity::Error, DiagCode::GitError, SourceLoc{std::move(where), 0, 0}, std::move(message),
                    std::move(notes), std::move(help)};
}

/// git's own complaint, as note lines: control characters become `?` and the text is bounded,
/// so neither a path in it nor its length can forge or flood the report.
std::vector<std::string> git_said(std::string_view text) {
  std::vector<std::string> lines;
  std::string line;
  const auto flush = [&] {
    if (!line.empty() && lines.size() < 12) lines.push_back("git: " + line);
    line.clear();
  };
  for (const char c : text.substr(0, 4096)) {
    if (c == '\n') {
      flush();
    } else if (line.size() < 300) {
      const auto byte = static_cast<unsigned char>(c);
      line += byte < 0x20 || byte == 0x7f ? '?' : c;
    }
  }
  flush();
  return lines;
}

/// One entry of a git tree, as `git ls-tree` prints it.
struct TreeEntry {
  std::string mode;    ///< 100644, 100755 (files), 120000 (symlink), 040000 (tree), 160000 (gitlink)
  std::string type;    ///< blob, tree or commit
  std::string object;  ///< its object id
  std::string name;
};

bool regular(const TreeEntry& e) { return e.type == "blob" && (e.mode == "100644" || e.mode == "100755"); }

std::string entry_kind(const TreeEntry& e) {
  if (e.mode == "120000") return "a symbolic link";
  if (e.type == "tree") return "a directory";
  if (e.type == "commit") return "a submodule (gitlink)";
  return str("an entry of mode ", e.mode);
}

/// Reads one revision of one repository. Each command names the commit by its full object id,
/// resolved once, so a revision name can never be taken for a path or an option afterwards.
class GitRevision {
 public:
  static Result<GitRevision, Diagnostics> open(std::string_view rev, const fs::path& repo_dir);

  const std::string& rev() const { return rev_; }
  const std::string& prefix() const { return prefix_; }
  /// `rev:path`, how diagnostics name a file of the revision.
  std::string name(std::string_view path) const { return str(rev_, ":", path); }

  /// The entries of the directory `path` ("" for the top), or nullopt when the revision has no
  /// directory there. Cached: profiles naming files in one directory list it once.
  Result<std::optional<std::vector<TreeEntry>>, Diagnostics> list(const std::string& path);
  /// The content of blob `object`.
  Result<std::string, Diagnostics> blob(const std::string& object, const std::string& path);

 private:
  std::vector<std::string> git(std::vector<std::string> args) const {
    // --no-replace-objects: refs/replace could make an object read as another one.
    std::vector<std::string> argv{"git", "--no-replace-objects", "-C", top_};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  std::string rev_;
  std::string top_;
  std::string prefix_;  ///< "" or "ml/": the named directory, relative to the top
  std::string commit_;
  std::map<std::string, std::optional<std::vector<TreeEntry>>> listings_;
  std::optional<detail::Conversation> cat_file_;
};

Result<GitRevision, Diagnostics> GitRevision::open(std::string_view rev, const fs::path& repo_dir) {
  const std::string dir = repo_dir.string();
  // A revision starting with '-' would be read as an option by git.
  if (rev.empty() || rev.front() == '-' || rev.find('\0') != std::string_view::npos) {
    return fail(Diagnostics{git_error(dir, str("invalid git revision `", rev, "`"))});
  }
  GitRevision out;
  out.rev_ = std::string(rev);
  auto where = detail::run_program({"git", "-C", dir, "rev-parse", "--show-toplevel", "--show-prefix"});
  if (!where) {
    return fail(Diagnostics{git_error(dir, where.error(), {}, "install git, or compare two directories without --git")});
  }
  if (where->exit_code != 0) {
    // Not a repository, or one git refuses to read (safe.directory: "dubious ownership"); git's
    // own words say which and how to fix it.
    return fail(Diagnostics{git_error(dir, str("git cannot read a repository at `", dir, "`"), git_said(where->err))});
  }
  const std::vector<std::string> lines = split(where->out, '\n');
  if (lines.empty() || lines[0].empty()) {
    return fail(Diagnostics{git_error(dir, str("git named no top-level directory for `", dir, "`"), git_said(where->err))});
  }
  out.top_ = lines[0];
  out.prefix_ = lines.size() > 1 ? lines[1] : std::string();
  auto verify = detail::run_program(out.git({"rev-parse", "--verify", "--quiet", "--end-of-options", str(rev, "^{commit}")}));
  if (!verify) return fail(Diagnostics{git_error(dir, verify.error())});
  std::string commit = verify->out;
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r')) commit.pop_back();
  if (verify->exit_code != 0 || commit.empty()) {
    std::vector<std::string> notes = git_said(verify->err);
    std::string help;
    auto shallow = detail::run_program(out.git({"rev-parse", "--is-shallow-repository"}));
    if (shallow && shallow->out.starts_with("true")) {
      notes.emplace_back("the repository is a shallow clone, so older revisions may be missing");
      help = "fetch the history that holds it (actions/checkout: fetch-depth: 0), or `git fetch --unshallow`";
    }
    return fail(Diagnostics{
        git_error(dir, str("`", rev, "` is not a commit of the repository at ", out.top_), std::move(notes), help)});
  }
  out.commit_ = commit;
  return out;
}

Result<std::optional<std::vector<TreeEntry>>, Diagnostics> GitRevision::list(const std::string& path) {
  if (const auto cached = listings_.find(path); cached != listings_.end()) return cached->second;
  // `commit:path` names the tree literally: no pathspec magic, no globbing.
  const std::string object = path.empty() ? commit_ : str(commit_, ":", path);
  auto type = detail::run_program(git({"cat-file", "-t", object}));
  if (!type) return fail(Diagnostics{git_error(name(path), type.error())});
  if (type->exit_code != 0 || !type->out.starts_with("tree")) {
    listings_[path] = std::nullopt;
    return std::optional<std::vector<TreeEntry>>{};
  }
  auto listing = detail::run_program(git({"ls-tree", "-z", "--full-tree", object}));
  if (!listing) return fail(Diagnostics{git_error(name(path), listing.error())});
  if (listing->exit_code != 0) {
    return fail(Diagnostics{git_error(name(path), str("git could not list `", name(path), "`"), git_said(listing->err))});
  }
  std::vector<TreeEntry> entries;
  for (const std::string& record : split(listing->out, '\0')) {
    if (record.empty()) continue;
    // "<mode> SP <type> SP <object> TAB <name>"
    const std::size_t tab = record.find('\t');
    const std::vector<std::string> head = split(record.substr(0, tab == std::string::npos ? 0 : tab), ' ');
    if (tab == std::string::npos || head.size() != 3) {
      return fail(Diagnostics{git_error(name(path), str("unexpected `git ls-tree` output for `", name(path), "`"))});
    }
    entries.push_back(TreeEntry{head[0], head[1], head[2], record.substr(tab + 1)});
  }
  listings_[path] = entries;
  return std::optional<std::vector<TreeEntry>>(std::move(entries));
}

Result<std::string, Diagnostics> GitRevision::blob(const std::string& object, const std::string& path) {
  if (!cat_file_) {
    auto started = detail::Conversation::start(git({"cat-file", "--batch"}));
    if (!started) return fail(Diagnostics{git_error(name(path), started.error())});
    cat_file_.emplace(std::move(*started));
  }
  const auto broken = [&] {
    cat_file_.reset();
    return Diagnostics{git_error(name(path), str("reading `", name(path), "` with git cat-file failed"))};
  };
  if (!cat_file_->send(object + "\n")) return fail(broken());
  // "<object> SP <type> SP <size> LF <contents> LF", or "<object> SP missing LF".
  const std::optional<std::string> header = cat_file_->read_line();
  if (!header) return fail(broken());
  const std::vector<std::string> fields = split(*header, ' ');
  if (fields.size() != 3 || fields[1] != "blob") return fail(broken());
  std::size_t size = 0;
  try {
    size = std::stoull(fields[2]);
  } catch (...) {
    return fail(broken());
  }
  if (size > kMaxBlobBytes) {
    cat_file_.reset();  // the rest of this blob is never read; git stops on the closed pipe
    return fail(Diagnostics{git_error(name(path), str("`", name(path), "` is ", size, " bytes; a --git diff reads at most ",
                                                      kMaxBlobBytes, " bytes per file"))});
  }
  std::optional<std::string> contents = cat_file_->read_bytes(size);
  if (!contents || !cat_file_->read_bytes(1)) return fail(broken());
  return std::move(*contents);
}

/// `dir/name` for repository paths, where "" is the top.
std::string join_path(const std::string& dir, const std::string& name) { return dir.empty() ? name : dir + "/" + name; }

/// Writes the revision's blobs into the scratch copy of the repository top, each once.
class Extraction {
 public:
  Extraction(GitRevision& revision, fs::path top) : revision_(revision), top_(std::move(top)) {}

  /// Writes the regular `*.toml` files of directory `dir`; a non-regular one is an error.
  /// Returns false when the revision has no directory there.
  bool directory(const std::string& dir, Diagnostics& out, std::vector<std::string>& written) {
    auto listing = revision_.list(dir);
    if (!listing) {
      append(out, listing.error());
      return true;
    }
    if (!*listing) return false;
    std::error_code error;
    fs::create_directories(top_ / dir, error);
    for (const TreeEntry& entry : **listing) {
      const fs::path name(entry.name);
      if (name.extension() != ".toml" || entry.name.ends_with(".graph.toml")) continue;
      const std::string path = join_path(dir, entry.name);
      if (!regular(entry)) {
        // Note [Non-regular entries] in workspace.cpp: the same rule as a directory on disk.
        out.push_back(Diagnostic{Severity::Error, DiagCode::NonRegularFile, SourceLoc{revision_.name(path), 0, 0},
                                 str("`", entry.name, "` is ", entry_kind(entry),
                                     ", not a regular file; catalog and profile directories load only regular "
                                     "`*.toml` files"),
                                 {},
                                 "commit the file itself, or rename the entry so it does not end in `.toml`"});
        continue;
      }
      if (write(entry.object, path, out)) written.push_back(path);
    }
    return true;
  }

  /// Writes the file at repository path `path` (already inside the top), which a profile names
  /// in `with_catalogs` at `where`.
  void named_file(const std::string& path, const SourceLoc& where, std::string_view entry, Diagnostics& out) {
    if (written_.count(path) != 0) return;
    const fs::path p(path);
    const std::string dir = p.has_parent_path() ? p.parent_path().generic_string() : std::string();
    const std::string file = p.filename().generic_string();
    auto listing = revision_.list(dir);
    if (!listing) {
      append(out, listing.error());
      return;
    }
    const TreeEntry* found = nullptr;
    if (*listing) {
      for (const TreeEntry& e : **listing) {
        if (e.name == file) found = &e;
      }
    }
    if (found == nullptr) {
      out.push_back(Diagnostic{Severity::Error, DiagCode::IoError, where,
                               str("`with_catalogs` entry `", entry, "` names `", path, "`, which revision `",
                                   revision_.rev(), "` does not contain"),
                               {}, {}});
      return;
    }
    if (!regular(*found)) {
      out.push_back(Diagnostic{Severity::Error, DiagCode::NonRegularFile, where,
                               str("`with_catalogs` entry `", entry, "` names `", path, "`, which is ",
                                   entry_kind(*found), " in revision `", revision_.rev(), "`, not a regular file"),
                               {}, {}});
      return;
    }
    write(found->object, path, out);
  }

 private:
  static void append(Diagnostics& out, const Diagnostics& more) { out.insert(out.end(), more.begin(), more.end()); }

  bool write(const std::string& object, const std::string& path, Diagnostics& out) {
    if (!written_.insert(path).second) return true;
    auto contents = revision_.blob(object, path);
    if (!contents) {
      append(out, contents.error());
      return false;
    }
    const fs::path target = top_ / path;
    std::error_code error;
    fs::create_directories(target.parent_path(), error);
    std::ofstream file(target, std::ios::binary);
    file << *contents;
    if (!file) {
      out.push_back(git_error(revision_.name(path), str("cannot write the scratch copy ", target.string())));
      return false;
    }
    return true;
  }

  GitRevision& revision_;
  fs::path top_;
  std::set<std::string> written_;
};

/// The repository path a `with_catalogs` entry names from a profile in `profile_dir`, or nullopt
/// when it is absolute or climbs out of the repository.
std::optional<std::string> in_repository(const std::string& profile_dir, const std::string& entry) {
  const fs::path named(entry);
  if (entry.empty() || named.is_absolute() || named.has_root_name() || named.has_root_directory()) return std::nullopt;
  const fs::path joined = (fs::path(profile_dir) / named).lexically_normal();
  if (joined.empty() || *joined.begin() == ".." || joined.filename().empty() || joined == ".") return std::nullopt;
  return joined.generic_string();
}

/// Makes the directories a with_catalogs path walks through, so `profiles/a/../x.toml` resolves
/// in the scratch copy as it does in a checkout.
void make_walked_directories(const fs::path& top, const std::string& profile_dir, const std::string& entry) {
  fs::path at = fs::path(profile_dir);
  const fs::path named(entry);
  for (auto part = named.begin(); part != named.end(); ++part) {
    if (std::next(part) == named.end()) break;
    at = (at / *part).lexically_normal();
    if (*part == ".." || *part == ".") continue;
    std::error_code error;
    fs::create_directories(top / at, error);
  }
}

/// Loads `root/catalogs` and `root/profiles`, whichever exist, with `root` as the display root.
Tree load_folders(const fs::path& root, bool catalogs, bool profiles, std::string label, const LoadOptions& options) {
  std::vector<fs::path> catalog_dirs;
  std::vector<fs::path> profile_dirs;
  if (catalogs) catalog_dirs.push_back(root / "catalogs");
  if (profiles) profile_dirs.push_back(root / "profiles");
  return Tree{load_workspace(catalog_dirs, profile_dirs, options), std::move(label), root, {}};
}

Diagnostic no_tree(std::string where, std::string_view label) {
  return Diagnostic{Severity::Error, DiagCode::IoError, SourceLoc{std::move(where), 0, 0},
                    str("`", label, "` holds neither catalogs/ nor profiles/: there is nothing to compare"),
                    {},
                    "name the directory that holds catalogs/ and profiles/ (with --git: --repo DIR, or run from it)"};
}

}  // namespace

Result<Tree, Diagnostics> load_tree(const fs::path& root, std::string label, const LoadOptions& options) {
  std::error_code error;
  const bool catalogs = fs::exists(root / "catalogs", error);
  const bool profiles = fs::exists(root / "profiles", error);
  // One missing folder is an empty side (the base of the pull request that adds profiles); a
  // folder with neither is a mistaken path, never an empty tree that makes everything "added".
  if (!catalogs && !profiles) return fail(Diagnostics{no_tree(root.string(), root.string())});
  Tree tree = load_folders(root, catalogs, profiles, std::move(label), options);
  if (catalogs) tree.folders.catalogs = (root / "catalogs").string();
  if (profiles) tree.folders.profiles = (root / "profiles").string();
  if (has_errors(tree.workspace.diagnostics)) return fail(std::move(tree.workspace.diagnostics));
  return tree;
}

Result<Tree, Diagnostics> load_git_tree(std::string_view rev, const fs::path& repo_dir, const fs::path& scratch_dir,
                                        const LoadOptions& options) {
  auto opened = GitRevision::open(rev, repo_dir);
  if (!opened) return fail(std::move(opened.error()));
  GitRevision& revision = *opened;
  std::error_code error;
  fs::create_directories(scratch_dir, error);
  const fs::path top = fs::absolute(scratch_dir, error);
  if (error) return fail(Diagnostics{git_error(scratch_dir.string(), str("cannot use the scratch directory: ", error.message()))});

  std::string base = revision.prefix();  // "ml/" → "ml"
  while (!base.empty() && base.back() == '/') base.pop_back();
  Diagnostics problems;
  Extraction extraction(revision, top);
  std::vector<std::string> catalog_files;
  std::vector<std::string> profile_files;
  const std::string catalogs_dir = join_path(base, "catalogs");
  const std::string profiles_dir = join_path(base, "profiles");
  const bool catalogs = extraction.directory(catalogs_dir, problems, catalog_files);
  const bool profiles = extraction.directory(profiles_dir, problems, profile_files);
  if (!catalogs && !profiles && problems.empty()) {
    return fail(Diagnostics{no_tree(revision.name(base.empty() ? "." : base),
                                    str(revision.name(base.empty() ? "." : base)))});
  }
  // with_catalogs: every catalog a profile prepends comes from the revision too. The profiles
  // are parsed here only for those paths; loading below reports their problems.
  for (const std::string& path : profile_files) {
    Diagnostics ignored;
    bool complete = false;
    const std::string text = [&] {
      std::ifstream in(top / path, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    }();
    auto profile = detail::parse_profile_partial(text, revision.name(path), ignored, complete);
    if (!profile) continue;
    for (const auto& [entry, where] : profile->with_catalogs) {
      const std::optional<std::string> target = in_repository(profiles_dir, entry);
      if (!target) {
        problems.push_back(Diagnostic{Severity::Error, DiagCode::InvalidValue, where,
                                      str("`with_catalogs` entry `", entry, "` leaves the repository; a --git diff "
                                          "reads only files of the revision it compares"),
                                      {}, "name a catalog file of the repository, relative to the profile"});
        continue;
      }
      make_walked_directories(top, profiles_dir, entry);
      extraction.named_file(*target, where, entry, problems);
    }
  }
  if (has_errors(problems)) return fail(std::move(problems));

  Tree tree = load_folders(top / base, catalogs, profiles, std::string(rev), options);
  tree.root = top;
  if (catalogs) tree.folders.catalogs = revision.name(catalogs_dir);
  if (profiles) tree.folders.profiles = revision.name(profiles_dir);
  // Diagnostics name the revision's files as git does, `rev:path`, never the scratch copy.
  for (Diagnostic& d : tree.workspace.diagnostics) {
    const fs::path rel = fs::path(d.where.file).lexically_normal().lexically_relative(top);
    if (!d.where.file.empty() && !rel.empty() && *rel.begin() != "..") d.where.file = revision.name(rel.generic_string());
  }
  if (has_errors(tree.workspace.diagnostics)) return fail(std::move(tree.workspace.diagnostics));
  return tree;
}

}  // namespace capsule
