// SPDX-License-Identifier: Apache-2.0
// The attention family's parity table and its check (attention_table.hpp).
#include "attention_table.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "capsule/text.hpp"

namespace capsule::libtorch_parity {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

double max_abs(const Tensor& t) {
  double m = 0;
  if (!t.defined()) return m;
  for (const double v : t.to_vector()) {
    if (std::isfinite(v)) m = std::max(m, std::abs(v));
  }
  return m;
}

std::string compare_absolute(const Tensor& l, const Tensor& r, double allowed) {
  if (auto difference = structural_difference(l, r)) return *difference;
  const std::vector<double> lv = l.to_vector();
  const std::vector<double> rv = r.to_vector();
  for (std::size_t i = 0; i < lv.size(); ++i) {
    const bool ok = std::isnan(rv[i])       ? std::isnan(lv[i])
                    : !std::isfinite(rv[i]) ? lv[i] == rv[i]
                                            : std::isfinite(lv[i]) && std::abs(lv[i] - rv[i]) <= allowed;
    if (!ok) {
      return str("element ", i, ": libtorch ", lv[i], " vs reference ", rv[i], " (bound ", allowed, ")");
    }
  }
  return "";
}

bool zero_at(const Tensor& t, const std::vector<bool>& where) {
  const std::vector<double> v = t.to_vector();
  for (std::size_t i = 0; i < v.size() && i < where.size(); ++i) {
    if (where[i] && v[i] != 0.0) return false;
  }
  return true;
}

Tensor host_tensor(std::vector<std::int64_t> dims, DType dtype, const std::vector<double>& values) {
  return Tensor::from_values(Shape::make(dims).value(), dtype, values).value();
}

Tensor random_tensor(std::vector<std::int64_t> dims, DType dtype, std::mt19937_64& rng, double lo, double hi) {
  const Shape shape = Shape::make(dims).value();
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  std::uniform_real_distribution<double> dist(lo, hi);
  for (double& x : v) x = dist(rng);
  return Tensor::from_values(shape, dtype, v).value();
}

Tensor random_mask(std::vector<std::int64_t> dims, DType dtype, std::mt19937_64& rng, std::int64_t blocked_row) {
  const Shape shape = Shape::make(dims).value();
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  for (double& x : v) x = rng() % 3 == 0 ? 0.0 : 1.0;
  const std::int64_t lane = dims.empty() ? 1 : dims.back();
  for (std::int64_t j = 0; j < lane; ++j) {
    const auto i = static_cast<std::size_t>(blocked_row * lane + j);
    if (i < v.size()) v[i] = 0.0;
  }
  return Tensor::from_values(shape, dtype, v).value();
}

namespace {

// ---------------------------------------------------------------------------------------------
// The bounds (docs/libtorch.md): |lib − ref| ≤ 8·N·u·M, N the number of rounded terms a result
// depends on, M a bound on the magnitude of those terms, both per op from the operands.

/// hard_masked_softmax: a lane of L terms; weights ≤ 1; dx = y·(g − Σ g·y) ≤ 2‖g‖.
AttentionBounds masked_softmax_bounds(const std::vector<Tensor>& in, const Tensor& grad, const OpAttrs& attrs) {
  const double u = unit_roundoff(in[0].dtype());
  const std::size_t axis = in[0].rank() == 0 ? 0 : normalize_axis("test", attrs.axis, in[0].rank()).value();
  const double lane = in[0].rank() == 0 ? 1.0 : double(in[0].dim(axis));
  return {8 * (lane + 4) * u, {8 * (lane + 4) * u * std::max(1.0, max_abs(grad)), 0}};
}

/// scaled_matmul: k products plus one scaling; |terms| ≤ |alpha|·k·‖a‖·‖b‖ (and ‖g‖ for the VJP).
AttentionBounds scaled_matmul_bounds(const std::vector<Tensor>& in, const Tensor& grad, const OpAttrs& attrs) {
  const double u = unit_roundoff(in[0].dtype());
  const std::size_t r = in[0].rank();
  const double m = double(in[0].dim(r - 2)), k = double(in[0].dim(r - 1)), n = double(in[1].dim(r - 1));
  const double alpha = std::max(1.0, std::abs(attrs.alpha));
  const double a = max_abs(in[0]), b = max_abs(in[1]), g = max_abs(grad);
  return {8 * (k + 2) * u * alpha * k * a * b, {8 * (n + 2) * u * alpha * n * g * b, 8 * (m + 2) * u * alpha * m * g * a}};
}

/// softmax_matmul: a softmax lane of k terms, then k products with b; the VJP adds a lane of n
/// (dS = g·bᵀ) and of m (db = Sᵀ·g).
AttentionBounds softmax_matmul_bounds(const std::vector<Tensor>& in, const Tensor& grad, const OpAttrs& /*attrs*/) {
  const double u = unit_roundoff(in[0].dtype());
  const std::size_t r = in[0].rank();
  const double m = double(in[0].dim(r - 2)), k = double(in[0].dim(r - 1)), n = double(in[1].dim(r - 1));
  const double b = std::max(1.0, max_abs(in[1])), g = std::max(1.0, max_abs(grad));
  const double terms = k + n + m + 8;
  return {8 * terms * u * b, {8 * terms * u * 2 * n * g * b, 8 * terms * u * g}};
}

/// scaled_dot_product_attention: scores of d products, each within (d + 7)·u·A of the exact one
/// (A = |scale|·d·‖q‖·‖k‖; the 1.13 shim's pre-scaling adds 4 roundings); a weight moves by at
/// most 2·(its score error) relative, so the output moves by (1 + A)·‖v‖ times the terms. The VJP
/// multiplies by ‖g‖, ‖v‖, ‖q‖ or ‖k‖, |scale| and a lane of n or m.
AttentionBounds attention_bounds(const std::vector<Tensor>& in, const Tensor& grad, const OpAttrs& attrs) {
  const double u = unit_roundoff(in[0].dtype());
  const std::size_t r = in[0].rank();
  const double n = double(in[0].dim(r - 2)), d = double(in[0].dim(r - 1)), m = double(in[1].dim(r - 2)),
               dv = double(in[2].dim(r - 1));
  const double scale = attrs.scale != 0 ? std::abs(attrs.scale) : 1 / std::sqrt(std::max(1.0, d));
  const double q = max_abs(in[0]), k = max_abs(in[1]), v = std::max(1.0, max_abs(in[2]));
  const double a = scale * d * q * k;
  const double terms = d + m + n + dv + 8;
  const double fwd = 8 * terms * u * (1 + a) * v;
  const double vjp = fwd * std::max(1.0, max_abs(grad)) * std::max({1.0, q, k}) * std::max(1.0, scale) *
                     std::max({1.0, n, m});
  return {fwd, {vjp, vjp, vjp, 0}};
}

}  // namespace

void check_attention_case(const HandlerSpec& handler, const HandlerSpec& oracle, const AttentionCase& c,
                          std::mt19937_64& rng, const Placement& placement) {
  CAPTURE(c.name);
  CAPTURE(to_string(c.inputs[0].dtype()));
  const std::vector<Tensor> placed = placement.handler_copies(c.inputs);
  std::vector<std::vector<unsigned char>> before;
  for (const Tensor& t : c.inputs) before.push_back(bytes_of(t));
  const RuntimeResult<Tensor> r = oracle.forward(c.inputs, c.attrs);
  const RuntimeResult<Tensor> l = handler.forward(placed, c.attrs);
  REQUIRE_MESSAGE(r.has_value() == l.has_value(), "reference " << (r ? "succeeds" : r.error().message) << "; libtorch "
                                                               << (l ? "succeeds" : l.error().message));
  if (!r) {
    CHECK(l.error().code == r.error().code);
    return;
  }
  for (std::size_t i = 0; i < placed.size(); ++i) CHECK_MESSAGE(placement.host_bytes(placed[i]) == before[i], "input " << i);
  const Tensor grad = c.grad.defined() ? c.grad : random_tensor(r->shape().to_vector(), r->dtype(), rng);
  const AttentionBounds b = c.bounds(c.inputs, grad, c.attrs);
  const std::string miss = compare_absolute(placement.to_host(*l), *r, b.forward);
  CHECK_MESSAGE(miss.empty(), "forward: " << miss);

  const Tensor placed_out = placement.to_handler(*r);
  const Tensor placed_grad = placement.to_handler(grad);
  const std::vector<unsigned char> out_before = bytes_of(*r);
  const std::vector<unsigned char> grad_before = bytes_of(grad);
  const auto rg = oracle.backward(c.inputs, *r, grad, c.attrs);
  const auto lg = handler.backward(placed, placed_out, placed_grad, c.attrs);
  REQUIRE_MESSAGE(rg.has_value() == lg.has_value(), "reference " << (rg ? "succeeds" : rg.error().message)
                                                                 << "; libtorch " << (lg ? "succeeds" : lg.error().message));
  for (std::size_t i = 0; i < placed.size(); ++i) CHECK(placement.host_bytes(placed[i]) == before[i]);
  CHECK(placement.host_bytes(placed_out) == out_before);
  CHECK(placement.host_bytes(placed_grad) == grad_before);
  if (!rg) return;
  REQUIRE(lg->size() == rg->size());
  const std::vector<Tensor> got = placement.host_copies(*lg);
  for (std::size_t i = 0; i < rg->size(); ++i) {
    const std::string gmiss = compare_absolute(got[i], (*rg)[i], i < b.backward.size() ? b.backward[i] : 0.0);
    CHECK_MESSAGE(gmiss.empty(), "gradient " << i << ": " << gmiss);
  }
}

OpAttrs axis_attrs(std::int64_t axis) {
  OpAttrs a;
  a.axis = axis;
  return a;
}

OpAttrs attention_attrs(double scale, bool causal) {
  OpAttrs a;
  a.scale = scale;
  a.causal = causal;
  return a;
}

std::vector<AttentionCase> attention_random_cases(DType t, std::mt19937_64& rng) {
  std::vector<AttentionCase> cases;
  // hard_masked_softmax: lanes with a fully blocked one, other axes, size-1 and size-0 lanes, rank 0.
  cases.push_back({"hard_masked_softmax last axis", Op::HardMaskedSoftmax,
                   {random_tensor({4, 9}, t, rng, -4, 4), random_mask({4, 9}, t, rng, 2)}, axis_attrs(-1), masked_softmax_bounds});
  cases.push_back({"hard_masked_softmax axis 0", Op::HardMaskedSoftmax,
                   {random_tensor({6, 2, 3}, t, rng, -4, 4), random_mask({6, 2, 3}, t, rng, -1)}, axis_attrs(0),
                   masked_softmax_bounds});
  cases.push_back({"hard_masked_softmax size-1 lane", Op::HardMaskedSoftmax,
                   {random_tensor({5, 1}, t, rng), random_mask({5, 1}, t, rng, 3)}, axis_attrs(1), masked_softmax_bounds});
  cases.push_back({"hard_masked_softmax size-0", Op::HardMaskedSoftmax, {random_tensor({0, 4}, t, rng), random_tensor({0, 4}, t, rng)},
                   axis_attrs(1), masked_softmax_bounds});
  cases.push_back({"hard_masked_softmax rank 0", Op::HardMaskedSoftmax, {host_tensor({}, t, {0.7}), host_tensor({}, t, {1})},
                   axis_attrs(-1), masked_softmax_bounds});
  // scaled_matmul and softmax_matmul: 2-d, batched, k = 1, k = 0.
  OpAttrs alpha;
  alpha.alpha = -0.37;
  cases.push_back({"scaled_matmul 2-d", Op::ScaledMatmul, {random_tensor({4, 7}, t, rng), random_tensor({7, 3}, t, rng)}, alpha,
                   scaled_matmul_bounds});
  cases.push_back({"scaled_matmul batched", Op::ScaledMatmul, {random_tensor({2, 3, 5}, t, rng), random_tensor({2, 5, 4}, t, rng)},
                   alpha, scaled_matmul_bounds});
  cases.push_back({"scaled_matmul k=0", Op::ScaledMatmul, {random_tensor({2, 0}, t, rng), random_tensor({0, 3}, t, rng)}, alpha,
                   scaled_matmul_bounds});
  cases.push_back({"softmax_matmul 2-d", Op::SoftmaxMatmul, {random_tensor({4, 6}, t, rng, -4, 4), random_tensor({6, 3}, t, rng)}, {},
                   softmax_matmul_bounds});
  cases.push_back({"softmax_matmul batched", Op::SoftmaxMatmul,
                   {random_tensor({2, 3, 5}, t, rng, -4, 4), random_tensor({2, 5, 2}, t, rng)}, {}, softmax_matmul_bounds});
  cases.push_back({"softmax_matmul k=1", Op::SoftmaxMatmul, {random_tensor({3, 1}, t, rng), random_tensor({1, 2}, t, rng)}, {},
                   softmax_matmul_bounds});
  cases.push_back({"softmax_matmul k=0", Op::SoftmaxMatmul, {random_tensor({2, 0}, t, rng), random_tensor({0, 3}, t, rng)}, {},
                   softmax_matmul_bounds});
  // Attention: no mask, a plain mask with a fully blocked row, a batched mask, causal (with and
  // without a mask), an explicit scale (the 1.13 shim pre-scales q), rank 2 and 4, size-0/1 dims.
  cases.push_back({"sdpa no mask", Op::ScaledDotProductAttention,
                   {random_tensor({2, 3, 4}, t, rng), random_tensor({2, 5, 4}, t, rng), random_tensor({2, 5, 3}, t, rng)}, attention_attrs(0),
                   attention_bounds});
  cases.push_back({"sdpa plain mask, blocked row", Op::ScaledDotProductAttention,
                   {random_tensor({2, 4, 4}, t, rng), random_tensor({2, 6, 4}, t, rng), random_tensor({2, 6, 3}, t, rng),
                    random_mask({4, 6}, t, rng, 1)},
                   attention_attrs(0), attention_bounds});
  cases.push_back({"sdpa batched mask rank 4, scale 0.3", Op::ScaledDotProductAttention,
                   {random_tensor({2, 2, 3, 4}, t, rng), random_tensor({2, 2, 5, 4}, t, rng), random_tensor({2, 2, 5, 2}, t, rng),
                    random_mask({2, 2, 3, 5}, t, rng, 4)},
                   attention_attrs(0.3), attention_bounds});
  cases.push_back({"sdpa causal", Op::ScaledDotProductAttention,
                   {random_tensor({4, 3}, t, rng), random_tensor({4, 3}, t, rng), random_tensor({4, 2}, t, rng)}, attention_attrs(0, true),
                   attention_bounds});
  cases.push_back({"sdpa causal and mask", Op::ScaledDotProductAttention,
                   {random_tensor({1, 4, 3}, t, rng), random_tensor({1, 5, 3}, t, rng), random_tensor({1, 5, 2}, t, rng),
                    random_mask({4, 5}, t, rng, 2)},
                   attention_attrs(-1.5, true), attention_bounds});
  cases.push_back({"sdpa size-1 dims", Op::ScaledDotProductAttention,
                   {random_tensor({1, 1, 1}, t, rng), random_tensor({1, 1, 1}, t, rng), random_tensor({1, 1, 1}, t, rng), host_tensor({1, 1}, t, {1})},
                   attention_attrs(0), attention_bounds});
  cases.push_back({"sdpa n=0", Op::ScaledDotProductAttention,
                   {random_tensor({2, 0, 3}, t, rng), random_tensor({2, 4, 3}, t, rng), random_tensor({2, 4, 2}, t, rng)}, attention_attrs(0),
                   attention_bounds});
  cases.push_back({"sdpa m=0 with mask", Op::ScaledDotProductAttention,
                   {random_tensor({2, 3, 3}, t, rng), random_tensor({2, 0, 3}, t, rng), random_tensor({2, 0, 2}, t, rng), random_tensor({3, 0}, t, rng)},
                   attention_attrs(0), attention_bounds});
  cases.push_back({"sdpa d=0 explicit scale", Op::ScaledDotProductAttention,
                   {random_tensor({1, 2, 0}, t, rng), random_tensor({1, 3, 0}, t, rng), random_tensor({1, 3, 2}, t, rng)}, attention_attrs(0.5),
                   attention_bounds});
  cases.push_back({"sdpa batch 0", Op::ScaledDotProductAttention,
                   {random_tensor({0, 2, 3}, t, rng), random_tensor({0, 3, 3}, t, rng), random_tensor({0, 3, 2}, t, rng)}, attention_attrs(0),
                   attention_bounds});
  // Both sides reject the same inputs, with the same code.
  cases.push_back({"sdpa d=0 default scale", Op::ScaledDotProductAttention,
                   {random_tensor({1, 2, 0}, t, rng), random_tensor({1, 3, 0}, t, rng), random_tensor({1, 3, 2}, t, rng)}, attention_attrs(0),
                   attention_bounds});
  cases.push_back({"sdpa NaN scale", Op::ScaledDotProductAttention,
                   {random_tensor({1, 2, 2}, t, rng), random_tensor({1, 3, 2}, t, rng), random_tensor({1, 3, 2}, t, rng)},
                   attention_attrs(kNaN), attention_bounds});
  cases.push_back({"sdpa mask shape", Op::ScaledDotProductAttention,
                   {random_tensor({1, 2, 2}, t, rng), random_tensor({1, 3, 2}, t, rng), random_tensor({1, 3, 2}, t, rng), random_tensor({3, 2}, t, rng)},
                   attention_attrs(0), attention_bounds});
  cases.push_back({"hard_masked_softmax mask shape", Op::HardMaskedSoftmax, {random_tensor({2, 3}, t, rng), random_tensor({3, 2}, t, rng)},
                   axis_attrs(-1), masked_softmax_bounds});
  OpAttrs inf_alpha;
  inf_alpha.alpha = kInf;
  cases.push_back({"scaled_matmul infinite alpha", Op::ScaledMatmul, {random_tensor({2, 2}, t, rng), random_tensor({2, 2}, t, rng)},
                   inf_alpha, scaled_matmul_bounds});
  cases.push_back({"softmax_matmul inner dims", Op::SoftmaxMatmul, {random_tensor({2, 3}, t, rng), random_tensor({2, 3}, t, rng)}, {},
                   softmax_matmul_bounds});
  return cases;
}

std::vector<AttentionCase> attention_special_cases(DType t) {
  std::vector<AttentionCase> cases;
  // Lanes: NaN allowed; NaN, +inf and −inf blocked; allowed −inf beside a finite entry; all
  // allowed −inf; fully blocked; a NaN mask entry (allowed) and a −0 one (blocked). The gradient
  // holds NaN and ±inf at blocked entries, which must not reach the lane.
  const Tensor x = host_tensor({7, 3}, t, {1, kNaN, 2, kNaN, 0, 1, kInf, 1, 2, -kInf, 0.5, 3, -kInf, -kInf, 1, 4, 5, 6, 1, 2, 3});
  const Tensor mask = host_tensor({7, 3}, t, {1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0, kNaN, -0.0, 1});
  const Tensor g = host_tensor({7, 3}, t, {0.5, 1, -1, kNaN, 1, 2, kInf, 1, -1, 2, 1, -kInf, 1, 1, kNaN, kNaN, 1, kInf, 1, kNaN, 2});
  cases.push_back({"hard_masked_softmax special lanes", Op::HardMaskedSoftmax, {x, mask}, axis_attrs(-1),
                   masked_softmax_bounds, g});
  // Attention with a fully blocked query row (row 1) and NaN / +inf in v at keys 1 and 3, which
  // every query blocks: those keys add no term, so the forward and every adjoint are finite on
  // both sides (ATen's own W·v would read 0·NaN).
  const Tensor q = host_tensor({1, 3, 2}, t, {0.5, -1, 1, 2, -0.3, 0.8});
  const Tensor k = host_tensor({1, 4, 2}, t, {1, 0.2, -0.7, 1.1, 0.4, -0.4, 2, 1});
  const Tensor v = host_tensor({1, 4, 2}, t, {1, 2, kNaN, 0.5, -1, 0.7, 0.25, kInf});
  const Tensor amask = host_tensor({3, 4}, t, {1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 0});
  cases.push_back({"sdpa blocked row and NaN/inf v at blocked keys", Op::ScaledDotProductAttention, {q, k, v, amask},
                   attention_attrs(0), attention_bounds});
  // NaN and +inf in the gradient of the fully blocked query: it adds no term to any key's dv.
  const Tensor g_blocked = host_tensor({1, 3, 2}, t, {1, 0.5, kNaN, kInf, -1, 2});
  cases.push_back({"sdpa NaN/inf g at a fully blocked query", Op::ScaledDotProductAttention, {q, k, v, amask},
                   attention_attrs(0), attention_bounds, g_blocked});
  // The same with a finite v: the fully blocked row is exactly zero, forward and backward.
  const Tensor v_finite = host_tensor({1, 4, 2}, t, {1, 2, -1, 0.5, -1, 0.7, 0.25, 3});
  cases.push_back({"sdpa blocked row", Op::ScaledDotProductAttention, {q, k, v_finite, amask}, attention_attrs(0),
                   attention_bounds});
  // NaN in k at the blocked key 1: ATen's fused kernel adds −inf to that NaN score and makes every
  // row NaN, so the handler takes its composed path; every query stays finite.
  const Tensor k_nan = host_tensor({1, 4, 2}, t, {1, 0.2, kNaN, 1.1, 0.4, -0.4, 2, 1});
  cases.push_back({"sdpa NaN k at a blocked key", Op::ScaledDotProductAttention, {q, k_nan, v_finite, amask},
                   attention_attrs(0), attention_bounds});
  // A score that overflows to +inf at the blocked key 1 (finite inputs): the composed path again;
  // the reference never reads that score, so every query stays finite. (The bound grows with
  // ‖k‖ here, so this case checks the class: finite where the reference is finite.)
  const double big = t == DType::F32 ? 2e38 : 1e308;
  const Tensor k_big = host_tensor({1, 4, 2}, t, {1, 0.2, big, big, 0.4, -0.4, 2, 1});
  const Tensor q_two = host_tensor({1, 3, 2}, t, {2, 2, 1, 2, -0.3, 0.8});
  cases.push_back({"sdpa overflowing score at a blocked key", Op::ScaledDotProductAttention, {q_two, k_big, v_finite, amask},
                   attention_attrs(0), attention_bounds});
  // softmax_matmul lanes with NaN, +inf and an all −inf lane.
  const Tensor a = host_tensor({3, 3}, t, {1, kNaN, 2, kInf, 1, 2, -kInf, -kInf, -kInf});
  cases.push_back({"softmax_matmul special lanes", Op::SoftmaxMatmul, {a, host_tensor({3, 2}, t, {1, 2, 3, 4, 5, 6})}, {},
                   softmax_matmul_bounds});
  return cases;
}

std::vector<Op> attention_ops() {
  return {Op::HardMaskedSoftmax, Op::ScaledMatmul, Op::SoftmaxMatmul, Op::ScaledDotProductAttention};
}

}  // namespace capsule::libtorch_parity
