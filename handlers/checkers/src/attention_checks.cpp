// SPDX-License-Identifier: Apache-2.0
// scaled_dot_product_attention has no check cheaper than the op: the output depends on every
// (query, key) score, O(n·m·d), and no algebraic identity of softmax(q·kᵀ)·v is known that avoids
// forming the scores (docs/checkers.md, "Attention"). Two checkers:
// - `partial`: every fully blocked query row is exactly +0 (O(n·m) over the mask). A necessary
//   condition only: it catches a mask that leaks into a blocked row, nothing else.
// - `sampled`: an independent recomputation: another algorithm (one streaming pass over the keys
//   in reverse order with a running maximum, instead of max-shift, exponentiate, divide), another
//   summation order, in higher precision (float64 for float32, long double for float64), compared
//   entrywise within the provider's worst-case rounding. As costly as the op, so meant for sampled
//   calls.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "check_support.hpp"
#include "checks.hpp"

namespace capsule::checkers {
namespace {

constexpr const char* kBlockedRow = "output entry of a fully blocked query row (must be exactly +0) at index";
constexpr const char* kRecompute = "|output - independent recomputation| at index";
constexpr const char* kNonFinite = "non-finite output entry disagreeing with the recomputation's class at index";

struct AttentionDims {
  std::int64_t batch = 1, n = 0, m = 0, d = 0, dv = 0;
  bool has_mask = false, batched_mask = false;
  double scale = 1.0;
  std::vector<std::int64_t> out_shape;
};

RuntimeResult<AttentionDims> attention_dims(const CheckCall& call) {
  const Tensor& q = call.inputs[0];
  const Tensor& k = call.inputs[1];
  const Tensor& v = call.inputs[2];
  const std::size_t r = q.rank();
  auto bad = [&] {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str("scaled_dot_product_attention check: q ", to_string(q.shape()), ", k ", to_string(k.shape()),
                             ", v ", to_string(v.shape()), "; expected q [.., n, d], k [.., m, d], v [.., m, dv]"));
  };
  if (r < 2 || k.rank() != r || v.rank() != r) return bad();
  AttentionDims dims;
  for (std::size_t i = 0; i + 2 < r; ++i) {
    if (k.dim(i) != q.dim(i) || v.dim(i) != q.dim(i)) return bad();
    dims.batch *= q.dim(i);
  }
  dims.n = q.dim(r - 2);
  dims.d = q.dim(r - 1);
  dims.m = k.dim(r - 2);
  dims.dv = v.dim(r - 1);
  if (k.dim(r - 1) != dims.d || v.dim(r - 2) != dims.m) return bad();
  dims.out_shape = q.shape().to_vector();
  dims.out_shape[r - 1] = dims.dv;
  dims.has_mask = call.inputs.size() > 3 && call.inputs[3].defined();
  if (dims.has_mask) {
    const Tensor& mask = call.inputs[3];
    const bool plain = mask.rank() == 2 && mask.dim(0) == dims.n && mask.dim(1) == dims.m;
    bool batched = mask.rank() == r && mask.dim(r - 2) == dims.n && mask.dim(r - 1) == dims.m;
    for (std::size_t i = 0; batched && i + 2 < r; ++i) batched = mask.dim(i) == q.dim(i);
    if (!plain && !batched) {
      return runtime_error(RuntimeCode::ShapeMismatch, str("scaled_dot_product_attention check: mask ",
                                                           to_string(mask.shape()), "; expected [n, m] or [.., n, m]"));
    }
    dims.batched_mask = !plain;
  }
  const double scale = call.attrs->scale;
  if (!std::isfinite(scale) || (scale == 0.0 && dims.d == 0)) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("scaled_dot_product_attention check: scale ", scale, " with d = ", dims.d));
  }
  dims.scale = scale != 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(dims.d));
  return dims;
}

template <class T>
struct AttentionView {
  const AttentionDims& dims;
  const OpAttrs& attrs;
  const T* mask;  ///< this batch entry's [n, m] mask, or null
  bool allowed(std::int64_t i, std::int64_t j) const {
    if (attrs.causal && j > i) return false;
    return mask == nullptr || mask[i * dims.m + j] != T(0);
  }
  bool row_blocked(std::int64_t i) const {
    for (std::int64_t j = 0; j < dims.m; ++j) {
      if (allowed(i, j)) return false;
    }
    return true;
  }
};

template <class T>
const T* batch_mask(const CheckCall& call, const AttentionDims& dims, std::int64_t b) {
  if (!dims.has_mask) return nullptr;
  const T* base = call.inputs[3].data<T>();
  return dims.batched_mask ? base + b * dims.n * dims.m : base;
}

template <class T>
RuntimeResult<CheckVerdict> blocked_rows_typed(const CheckCall& call) {
  CAPSULE_TRY(const AttentionDims dims, attention_dims(call));
  if (auto bad = wrong_output_shape("scaled_dot_product_attention", *call.output, dims.out_shape)) return *bad;
  WorstResidual worst;
  // No output entry, nothing to check; and q, k, v may then be empty with huge n and m (d = dv = 0),
  // which the loops over n·m would otherwise walk.
  if (call.output->numel() == 0) return worst.verdict();
  const T* out = call.output->data<T>();
  for (std::int64_t b = 0; b < dims.batch; ++b) {
    AttentionView<T> view{dims, *call.attrs, batch_mask<T>(call, dims, b)};
    for (std::int64_t i = 0; i < dims.n; ++i) {
      if (!view.row_blocked(i)) continue;
      const std::int64_t row = (b * dims.n + i) * dims.dv;
      for (std::int64_t c = 0; c < dims.dv; ++c) {
        const T y = out[row + c];
        // +0 exactly: a -0 would mean the row was computed, not left empty.
        const bool exact = y == T(0) && !std::signbit(y);
        worst.observe(exact ? 0.0 : std::numeric_limits<double>::infinity(), 0.0, row + c, kBlockedRow);
      }
    }
  }
  return worst.verdict();
}

template <class T>
RuntimeResult<CheckVerdict> recompute_typed(const CheckCall& call) {
  using H = std::conditional_t<std::is_same_v<T, float>, double, long double>;
  CAPSULE_TRY(const AttentionDims dims, attention_dims(call));
  if (auto bad = wrong_output_shape("scaled_dot_product_attention", *call.output, dims.out_shape)) return *bad;
  WorstResidual worst;
  // No output entry, nothing to check; and q, k, v may then be empty with huge n and m (d = dv = 0),
  // which the loops over n·m would otherwise walk.
  if (call.output->numel() == 0) return worst.verdict();
  const double u = unit_roundoff<T>();
  const double u_high = static_cast<double>(std::numeric_limits<H>::epsilon()) / 2.0;
  const double inf = std::numeric_limits<double>::infinity();
  const double min_normal = static_cast<double>(std::numeric_limits<T>::min());
  const H scale = static_cast<H>(dims.scale);
  const T* q = call.inputs[0].data<T>();
  const T* k = call.inputs[1].data<T>();
  const T* v = call.inputs[2].data<T>();
  const T* out = call.output->data<T>();
  std::vector<H> score(static_cast<std::size_t>(dims.m));
  std::vector<double> score_err(static_cast<std::size_t>(dims.m));
  std::vector<H> acc(static_cast<std::size_t>(dims.dv));
  std::vector<double> tol(static_cast<std::size_t>(dims.dv));
  std::vector<double> v_max(static_cast<std::size_t>(dims.dv));  ///< max |v| over the row's allowed keys
  std::vector<double> weight(static_cast<std::size_t>(dims.m));
  // Roundings: the score's dot product and its scaling (d + 1), the weighted sum over m keys.
  const double score_gamma = gamma(static_cast<double>(dims.d + 1), u);
  const double sum_gamma = gamma(static_cast<double>(dims.m), u);
  const double high = gamma(static_cast<double>(dims.m + dims.d + 8), u_high);
  for (std::int64_t b = 0; b < dims.batch; ++b) {
    AttentionView<T> view{dims, *call.attrs, batch_mask<T>(call, dims, b)};
    const T* qb = q + b * dims.n * dims.d;
    const T* kb = k + b * dims.m * dims.d;
    const T* vb = v + b * dims.m * dims.dv;
    for (std::int64_t i = 0; i < dims.n; ++i) {
      const std::int64_t row = (b * dims.n + i) * dims.dv;
      const T* qi = qb + i * dims.d;
      // Streaming pass over the allowed keys, last to first, rescaling the running sums whenever
      // the maximum grows.
      H top = -std::numeric_limits<H>::infinity();
      H z = 0;
      std::fill(acc.begin(), acc.end(), H(0));
      bool any = false, poisoned = false;
      for (std::int64_t j = dims.m - 1; j >= 0; --j) {
        if (!view.allowed(i, j)) continue;
        any = true;
        H s = 0;
        double mag = 0.0;
        for (std::int64_t c = dims.d - 1; c >= 0; --c) {
          s += static_cast<H>(qi[c]) * static_cast<H>(kb[j * dims.d + c]);
          mag += std::fabs(static_cast<double>(qi[c]) * static_cast<double>(kb[j * dims.d + c]));
        }
        s *= scale;
        score[static_cast<std::size_t>(j)] = s;
        score_err[static_cast<std::size_t>(j)] = score_gamma * std::fabs(dims.scale) * mag;  // a bound: |scale|
        if (std::isnan(s) || s == std::numeric_limits<H>::infinity()) poisoned = true;
        const T* vj = vb + j * dims.dv;
        if (s == -std::numeric_limits<H>::infinity()) {
          for (std::int64_t c = 0; c < dims.dv; ++c) acc[static_cast<std::size_t>(c)] += H(0) * static_cast<H>(vj[c]);
          continue;
        }
        if (s > top) {
          const H factor = top == -std::numeric_limits<H>::infinity() ? H(0) : std::exp(top - s);
          z = z * factor + H(1);
          for (std::int64_t c = 0; c < dims.dv; ++c) {
            acc[static_cast<std::size_t>(c)] = acc[static_cast<std::size_t>(c)] * factor + static_cast<H>(vj[c]);
          }
          top = s;
        } else {
          const H e = std::exp(s - top);
          z += e;
          for (std::int64_t c = 0; c < dims.dv; ++c) acc[static_cast<std::size_t>(c)] += e * static_cast<H>(vj[c]);
        }
      }
      if (!any) {
        for (std::int64_t c = 0; c < dims.dv; ++c) {
          const T y = out[row + c];
          worst.observe(y == T(0) && !std::signbit(y) ? 0.0 : inf, 0.0, row + c, kBlockedRow);
        }
        continue;
      }
      if (poisoned || top == -std::numeric_limits<H>::infinity()) {
        // NaN or +inf among the allowed scores, or only -inf: the row is NaN (special-values.md).
        for (std::int64_t c = 0; c < dims.dv; ++c) {
          worst.observe(std::isnan(out[row + c]) ? 0.0 : inf, 0.0, row + c, kNonFinite);
        }
        continue;
      }
      // The provider's weights are off by the score errors (the entry's own and the shift of the
      // normaliser) and by softmax's rounding; its weighted sum by γ_m more. With scores off by
      // δ_k, |δ_k| <= err_k, log Z moves by log Σ w_k·e^{δ_k}, which lies in
      // [log Σ w_k·e^{-err_k}, log Σ w_k·e^{err_k}]; by Jensen the lower end's magnitude is at
      // most Σ w_k·err_k <= log Σ w_k·e^{err_k}, so the upper end bounds both directions (the
      // weighted mean Σ w_k·err_k alone bounds only the downward one).
      double shift_sum = 0.0;
      std::fill(weight.begin(), weight.end(), 0.0);
      for (std::int64_t j = 0; j < dims.m; ++j) {
        if (!view.allowed(i, j) || score[static_cast<std::size_t>(j)] == -std::numeric_limits<H>::infinity()) continue;
        weight[static_cast<std::size_t>(j)] = static_cast<double>(std::exp(score[static_cast<std::size_t>(j)] - top) / z);
        shift_sum += weight[static_cast<std::size_t>(j)] * std::exp(score_err[static_cast<std::size_t>(j)]);
      }
      const double shift = shift_sum > 0.0 ? std::log(shift_sum) : 0.0;
      const SoftmaxErrorModel model = softmax_error_model(
          [&](std::int64_t j) { return static_cast<double>(score[static_cast<std::size_t>(j)]); },
          [&](std::int64_t j) { return weight[static_cast<std::size_t>(j)]; }, dims.m, static_cast<double>(top), u);
      std::fill(tol.begin(), tol.end(), 0.0);
      std::fill(v_max.begin(), v_max.end(), 0.0);
      for (std::int64_t j = 0; j < dims.m; ++j) {
        if (!view.allowed(i, j)) continue;
        const T* vj = vb + j * dims.dv;
        for (std::int64_t c = 0; c < dims.dv; ++c) {
          v_max[static_cast<std::size_t>(c)] = std::fmax(v_max[static_cast<std::size_t>(c)], std::fabs(static_cast<double>(vj[c])));
        }
      }
      for (std::int64_t j = 0; j < dims.m; ++j) {
        const double w = weight[static_cast<std::size_t>(j)];
        if (w == 0.0) continue;
        const double err_j = score_err[static_cast<std::size_t>(j)];
        const double theta = std::expm1(err_j + shift) + model.entry(static_cast<double>(score[static_cast<std::size_t>(j)]),
                                                                     static_cast<double>(top));
        const double coeff = w * (theta * (1.0 + sum_gamma) + sum_gamma + high);
        const T* vj = vb + j * dims.dv;
        for (std::int64_t c = 0; c < dims.dv; ++c) tol[static_cast<std::size_t>(c)] += coeff * std::fabs(static_cast<double>(vj[c]));
      }
      for (std::int64_t c = 0; c < dims.dv; ++c) {
        const H reference = acc[static_cast<std::size_t>(c)] / z;
        const double y = static_cast<double>(out[row + c]);
        if (!std::isfinite(static_cast<double>(reference))) {
          // Which non-finite value is right can depend on the provider's underflow (a weight that
          // underflows to 0 meets an infinite v as 0·inf = NaN, a tiny one gives inf), so any
          // non-finite output agrees with a non-finite recomputation.
          const bool same = !std::isfinite(y);
          worst.observe(same ? 0.0 : inf, 0.0, row + c, kNonFinite);
          continue;
        }
        // A weight the provider flushes to (or rounds within) the subnormal range is off by up to
        // min_normal absolute, which the relative model above misses: 2·m·min_normal, times the
        // largest |v| it multiplies (at least 1, for the sum's own underflow).
        const double underflow = 2.0 * static_cast<double>(dims.m) * min_normal * std::fmax(1.0, v_max[static_cast<std::size_t>(c)]);
        const double bound = tol[static_cast<std::size_t>(c)] * (1.0 + high) + underflow;
        worst.observe(static_cast<double>(std::fabs(static_cast<H>(y) - reference)), bound, row + c, kRecompute);
      }
    }
  }
  return worst.verdict();
}

}  // namespace

RuntimeResult<CheckVerdict> check_attention_blocked_rows(const CheckCall& call, CheckerRng& /*rng*/) {
  CAPSULE_CHECK(expect_operands(call, 3, 4));
  return dispatch_dtype(*call.output, [&]<class T>() { return blocked_rows_typed<T>(call); });
}

RuntimeResult<CheckVerdict> check_attention_recompute(const CheckCall& call, CheckerRng& /*rng*/) {
  CAPSULE_CHECK(expect_operands(call, 3, 4));
  return dispatch_dtype(*call.output, [&]<class T>() { return recompute_typed<T>(call); });
}

}  // namespace capsule::checkers
