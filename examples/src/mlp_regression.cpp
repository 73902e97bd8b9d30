// SPDX-License-Identifier: Apache-2.0
// mlp_regression: TorchLean's 4-8-1 MLP (§10.8) trained with Adam on a smooth synthetic target.
// The data is generated from a fixed seed, so every run and every profile sees the same numbers.
#include <cmath>

#include "capsule/escape.hpp"
#include "capsule/text.hpp"
#include "common.hpp"

namespace capsule::examples::detail {
namespace {

constexpr std::int64_t kSamples = 64;
constexpr std::int64_t kFeatures = 4;
constexpr std::int64_t kSteps = 200;
constexpr double kLearningRate = 0.01;

/// The regression target: smooth, non-linear, and within about ±1.5 on the unit cube.
double target(const double* x) { return std::sin(2.0 * x[0]) + 0.5 * x[1] * x[2] - 0.5 * x[3] * x[3] + 0.25; }

RuntimeResult<Batch> make_data() {
  std::uint64_t state = 20260401;
  std::vector<double> inputs(static_cast<std::size_t>(kSamples * kFeatures));
  std::vector<double> targets(static_cast<std::size_t>(kSamples));
  for (std::size_t i = 0; i < targets.size(); ++i) {
    double* row = inputs.data() + i * static_cast<std::size_t>(kFeatures);
    for (std::int64_t j = 0; j < kFeatures; ++j) row[j] = uniform(state, -1.0, 1.0);
    targets[i] = target(row);
  }
  Batch batch;
  CAPSULE_TRY(const Shape input_shape, Shape::make({kSamples, kFeatures}));
  CAPSULE_TRY(const Shape target_shape, Shape::make({kSamples, 1}));
  CAPSULE_TRY(batch.inputs, Tensor::from_values(input_shape, DType::F32, inputs));
  CAPSULE_TRY(batch.targets, Tensor::from_values(target_shape, DType::F32, targets));
  return batch;
}

}  // namespace

RuntimeStatus mlp_regression(const Run& run) {
  Sequential model;
  model.emplace<Linear>(4, 8, 1).emplace<ReLU>().emplace<Linear>(8, 1, 2);
  Adam optimizer(AdamOptions{kLearningRate});
  const std::vector<Op> ops = training_ops(model, Op::MseLoss, optimizer);
  CAPSULE_TRY(Session session, open_session(run, ops, true));
  CAPSULE_TRY(const Batch batch, make_data());

  // The single-sample graph is TorchLean's §10.8 graph; it is what --dump-graph writes.
  CAPSULE_TRY(const Graph graph, lower(model, {kFeatures}, "mlp-4-8-1"));
  CAPSULE_CHECK(dump_graph(run, graph));
  if (!run.options.json) {
    CAPSULE_TRY(const std::string header,
                report_header(run, "mlp_regression", model.describe(),
                              str("y = sin(2 x0) + 0.5 x1 x2 - 0.5 x3^2 + 0.25 on ", kSamples,
                                  " samples in [-1, 1]^4; Adam lr ", kLearningRate, ", ", kSteps, " full-batch steps"),
                              ops, "the ops training dispatches (forward, loss, VJP rules, optimizer)"));
    run.out << header;
  }

  std::vector<double> losses;
  losses.reserve(static_cast<std::size_t>(kSteps));
  Progress progress(run.out, run.options.progress_bar, kSteps, 20);
  for (std::int64_t step = 1; step <= kSteps; ++step) {
    CAPSULE_TRY(const double loss, train_step(session, model, mse_loss, optimizer, batch));
    losses.push_back(loss);
    if (!run.options.json) progress.update(step, loss);
  }
  progress.finish();

  if (run.options.json) {
    JsonWriter json;
    json.begin_document().field("example", "mlp_regression").field("profile", run.options.profile)
        .field("model", model.describe()).field("steps", kSteps).key("losses").begin_array();
    for (const double loss : losses) json.value(loss);
    json.end_array().field("initial_loss", losses.front()).field("final_loss", losses.back());
    close_json(json, session, run);
    run.out << json.str() << "\n";
    return std::monostate{};
  }
  run.out << str("loss ", fixed(losses.front()), " -> ", fixed(losses.back()),
                 losses.back() < losses.front() ? " (falling)" : " (not falling)", "\n\n");
  run.out << capsules_used_and_copies(session, run);
  return std::monostate{};
}

}  // namespace capsule::examples::detail
