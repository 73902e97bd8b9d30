// SPDX-License-Identifier: Apache-2.0
// The LibTorch parity table and its forward and adjoint checks (parity_table.hpp). The bounds are
// derived in docs/libtorch.md, "Parity bounds"; a CUDA twin is held to the same cases and bounds
// as its CPU twin, except for the two bounds AtenBackend names (docs/libtorch.md, "Parity bounds on
// CUDA").
#include "parity_table.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "capsule/text.hpp"

namespace capsule::libtorch_parity {

// ---------------------------------------------------------------------------------------------
// Bounds (docs/libtorch.md, "Parity bounds"). u is the unit roundoff of the dtype.

double unit_roundoff(DType dtype) { return dtype == DType::F32 ? 0x1p-24 : 0x1p-53; }

namespace {

double ulp_of(double r, DType dtype) {
  const double floor = dtype == DType::F32 ? double(std::numeric_limits<float>::min()) : std::numeric_limits<double>::min();
  return std::max(std::abs(r), floor) * 2 * unit_roundoff(dtype);
}

}  // namespace

bool same_bits(double l, double r) {
  if (std::isnan(l) || std::isnan(r)) return std::isnan(l) && std::isnan(r);
  return l == r && std::signbit(l) == std::signbit(r);
}

std::optional<std::string> structural_difference(const Tensor& lib, const Tensor& ref) {
  if (lib.defined() != ref.defined()) return "one side has no gradient";
  if (!lib.defined()) return "";
  if (lib.shape() != ref.shape()) return str("shape ", to_string(lib.shape()), " vs ", to_string(ref.shape()));
  if (lib.dtype() != ref.dtype()) return "dtype differs";
  return std::nullopt;
}

std::string compare(const Tensor& lib, const Tensor& ref, const Tolerance& tol, const Tensor* terms,
                    std::int64_t n) {
  if (auto difference = structural_difference(lib, ref)) return *difference;
  const std::vector<double> l = lib.to_vector();
  const std::vector<double> r = ref.to_vector();
  const std::vector<double> t = terms != nullptr && terms->defined() ? terms->to_vector() : std::vector<double>{};
  double lane_max = 1;
  for (const double v : r) {
    if (std::isfinite(v)) lane_max = std::max(lane_max, std::abs(v));
  }
  const double u = unit_roundoff(lib.dtype());
  for (std::size_t i = 0; i < l.size(); ++i) {
    if (tol.bound == Bound::Exact || !std::isfinite(r[i]) || !std::isfinite(l[i])) {
      // Non-finite results are a class, not a magnitude: they must match exactly.
      const bool ok = tol.bound == Bound::Exact ? same_bits(l[i], r[i])
                                                : (std::isnan(r[i]) ? std::isnan(l[i]) : l[i] == r[i]);
      if (!ok) return str("element ", i, ": libtorch ", l[i], " vs reference ", r[i]);
      continue;
    }
    double allowed = 0;
    if (tol.bound == Bound::Ulps) allowed = tol.k * ulp_of(r[i], lib.dtype());
    else if (tol.bound == Bound::Terms) allowed = tol.k * double(n) * u * (t.empty() ? 1.0 : std::abs(t[i]));
    else allowed = tol.k * double(n) * u * lane_max;
    if (!(std::abs(l[i] - r[i]) <= allowed)) {
      return str("element ", i, ": libtorch ", l[i], " vs reference ", r[i], " (|diff| ", std::abs(l[i] - r[i]),
                 " > bound ", allowed, ")");
    }
  }
  return "";
}

RuntimeResult<Tensor> make_input(const InputSpec& spec, DType dtype, std::mt19937_64& rng) {
  CAPSULE_TRY(Shape shape, Shape::make(spec.dims));
  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  std::uniform_real_distribution<double> dist(spec.lo, spec.hi);
  for (double& v : values) {
    v = dist(rng);
    if (spec.random_sign && (rng() & 1U) != 0) v = -v;
  }
  return Tensor::from_values(shape, dtype, values);
}

std::vector<unsigned char> bytes_of(const Tensor& t) {
  if (!t.defined()) return {};
  const std::size_t n = static_cast<std::size_t>(t.numel()) * element_size(t.dtype());
  std::vector<unsigned char> out(n);
  if (n != 0) {
    const void* p = t.dtype() == DType::F32 ? static_cast<const void*>(t.data<float>())
                                            : static_cast<const void*>(t.data<double>());
    std::memcpy(out.data(), p, n);
  }
  return out;
}

RuntimeResult<Tensor> absolute(const Tensor& t) {
  if (!t.defined()) return t;
  std::vector<double> v = t.to_vector();
  for (double& x : v) x = std::abs(x);
  return Tensor::from_values(t.shape(), t.dtype(), v);
}

RuntimeResult<std::vector<Tensor>> absolute_all(std::span<const Tensor> ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) {
    CAPSULE_TRY(Tensor a, absolute(t));
    out.push_back(a);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The parity table. Bounds: see docs/libtorch.md.

OpAttrs with_axis(std::int64_t axis) {
  OpAttrs a;
  a.axis = axis;
  return a;
}

std::vector<ParityCase> parity_cases(AtenBackend backend) {
  std::vector<ParityCase> cases;
  auto binary = [&](Op op, Tolerance fwd, Tolerance bwd, InputSpec b = {}) {
    for (const std::vector<std::int64_t>& dims :
         std::vector<std::vector<std::int64_t>>{{3, 5}, {1}, {0, 4}, {2, 1, 3}, {}}) {
      InputSpec a{dims};
      InputSpec bb = b;
      bb.dims = dims;
      cases.push_back({str(to_string(op), to_string(Shape::make(dims).value())), op, {a, bb}, {}, fwd, bwd});
    }
  };
  auto unary = [&](Op op, Tolerance fwd, Tolerance bwd, double lo = -3.0, double hi = 3.0, OpAttrs attrs = {}) {
    for (const std::vector<std::int64_t>& dims : std::vector<std::vector<std::int64_t>>{{4, 7}, {1, 1}, {0}, {}}) {
      cases.push_back(
          {str(to_string(op), to_string(Shape::make(dims).value())), op, {{dims, lo, hi}}, attrs, fwd, bwd});
    }
  };
  const Tolerance ulps2{Bound::Ulps, 2};
  const Tolerance ulps4{Bound::Ulps, 4};
  const Tolerance ulps8{Bound::Ulps, 8};
  binary(Op::Add, kExact, kExact);
  binary(Op::Sub, kExact, kExact);
  binary(Op::Mul, kExact, kExact);
  binary(Op::Div, kExact, ulps4, {{}, 0.25, 4.0, true});
  binary(Op::Max, kExact, kExact);
  binary(Op::Min, kExact, kExact);
  unary(Op::Neg, kExact, kExact);
  unary(Op::Abs, kExact, kExact);
  unary(Op::Sqrt, kExact, ulps2, 0.01, 9.0);
  unary(Op::Relu, kExact, kExact);
  // gelu' = Φ(x) + x·φ(x) crosses zero at x ≈ −0.75, so no relative bound holds near there. Both
  // sides round the same arguments (−x/√2, x²); erfc is within 5 ulps (10u relative) and exp within
  // 2 on either backend, so each side's slope is within (10·|Φ| + 7·|x·φ| + |slope|)·u ≤ 13u
  // (|Φ| ≤ 1, |x·φ| ≤ 0.25, |slope| ≤ 1.13); times |g| ≤ 2, plus the product's rounding (≤ 2.3u),
  // the two sides are within 57u: the bound is 64·u·max(1, ‖r‖∞) (Lane with n = 1).
  unary(Op::Gelu, ulps8, {Bound::Lane, 64}, -6.0, 4.0);
  // sigmoid' = y·(1 − y) and tanh' = 1 − y² cancel where y nears 1: their adjoints carry an
  // absolute error of a few u·|g| (ATen may fuse the product), so the bound is k·u·max(1, ‖r‖∞)
  // with |g| ≤ 2 (Lane with n = 1). Both sides take y from the same forward output.
  const Tolerance cancelling{Bound::Lane, 8};
  const Tolerance sigmoid_forward = backend == AtenBackend::Cpu ? ulps4 : Tolerance{Bound::Ulps, 6};
  unary(Op::Sigmoid, sigmoid_forward, cancelling, -8.0, 8.0);
  unary(Op::Tanh, ulps4, cancelling);
  unary(Op::Exp, ulps4, ulps8);
  unary(Op::Log, ulps4, ulps4, 0.01, 9.0);
  unary(Op::Sin, ulps4, ulps8);
  unary(Op::Cos, ulps4, ulps8, -1.0, 1.0);
  unary(Op::Inv, kExact, ulps2, 0.25, 4.0);
  OpAttrs scale;
  scale.alpha = -0.37;
  unary(Op::Scale, kExact, kExact, -3.0, 3.0, scale);
  // The remaining elementwise activations (bounds derived in docs/libtorch.md).
  OpAttrs clamp;
  clamp.lo = -1.0;
  clamp.hi = 0.5;
  unary(Op::Clamp, kExact, kExact, -3.0, 3.0, clamp);
  OpAttrs tie_bounds;  // a degenerate interval: every element on one bound
  tie_bounds.lo = 0.25;
  tie_bounds.hi = 0.25;
  unary(Op::Clamp, kExact, kExact, -1.0, 1.0, tie_bounds);
  OpAttrs safe_log;
  safe_log.eps = 0.5;  // about a third of the inputs lie below eps
  unary(Op::SafeLog, ulps4, kExact, 0.0, 2.0, safe_log);
  unary(Op::SafeLog, ulps4, kExact, 0.0, 2.0);  // default eps
  unary(Op::Softplus, ulps8, ulps8, -30.0, 30.0);
  unary(Op::Silu, ulps8, {Bound::Lane, 96}, -4.0, 4.0);

  // Softmax family: lanes of n along the axis; the bound is k·n·u·max(1, ‖y‖∞).
  for (const Op op : {Op::Softmax, Op::LogSoftmax}) {
    cases.push_back({str(to_string(op), " last axis"), op, {{{3, 9}, -4, 4}}, with_axis(-1), {Bound::Lane, 4},
                     {Bound::Lane, 8}, 9});
    cases.push_back({str(to_string(op), " axis 0"), op, {{{6, 2, 3}, -4, 4}}, with_axis(0), {Bound::Lane, 4},
                     {Bound::Lane, 8}, 6});
    cases.push_back({str(to_string(op), " size-1 lane"), op, {{{5, 1}}}, with_axis(1), {Bound::Lane, 4},
                     {Bound::Lane, 8}, 1});
    cases.push_back({str(to_string(op), " size-0"), op, {{{0, 4}}}, with_axis(1), kExact, kExact, 4});
  }
  // Reductions: the sum of n terms, n·u·Σ|terms| (the op applied to |x|). The mean also scales by
  // 1/n, which ATen's CUDA kernel rounds before multiplying: two more roundings, so its n is the
  // lane's plus 2 (on the CPU, which divides once, that only loosens the bound by 2u·Σ|terms|).
  for (const Op op : {Op::ReduceSum, Op::ReduceMean}) {
    const std::int64_t scaled = op == Op::ReduceMean ? 2 : 0;
    OpAttrs all;
    OpAttrs rows;
    rows.axes = {1};
    OpAttrs keep;
    keep.axes = {0, -1};
    keep.keepdim = true;
    cases.push_back({str(to_string(op), " all"), op, {{{4, 6}}}, all, {Bound::Terms, 2}, kExact, 24 + scaled});
    cases.push_back({str(to_string(op), " axis 1"), op, {{{3, 5, 2}}}, rows, {Bound::Terms, 2}, kExact, 5 + scaled});
    cases.push_back(
        {str(to_string(op), " keepdim"), op, {{{3, 1, 4}}}, keep, {Bound::Terms, 2}, kExact, 12 + scaled});
    if (op == Op::ReduceSum) {
      cases.push_back({"reduce_sum size-0", op, {{{0, 3}}}, rows, kExact, kExact, 3});
    }
  }
  // Products: n = k, Σ|terms| = the product of |a| and |b|.
  cases.push_back({"matmul 2-d", Op::Matmul, {{{4, 7}}, {{7, 3}}}, {}, {Bound::Terms, 2}, {Bound::Terms, 2}, 7});
  cases.push_back({"matmul batched", Op::Matmul, {{{2, 3, 5}}, {{2, 5, 4}}}, {}, {Bound::Terms, 2}, {Bound::Terms, 2}, 5});
  // k = 1: the forward is one product per element (exact); the adjoints are not: da = g·bᵀ sums
  // n = 2 terms and db = aᵀ·g sums m = 3, so they get the product bound with n = 3 (an FMA BLAS
  // such as OpenBLAS rounds them differently from the reference's fold).
  cases.push_back({"matmul k=1", Op::Matmul, {{{3, 1}}, {{1, 2}}}, {}, kExact, {Bound::Terms, 2}, 3});
  cases.push_back({"matmul k=0", Op::Matmul, {{{2, 0}}, {{0, 3}}}, {}, kExact, kExact, 1});
  cases.push_back({"linear bias", Op::Linear, {{{5, 4}}, {{3, 4}}, {{3}}}, {}, {Bound::Terms, 2}, {Bound::Terms, 2}, 5});
  cases.push_back({"linear rank-3", Op::Linear, {{{2, 3, 4}}, {{2, 4}}}, {}, {Bound::Terms, 2}, {Bound::Terms, 2}, 6});
  // Losses: the mean of n terms, k·n·u·max(1, |loss|).
  cases.push_back({"mse_loss", Op::MseLoss, {{{4, 5}}, {{4, 5}}}, {}, {Bound::Lane, 4}, {Bound::Lane, 4}, 20});
  cases.push_back({"mse_loss scalar", Op::MseLoss, {{{1}}, {{1}}}, {}, {Bound::Lane, 4}, {Bound::Lane, 4}, 1});
  cases.push_back(
      {"cross_entropy", Op::CrossEntropy, {{{4, 6}, -3, 3}, {{4, 6}, 0, 1}}, {}, {Bound::Lane, 8}, {Bound::Lane, 8}, 24});
  // Windows.
  OpAttrs conv2;
  conv2.stride = {2, 1};
  conv2.padding = {1, 0};
  cases.push_back({"conv 2-d bias", Op::Conv, {{{2, 3, 6, 5}}, {{4, 3, 3, 2}}, {{4}}}, conv2, {Bound::Terms, 2},
                   {Bound::Terms, 2}, 18});
  OpAttrs groups;
  groups.groups = 2;
  cases.push_back({"conv 1-d groups", Op::Conv, {{{2, 4, 7}}, {{2, 2, 3}}}, groups, {Bound::Terms, 2},
                   {Bound::Terms, 2}, 14});
  OpAttrs pool2;
  pool2.kernel = {2, 2};
  cases.push_back({"max_pool 2-d", Op::MaxPool, {{{2, 3, 4, 6}}}, pool2, kExact, kExact});
  OpAttrs pool1;
  pool1.kernel = {3};
  pool1.stride = {2};
  pool1.padding = {1};
  cases.push_back({"max_pool 1-d padded", Op::MaxPool, {{{1, 2, 9}}}, pool1, kExact, kExact});
  // conv_transpose and avg_pool. n bounds the terms of any one output or gradient sum
  // (forward (c/groups)·k, dx (o/groups)·k, dw n·spatial, db n·spatial).
  OpAttrs convt2;
  convt2.stride = {2, 1};
  convt2.padding = {1, 0};
  convt2.output_padding = {1, 0};
  cases.push_back({"conv_transpose 2-d bias", Op::ConvTranspose, {{{2, 4, 3, 3}}, {{4, 3, 3, 2}}, {{3}}}, convt2,
                   {Bound::Terms, 2}, {Bound::Terms, 2}, 24});
  OpAttrs convt1;
  convt1.groups = 2;
  convt1.dilation = {2};
  cases.push_back({"conv_transpose 1-d groups dilated", Op::ConvTranspose, {{{2, 4, 5}}, {{4, 1, 3}}}, convt1,
                   {Bound::Terms, 2}, {Bound::Terms, 2}, 10});
  cases.push_back({"conv_transpose size-1", Op::ConvTranspose, {{{1, 1, 1, 1}}, {{1, 2, 1, 1}}, {{2}}}, {},
                   {Bound::Terms, 2}, {Bound::Terms, 2}, 1});
  OpAttrs avg2;
  avg2.kernel = {2, 2};
  cases.push_back({"avg_pool 2-d", Op::AvgPool, {{{2, 3, 4, 6}}}, avg2, {Bound::Terms, 2}, {Bound::Terms, 2}, 4});
  OpAttrs avg1;
  avg1.kernel = {3};
  avg1.stride = {2};
  avg1.padding = {1};
  cases.push_back({"avg_pool 1-d padded", Op::AvgPool, {{{1, 2, 9}}}, avg1, {Bound::Terms, 2}, {Bound::Terms, 2}, 3});
  OpAttrs avg_size1;
  avg_size1.kernel = {1, 1};
  cases.push_back({"avg_pool size-1 window", Op::AvgPool, {{{1, 1, 1, 3}}}, avg_size1, kExact, kExact, 1});
  // smooth_max_pool: m + T·log Σ exp((x − m)/T) over n ≤ kh·kw terms; the sum's order and the
  // exp/log roundings differ from the reference's fixed-left fold: a lane bound over n terms.
  OpAttrs smooth2;
  smooth2.kernel = {2, 3};
  smooth2.stride = {1, 2};
  smooth2.padding = {1, 1};
  smooth2.temperature = 0.5;
  cases.push_back({"smooth_max_pool 2-d padded", Op::SmoothMaxPool, {{{2, 3, 4, 6}}}, smooth2, {Bound::Lane, 8},
                   {Bound::Lane, 8}, 6});
  OpAttrs smooth1;
  smooth1.kernel = {3};
  smooth1.temperature = 2.0;
  cases.push_back({"smooth_max_pool 1-d", Op::SmoothMaxPool, {{{1, 2, 9}}}, smooth1, {Bound::Lane, 8},
                   {Bound::Lane, 8}, 3});
  // Shape ops: data movement is exact; broadcast's backward sums n terms.
  OpAttrs reshape;
  reshape.shape = {3, -1};
  cases.push_back({"reshape", Op::Reshape, {{{2, 3, 2}}}, reshape, kExact, kExact});
  OpAttrs permute;
  permute.axes = {2, 0, 1};
  cases.push_back({"permute", Op::Permute, {{{2, 3, 4}}}, permute, kExact, kExact});
  OpAttrs bcast;
  bcast.shape = {2, 3, 4};
  cases.push_back({"broadcast [3,1]", Op::Broadcast, {{{3, 1}}}, bcast, kExact, {Bound::Terms, 2}, 8});
  OpAttrs bcast0;
  bcast0.shape = {0, 5};
  cases.push_back({"broadcast to size-0", Op::Broadcast, {{{1, 5}}}, bcast0, kExact, kExact, 1});
  OpAttrs bcast_same;
  bcast_same.shape = {4};
  cases.push_back({"broadcast [1] to [4]", Op::Broadcast, {{{1}}}, bcast_same, kExact, {Bound::Terms, 2}, 4});
  // Normalisations (bound k·n·u·max(1, ‖r‖∞), n = the elements of the case; see
  // docs/libtorch.md) and the index and block ops (data movement and index_add in the
  // reference's order: exact).
  const Tolerance norm_fwd{Bound::Lane, 4};
  const Tolerance norm_bwd{Bound::Lane, 8};
  cases.push_back({"layer_norm affine", Op::LayerNorm, {{{3, 8}}, {{8}}, {{8}}}, {}, norm_fwd, norm_bwd, 24});
  OpAttrs norm_eps;
  norm_eps.eps = 1e-3;
  cases.push_back({"layer_norm rank-3 eps", Op::LayerNorm, {{{2, 3, 5}}}, norm_eps, norm_fwd, norm_bwd, 30});
  cases.push_back({"layer_norm gamma only", Op::LayerNorm, {{{4, 6}}, {{6}}}, {}, norm_fwd, norm_bwd, 24});
  // A constant group (size 1 here) has rstd = 1/√eps; ATen's fused affine form leaves rounding
  // noise of u·|x|·rstd·|γ| where the reference's x̂ is exactly 0 (docs/libtorch.md): with
  // eps = 0.25 (rstd 2, |x|, |γ| ≤ 2) that is within n = 8.
  OpAttrs constant_group;
  constant_group.eps = 0.25;
  cases.push_back(
      {"layer_norm size-1 rows", Op::LayerNorm, {{{4, 1}}, {{1}}, {{1}}}, constant_group, norm_fwd, norm_bwd, 8});
  cases.push_back({"layer_norm size-0", Op::LayerNorm, {{{0, 5}}, {{5}}, {{5}}}, {}, kExact, kExact, 1});
  cases.push_back({"layer_norm empty rows", Op::LayerNorm, {{{3, 0}}, {{0}}}, {}, kExact, kExact, 1});
  cases.push_back({"batch_norm affine", Op::BatchNorm, {{{4, 3, 5}}, {{3}}, {{3}}}, {}, norm_fwd, norm_bwd, 60});
  cases.push_back({"batch_norm rank-2", Op::BatchNorm, {{{6, 2}}}, norm_eps, norm_fwd, norm_bwd, 12});
  cases.push_back({"batch_norm 2-d gamma only", Op::BatchNorm, {{{2, 3, 2, 2}}, {{3}}}, {}, norm_fwd, norm_bwd, 24});
  cases.push_back(
      {"batch_norm one per channel", Op::BatchNorm, {{{1, 3, 1}}, {{3}}, {{3}}}, constant_group, norm_fwd, norm_bwd, 8});
  cases.push_back({"batch_norm size-0", Op::BatchNorm, {{{0, 3, 2}}, {{3}}, {{3}}}, {}, kExact, kExact, 1});
  auto indexed = [](std::int64_t axis, std::vector<std::int64_t> indices) {
    OpAttrs a;
    a.axis = axis;
    a.indices = std::move(indices);
    return a;
  };
  // An index repeated r times sums r terms at one position (gather's adjoint; scatter_add adds r
  // rows to the base, r + 1 terms). In index order both sides fold identically: exact. In an
  // unspecified order (atomics) each side is within n·u·Σ|terms| of the exact sum (γₙ), so the
  // sides are within 2·n·u·Σ|terms|, n the most terms one position sums.
  const Tolerance indexed_sum = backend == AtenBackend::Cpu ? kExact : Tolerance{Bound::Terms, 2};
  cases.push_back({"gather axis 0 repeats", Op::Gather, {{{4, 5}}}, indexed(0, {3, 0, 3, 1, 3}), kExact,
                   indexed_sum, 3});
  cases.push_back({"gather axis -1", Op::Gather, {{{2, 3, 6}}}, indexed(-1, {5, 5, 0}), kExact, indexed_sum, 2});
  cases.push_back({"gather no indices", Op::Gather, {{{3, 4}}}, indexed(1, {}), kExact, kExact});
  cases.push_back({"gather size-0", Op::Gather, {{{0, 3}}}, indexed(1, {2, 0}), kExact, kExact});
  cases.push_back({"gather size-1 axis", Op::Gather, {{{1, 4}}}, indexed(0, {0, 0}), kExact, indexed_sum, 2});
  cases.push_back({"scatter_add repeats", Op::ScatterAdd, {{{5, 3}}, {{4, 3}}}, indexed(0, {1, 4, 1, 1}),
                   indexed_sum, kExact, 4});
  cases.push_back({"scatter_add axis 1", Op::ScatterAdd, {{{2, 4, 2}}, {{2, 3, 2}}}, indexed(1, {3, 0, 3}),
                   indexed_sum, kExact, 3});
  cases.push_back({"scatter_add no indices", Op::ScatterAdd, {{{2, 4}}, {{2, 0}}}, indexed(1, {}), kExact, kExact});
  cases.push_back({"concat axis 1", Op::Concat, {{{2, 3}}, {{2, 1}}, {{2, 0}}, {{2, 2}}}, with_axis(1), kExact, kExact});
  cases.push_back({"concat axis 0", Op::Concat, {{{1, 4}}, {{3, 4}}}, with_axis(0), kExact, kExact});
  cases.push_back({"concat one input", Op::Concat, {{{3, 2}}}, with_axis(-1), kExact, kExact});
  cases.push_back({"concat size-0", Op::Concat, {{{0, 2}}, {{0, 3}}}, with_axis(1), kExact, kExact});
  auto sliced = [](std::int64_t axis, std::int64_t start, std::int64_t end) {
    OpAttrs a;
    a.axis = axis;
    a.start = start;
    a.end = end;
    return a;
  };
  cases.push_back({"slice axis 1", Op::Slice, {{{4, 5}}}, sliced(1, 1, 4), kExact, kExact});
  cases.push_back({"slice axis 0 whole", Op::Slice, {{{3, 2, 2}}}, sliced(0, 0, 3), kExact, kExact});
  cases.push_back({"slice empty range", Op::Slice, {{{4, 5}}}, sliced(-1, 2, 2), kExact, kExact});
  cases.push_back({"slice size-0", Op::Slice, {{{3, 0}}}, sliced(1, 0, 0), kExact, kExact});
  // scaled_matmul (also in test_libtorch_attention.cpp's own table): both sides sum the same k
  // products (≤ k·u·Σ|terms| each) and scale once (≤ u·|alpha·Σ| each), so 2·(k + 1)·u·Σ|terms|
  // ≤ 4·k·u·Σ|terms| for k ≥ 1; the adjoints scale g once and sum n (da) or m (db) products
  // likewise, so n = max(m, k, n). k = 0 gives alpha·(+0) on both sides.
  OpAttrs alpha;
  alpha.alpha = -0.37;
  cases.push_back({"scaled_matmul 2-d", Op::ScaledMatmul, {{{4, 7}}, {{7, 3}}}, alpha, {Bound::Terms, 4},
                   {Bound::Terms, 4}, 7});
  cases.push_back({"scaled_matmul batched", Op::ScaledMatmul, {{{2, 3, 5}}, {{2, 5, 4}}}, alpha, {Bound::Terms, 4},
                   {Bound::Terms, 4}, 5});
  cases.push_back({"scaled_matmul size-1", Op::ScaledMatmul, {{{1, 1}}, {{1, 1}}}, alpha, {Bound::Terms, 4},
                   {Bound::Terms, 4}, 1});
  cases.push_back({"scaled_matmul k=0", Op::ScaledMatmul, {{{2, 0}}, {{0, 3}}}, alpha, kExact, kExact});
  return cases;
}

std::vector<Op> covered_ops() {
  std::vector<Op> ops;
  for (const ParityCase& c : parity_cases()) {
    if (std::find(ops.begin(), ops.end(), c.op) == ops.end()) ops.push_back(c.op);
  }
  return ops;
}

namespace {

Tensor same_tensor(const Tensor& t) { return t; }

/// A handler that keeps forward state (forward_saving / backward_saved): its saving forward gives
/// the plain forward's bits, and the adjoint from that state gives the recomputing adjoint's
/// bits (`recomputed`, on the host), leaving inputs, output and gradient unchanged. `inputs` and
/// `grad` are on the handler's device.
void check_saved_state(const HandlerSpec& h, const ParityCase& c, const std::vector<Tensor>& inputs, const Tensor& grad,
                       const std::vector<Tensor>& recomputed, const Placement& placement) {
  if (h.forward_saving == nullptr) return;
  REQUIRE((h.backward_saved != nullptr));
  const Tensor plain = h.forward(inputs, c.attrs).value();
  RuntimeResult<SavingForwardResult> saving = h.forward_saving(inputs, c.attrs);
  REQUIRE_MESSAGE(saving.has_value(), saving.error().message);
  CHECK(placement.host_bytes(saving->output) == placement.host_bytes(plain));
  // An empty input has nothing to keep; every other call keeps the statistics or indices.
  CHECK((saving->saved != nullptr) == (inputs[0].numel() != 0));
  std::vector<std::vector<unsigned char>> before;
  for (const Tensor& t : inputs) before.push_back(placement.host_bytes(t));
  const std::vector<unsigned char> output_before = placement.host_bytes(saving->output);
  const std::vector<unsigned char> grad_before = placement.host_bytes(grad);
  const auto from_state = h.backward_saved(inputs, saving->output, grad, c.attrs, saving->saved.get());
  REQUIRE_MESSAGE(from_state.has_value(), from_state.error().message);
  for (std::size_t i = 0; i < inputs.size(); ++i) CHECK(placement.host_bytes(inputs[i]) == before[i]);
  CHECK(placement.host_bytes(saving->output) == output_before);
  CHECK(placement.host_bytes(grad) == grad_before);
  REQUIRE(from_state->size() == recomputed.size());
  for (std::size_t i = 0; i < recomputed.size(); ++i) {
    CHECK_MESSAGE(placement.host_bytes((*from_state)[i]) == bytes_of(recomputed[i]),
                  "gradient " << i << " from saved state");
  }
}

}  // namespace

std::vector<Tensor> Placement::handler_copies(std::span<const Tensor> host) const {
  std::vector<Tensor> out;
  out.reserve(host.size());
  for (const Tensor& t : host) out.push_back(t.defined() ? to_handler(t) : t);
  return out;
}

std::vector<Tensor> Placement::host_copies(std::span<const Tensor> placed) const {
  std::vector<Tensor> out;
  out.reserve(placed.size());
  for (const Tensor& t : placed) out.push_back(t.defined() ? to_host(t) : t);
  return out;
}

std::vector<unsigned char> Placement::host_bytes(const Tensor& placed) const {
  return bytes_of(placed.defined() ? to_host(placed) : placed);
}

Placement host_placement() { return Placement{&same_tensor, &same_tensor}; }

void check_forward(const HandlerSpec& handler, const HandlerSpec& oracle, const ParityCase& c, DType dtype,
                   std::uint64_t seed, const Placement& placement) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> inputs;
  for (const InputSpec& spec : c.inputs) inputs.push_back(make_input(spec, dtype, rng).value());
  const std::vector<Tensor> placed = placement.handler_copies(inputs);
  std::vector<std::vector<unsigned char>> before;
  for (const Tensor& t : inputs) before.push_back(bytes_of(t));
  const RuntimeResult<Tensor> ref = oracle.forward(inputs, c.attrs);
  const RuntimeResult<Tensor> lib = handler.forward(placed, c.attrs);
  REQUIRE_MESSAGE(ref.has_value() == lib.has_value(),
                  "reference " << (ref ? "succeeds" : ref.error().message) << "; libtorch "
                               << (lib ? "succeeds" : lib.error().message));
  for (std::size_t i = 0; i < placed.size(); ++i) {
    CHECK_MESSAGE(placement.host_bytes(placed[i]) == before[i], "input " << i << " changed");
  }
  if (!ref) return;
  for (const Tensor& t : placed) CHECK_FALSE(lib->shares_storage_with(t));
  Tensor terms;
  if (c.forward.bound == Bound::Terms) {
    std::vector<Tensor> abs_inputs = absolute_all(inputs).value();
    terms = oracle.forward(abs_inputs, c.attrs).value();
  }
  const std::string miss = compare(placement.to_host(*lib), *ref, c.forward, &terms, c.terms);
  CHECK_MESSAGE(miss.empty(), to_string(dtype) << ": " << miss);
}

void check_backward(const HandlerSpec& handler, const HandlerSpec& oracle, const ParityCase& c, DType dtype,
                    std::uint64_t seed, const Placement& placement) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> inputs;
  for (const InputSpec& spec : c.inputs) inputs.push_back(make_input(spec, dtype, rng).value());
  const Tensor out = oracle.forward(inputs, c.attrs).value();
  const Tensor grad = make_input({out.shape().to_vector()}, dtype, rng).value();
  REQUIRE((handler.backward != nullptr));
  const std::vector<Tensor> placed = placement.handler_copies(inputs);
  const Tensor placed_out = placement.to_handler(out);
  const Tensor placed_grad = placement.to_handler(grad);
  std::vector<std::vector<unsigned char>> before;
  for (const Tensor& t : inputs) before.push_back(bytes_of(t));
  const std::vector<unsigned char> out_before = bytes_of(out);
  const std::vector<unsigned char> grad_before = bytes_of(grad);
  const auto ref = oracle.backward(inputs, out, grad, c.attrs);
  const auto lib = handler.backward(placed, placed_out, placed_grad, c.attrs);
  REQUIRE_MESSAGE(ref.has_value() == lib.has_value(),
                  "reference " << (ref ? "succeeds" : ref.error().message) << "; libtorch "
                               << (lib ? "succeeds" : lib.error().message));
  for (std::size_t i = 0; i < placed.size(); ++i) CHECK(placement.host_bytes(placed[i]) == before[i]);
  CHECK(placement.host_bytes(placed_out) == out_before);
  CHECK(placement.host_bytes(placed_grad) == grad_before);
  if (!ref) return;
  REQUIRE(lib->size() == ref->size());
  const std::vector<Tensor> lib_host = placement.host_copies(*lib);
  std::vector<Tensor> terms(ref->size());
  if (c.backward.bound == Bound::Terms) {
    const std::vector<Tensor> abs_inputs = absolute_all(inputs).value();
    terms = oracle.backward(abs_inputs, absolute(out).value(), absolute(grad).value(), c.attrs).value();
  }
  for (std::size_t i = 0; i < ref->size(); ++i) {
    const std::string miss = compare(lib_host[i], (*ref)[i], c.backward, &terms[i], c.terms);
    CHECK_MESSAGE(miss.empty(), to_string(dtype) << " gradient " << i << ": " << miss);
  }
  check_saved_state(handler, c, placed, placed_grad, lib_host, placement);
}

// ---------------------------------------------------------------------------------------------
// Special values.

std::vector<double> special_values(DType dtype) {
  const double denormal = dtype == DType::F32 ? double(std::numeric_limits<float>::denorm_min()) * 3
                                              : std::numeric_limits<double>::denorm_min() * 3;
  return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
          -std::numeric_limits<double>::infinity(), 0.0, -0.0, 1.0, -1.0, 2.5, denormal, 1e30};
}

const std::vector<Op>& special_binary_ops() {
  static const std::vector<Op> ops{Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Max, Op::Min};
  return ops;
}
const std::vector<Op>& special_unary_ops() {
  static const std::vector<Op> ops{Op::Neg,  Op::Abs,   Op::Sqrt,    Op::Relu,     Op::Gelu, Op::Sigmoid,
                                   Op::Tanh, Op::Exp,   Op::Log,     Op::Sin,      Op::Cos,  Op::Inv,
                                   Op::Scale, Op::Clamp, Op::SafeLog, Op::Softplus, Op::Silu};
  return ops;
}

Tolerance pointwise_tolerance(Op op, bool backward, AtenBackend backend) {
  for (const ParityCase& c : parity_cases(backend)) {
    if (c.op == op) return backward ? c.backward : c.forward;
  }
  return kExact;
}

OpAttrs special_attrs() {
  OpAttrs a;
  a.alpha = -0.37;
  a.lo = -1.0;  // clamp: ±1 and 2.5 of the special values sit on or beyond a bound
  a.hi = 1.0;
  return a;
}

std::vector<double> special_gradients(bool non_finite_g) {
  if (!non_finite_g) return {0.75};
  return {0.75, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
          -std::numeric_limits<double>::infinity()};
}

std::map<Op, std::size_t> for_each_special(bool backward, bool non_finite_g, const SpecialCheck& check) {
  std::map<Op, std::size_t> counts;
  for (const DType dtype : {DType::F32, DType::F64}) {
    CAPTURE(to_string(dtype));
    const std::vector<double> s = special_values(dtype);
    const auto n = static_cast<std::int64_t>(s.size());
    std::vector<double> a;
    std::vector<double> b;
    for (const double x : s) {
      for (const double y : s) {
        a.push_back(x);
        b.push_back(y);
      }
    }
    const Tensor ta = Tensor::from_values(Shape::make({n, n}).value(), dtype, a).value();
    const Tensor tb = Tensor::from_values(Shape::make({n, n}).value(), dtype, b).value();
    const Tensor x = Tensor::from_values(Shape::make({n}).value(), dtype, s).value();
    const std::vector<double> gs = backward ? special_gradients(non_finite_g) : std::vector<double>{};
    for (const Op op : special_binary_ops()) {
      if (!backward) counts[op] += check(op, {ta, tb}, {});
      for (const double g : gs) {
        CAPTURE(g);
        counts[op] += check(op, {ta, tb}, std::vector<double>(a.size(), g));
      }
    }
    for (const Op op : special_unary_ops()) {
      if (!backward) counts[op] += check(op, {x}, {});
      for (const double g : gs) {
        CAPTURE(g);
        counts[op] += check(op, {x}, std::vector<double>(s.size(), g));
      }
    }
  }
  return counts;
}

void check_special_plain(const HandlerSpec& handler, const HandlerSpec& oracle, Op op, const std::vector<Tensor>& inputs,
                         const std::vector<double>& g, const Placement& placement, AtenBackend backend) {
  CAPTURE(to_string(op));
  const OpAttrs attrs = special_attrs();
  const Tensor out = oracle.forward(inputs, attrs).value();
  const std::vector<Tensor> placed = placement.handler_copies(inputs);
  RuntimeResult<Tensor> lib = handler.forward(placed, attrs);
  REQUIRE_MESSAGE(lib.has_value(), lib.error().message);
  if (g.empty()) {
    const std::string miss = compare(placement.to_host(*lib), out, pointwise_tolerance(op, false, backend), nullptr, 1);
    CHECK_MESSAGE(miss.empty(), miss);
    return;
  }
  const Tensor grad = Tensor::from_values(out.shape(), out.dtype(), g).value();
  auto lib_grads = handler.backward(placed, placement.to_handler(out), placement.to_handler(grad), attrs);
  REQUIRE_MESSAGE(lib_grads.has_value(), lib_grads.error().message);
  const auto ref = oracle.backward(inputs, out, grad, attrs).value();
  REQUIRE(lib_grads->size() == ref.size());
  const std::vector<Tensor> got = placement.host_copies(*lib_grads);
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const std::string miss = compare(got[i], ref[i], pointwise_tolerance(op, true, backend), nullptr, 1);
    CHECK_MESSAGE(miss.empty(), "gradient " << i << ": " << miss);
  }
}

}  // namespace capsule::libtorch_parity
