// SPDX-License-Identifier: Apache-2.0
// What every example shares: opening its session, progress output, number formatting, the
// closing capsules-used report, and the graph dump.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "capsule/examples.hpp"
#include "capsule/json.hpp"
#include "capsule/runtime/model.hpp"
#include "capsule/runtime/session.hpp"

namespace capsule::examples::detail {

/// The common inputs of one example run.
struct Run {
  const Workspace& workspace;
  const HandlerRegistry& handlers;
  const ExampleOptions& options;
  std::ostream& out;
  std::ostream& log;
  /// The providers' boundary copies when the run started (options.boundary_copies), so the report
  /// prints only what this run added.
  std::vector<ProviderBoundaryCopies> copies_at_start;
};

/// Opens a session on the run's profile with `preselect` selected at open, so a rejected capsule
/// stops the example before anything runs.
RuntimeResult<Session> open_session(const Run& run, std::vector<Op> preselect, bool gradients);

/// TorchLean's plan report (report.hpp) for `ops` under the run's profile.
RuntimeResult<std::string> plan_text(const Run& run, std::span<const Op> ops);

/// The header every example's text report opens with, so each reads the same: what runs and on
/// which profile, the task, then the plan for `ops` (each op's capsule with its evidence, the
/// sources and the environment) under `what_dispatches` ("the ops training dispatches (...)").
RuntimeResult<std::string> report_header(const Run& run, std::string_view example, std::string_view what,
                                         std::string_view task, std::span<const Op> ops,
                                         std::string_view what_dispatches);

/// Writes the lowered graph when the run asked for --dump-graph, and says so on `out` (text).
RuntimeStatus dump_graph(const Run& run, const Graph& graph);

/// `value` with `decimals` digits after the point.
std::string fixed(double value, int decimals = 6);
/// `[a, b, c]` with fixed decimals.
std::string fixed_row(std::span<const double> values, int decimals = 6);

/// Training progress: a redrawn bar on `bar` when given (standard error, watched on a terminal),
/// otherwise one plain line `step K/N loss X` in the report on `out` at the first step, every
/// `every` steps and the last.
class Progress {
 public:
  Progress(std::ostream& out, std::ostream* bar, std::int64_t total, std::int64_t every)
      : out_(out), bar_(bar), total_(total), every_(every) {}
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  /// Ends a drawn bar's line even when the run stops early, so an error printed next starts on
  /// a line of its own.
  ~Progress() { finish(); }
  void update(std::int64_t step, double loss);
  void finish();

 private:
  std::ostream& out_;
  std::ostream* bar_;
  std::int64_t total_;
  std::int64_t every_;
  bool drawn_ = false;
};

/// A uniform draw in [lo, hi) from a splitmix64 stream (the examples' synthetic data).
double uniform(std::uint64_t& state, double lo, double hi);

/// Writes `target_declaration` (only when the profile's [target] names another platform than this
/// build's, as the text header's `target:` line), `capsules_used`, `boundary_copies`, `sources` and
/// `environment` into the open JSON object and closes it.
void close_json(JsonWriter& json, const Session& session, const Run& run);
/// The capsules used and, for each provider that counts its boundary copies and whose capsules
/// ran, one line `<provider> boundary copies: <op> N, ...` (or `none`) for this run.
std::string capsules_used_and_copies(const Session& session, const Run& run);

RuntimeStatus mlp_regression(const Run& run);
RuntimeStatus causal_attention(const Run& run);
RuntimeStatus cnn_classifier(const Run& run);

}  // namespace capsule::examples::detail
