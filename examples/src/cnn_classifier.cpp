// SPDX-License-Identifier: Apache-2.0
// cnn_classifier: a small convolutional classifier trained with cross entropy to tell a horizontal
// bar from a vertical one in 8×8 images. Tiny on purpose: it exercises conv, max_pool, the
// flatten reshape and linear under a profile in a second or so.
#include "capsule/escape.hpp"
#include "capsule/text.hpp"
#include "common.hpp"

namespace capsule::examples::detail {
namespace {

constexpr std::int64_t kSide = 8;
constexpr std::int64_t kImages = 2 * kSide;  // one bar per row and per column
constexpr std::int64_t kClasses = 2;
constexpr std::int64_t kSteps = 25;
constexpr double kLearningRate = 0.02;

/// Image i < 8 has a horizontal bar on row i (class 0); image 8 + j a vertical bar on column j
/// (class 1). Targets are one-hot.
RuntimeResult<Batch> make_data() {
  std::vector<double> pixels(static_cast<std::size_t>(kImages * kSide * kSide), 0.0);
  std::vector<double> targets(static_cast<std::size_t>(kImages * kClasses), 0.0);
  for (std::int64_t image = 0; image < kImages; ++image) {
    const bool vertical = image >= kSide;
    const std::int64_t line = image % kSide;
    for (std::int64_t along = 0; along < kSide; ++along) {
      const std::int64_t r = vertical ? along : line;
      const std::int64_t c = vertical ? line : along;
      pixels[static_cast<std::size_t>((image * kSide + r) * kSide + c)] = 1.0;
    }
    targets[static_cast<std::size_t>(image * kClasses + (vertical ? 1 : 0))] = 1.0;
  }
  Batch batch;
  CAPSULE_TRY(const Shape image_shape, Shape::make({kImages, 1, kSide, kSide}));
  CAPSULE_TRY(const Shape target_shape, Shape::make({kImages, kClasses}));
  CAPSULE_TRY(batch.inputs, Tensor::from_values(image_shape, DType::F32, pixels));
  CAPSULE_TRY(batch.targets, Tensor::from_values(target_shape, DType::F32, targets));
  return batch;
}

}  // namespace

RuntimeStatus cnn_classifier(const Run& run) {
  Sequential model;
  model.emplace<Conv2d>(1, 4, 3, 11, 1, 1)
      .emplace<ReLU>()
      .emplace<MaxPool2d>(2)
      .emplace<Flatten>()
      .emplace<Linear>(4 * (kSide / 2) * (kSide / 2), kClasses, 12);
  Adam optimizer(AdamOptions{kLearningRate});
  const std::vector<Op> ops = training_ops(model, Op::CrossEntropy, optimizer);
  CAPSULE_TRY(Session session, open_session(run, ops, true));
  CAPSULE_TRY(const Batch batch, make_data());
  CAPSULE_TRY(const Graph graph, lower(model, {kImages, 1, kSide, kSide}, "cnn-classifier"));
  CAPSULE_CHECK(dump_graph(run, graph));
  if (!run.options.json) {
    CAPSULE_TRY(const std::string header,
                report_header(run, "cnn_classifier", model.describe(),
                              str(kImages, " 8x8 images, horizontal bar (class 0) or vertical bar (class 1); cross "
                                  "entropy, Adam lr ", kLearningRate, ", ", kSteps, " full-batch steps"),
                              ops, "the ops training dispatches (forward, loss, VJP rules, optimizer)"));
    run.out << header;
  }

  std::vector<double> losses;
  Progress progress(run.out, run.options.progress_bar, kSteps, 1);
  for (std::int64_t step = 1; step <= kSteps; ++step) {
    CAPSULE_TRY(const double loss, train_step(session, model, cross_entropy, optimizer, batch));
    losses.push_back(loss);
    if (!run.options.json) progress.update(step, loss);
  }
  progress.finish();

  // Accuracy of the trained model: one more forward through the session, argmax read back.
  session.clear_tape();
  CAPSULE_TRY(const Var logits, model.forward(session, session.constant(batch.inputs)));
  const std::vector<double> scores = logits.value().to_vector();
  const std::vector<double> labels = batch.targets.to_vector();
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(kImages); ++i) {
    const bool predicted_vertical = scores[2 * i + 1] > scores[2 * i];
    correct += predicted_vertical == (labels[2 * i + 1] > 0.5) ? 1 : 0;
  }

  if (run.options.json) {
    JsonWriter json;
    json.begin_document().field("example", "cnn_classifier").field("profile", run.options.profile)
        .field("model", model.describe()).field("steps", kSteps).key("losses").begin_array();
    for (const double loss : losses) json.value(loss);
    json.end_array().field("initial_loss", losses.front()).field("final_loss", losses.back())
        .field("correct", correct).field("images", kImages);
    close_json(json, session, run);
    run.out << json.str() << "\n";
    return std::monostate{};
  }
  run.out << str("loss ", fixed(losses.front()), " -> ", fixed(losses.back()), "; accuracy ", correct, "/", kImages,
                 "\n\n");
  run.out << capsules_used_and_copies(session, run);
  return std::monostate{};
}

}  // namespace capsule::examples::detail
