// SPDX-License-Identifier: Apache-2.0
// Runnable examples under named profiles (`capsule run EXAMPLE --profile NAME`). Each example opens
// an eager Session on the profile, runs every computation through it and ends with the capsules
// it actually used. Examples link the runtime only: the caller registers the handlers it links
// and passes the registry in.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/fingerprint.hpp"
#include "capsule/load.hpp"
#include "capsule/runtime/checker.hpp"
#include "capsule/runtime/handler.hpp"

namespace capsule::examples {

struct ExampleInfo {
  std::string_view name;
  std::string_view summary;
  bool has_model = false;  ///< builds a model whose graph `--dump-graph` can write
};

/// Every example, in the order `capsule run --help` lists them.
std::span<const ExampleInfo> all_examples();
/// The example called `name`, or nullptr.
const ExampleInfo* find_example(std::string_view name);

/// The copies one provider's handlers made at the boundary between our storage and the
/// provider's (a dtype conversion, a view or an intermediate copied into our output), per op name.
struct ProviderBoundaryCopies {
  Provider provider;
  std::vector<std::pair<std::string, std::uint64_t>> by_op;  ///< op name, copies; ops that never copied may be absent
};

struct ExampleOptions {
  std::string profile;  ///< a profile name loaded in the workspace
  bool show_backend = false;  ///< the session prints its backend report at open and per selection
  bool json = false;          ///< print one JSON object instead of text
  /// Where to draw a redrawn progress bar instead of printing step lines in the report (the
  /// CLI passes standard error when both it and standard output are terminals); null: step lines.
  /// The bar never enters the report's data stream. Must outlive the run.
  std::ostream* progress_bar = nullptr;
  /// Write the model's lowered IR graph here (examples with a model only).
  std::optional<std::filesystem::path> dump_graph;
  /// The environment fingerprint the report prints next to its sources (the caller collects it).
  EnvironmentFingerprint environment;
  /// Reads the boundary copies each linked provider counted so far in this process (cumulative).
  /// The report prints, for each provider whose capsules the run used, what the run added: by op,
  /// or "none". Unset: no provider counts copies, and the report has no such line.
  std::function<std::vector<ProviderBoundaryCopies>()> boundary_copies;
  /// The checkers that recheck capsules with checker evidence (docs/checkers.md, "Recheck at run
  /// time"), under the profile's recheck policy. Null: such a capsule is refused at selection.
  /// Must outlive the run.
  const CheckerRegistry* checkers = nullptr;
  /// Where a failed recheck writes its reproduction bundle; empty: the system temp directory.
  std::filesystem::path repro_dir;
};

/// Runs example `name` under `options.profile`, writing its report to `out` and the session's
/// backend log (with show_backend) to `log`. Errors: unknown-example for a name that is not an
/// example, invalid-argument for --dump-graph on an example without a model, and whatever the
/// session reports (a gate rejection, a missing handler, no usable device) unchanged.
RuntimeStatus run_example(std::string_view name, const Workspace& workspace, const HandlerRegistry& handlers,
                          const ExampleOptions& options, std::ostream& out, std::ostream& log);

}  // namespace capsule::examples
