// SPDX-License-Identifier: Apache-2.0
// What capsule_bench_torch's comparisons share: failing with a message, the timing harnesses
// (blocks of calls, paired single calls, evicted caches), the verdicts and their printing, and the
// fixtures (the shipped catalogs and handlers, sessions, random tensors). Header-only: every
// function is inline or a template, so torch_compare.cpp and libtorch_overhead.cpp share one
// fixture (a function-local static of an inline function is one object in the program).
#pragma once

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <iostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/handlers/reference.hpp"
#include "capsule/load.hpp"
#if defined(CAPSULE_HAVE_LIBTORCH)
#include "capsule/handlers/libtorch.hpp"
#endif
#include "capsule/runtime/session.hpp"
#include "median_interval.hpp"
#include "rng.hpp"

#ifndef CAPSULE_SOURCE_DIR
#error "CAPSULE_SOURCE_DIR must name the source tree (catalogs/ and profiles/)"
#endif

namespace capsule::torch_bench {

namespace fs = std::filesystem;

constexpr int kRuns = 11;  // interleaved timed pairs per comparison; medians reported

[[noreturn]] inline void die(const std::string& message) {
  std::cerr << "capsule_bench_torch: " << message << "\n";
  std::exit(2);
}

template <class T>
T expect(RuntimeResult<T> result, std::string_view what) {
  if (!result) die(std::string(what) + ": " + result.error().message);
  return std::move(result).value();
}

// ---- timing -------------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

/// Nanoseconds per iteration of `iters` calls of body().
template <class F>
double ns_per_iter(std::int64_t iters, F&& body) {
  const auto start = Clock::now();
  for (std::int64_t i = 0; i < iters; ++i) body();
  const auto stop = Clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count() / static_cast<double>(iters);
}

inline double median(std::vector<double> values) { return bench::median_interval(values).median; }

struct Timing {
  double ours = 0;    // median ns per iteration
  double theirs = 0;  // median ns per iteration
  double ours_min = 0;
  double theirs_min = 0;
  /// Median over the pairs of (ours − theirs): a pair's two blocks run back to back, so a drift
  /// of the machine's speed between pairs cancels, which the difference of the medians keeps.
  double paired_overhead = 0;
};

/// No guard around a timed block.
struct Unscoped {};

/// One warm-up loop of each side, then kRuns interleaved timed pairs. Each timed block of
/// theirs runs inside one TheirsScope (a guard a LibTorch user sets once around a workload, such
/// as c10::InferenceMode), so the guard's own cost is not charged per call.
template <class TheirsScope = Unscoped, class Ours, class Theirs>
Timing compare(std::int64_t iters, Ours&& ours, Theirs&& theirs, int runs = kRuns) {
  auto time_theirs = [&](std::int64_t n) {
    [[maybe_unused]] const TheirsScope scope;
    return ns_per_iter(n, theirs);
  };
  ns_per_iter(std::max<std::int64_t>(iters / 4, 1), ours);
  time_theirs(std::max<std::int64_t>(iters / 4, 1));
  std::vector<double> a, b;
  std::vector<double> differences;
  for (int run = 0; run < runs; ++run) {
    if (run % 2 == 0) {
      a.push_back(ns_per_iter(iters, ours));
      b.push_back(time_theirs(iters));
    } else {
      b.push_back(time_theirs(iters));
      a.push_back(ns_per_iter(iters, ours));
    }
    differences.push_back(a.back() - b.back());
  }
  return Timing{median(a), median(b), *std::min_element(a.begin(), a.end()), *std::min_element(b.begin(), b.end()),
                median(differences)};
}

/// One call per side per pair, each timed alone, the order alternating from pair to pair; judged on
/// the median of the per-pair differences. For a call of tens of µs whose speed drifts by more
/// than a µs between blocks of calls (the large conv2d), block timing cannot resolve a few hundred
/// ns of overhead; a pair of single calls run back to back sees the same machine state on both
/// sides, and the clock's own cost (one steady_clock read per call side) is the same on both and
/// cancels in the difference. When both sides' times differ only by a shift δ plus noise of the
/// same distribution, each difference is δ plus a symmetric error, so its median estimates δ.
struct PairedCalls {
  double ours = 0;    // median ns per call
  double theirs = 0;  // median ns per call
  double ours_min = 0;
  double theirs_min = 0;
  double overhead = 0;  // median of (ours − theirs) over the pairs
  double overhead_low = 0;  // its 95% confidence interval (median_interval.hpp)
  double overhead_high = 0;
  std::int64_t pairs = 0;
};

/// Calls body() once and returns its duration in ns. The guard, if any, is made before the clock
/// starts, so its cost is not charged (a LibTorch user sets InferenceMode once around a workload).
template <class Scope, class F>
double time_one_call(F& body) {
  [[maybe_unused]] const Scope scope;
  const auto start = Clock::now();
  body();
  const auto stop = Clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count();
}

/// Made before a timed call (time_one_call's Scope): walks a buffer four times the size of this
/// CPU's L2 cache (4 MiB, more than the 1 MiB of a Zen 4 core), so the call starts with L1d and
/// L2 holding none of its data and, L2 being unified, none of its code beyond what L1i keeps. A
/// heavy call (the large conv2d's im2col buffer and output) leaves its successor in about that
/// state; this shows what the same fixed work costs there when the op itself is small.
struct EvictedCaches {
  EvictedCaches() {
    static std::vector<unsigned char> walk(std::size_t{4} << 20, 1);
    unsigned sum = 0;
    for (std::size_t i = 0; i < walk.size(); i += 64) sum += walk[i]++;
    benchmark::DoNotOptimize(sum);
  }
};

template <class TheirsScope = Unscoped, class OursScope = Unscoped, class Ours, class Theirs>
PairedCalls compare_calls(std::int64_t pairs, Ours&& ours, Theirs&& theirs) {
  for (std::int64_t i = 0; i < std::max<std::int64_t>(pairs / 10, 1); ++i) {
    time_one_call<OursScope>(ours);
    time_one_call<TheirsScope>(theirs);
  }
  std::vector<double> a(static_cast<std::size_t>(pairs));
  std::vector<double> b(a.size());
  std::vector<double> differences(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (i % 2 == 0) {
      a[i] = time_one_call<OursScope>(ours);
      b[i] = time_one_call<TheirsScope>(theirs);
    } else {
      b[i] = time_one_call<TheirsScope>(theirs);
      a[i] = time_one_call<OursScope>(ours);
    }
    differences[i] = a[i] - b[i];
  }
  PairedCalls result;
  result.pairs = pairs;
  result.ours = median(a);
  result.theirs = median(b);
  result.ours_min = *std::min_element(a.begin(), a.end());
  result.theirs_min = *std::min_element(b.begin(), b.end());
  const bench::MedianInterval overhead = bench::median_interval(differences);
  result.overhead = overhead.median;
  result.overhead_low = overhead.low;
  result.overhead_high = overhead.high;
  return result;
}

inline std::string duration(double ns) {
  char buffer[32];
  if (ns < 1e3) {
    std::snprintf(buffer, sizeof buffer, "%.1f ns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buffer, sizeof buffer, "%.2f us", ns / 1e3);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.3f ms", ns / 1e6);
  }
  return buffer;
}

struct Verdicts {
  int failed = 0;
  const char* mark(bool pass) {
    if (!pass) ++failed;
    return pass ? "PASS" : "FAIL";
  }
};

inline void print_time_ratio(Verdicts& verdicts, const char* what, const char* unit, const Timing& t, double target,
                      std::int64_t iters) {
  const double ratio = t.ours / t.theirs;
  std::printf("%s: ours %s/%s, LibTorch %s/%s: ratio ours/LibTorch = %.3fx (target <= %.2fx): %s  "
              "[median of %d runs x %lld; best ours %s, best LibTorch %s]\n",
              what, duration(t.ours).c_str(), unit, duration(t.theirs).c_str(), unit, ratio, target,
              verdicts.mark(ratio <= target), kRuns, static_cast<long long>(iters), duration(t.ours_min).c_str(),
              duration(t.theirs_min).c_str());
}

// ---- fixtures -----------------------------------------------------------------------------------

struct Fixture {
  Workspace workspace;
  HandlerRegistry handlers;
};

inline const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture out;
    const fs::path source = CAPSULE_SOURCE_DIR;
    out.workspace = load_workspace({source / "catalogs"}, {source / "profiles"});
    if (has_errors(out.workspace.diagnostics)) die("shipped catalogs failed to load:\n" + render(out.workspace.diagnostics));
    expect(register_reference_handlers(out.handlers), "registering the reference handlers");
#if defined(CAPSULE_HAVE_LIBTORCH)
    expect(register_libtorch_handlers(out.handlers), "registering the LibTorch handlers");
#endif
    return out;
  }();
  return f;
}

inline Session open_session(bool gradients, std::vector<Op> preselect, std::string profile = "checked_cpu") {
  SessionOptions options;
  options.profile = profile;
  options.gradients = gradients;
  options.preselect = std::move(preselect);
  return expect(Session::open(fixture().workspace, fixture().handlers, std::move(options)), "opening " + profile);
}

/// `op -> capsule (handler)` for every capsule a session ran.
inline std::string capsules_line(const Session& session) {
  std::string out;
  for (const CapsuleUse& use : session.capsules_used()) {
    if (!out.empty()) out += ", ";
    out += std::string(to_string(use.op)) + " -> " + use.capsule->name;
  }
  return out;
}

inline Tensor random_tensor(std::span<const std::int64_t> dims, std::uint64_t seed) {
  const Shape shape = expect(Shape::make(dims), "shape");
  bench::Rng rng{seed};
  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  // Uniform in [-1, 1) on a 2^-24 grid: exactly representable in float32.
  for (double& v : values) v = static_cast<double>(rng.next() >> 40) / 8388608.0 - 1.0;
  return expect(Tensor::from_values(shape, DType::F32, values), "tensor");
}

inline Tensor random_tensor(std::initializer_list<std::int64_t> dims, std::uint64_t seed) {
  return random_tensor(std::span<const std::int64_t>(dims.begin(), dims.size()), seed);
}

inline at::Tensor to_torch(const Tensor& t) {
  std::vector<std::int64_t> dims = t.shape().to_vector();
  return torch::from_blob(const_cast<float*>(t.data<float>()), dims, torch::kFloat32).clone();
}

}  // namespace capsule::torch_bench
