// SPDX-License-Identifier: Apache-2.0
// Reference linalg and nn kernels: hand-computed values in both dtypes, error messages, the
// bitwise fixed-left matrix product, and float64 finite-difference checks of every local adjoint.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "capsule/handlers/reference.hpp"
#include "gradcheck.hpp"
#include "suite_coverage.hpp"
#include "test_support.hpp"

using namespace capsule;

namespace {

using testing::reference_handler;

Tensor make(std::initializer_list<std::int64_t> dims, DType dtype, std::vector<double> values) {
  auto shape = Shape::make(dims);
  REQUIRE(shape.has_value());
  auto t = Tensor::from_values(*shape, dtype, values);
  REQUIRE(t.has_value());
  return *t;
}

Tensor run(Op op, std::vector<Tensor> inputs, const OpAttrs& attrs = {}) {
  auto out = reference_handler(op).forward(inputs, attrs);
  REQUIRE_MESSAGE(out.has_value(), (out ? std::string() : out.error().message));
  return *out;
}

RuntimeError run_error(Op op, std::vector<Tensor> inputs, const OpAttrs& attrs = {}) {
  auto out = reference_handler(op).forward(inputs, attrs);
  REQUIRE_FALSE(out.has_value());
  return out.error();
}

void expect_values(const Tensor& t, std::vector<std::int64_t> dims, const std::vector<double>& expected) {
  CHECK(t.shape().to_vector() == dims);
  REQUIRE(t.numel() == static_cast<std::int64_t>(expected.size()));
  const double tol = t.dtype() == DType::F32 ? 1e-5 : 1e-12;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("element ", i);
    CHECK(t.at(static_cast<std::int64_t>(i)) == doctest::Approx(expected[i]).epsilon(tol).scale(1.0));
  }
}

using testing::has;

constexpr DType kDtypes[] = {DType::F32, DType::F64};

/// Σ a·b over all elements, in double.
double dot(const Tensor& a, const Tensor& b) {
  REQUIRE(a.numel() == b.numel());
  double total = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) total += a.at(i) * b.at(i);
  return total;
}

void gradcheck(Op op, std::vector<Tensor> inputs, const OpAttrs& attrs, std::vector<std::size_t> differentiable) {
  const HandlerSpec& spec = reference_handler(op);
  auto report = capsule::test::gradcheck_kernel(spec.forward, spec.backward, std::move(inputs), attrs, differentiable);
  INFO(to_string(op), ": ", report.detail, " (worst ", report.worst_error, ")");
  CHECK(report.ok);
}

using capsule::test::random_tensor;

}  // namespace

TEST_SUITE("reference.values") {
  TEST_CASE("matmul scaled_matmul and softmax_matmul values") {
    for (DType dt : kDtypes) {
      CAPTURE(to_string(dt));
      Tensor a = make({2, 3}, dt, {1, 2, 3, 4, 5, 6});
      Tensor b = make({3, 2}, dt, {1, 0, 0, 1, 1, 1});
      expect_values(run(Op::Matmul, {a, b}), {2, 2}, {4, 5, 10, 11});
      OpAttrs scaled;
      scaled.alpha = -0.5;
      expect_values(run(Op::ScaledMatmul, {a, b}, scaled), {2, 2}, {-2, -2.5, -5, -5.5});
      // Batched: equal leading dims.
      Tensor ba = make({2, 1, 2}, dt, {1, 2, 3, 4});
      Tensor bb = make({2, 2, 1}, dt, {5, 6, 7, 8});
      expect_values(run(Op::Matmul, {ba, bb}), {2, 1, 1}, {17, 53});
      // softmax([0, ln 3]) = [1/4, 3/4].
      Tensor sa = make({1, 2}, dt, {0, std::log(3.0)});
      Tensor sb = make({2, 2}, dt, {4, 1, 8, -1});
      expect_values(run(Op::SoftmaxMatmul, {sa, sb}), {1, 2}, {7, -0.5});
      // k = 0 gives zeros.
      Tensor ea = make({2, 0}, dt, {});
      Tensor eb = make({0, 3}, dt, {});
      expect_values(run(Op::Matmul, {ea, eb}), {2, 3}, {0, 0, 0, 0, 0, 0});
    }
  }

  TEST_CASE("linear with and without bias") {
    for (DType dt : kDtypes) {
      CAPTURE(to_string(dt));
      Tensor x = make({2, 2}, dt, {1, 2, -1, 0});
      Tensor w = make({3, 2}, dt, {1, 0, 1, 1, 0, 2});
      Tensor b = make({3}, dt, {1, 2, 3});
      expect_values(run(Op::Linear, {x, w, b}), {2, 3}, {2, 5, 7, 0, 1, 3});
      expect_values(run(Op::Linear, {x, w}), {2, 3}, {1, 3, 4, -1, -1, 0});
      Tensor x3 = make({1, 2, 2}, dt, {1, 2, -1, 0});
      expect_values(run(Op::Linear, {x3, w, b}), {1, 2, 3}, {2, 5, 7, 0, 1, 3});
    }
  }

  TEST_CASE("mse_loss cross_entropy and distill values") {
    for (DType dt : kDtypes) {
      CAPTURE(to_string(dt));
      expect_values(run(Op::MseLoss, {make({3}, dt, {1, 2, 3}), make({3}, dt, {1, 0, 0})}), {}, {13.0 / 3.0});
      Tensor logits = make({2, 2}, dt, {0, 0, 0, std::log(3.0)});
      Tensor target = make({2, 2}, dt, {1, 0, 0, 1});
      expect_values(run(Op::CrossEntropy, {logits, target}), {}, {(std::log(2.0) + std::log(4.0 / 3.0)) / 2});
      // Soft targets weigh each log-probability.
      Tensor soft = make({1, 2}, dt, {0.5, 0.5});
      expect_values(run(Op::CrossEntropy, {make({1, 2}, dt, {0, std::log(3.0)}), soft}), {},
                    {-(0.5 * std::log(0.25) + 0.5 * std::log(0.75))});

      // p = softmax(teacher/T) = [1/4, 3/4], q = softmax(student/T) = [1/2, 1/2].
      const double kl = 0.25 * std::log(0.5) + 0.75 * std::log(1.5);
      OpAttrs t1;
      t1.temperature = 1.0;
      Tensor student = make({1, 2}, dt, {0, 0});
      expect_values(run(Op::Distill, {student, make({1, 2}, dt, {0, std::log(3.0)})}, t1), {}, {kl});
      OpAttrs t2;
      t2.temperature = 2.0;
      expect_values(run(Op::Distill, {student, make({1, 2}, dt, {0, 2 * std::log(3.0)})}, t2), {}, {4 * kl});
      Tensor same = make({2, 3}, dt, {1, 2, 3, -1, 0, 4});
      expect_values(run(Op::Distill, {same, same}, t2), {}, {0});
    }
  }

  TEST_CASE("layer_norm and batch_norm values") {
    for (DType dt : kDtypes) {
      CAPTURE(to_string(dt));
      const double r = 1 / std::sqrt(2.0 / 3.0 + 1e-5);  // default eps
      Tensor x = make({1, 3}, dt, {1, 2, 3});
      expect_values(run(Op::LayerNorm, {x}), {1, 3}, {-r, 0, r});
      Tensor gamma = make({3}, dt, {1, 2, 3});
      Tensor beta = make({3}, dt, {0, 1, 0});
      expect_values(run(Op::LayerNorm, {x, gamma, beta}), {1, 3}, {-r, 1, 3 * r});
      expect_values(run(Op::LayerNorm, {x, Tensor(), beta}), {1, 3}, {-r, 1, r});
      OpAttrs eps;
      eps.eps = 0.5;
      const double r2 = 1 / std::sqrt(2.0 / 3.0 + 0.5);
      expect_values(run(Op::LayerNorm, {x}, eps), {1, 3}, {-r2, 0, r2});

      // Channel 0 holds 1, 2, 3, 4 across n and space (mean 2.5, biased var 1.25); channel 1 is 10s.
      Tensor bx = make({2, 2, 2}, dt, {1, 2, 10, 10, 3, 4, 10, 10});
      const double b = 1 / std::sqrt(1.25 + 1e-5);
      expect_values(run(Op::BatchNorm, {bx}), {2, 2, 2}, {-1.5 * b, -0.5 * b, 0, 0, 0.5 * b, 1.5 * b, 0, 0});
      Tensor bg = make({2}, dt, {2, 1});
      Tensor bb = make({2}, dt, {0, 7});
      expect_values(run(Op::BatchNorm, {bx, bg, bb}), {2, 2, 2},
                    {-3 * b, -1 * b, 7, 7, 1 * b, 3 * b, 7, 7});
    }
  }

  TEST_CASE("conv 1-D and 2-D with stride padding dilation groups") {
    for (DType dt : kDtypes) {
      CAPTURE(to_string(dt));
      // Output q reads x[2q − 1] and x[2q + 1] (stride 2, padding 1, dilation 2).
      Tensor x = make({1, 1, 5}, dt, {1, 2, 3, 4, 5});
      Tensor w = make({1, 1, 2}, dt, {10, 1});
      OpAttrs a;
      a.stride = {2};
      a.padding = {1};
      a.dilation = {2};
      expect_values(run(Op::Conv, {x, w, make({1}, dt, {0.5})}, a), {1, 1, 3}, {2.5, 24.5, 40.5});

      Tensor gx = make({1, 2, 3}, dt, {1, 2, 3, 4, 5, 6});
      OpAttrs groups;
      groups.groups = 2;
      expect_values(run(Op::Conv, {gx, make({2, 1, 1}, dt, {2, 3})}, groups), {1, 2, 3}, {2, 4, 6, 12, 15, 18});
      // Two groups of two input channels and two output channels each.
      Tensor g4 = make({1, 4, 1}, dt, {1, 2, 3, 4});
      Tensor w4 = make({4, 2, 1}, dt, {1, 1, 1, -1, 1, 1, 1, -1});
      expect_values(run(Op::Conv, {g4, w4}, groups), {1, 4, 1}, {3, -1, 7, -1});

      Tensor x2 = make({1, 1, 3, 3}, dt, {1, 2, 3, 4, 5, 6, 7, 8, 9});
      Tensor w2 = make({1, 1, 2, 2}, dt, {1, 0, 0, 1});
      expect_values(run(Op::Conv, {x2, w2}), {1, 1, 2, 2}, {6, 8, 12, 14});
      OpAttrs a2;
      a2.stride = {2, 2};
      a2.padding = {1, 1};
      expect_values(run(Op::Conv, {x2, w2}, a2), {1, 1, 2, 2}, {1, 3, 7, 14});
      OpAttrs dil;
      dil.dilation = {2, 2};
      expect_values(run(Op::Conv, {x2, w2}, dil), {1, 1, 1, 1}, {10});
      OpAttrs mixed;  // stride only along width, padding only along height
      mixed.stride = {1, 2};
      mixed.padding = {1, 0};
      expect_values(run(Op::Conv, {x2, make({1, 1, 1, 1}, dt, {2})}, mixed), {1, 1, 5, 2},
                    {0, 0, 2, 6, 8, 12, 14, 18, 0, 0});
    }
  }

  TEST_CASE("conv_transpose values and adjointness to conv") {
    for (DType dt : kDtypes) {
      CAPTURE(to_string(dt));
      OpAttrs s2;
      s2.stride = {2};
      expect_values(run(Op::ConvTranspose, {make({1, 1, 2}, dt, {1, 2}), make({1, 1, 2}, dt, {1, 10})}, s2),
                    {1, 1, 4}, {1, 10, 2, 20});
      OpAttrs pad;
      pad.stride = {2};
      pad.output_padding = {1};
      pad.padding = {1};
      // Unpadded positions 0..3 hold [1, 10, 2, 20]; padding 1 drops position 0 and output_padding
      // keeps the size at 3.
      expect_values(run(Op::ConvTranspose, {make({1, 1, 2}, dt, {1, 2}), make({1, 1, 2}, dt, {1, 10}),
                                            make({1}, dt, {0.5})},
                        pad),
                    {1, 1, 3}, {10.5, 2.5, 20.5});
    }
    // <conv(x), y> == <x, conv_transpose(y)> for the same weight and geometry, 2-D and 1-D.
    auto adjoint = [](Tensor x, Tensor w, Tensor y, const OpAttrs& conv_attrs, const OpAttrs& transpose_attrs) {
      Tensor cx = run(Op::Conv, {x, w}, conv_attrs);
      REQUIRE(cx.shape() == y.shape());
      Tensor ty = run(Op::ConvTranspose, {y, w}, transpose_attrs);
      REQUIRE(ty.shape() == x.shape());
      CHECK(dot(cx, y) == doctest::Approx(dot(x, ty)).epsilon(1e-12));
    };
    OpAttrs c2;
    c2.stride = {2, 1};
    c2.padding = {1, 0};
    c2.dilation = {1, 2};
    c2.groups = 2;
    adjoint(random_tensor({2, 4, 5, 6}, 1), random_tensor({6, 2, 3, 2}, 2), random_tensor({2, 6, 3, 4}, 3), c2, c2);
    OpAttrs c1;
    c1.stride = {2};
    c1.padding = {1};
    c1.dilation = {2};
    c1.groups = 2;
    OpAttrs t1 = c1;
    t1.output_padding = {1};  // (8 + 2 − 5) / 2 + 1 = 3 outputs; 3 → 2·2 − 2 + 4 + 1 = 7, +1 = 8
    adjoint(random_tensor({1, 2, 8}, 4), random_tensor({4, 1, 3}, 5), random_tensor({1, 4, 3}, 6), c1, t1);
  }

  TEST_CASE("pools with stride and padding") {
    for (DType dt : kDtypes) {
      CAPTURE(to_string(dt));
      Tensor x = make({1, 1, 5}, dt, {1, 3, 2, 5, 4});
      OpAttrs a;
      a.kernel = {2};
      a.padding = {1};  // stride defaults to the kernel
      expect_values(run(Op::MaxPool, {x}, a), {1, 1, 3}, {1, 3, 5});
      expect_values(run(Op::AvgPool, {x}, a), {1, 1, 3}, {0.5, 2.5, 4.5});
      expect_values(run(Op::SmoothMaxPool, {x}, a), {1, 1, 3},
                    {1, std::log(std::exp(3.0) + std::exp(2.0)), std::log(std::exp(5.0) + std::exp(4.0))});
      OpAttrs hot = a;
      hot.temperature = 0.5;
      expect_values(run(Op::SmoothMaxPool, {x}, hot), {1, 1, 3},
                    {1, 0.5 * std::log(std::exp(6.0) + std::exp(4.0)), 0.5 * std::log(std::exp(10.0) + std::exp(8.0))});
      OpAttrs overlap;
      overlap.kernel = {3};
      overlap.stride = {1};
      expect_values(run(Op::MaxPool, {x}, overlap), {1, 1, 3}, {3, 5, 5});

      Tensor x2 = make({1, 2, 2, 3}, dt, {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6});
      OpAttrs k2;
      k2.kernel = {2, 2};
      k2.stride = {1, 1};
      expect_values(run(Op::MaxPool, {x2}, k2), {1, 2, 1, 2}, {5, 6, -1, -2});
      expect_values(run(Op::AvgPool, {x2}, k2), {1, 2, 1, 2}, {3, 4, -3, -4});
      OpAttrs p2;
      p2.kernel = {2, 2};
      p2.padding = {1, 1};
      // Windows of rows {-1, 0} / {1, 2} and cols {-1, 0} / {1, 2}; padding counts as zeros.
      expect_values(run(Op::AvgPool, {x2}, p2), {1, 2, 2, 2}, {0.25, 1.25, 1, 2.75, -0.25, -1.25, -1, -2.75});
      expect_values(run(Op::MaxPool, {x2}, p2), {1, 2, 2, 2}, {1, 3, 4, 6, -1, -2, -4, -5});
    }
  }

  TEST_CASE("max_pool gradient goes to the first maximum") {
    for (DType dt : kDtypes) {
      Tensor x = make({1, 1, 2, 2}, dt, {7, 7, 7, 7});
      OpAttrs a;
      a.kernel = {2, 2};
      Tensor out = run(Op::MaxPool, {x}, a);
      Tensor g = make({1, 1, 1, 1}, dt, {3});
      std::vector<Tensor> inputs = {x};
      auto grads = reference_handler(Op::MaxPool).backward(inputs, out, g, a);
      REQUIRE(grads.has_value());
      expect_values((*grads)[0], {1, 1, 2, 2}, {3, 0, 0, 0});
    }
  }

  TEST_CASE("scaled_dot_product_attention values and masks") {
    for (DType dt : kDtypes) {
      CAPTURE(to_string(dt));
      Tensor q = make({2, 1}, dt, {1, 1});
      Tensor k = make({2, 1}, dt, {0, 0});
      Tensor v = make({2, 1}, dt, {2, 4});
      expect_values(run(Op::ScaledDotProductAttention, {q, k, v}), {2, 1}, {3, 3});
      OpAttrs causal;
      causal.causal = true;
      expect_values(run(Op::ScaledDotProductAttention, {q, k, v}, causal), {2, 1}, {2, 3});
      // Row 0 fully blocked gives exactly zeros.
      Tensor mask = make({2, 2}, dt, {0, 0, 1, 1});
      Tensor masked = run(Op::ScaledDotProductAttention, {q, k, v, mask});
      expect_values(masked, {2, 1}, {0, 3});
      CHECK(masked.at(0) == 0.0);
      // Scores ln 3 and 0 with scale 1: weights 3/4, 1/4.
      OpAttrs unit;
      unit.scale = 1.0;
      Tensor q1 = make({1, 1}, dt, {std::log(3.0)});
      expect_values(run(Op::ScaledDotProductAttention, {q1, make({2, 1}, dt, {1, 0}), v}, unit), {1, 1}, {2.5});
      // Default scale 1/sqrt(4) = 1/2: raw scores [2 ln 3, 0] become [ln 3, 0].
      Tensor q4 = make({1, 4}, dt, {std::log(3.0), std::log(3.0), std::log(3.0), std::log(3.0)});
      Tensor k4 = make({2, 4}, dt, {0.5, 0.5, 0.5, 0.5, 0, 0, 0, 0});
      expect_values(run(Op::ScaledDotProductAttention, {q4, k4, v}), {1, 1}, {2.5});
      // Batched inputs with a per-batch mask.
      Tensor bq = make({2, 1, 1}, dt, {1, 1});
      Tensor bk = make({2, 2, 1}, dt, {0, 0, 0, 0});
      Tensor bv = make({2, 2, 1}, dt, {2, 4, 6, 8});
      Tensor bm = make({2, 1, 2}, dt, {1, 0, 0, 1});
      expect_values(run(Op::ScaledDotProductAttention, {bq, bk, bv, bm}), {2, 1, 1}, {2, 8});
      Tensor shared = make({1, 2}, dt, {1, 1});
      expect_values(run(Op::ScaledDotProductAttention, {bq, bk, bv, shared}), {2, 1, 1}, {3, 7});
      // The fully masked row takes no gradient.
      auto grads = reference_handler(Op::ScaledDotProductAttention)
                       .backward(std::vector<Tensor>{q, k, v, mask}, masked, make({2, 1}, dt, {1, 1}), OpAttrs{});
      REQUIRE(grads.has_value());
      CHECK((*grads)[0].at(0) == 0.0);
      CHECK_FALSE((*grads)[3].defined());
    }
  }

  TEST_CASE("linalg and nn errors name the op and the shapes") {
    const DType dt = DType::F64;
    auto e = run_error(Op::Matmul, {make({2, 3}, dt, {1, 2, 3, 4, 5, 6}), make({4, 1}, dt, {1, 2, 3, 4})});
    CHECK(e.code == RuntimeCode::ShapeMismatch);
    CHECK(has(e.message, "matmul"));
    CHECK(has(e.message, "[2, 3]"));
    CHECK(has(e.message, "[4, 1]"));
    e = run_error(Op::Matmul, {random_tensor({2, 2, 3}, 1), random_tensor({3, 3, 2}, 2)});
    CHECK(has(e.message, "batch dimension 0"));
    e = run_error(Op::Matmul, {random_tensor({2}, 1), random_tensor({2}, 2)});
    CHECK(has(e.message, "rank >= 2"));
    e = run_error(Op::Matmul, {random_tensor({2, 2}, 1)});
    CHECK(e.code == RuntimeCode::InvalidArgument);
    CHECK(has(e.message, "got 1 inputs; expected 2"));
    e = run_error(Op::Matmul, {make({1, 1}, DType::F32, {1}), make({1, 1}, DType::F64, {1})});
    CHECK(e.code == RuntimeCode::DTypeMismatch);
    OpAttrs inf;
    inf.alpha = INFINITY;
    e = run_error(Op::ScaledMatmul, {random_tensor({1, 1}, 1), random_tensor({1, 1}, 2)}, inf);
    CHECK(has(e.message, "alpha"));

    e = run_error(Op::Linear, {random_tensor({2, 3}, 1), random_tensor({4, 2}, 2)});
    CHECK(has(e.message, "[2, 3]"));
    CHECK(has(e.message, "[4, 2]"));
    e = run_error(Op::Linear, {random_tensor({2, 3}, 1), random_tensor({4, 3}, 2), random_tensor({3}, 3)});
    CHECK(has(e.message, "bias has shape [3]; expected [4]"));
    e = run_error(Op::MseLoss, {random_tensor({2}, 1), random_tensor({3}, 2)});
    CHECK(has(e.message, "mse_loss: pred has shape [2] and target has shape [3]"));
    e = run_error(Op::MseLoss, {random_tensor({0}, 1), random_tensor({0}, 2)});
    CHECK(has(e.message, "empty"));
    e = run_error(Op::CrossEntropy, {random_tensor({2, 3}, 1), random_tensor({3}, 2)});
    CHECK(has(e.message, "[n, c]"));
    OpAttrs cold;
    cold.temperature = 0;
    e = run_error(Op::Distill, {random_tensor({1, 2}, 1), random_tensor({1, 2}, 2)}, cold);
    CHECK(has(e.message, "temperature is 0"));
    // smooth_max_pool checks its temperature before the window's values (the reference's order,
    // kept by the shared capsule/runtime/spatial_args.hpp): a zero kernel entry is reported after.
    OpAttrs cold_window = cold;
    cold_window.kernel = {0, 2};
    e = run_error(Op::SmoothMaxPool, {random_tensor({1, 1, 4, 4}, 1)}, cold_window);
    CHECK(e.code == RuntimeCode::InvalidArgument);
    CHECK(has(e.message, "smooth_max_pool: temperature is 0"));
    cold_window.temperature = 1;
    e = run_error(Op::SmoothMaxPool, {random_tensor({1, 1, 4, 4}, 1)}, cold_window);
    CHECK(has(e.message, "kernel [0, 2] has an entry below 1"));

    e = run_error(Op::LayerNorm, {random_tensor({2, 3}, 1), random_tensor({2}, 2)});
    CHECK(has(e.message, "gamma has shape [2]; expected [3]"));
    OpAttrs neg;
    neg.eps = -1;
    e = run_error(Op::LayerNorm, {random_tensor({2, 3}, 1)}, neg);
    CHECK(has(e.message, "eps is -1"));
    e = run_error(Op::BatchNorm, {random_tensor({2, 3}, 1), Tensor(), random_tensor({2}, 2)});
    CHECK(has(e.message, "beta has shape [2]; expected [3]"));

    e = run_error(Op::Conv, {random_tensor({1, 3, 5}, 1), random_tensor({2, 2, 3}, 2)});
    CHECK(e.code == RuntimeCode::ShapeMismatch);
    CHECK(has(e.message, "[1, 3, 5]"));
    CHECK(has(e.message, "[2, 2, 3]"));
    e = run_error(Op::Conv, {random_tensor({1, 1, 2}, 1), random_tensor({1, 1, 3}, 2)});
    CHECK(has(e.message, "smaller than the window extent 3"));
    OpAttrs bad_stride;
    bad_stride.stride = {0};
    e = run_error(Op::Conv, {random_tensor({1, 1, 4}, 1), random_tensor({1, 1, 3}, 2)}, bad_stride);
    CHECK(e.code == RuntimeCode::InvalidArgument);
    CHECK(has(e.message, "stride [0]"));
    OpAttrs two_strides;
    two_strides.stride = {1, 1};
    e = run_error(Op::Conv, {random_tensor({1, 1, 4}, 1), random_tensor({1, 1, 3}, 2)}, two_strides);
    CHECK(has(e.message, "expected 1 (one per spatial dim)"));
    OpAttrs big_pad;
    big_pad.padding = {std::int64_t{1} << 62};
    e = run_error(Op::Conv, {random_tensor({1, 1, 4}, 1), random_tensor({1, 1, 3}, 2)}, big_pad);
    CHECK(e.code == RuntimeCode::SizeOverflow);
    OpAttrs out_pad;
    out_pad.output_padding = {1};
    e = run_error(Op::ConvTranspose, {random_tensor({1, 1, 4}, 1), random_tensor({1, 1, 3}, 2)}, out_pad);
    CHECK(has(e.message, "output_padding [1]"));
    e = run_error(Op::ConvTranspose, {random_tensor({1, 2, 4}, 1), random_tensor({3, 1, 3}, 2)});
    CHECK(has(e.message, "[3, 1, 3]"));

    OpAttrs pool;
    pool.kernel = {2};
    pool.padding = {2};
    e = run_error(Op::MaxPool, {random_tensor({1, 1, 4}, 1)}, pool);
    CHECK(has(e.message, "padding <= kernel / 2"));
    OpAttrs no_kernel;
    e = run_error(Op::AvgPool, {random_tensor({1, 1, 4}, 1)}, no_kernel);
    CHECK(has(e.message, "kernel []"));
    e = run_error(Op::AvgPool, {random_tensor({4}, 1)}, pool);
    CHECK(has(e.message, "[n, c, l] or [n, c, h, w]"));

    e = run_error(Op::ScaledDotProductAttention, {random_tensor({2, 3}, 1), random_tensor({4, 2}, 2),
                                                  random_tensor({4, 5}, 3)});
    CHECK(has(e.message, "q [2, 3], k [4, 2], v [4, 5]"));
    e = run_error(Op::ScaledDotProductAttention, {random_tensor({2, 3}, 1), random_tensor({4, 3}, 2),
                                                  random_tensor({4, 5}, 3), random_tensor({4, 2}, 4)});
    CHECK(has(e.message, "mask has shape [4, 2]"));
  }

  TEST_CASE("matmul is bitwise the naive fixed-left loop") {
    // Values spread over many binades so any reordering or fusion of the sum changes bits.
    std::uint64_t state = 12345;
    auto next = [&state] {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const double unit = static_cast<double>(state >> 11) * 0x1.0p-53;
      const int exponent = static_cast<int>((state >> 3) % 24) - 12;
      return static_cast<float>((unit - 0.5) * std::ldexp(1.0, exponent));
    };
    struct Size {
      std::int64_t m, k, n;
    };
    for (Size s : {Size{37, 53, 29}, Size{64, 64, 64}, Size{1, 300, 17}, Size{7, 600, 70}, Size{13, 5, 130}}) {
      CAPTURE(s.m);
      CAPTURE(s.k);
      CAPTURE(s.n);
      std::vector<double> av(static_cast<std::size_t>(s.m * s.k));
      std::vector<double> bv(static_cast<std::size_t>(s.k * s.n));
      for (double& v : av) v = next();
      for (double& v : bv) v = next();
      Tensor a = Tensor::from_values(Shape::make({s.m, s.k}).value(), DType::F32, av).value();
      Tensor b = Tensor::from_values(Shape::make({s.k, s.n}).value(), DType::F32, bv).value();
      Tensor c = run(Op::Matmul, {a, b});
      std::vector<float> naive(static_cast<std::size_t>(s.m * s.n));
      const float* pa = a.data<float>();
      const float* pb = b.data<float>();
      for (std::int64_t i = 0; i < s.m; ++i) {
        for (std::int64_t j = 0; j < s.n; ++j) {
          volatile float acc = 0.0f;  // volatile: keep the test's own loop unfused and in order
          for (std::int64_t q = 0; q < s.k; ++q) {
            const volatile float product = pa[i * s.k + q] * pb[q * s.n + j];
            acc = acc + product;
          }
          naive[static_cast<std::size_t>(i * s.n + j)] = acc;
        }
      }
      CHECK(std::memcmp(naive.data(), c.data<float>(), naive.size() * sizeof(float)) == 0);
      // Sanity: a different order does change bits on this data.
      if (s.m == 64) {
        float reversed = 0.0f;
        for (std::int64_t q = s.k; q-- > 0;) {
          const volatile float product = pa[q] * pb[q * s.n];
          reversed = reversed + product;
        }
        CHECK(reversed != naive[0]);
      }
    }
  }
}

TEST_SUITE("reference.vjps") {
  TEST_CASE("matmul family vjps") {
    gradcheck(Op::Matmul, {random_tensor({3, 4}, 1), random_tensor({4, 5}, 2)}, {}, {0, 1});
    gradcheck(Op::Matmul, {random_tensor({2, 3, 4}, 3), random_tensor({2, 4, 2}, 4)}, {}, {0, 1});
    OpAttrs scaled;
    scaled.alpha = -1.5;
    gradcheck(Op::ScaledMatmul, {random_tensor({2, 3, 4}, 5), random_tensor({2, 4, 2}, 6)}, scaled, {0, 1});
    gradcheck(Op::SoftmaxMatmul, {random_tensor({2, 3, 4}, 7, -2, 2), random_tensor({2, 4, 3}, 8)}, {}, {0, 1});
  }

  TEST_CASE("linear vjps") {
    gradcheck(Op::Linear, {random_tensor({2, 3, 4}, 1), random_tensor({5, 4}, 2), random_tensor({5}, 3)}, {},
              {0, 1, 2});
    gradcheck(Op::Linear, {random_tensor({3, 4}, 4), random_tensor({2, 4}, 5)}, {}, {0, 1});
  }

  TEST_CASE("loss vjps") {
    gradcheck(Op::MseLoss, {random_tensor({2, 3}, 1), random_tensor({2, 3}, 2)}, {}, {0, 1});
    gradcheck(Op::CrossEntropy, {random_tensor({3, 4}, 3, -2, 2), random_tensor({3, 4}, 4, 0, 1)}, {}, {0, 1});
    OpAttrs t;
    t.temperature = 2.5;
    gradcheck(Op::Distill, {random_tensor({3, 4}, 5, -3, 3), random_tensor({3, 4}, 6, -3, 3)}, t, {0, 1});
    t.temperature = 0.7;
    gradcheck(Op::Distill, {random_tensor({2, 5}, 7, -1, 1), random_tensor({2, 5}, 8, -1, 1)}, t, {0, 1});
  }

  TEST_CASE("norm vjps") {
    gradcheck(Op::LayerNorm, {random_tensor({3, 5}, 1), random_tensor({5}, 2), random_tensor({5}, 3)}, {}, {0, 1, 2});
    gradcheck(Op::LayerNorm, {random_tensor({2, 2, 4}, 4)}, {}, {0});
    OpAttrs eps;
    eps.eps = 0.1;
    gradcheck(Op::BatchNorm, {random_tensor({3, 2, 2, 2}, 5), random_tensor({2}, 6), random_tensor({2}, 7)}, eps,
              {0, 1, 2});
    gradcheck(Op::BatchNorm, {random_tensor({4, 3}, 8)}, {}, {0});
    gradcheck(Op::BatchNorm, {random_tensor({2, 3, 4}, 9), random_tensor({3}, 10)}, {}, {0, 1});
  }

  TEST_CASE("conv vjps in 1-D and 2-D") {
    OpAttrs c1;
    c1.stride = {2};
    c1.padding = {1};
    c1.dilation = {2};
    c1.groups = 2;
    gradcheck(Op::Conv, {random_tensor({2, 4, 7}, 1), random_tensor({6, 2, 3}, 2), random_tensor({6}, 3)}, c1,
              {0, 1, 2});
    OpAttrs c2;
    c2.stride = {2, 1};
    c2.padding = {1, 1};
    c2.dilation = {1, 2};
    c2.groups = 2;
    gradcheck(Op::Conv, {random_tensor({1, 4, 5, 6}, 4), random_tensor({4, 2, 2, 3}, 5), random_tensor({4}, 6)}, c2,
              {0, 1, 2});
    gradcheck(Op::Conv, {random_tensor({2, 3, 4, 4}, 7), random_tensor({2, 3, 3, 3}, 8)}, {}, {0, 1});
  }

  TEST_CASE("conv_transpose vjps in 1-D and 2-D") {
    OpAttrs t1;
    t1.stride = {2};
    t1.padding = {1};
    t1.dilation = {2};
    t1.output_padding = {1};
    t1.groups = 2;
    gradcheck(Op::ConvTranspose, {random_tensor({2, 4, 3}, 1), random_tensor({4, 3, 3}, 2), random_tensor({6}, 3)},
              t1, {0, 1, 2});
    OpAttrs t2;
    t2.stride = {2, 1};
    t2.padding = {1, 0};
    t2.dilation = {1, 2};
    t2.output_padding = {1, 0};
    t2.groups = 2;
    gradcheck(Op::ConvTranspose,
              {random_tensor({1, 4, 3, 2}, 4), random_tensor({4, 1, 2, 3}, 5), random_tensor({2}, 6)}, t2, {0, 1, 2});
    gradcheck(Op::ConvTranspose, {random_tensor({2, 2, 3, 3}, 7), random_tensor({2, 3, 2, 2}, 8)}, {}, {0, 1});
  }

  TEST_CASE("pool vjps in 1-D and 2-D") {
    OpAttrs p1;
    p1.kernel = {3};
    p1.stride = {2};
    p1.padding = {1};
    OpAttrs p2;
    p2.kernel = {2, 3};
    p2.stride = {1, 2};
    p2.padding = {1, 1};
    for (Op op : {Op::MaxPool, Op::AvgPool, Op::SmoothMaxPool}) {
      CAPTURE(to_string(op));
      // Random values: distinct almost surely, so max_pool has no ties to break.
      gradcheck(op, {random_tensor({2, 2, 7}, 1)}, p1, {0});
      gradcheck(op, {random_tensor({1, 2, 4, 5}, 2)}, p2, {0});
    }
    OpAttrs soft = p2;
    soft.temperature = 0.3;
    gradcheck(Op::SmoothMaxPool, {random_tensor({1, 2, 4, 5}, 3)}, soft, {0});
  }

  TEST_CASE("attention vjps") {
    gradcheck(Op::ScaledDotProductAttention,
              {random_tensor({2, 3, 4}, 1), random_tensor({2, 5, 4}, 2), random_tensor({2, 5, 3}, 3)}, {}, {0, 1, 2});
    OpAttrs causal;
    causal.causal = true;
    causal.scale = 0.7;
    Tensor mask = Tensor::from_values({3, 3}, DType::F64, {1, 1, 0, 0, 0, 0, 1, 0, 1}).value();
    gradcheck(Op::ScaledDotProductAttention,
              {random_tensor({2, 3, 2}, 4), random_tensor({2, 3, 2}, 5), random_tensor({2, 3, 2}, 6), mask}, causal,
              {0, 1, 2});
    Tensor batched = Tensor::from_values({2, 2, 3}, DType::F64, {1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1}).value();
    gradcheck(Op::ScaledDotProductAttention,
              {random_tensor({2, 2, 3}, 7), random_tensor({2, 3, 3}, 8), random_tensor({2, 3, 2}, 9), batched}, {},
              {0, 1, 2});
  }
}

namespace {

/// The forward values this file's reference.values cases check: matrix products, losses, norms, convolutions, pools and attention.
/// The list is held to what the cases run: `capsule_tests --verify-coverage` fails on an op
/// declared here and never run, or run and not declared (tests/suite_coverage.hpp).
const capsule::testing::SuiteCoverage kValueCoverage{
    "reference.values", capsule::Obligation::Value, capsule::Provider::Reference, capsule::Device::Cpu, [] {
      using enum capsule::Op;
      return std::vector<capsule::Op>{
          AvgPool, BatchNorm, Conv, ConvTranspose, CrossEntropy, Distill, LayerNorm, Linear, Matmul, MaxPool,
          MseLoss, ScaledDotProductAttention, ScaledMatmul, SmoothMaxPool, SoftmaxMatmul};
    }};

}  // namespace
