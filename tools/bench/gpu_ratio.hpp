// SPDX-License-Identifier: Apache-2.0
// The GPU benchmarks' one comparison (gpu_bench.cpp, gpu_bench_libtorch.cpp): `reps` calls of our
// side, then of the direct side, each block timed up to its stream's completion, the order
// alternating from round to round so a drift of the GPU's clocks within a round favours neither;
// judged on the median of the per-round ratios ours/direct. No Google Benchmark: these programs
// run on a bare GPU image (tools/gpu-check.sh).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace capsule::bench {

struct GpuRatio {
  double median = 0;       ///< median over the rounds of (ours / direct)
  double best_ours = 0;    ///< seconds per call, best round
  double best_direct = 0;  ///< seconds per call, best round
};

/// `ours` and `direct` each queue one call; `sync_ours` and `sync_direct` wait for their
/// streams. Both sides are warmed up first (plans, handles, pool blocks, clocks).
template <class Ours, class Direct, class SyncOurs, class SyncDirect>
GpuRatio gpu_ratio(int rounds, int reps, Ours&& ours, Direct&& direct, SyncOurs&& sync_ours, SyncDirect&& sync_direct) {
  for (int i = 0; i < 3; ++i) {
    ours();
    direct();
  }
  sync_ours();
  sync_direct();
  const auto timed = [reps](auto& call, auto& sync) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) call();
    sync();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
  };
  std::vector<double> ratios;
  GpuRatio result{0, 1e30, 1e30};
  for (int r = 0; r < rounds; ++r) {
    double t_ours = 0, t_direct = 0;
    if (r % 2 == 0) {
      t_ours = timed(ours, sync_ours);
      t_direct = timed(direct, sync_direct);
    } else {
      t_direct = timed(direct, sync_direct);
      t_ours = timed(ours, sync_ours);
    }
    ratios.push_back(t_ours / t_direct);
    result.best_ours = std::min(result.best_ours, t_ours);
    result.best_direct = std::min(result.best_direct, t_direct);
  }
  std::sort(ratios.begin(), ratios.end());
  result.median = ratios[ratios.size() / 2];
  return result;
}

}  // namespace capsule::bench
