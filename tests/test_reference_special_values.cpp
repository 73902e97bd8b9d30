// SPDX-License-Identifier: Apache-2.0
// The reference kernels on special values (docs/special-values.md): NaN, ±inf, -0.0, denormals,
// extreme magnitudes and degenerate shapes, forward and backward, per kernel and through the
// tape. Each case pins a row of the semantics table that an earlier reference got wrong.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "capsule/handlers/reference.hpp"
#include "capsule/runtime/session.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

using namespace capsule;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using testing::reference_handler;

Tensor tensor(const std::vector<std::int64_t>& dims, DType dtype, const std::vector<double>& values) {
  return Tensor::from_values(Shape::make(dims).value(), dtype, values).value();
}

Tensor run(Op op, const std::vector<Tensor>& inputs, const OpAttrs& attrs = {}) {
  auto out = reference_handler(op).forward(inputs, attrs);
  REQUIRE_MESSAGE(out.has_value(), to_string(op) << ": " << (out ? std::string() : out.error().message));
  return *out;
}

std::vector<Tensor> run_backward(Op op, const std::vector<Tensor>& inputs, const Tensor& grad,
                                 const OpAttrs& attrs = {}) {
  const Tensor out = run(op, inputs, attrs);
  auto grads = reference_handler(op).backward(inputs, out, grad, attrs);
  REQUIRE_MESSAGE(grads.has_value(), to_string(op) << ": " << (grads ? std::string() : grads.error().message));
  return *grads;
}

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < t.numel(); ++i) v.push_back(t.at(i));
  return v;
}

/// Exact expectations: NaN matches NaN, zeros match with their sign, everything else bitwise
/// (after the conversion to double, which is exact for both dtypes).
void expect_exact(const Tensor& t, const std::vector<double>& want) {
  REQUIRE(t.numel() == static_cast<std::int64_t>(want.size()));
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double got = t.at(static_cast<std::int64_t>(i));
    const bool ok = std::isnan(want[i]) ? std::isnan(got)
                                        : (got == want[i] && std::signbit(got) == std::signbit(want[i]));
    CHECK_MESSAGE(ok, "element " << i << ": got " << got << ", expected " << want[i]);
  }
}

/// Relative closeness for finite expectations; NaN and ±inf must match exactly.
void expect_close(const Tensor& t, const std::vector<double>& want, double rel) {
  REQUIRE(t.numel() == static_cast<std::int64_t>(want.size()));
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double got = t.at(static_cast<std::int64_t>(i));
    bool ok = false;
    if (std::isnan(want[i])) ok = std::isnan(got);
    else if (std::isinf(want[i])) ok = got == want[i];
    else ok = std::abs(got - want[i]) <= rel * std::max(std::abs(want[i]), 1e-300);
    CHECK_MESSAGE(ok, "element " << i << ": got " << got << ", expected " << want[i]);
  }
}

/// A deterministic sequence in [lo, hi).
std::vector<double> uniform(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::vector<double> v(n);
  std::uint64_t state = seed * 2654435761u + 1;
  for (double& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<double>(state >> 11) * 0x1.0p-53;
  }
  return v;
}

/// Layer norm of one row in long double, two-pass: the oracle for the float32 kernel.
std::vector<double> layer_norm_oracle(const std::vector<double>& row, double eps) {
  long double mean = 0;
  for (double x : row) mean += x;
  mean /= static_cast<long double>(row.size());
  long double var = 0;
  for (double x : row) var += (x - mean) * (x - mean);
  var /= static_cast<long double>(row.size());
  std::vector<double> out;
  for (double x : row) out.push_back(static_cast<double>((x - mean) / std::sqrt(var + eps)));
  return out;
}

Session open_session() {
  SessionOptions options;
  options.profile = "checked_cpu";
  auto opened = Session::open(testing::shipped(), testing::reference_handlers(), options);
  REQUIRE_MESSAGE(opened, (opened ? std::string() : opened.error().message));
  return std::move(*opened);
}

/// The tape gradient of Σ op(inputs) with respect to every input (all parameters).
std::vector<Tensor> tape_gradients(Op op, const std::vector<Tensor>& inputs, const OpAttrs& attrs = {},
                                   const std::vector<bool>& differentiable = {}) {
  Session session = open_session();
  std::vector<Var> vars;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const bool param = differentiable.empty() || differentiable[i];
    vars.push_back(param ? session.parameter(inputs[i]) : session.constant(inputs[i]));
  }
  auto y = session.call(op, vars, attrs);
  REQUIRE_MESSAGE(y, (y ? std::string() : y.error().message));
  auto total = session.call(Op::ReduceSum, {*y});
  REQUIRE_MESSAGE(total, (total ? std::string() : total.error().message));
  auto grads = session.backward(*total);
  REQUIRE_MESSAGE(grads, (grads ? std::string() : grads.error().message));
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < vars.size(); ++i) out.push_back(grads->of(vars[i]));
  return out;
}

}  // namespace

TEST_SUITE("reference.values") {
  TEST_CASE("layer_norm in float32 is within a few e-6 of float64 on rows near 100") {
    const std::vector<double> row = uniform(1000, 99.0, 101.0, 7);
    // The oracle normalises the float32-rounded inputs, which are what the kernel sees.
    std::vector<double> rounded;
    for (double x : row) rounded.push_back(static_cast<double>(static_cast<float>(x)));
    const std::vector<double> want = layer_norm_oracle(rounded, 1e-5);
    const Tensor y = run(Op::LayerNorm, {tensor({1, 1000}, DType::F32, rounded)});
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::abs(y.at(static_cast<std::int64_t>(i)) - want[i]));
    }
    // LibTorch's float32 layer_norm is 6.7e-6 from float64 here; the uncorrected float32 mean gave 1.7e-4.
    CHECK_MESSAGE(worst < 8e-6, "worst |float32 - float64| = " << worst);
    MESSAGE("layer_norm float32 on 1,000 values in [99, 101]: worst |float32 - float64| = " << worst);
  }

  TEST_CASE("layer_norm and batch_norm normalise rows whose sums or squares overflow") {
    // mean 2.5e19, σ = 8.29e19: x̂ = (x − mean)/σ; the squares 5.6e39 overflow float32.
    const std::vector<double> want{0.90453403373329, -1.50755672288882, 0.90453403373329, -0.30151134457776};
    for (DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(to_string(dtype));
      const double big = dtype == DType::F32 ? 1e20 : 1e200;
      const Tensor x = tensor({1, 4}, dtype, {big, -big, big, 0});
      expect_close(run(Op::LayerNorm, {x}), want, dtype == DType::F32 ? 1e-6 : 1e-12);
      // batch_norm shares the statistics: channel 0 over a batch of 4.
      const Tensor bx = tensor({4, 1}, dtype, {big, -big, big, 0});
      expect_close(run(Op::BatchNorm, {bx}), want, dtype == DType::F32 ? 1e-6 : 1e-12);
      const std::vector<Tensor> g = run_backward(Op::LayerNorm, {x}, tensor({1, 4}, dtype, {1, -2, 0.5, 3}));
      for (double v : values_of(g[0])) CHECK(std::isfinite(v));
      // Near the largest finite value even the sum overflows: the same normalised values.
      const double huge = dtype == DType::F32 ? 3e38 : 1.5e308;
      const Tensor h = tensor({1, 4}, dtype, {huge, huge, -huge, 0});
      expect_close(run(Op::LayerNorm, {h}), {want[0], want[2], want[1], want[3]}, dtype == DType::F32 ? 1e-6 : 1e-12);
    }
  }

  TEST_CASE("layer_norm propagates NaN and infinity to its own row only") {
    const Tensor x = tensor({3, 3}, DType::F32, {1, kNaN, 3, 1, kInf, 3, 1, 2, 3});
    const Tensor y = run(Op::LayerNorm, {x});
    const double r = std::sqrt(1.5);
    expect_close(y, {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, -r, 0, r}, 1e-5);
  }

  TEST_CASE("hard_masked_softmax keeps blocked entries exactly 0 whatever the row holds") {
    for (DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(to_string(dtype));
      // Rows: NaN allowed; +inf allowed; NaN and ±inf blocked only; fully blocked with NaN.
      const Tensor scores = tensor({4, 4}, dtype,
                                   {kNaN, 1, 2, 3, kInf, 1, 2, 3, 1, kNaN, kInf, -kInf, kNaN, kInf, 1, 2});
      const Tensor mask = tensor({4, 4}, dtype, {1, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0});
      const Tensor y = run(Op::HardMaskedSoftmax, {scores, mask});
      expect_exact(y, {kNaN, kNaN, 0, 0, kNaN, kNaN, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0});
      const Tensor g = tensor({4, 4}, dtype, {1, 2, kInf, kNaN, 1, 2, kNaN, -kInf, 1, kInf, kNaN, 1, 1, 2, 3, 4});
      const std::vector<Tensor> dx = run_backward(Op::HardMaskedSoftmax, {scores, mask}, g);
      expect_exact(dx[0], {kNaN, kNaN, 0, 0, kNaN, kNaN, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
    }
  }

  TEST_CASE("max and min propagate NaN from either operand, ties and signed zeros select a") {
    for (DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(to_string(dtype));
      const Tensor a = tensor({5}, dtype, {kNaN, 1, kNaN, -0.0, 2});
      const Tensor b = tensor({5}, dtype, {1, kNaN, kNaN, 0.0, 2});
      expect_exact(run(Op::Max, {a, b}), {kNaN, kNaN, kNaN, -0.0, 2});
      expect_exact(run(Op::Min, {a, b}), {kNaN, kNaN, kNaN, -0.0, 2});
      const Tensor g = tensor({5}, dtype, {3, 4, 5, 6, 7});
      for (Op op : {Op::Max, Op::Min}) {
        // The gradient goes to the operand whose value was selected: the NaN one, a on ties.
        const std::vector<Tensor> grads = run_backward(op, {a, b}, g);
        expect_exact(grads[0], {3, 0, 5, 6, 7});
        expect_exact(grads[1], {0, 4, 0, 0, 0});
      }
    }
  }

  TEST_CASE("max_pool takes a NaN anywhere in its window") {
    OpAttrs attrs;
    attrs.kernel = {3};
    attrs.stride = {3};
    const Tensor x = tensor({1, 1, 6}, DType::F32, {1, kNaN, 5, 7, 2, kNaN});
    expect_exact(run(Op::MaxPool, {x}, attrs), {kNaN, kNaN});
    const std::vector<Tensor> dx = run_backward(Op::MaxPool, {x}, tensor({1, 1, 2}, DType::F32, {1, 2}), attrs);
    expect_exact(dx[0], {0, 1, 0, 0, 0, 2});
  }

  TEST_CASE("smooth_max_pool keeps infinities: +inf gives +inf and an all -inf window -inf") {
    OpAttrs attrs;
    attrs.kernel = {2};
    attrs.stride = {2};
    attrs.temperature = 0.5;
    for (DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(to_string(dtype));
      const Tensor x = tensor({1, 1, 8}, dtype, {kInf, 1, -kInf, -kInf, -kInf, 2, kNaN, kInf});
      expect_close(run(Op::SmoothMaxPool, {x}, attrs), {kInf, -kInf, 2, kNaN}, 1e-6);
      // Finite windows are unchanged: 0.5·log(e^2 + e^4) for (1, 2).
      const Tensor f = tensor({1, 1, 2}, dtype, {1, 2});
      expect_close(run(Op::SmoothMaxPool, {f}, attrs), {0.5 * std::log(std::exp(2.0) + std::exp(4.0))}, 1e-6);
      // Backward as LibTorch's logsumexp: an infinite maximum gives NaN weight at the infinite
      // entries and 0 at the finite ones; a -inf entry beside finite ones weighs 0.
      const std::vector<Tensor> dx =
          run_backward(Op::SmoothMaxPool, {x}, tensor({1, 1, 4}, dtype, {1, 1, 1, 1}), attrs);
      expect_exact(dx[0], {kNaN, 0, kNaN, kNaN, 0, 1, kNaN, kNaN});
    }
  }

  TEST_CASE("softmax and log_softmax of a rank-0 tensor are 1 and 0") {
    for (DType dtype : {DType::F32, DType::F64}) {
      const Tensor x = Tensor::full(Shape{}, dtype, 3.5).value();
      for (std::int64_t axis : {-1, 0}) {
        OpAttrs attrs;
        attrs.axis = axis;
        expect_exact(run(Op::Softmax, {x}, attrs), {1});
        expect_exact(run(Op::LogSoftmax, {x}, attrs), {0});
        expect_exact(run(Op::HardMaskedSoftmax, {x, Tensor::full(Shape{}, dtype, 1.0).value()}, attrs), {1});
        expect_exact(run_backward(Op::Softmax, {x}, Tensor::full(Shape{}, dtype, 2.0).value(), attrs)[0], {0});
        expect_exact(run_backward(Op::LogSoftmax, {x}, Tensor::full(Shape{}, dtype, 2.0).value(), attrs)[0], {0});
      }
    }
  }

  TEST_CASE("axis errors on a rank-0 tensor read sensibly") {
    const Tensor x = Tensor::full(Shape{}, DType::F32, 1.0).value();
    OpAttrs attrs;
    attrs.axis = 1;
    const std::vector<Tensor> inputs{x};
    auto soft = reference_handler(Op::Softmax).forward(inputs, attrs);
    REQUIRE(!soft);
    CHECK_MESSAGE(testing::has(soft.error().message, "expected -1 or 0"), soft.error().message);
    OpAttrs reduce;
    reduce.axes = {0};
    auto summed = reference_handler(Op::ReduceSum).forward(inputs, reduce);
    REQUIRE(!summed);
    CHECK_MESSAGE(testing::has(summed.error().message, "rank 0; expected no axis"), summed.error().message);
    CHECK_MESSAGE(!testing::has(soft.error().message, "-0.."), soft.error().message);
    CHECK_MESSAGE(!testing::has(summed.error().message, "-0.."), summed.error().message);
  }

  TEST_CASE("pointwise ops follow the table at NaN, +-inf and +-0, forward and backward") {
    // Inputs NaN, +inf, -inf, -0, +0; expected y and dx for g = 1 (docs/special-values.md).
    struct Row {
      Op op;
      std::vector<double> y;
      std::vector<double> dx;
    };
    const std::vector<Row> rows{
        {Op::Neg, {kNaN, -kInf, kInf, 0.0, -0.0}, {-1, -1, -1, -1, -1}},
        {Op::Abs, {kNaN, kInf, kInf, 0.0, 0.0}, {kNaN, 1, -1, 0, 0}},
        {Op::Relu, {kNaN, kInf, 0, 0, 0}, {kNaN, 1, 0, 0, 0}},
        {Op::Sqrt, {kNaN, kInf, kNaN, -0.0, 0.0}, {kNaN, 0, kNaN, -kInf, kInf}},
        {Op::Exp, {kNaN, kInf, 0, 1, 1}, {kNaN, kInf, 0, 1, 1}},
        {Op::Log, {kNaN, kInf, kNaN, -kInf, -kInf}, {kNaN, 0, -0.0, -kInf, kInf}},
        {Op::Inv, {kNaN, 0.0, -0.0, -kInf, kInf}, {kNaN, -0.0, -0.0, -kInf, -kInf}},
        {Op::Tanh, {kNaN, 1, -1, -0.0, 0.0}, {kNaN, 0, 0, 1, 1}},
        {Op::Sigmoid, {kNaN, 1, 0, 0.5, 0.5}, {kNaN, 0, 0, 0.25, 0.25}},
        {Op::Softplus, {kNaN, kInf, 0, std::log(2.0), std::log(2.0)}, {kNaN, 1, 0, 0.5, 0.5}},
        {Op::Gelu, {kNaN, kInf, kNaN, -0.0, 0.0}, {kNaN, kNaN, kNaN, 0.5, 0.5}},
        {Op::Silu, {kNaN, kInf, kNaN, -0.0, 0.0}, {kNaN, kNaN, kNaN, 0.5, 0.5}},
        {Op::Sin, {kNaN, kNaN, kNaN, -0.0, 0.0}, {kNaN, kNaN, kNaN, 1, 1}},
        {Op::Cos, {kNaN, kNaN, kNaN, 1, 1}, {kNaN, kNaN, kNaN, 0.0, -0.0}},
    };
    for (DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(to_string(dtype));
      const Tensor x = tensor({5}, dtype, {kNaN, kInf, -kInf, -0.0, 0.0});
      const Tensor g = tensor({5}, dtype, {1, 1, 1, 1, 1});
      for (const Row& row : rows) {
        CAPTURE(to_string(row.op));
        expect_close(run(row.op, {x}), row.y, 1e-6);
        const std::vector<Tensor> dx = run_backward(row.op, {x}, g);
        expect_close(dx[0], row.dx, 1e-6);
        // Signed zeros are part of the row: compare them exactly.
        for (std::size_t i = 0; i < row.y.size(); ++i) {
          if (row.y[i] != 0) continue;
          CHECK(std::signbit(run(row.op, {x}).at(static_cast<std::int64_t>(i))) == std::signbit(row.y[i]));
        }
      }
      // A denormal is an ordinary number: no flush to zero.
      const double tiny = dtype == DType::F32 ? 1e-40 : 1e-310;
      const Tensor d = tensor({1}, dtype, {tiny});
      CHECK(run(Op::Neg, {d}).at(0) == -tensor({1}, dtype, {tiny}).at(0));
      CHECK(std::isfinite(run(Op::Log, {d}).at(0)));
      CHECK(run(Op::Relu, {d}).at(0) > 0);
    }
  }

  TEST_CASE("bernoulli_mask equals rand_uniform < p when p falls between 24-bit draws") {
    OpAttrs attrs;
    attrs.shape = {256};
    attrs.seed = 42;
    for (DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(to_string(dtype));
      attrs.dtype = dtype;
      const Tensor u = run(Op::RandUniform, {}, attrs);
      // p just above each of several draws: the 24-bit draw is below p, the 53-bit one may not be.
      for (std::int64_t i : {0, 17, 100, 255}) {
        attrs.p = u.at(i) + 0x1.0p-40;
        const Tensor mask = run(Op::BernoulliMask, {}, attrs);
        for (std::int64_t j = 0; j < u.numel(); ++j) {
          CHECK_MESSAGE(mask.at(j) == (u.at(j) < attrs.p ? 1.0 : 0.0), "p ", attrs.p, " element ", j);
        }
      }
      for (double p : {0.0, 1.0}) {
        attrs.p = p;
        for (double v : values_of(run(Op::BernoulliMask, {}, attrs))) CHECK(v == p);
      }
    }
  }
}

TEST_SUITE("reference.values") {
  TEST_CASE("the special-values table names every op that has a reference handler") {
    const std::string table = testing::read_text(testing::source_dir() / "docs" / "special-values.md");
    int ops = 0;
    for (int i = 0; i <= static_cast<int>(Op::Custom); ++i) {
      const auto op = static_cast<Op>(i);
      if (testing::reference_handlers().find(op, Provider::Reference, Device::Cpu) == nullptr) continue;
      ++ops;
      CHECK_MESSAGE(testing::has(table, str("`", to_string(op), "`")), to_string(op), " is missing from the table");
    }
    CHECK(ops == 53);
  }
}

TEST_SUITE("reference.vjps") {
  TEST_CASE("div's adjoint stays finite at tiny, denormal and huge operands where the true value is") {
    // float32 against the exact quotient rule in double (float32's range squared fits in double).
    struct Triple {
      double a, b, g;
    };
    const std::vector<Triple> triples{
        {1e-30, 1e-30, 1e-20},  // b² underflows: the old −(g·a)/(b·b) gave 0/0 = NaN
        {1e-42, 1e-40, 1e-30},  // denormal a and b
        {1e-30, 1e-10, 1e30},   // g/b overflows (a's gradient is inf) though g·a/b² = 1e20
        {1, 1e-20, 1e-30},      // a/b² overflows though g·a/b² = 1e10
        {1e30, 1e20, 1e30},     // g·a overflows though g·a/b² = 1e20
        {-3, 7, 0.25},          // ordinary
    };
    for (const Triple& t : triples) {
      CAPTURE(t.a);
      CAPTURE(t.b);
      CAPTURE(t.g);
      const auto f = [](double v) { return static_cast<double>(static_cast<float>(v)); };
      const double a = f(t.a), b = f(t.b), g = f(t.g);
      const std::vector<Tensor> grads =
          run_backward(Op::Div, {tensor({1}, DType::F32, {a}), tensor({1}, DType::F32, {b})},
                       tensor({1}, DType::F32, {g}));
      expect_close(grads[0], {static_cast<double>(static_cast<float>(g / b))}, 1e-6);
      expect_close(grads[1], {-(g * a) / (b * b)}, 4e-7);
    }
    // Zeros and infinities follow IEEE through LibTorch's order −g·((a/b)/b).
    const std::vector<Tensor> special =
        run_backward(Op::Div, {tensor({3}, DType::F64, {kInf, 1, 0}), tensor({3}, DType::F64, {2, 0, 5})},
                     tensor({3}, DType::F64, {1, 1, 1}));
    expect_exact(special[0], {0.5, kInf, 0.2});
    expect_exact(special[1], {-kInf, -kInf, -0.0});
  }

  TEST_CASE("selection slopes: NaN at NaN, safe_log's right-hand derivative at its clamp point") {
    for (DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(to_string(dtype));
      const Tensor g = tensor({3}, dtype, {2, 2, 2});
      for (Op op : {Op::Relu, Op::Abs, Op::Clamp, Op::SafeLog}) {
        CAPTURE(to_string(op));
        OpAttrs attrs;
        attrs.lo = -1;
        attrs.hi = 1;
        const Tensor x = tensor({3}, dtype, {kNaN, 0.5, 0.25});
        expect_close(run_backward(op, {x}, g, attrs)[0],
                     {kNaN, op == Op::SafeLog ? 4.0 : 2.0, op == Op::SafeLog ? 8.0 : 2.0}, 1e-6);
      }
      OpAttrs attrs;
      attrs.eps = 0.25;  // exact in both dtypes
      const Tensor at_eps = tensor({3}, dtype, {0.25, 0.125, 0.5});
      expect_exact(run_backward(Op::SafeLog, {at_eps}, g, attrs)[0], {8, 0, 4});
    }
  }

  TEST_CASE("attention's adjoint keeps a non-finite value at a blocked key out of the scores' gradient") {
    // Key 2 is blocked for every query and its value is +inf: dW = g·vᵀ is inf there, and the
    // softmax adjoint's Σ_j W·dW once took 0·inf = NaN into every entry of dq and dk.
    const Tensor q = tensor({2, 1}, DType::F64, {0.5, -1});
    const Tensor k = tensor({3, 1}, DType::F64, {1, 2, -1});
    const Tensor v = tensor({3, 1}, DType::F64, {1, -2, kInf});
    const Tensor mask = tensor({2, 3}, DType::F64, {1, 1, 0, 1, 1, 0});
    const std::vector<Tensor> grads =
        run_backward(Op::ScaledDotProductAttention, {q, k, v, mask}, tensor({2, 1}, DType::F64, {1, 1}));
    for (std::size_t i = 0; i < 2; ++i) {
      for (double x : values_of(grads[i])) CHECK_MESSAGE(std::isfinite(x), "input ", i, ": ", x);
    }
    CHECK(grads[1].at(2) == 0.0);  // the blocked key's own gradient
  }

  TEST_CASE("attention: a NaN or infinite value at a blocked key adds nothing, forward and dv") {
    // Keys 1 and 2 are blocked for query 0, key 2 for query 1; query 2 blocks every key. Their
    // values are NaN and +inf: no allowed edge meets them except key 1 for query 1.
    const Tensor q = tensor({3, 1}, DType::F64, {0.5, -1, 2});
    const Tensor k = tensor({3, 1}, DType::F64, {1, 2, -1});
    const Tensor mask = tensor({3, 3}, DType::F64, {1, 0, 0, 1, 1, 0, 0, 0, 0});
    const Tensor poisoned = tensor({3, 2}, DType::F64, {1, -2, kNaN, 3, kInf, kInf});
    const Tensor clean = tensor({3, 2}, DType::F64, {1, -2, 7, 3, 9, 9});
    const Tensor y = run(Op::ScaledDotProductAttention, {q, k, poisoned, mask});
    const Tensor y_clean = run(Op::ScaledDotProductAttention, {q, k, clean, mask});
    // Query 0 sees key 0 only: its output is v₀ exactly, whatever the blocked keys hold.
    CHECK(y.at(0) == 1.0);
    CHECK(y.at(1) == -2.0);
    // Query 1 meets the NaN of key 1 through an allowed edge in column 0 only.
    CHECK(std::isnan(y.at(2)));
    CHECK(y.at(3) == y_clean.at(3));
    // Query 2 blocks every key: the empty sum, +0.
    CHECK(y.at(4) == 0.0);
    CHECK_FALSE(std::signbit(y.at(4)));
    CHECK(y.at(5) == 0.0);

    // dv = Wᵀ·g over the allowed edges: the NaN and +inf incoming gradient of query 2, which
    // blocks every key, reaches no key.
    const Tensor g = tensor({3, 2}, DType::F64, {1, 1, 1, 1, kNaN, kInf});
    const std::vector<Tensor> grads = run_backward(Op::ScaledDotProductAttention, {q, k, clean, mask}, g);
    for (double x : values_of(grads[2])) CHECK_MESSAGE(std::isfinite(x), "dv holds ", x);
  }

  TEST_CASE("tape: hard_masked_softmax's gradient is exactly 0 on blocked entries") {
    const Tensor scores = tensor({2, 3}, DType::F64, {kNaN, 1, kInf, 1, 2, kNaN});
    const Tensor mask = tensor({2, 3}, DType::F64, {1, 1, 0, 1, 1, 0});
    const std::vector<Tensor> grads = tape_gradients(Op::HardMaskedSoftmax, {scores, mask}, {}, {true, false});
    // Row 0 holds NaN among its allowed entries: those are NaN, the blocked one stays 0. Row 1
    // is finite with a NaN blocked: the softmax gradient of Σ y is 0 everywhere.
    expect_exact(grads[0], {kNaN, kNaN, 0, 0, 0, 0});
  }

  TEST_CASE("tape: div's gradient is finite where the true value is") {
    const Tensor a = tensor({2}, DType::F64, {1e-300, 1});
    const Tensor b = tensor({2}, DType::F64, {1e-10, 1e-200});
    const Tensor g = tensor({2}, DType::F64, {1e300, 1e-300});
    Session session = open_session();
    const Var va = session.parameter(a);
    const Var vb = session.parameter(b);
    auto y = session.call(Op::Div, {va, vb});
    REQUIRE(y);
    auto weighted = session.call(Op::Mul, {*y, session.constant(g)});
    REQUIRE(weighted);
    auto total = session.call(Op::ReduceSum, {*weighted});
    REQUIRE(total);
    auto grads = session.backward(*total);
    REQUIRE(grads);
    // g/b overflows (the a-gradient is truly infinite), yet g·a/b² = 1e20: the old composition
    // −(g/b)·y gave −inf for b.
    expect_close(grads->of(va), {kInf, 1e-100}, 1e-12);
    expect_close(grads->of(vb), {-1e20, -1e100}, 1e-12);
  }

  TEST_CASE("tape: softmax and log_softmax of a rank-0 tensor have gradient 0") {
    for (Op op : {Op::Softmax, Op::LogSoftmax}) {
      CAPTURE(to_string(op));
      const std::vector<Tensor> grads = tape_gradients(op, {Tensor::full(Shape{}, DType::F64, 2.0).value()});
      expect_exact(grads[0], {0});
    }
  }

  TEST_CASE("tape: linear with zero input features") {
    const Tensor x = Tensor::zeros(Shape::make({3, 0}).value(), DType::F64).value();
    const Tensor w = Tensor::zeros(Shape::make({2, 0}).value(), DType::F64).value();
    const Tensor bias = tensor({2}, DType::F64, {0.5, -1});
    const std::vector<Tensor> grads = tape_gradients(Op::Linear, {x, w, bias});
    CHECK(grads[0].shape() == x.shape());
    CHECK(grads[1].shape() == w.shape());
    expect_exact(grads[2], {3, 3});  // each of the 3 rows adds 1 to each bias entry
  }
}
