// SPDX-License-Identifier: Apache-2.0
// Where the CLI reads its data, and what it refuses to write: data-folder rule, unwritable
// output, --dump-graph onto an input (issue 8 items 2, 11, 12).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <streambuf>

#include <unistd.h>

#include "cli.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("capsule-cli-data-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// A stream buffer that refuses every byte, like a closed or full standard output.
struct RefusingBuffer : std::streambuf {
  int overflow(int) override { return traits_type::eof(); }
};

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("the working directory's own catalogs are read, from the project or a subdirectory") {
    const fs::path root = fresh_dir("project");
    fs::create_directories(root / "catalogs");
    fs::create_directories(root / "sub/deeper");
    std::ofstream(root / "catalogs/broken.toml") << "schema = 1\nmodule = \n";
    for (const fs::path& cwd : {root, root / "sub/deeper"}) {
      capsule::cli::Environment env;
      env.working_dir = cwd;
      const auto run = capsule::testing::run_cli({"lint"}, env);
      CHECK(run.status != 0);
      CHECK(run.out.find("broken.toml:2:10") != std::string::npos);
      CHECK(run.data.find((root / "catalogs").string()) != std::string::npos);
      CHECK(run.data.find("has no profiles/") != std::string::npos);
    }
    fs::remove_all(root);
  }

  TEST_CASE("no data anywhere, or a --root with neither folder, is a usage error") {
    const fs::path empty = fresh_dir("empty");
    capsule::cli::Environment env;
    env.working_dir = empty;
    const auto nothing = capsule::testing::run_cli({"lint"}, env);
    CHECK(nothing.status == 2);
    CHECK(nothing.err.find("no catalogs/ or profiles/ in") != std::string::npos);
    const auto root = capsule::testing::run_cli({"plan", "--root", empty.string(), "--profile", "checked_cpu", "--ops", "relu"});
    CHECK(root.status == 2);
    CHECK(root.err.find("holds neither catalogs/ nor profiles/") != std::string::npos);
    fs::remove_all(empty);
  }

  TEST_CASE("output that cannot be written exits 2") {
    RefusingBuffer refusing;
    std::ostream out(&refusing);
    std::ostringstream err;
    const int status = capsule::cli::run({"list", "ops"}, out, err, {});
    CHECK(status == 2);
    CHECK(err.str().find("cannot write the output") != std::string::npos);
  }

  TEST_CASE("--dump-graph never overwrites a file the run read") {
    const fs::path dir = fresh_dir("dump");
    const fs::path profile = dir / "mine.toml";
    fs::copy_file(capsule::testing::source_dir() / "profiles/checked_cpu.toml", profile);
    std::ifstream original_in(profile);
    const std::string original((std::istreambuf_iterator<char>(original_in)), {});
    const auto run = capsule::testing::run_cli(
        {"run", "mlp_regression", "--profile", profile.string(), "--dump-graph", profile.string()});
    CHECK(run.status == 2);
    CHECK(run.err.find("refusing to overwrite an input") != std::string::npos);
    std::ifstream after_in(profile);
    CHECK(std::string((std::istreambuf_iterator<char>(after_in)), {}) == original);
    fs::remove_all(dir);
  }
}
