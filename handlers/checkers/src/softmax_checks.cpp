// SPDX-License-Identifier: Apache-2.0
// The softmax family's ratio checks (docs/checkers.md, "Softmax"). softmax is fixed by two
// properties of each lane: the ratios y_i / y_r = exp(x_i - x_r) (the input differences), and
// Σ y = 1. log_softmax likewise: z_i - z_r = x_i - x_r and Σ exp(z) = 1. The checker tests both
// against the lane's largest entry r in float64, each within the provider's worst-case rounding
// (SoftmaxErrorModel) plus its own. hard_masked_softmax is softmax over the allowed entries with
// every blocked entry exactly 0, so the same check is complete for it too.
#include <cmath>
#include <limits>
#include <vector>

#include "capsule/checkers/standard.hpp"
#include "check_support.hpp"
#include "checks.hpp"

namespace capsule::checkers {
namespace {

constexpr const char* kBlocked = "blocked entry of hard_masked_softmax (must be exactly 0) at index";
constexpr const char* kEmptyRow = "entry of a fully blocked row (must be exactly 0) at index";
constexpr const char* kNanLane = "entry of a lane holding NaN, +inf or only -inf (must be NaN) at index";
constexpr const char* kNegInf = "entry whose input is -inf (softmax must be 0, log_softmax -inf) at index";
constexpr const char* kRatio = "ratio residual |y_i - y_r·exp(x_i - x_r)| at index";
constexpr const char* kDifference = "difference residual |(z_i - z_r) - (x_i - x_r)| at index";
constexpr const char* kSum = "lane sum residual |Σ y - 1| of the lane starting at index";
constexpr const char* kLogSum = "lane normalisation residual |Σ exp(z) - 1| of the lane starting at index";

template <class T>
struct Lane {
  const T* x;
  const T* y;
  const T* mask;  ///< null, or the mask (nonzero = allowed)
  std::int64_t len;
  std::int64_t stride;
  std::int64_t base;  ///< flat index of entry 0
  bool allowed(std::int64_t j) const { return mask == nullptr || mask[j * stride] != T(0); }
};

template <class T>
void check_lane(const Lane<T>& lane, bool log_form, WorstResidual& worst) {
  const double inf = std::numeric_limits<double>::infinity();
  const double min_normal = static_cast<double>(std::numeric_limits<T>::min());
  const double u = unit_roundoff<T>();
  auto x = [&](std::int64_t j) { return static_cast<double>(lane.x[j * lane.stride]); };
  auto y = [&](std::int64_t j) { return static_cast<double>(lane.y[j * lane.stride]); };
  auto at = [&](std::int64_t j) { return lane.base + j * lane.stride; };
  // Blocked entries are exactly 0 whatever the row holds; find the allowed lane's maximum.
  std::int64_t top_index = -1;
  std::int64_t allowed = 0;
  bool poisoned = false;  // NaN or +inf among the allowed inputs
  for (std::int64_t j = 0; j < lane.len; ++j) {
    if (!lane.allowed(j)) {
      worst.observe(std::fabs(y(j)), 0.0, at(j), kBlocked);
      continue;
    }
    ++allowed;
    const double v = x(j);
    if (std::isnan(v) || v == inf) poisoned = true;
    if (top_index < 0 || v > x(top_index)) top_index = j;
  }
  if (allowed == 0) {
    for (std::int64_t j = 0; j < lane.len; ++j) worst.observe(std::fabs(y(j)), 0.0, at(j), kEmptyRow);
    return;
  }
  const double top = x(top_index);
  if (poisoned || top == -inf) {
    // docs/special-values.md: NaN or +inf in a lane makes the lane NaN (inf - inf); so does a lane
    // of -inf only. Nothing else is a right answer.
    for (std::int64_t j = 0; j < lane.len; ++j) {
      if (lane.allowed(j)) worst.observe(std::isnan(y(j)) ? 0.0 : inf, 0.0, at(j), kNanLane);
    }
    return;
  }
  // The checker's own float64 softmax weights, for the error model only.
  double weight_sum = 0.0;
  for (std::int64_t j = 0; j < lane.len; ++j) {
    if (lane.allowed(j)) weight_sum += std::exp(x(j) - top);
  }
  auto weight = [&](std::int64_t j) { return lane.allowed(j) ? std::exp(x(j) - top) / weight_sum : 0.0; };
  const SoftmaxErrorModel model = softmax_error_model(x, weight, lane.len, top, u);
  const double check = gamma(static_cast<double>(lane.len + 4), kU64);
  const double rho_r = model.entry(top, top);
  const double yr = y(top_index);
  double sum = 0.0, sum_bound = 0.0, sum_abs = 0.0;
  double max_err = 0.0;
  for (std::int64_t j = 0; j < lane.len; ++j) {
    if (!lane.allowed(j)) continue;
    const double xj = x(j);
    const double yj = y(j);
    if (xj == -inf || xj - top == -inf) {
      // exp(-inf) is exactly 0 in every libm, so the entry is exactly 0 (log_softmax: -inf). A
      // float64 lane whose spread overflows (x_j - top = -inf for finite x_j) is the same case: the
      // true value lies below every subnormal, and any provider's x_j - top is -inf too.
      const bool exact = log_form ? yj == -inf : yj == 0.0;
      worst.observe(exact ? 0.0 : inf, 0.0, at(j), kNegInf);
      continue;
    }
    const double rho = model.entry(xj, top);
    if (!log_form) {
      // y_j = y_r·exp(x_j - top): both carry the model's relative error, the prediction the
      // check's rounding; a result in the subnormal range (or flushed to zero) may be off by the
      // smallest normal number absolutely.
      const double predicted = yr * std::exp(xj - top);
      const double bound = predicted * (rho + rho_r + check) / (1.0 - rho_r) + 2.0 * min_normal;
      worst.observe(std::fabs(yj - predicted), bound, at(j), kRatio);
      sum += yj;
      sum_abs += std::fabs(yj);
      sum_bound += weight(j) * rho;
    } else {
      const double zr = y(top_index);
      // The provider rounds x_j - top (u·|x_j - top|) and then subtracts log Σ (u·|z_j|); the
      // error of log Σ itself is common to the lane and cancels in the difference.
      const double err_j = u * (std::fabs(xj - top) + std::fabs(yj));
      const double bound = err_j + u * std::fabs(zr) + check * (std::fabs(xj - top) + std::fabs(yj) + std::fabs(zr));
      worst.observe(std::fabs((yj - zr) - (xj - top)), bound, at(j), kDifference);
      const double e = std::exp(yj);
      sum += e;
      sum_abs += std::fabs(e);
      sum_bound += weight(j) * err_j;
      max_err = std::fmax(max_err, err_j);
    }
  }
  const double count = static_cast<double>(allowed);
  if (!log_form) {
    const double bound = sum_bound * (1.0 + check) / (1.0 - model.sum_rel - u) + check * sum_abs + 2.0 * count * min_normal;
    worst.observe(std::fabs(sum - 1.0), bound, lane.base, kSum);
  } else {
    // log Σ is off by the sum's relative error (plus its log's own ulps): common to every entry.
    const double log_sum = -y(top_index);
    const double err_log = model.sum_rel * (1.0 + model.sum_rel) + (2.0 * kLibmUlps + 1.0) * u * std::fabs(log_sum);
    const double total = sum_bound + err_log;
    const double grow = std::exp(max_err + err_log);  // |e^ε - 1| <= |ε|·e^|ε|
    const double bound = total * grow * (1.0 + check) + check * sum_abs + 2.0 * count * min_normal;
    worst.observe(std::fabs(sum - 1.0), bound, lane.base, kLogSum);
  }
}

template <class T>
RuntimeResult<CheckVerdict> check_softmax_typed(const CheckCall& call) {
  const std::string_view op = to_string(call.op);
  const Tensor& x = call.inputs[0];
  const Tensor& out = *call.output;
  const bool masked = call.op == Op::HardMaskedSoftmax;
  if (masked && !(call.inputs[1].shape() == x.shape())) {
    return runtime_error(RuntimeCode::ShapeMismatch, str(op, " check: mask ", to_string(call.inputs[1].shape()),
                                                         " and scores ", to_string(x.shape()), " differ"));
  }
  if (auto bad = wrong_output_shape(op, out, x.shape().dims())) return *bad;
  WorstResidual worst;
  // No entry, no lane to check; a shape like [2^31, 0, 2^31] would otherwise walk outer·inner
  // empty lanes.
  if (x.numel() == 0) return worst.verdict();
  // A rank-0 tensor is one lane of one entry (docs/special-values.md).
  std::int64_t outer = 1, len = 1, inner = 1;
  if (x.rank() > 0) {
    CAPSULE_TRY(const std::size_t axis, normalize_axis(op, call.attrs->axis, x.rank()));
    for (std::size_t i = 0; i < axis; ++i) outer *= x.dim(i);
    len = x.dim(axis);
    for (std::size_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  }
  const T* xs = x.data<T>();
  const T* ys = out.data<T>();
  const T* ms = masked ? call.inputs[1].data<T>() : nullptr;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t in = 0; in < inner; ++in) {
      const std::int64_t base = o * len * inner + in;
      Lane<T> lane{xs + base, ys + base, ms != nullptr ? ms + base : nullptr, len, inner, base};
      check_lane(lane, call.op == Op::LogSoftmax, worst);
    }
  }
  return worst.verdict();
}

}  // namespace

RuntimeResult<CheckVerdict> check_softmax_family(const CheckCall& call, CheckerRng& /*rng*/) {
  CAPSULE_CHECK(expect_operands(call, call.op == Op::HardMaskedSoftmax ? 2 : 1, call.op == Op::HardMaskedSoftmax ? 2 : 1));
  return dispatch_dtype(*call.output, [&]<class T>() { return check_softmax_typed<T>(call); });
}

}  // namespace capsule::checkers
