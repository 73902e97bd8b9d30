// SPDX-License-Identifier: Apache-2.0
// The benchmarks' one estimate of a median with its uncertainty: torch_compare.cpp judges the
// LibTorch overheads on the median of per-pair differences, checker_bench.cpp the checked matmul
// on the median of per-pair ratios. A median of paired samples is robust to this VM's bursts of
// noise (a neighbour's load lands on one pair, not on the estimate), and the interval says
// whether a run resolved the figure against its target at all.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace capsule::bench {

struct MedianInterval {
  double median = 0;
  /// A distribution-free 95% confidence interval of the median: the order statistics of ranks
  /// floor(n/2 − 1.96·√n/2) and ceil(1 + n/2 + 1.96·√n/2) (counted from 1) of the sorted samples,
  /// clamped to the samples (so with very few samples it is simply their range).
  double low = 0;
  double high = 0;
};

/// Sorts `values` in place and returns their median and its interval. Empty input gives zeros.
inline MedianInterval median_interval(std::vector<double>& values) {
  MedianInterval result;
  if (values.empty()) return result;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  result.median = values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
  const double n = static_cast<double>(values.size());
  const double half_width = 1.96 * std::sqrt(n) / 2;
  // Rank r (counted from 1) is index r − 1.
  const auto at_rank = [&](double rank) { return values[static_cast<std::size_t>(std::clamp(rank - 1, 0.0, n - 1))]; };
  result.low = at_rank(std::floor(n / 2 - half_width));
  result.high = at_rank(std::ceil(1 + n / 2 + half_width));
  return result;
}

/// What a verdict line adds about `m`'s interval against an upper target: nothing when the whole
/// interval meets it, else whether it lies above or straddles it.
inline const char* interval_against(const MedianInterval& m, double target) {
  if (m.high <= target) return "";
  return m.low > target ? "; the whole interval lies above the target"
                        : "; the interval straddles the target: not resolved in this run";
}

}  // namespace capsule::bench
