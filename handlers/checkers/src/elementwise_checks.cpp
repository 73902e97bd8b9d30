// SPDX-License-Identifier: Apache-2.0
// Elementwise ops whose IEEE-754 operation is correctly rounded have an exact inverse check that
// does not recompute the op (docs/checkers.md, "Elementwise"):
//   sqrt: y = fl(√x), so y² = x·(1 + δ)², |δ| ≤ u: |y² − x| ≤ (2u + u²)·|x|, and y ≥ 0;
//   inv:  y = fl(1/x), so x·y = 1 + δ: |x·y − 1| ≤ u, plus the absolute error of a subnormal y.
// The residuals y² − x and x·y − 1 are computed with one fused multiply-add in float64, which is
// exact for float32 operands and rounds once for float64 ones (the bound allows that rounding).
// Special values are checked exactly against docs/special-values.md.
#include <cmath>
#include <limits>

#include "check_support.hpp"
#include "checks.hpp"

namespace capsule::checkers {
namespace {

constexpr const char* kSqrt = "sqrt residual |y² - x| at index";
constexpr const char* kInv = "inv residual |x·y - 1| at index";
constexpr const char* kSpecial = "special value (NaN, ±inf, ±0 or a negative input) not as the semantics table says at index";

/// Whether a and b are the same value, NaN equal to NaN and -0 distinct from +0.
bool same_special(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

template <class T>
RuntimeResult<CheckVerdict> check_elementwise_typed(const CheckCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = *call.output;
  if (auto bad = wrong_output_shape(to_string(call.op), out, x.shape().dims())) return *bad;
  WorstResidual worst;
  const double u = unit_roundoff<T>();
  const double inf = std::numeric_limits<double>::infinity();
  const T* xs = x.data<T>();
  const T* ys = out.data<T>();
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double xv = static_cast<double>(xs[i]);
    const double yv = static_cast<double>(ys[i]);
    if (call.op == Op::Sqrt) {
      // NaN, negative (NaN), ±0 (itself) and +inf (itself) are exact.
      if (std::isnan(xv) || xv < 0.0 || xv == 0.0 || xv == inf) {
        const double want = std::isnan(xv) || xv < 0.0 ? std::numeric_limits<double>::quiet_NaN() : xv;
        worst.observe(same_special(yv, want) ? 0.0 : inf, 0.0, i, kSpecial);
        continue;
      }
      // A negative root squares to x as well: the sign is checked on its own.
      if (!(yv >= 0.0)) {
        worst.observe(inf, 0.0, i, kSpecial);
        continue;
      }
      const double residual = std::fabs(std::fma(yv, yv, -xv));
      // The fma rounds its result once; for a subnormal float64 x that rounding (up to half the
      // smallest subnormal, absolute) exceeds the relative term, so it is added.
      const double fma_floor = std::numeric_limits<double>::denorm_min() / 2.0;
      worst.observe(residual, (2.0 * u + u * u) * xv * (1.0 + 2.0 * kU64) + fma_floor, i, kSqrt);
    } else {
      // inv: NaN → NaN, ±0 → ±inf, ±inf → ±0; exact.
      if (std::isnan(xv) || xv == 0.0 || std::isinf(xv)) {
        const double want = std::isnan(xv) ? xv : (xv == 0.0 ? std::copysign(inf, xv) : std::copysign(0.0, xv));
        worst.observe(same_special(yv, want) ? 0.0 : inf, 0.0, i, kSpecial);
        continue;
      }
      // 1/x overflows near |x| = 1/max: an infinite y must carry x's sign and lie in or past that
      // zone (rounding decides inside it); a finite y past it is wrong.
      const double scaled = std::fabs(xv) * static_cast<double>(std::numeric_limits<T>::max());
      if (std::isinf(yv)) {
        worst.observe(scaled * (1.0 - u) < 1.0 + u && std::signbit(yv) == std::signbit(xv) ? 0.0 : inf, 0.0, i, kSpecial);
        continue;
      }
      if (scaled * (1.0 + u) < 1.0 - u) {
        worst.observe(inf, 0.0, i, kSpecial);
        continue;
      }
      // A subnormal (or zero) y carries an absolute error up to half the smallest subnormal,
      // which |x| multiplies.
      const double absolute = std::fabs(xv) * static_cast<double>(std::numeric_limits<T>::denorm_min()) / 2.0;
      const double residual = std::fabs(std::fma(xv, yv, -1.0));
      worst.observe(residual, u * (1.0 + 2.0 * kU64) + absolute, i, kInv);
    }
  }
  return worst.verdict();
}

}  // namespace

RuntimeResult<CheckVerdict> check_inverse_elementwise(const CheckCall& call, CheckerRng& /*rng*/) {
  if (call.op != Op::Sqrt && call.op != Op::Inv) {
    return runtime_error(RuntimeCode::InvalidArgument, str("the inverse check does not check ", to_string(call.op)));
  }
  CAPSULE_CHECK(expect_operands(call, 1, 1));
  return dispatch_dtype(*call.output, [&]<class T>() { return check_elementwise_typed<T>(call); });
}

}  // namespace capsule::checkers
