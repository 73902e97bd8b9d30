// SPDX-License-Identifier: Apache-2.0
// Shared helpers for the engine tests: the shipped workspace, in-process CLI runs, and small
// builders for capsules made in code.
#pragma once

#include <filesystem>
#include <sstream>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "capsule/load.hpp"
#include "capsule/resolve.hpp"
#include "capsule/runtime/handler.hpp"
#include "cli.hpp"

namespace capsule::testing {

inline std::filesystem::path source_dir() { return CAPSULE_SOURCE_DIR; }
inline std::filesystem::path test_data() { return CAPSULE_TEST_DATA; }

/// The shipped catalogs and profiles, loaded once per test binary.
inline const Workspace& shipped() {
  static const Workspace workspace = load_workspace({source_dir() / "catalogs"}, {source_dir() / "profiles"});
  return workspace;
}

/// A shipped capsule or module by name; fails the test when it does not exist.
const Capsule& shipped_capsule(std::string_view name);
ModulePtr shipped_module(std::string_view name);

/// Every reference handler, registered once per test binary.
const HandlerRegistry& reference_handlers();

/// Resolves a shipped profile by name; fails the test when it does not exist or resolve.
ResolvedProfile shipped_profile(std::string_view name);

struct CliRun {
  int status = -1;
  std::string out;
  std::string err;   ///< standard error without the data line
  std::string data;  ///< the first line of standard error naming the folders loaded, if printed
};

/// Runs the CLI in-process with the working directory's relative paths left as given. The line
/// naming the data folders (tools/cli/data_dirs.hpp) is split off into `data`.
CliRun run_cli(std::vector<std::string> args, const cli::Environment& env = {});

/// run_cli on the shipped catalogs and profiles of the source tree (`--catalogs`/`--profiles`
/// appended), so the result does not depend on the working directory.
CliRun run_shipped_cli(std::vector<std::string> args, const cli::Environment& env = {});

/// Replaces every 64-hex-digit SHA-256 with `<sha256>` so goldens survive catalog edits.
std::string mask_digests(std::string text);

/// A fixed environment fingerprint with no machine-dependent value, for tests that compare
/// reports with goldens (test_fingerprint.cpp checks the real one).
EnvironmentFingerprint fixed_fingerprint();
/// A CLI environment whose reports print fixed_fingerprint().
cli::Environment golden_environment();

/// A catalog whose [defaults] make every capsule valid, so each test adds exactly one fault.
inline constexpr std::string_view kCatalogHead = R"(schema = 1
module = "inline"

[defaults]
provider = "reference"
device = "cpu"
trust = "checked"
vjp = "torchlean-tape"
reduction = "n/a"
contracts.shape  = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "shape checks" } }
contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "typed layout" } }
contracts.value  = { claim = "value-refinement", evidence = { kind = "test-suite", name = "inline.values" } }
contracts.vjp    = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "test-suite", name = "inline.vjps" } }
)";

/// True when `part` occurs in `text`.
inline bool has(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

/// The reference CPU handler of `op`; fails the test when there is none.
const HandlerSpec& reference_handler(Op op);

/// Fault injection for the evidence ledger's own test (`capsule_tests --tamper-op OP`): from
/// now on reference_handler(OP) adds 1 to the first element of every output it computes.
/// Returns why not when OP is not an op with a reference forward kernel.
std::optional<std::string> tamper_reference_op(std::string_view op);

/// Reads a whole file.
std::string read_text(const std::filesystem::path& file);

/// A scratch copy of the shipped catalogs and profiles that a test may edit; removed when the
/// test ends.
class ScratchTree {
 public:
  explicit ScratchTree(std::string_view name);
  ~ScratchTree();
  ScratchTree(const ScratchTree&) = delete;
  ScratchTree& operator=(const ScratchTree&) = delete;

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path catalogs() const { return root_ / "catalogs"; }
  std::filesystem::path profiles() const { return root_ / "profiles"; }
  void write(const std::filesystem::path& relative, std::string_view text) const;
  /// Replaces the first occurrence of `from`; fails the test when it is absent.
  void replace(const std::filesystem::path& relative, std::string_view from, std::string_view to) const;
  Workspace load() const;

 private:
  std::filesystem::path root_;
};

}  // namespace capsule::testing
