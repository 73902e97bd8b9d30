// SPDX-License-Identifier: Apache-2.0
// Freivalds' randomized product check for matmul, scaled_matmul, linear and softmax_matmul
// (docs/checkers.md, "Products"). For C = α·A·B (+ b) and a random sign vector r, it compares
// C·r with α·(A·(B·r) + b·r) row by row, in float64, at O(mk + kn + mn) per round instead of the
// product's O(mkn). Each row's tolerance is the worst-case rounding of any summation order,
// γ_K·α·(|A|·(|B|·1) + Σ|b|), bounded with two more matrix-vector products, plus the check's own
// float64 rounding: a correctly rounded product is never rejected.
#include <cmath>
#include <vector>

#include "capsule/checkers/standard.hpp"
#include "capsule/text.hpp"
#include "check_support.hpp"
#include "multi_dot.hpp"
#include "rounding.hpp"

namespace capsule::checkers {
namespace {

/// One 2-D product C [m, n] = α·A [m, k]·B [k, n] + bias [n]. B is row-major [k, n], or the
/// transpose of a row-major W [n, k] (linear's weight). With `a_rel` set (softmax_matmul) A is the
/// checker's own float64 softmax and a_rel[i·k + p] bounds the provider's relative error in A[i, p].
template <class T, class TA>
struct Product {
  const TA* a = nullptr;
  const T* b = nullptr;
  bool b_transposed = false;
  const T* bias = nullptr;
  const T* c = nullptr;
  const double* a_rel = nullptr;
  std::int64_t m = 0, k = 0, n = 0;
  double alpha = 1.0;
  double terms = 0.0;  ///< roundings per output element in the provider: k, +1 for α or the bias
  std::int64_t out_offset = 0;
};

constexpr const char* kRowResidual = "Freivalds residual |C·r - alpha·(A·(B·r) + b·r)| of the output row starting at index";

template <class T, class TA>
void freivalds(const Product<T, TA>& p, int rounds, CheckerRng& rng, WorstResidual& worst) {
  const std::int64_t m = p.m, k = p.k, n = p.n;
  const std::int64_t R = rounds;
  std::vector<double> r(ix(R * n));
  for (double& v : r) v = rng.sign();
  // s_ρ = B·r_ρ [k] and |B|·1 [k], each row of B read once.
  std::vector<double> s(ix(R * k), 0.0);
  std::vector<double> b_abs(ix(k), 0.0);
  std::vector<double> dots(ix(R));
  if (!p.b_transposed) {
    for (std::int64_t q = 0; q < k; ++q) {
      multi_dot(p.b + q * n, n, r.data(), n, R, nullptr, dots.data(), &b_abs[ix(q)]);
      for (std::int64_t rho = 0; rho < R; ++rho) s[ix(rho * k + q)] = dots[ix(rho)];
    }
  } else {
    // B = Wᵀ: B·r = Σ_j r_j·W[j, :], accumulated as axpys over W's rows.
    std::vector<double> coeff(ix(R));
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t rho = 0; rho < R; ++rho) coeff[ix(rho)] = r[ix(rho * n + j)];
      multi_axpy(p.b + j * k, k, coeff.data(), R, s.data(), b_abs.data());
    }
  }
  std::vector<double> bias_r(ix(R), 0.0);
  double bias_abs = 0.0;
  if (p.bias != nullptr) {
    bias_abs = abs_sum(p.bias, n);
    for (std::int64_t rho = 0; rho < R; ++rho) bias_r[ix(rho)] = dot(p.bias, r.data() + rho * n, n);
  }
  // Weighted |B|·1 for softmax_matmul's per-entry relative error of A.
  std::vector<double> weighted(p.a_rel != nullptr ? ix(k) : 0);

  std::vector<double> a_dots(ix(R)), c_dots(ix(R));
  const double u_in = unit_roundoff<T>();
  const double abs_alpha = std::fabs(p.alpha);
  const double provider = gamma(p.terms, u_in);
  // The check's own float64 rounding: B·r and |B|·1 take n terms, A·s and |A|·(|B|·1) k more,
  // then the bias, α and the subtraction; C·r and |C|·1 take n.
  const double check_mag = gamma(static_cast<double>(n + k + 3), kU64);
  const double check_c = gamma(static_cast<double>(n + 1), kU64);
  // Gradual underflow adds at most half the smallest subnormal per rounding, absolute.
  const double underflow = (p.terms + static_cast<double>(n + k + 2)) * static_cast<double>(n) *
                           static_cast<double>(std::numeric_limits<T>::denorm_min());
  for (std::int64_t i = 0; i < m; ++i) {
    const TA* arow = p.a + i * k;
    const T* crow = p.c + i * n;
    double t = 0.0;  // (|A|·|B|·1)_i, and A·s_ρ in a_dots
    multi_dot(arow, k, s.data(), k, R, b_abs.data(), a_dots.data(), &t);
    double t_rel = 0.0;  // Σ_q |A_iq|·rel_iq·(|B|·1)_q
    if (p.a_rel != nullptr) {
      const double* rel = p.a_rel + i * k;
      for (std::int64_t q = 0; q < k; ++q) {
        const double aq = std::fabs(static_cast<double>(arow[q]));
        weighted[ix(q)] = aq > 0.0 ? aq * rel[q] : 0.0;
      }
      t_rel = dot(weighted.data(), b_abs.data(), k);
    }
    double c_abs = 0.0;
    multi_dot(crow, n, r.data(), n, R, nullptr, c_dots.data(), &c_abs);
    const double mag = abs_alpha * (t + bias_abs);
    const double bound = (provider * mag + (1.0 + provider) * abs_alpha * t_rel) * (1.0 + check_mag) +
                         check_mag * (mag + abs_alpha * t_rel) + check_c * c_abs + underflow;
    for (std::int64_t rho = 0; rho < R; ++rho) {
      const double residual = std::fabs(c_dots[ix(rho)] - p.alpha * (a_dots[ix(rho)] + bias_r[ix(rho)]));
      worst.observe(residual, bound, p.out_offset + i * n, kRowResidual);
    }
  }
}

struct BatchedDims {
  std::int64_t batch = 1, m = 0, k = 0, n = 0;
};

RuntimeResult<BatchedDims> product_dims(std::string_view op, const Tensor& a, const Tensor& b) {
  if (a.rank() < 2 || b.rank() != a.rank()) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, " check: operands ", to_string(a.shape()), " and ", to_string(b.shape()),
                             "; expected [.., m, k] and [.., k, n] of equal rank >= 2"));
  }
  const std::size_t r = a.rank();
  BatchedDims d;
  for (std::size_t i = 0; i + 2 < r; ++i) {
    if (a.dim(i) != b.dim(i)) {
      return runtime_error(RuntimeCode::ShapeMismatch, str(op, " check: batch dims of ", to_string(a.shape()), " and ",
                                                           to_string(b.shape()), " differ"));
    }
    d.batch *= a.dim(i);
  }
  d.m = a.dim(r - 2);
  d.k = a.dim(r - 1);
  d.n = b.dim(r - 1);
  if (b.dim(r - 2) != d.k) {
    return runtime_error(RuntimeCode::ShapeMismatch, str(op, " check: inner dims of ", to_string(a.shape()), " and ",
                                                         to_string(b.shape()), " differ"));
  }
  return d;
}

/// softmax(A) row by row in float64, and a bound on the provider's relative error in each entry
/// when it computes the same softmax in T (docs/checkers.md, "Softmax").
template <class T>
void softmax_with_error(const T* a, std::int64_t m, std::int64_t k, std::vector<double>& s, std::vector<double>& rel) {
  s.assign(ix(m * k), 0.0);
  rel.assign(ix(m * k), 0.0);
  for (std::int64_t i = 0; i < m; ++i) {
    const T* row = a + i * k;
    double* srow = s.data() + i * k;
    double* rrow = rel.data() + i * k;
    double top = -std::numeric_limits<double>::infinity();
    for (std::int64_t q = 0; q < k; ++q) top = std::fmax(top, static_cast<double>(row[q]));
    double sum = 0.0;
    for (std::int64_t q = 0; q < k; ++q) {
      srow[q] = std::exp(static_cast<double>(row[q]) - top);
      sum += srow[q];
    }
    for (std::int64_t q = 0; q < k; ++q) srow[q] /= sum;
    const SoftmaxErrorModel model = softmax_row_error_model(row, srow, k, top, unit_roundoff<T>());
    const SoftmaxErrorModel check = softmax_row_error_model(row, srow, k, top, kU64);
    for (std::int64_t q = 0; q < k; ++q) {
      rrow[q] = model.entry(static_cast<double>(row[q]), top) + check.entry(static_cast<double>(row[q]), top);
    }
  }
}

template <class T>
RuntimeResult<CheckVerdict> check_product_typed(const CheckCall& call, CheckerRng& rng, int rounds) {
  const std::string_view op = to_string(call.op);
  const Tensor& out = *call.output;
  WorstResidual worst;
  if (call.op == Op::Linear) {
    const Tensor& x = call.inputs[0];
    const Tensor& w = call.inputs[1];
    const bool has_bias = call.inputs.size() > 2 && call.inputs[2].defined();
    if (x.rank() < 1 || w.rank() != 2 || x.dim(x.rank() - 1) != w.dim(1) ||
        (has_bias && (call.inputs[2].rank() != 1 || call.inputs[2].dim(0) != w.dim(0)))) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str("linear check: x ", to_string(x.shape()), ", w ", to_string(w.shape()),
                               has_bias ? str(", b ", to_string(call.inputs[2].shape())) : std::string(),
                               "; expected x [.., in], w [out, in], b [out]"));
    }
    std::vector<std::int64_t> want = x.shape().to_vector();
    want.back() = w.dim(0);
    if (auto bad = wrong_output_shape(op, out, want)) return *bad;
    Product<T, T> p;
    p.k = w.dim(1);
    p.n = w.dim(0);
    p.m = p.k == 0 ? (x.rank() == 1 ? 1 : out.numel() / std::max<std::int64_t>(p.n, 1)) : x.numel() / p.k;
    if (p.n == 0 || p.m == 0) return worst.verdict();
    p.a = x.data<T>();
    p.b = w.data<T>();
    p.b_transposed = true;
    p.bias = has_bias ? call.inputs[2].data<T>() : nullptr;
    p.c = out.data<T>();
    p.terms = static_cast<double>(p.k) + (has_bias ? 1.0 : 0.0);
    freivalds(p, rounds, rng, worst);
    return worst.verdict();
  }
  const Tensor& a = call.inputs[0];
  const Tensor& b = call.inputs[1];
  CAPSULE_TRY(const BatchedDims d, product_dims(op, a, b));
  std::vector<std::int64_t> want = a.shape().to_vector();
  want.back() = d.n;
  if (auto bad = wrong_output_shape(op, out, want)) return *bad;
  if (call.op == Op::ScaledMatmul && !std::isfinite(call.attrs->alpha)) {
    return runtime_error(RuntimeCode::InvalidArgument, str("scaled_matmul check: alpha is ", call.attrs->alpha,
                                                           "; expected a finite number"));
  }
  std::vector<double> soft, rel;
  for (std::int64_t batch = 0; batch < d.batch; ++batch) {
    if (d.m == 0 || d.n == 0) break;
    const T* ab = a.data<T>() + batch * d.m * d.k;
    const T* bb = b.data<T>() + batch * d.k * d.n;
    const T* cb = out.data<T>() + batch * d.m * d.n;
    if (call.op == Op::SoftmaxMatmul) {
      Product<T, double> p;
      softmax_with_error(ab, d.m, d.k, soft, rel);
      p.a = soft.data();
      p.a_rel = rel.data();
      p.b = bb;
      p.c = cb;
      p.m = d.m, p.k = d.k, p.n = d.n;
      p.terms = static_cast<double>(d.k);
      p.out_offset = batch * d.m * d.n;
      freivalds(p, rounds, rng, worst);
    } else {
      Product<T, T> p;
      p.a = ab;
      p.b = bb;
      p.c = cb;
      p.m = d.m, p.k = d.k, p.n = d.n;
      p.alpha = call.op == Op::ScaledMatmul ? call.attrs->alpha : 1.0;
      p.terms = static_cast<double>(d.k) + (call.op == Op::ScaledMatmul ? 1.0 : 0.0);
      p.out_offset = batch * d.m * d.n;
      freivalds(p, rounds, rng, worst);
    }
  }
  return worst.verdict();
}

}  // namespace
}  // namespace capsule::checkers

namespace capsule {

RuntimeResult<CheckVerdict> check_product(const CheckCall& call, CheckerRng& rng, int rounds) {
  using namespace checkers;
  if (call.op != Op::Matmul && call.op != Op::ScaledMatmul && call.op != Op::Linear && call.op != Op::SoftmaxMatmul) {
    return runtime_error(RuntimeCode::InvalidArgument, str("the product check does not check ", to_string(call.op)));
  }
  if (rounds < 1) {
    return runtime_error(RuntimeCode::InvalidArgument, str("the product check needs at least 1 round, got ", rounds));
  }
  CAPSULE_CHECK(expect_operands(call, 2, call.op == Op::Linear ? 3 : 2));
  return dispatch_dtype(*call.output, [&]<class T>() { return check_product_typed<T>(call, rng, rounds); });
}

}  // namespace capsule
