// SPDX-License-Identifier: Apache-2.0
// Reference handlers of the elementwise, softmax-family, reduction, random and shape ops: values
// against hand-computed expectations in both dtypes, error reports, the bitwise fixed-left order
// of reductions, and every differentiable op's adjoint against finite differences.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "capsule/handlers/reference.hpp"
#include "gradcheck.hpp"
#include "suite_coverage.hpp"
#include "test_support.hpp"

using namespace capsule;

namespace {

constexpr std::array kDTypes{DType::F32, DType::F64};

using testing::reference_handler;

RuntimeResult<Tensor> forward(Op op, const std::vector<Tensor>& inputs, const OpAttrs& attrs = {}) {
  return reference_handler(op).forward(inputs, attrs);
}

/// Runs the forward kernel and fails the test (with the kernel's message) when it fails.
Tensor run(Op op, const std::vector<Tensor>& inputs, const OpAttrs& attrs = {}) {
  auto out = forward(op, inputs, attrs);
  REQUIRE_MESSAGE(out.has_value(), to_string(op) << ": " << (out ? std::string() : out.error().message));
  return *out;
}

std::vector<Tensor> run_backward(Op op, const std::vector<Tensor>& inputs, const Tensor& grad,
                                 const OpAttrs& attrs = {}) {
  const Tensor out = run(op, inputs, attrs);
  REQUIRE((reference_handler(op).backward != nullptr));
  auto grads = reference_handler(op).backward(inputs, out, grad, attrs);
  REQUIRE_MESSAGE(grads.has_value(), to_string(op) << ": " << (grads ? std::string() : grads.error().message));
  return *grads;
}

Tensor tensor(const std::vector<std::int64_t>& dims, DType dtype, const std::vector<double>& values) {
  return Tensor::from_values(Shape::make(dims).value(), dtype, values).value();
}

/// Shape and values within a relative tolerance fitting the dtype; NaN expects NaN.
void expect_values(const Tensor& t, const std::vector<std::int64_t>& dims, const std::vector<double>& want) {
  CHECK(t.shape().to_vector() == dims);
  REQUIRE(t.numel() == static_cast<std::int64_t>(want.size()));
  const double tolerance = t.dtype() == DType::F32 ? 2e-6 : 1e-13;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double got = t.at(static_cast<std::int64_t>(i));
    const bool ok = std::isnan(want[i]) ? std::isnan(got)
                                        : std::abs(got - want[i]) <= tolerance * std::max(1.0, std::abs(want[i]));
    CHECK_MESSAGE(ok, "element " << i << ": got " << got << ", expected " << want[i]);
  }
}

/// The forward fails with `code` and a message containing every one of `parts`.
void expect_error(const RuntimeResult<Tensor>& result, RuntimeCode code, const std::vector<std::string>& parts) {
  REQUIRE_MESSAGE(!result.has_value(), "expected an error; got a tensor of shape " << to_string(result->shape()));
  CHECK_MESSAGE(result.error().code == code, result.error().message);
  for (const std::string& part : parts) {
    CHECK_MESSAGE(result.error().message.find(part) != std::string::npos,
                  "`" << part << "` missing from: " << result.error().message);
  }
}

void check_vjp(Op op, std::vector<Tensor> inputs, const OpAttrs& attrs, const std::vector<std::size_t>& which) {
  INFO(to_string(op));
  const HandlerSpec& h = reference_handler(op);
  REQUIRE((h.backward != nullptr));
  const test::GradcheckReport report = test::gradcheck_kernel(h.forward, h.backward, std::move(inputs), attrs, which);
  CHECK_MESSAGE(report.ok, to_string(op) << ": " << report.detail << " (worst " << report.worst_error << ")");
}

OpAttrs with_axis(std::int64_t axis) {
  OpAttrs attrs;
  attrs.axis = axis;
  return attrs;
}

std::uint32_t bits_of(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

}  // namespace

TEST_SUITE("reference.values") {
  TEST_CASE("binary elementwise ops") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor a = tensor({2, 2}, dt, {1, -2, 3, 0.5});
      const Tensor b = tensor({2, 2}, dt, {4, 5, -6, 0.5});
      expect_values(run(Op::Add, {a, b}), {2, 2}, {5, 3, -3, 1});
      expect_values(run(Op::Sub, {a, b}), {2, 2}, {-3, -7, 9, 0});
      expect_values(run(Op::Mul, {a, b}), {2, 2}, {4, -10, -18, 0.25});
      expect_values(run(Op::Div, {a, b}), {2, 2}, {0.25, -0.4, -0.5, 1});
      expect_values(run(Op::Max, {a, b}), {2, 2}, {4, 5, 3, 0.5});
      expect_values(run(Op::Min, {a, b}), {2, 2}, {1, -2, -6, 0.5});
      CHECK(run(Op::Add, {a, b}).dtype() == dt);
    }
  }

  TEST_CASE("max and min pass the gradient to a on ties") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor a = tensor({4}, dt, {1, -2, 3, 0.5});
      const Tensor b = tensor({4}, dt, {4, 5, -6, 0.5});
      const Tensor g = tensor({4}, dt, {1, 2, 3, 4});
      auto max_grads = run_backward(Op::Max, {a, b}, g);
      expect_values(max_grads[0], {4}, {0, 0, 3, 4});
      expect_values(max_grads[1], {4}, {1, 2, 0, 0});
      auto min_grads = run_backward(Op::Min, {a, b}, g);
      expect_values(min_grads[0], {4}, {1, 2, 0, 4});
      expect_values(min_grads[1], {4}, {0, 0, 3, 0});
      auto div_grads = run_backward(Op::Div, {a, b}, g);
      expect_values(div_grads[0], {4}, {0.25, 0.4, -0.5, 8});
      expect_values(div_grads[1], {4}, {-1.0 / 16, 2 * 2.0 / 25, -3 * 3.0 / 36, -4 * 0.5 / 0.25});
    }
  }

  TEST_CASE("unary elementwise ops") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor x = tensor({2, 2}, dt, {-1, 0, 0.5, 2});
      expect_values(run(Op::Neg, {x}), {2, 2}, {1, 0, -0.5, -2});
      expect_values(run(Op::Abs, {x}), {2, 2}, {1, 0, 0.5, 2});
      expect_values(run(Op::Relu, {x}), {2, 2}, {0, 0, 0.5, 2});
      expect_values(run(Op::Gelu, {x}), {2, 2}, {-0.15865525393145707, 0, 0.34573123063700656, 1.9544997361036416});
      expect_values(run(Op::Sigmoid, {x}), {2, 2}, {0.2689414213699951, 0.5, 0.6224593312018546, 0.8807970779778823});
      expect_values(run(Op::Silu, {x}), {2, 2}, {-0.2689414213699951, 0, 0.3112296656009273, 1.7615941559557646});
      expect_values(run(Op::Tanh, {x}), {2, 2}, {-0.7615941559557649, 0, 0.46211715726000974, 0.9640275800758169});
      expect_values(run(Op::Softplus, {x}), {2, 2},
                    {0.31326168751822286, 0.6931471805599453, 0.9740769841801067, 2.1269280110429727});
      expect_values(run(Op::Exp, {x}), {2, 2}, {0.36787944117144233, 1, 1.6487212707001282, 7.38905609893065});
      expect_values(run(Op::Sin, {x}), {2, 2}, {-0.8414709848078965, 0, 0.479425538604203, 0.9092974268256817});
      expect_values(run(Op::Cos, {x}), {2, 2}, {0.5403023058681398, 1, 0.8775825618903728, -0.4161468365471424});

      const Tensor pos = tensor({4}, dt, {0, 0.25, 4, 2});
      expect_values(run(Op::Sqrt, {pos}), {4}, {0, 0.5, 2, 1.4142135623730951});
      const Tensor logs = tensor({4}, dt, {1, 0.5, 2, 0.125});
      expect_values(run(Op::Log, {logs}), {4}, {0, -0.6931471805599453, 0.6931471805599453, -2.0794415416798357});
      expect_values(run(Op::Inv, {tensor({4}, dt, {-1, 0.5, 2, 4})}), {4}, {-1, 2, 0.5, 0.25});
    }
  }

  TEST_CASE("scale clamp and safe_log read their payload") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor x = tensor({4}, dt, {-1, 0, 0.5, 2});
      OpAttrs scale;
      scale.alpha = -2.5;
      expect_values(run(Op::Scale, {x}, scale), {4}, {2.5, 0, -1.25, -5});
      OpAttrs clamp;
      clamp.lo = -0.5;
      clamp.hi = 1;
      expect_values(run(Op::Clamp, {x}, clamp), {4}, {-0.5, 0, 0.5, 1});

      const Tensor logs = tensor({4}, dt, {0, 1, -3, 2});
      expect_values(run(Op::SafeLog, {logs}), {4},
                    {-27.631021115928547, 0, -27.631021115928547, 0.6931471805599453});
      OpAttrs eps;
      eps.eps = 0.5;
      expect_values(run(Op::SafeLog, {tensor({3}, dt, {0.25, 1, 2})}, eps), {3},
                    {-0.6931471805599453, 0, 0.6931471805599453});
    }
  }

  TEST_CASE("unary gradients at the conventional points") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor x = tensor({4}, dt, {-1, 0, 0.5, 2});
      const Tensor g = tensor({4}, dt, {1, 1, 1, 1});
      expect_values(run_backward(Op::Relu, {x}, g)[0], {4}, {0, 0, 1, 1});
      expect_values(run_backward(Op::Abs, {x}, g)[0], {4}, {-1, 0, 1, 1});
      OpAttrs clamp;
      clamp.lo = 0;
      clamp.hi = 0.5;
      // Inclusive bounds: the gradient passes at x = lo and x = hi.
      expect_values(run_backward(Op::Clamp, {x}, g, clamp)[0], {4}, {0, 1, 1, 0});
      OpAttrs eps;
      eps.eps = 0.5;
      // 1/x at and above eps (the right-hand derivative at the clamp point, as LibTorch), 0 below.
      expect_values(run_backward(Op::SafeLog, {x}, g, eps)[0], {4}, {0, 0, 2, 0.5});
      expect_values(run_backward(Op::Gelu, {tensor({1}, dt, {0})}, tensor({1}, dt, {1}))[0], {1}, {0.5});
    }
  }

  TEST_CASE("sigmoid softplus and relu stay finite or propagate NaN at extremes") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const double nan = std::numeric_limits<double>::quiet_NaN();
      const Tensor x = tensor({3}, dt, {-1000, 1000, nan});
      expect_values(run(Op::Sigmoid, {x}), {3}, {0, 1, nan});
      expect_values(run(Op::Softplus, {x}), {3}, {0, 1000, nan});
      expect_values(run(Op::Silu, {x}), {3}, {0, 1000, nan});
      expect_values(run(Op::Relu, {x}), {3}, {0, 1000, nan});
      OpAttrs clamp;
      clamp.lo = -1;
      clamp.hi = 1;
      expect_values(run(Op::Clamp, {x}, clamp), {3}, {-1, 1, nan});
    }
  }

  TEST_CASE("softmax and log_softmax along the last and a leading axis") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor x = tensor({2, 3}, dt, {1, 2, 3, 0, 0, 0});
      const double third = 1.0 / 3;
      expect_values(run(Op::Softmax, {x}), {2, 3},
                    {0.09003057317038046, 0.24472847105479767, 0.6652409557748219, third, third, third});
      expect_values(run(Op::Softmax, {x}, with_axis(0)), {2, 3},
                    {0.7310585786300049, 0.8807970779778823, 0.9525741268224334, 0.2689414213699951,
                     0.11920292202211755, 0.04742587317756678});
      const double lt = -1.0986122886681098;
      expect_values(run(Op::LogSoftmax, {x}), {2, 3},
                    {-2.40760596444438, -1.4076059644443804, -0.40760596444438046, lt, lt, lt});
      expect_values(run(Op::LogSoftmax, {x}, with_axis(-2)), {2, 3},
                    {-0.3132616875182228, -0.12692801104297263, -0.04858735157374191, -1.3132616875182228,
                     -2.1269280110429727, -3.048587351573742});
    }
  }

  TEST_CASE("hard_masked_softmax blocks entries exactly and zeroes fully blocked rows") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor scores = tensor({2, 3}, dt, {1, 2, 3, 4, 5, 6});
      const Tensor mask = tensor({2, 3}, dt, {1, 0, 1, 0, 0, 0});
      const Tensor y = run(Op::HardMaskedSoftmax, {scores, mask});
      expect_values(y, {2, 3}, {0.11920292202211755, 0, 0.8807970779778823, 0, 0, 0});
      CHECK(y.at(1) == 0.0);
      // Along axis 0 each column is its own lane: column 1 is fully blocked.
      expect_values(run(Op::HardMaskedSoftmax, {scores, mask}, with_axis(0)), {2, 3}, {1, 0, 1, 0, 0, 0});
      auto grads = run_backward(Op::HardMaskedSoftmax, {scores, mask}, tensor({2, 3}, dt, {1, 2, 3, 4, 5, 6}));
      REQUIRE(grads.size() == 2);
      CHECK_FALSE(grads[1].defined());
      CHECK(grads[0].at(1) == 0.0);
      for (std::int64_t i = 3; i < 6; ++i) CHECK(grads[0].at(i) == 0.0);
    }
  }

  TEST_CASE("top_k_mask breaks ties by lower index along any axis") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor x = tensor({2, 4}, dt, {3, 1, 3, 2, 0, 5, 5, 5});
      OpAttrs attrs;
      attrs.k = 2;
      expect_values(run(Op::TopKMask, {x}, attrs), {2, 4}, {1, 0, 1, 0, 0, 1, 1, 0});
      attrs.k = 1;
      attrs.axis = 0;
      expect_values(run(Op::TopKMask, {tensor({2, 3}, dt, {3, 1, 7, 0, 5, 7})}, attrs), {2, 3}, {1, 0, 1, 0, 1, 0});
      attrs.axis = -1;
      attrs.k = 0;
      expect_values(run(Op::TopKMask, {x}, attrs), {2, 4}, {0, 0, 0, 0, 0, 0, 0, 0});
      attrs.k = 1;
      const double nan = std::numeric_limits<double>::quiet_NaN();
      expect_values(run(Op::TopKMask, {tensor({3}, dt, {1, nan, 2})}, attrs), {3}, {0, 1, 0});
      CHECK((reference_handler(Op::TopKMask).backward == nullptr));
    }
  }

  TEST_CASE("reduce_sum and reduce_mean over axes with and without keepdim") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor x = tensor({2, 3}, dt, {1, 2, 3, 4, 5, 6});
      OpAttrs attrs;
      expect_values(run(Op::ReduceSum, {x}, attrs), {}, {21});
      expect_values(run(Op::ReduceMean, {x}, attrs), {}, {3.5});
      attrs.keepdim = true;
      expect_values(run(Op::ReduceSum, {x}, attrs), {1, 1}, {21});
      attrs.axes = {0};
      expect_values(run(Op::ReduceSum, {x}, attrs), {1, 3}, {5, 7, 9});
      attrs.keepdim = false;
      expect_values(run(Op::ReduceSum, {x}, attrs), {3}, {5, 7, 9});
      expect_values(run(Op::ReduceMean, {x}, attrs), {3}, {2.5, 3.5, 4.5});
      attrs.axes = {-1};
      expect_values(run(Op::ReduceSum, {x}, attrs), {2}, {6, 15});
      expect_values(run(Op::ReduceMean, {x}, attrs), {2}, {2, 5});
      attrs.axes = {-1, 0};
      expect_values(run(Op::ReduceSum, {x}, attrs), {}, {21});

      const Tensor cube = tensor({2, 2, 2}, dt, {1, 2, 3, 4, 5, 6, 7, 8});
      attrs.axes = {0, 2};
      expect_values(run(Op::ReduceSum, {cube}, attrs), {2}, {1 + 2 + 5 + 6, 3 + 4 + 7 + 8});
      attrs.keepdim = true;
      expect_values(run(Op::ReduceMean, {cube}, attrs), {1, 2, 1}, {3.5, 5.5});
      auto grads = run_backward(Op::ReduceMean, {cube}, tensor({1, 2, 1}, dt, {4, 8}), attrs);
      expect_values(grads[0], {2, 2, 2}, {1, 1, 2, 2, 1, 1, 2, 2});
    }
  }

  TEST_CASE("reduce_sum is a bitwise fixed-left sum") {
    // Signed magnitudes from 1e-3 to 1e8, with ±1e8 spikes that swallow the small terms: every
    // other association order rounds differently.
    constexpr std::int64_t kRows = 997;
    std::vector<double> values;
    std::uint64_t state = 12345;
    for (std::int64_t i = 0; i < kRows * 3; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const double unit = static_cast<double>(state >> 11) * 0x1.0p-53;
      if (i % 5 == 0) {
        values.push_back(i % 10 == 0 ? 1e8 : -1e8);
      } else {
        values.push_back((unit - 0.5) * std::pow(10.0, static_cast<double>(i % 11) - 3));
      }
    }
    const Tensor x = tensor({kRows, 3}, DType::F32, values);
    const float* xs = x.data<float>();

    float naive = 0.0f;
    for (std::int64_t i = 0; i < x.numel(); ++i) naive = naive + xs[i];
    float reversed = 0.0f;
    for (std::int64_t i = x.numel(); i-- > 0;) reversed = reversed + xs[i];
    // Pairs first, then a left fold over the pair sums: one reassociation the kernel must not do.
    float paired = 0.0f;
    for (std::int64_t i = 0; i + 1 < x.numel(); i += 2) paired = paired + (xs[i] + xs[i + 1]);
    if (x.numel() % 2 != 0) paired = paired + xs[x.numel() - 1];
    REQUIRE(bits_of(naive) != bits_of(reversed));  // the data really is order-sensitive
    REQUIRE(bits_of(naive) != bits_of(paired));

    const Tensor total = run(Op::ReduceSum, {x});
    CHECK(std::memcmp(total.data<float>(), &naive, sizeof naive) == 0);
    const Tensor mean = run(Op::ReduceMean, {x});
    const float naive_mean = naive / static_cast<float>(x.numel());
    CHECK(std::memcmp(mean.data<float>(), &naive_mean, sizeof naive_mean) == 0);

    // Along the strided leading axis each column folds its own rows in increasing row order.
    OpAttrs attrs;
    attrs.axes = {0};
    const Tensor columns = run(Op::ReduceSum, {x}, attrs);
    for (std::int64_t c = 0; c < 3; ++c) {
      float column = 0.0f;
      for (std::int64_t r = 0; r < kRows; ++r) column = column + xs[r * 3 + c];
      CHECK(std::memcmp(columns.data<float>() + c, &column, sizeof column) == 0);
    }
  }

  TEST_CASE("scatter_add and broadcast adjoints add fixed-left") {
    // Only the order base + 1e8 + 1 - 1e8 ... keeps the bits below; 1e8 + 1 rounds to 1e8 in f32.
    const Tensor base = tensor({1}, DType::F32, {0.5});
    const Tensor src = tensor({4}, DType::F32, {1e8, 1, -1e8, 3});
    OpAttrs attrs;
    attrs.axis = 0;
    attrs.indices = {0, 0, 0, 0};
    const Tensor out = run(Op::ScatterAdd, {base, src}, attrs);
    float expected = 0.5f;
    for (float v : {1e8f, 1.0f, -1e8f, 3.0f}) expected = expected + v;
    CHECK(out.data<float>()[0] == expected);

    OpAttrs to;
    to.shape = {4, 1};
    const Tensor column = src.reshaped(Shape::make({4, 1}).value()).value();
    auto grads = run_backward(Op::Broadcast, {tensor({1}, DType::F32, {0})}, column, to);
    float folded = 0.0f;
    for (float v : {1e8f, 1.0f, -1e8f, 3.0f}) folded = folded + v;
    CHECK(grads[0].data<float>()[0] == folded);
  }

  TEST_CASE("random ops are deterministic per seed") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      OpAttrs attrs;
      attrs.shape = {100, 100};
      attrs.dtype = dt;
      attrs.seed = 7;
      const Tensor u = run(Op::RandUniform, {}, attrs);
      CHECK(u.dtype() == dt);
      CHECK(u.shape().to_vector() == std::vector<std::int64_t>{100, 100});
      const Tensor again = run(Op::RandUniform, {}, attrs);
      CHECK(u.to_vector() == again.to_vector());
      double total = 0.0;
      for (const double v : u.to_vector()) {
        CHECK((v >= 0.0 && v < 1.0));
        total += v;
      }
      CHECK(total / 10000.0 == doctest::Approx(0.5).epsilon(0.02));
      attrs.seed = 8;
      CHECK(run(Op::RandUniform, {}, attrs).to_vector() != u.to_vector());

      attrs.p = 0.3;
      const Tensor mask = run(Op::BernoulliMask, {}, attrs);
      CHECK(mask.to_vector() == run(Op::BernoulliMask, {}, attrs).to_vector());
      double ones = 0.0;
      for (const double v : mask.to_vector()) {
        CHECK((v == 0.0 || v == 1.0));
        ones += v;
      }
      CHECK(ones / 10000.0 == doctest::Approx(0.3).epsilon(0.05));
      attrs.p = 0.0;
      for (const double v : run(Op::BernoulliMask, {}, attrs).to_vector()) CHECK(v == 0.0);
      attrs.p = 1.0;
      for (const double v : run(Op::BernoulliMask, {}, attrs).to_vector()) CHECK(v == 1.0);
      CHECK((reference_handler(Op::RandUniform).backward == nullptr));
      CHECK((reference_handler(Op::BernoulliMask).backward == nullptr));
    }
  }

  TEST_CASE("reshape views the same storage and infers one -1") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor x = tensor({2, 3}, dt, {1, 2, 3, 4, 5, 6});
      OpAttrs attrs;
      attrs.shape = {3, -1};
      const Tensor y = run(Op::Reshape, {x}, attrs);
      expect_values(y, {3, 2}, {1, 2, 3, 4, 5, 6});
      CHECK(y.shares_storage_with(x));
      attrs.shape = {6};
      expect_values(run(Op::Reshape, {x}, attrs), {6}, {1, 2, 3, 4, 5, 6});
    }
  }

  TEST_CASE("permute broadcast concat and slice") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor x = tensor({2, 3}, dt, {1, 2, 3, 4, 5, 6});
      OpAttrs perm;
      perm.axes = {1, 0};
      expect_values(run(Op::Permute, {x}, perm), {3, 2}, {1, 4, 2, 5, 3, 6});
      perm.axes = {2, 0, 1};
      expect_values(run(Op::Permute, {tensor({2, 1, 3}, dt, {1, 2, 3, 4, 5, 6})}, perm), {3, 2, 1},
                    {1, 4, 2, 5, 3, 6});

      OpAttrs to;
      to.shape = {2, 3};
      expect_values(run(Op::Broadcast, {tensor({3}, dt, {1, 2, 3})}, to), {2, 3}, {1, 2, 3, 1, 2, 3});
      expect_values(run(Op::Broadcast, {tensor({2, 1}, dt, {7, 8})}, to), {2, 3}, {7, 7, 7, 8, 8, 8});
      to.shape = {2};
      expect_values(run(Op::Broadcast, {tensor({}, dt, {4})}, to), {2}, {4, 4});
      to.shape = {2, 2, 3};
      expect_values(run(Op::Broadcast, {tensor({2, 1}, dt, {7, 8})}, to), {2, 2, 3},
                    {7, 7, 7, 8, 8, 8, 7, 7, 7, 8, 8, 8});
      auto summed = run_backward(Op::Broadcast, {tensor({2, 1}, dt, {7, 8})},
                                 tensor({2, 2, 3}, dt, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), to);
      expect_values(summed[0], {2, 1}, {1 + 2 + 3 + 7 + 8 + 9, 4 + 5 + 6 + 10 + 11 + 12});

      const Tensor a = tensor({2, 1}, dt, {10, 20});
      const Tensor b = tensor({2, 2}, dt, {1, 2, 3, 4});
      expect_values(run(Op::Concat, {a, b}, with_axis(1)), {2, 3}, {10, 1, 2, 20, 3, 4});
      expect_values(run(Op::Concat, {b, x}, with_axis(-1)), {2, 5}, {1, 2, 1, 2, 3, 3, 4, 4, 5, 6});
      expect_values(run(Op::Concat, {b, b}, with_axis(0)), {4, 2}, {1, 2, 3, 4, 1, 2, 3, 4});
      auto parts = run_backward(Op::Concat, {a, b}, tensor({2, 3}, dt, {1, 2, 3, 4, 5, 6}), with_axis(1));
      expect_values(parts[0], {2, 1}, {1, 4});
      expect_values(parts[1], {2, 2}, {2, 3, 5, 6});

      OpAttrs slice;
      slice.axis = 1;
      slice.start = 1;
      slice.end = 3;
      expect_values(run(Op::Slice, {x}, slice), {2, 2}, {2, 3, 5, 6});
      expect_values(run_backward(Op::Slice, {x}, tensor({2, 2}, dt, {1, 2, 3, 4}), slice)[0], {2, 3},
                    {0, 1, 2, 0, 3, 4});
      slice.start = 2;
      slice.end = 2;
      expect_values(run(Op::Slice, {x}, slice), {2, 0}, {});
    }
  }

  TEST_CASE("gather and scatter_add") {
    for (const DType dt : kDTypes) {
      INFO(to_string(dt));
      const Tensor x = tensor({3, 2}, dt, {1, 2, 3, 4, 5, 6});
      OpAttrs attrs;
      attrs.axis = 0;
      attrs.indices = {2, 0, 2};
      expect_values(run(Op::Gather, {x}, attrs), {3, 2}, {5, 6, 1, 2, 5, 6});
      expect_values(run_backward(Op::Gather, {x}, tensor({3, 2}, dt, {1, 2, 3, 4, 5, 6}), attrs)[0], {3, 2},
                    {3, 4, 0, 0, 6, 8});
      attrs.axis = 1;
      attrs.indices = {1};
      expect_values(run(Op::Gather, {x}, attrs), {3, 1}, {2, 4, 6});

      attrs.axis = 0;
      attrs.indices = {1, 1};
      const Tensor src = tensor({2, 2}, dt, {10, 20, 30, 40});
      expect_values(run(Op::ScatterAdd, {x, src}, attrs), {3, 2}, {1, 2, 43, 64, 5, 6});
      auto grads = run_backward(Op::ScatterAdd, {x, src}, tensor({3, 2}, dt, {1, 2, 3, 4, 5, 6}), attrs);
      expect_values(grads[0], {3, 2}, {1, 2, 3, 4, 5, 6});
      expect_values(grads[1], {2, 2}, {3, 4, 3, 4});
    }
  }

  TEST_CASE("shape mismatches name both shapes") {
    const Tensor a = tensor({2, 3}, DType::F32, {1, 2, 3, 4, 5, 6});
    const Tensor b = tensor({3, 2}, DType::F32, {1, 2, 3, 4, 5, 6});
    expect_error(forward(Op::Add, {a, b}), RuntimeCode::ShapeMismatch, {"add", "[2, 3]", "[3, 2]"});
    expect_error(forward(Op::HardMaskedSoftmax, {a, b}), RuntimeCode::ShapeMismatch,
                 {"hard_masked_softmax", "[2, 3]", "[3, 2]"});
    expect_error(forward(Op::Concat, {a, b}, with_axis(0)), RuntimeCode::ShapeMismatch, {"concat", "[2, 3]", "[3, 2]"});
    OpAttrs to;
    to.shape = {2, 4};
    expect_error(forward(Op::Broadcast, {a}, to), RuntimeCode::ShapeMismatch, {"broadcast", "[2, 3]", "[2, 4]"});
    to.shape = {3};
    expect_error(forward(Op::Broadcast, {a}, to), RuntimeCode::ShapeMismatch, {"broadcast", "[2, 3]", "[3]"});
    OpAttrs reshape;
    reshape.shape = {4, 2};
    expect_error(forward(Op::Reshape, {a}, reshape), RuntimeCode::ShapeMismatch, {"reshape", "[2, 3]", "[4, 2]"});
    reshape.shape = {4, -1};
    expect_error(forward(Op::Reshape, {a}, reshape), RuntimeCode::ShapeMismatch, {"reshape", "[2, 3]"});
    OpAttrs scatter;
    scatter.axis = 0;
    scatter.indices = {0};
    expect_error(forward(Op::ScatterAdd, {a, a}, scatter), RuntimeCode::ShapeMismatch,
                 {"scatter_add", "[2, 3]", "[1, 3]"});

    // A backward kernel checks the incoming gradient against the forward output's shape.
    const HandlerSpec& relu = reference_handler(Op::Relu);
    auto grads = relu.backward(std::vector<Tensor>{a}, a, b, OpAttrs{});
    REQUIRE_FALSE(grads.has_value());
    CHECK(grads.error().code == RuntimeCode::ShapeMismatch);
    CHECK(grads.error().message.find("[3, 2]") != std::string::npos);
  }

  TEST_CASE("operand count dtype and definedness are checked") {
    const Tensor f = tensor({2}, DType::F32, {1, 2});
    const Tensor d = tensor({2}, DType::F64, {1, 2});
    expect_error(forward(Op::Mul, {f, d}), RuntimeCode::DTypeMismatch, {"mul", "float32", "float64"});
    expect_error(forward(Op::Concat, {f, d}, with_axis(0)), RuntimeCode::DTypeMismatch, {"concat"});
    expect_error(forward(Op::Relu, {f, f}), RuntimeCode::InvalidArgument, {"relu", "2 inputs", "expected 1"});
    expect_error(forward(Op::Add, {f}), RuntimeCode::InvalidArgument, {"add", "1 inputs", "expected 2"});
    expect_error(forward(Op::Exp, {Tensor()}), RuntimeCode::InvalidArgument, {"exp", "undefined"});
    expect_error(forward(Op::RandUniform, {f}), RuntimeCode::InvalidArgument, {"rand_uniform", "expected 0"});
    expect_error(forward(Op::Concat, {}), RuntimeCode::InvalidArgument, {"concat", "at least 1"});
  }

  TEST_CASE("bad axes are rejected") {
    const Tensor x = tensor({2, 3}, DType::F64, {1, 2, 3, 4, 5, 6});
    expect_error(forward(Op::Softmax, {x}, with_axis(2)), RuntimeCode::InvalidArgument,
                 {"softmax", "axis 2", "rank 2"});
    expect_error(forward(Op::LogSoftmax, {x}, with_axis(-3)), RuntimeCode::InvalidArgument, {"log_softmax", "-3"});
    // A rank-0 tensor is one lane of one entry along axis -1 or 0; any other axis is an error.
    expect_error(forward(Op::Softmax, {tensor({}, DType::F64, {1})}, with_axis(1)), RuntimeCode::InvalidArgument,
                 {"softmax", "axis 1", "expected -1 or 0"});
    OpAttrs reduce;
    reduce.axes = {0, -2};
    expect_error(forward(Op::ReduceSum, {x}, reduce), RuntimeCode::InvalidArgument, {"reduce_sum", "twice"});
    reduce.axes = {5};
    expect_error(forward(Op::ReduceMean, {x}, reduce), RuntimeCode::InvalidArgument, {"reduce_mean", "axis 5"});
    OpAttrs perm;
    perm.axes = {0, 0};
    expect_error(forward(Op::Permute, {x}, perm), RuntimeCode::InvalidArgument, {"permute", "twice"});
    perm.axes = {0};
    expect_error(forward(Op::Permute, {x}, perm), RuntimeCode::InvalidArgument, {"permute", "[2, 3]"});
    expect_error(forward(Op::Concat, {x, x}, with_axis(2)), RuntimeCode::InvalidArgument, {"concat", "axis 2"});
    expect_error(forward(Op::Gather, {x}, with_axis(-4)), RuntimeCode::InvalidArgument, {"gather", "-4"});
  }

  TEST_CASE("bad payload values are rejected") {
    const Tensor x = tensor({2, 3}, DType::F64, {1, 2, 3, 4, 5, 6});
    OpAttrs clamp;
    clamp.lo = 2;
    clamp.hi = 1;
    expect_error(forward(Op::Clamp, {x}, clamp), RuntimeCode::InvalidArgument, {"clamp", "lo = 2", "hi = 1"});
    clamp.lo = std::numeric_limits<double>::quiet_NaN();
    expect_error(forward(Op::Clamp, {x}, clamp), RuntimeCode::InvalidArgument, {"clamp"});
    OpAttrs eps;
    eps.eps = -1;
    expect_error(forward(Op::SafeLog, {x}, eps), RuntimeCode::InvalidArgument, {"safe_log", "-1"});
    OpAttrs scale;
    scale.alpha = std::numeric_limits<double>::infinity();
    expect_error(forward(Op::Scale, {x}, scale), RuntimeCode::InvalidArgument, {"scale", "finite"});
    OpAttrs p;
    p.shape = {2};
    p.p = 1.5;
    expect_error(forward(Op::BernoulliMask, {}, p), RuntimeCode::InvalidArgument, {"bernoulli_mask", "1.5"});
    p.p = std::numeric_limits<double>::quiet_NaN();
    expect_error(forward(Op::BernoulliMask, {}, p), RuntimeCode::InvalidArgument, {"bernoulli_mask"});
    OpAttrs k;
    k.k = 4;
    expect_error(forward(Op::TopKMask, {x}, k), RuntimeCode::InvalidArgument, {"top_k_mask", "k = 4", "size 3"});
    k.k = -1;
    expect_error(forward(Op::TopKMask, {x}, k), RuntimeCode::InvalidArgument, {"top_k_mask", "k = -1"});
    OpAttrs slice;
    slice.axis = 1;
    slice.start = 2;
    slice.end = 1;
    expect_error(forward(Op::Slice, {x}, slice), RuntimeCode::InvalidArgument, {"slice", "[2, 1)"});
    slice.start = 0;
    slice.end = 4;
    expect_error(forward(Op::Slice, {x}, slice), RuntimeCode::InvalidArgument, {"slice", "<= 3"});
    OpAttrs gather;
    gather.axis = 1;
    gather.indices = {0, 3};
    expect_error(forward(Op::Gather, {x}, gather), RuntimeCode::InvalidArgument,
                 {"gather", "index 3", "position 1", "size 3"});
    gather.indices = {-1};
    expect_error(forward(Op::ScatterAdd, {x, tensor({2, 1}, DType::F64, {1, 2})}, gather),
                 RuntimeCode::InvalidArgument, {"scatter_add", "index -1"});
    OpAttrs reshape;
    reshape.shape = {-1, -1};
    expect_error(forward(Op::Reshape, {x}, reshape), RuntimeCode::InvalidArgument, {"reshape", "-1"});
    reshape.shape = {2, -3};
    expect_error(forward(Op::Reshape, {x}, reshape), RuntimeCode::InvalidArgument, {"reshape", "-3"});
  }

  TEST_CASE("element counts that overflow are size-overflow errors") {
    const Tensor x = tensor({1}, DType::F32, {1});
    const std::int64_t big = std::int64_t{1} << 40;
    OpAttrs to;
    to.shape = {big, big};
    expect_error(forward(Op::Broadcast, {x}, to), RuntimeCode::SizeOverflow, {});
    OpAttrs random;
    random.shape = {big, big};
    expect_error(forward(Op::RandUniform, {}, random), RuntimeCode::SizeOverflow, {});
    OpAttrs reshape;
    reshape.shape = {big, big, -1};
    expect_error(forward(Op::Reshape, {x}, reshape), RuntimeCode::SizeOverflow, {"reshape"});
    // An empty tensor whose nonzero dims multiply past 2^63 cannot even be shaped.
    auto empty = Shape::make({0, big, big});
    REQUIRE_FALSE(empty);
    CHECK(empty.error().code == RuntimeCode::SizeOverflow);
  }

  TEST_CASE("empty tensors pass through") {
    const Tensor empty = Tensor::zeros(Shape::make({0, 3}).value(), DType::F64).value();
    CHECK(run(Op::Exp, {empty}).numel() == 0);
    CHECK(run(Op::Softmax, {empty}, with_axis(0)).numel() == 0);
    OpAttrs reduce;
    reduce.axes = {0};
    expect_values(run(Op::ReduceSum, {empty}, reduce), {3}, {0, 0, 0});
    const double nan = std::numeric_limits<double>::quiet_NaN();
    expect_values(run(Op::ReduceMean, {empty}, reduce), {3}, {nan, nan, nan});
    expect_values(run(Op::Concat, {empty, empty}, with_axis(0)), {0, 3}, {});
  }
}

TEST_SUITE("reference.vjps") {
  TEST_CASE("binary elementwise adjoints") {
    using test::random_tensor;
    const Tensor a = random_tensor({2, 3}, 1);
    const Tensor b = random_tensor({2, 3}, 2);
    const Tensor positive = random_tensor({2, 3}, 3, 0.5, 2.0);
    check_vjp(Op::Add, {a, b}, {}, {0, 1});
    check_vjp(Op::Sub, {a, b}, {}, {0, 1});
    check_vjp(Op::Mul, {a, b}, {}, {0, 1});
    check_vjp(Op::Div, {a, positive}, {}, {0, 1});
    check_vjp(Op::Max, {a, b}, {}, {0, 1});
    check_vjp(Op::Min, {a, b}, {}, {0, 1});
  }

  TEST_CASE("unary elementwise adjoints") {
    using test::random_tensor;
    const Tensor x = random_tensor({3, 4}, 4, -2.0, 2.0);
    const Tensor positive = random_tensor({3, 4}, 5, 0.5, 2.0);
    // Away from 0, where relu and abs have no derivative.
    const Tensor away = Tensor::from_values({2, 3}, DType::F64, {-1.5, -0.3, 0.2, 0.7, -0.01, 2.5}).value();
    for (const Op op : {Op::Neg, Op::Gelu, Op::Sigmoid, Op::Silu, Op::Tanh, Op::Softplus, Op::Exp, Op::Sin, Op::Cos}) {
      check_vjp(op, {x}, {}, {0});
    }
    check_vjp(Op::Abs, {away}, {}, {0});
    check_vjp(Op::Relu, {away}, {}, {0});
    check_vjp(Op::Sqrt, {positive}, {}, {0});
    check_vjp(Op::Log, {positive}, {}, {0});
    check_vjp(Op::Inv, {positive}, {}, {0});
    check_vjp(Op::Inv, {away}, {}, {0});
    OpAttrs scale;
    scale.alpha = -1.75;
    check_vjp(Op::Scale, {x}, scale, {0});
    OpAttrs clamp;
    clamp.lo = -0.5;
    clamp.hi = 0.75;
    check_vjp(Op::Clamp, {x}, clamp, {0});
    OpAttrs eps;
    eps.eps = 0.3;
    // Entries on both sides of eps: 1/x above it, 0 below.
    check_vjp(Op::SafeLog, {random_tensor({3, 4}, 6, 0.01, 1.0)}, eps, {0});
    check_vjp(Op::SafeLog, {positive}, {}, {0});
  }

  TEST_CASE("softmax family adjoints along every axis") {
    const Tensor x = test::random_tensor({2, 3, 4}, 7, -2.0, 2.0);
    for (const std::int64_t axis : {-1, 0, 1, 2}) {
      INFO("axis " << axis);
      check_vjp(Op::Softmax, {x}, with_axis(axis), {0});
      check_vjp(Op::LogSoftmax, {x}, with_axis(axis), {0});
    }
    // One fully blocked row along the last axis, partly blocked rows elsewhere.
    const Tensor scores = test::random_tensor({3, 4}, 8, -2.0, 2.0);
    const Tensor mask = Tensor::from_values({3, 4}, DType::F64, {1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1}).value();
    check_vjp(Op::HardMaskedSoftmax, {scores, mask}, with_axis(-1), {0});
    check_vjp(Op::HardMaskedSoftmax, {scores, mask}, with_axis(0), {0});
  }

  TEST_CASE("reduction adjoints") {
    const Tensor x = test::random_tensor({2, 3, 4}, 9);
    OpAttrs attrs;
    check_vjp(Op::ReduceSum, {x}, attrs, {0});
    check_vjp(Op::ReduceMean, {x}, attrs, {0});
    attrs.axes = {0, 2};
    check_vjp(Op::ReduceSum, {x}, attrs, {0});
    check_vjp(Op::ReduceMean, {x}, attrs, {0});
    attrs.keepdim = true;
    attrs.axes = {1};
    check_vjp(Op::ReduceSum, {x}, attrs, {0});
    check_vjp(Op::ReduceMean, {x}, attrs, {0});
  }

  TEST_CASE("shape op adjoints") {
    using test::random_tensor;
    const Tensor x = random_tensor({2, 3, 4}, 10);
    OpAttrs reshape;
    reshape.shape = {4, -1};
    check_vjp(Op::Reshape, {x}, reshape, {0});
    OpAttrs perm;
    perm.axes = {2, 0, 1};
    check_vjp(Op::Permute, {x}, perm, {0});
    perm.axes = {1, -1, 0};
    check_vjp(Op::Permute, {x}, perm, {0});
    OpAttrs to;
    to.shape = {3, 2, 3, 4};
    check_vjp(Op::Broadcast, {random_tensor({2, 1, 4}, 11)}, to, {0});
    to.shape = {2, 3};
    check_vjp(Op::Broadcast, {random_tensor({}, 12)}, to, {0});
    check_vjp(Op::Concat, {x, random_tensor({2, 2, 4}, 13), random_tensor({2, 1, 4}, 14)}, with_axis(1), {0, 1, 2});
    check_vjp(Op::Concat, {x, x}, with_axis(-1), {0, 1});
    OpAttrs slice;
    slice.axis = 2;
    slice.start = 1;
    slice.end = 3;
    check_vjp(Op::Slice, {x}, slice, {0});
    OpAttrs gather;
    gather.axis = 1;
    gather.indices = {2, 0, 2, 2};
    check_vjp(Op::Gather, {x}, gather, {0});
    check_vjp(Op::ScatterAdd, {x, random_tensor({2, 4, 4}, 15)}, gather, {0, 1});
    gather.axis = 0;
    gather.indices = {1, 1, 0};
    check_vjp(Op::ScatterAdd, {x, random_tensor({3, 3, 4}, 16)}, gather, {0, 1});
  }
}

namespace {

/// The forward values this file's reference.values cases check: elementwise, softmax family, reductions, random and shape ops.
/// The list is held to what the cases run: `capsule_tests --verify-coverage` fails on an op
/// declared here and never run, or run and not declared (tests/suite_coverage.hpp).
const capsule::testing::SuiteCoverage kValueCoverage{
    "reference.values", capsule::Obligation::Value, capsule::Provider::Reference, capsule::Device::Cpu, [] {
      using enum capsule::Op;
      return std::vector<capsule::Op>{
          Abs, Add, BernoulliMask, Broadcast, Clamp, Concat, Cos, Div, Exp, Gather, Gelu, HardMaskedSoftmax, Inv,
          Log, LogSoftmax, Max, Min, Mul, Neg, Permute, RandUniform, ReduceMean, ReduceSum, Relu, Reshape,
          SafeLog, Scale, ScatterAdd, Sigmoid, Silu, Sin, Slice, Softmax, Softplus, Sqrt, Sub, Tanh, TopKMask};
    }};

}  // namespace
