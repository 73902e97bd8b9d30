// SPDX-License-Identifier: Apache-2.0
// Models, lowering, losses, optimizers and the trainer (issue item 7): the MLP lowers to
// TorchLean's 18-node §10.8 graph, the eager forward runs exactly the lowered ops, and SGD and
// Adam match updates computed by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "capsule/handlers/reference.hpp"
#include "capsule/report.hpp"
#include "capsule/runtime/model.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

using testing::shipped;
using testing::source_dir;

Session session_on(std::string profile, bool gradients, std::vector<Op> preselect = {}) {
  SessionOptions options;
  options.profile = std::move(profile);
  options.gradients = gradients;
  options.preselect = std::move(preselect);
  auto session = Session::open(shipped(), testing::reference_handlers(), std::move(options));
  REQUIRE_MESSAGE(session, (session ? std::string() : session.error().message));
  return std::move(session).value();
}

Tensor tensor(std::initializer_list<std::int64_t> dims, std::initializer_list<double> values) {
  return Tensor::from_values(dims, DType::F64, values).value();
}

Sequential mlp(DType dtype = DType::F32) {
  Sequential model;
  model.add(std::make_unique<Linear>(4, 8, 1, dtype));
  model.add(std::make_unique<ReLU>());
  model.add(std::make_unique<Linear>(8, 1, 2, dtype));
  return model;
}

Graph shipped_mlp_graph() {
  Diagnostics diagnostics;
  auto graph = load_graph(source_dir() / "examples/graphs/mlp-4-8-1.graph.toml", diagnostics);
  REQUIRE(graph);
  return std::move(*graph);
}

void check_same_nodes(const Graph& actual, const Graph& expected) {
  REQUIRE(actual.nodes.size() == expected.nodes.size());
  for (std::size_t i = 0; i < expected.nodes.size(); ++i) {
    const GraphNode& a = actual.nodes[i];
    const GraphNode& e = expected.nodes[i];
    INFO("node " << e.id << " (" << e.kind << ")");
    CHECK(a.id == e.id);
    CHECK(a.kind == e.kind);
    CHECK(a.op == e.op);
    CHECK(a.inputs == e.inputs);
    CHECK(a.payload == e.payload);
  }
}

/// A Linear 2 -> 1 in float64 with weights [0.5, -1] and bias [0.25].
std::unique_ptr<Linear> tiny_linear() {
  auto layer = std::make_unique<Linear>(2, 1, 7, DType::F64);
  layer->weight().value = tensor({1, 2}, {0.5, -1.0});
  layer->bias().value = tensor({1}, {0.25});
  return layer;
}

}  // namespace

TEST_SUITE("model") {
  TEST_CASE("Sequential[linear 4 8, relu, linear 8 1] lowers to the 18 nodes of TorchLean's mlp-4-8-1 graph") {
    const Sequential model = mlp();
    CHECK(model.describe() == "Sequential[linear 4 8, relu, linear 8 1]");
    auto lowered = lower(model, {4}, "mlp-4-8-1");
    REQUIRE(lowered);
    CHECK(lowered->name == "mlp-4-8-1");
    check_same_nodes(*lowered, shipped_mlp_graph());
    CHECK(check_well_formed(*lowered).empty());
  }

  TEST_CASE("a dumped graph reloads and plans under checked_cpu to nodes 18 and planned 13") {
    auto lowered = lower(mlp(), {4}, "mlp-4-8-1");
    REQUIRE(lowered);
    const auto file = std::filesystem::temp_directory_path() / "capsule-model-mlp.graph.toml";
    REQUIRE(write_graph_toml(*lowered, file));
    Diagnostics diagnostics;
    auto reloaded = load_graph(file, diagnostics);
    REQUIRE_MESSAGE(reloaded, render(diagnostics));
    check_same_nodes(*reloaded, *lowered);

    const ResolvedProfile resolved = testing::shipped_profile("checked_cpu");
    auto plan = resolved.planner.plan_graph(*reloaded);
    REQUIRE(plan);
    const std::vector<KernelGroup> groups = group(*plan, resolved.profile->lowering);
    const EnvironmentFingerprint environment;
    const std::string report = graph_report(GraphReportInput{resolved, *reloaded, *plan, groups, environment}, ReportFormat::Text);
    CHECK_MESSAGE(report.find("nodes 18, planned 13\n") != std::string::npos, report);
    CHECK(report.find("  17 reshape from=[1, 1] to=[1] -> reference.reshape") != std::string::npos);
  }

  TEST_CASE("lowering a batch drops the reshapes and a conv net lowers its window payloads") {
    auto batch = lower(mlp(), {5, 4}, "batch");
    REQUIRE(batch);
    std::vector<std::string> kinds;
    for (const GraphNode& node : batch->nodes) kinds.push_back(node.kind);
    CHECK(kinds == std::vector<std::string>{"input", "const", "transpose", "matmul", "const", "broadcast_to", "add",
                                            "relu", "const", "transpose", "matmul", "const", "broadcast_to", "add"});
    CHECK(batch->nodes[5].payload == std::vector<std::pair<std::string, std::string>>{{"from", "[8]"}, {"to", "[5, 8]"}});

    Sequential cnn;
    cnn.emplace<Conv2d>(1, 2, 3, 5, 1, 1).emplace<ReLU>().emplace<MaxPool2d>(2).emplace<Flatten>().emplace<Linear>(32, 2, 6);
    auto graph = lower(cnn, {3, 1, 8, 8}, "cnn");
    REQUIRE(graph);
    CHECK(graph->nodes[1].payload.front() == std::pair<std::string, std::string>{"name", "\"conv1.weight\""});
    CHECK(graph->nodes[3].kind == "conv");
    CHECK(graph->nodes[3].inputs == std::vector<std::uint32_t>{0, 1, 2});
    CHECK(graph->nodes[5].kind == "max_pool");
    CHECK(graph->nodes[6].payload.back() == std::pair<std::string, std::string>{"to", "[3, 32]"});
    CHECK(graph->nodes[7].payload.front() == std::pair<std::string, std::string>{"name", "\"linear1.weight\""});

    auto wrong = lower(mlp(), {3}, "wrong");
    REQUIRE_FALSE(wrong);
    CHECK(wrong.error().code == RuntimeCode::ShapeMismatch);
    CHECK(wrong.error().message == "linear 4 8: input of shape [3]; expected [4] or [n, 4]");
  }

  TEST_CASE("an eager Linear on one sample runs exactly the ops of its lowering") {
    Linear layer(4, 8, 3, DType::F64);
    Session session = session_on("checked_cpu", false);
    const Tensor x = tensor({4}, {0.5, -1.0, 2.0, 0.25});
    auto y = layer.forward(session, session.constant(x));
    REQUIRE(y);
    CHECK(y->shape() == Shape::make({8}).value());

    // Ops of the lowering, counted per op; the eager run must have called each that often.
    auto graph = lower(layer, {4}, "linear");
    REQUIRE(graph);
    std::map<Op, std::uint64_t> lowered;
    for (const GraphNode& node : graph->nodes) {
      if (node.op) ++lowered[*node.op];
    }
    std::map<Op, std::uint64_t> ran;
    std::vector<Op> order;
    for (const CapsuleUse& use : session.capsules_used()) {
      ran[use.op] = use.forward_calls;
      order.push_back(use.op);
    }
    CHECK(ran == lowered);
    CHECK(order == std::vector<Op>{Op::Reshape, Op::Permute, Op::Matmul, Op::Broadcast, Op::Add});

    // And the numbers are W·x + b.
    const std::vector<double> w = layer.weight().value.to_vector();
    const std::vector<double> b = layer.bias().value.to_vector();
    for (std::size_t o = 0; o < 8; ++o) {
      double expected = b[o];
      for (std::size_t i = 0; i < 4; ++i) expected += w[o * 4 + i] * x.at(static_cast<std::int64_t>(i));
      CHECK(y->value().at(static_cast<std::int64_t>(o)) == doctest::Approx(expected).epsilon(1e-12));
    }
  }

  TEST_CASE("initialisation is deterministic and bounded by one over sqrt(in)") {
    Linear ma(4, 8, 42);
    Linear mb(4, 8, 42);
    CHECK(ma.weight().value.to_vector() == mb.weight().value.to_vector());
    CHECK(Linear(4, 8, 43).weight().value.to_vector() != ma.weight().value.to_vector());
    for (const double v : ma.weight().value.to_vector()) CHECK(std::abs(v) <= 0.5);
    CHECK(ma.weight().name == "linear.weight");
    Sequential model = mlp();
    std::vector<std::string> names;
    for (Parameter* p : model.parameters()) names.push_back(p->name);
    CHECK(names == std::vector<std::string>{"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"});
  }

  TEST_CASE("one SGD step equals the update computed by hand") {
    Sequential model;
    model.add(tiny_linear());
    // pred = 0.5·2 - 1·1 + 0.25 = 0.25; loss = (0.25 - 1)^2; dL/dpred = 2(0.25 - 1) = -1.5.
    const Batch batch{tensor({1, 2}, {2.0, 1.0}), tensor({1, 1}, {1.0})};
    SGD sgd(0.1);
    Session session = session_on("checked_cpu", true, training_ops(model, Op::MseLoss, sgd));
    auto loss = train_step(session, model, mse_loss, sgd, batch);
    REQUIRE_MESSAGE(loss, (loss ? std::string() : loss.error().message));
    CHECK(*loss == doctest::Approx(0.5625));
    const std::vector<Parameter*> params = model.parameters();
    const std::vector<double> w = params[0]->value.to_vector();
    // dL/dw = -1.5·x = [-3, -1.5]; dL/db = -1.5.
    CHECK(w[0] == doctest::Approx(0.5 + 0.1 * 3.0).epsilon(1e-14));
    CHECK(w[1] == doctest::Approx(-1.0 + 0.1 * 1.5).epsilon(1e-14));
    CHECK(params[1]->value.at(0) == doctest::Approx(0.25 + 0.1 * 1.5).epsilon(1e-14));
    // The update ran through the session: scale and sub are among the capsules used.
    bool scaled = false;
    for (const CapsuleUse& use : session.capsules_used()) scaled = scaled || (use.op == Op::Scale && use.forward_calls == 2);
    CHECK(scaled);
  }

  TEST_CASE("Adam's first two steps equal the updates computed by hand") {
    Sequential model;
    model.add(tiny_linear());
    const Batch batch{tensor({1, 2}, {2.0, 1.0}), tensor({1, 1}, {1.0})};
    const AdamOptions options{0.01, 0.9, 0.999, 1e-8};
    Adam adam(options);
    Session session = session_on("checked_cpu", true, training_ops(model, Op::MseLoss, adam));

    // Step 1: m̂ = g and v̂ = g², so each parameter moves by lr·g/(|g| + eps).
    const std::vector<double> g1{-3.0, -1.5, -1.5};  // dL/dw0, dL/dw1, dL/db at the start
    std::vector<double> p{0.5, -1.0, 0.25};
    std::vector<double> m(3), v(3);
    const auto hand_step = [&](const std::vector<double>& g, int t) {
      for (std::size_t i = 0; i < 3; ++i) {
        m[i] = options.beta1 * m[i] + (1 - options.beta1) * g[i];
        v[i] = options.beta2 * v[i] + (1 - options.beta2) * g[i] * g[i];
        const double m_hat = m[i] / (1 - std::pow(options.beta1, t));
        const double v_hat = v[i] / (1 - std::pow(options.beta2, t));
        p[i] -= options.lr * m_hat / (std::sqrt(v_hat) + options.eps);
      }
    };
    REQUIRE(train_step(session, model, mse_loss, adam, batch));
    hand_step(g1, 1);
    const auto current = [&model] {
      const std::vector<Parameter*> params = model.parameters();
      std::vector<double> values = params[0]->value.to_vector();
      values.push_back(params[1]->value.at(0));
      return values;
    };
    std::vector<double> after = current();
    for (std::size_t i = 0; i < 3; ++i) CHECK(after[i] == doctest::Approx(p[i]).epsilon(1e-13));
    CHECK(after[0] == doctest::Approx(0.51).epsilon(1e-6));

    // Step 2 from the new parameters: pred = p0·2 + p1·1 + p2, dL/dpred = 2(pred - 1).
    const double pred = p[0] * 2 + p[1] + p[2];
    const double d = 2 * (pred - 1);
    REQUIRE(train_step(session, model, mse_loss, adam, batch));
    hand_step({d * 2, d, d}, 2);
    after = current();
    for (std::size_t i = 0; i < 3; ++i) CHECK(after[i] == doctest::Approx(p[i]).epsilon(1e-13));
    CHECK(adam.steps() == 2);
  }

  TEST_CASE("training the 4-8-1 MLP with Adam brings the loss down more than tenfold") {
    Sequential model = mlp();
    Adam adam(AdamOptions{0.01});
    Session session = session_on("checked_cpu", true, training_ops(model, Op::MseLoss, adam));
    // y = x0 - 2·x1 + x2·x3 on 32 fixed points.
    std::vector<double> xs;
    std::vector<double> ys;
    for (int i = 0; i < 32; ++i) {
      const double a = std::sin(i * 1.3), b = std::cos(i * 0.7), c = std::sin(i * 2.1 + 0.5), e = std::cos(i * 1.9);
      xs.insert(xs.end(), {a, b, c, e});
      ys.push_back(a - 2 * b + c * e);
    }
    const Batch batch{Tensor::from_values(Shape::make({32, 4}).value(), DType::F32, xs).value(),
                      Tensor::from_values(Shape::make({32, 1}).value(), DType::F32, ys).value()};
    double first = 0, last = 0;
    for (int step = 0; step < 300; ++step) {
      auto loss = train_step(session, model, mse_loss, adam, batch);
      REQUIRE_MESSAGE(loss, (loss ? std::string() : loss.error().message));
      if (step == 0) first = *loss;
      last = *loss;
    }
    INFO("loss " << first << " -> " << last);
    CHECK(last < first / 10);
    CHECK(session.tape_size() > 0);  // the last step's tape, not 300 steps of it
  }

  TEST_CASE("training without gradients fails with gradient-unavailable instead of silently not learning") {
    Sequential model = mlp(DType::F64);
    SGD sgd(0.1);
    Session session = session_on("checked_cpu", false);
    const Batch batch{tensor({1, 4}, {1, 2, 3, 4}), tensor({1, 1}, {0.5})};
    auto loss = train_step(session, model, mse_loss, sgd, batch);
    REQUIRE_FALSE(loss);
    CHECK(loss.error().code == RuntimeCode::GradientUnavailable);
  }

  TEST_CASE("a cross entropy step on the conv net runs conv and max_pool through the session") {
    Sequential cnn;
    cnn.emplace<Conv2d>(1, 2, 3, 5, 1, 1).emplace<ReLU>().emplace<MaxPool2d>(2).emplace<Flatten>().emplace<Linear>(8, 2, 6);
    Adam adam(AdamOptions{0.05});
    Session session = session_on("checked_cpu", true, training_ops(cnn, Op::CrossEntropy, adam));
    std::vector<double> pixels(2 * 16, 0.0);
    for (int k = 0; k < 4; ++k) {
      pixels[static_cast<std::size_t>(4 + k)] = 1.0;       // image 0: a horizontal bar on row 1
      pixels[static_cast<std::size_t>(16 + 4 * k + 2)] = 1.0;  // image 1: a vertical bar on column 2
    }
    const Batch batch{Tensor::from_values(Shape::make({2, 1, 4, 4}).value(), DType::F32, pixels).value(),
                      Tensor::from_values({2, 2}, DType::F32, {1, 0, 0, 1}).value()};
    double first = 0, last = 0;
    for (int step = 0; step < 20; ++step) {
      auto loss = train_step(session, cnn, cross_entropy, adam, batch);
      REQUIRE_MESSAGE(loss, (loss ? std::string() : loss.error().message));
      if (step == 0) first = *loss;
      last = *loss;
    }
    CHECK(last < first / 2);
    std::vector<Op> used;
    for (const CapsuleUse& use : session.capsules_used()) used.push_back(use.op);
    CHECK(std::find(used.begin(), used.end(), Op::Conv) != used.end());
    CHECK(std::find(used.begin(), used.end(), Op::MaxPool) != used.end());
  }
}

}  // namespace capsule
