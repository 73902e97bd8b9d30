// SPDX-License-Identifier: Apache-2.0
// `capsule diff --git` against real scratch repositories: trees found relative to the directory
// the user names, every file read from the revision's blobs (with_catalogs included), git's
// refusals failing loudly, and non-regular `*.toml` entries refused alike in directories and in
// revisions (Note [Non-regular entries] in engine/src/workspace.cpp).
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "capsule/diff.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

namespace fs = std::filesystem;
using testing::has;

/// The shipped catalogs and profiles under `<repo>/<sub>`, committed as BASE.
class Repo {
 public:
  Repo(std::string_view name, const std::string& sub) : root_(fs::temp_directory_path() / str("capsule-git-", name, "-", ::getpid())) {
    fs::remove_all(root_);
    tree_ = sub.empty() ? root_ : root_ / sub;
    fs::create_directories(tree_);
    fs::copy(testing::source_dir() / "catalogs", tree_ / "catalogs");
    fs::copy(testing::source_dir() / "profiles", tree_ / "profiles");
    REQUIRE(git("init -q") == 0);
    commit("base");
  }
  ~Repo() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  Repo(const Repo&) = delete;
  Repo& operator=(const Repo&) = delete;

  const fs::path& root() const { return root_; }
  const fs::path& tree() const { return tree_; }
  int git(const std::string& command) const {
    return std::system(str("git -C '", root_.string(), "' ", command, " >/dev/null 2>&1").c_str());
  }
  void commit(const std::string& message) const {
    REQUIRE(git("add -A") == 0);
    REQUIRE(git("-c user.name=t -c user.email=t@example.org commit -q --allow-empty -m " + message) == 0);
  }
  void write(const fs::path& relative, std::string_view text) const {
    fs::create_directories((tree_ / relative).parent_path());
    std::ofstream(tree_ / relative) << text;
  }
  /// Demotes reference.relu's value evidence to a trusted boundary (issue 8, item 3).
  void weaken_relu() const {
    const fs::path file = tree_ / "catalogs/reference.toml";
    std::string text = testing::read_text(file);
    const std::string from = "name = \"reference.relu\"\nop = \"relu\"\n";
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.insert(at + from.size(), "contracts.value = { claim = \"value-refinement\", evidence = { kind = "
                                  "\"trusted-boundary\", reason = \"vendor relu\" } }\n");
    std::ofstream(file) << text;
  }

 private:
  fs::path root_;
  fs::path tree_;
};

/// Runs the CLI from `dir` (the working directory is restored afterwards).
testing::CliRun run_in(const fs::path& dir, std::vector<std::string> args) {
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  testing::CliRun run = testing::run_cli(std::move(args));
  fs::current_path(before);
  return run;
}

/// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

const std::string kExtraCatalog = std::string(testing::kCatalogHead) + "\n[[capsule]]\nname = \"inline.relu\"\nop = \"relu\"\n";

std::string extra_profile(std::string_view with_catalogs) {
  std::string text = testing::read_text(testing::source_dir() / "profiles/checked_cpu.toml");
  const auto at = text.find("name = \"checked_cpu\"");
  REQUIRE(at != std::string::npos);
  text.replace(at, std::string_view("name = \"checked_cpu\"").size(),
               str("name = \"extra_cpu\"\nwith_catalogs = [\"", with_catalogs, "\"]"));
  return text;
}

}  // namespace

TEST_SUITE("diff git") {
  TEST_CASE("catalogs under ml/: --repo ml and a run from inside ml/ both see the weakening") {
    Repo repo("ml", "ml");
    repo.weaken_relu();
    repo.commit("head");
    const std::string root = repo.root().string();
    const testing::CliRun named = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD", "--repo", root + "/ml"});
    INFO(named.err);
    CHECK(named.status == 1);
    CHECK(has(named.out, "weakened:capsule:reference.relu:value"));
    CHECK(has(named.out, "head read: catalogs HEAD:ml/catalogs; profiles HEAD:ml/profiles"));
    CHECK(has(named.out, "ml/catalogs/reference.toml"));  // locations relative to the repository top
    const testing::CliRun inside = run_in(repo.tree(), {"diff", "--git", "HEAD~1", "HEAD"});
    INFO(inside.err);
    CHECK(inside.status == 1);
    CHECK(has(inside.out, "weakened:capsule:reference.relu:value"));
    // The same two trees as directories agree.
    const fs::path base = repo.root() / "base-copy";
    REQUIRE(repo.git("worktree add -q '" + base.string() + "' HEAD~1") == 0);
    const testing::CliRun dirs = testing::run_cli({"diff", (base / "ml").string(), repo.tree().string()});
    CHECK(dirs.status == 1);
    // The repository top holds neither folder: an error naming it, never "no changes".
    const testing::CliRun top = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD", "--repo", root});
    CHECK(top.status == 2);
    CHECK(has(top.err, "holds neither catalogs/ nor profiles/"));
    CHECK_FALSE(has(top.out, "no changes"));
  }

  TEST_CASE("with_catalogs: an in-repository path outside catalogs/ is read from the revision") {
    Repo repo("with-catalogs", "");
    repo.write("extra/fast.toml", kExtraCatalog);
    repo.write("profiles/extra_cpu.toml", extra_profile("../extra/fast.toml"));
    repo.commit("extra");
    std::string text = testing::read_text(repo.tree() / "extra/fast.toml");
    text += "contracts.value = { claim = \"value-refinement\", evidence = { kind = \"trusted-boundary\", reason = \"x\" } }\n";
    repo.write("extra/fast.toml", text);
    repo.commit("weaken");
    // The working tree says otherwise: only the revisions count.
    repo.write("extra/fast.toml", kExtraCatalog);
    const testing::CliRun run = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD", "--repo", repo.root().string()});
    INFO(run.err);
    CHECK(run.status == 1);
    CHECK(has(run.out, "weakened:impact:extra_cpu:relu"));
    CHECK(has(run.out, "inline.relu"));
    const testing::CliRun same = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD~1", "--repo", repo.root().string()});
    INFO(same.err);
    CHECK(same.status == 0);
  }

  TEST_CASE("with_catalogs: an absolute path or one climbing out of the repository is an error naming it") {
    Repo repo("escape", "");
    // A host file the reviewer never sees must not decide the verdict.
    const fs::path outside = repo.root().parent_path() / str("capsule-outside-", ::getpid(), ".toml");
    std::ofstream(outside) << kExtraCatalog;
    for (const std::string& entry : {outside.string(), str("../../", outside.filename().string())}) {
      CAPTURE(entry);
      repo.write("profiles/extra_cpu.toml", extra_profile(entry));
      repo.commit("escape");
      const testing::CliRun run = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD", "--repo", repo.root().string()});
      CHECK(run.status == 2);
      CHECK(has(run.err, str("`with_catalogs` entry `", entry, "` leaves the repository")));
      CHECK(has(run.err, "HEAD:profiles/extra_cpu.toml:"));
      CHECK_FALSE(has(run.out, "no changes"));
    }
    fs::remove(outside);
    // A path inside the repository that the revision lacks is named too.
    repo.write("profiles/extra_cpu.toml", extra_profile("../extra/none.toml"));
    repo.commit("missing");
    const testing::CliRun missing = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD", "--repo", repo.root().string()});
    CHECK(missing.status == 2);
    CHECK(has(missing.err, "names `extra/none.toml`, which revision `HEAD` does not contain"));
  }

  TEST_CASE("git's refusals fail loudly with exit 2: unknown revision, shallow clone, untrusted repository, no git") {
    Repo repo("refusals", "");
    repo.weaken_relu();
    repo.commit("head");
    const std::string root = repo.root().string();

    const testing::CliRun unknown = testing::run_cli({"diff", "--git", "no-such-rev", "HEAD", "--repo", root});
    CHECK(unknown.status == 2);
    CHECK(has(unknown.err, "error[git-error]: `no-such-rev` is not a commit"));

    const fs::path shallow = repo.root() / "shallow";
    REQUIRE(std::system(str("git clone -q --depth 1 'file://", root, "' '", shallow.string(), "' >/dev/null 2>&1").c_str()) == 0);
    const testing::CliRun cut = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD", "--repo", shallow.string()});
    CHECK(cut.status == 2);
    CHECK(has(cut.err, "shallow clone"));
    CHECK_FALSE(has(cut.out, "no changes"));

    {
      // git's own test switch for "this repository belongs to someone else" (safe.directory).
      ScopedEnv other_owner("GIT_TEST_ASSUME_DIFFERENT_OWNER", "1");
      const testing::CliRun refused = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD", "--repo", root});
      CHECK(refused.status == 2);
      CHECK(has(refused.err, "git cannot read a repository"));
      CHECK(has(refused.err, "dubious ownership"));
      CHECK_FALSE(has(refused.out, "no changes"));
    }
    {
      const fs::path empty = repo.root() / "empty-path";
      fs::create_directories(empty);
      ScopedEnv no_git("PATH", empty.string());
      const testing::CliRun missing = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD", "--repo", root});
      CHECK(missing.status == 2);
      CHECK(has(missing.err, "cannot run `git`: no such program on PATH"));
      CHECK_FALSE(has(missing.err, "not inside a git repository"));
      CHECK_FALSE(has(missing.out, "no changes"));
    }
  }

  TEST_CASE("a blob larger than the bound is refused before it is read") {
    Repo repo("large", "");
    repo.write("catalogs/huge.toml", std::string(17u << 20, '#'));
    repo.commit("huge");
    const testing::CliRun run = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD", "--repo", repo.root().string()});
    CHECK(run.status == 2);
    CHECK(has(run.err, "HEAD:catalogs/huge.toml: error[git-error]"));
    CHECK(has(run.err, "reads at most 16777216 bytes per file"));
  }

  TEST_CASE("non-regular *.toml entries are errors alike in a directory and in a revision") {
    Repo repo("odd", "");
    // A symlink (to a file that would load fine), a directory and a submodule, all named *.toml.
    fs::create_symlink("reference.toml", repo.tree() / "catalogs/linked.toml");
    fs::create_directories(repo.tree() / "catalogs/folder.toml");
    repo.write("catalogs/folder.toml/inner.toml", kExtraCatalog);
    repo.commit("odd");
    const std::string head = "git rev-parse HEAD";
    REQUIRE(repo.git("update-index --add --cacheinfo 160000,$(" + head + "),profiles/sub.toml") == 0);
    REQUIRE(repo.git("-c user.name=t -c user.email=t@example.org commit -q -m gitlink") == 0);

    const Workspace disk = load_workspace({repo.tree() / "catalogs"}, {repo.tree() / "profiles"});
    std::vector<std::string> disk_codes;
    for (const Diagnostic& d : disk.diagnostics) {
      if (d.code == DiagCode::NonRegularFile) disk_codes.push_back(fs::path(d.where.file).filename().string());
    }
    std::sort(disk_codes.begin(), disk_codes.end());
    CHECK(disk_codes == std::vector<std::string>{"folder.toml", "linked.toml"});

    const testing::CliRun run = testing::run_cli({"diff", "--git", "HEAD~2", "HEAD", "--repo", repo.root().string()});
    CHECK(run.status == 2);
    CHECK(has(run.err, "HEAD:catalogs/linked.toml: error[non-regular-file]: `linked.toml` is a symbolic link"));
    CHECK(has(run.err, "HEAD:catalogs/folder.toml: error[non-regular-file]: `folder.toml` is a directory"));
    CHECK(has(run.err, "HEAD:profiles/sub.toml: error[non-regular-file]: `sub.toml` is a submodule (gitlink)"));
    const testing::CliRun dirs = testing::run_cli({"diff", repo.tree().string(), repo.tree().string()});
    CHECK(dirs.status == 2);
    CHECK(has(dirs.err, "error[non-regular-file]: `linked.toml` is a symbolic link"));
  }
}

}  // namespace capsule
