// SPDX-License-Identifier: Apache-2.0
// Freivalds' randomized product check for matmul, scaled_matmul, linear and softmax_matmul
// (docs/checkers.md, "Products"). For C = α·A·B (+ b) and a random sign vector r, it compares
// C·r with α·(A·(B·r) + b·r) row by row, in float64, at O(mk + kn + mn) per round instead of the
// product's O(mkn). Each row's tolerance is the worst-case rounding of any summation order,
// γ_K·α·(|A|·(|B|·1) + Σ|b|), bounded with two more matrix-vector products, plus the check's own
// float64 rounding: a correctly rounded product is never rejected.
#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <string>
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
  const char* what = nullptr;  ///< names the checked tensor in a violation
};

constexpr const char* kRowResidual = "Freivalds residual |C·r - alpha·(A·(B·r) + b·r)| of the output row starting at index";
constexpr const char* kGrad0 = "Freivalds residual of the gradient of input 0, row starting at index";
constexpr const char* kGrad1 = "Freivalds residual of the gradient of input 1, row starting at index";
constexpr const char* kGrad2 = "Freivalds residual of the gradient of input 2 (the bias) at index";

/// |B|·1 [k] alone, for the rows the screen below could not pass (B read once more).
template <class T, class TA>
void b_magnitudes(const Product<T, TA>& p, std::vector<double>& b_abs) {
  b_abs.assign(ix(p.k), 0.0);
  if (!p.b_transposed) {
    multi_dot_rows(p.b, p.k, p.n, p.n, nullptr, 0, 0, nullptr, nullptr, b_abs.data());
  } else {
    for (std::int64_t j = 0; j < p.n; ++j) multi_axpy(p.b + j * p.k, p.k, nullptr, 0, nullptr, b_abs.data());
  }
}

/// max(current, candidate), a NaN candidate ignored: std::fmax's result whenever `current` is not
/// NaN, as in every use below (each starts from a number and keeps only numbers). GCC compiles
/// std::fmax to a call into libm (x86's maxsd is not IEEE's fmax on NaN), and the loops below made
/// about a thousand such calls per 256³ check.
inline double max_ignoring_nan(double current, double candidate) { return candidate > current ? candidate : current; }

template <class T, class TA>
void freivalds(const Product<T, TA>& p, int rounds, FreivaldsTolerance tolerance, CheckerRng& rng,
               WorstResidual& worst) {
  const std::int64_t m = p.m, k = p.k, n = p.n;
  const std::int64_t R = rounds;
  // The screen (docs/checkers.md, "The screen"): the dot products come first, without the
  // magnitudes behind the exact tolerance (about a third of the kernels' work), and a row whose
  // residuals already lie within a lower bound of that tolerance passes on it. Only the other
  // rows get the exact tolerance, so every verdict is the one the exact tolerance alone gives,
  // except that a row whose exact bound would overflow passes when it meets the finite low bound.
  // softmax_matmul (a_rel) needs |B|·1 for every row's error term anyway, and the bound on the
  // screen's factor below needs (n + k)·u₆₄ ≤ 2⁻¹⁰.
  const bool screen = tolerance == FreivaldsTolerance::Screened && p.a_rel == nullptr &&
                      static_cast<double>(n + k) * kU64 <= 0x1p-10;
  // The call's working vectors, carved from one allocation: as separate vectors, their
  // allocations were about a twentieth of a 256³ check's time.
  // The kernels write round-major: c_dots [ρ][m], a_dots [ρ][m], s [ρ][k].
  ScratchCarver work(ix(R * n + 2 * m * R + R * k + 2 * R + 3 * m));
  const std::span<double> r = work.take(ix(R * n));
  const std::span<double> c_dots = work.take(ix(m * R)), a_dots = work.take(ix(m * R));
  const std::span<double> s = work.take_zeroed(ix(R * k));  // s_ρ = B·r_ρ [k]
  const std::span<double> bias_r = work.take_zeroed(ix(R)), coeff = work.take(ix(R));
  rng.fill_signs(r.data(), r.size());
  // (|C|·1)_i and (|A|·(|B|·1))_i: for every row without the screen, else for the rows it misses.
  std::vector<double> c_abs(screen ? 0 : ix(m)), a_mag(screen ? 0 : ix(m));
  // C·r_ρ (and, without the screen, (|C|·1)_i) first: the provider wrote C last, so it is the
  // operand likeliest still in cache. The magnitudes go nowhere under the screen.
  multi_dot_rows(p.c, m, n, n, r.data(), n, R, nullptr, c_dots.data(), screen ? nullptr : c_abs.data());
  // s_ρ = B·r_ρ [k] (and |B|·1 [k]), each row of B read once.
  std::vector<double> b_abs(screen ? 0 : ix(k), 0.0);
  double* b_abs_out = screen ? nullptr : b_abs.data();
  if (!p.b_transposed) {
    multi_dot_rows(p.b, k, n, n, r.data(), n, R, nullptr, s.data(), b_abs_out);
  } else {
    // B = Wᵀ: B·r = Σ_j r_j·W[j, :], accumulated as axpys over W's rows.
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t rho = 0; rho < R; ++rho) coeff[ix(rho)] = r[ix(rho * n + j)];
      multi_axpy(p.b + j * k, k, coeff.data(), R, s.data(), b_abs_out);
    }
  }
  double bias_abs = 0.0;
  if (p.bias != nullptr) {
    bias_abs = abs_sum(p.bias, n);
    for (std::int64_t rho = 0; rho < R; ++rho) bias_r[ix(rho)] = dot(p.bias, r.data() + rho * n, n);
  }

  // A·s_ρ (and, without the screen, (|A|·(|B|·1))_i) for every row, A read once.
  multi_dot_rows(p.a, m, k, k, s.data(), k, R, b_abs_out, a_dots.data(), screen ? nullptr : a_mag.data());
  const double u_in = unit_roundoff<T>();
  const double abs_alpha = std::fabs(p.alpha);
  const double provider = gamma(p.terms, u_in);
  // α as a local: the loops below store doubles, which the compiler must assume may alias p.alpha.
  const double alpha = p.alpha;
  auto residual = [&](std::int64_t i, std::int64_t rho) {
    return std::fabs(c_dots[ix(rho * m + i)] - alpha * (a_dots[ix(rho * m + i)] + bias_r[ix(rho)]));
  };
  const char* what = p.what != nullptr ? p.what : kRowResidual;

  // The rows that need the exact tolerance: every row without the screen.
  std::vector<std::int64_t> exact_rows;
  if (!screen) {
    exact_rows.resize(ix(m));
    for (std::int64_t i = 0; i < m; ++i) exact_rows[ix(i)] = i;
  } else {
    // Row i passes on low = the exact bound's first term with a lower bound t_low of t̂_i in place
    // of t̂_i: rounding is monotone, and the exact bound only multiplies that term by 1 + γ and
    // adds non-negative terms to it. Below 2⁻⁹⁰⁰ underflow could break t_low <= t̂_i, so 0 then.
    // The rounds share the row's index and bound: only the largest residual can be the worst.
    // Returns the ratio largest/low that `worst` would record for a pass, or -1 for a miss.
    auto screened = [&](std::int64_t i, double t_over, double& low, double& largest) {
      const double t_low = t_over >= 0x1p-900 ? 0.5 * t_over : 0.0;
      low = provider * (abs_alpha * (t_low + bias_abs));
      largest = 0.0;
      bool within = std::isfinite(low);
      for (std::int64_t rho = 0; rho < R; ++rho) {
        const double res = residual(i, rho);
        within = within && res <= low;
        largest = max_ignoring_nan(largest, res);
      }
      return within ? WorstResidual::pass_ratio(largest, low) : -1.0;
    };
    // First stage, free, for every row in one pass without a branch on the data: |(A·s_ρ)_i| <=
    // F·t̂_i with F <= 1.01 here (t̂_i: the exact path's computed |A|·(|B|·1)), so half the
    // largest is at most t̂_i.
    const std::span<double> lows = work.take(ix(m)), largests = work.take(ix(m)), ratios = work.take(ix(m));
    for (std::int64_t i = 0; i < m; ++i) {
      double top = 0.0;
      for (std::int64_t rho = 0; rho < R; ++rho) top = max_ignoring_nan(top, std::fabs(a_dots[ix(rho * m + i)]));
      double low = 0.0, largest = 0.0;  // locals, which stay in registers (a span's might alias)
      ratios[ix(i)] = screened(i, top, low, largest);
      lows[ix(i)] = low;
      largests[ix(i)] = largest;
    }
    // Then the rows in order. A passing row is recorded only when its ratio beats every earlier
    // first-stage pass: a recorded pass with a ratio at least as large already keeps `worst`
    // from changing (its recorded ratio only grows while every row passes, and a failure
    // outranks every pass), so the verdict is the one recording every row would give.
    double best_first_stage = -1.0;
    // The next row from `from` on that is not a first-stage pass at or below the best ratio: a
    // loop of its own, without the calls of the rows it stops at, so that it runs in registers.
    auto next_row = [&](std::int64_t from) {
      while (from < m && ratios[ix(from)] >= 0.0 && ratios[ix(from)] <= best_first_stage) ++from;
      return from;
    };
    std::vector<double> s_top;  // max_ρ |s_ρ,p| [k], made at the first row the first stage misses
    bool have_s_top = false;
    for (std::int64_t i = next_row(0); i < m; i = next_row(i + 1)) {
      if (ratios[ix(i)] >= 0.0) {
        best_first_stage = ratios[ix(i)];
        worst.observe(largests[ix(i)], lows[ix(i)], p.out_offset + i * n, what);
        continue;
      }
      // Second stage, one read of A's row: Σ_p |A_ip|·max_ρ |s_ρ,p| <= F·t̂_i too, and no sign
      // cancels in it, so a correct row whose A·s happened to cancel passes here without B
      // being read again for |B|·1.
      if (!have_s_top) {
        have_s_top = true;
        s_top.assign(ix(k), 0.0);
        // max_ignoring_nan drops a NaN of s, which is safe only because that NaN makes round ρ's
        // dot, and so the residual, NaN for every row (0·NaN is NaN): such a row misses both stages.
        for (std::int64_t rho = 0; rho < R; ++rho) {
          for (std::int64_t q = 0; q < k; ++q) {
            s_top[ix(q)] = max_ignoring_nan(s_top[ix(q)], std::fabs(s[ix(rho * k + q)]));
          }
        }
      }
      double weighted = 0.0;
      multi_dot_rows(p.a + i * k, 1, k, k, nullptr, 0, 0, s_top.data(), nullptr, &weighted);
      double low = 0.0, largest = 0.0;
      if (screened(i, weighted, low, largest) >= 0.0) worst.observe(largest, low, p.out_offset + i * n, what);
      else exact_rows.push_back(i);
    }
    if (exact_rows.empty()) return;
    b_magnitudes(p, b_abs);
    c_abs.assign(ix(m), 0.0);
    a_mag.assign(ix(m), 0.0);
    for (std::int64_t i : exact_rows) {
      multi_dot_rows(p.c + i * n, 1, n, n, nullptr, 0, 0, nullptr, nullptr, &c_abs[ix(i)]);
      multi_dot_rows(p.a + i * k, 1, k, k, nullptr, 0, 0, b_abs.data(), nullptr, &a_mag[ix(i)]);
    }
  }

  // The check's own float64 rounding: B·r and |B|·1 take n terms, A·s and |A|·(|B|·1) k more,
  // then the bias, α and the subtraction; C·r and |C|·1 take n.
  const double check_mag = gamma(static_cast<double>(n + k + 3), kU64);
  // Gradual underflow adds at most half the smallest subnormal per rounding, absolute.
  double underflow = (p.terms + static_cast<double>(n + k + 2)) * static_cast<double>(n) *
                     static_cast<double>(std::numeric_limits<T>::denorm_min());
  // Weighted |B|·1 for softmax_matmul's per-entry relative error of A.
  std::vector<double> weighted(p.a_rel != nullptr ? ix(k) : 0);
  if (p.a_rel != nullptr) {
    // softmax_matmul: a weight the provider computes in the subnormal range (or flushes to 0) is
    // off by up to 2·min_normal absolute, which its relative error bound misses; each such
    // weight multiplies a row of B, and |B|·1 sums them all (as ratio.softmax's 2·min_normal).
    double b_total = 0.0;
    for (std::int64_t q = 0; q < k; ++q) b_total += b_abs[ix(q)];
    underflow += 2.0 * static_cast<double>(std::numeric_limits<T>::min()) * b_total * (1.0 + check_mag);
  }
  for (std::int64_t i : exact_rows) {
    const TA* arow = p.a + i * k;
    const double t = a_mag[ix(i)];  // (|A|·|B|·1)_i
    double t_rel = 0.0;  // Σ_q |A_iq|·rel_iq·(|B|·1)_q
    if (p.a_rel != nullptr) {
      const double* rel = p.a_rel + i * k;
      for (std::int64_t q = 0; q < k; ++q) {
        const double aq = std::fabs(static_cast<double>(arow[q]));
        weighted[ix(q)] = aq > 0.0 ? aq * rel[q] : 0.0;
      }
      t_rel = dot(weighted.data(), b_abs.data(), k);
    }
    const double mag = abs_alpha * (t + bias_abs);
    // softmax_matmul's A error (t_rel) passes through the provider's and the check's rounding too.
    const double a_error = abs_alpha * t_rel * ((1.0 + provider) * (1.0 + check_mag) + check_mag);
    const double bound = freivalds_row_tolerance(u_in, p.terms, k, n, mag, c_abs[ix(i)]) + a_error + underflow;
    for (std::int64_t rho = 0; rho < R; ++rho) worst.observe(residual(i, rho), bound, p.out_offset + i * n, what);
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
    for (std::int64_t q = 0; q < k; ++q) top = max_ignoring_nan(top, static_cast<double>(row[q]));
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

/// linear's output dims [.., out] from X [.., in], W [out, in] and an optional b [out], shared by
/// the forward and VJP checks so both refuse the same malformed operands before reading any
/// buffer; shape-mismatch names `what` (the check) and every operand otherwise.
RuntimeResult<std::vector<std::int64_t>> linear_output_dims(std::string_view what, std::span<const Tensor> inputs) {
  if (inputs.size() < 2 || !inputs[0].defined() || !inputs[1].defined()) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(what, ": got ", inputs.size(), " inputs; expected x, w and an optional b"));
  }
  const Tensor& x = inputs[0];
  const Tensor& w = inputs[1];
  const bool has_bias = inputs.size() > 2 && inputs[2].defined();
  if (x.rank() < 1 || w.rank() != 2 || x.dim(x.rank() - 1) != w.dim(1) ||
      (has_bias && (inputs[2].rank() != 1 || inputs[2].dim(0) != w.dim(0)))) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(what, ": x ", to_string(x.shape()), ", w ", to_string(w.shape()),
                             has_bias ? str(", b ", to_string(inputs[2].shape())) : std::string(),
                             "; expected x [.., in], w [out, in], b [out]"));
  }
  std::vector<std::int64_t> dims = x.shape().to_vector();
  dims.back() = w.dim(0);
  return dims;
}

template <class T>
RuntimeResult<CheckVerdict> check_product_typed(const CheckCall& call, CheckerRng& rng, int rounds,
                                                FreivaldsTolerance tolerance) {
  const std::string_view op = to_string(call.op);
  const Tensor& out = *call.output;
  WorstResidual worst;
  if (call.op == Op::Linear) {
    CAPSULE_TRY(const std::vector<std::int64_t> want, linear_output_dims("linear check", call.inputs));
    const Tensor& x = call.inputs[0];
    const Tensor& w = call.inputs[1];
    const bool has_bias = call.inputs.size() > 2 && call.inputs[2].defined();
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
    freivalds(p, rounds, tolerance, rng, worst);
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
      freivalds(p, rounds, tolerance, rng, worst);
    } else {
      Product<T, T> p;
      p.a = ab;
      p.b = bb;
      p.c = cb;
      p.m = d.m, p.k = d.k, p.n = d.n;
      p.alpha = call.op == Op::ScaledMatmul ? call.attrs->alpha : 1.0;
      p.terms = static_cast<double>(d.k) + (call.op == Op::ScaledMatmul ? 1.0 : 0.0);
      p.out_offset = batch * d.m * d.n;
      freivalds(p, rounds, tolerance, rng, worst);
    }
  }
  return worst.verdict();
}

/// Row-major [cols, rows] copy of a row-major [rows, cols] matrix, so that Aᵀ·G and Gᵀ·X run
/// through the same row-wise check (O(rows·cols), still below the product's cost).
template <class T>
std::vector<T> transposed(const T* a, std::int64_t rows, std::int64_t cols) {
  std::vector<T> t(ix(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) t[ix(j * rows + i)] = a[i * cols + j];
  }
  return t;
}

bool has_gradient(const CheckCall& call, std::size_t index) {
  return index < call.input_gradients.size() && call.input_gradients[index].defined();
}

/// Fails with shape-mismatch unless input `index`'s gradient has the input's shape and dtype.
RuntimeStatus expect_gradient_like(const CheckCall& call, std::size_t index) {
  const Tensor& g = call.input_gradients[index];
  const Tensor& x = call.inputs[index];
  if (!(g.shape() == x.shape()) || g.dtype() != x.dtype() || g.device() != Device::Cpu) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(to_string(call.op), " VJP check: the gradient of input ", index, " is ",
                             to_string(g.dtype()), " ", to_string(g.shape()), "; expected ", to_string(x.dtype()), " ",
                             to_string(x.shape()), " on cpu"));
  }
  return std::monostate{};
}

/// The local VJPs of the products, checked by Freivalds like the forward: for C = α·A·B,
/// dA = α·G·Bᵀ and dB = α·Aᵀ·G; for linear Y = X·Wᵀ + b, dX = G·W, dW = Gᵀ·X and db = 1ᵀ·G.
template <class T>
RuntimeResult<CheckVerdict> check_product_vjp_typed(const CheckCall& call, CheckerRng& rng, int rounds,
                                                    FreivaldsTolerance tolerance) {
  const std::string_view op = to_string(call.op);
  const Tensor& g = *call.output_gradient;
  if (!(g.shape() == call.output->shape()) || g.dtype() != call.output->dtype() || g.device() != Device::Cpu) {
    return runtime_error(RuntimeCode::ShapeMismatch, str(op, " VJP check: output gradient ", to_string(g.dtype()), " ",
                                                         to_string(g.shape()), " for an output ",
                                                         to_string(call.output->dtype()), " ",
                                                         to_string(call.output->shape())));
  }
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    if (!has_gradient(call, i)) continue;
    if (!call.inputs[i].defined()) {  // an absent bias has no gradient to check against a shape
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(op, " VJP check: a gradient for input ", i, ", which is undefined"));
    }
    CAPSULE_CHECK(expect_gradient_like(call, i));
  }
  // The checks below read G (and the output) with the dimensions the inputs give, so a G of
  // another shape is a malformed call, refused before any read.
  auto wrong_gradient_shape = [&](const std::vector<std::int64_t>& want) -> std::optional<std::string> {
    const auto have = g.shape().dims();
    if (std::equal(have.begin(), have.end(), want.begin(), want.end())) return std::nullopt;
    auto shown = Shape::make(want);
    return str(op, " VJP check: output gradient ", to_string(g.shape()), "; the inputs give ",
               shown ? to_string(shown.value()) : std::string("an invalid shape"));
  };
  WorstResidual worst;
  if (call.op == Op::Linear) {
    CAPSULE_TRY(const std::vector<std::int64_t> want, linear_output_dims("linear VJP check", call.inputs));
    const Tensor& x = call.inputs[0];
    const Tensor& w = call.inputs[1];
    if (auto bad = wrong_gradient_shape(want)) return runtime_error(RuntimeCode::ShapeMismatch, *bad);
    const std::int64_t in = w.dim(1), out = w.dim(0);
    std::int64_t rows = 1;  // X's rows: every dim but the last (G has the same, checked above)
    for (std::size_t i = 0; i + 1 < x.rank(); ++i) rows *= x.dim(i);
    if (has_gradient(call, 0) && rows > 0 && in > 0) {  // dX [rows, in] = G [rows, out]·W [out, in]
      Product<T, T> p;
      p.a = g.data<T>(), p.b = w.data<T>(), p.c = call.input_gradients[0].data<T>();
      p.m = rows, p.k = out, p.n = in;
      p.terms = static_cast<double>(out);
      p.what = kGrad0;
      freivalds(p, rounds, tolerance, rng, worst);
    }
    if (has_gradient(call, 1) && out > 0 && in > 0) {  // dW [out, in] = Gᵀ [out, rows]·X [rows, in]
      const std::vector<T> gt = transposed(g.data<T>(), rows, out);
      Product<T, T> p;
      p.a = gt.data(), p.b = x.data<T>(), p.c = call.input_gradients[1].data<T>();
      p.m = out, p.k = rows, p.n = in;
      p.terms = static_cast<double>(rows);
      p.what = kGrad1;
      freivalds(p, rounds, tolerance, rng, worst);
    }
    if (call.inputs.size() > 2 && has_gradient(call, 2) && out > 0) {  // db [1, out] = 1 [1, rows]·G [rows, out]
      const std::vector<T> ones(ix(rows), T(1));
      Product<T, T> p;
      p.a = ones.data(), p.b = g.data<T>(), p.c = call.input_gradients[2].data<T>();
      p.m = 1, p.k = rows, p.n = out;
      p.terms = static_cast<double>(rows);
      p.what = kGrad2;
      freivalds(p, rounds, tolerance, rng, worst);
    }
    return worst.verdict();
  }
  const Tensor& a = call.inputs[0];
  const Tensor& b = call.inputs[1];
  CAPSULE_TRY(const BatchedDims d, product_dims(op, a, b));
  std::vector<std::int64_t> want = a.shape().to_vector();
  want.back() = d.n;
  if (auto bad = wrong_gradient_shape(want)) return runtime_error(RuntimeCode::ShapeMismatch, *bad);
  const bool scaled = call.op == Op::ScaledMatmul;
  const double alpha = scaled ? call.attrs->alpha : 1.0;
  for (std::int64_t batch = 0; batch < d.batch; ++batch) {
    const T* ab = a.data<T>() + batch * d.m * d.k;
    const T* bb = b.data<T>() + batch * d.k * d.n;
    const T* gb = g.data<T>() + batch * d.m * d.n;
    if (has_gradient(call, 0) && d.m > 0 && d.k > 0) {  // dA [m, k] = α·G [m, n]·Bᵀ
      Product<T, T> p;
      p.a = gb, p.b = bb, p.b_transposed = true, p.c = call.input_gradients[0].data<T>() + batch * d.m * d.k;
      p.m = d.m, p.k = d.n, p.n = d.k;
      p.alpha = alpha;
      p.terms = static_cast<double>(d.n) + (scaled ? 1.0 : 0.0);
      p.out_offset = batch * d.m * d.k;
      p.what = kGrad0;
      freivalds(p, rounds, tolerance, rng, worst);
    }
    if (has_gradient(call, 1) && d.k > 0 && d.n > 0) {  // dB [k, n] = α·Aᵀ [k, m]·G [m, n]
      const std::vector<T> at = transposed(ab, d.m, d.k);
      Product<T, T> p;
      p.a = at.data(), p.b = gb, p.c = call.input_gradients[1].data<T>() + batch * d.k * d.n;
      p.m = d.k, p.k = d.m, p.n = d.n;
      p.alpha = alpha;
      p.terms = static_cast<double>(d.m) + (scaled ? 1.0 : 0.0);
      p.out_offset = batch * d.k * d.n;
      p.what = kGrad1;
      freivalds(p, rounds, tolerance, rng, worst);
    }
  }
  return worst.verdict();
}

}  // namespace
}  // namespace capsule::checkers

namespace capsule {

double freivalds_row_tolerance(double u, double terms, std::int64_t k, std::int64_t n, double magnitude, double c_abs) {
  using checkers::gamma;
  using checkers::kU64;
  const double provider = gamma(terms, u);
  const double check_mag = gamma(static_cast<double>(n + k + 3), kU64);
  const double check_c = gamma(static_cast<double>(n + 1), kU64);
  return provider * magnitude * (1.0 + check_mag) + check_mag * magnitude + check_c * c_abs;
}

RuntimeResult<CheckVerdict> check_product(const CheckCall& call, CheckerRng& rng, int rounds,
                                          FreivaldsTolerance tolerance) {
  using namespace checkers;
  if (call.op != Op::Matmul && call.op != Op::ScaledMatmul && call.op != Op::Linear && call.op != Op::SoftmaxMatmul) {
    return runtime_error(RuntimeCode::InvalidArgument, str("the product check does not check ", to_string(call.op)));
  }
  if (rounds < 1) {
    return runtime_error(RuntimeCode::InvalidArgument, str("the product check needs at least 1 round, got ", rounds));
  }
  CAPSULE_CHECK(expect_operands(call, 2, call.op == Op::Linear ? 3 : 2));
  return dispatch_dtype(*call.output, [&]<class T>() { return check_product_typed<T>(call, rng, rounds, tolerance); });
}

RuntimeResult<CheckVerdict> check_product_vjp(const CheckCall& call, CheckerRng& rng, int rounds,
                                              FreivaldsTolerance tolerance) {
  using namespace checkers;
  if (call.op != Op::Matmul && call.op != Op::ScaledMatmul && call.op != Op::Linear) {
    return runtime_error(RuntimeCode::InvalidArgument, str("the product VJP check does not check ", to_string(call.op)));
  }
  if (rounds < 1) {
    return runtime_error(RuntimeCode::InvalidArgument, str("the product VJP check needs at least 1 round, got ", rounds));
  }
  if (call.output_gradient == nullptr || !call.output_gradient->defined()) {
    return runtime_error(RuntimeCode::InvalidArgument, str(to_string(call.op), " VJP check: no output gradient"));
  }
  CAPSULE_CHECK(expect_operands(call, 2, call.op == Op::Linear ? 3 : 2));
  return dispatch_dtype(*call.output, [&]<class T>() { return check_product_vjp_typed<T>(call, rng, rounds, tolerance); });
}

}  // namespace capsule
