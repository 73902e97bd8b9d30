// SPDX-License-Identifier: Apache-2.0
// What every checker shares: unit roundoff and the γ_k bound of k roundings, short dot products in
// float64 (the bounds hold for any summation order, so eight independent partial sums are fine),
// and the record of the worst residual. The long row kernels of Freivalds' check are multi_dot.hpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "capsule/runtime/checker.hpp"

namespace capsule::checkers {

/// A non-negative element index or count as a vector index.
inline std::size_t ix(std::int64_t i) { return static_cast<std::size_t>(i); }

/// u = 2^-24 for float32, 2^-53 for float64: the largest relative error of one rounding to nearest.
template <class T>
constexpr double unit_roundoff() {
  return static_cast<double>(std::numeric_limits<T>::epsilon()) / 2.0;
}
inline constexpr double kU64 = unit_roundoff<double>();

/// γ_k = k·u / (1 − k·u), Higham's bound on the relative error of k accumulated roundings; +inf
/// where k·u ≥ 1 (no bound exists, so a check that needs it cannot vouch and fails).
inline double gamma(double k, double u) {
  const double ku = k * u;
  return ku < 1.0 ? ku / (1.0 - ku) : std::numeric_limits<double>::infinity();
}

/// The provider's exp and log are assumed accurate to this many units in the last place (glibc's
/// and SLEEF's u10 functions are within 1 ulp; 4 leaves room for vendor vector math libraries). One
/// ulp is at most 2u relative, so each call contributes at most 2·kLibmUlps·u.
inline constexpr double kLibmUlps = 4.0;

/// Σ x[j]·y[j] in float64, eight independent partial sums.
template <class T, class U>
double dot(const T* x, const U* y, std::int64_t n) {
  double acc[8] = {};
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += static_cast<double>(x[j + l]) * static_cast<double>(y[j + l]);
  }
  double tail = 0.0;
  for (; j < n; ++j) tail += static_cast<double>(x[j]) * static_cast<double>(y[j]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

/// Σ |x[j]| in float64.
template <class T>
double abs_sum(const T* x, std::int64_t n) {
  double acc[8] = {};
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += std::fabs(static_cast<double>(x[j + l]));
  }
  double tail = 0.0;
  for (; j < n; ++j) tail += std::fabs(static_cast<double>(x[j]));
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

/// The worst residual seen: a failing one beats every passing one, and among equals the larger
/// residual/bound ratio wins. A residual passes only when `residual <= bound` holds and the bound is
/// finite, so a NaN residual fails, and so does a check whose bound overflowed (it cannot vouch).
class WorstResidual {
 public:
  /// The residual/bound ratio a passing residual is ranked by (0 when the bound is 0).
  static double pass_ratio(double residual, double bound) { return bound > 0.0 ? residual / bound : 0.0; }
  /// Records one residual; returns whether it passed. `what` must outlive the tracker.
  bool observe(double residual, double bound, std::int64_t index, const char* what) {
    const bool within = residual <= bound && std::isfinite(bound);
    double ratio = 0.0;
    if (!within) {
      ratio = std::isnan(residual) || !(bound > 0.0) || !std::isfinite(bound) ? std::numeric_limits<double>::infinity()
                                                                              : residual / bound;
    } else {
      ratio = pass_ratio(residual, bound);
    }
    const bool worse = !seen_ || (!within && passed_) || ((!within) == (!passed_) && ratio > ratio_);
    if (worse) {
      seen_ = true;
      ratio_ = ratio;
      worst_ = {residual, bound, index, what};
    }
    if (!within) passed_ = false;
    return within;
  }
  bool passed() const { return passed_; }

  CheckVerdict verdict() const {
    CheckVerdict verdict;
    verdict.passed = passed_;
    verdict.worst = CheckViolation{worst_.residual, worst_.bound, worst_.index, worst_.what ? worst_.what : "nothing checked"};
    return verdict;
  }

 private:
  struct Entry {
    double residual = 0.0;
    double bound = 0.0;
    std::int64_t index = -1;
    const char* what = nullptr;
  };
  bool seen_ = false;
  bool passed_ = true;
  double ratio_ = 0.0;
  Entry worst_;
};

}  // namespace capsule::checkers
