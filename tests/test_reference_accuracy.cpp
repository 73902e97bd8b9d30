// SPDX-License-Identifier: Apache-2.0
// Accuracy of every float32 reference kernel, forward and backward, against a float64 oracle:
// the float64 kernel run on the same (float32-representable) inputs, whose own error is ~1e-16,
// nine orders below what is measured. Each op has a tolerance derived from its arithmetic:
// - exact ops (data movement, selections, max_pool, top_k_mask): 0;
// - pointwise ops: a number of float32 ulps of the oracle's value;
// - sums and products (reduce_*, matmul, linear, conv, avg_pool): n·u·Σ|terms| per element, where
//   Σ|terms| is the float64 kernel run on the absolute values of the inputs (exact for a
//   multilinear op) and n the longest chain of roundings;
// - everything else (softmax family, losses, norms, smooth_max_pool, attention): n·u·max(1, ‖y‖∞),
//   normwise, with n the reduction length times a small constant.
// Forwards are checked in reference.values and backwards in reference.vjps. The measured worst
// error of every op is printed (doctest MESSAGE) and recorded in docs/special-values.md; the
// bound is what fails the test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/handlers/reference.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

using namespace capsule;

namespace {

constexpr double kU = 0x1.0p-24;  // float32 unit roundoff

enum class Bound : std::uint8_t { Exact, Ulps, SumOfTerms, Normwise };

struct Input {
  std::vector<std::int64_t> dims;
  double lo = -2;
  double hi = 2;
  std::vector<double> fixed = {};  ///< explicit values (masks, targets)
};

struct AccuracyCase {
  Op op;
  std::vector<Input> inputs;
  OpAttrs attrs;
  Bound bound;
  double forward_n;   ///< ulps, or the n of n·u·(...)
  double backward_n;  ///< the same for the backward (ignored for ops without one)
};

std::vector<double> values_in(const Input& in, std::uint64_t seed) {
  std::int64_t count = 1;
  for (std::int64_t d : in.dims) count *= d;
  if (!in.fixed.empty()) return in.fixed;
  std::vector<double> v(static_cast<std::size_t>(count));
  std::uint64_t state = seed * 2654435761u + 11;
  for (double& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    // Rounded to float32 so both kernels see exactly the same numbers.
    x = static_cast<float>(in.lo + (in.hi - in.lo) * static_cast<double>(state >> 11) * 0x1.0p-53);
  }
  return v;
}

Tensor make(const std::vector<std::int64_t>& dims, DType dtype, const std::vector<double>& v) {
  return Tensor::from_values(Shape::make(dims).value(), dtype, v).value();
}

Tensor absolute(const Tensor& t) {
  if (!t.defined()) return t;
  std::vector<double> v;
  for (std::int64_t i = 0; i < t.numel(); ++i) v.push_back(std::abs(t.at(i)));
  return make(t.shape().to_vector(), t.dtype(), v);
}

/// One float32 ulp at the magnitude of v (the float32 spacing, denormal floor included).
double ulp32(double v) {
  const double a = std::abs(v);
  if (a < 0x1.0p-126) return 0x1.0p-149;
  int e = 0;
  (void)std::frexp(a, &e);
  return std::ldexp(1.0, e - 24);
}

/// The worst error of `got` (float32) against `want` (float64) in the bound's units, and
/// whether any element breaks the exactness of an exact op.
/// For Ulps, the ulp is taken at max(|want|, |floor|) when a floor is given: a backward's error is
/// measured in ulps of max(|dx|, |g|), since near a zero of f' the product g·f'(x) is small while
/// its error stays a few ulps of g.
double measure(Bound bound, const Tensor& got, const Tensor& want, const Tensor& terms, const Tensor& floor = {}) {
  REQUIRE(got.shape() == want.shape());
  double worst = 0;
  double norm = 1;
  for (std::int64_t i = 0; i < want.numel(); ++i) norm = std::max(norm, std::abs(want.at(i)));
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double diff = std::abs(got.at(i) - want.at(i));
    double e = 0;
    switch (bound) {
      case Bound::Exact: e = diff == 0 ? 0 : diff / ulp32(want.at(i)); break;
      case Bound::Ulps: {
        const double at = floor.defined() ? std::max(std::abs(want.at(i)), std::abs(floor.at(i))) : want.at(i);
        e = diff / ulp32(at);
        break;
      }
      case Bound::SumOfTerms: {
        const double scale = kU * terms.at(i);
        e = scale == 0 ? (diff == 0 ? 0 : 1e30) : diff / scale;
        break;
      }
      case Bound::Normwise: e = diff / (kU * norm); break;
    }
    worst = std::max(worst, e);
  }
  return worst;
}

std::vector<Tensor> build(const AccuracyCase& c, DType dtype, bool abs_values) {
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    Tensor t = make(c.inputs[i].dims, dtype, values_in(c.inputs[i], i + 5));
    out.push_back(abs_values ? absolute(t) : t);
  }
  return out;
}

std::string report_line(const AccuracyCase& c, std::string_view part, double error, double bound) {
  std::ostringstream line;
  static constexpr const char* kUnits[] = {"(exact)", "ulps", "u*sum|terms|", "u*max(1,|y|)"};
  line << std::setprecision(3) << to_string(c.op) << ": " << part << " " << error << " "
       << kUnits[static_cast<int>(c.bound)] << "; bound " << bound;
  return line.str();
}

enum class Part : std::uint8_t { Forward, Backward };

void check_case(const AccuracyCase& c, Part part) {
  CAPTURE(to_string(c.op));
  const HandlerSpec& h = testing::reference_handler(c.op);
  const std::vector<Tensor> in32 = build(c, DType::F32, false);
  const std::vector<Tensor> in64 = build(c, DType::F64, false);
  auto y32 = h.forward(in32, c.attrs);
  auto y64 = h.forward(in64, c.attrs);
  REQUIRE_MESSAGE(y32, (y32 ? std::string() : y32.error().message));
  REQUIRE_MESSAGE(y64, (y64 ? std::string() : y64.error().message));
  Tensor terms;
  if (c.bound == Bound::SumOfTerms) terms = h.forward(build(c, DType::F64, true), c.attrs).value();
  if (part == Part::Forward) {
    const double fwd = measure(c.bound, *y32, *y64, terms);
    CHECK_MESSAGE(fwd <= c.forward_n, "forward error ", fwd, " exceeds ", c.forward_n);
    MESSAGE(report_line(c, "forward", fwd, c.forward_n));
    return;
  }
  if (h.backward == nullptr) return;  // top_k_mask: no VJP
  double bwd = 0;
  {
    const Input grad_spec{y64->shape().to_vector(), -1, 1};
    const std::vector<double> gv = values_in(grad_spec, 99);
    const Tensor g32 = make(grad_spec.dims, DType::F32, gv);
    const Tensor g64 = make(grad_spec.dims, DType::F64, gv);
    auto d32 = h.backward(in32, *y32, g32, c.attrs);
    auto d64 = h.backward(in64, *y64, g64, c.attrs);
    REQUIRE_MESSAGE(d32, (d32 ? std::string() : d32.error().message));
    REQUIRE(d64);
    std::vector<Tensor> dterms;
    if (c.bound == Bound::SumOfTerms) {
      const std::vector<Tensor> abs_in = build(c, DType::F64, true);
      const Tensor abs_y = h.forward(abs_in, c.attrs).value();
      dterms = h.backward(abs_in, abs_y, absolute(g64), c.attrs).value();
    }
    for (std::size_t i = 0; i < d64->size(); ++i) {
      if (!(*d64)[i].defined()) continue;
      const Tensor floor = (*d64)[i].shape() == g64.shape() ? g64 : Tensor();
      bwd = std::max(bwd, measure(c.bound, (*d32)[i], (*d64)[i], dterms.empty() ? Tensor() : dterms[i], floor));
    }
    CHECK_MESSAGE(bwd <= c.backward_n, "backward error ", bwd, " exceeds ", c.backward_n);
  }
  MESSAGE(report_line(c, "backward", bwd, c.backward_n));
}

OpAttrs attrs_with(auto&& fill) {
  OpAttrs attrs;
  fill(attrs);
  return attrs;
}

std::vector<AccuracyCase> cases() {
  const Input v64{{64}};
  const Input pos64{{64}, 0.5, 2};
  const Input rows{{4, 16}};
  std::vector<AccuracyCase> out;
  // Pointwise: correctly rounded IEEE operations are within 0.5 ulp; libm functions and short
  // formulas within a few ulps. Backward formulas take 2–4 more roundings and are measured in
  // ulps of max(|dx|, |g|); tanh' = 1 − y² and σ' = y(1 − y) amplify y's error by up to
  // 2y²/(1 − y²) ≈ 13 on [-2, 2], hence 8.
  for (Op op : {Op::Add, Op::Sub, Op::Mul}) out.push_back({op, {v64, v64}, {}, Bound::Ulps, 0.5, 0.5});
  out.push_back({Op::Div, {v64, pos64}, {}, Bound::Ulps, 0.5, 2});
  for (Op op : {Op::Max, Op::Min}) out.push_back({op, {v64, v64}, {}, Bound::Exact, 0, 0});
  for (Op op : {Op::Neg, Op::Abs, Op::Relu}) out.push_back({op, {v64}, {}, Bound::Exact, 0, 0});
  out.push_back({Op::Clamp, {v64}, attrs_with([](OpAttrs& a) { a.lo = -0.5; a.hi = 0.5; }), Bound::Exact, 0, 0});
  out.push_back({Op::Scale, {v64}, attrs_with([](OpAttrs& a) { a.alpha = 1.7; }), Bound::Ulps, 1, 1});
  for (Op op : {Op::Sqrt, Op::Log, Op::Inv, Op::SafeLog}) out.push_back({op, {pos64}, {}, Bound::Ulps, 2, 4});
  for (Op op : {Op::Exp, Op::Sin, Op::Cos, Op::Tanh, Op::Sigmoid, Op::Softplus, Op::Silu}) {
    out.push_back({op, {v64}, {}, Bound::Ulps, 4, 8});
  }
  // erfc(t) amplifies the rounding of its argument t = −x/√2 by 2t²·(…) ≈ 4 at x = −2.
  out.push_back({Op::Gelu, {v64}, {}, Bound::Ulps, 8, 8});
  // Softmax family: a lane of n entries; max-shifted exp, a fixed-left sum of n terms, a divide.
  for (Op op : {Op::Softmax, Op::LogSoftmax}) out.push_back({op, {rows}, {}, Bound::Normwise, 2 * 16, 4 * 16});
  std::vector<double> mask(64, 1.0);
  for (std::size_t i = 0; i < mask.size(); i += 3) mask[i] = 0;
  out.push_back({Op::HardMaskedSoftmax, {rows, Input{{4, 16}, 0, 1, mask}}, {}, Bound::Normwise, 2 * 16, 4 * 16});
  out.push_back({Op::TopKMask, {rows}, attrs_with([](OpAttrs& a) { a.k = 3; }), Bound::Exact, 0, 0});
  // Reductions: a fixed-left sum of n terms (γ_n), the mean one divide more.
  const OpAttrs along1 = attrs_with([](OpAttrs& a) { a.axes = {1}; });
  out.push_back({Op::ReduceSum, {Input{{8, 64}}}, along1, Bound::SumOfTerms, 64, 1});
  out.push_back({Op::ReduceMean, {Input{{8, 64}}}, along1, Bound::SumOfTerms, 65, 1});
  // Data movement copies values.
  out.push_back({Op::Reshape, {Input{{8, 8}}}, attrs_with([](OpAttrs& a) { a.shape = {4, 16}; }), Bound::Exact, 0, 0});
  out.push_back({Op::Permute, {Input{{4, 8}}}, attrs_with([](OpAttrs& a) { a.axes = {1, 0}; }), Bound::Exact, 0, 0});
  out.push_back({Op::Broadcast, {Input{{1, 8}}}, attrs_with([](OpAttrs& a) { a.shape = {4, 8}; }), Bound::SumOfTerms,
                 0, 4});
  out.push_back({Op::Concat, {Input{{4, 8}}, Input{{2, 8}}}, attrs_with([](OpAttrs& a) { a.axis = 0; }), Bound::Exact,
                 0, 0});
  out.push_back({Op::Slice, {Input{{4, 8}}}, attrs_with([](OpAttrs& a) { a.axis = 1; a.start = 2; a.end = 6; }),
                 Bound::Exact, 0, 0});
  const OpAttrs picks = attrs_with([](OpAttrs& a) { a.axis = 0; a.indices = {1, 1, 0}; });
  out.push_back({Op::Gather, {Input{{4, 8}}}, picks, Bound::SumOfTerms, 0, 2});
  out.push_back({Op::ScatterAdd, {Input{{4, 8}}, Input{{3, 8}}}, picks, Bound::SumOfTerms, 2, 0});
  // Products: a fixed-left dot product of k terms; scaled_matmul one multiply more.
  out.push_back({Op::Matmul, {Input{{8, 32}}, Input{{32, 8}}}, {}, Bound::SumOfTerms, 32, 32});
  out.push_back({Op::ScaledMatmul, {Input{{8, 32}}, Input{{32, 8}}}, attrs_with([](OpAttrs& a) { a.alpha = 0.7; }),
                 Bound::SumOfTerms, 33, 33});
  out.push_back({Op::Linear, {Input{{8, 32}}, Input{{16, 32}}, Input{{16}}}, {}, Bound::SumOfTerms, 33, 16});
  out.push_back({Op::SoftmaxMatmul, {Input{{8, 32}}, Input{{32, 8}}}, {}, Bound::Normwise, 4 * 32, 8 * 32});
  // Losses: sums over every element.
  const Input probs{{8, 16}, 0, 1};
  out.push_back({Op::MseLoss, {Input{{8, 16}}, Input{{8, 16}}}, {}, Bound::Normwise, 2 * 128, 4 * 128});
  out.push_back({Op::CrossEntropy, {Input{{8, 16}}, probs}, {}, Bound::Normwise, 4 * 128, 4 * 128});
  out.push_back({Op::Distill, {Input{{8, 16}}, Input{{8, 16}}}, attrs_with([](OpAttrs& a) { a.temperature = 2; }),
                 Bound::Normwise, 4 * 128, 4 * 128});
  // Norms: two passes of n terms and a square root.
  out.push_back({Op::LayerNorm, {Input{{8, 32}}, Input{{32}}, Input{{32}}}, {}, Bound::Normwise, 4 * 32, 8 * 32});
  out.push_back({Op::BatchNorm, {Input{{8, 4, 4}}, Input{{4}}, Input{{4}}}, {}, Bound::Normwise, 4 * 32, 8 * 32});
  // Windows: a fixed-left sum over in_channels·kernel terms (9 here), avg_pool one divide more.
  const OpAttrs window = attrs_with([](OpAttrs& a) { a.kernel = {3}; a.stride = {2}; });
  out.push_back({Op::Conv, {Input{{2, 3, 10}}, Input{{4, 3, 3}}, Input{{4}}}, {}, Bound::SumOfTerms, 10, 20});
  out.push_back({Op::ConvTranspose, {Input{{2, 3, 6}}, Input{{3, 4, 3}}, Input{{4}}}, {}, Bound::SumOfTerms, 10, 20});
  // Non-overlapping windows, so no input receives two gradients and the routing is exact.
  out.push_back({Op::MaxPool, {Input{{2, 3, 9}}}, attrs_with([](OpAttrs& a) { a.kernel = {3}; a.stride = {3}; }),
                 Bound::Exact, 0, 0});
  out.push_back({Op::AvgPool, {Input{{2, 3, 10}}}, window, Bound::SumOfTerms, 4, 4});
  out.push_back({Op::SmoothMaxPool, {Input{{2, 3, 10}}}, attrs_with([](OpAttrs& a) {
                   a.kernel = {3};
                   a.stride = {2};
                   a.temperature = 0.5;
                 }),
                 Bound::Normwise, 4 * 3, 8 * 3});
  out.push_back({Op::ScaledDotProductAttention, {Input{{2, 4, 8}}, Input{{2, 5, 8}}, Input{{2, 5, 8}}}, {},
                 Bound::Normwise, 4 * 8 * 5, 8 * 8 * 5});
  return out;
}

}  // namespace

TEST_SUITE("reference.values") {
  TEST_CASE("every float32 kernel is within its op-derived bound of the float64 oracle") {
    for (const AccuracyCase& c : cases()) check_case(c, Part::Forward);
  }

  TEST_CASE("random ops: the float32 draw is the float64 draw truncated to 24 bits") {
    OpAttrs attrs;
    attrs.shape = {4096};
    attrs.seed = 9;
    attrs.dtype = DType::F32;
    const Tensor u32 = testing::reference_handler(Op::RandUniform).forward({}, attrs).value();
    attrs.dtype = DType::F64;
    const Tensor u64 = testing::reference_handler(Op::RandUniform).forward({}, attrs).value();
    for (std::int64_t i = 0; i < u32.numel(); ++i) {
      CHECK(u32.at(i) == std::ldexp(std::floor(std::ldexp(u64.at(i), 24)), -24));
    }
  }

  TEST_CASE("the accuracy cases cover every op with a reference handler") {
    std::vector<Op> covered{Op::RandUniform, Op::BernoulliMask};  // the random-ops case above
    for (const AccuracyCase& c : cases()) covered.push_back(c.op);
    for (int i = 0; i <= static_cast<int>(Op::Custom); ++i) {
      const auto op = static_cast<Op>(i);
      if (testing::reference_handlers().find(op, Provider::Reference, Device::Cpu) == nullptr) continue;
      CHECK_MESSAGE(std::find(covered.begin(), covered.end(), op) != covered.end(), to_string(op), " has no case");
    }
  }
}

TEST_SUITE("reference.vjps") {
  TEST_CASE("every float32 adjoint kernel is within its op-derived bound of the float64 oracle") {
    for (const AccuracyCase& c : cases()) check_case(c, Part::Backward);
  }
}
