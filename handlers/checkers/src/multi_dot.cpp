// SPDX-License-Identifier: Apache-2.0
#include "multi_dot.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace capsule::checkers {
namespace {

/// Which magnitude a row kernel accumulates beside its dot products: none, Σ|x_j|, or Σ|x_j|·w_j.
enum class Magnitude { None, Abs, Weighted };

/// Calls chunk(first, two) for the rounds in chunks of two, `two` saying whether the chunk holds
/// two rounds or the last one: one pass over the rows per chunk, the absolute sums riding on the
/// first (first == 0).
template <class Chunk>
[[gnu::always_inline]] inline void for_round_pairs(std::int64_t rounds, Chunk&& chunk) {
  for (std::int64_t first = 0; first < rounds; first += 2) chunk(first, rounds - first >= 2);
}

// ---- portable ----------------------------------------------------------------------------------

// Eight independent partial sums per round: enough to fill two AVX2 or one AVX-512 register of
// doubles and to hide the adder's latency, if the compiler vectorises them.
constexpr std::size_t kLanes = 8;
constexpr std::int64_t kL = static_cast<std::int64_t>(kLanes);

template <class T, std::size_t R, Magnitude M>
[[gnu::always_inline]] inline void dot_body(const T* x, std::int64_t len, const double* y, std::int64_t y_stride,
                                            const double* w, double* dots, double* abs_sum) {
  double acc[R + 1][kLanes] = {};  // one spare row, so that R = 0 (magnitude only) is a valid array
  double abs_acc[kLanes] = {};
  constexpr std::int64_t kR = static_cast<std::int64_t>(R);
  std::int64_t j = 0;
  for (; j + kL <= len; j += kL) {
    for (std::int64_t l = 0; l < kL; ++l) {
      const double v = static_cast<double>(x[j + l]);
      for (std::int64_t r = 0; r < kR; ++r) acc[r][l] += v * y[r * y_stride + j + l];
      if constexpr (M == Magnitude::Weighted) abs_acc[l] += std::fabs(v) * w[j + l];
      if constexpr (M == Magnitude::Abs) abs_acc[l] += std::fabs(v);
    }
  }
  for (; j < len; ++j) {
    const double v = static_cast<double>(x[j]);
    for (std::int64_t r = 0; r < kR; ++r) acc[r][0] += v * y[r * y_stride + j];
    if constexpr (M == Magnitude::Weighted) abs_acc[0] += std::fabs(v) * w[j];
    if constexpr (M == Magnitude::Abs) abs_acc[0] += std::fabs(v);
  }
  for (std::int64_t r = 0; r < kR; ++r) {
    double total = 0.0;
    for (std::int64_t l = 0; l < kL; ++l) total += acc[r][l];
    dots[r] = total;
  }
  if constexpr (M != Magnitude::None) {
    double total = 0.0;
    for (std::int64_t l = 0; l < kL; ++l) total += abs_acc[l];
    *abs_sum = total;
  }
}

template <class T, std::size_t R>
void dot_portable(const T* x, std::int64_t len, const double* y, std::int64_t ys, const double* w, double* dots,
                  double* abs_sum) {
  if (abs_sum == nullptr) dot_body<T, R, Magnitude::None>(x, len, y, ys, w, dots, abs_sum);
  else if (w != nullptr) dot_body<T, R, Magnitude::Weighted>(x, len, y, ys, w, dots, abs_sum);
  else dot_body<T, R, Magnitude::Abs>(x, len, y, ys, w, dots, abs_sum);
}

template <class T>
void dot_rows_portable(const T* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                       std::int64_t ys, std::int64_t rounds, const double* w, double* dots, double* abs_sums) {
  for (std::int64_t i = 0; i < rows; ++i) {
    double* abs_out = abs_sums != nullptr ? abs_sums + i : nullptr;
    if (rounds == 0) dot_portable<T, 0>(x + i * ld, len, y, ys, w, dots, abs_out);
    for_round_pairs(rounds, [&](std::int64_t first, bool two) {
      double* abs_first = first == 0 ? abs_out : nullptr;
      double* dots_out = dots + i * rounds + first;
      if (two) dot_portable<T, 2>(x + i * ld, len, y + first * ys, ys, w, dots_out, abs_first);
      else dot_portable<T, 1>(x + i * ld, len, y + first * ys, ys, w, dots_out, abs_first);
    });
  }
}

template <class T>
void axpy_portable(const T* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                   double* abs_acc) {
  if (abs_acc != nullptr) {
    for (std::int64_t j = 0; j < len; ++j) abs_acc[j] += std::fabs(static_cast<double>(x[j]));
  }
  for (std::int64_t r = 0; r < rounds; ++r) {
    const double c = coeff[r];
    double* sr = s + r * len;
    for (std::int64_t j = 0; j < len; ++j) sr[j] += c * static_cast<double>(x[j]);
  }
}

// ---- SIMD kernels: AVX2 with FMA, and AVX-512F ---------------------------------------------------

#if defined(__x86_64__)
// Written with intrinsics: GCC's auto-vectoriser shuffles the partial sums of the portable body
// instead of keeping them in registers. One body (multi_dot_simd.inc) is compiled twice, under
// each instruction set's target pragma (GCC's; clang's attribute pragma, since clang ignores
// GCC's), against that set's few vector operations below: four doubles per register with AVX2,
// eight with AVX-512F. The check is bound by its float64
// multiply-adds (eight per element triple of A, B and C at two rounds; the AVX2 kernels run near
// their peak of eight per cycle), so a core with full-width 512-bit units (Zen 5, Intel server
// cores) runs the AVX-512 kernels in about half the time, and one that splits a 512-bit operation
// in two (Zen 4) as fast as the AVX2 ones.

/// Blocks of four rows, then the last rows one at a time.
constexpr std::int64_t kBlockRows = 4;

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2 {
using Vec = __m256d;
constexpr std::int64_t kWidth = 4;
inline Vec load(const float* x) { return _mm256_cvtps_pd(_mm_loadu_ps(x)); }
inline Vec load(const double* x) { return _mm256_loadu_pd(x); }
inline void store(double* x, Vec v) { _mm256_storeu_pd(x, v); }
inline Vec zero() { return _mm256_setzero_pd(); }
inline Vec splat(double v) { return _mm256_set1_pd(v); }
inline Vec add(Vec a, Vec b) { return _mm256_add_pd(a, b); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_pd(a, b, c); }
inline Vec abs(Vec v) { return _mm256_and_pd(v, _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL))); }
inline double hsum(Vec v) {
  const __m128d pair = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(pair, _mm_unpackhi_pd(pair, pair)));
}
#include "multi_dot_simd.inc"
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif
namespace avx512 {
using Vec = __m512d;
constexpr std::int64_t kWidth = 8;
// The zero-masked forms of the conversion and the extractions: GCC 12's unmasked ones start from
// an undefined register and trip -Wuninitialized where they are inlined.
inline Vec load(const float* x) { return _mm512_maskz_cvtps_pd(0xFF, _mm256_loadu_ps(x)); }
inline Vec load(const double* x) { return _mm512_loadu_pd(x); }
inline void store(double* x, Vec v) { _mm512_storeu_pd(x, v); }
inline Vec zero() { return _mm512_setzero_pd(); }
inline Vec splat(double v) { return _mm512_set1_pd(v); }
inline Vec add(Vec a, Vec b) { return _mm512_add_pd(a, b); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_pd(a, b, c); }
inline Vec abs(Vec v) {
  return _mm512_castsi512_pd(_mm512_and_epi64(_mm512_castpd_si512(v), _mm512_set1_epi64(0x7fffffffffffffffLL)));
}
inline double hsum(Vec v) {
  const __m256d quad = _mm256_add_pd(_mm512_maskz_extractf64x4_pd(0xF, v, 0), _mm512_maskz_extractf64x4_pd(0xF, v, 1));
  const __m128d pair = _mm_add_pd(_mm256_castpd256_pd128(quad), _mm256_extractf128_pd(quad, 1));
  return _mm_cvtsd_f64(_mm_add_sd(pair, _mm_unpackhi_pd(pair, pair)));
}
#include "multi_dot_simd.inc"
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

// ---- dispatch ----------------------------------------------------------------------------------

using detail::MultiDotKernel;

/// Whether this CPU runs `kernel`'s instructions.
bool cpu_runs(MultiDotKernel kernel) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (kernel) {
    case MultiDotKernel::Avx512: return __builtin_cpu_supports("avx512f");
    case MultiDotKernel::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default: return true;
  }
#else
  return kernel == MultiDotKernel::Portable;
#endif
}

/// The widest kernel this CPU runs, chosen once.
MultiDotKernel widest() {
  static const MultiDotKernel chosen = [] {
    for (MultiDotKernel k : {MultiDotKernel::Avx512, MultiDotKernel::Avx2}) {
      if (cpu_runs(k)) return k;
    }
    return MultiDotKernel::Portable;
  }();
  return chosen;
}

template <class T>
void dot_rows_on(MultiDotKernel kernel, const T* x, std::int64_t rows, std::int64_t ld, std::int64_t len,
                 const double* y, std::int64_t ys, std::int64_t rounds, const double* w, double* dots,
                 double* abs_sums) {
  switch (kernel) {
#if defined(__x86_64__)
    case MultiDotKernel::Avx2: return avx2::dot_rows_all(x, rows, ld, len, y, ys, rounds, w, dots, abs_sums);
    case MultiDotKernel::Avx512: return avx512::dot_rows_all(x, rows, ld, len, y, ys, rounds, w, dots, abs_sums);
#endif
    default: return dot_rows_portable(x, rows, ld, len, y, ys, rounds, w, dots, abs_sums);
  }
}

template <class T>
void dispatch_dot_rows(const T* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                       std::int64_t ys, std::int64_t rounds, const double* w, double* dots, double* abs_sums) {
  dot_rows_on(widest(), x, rows, ld, len, y, ys, rounds, w, dots, abs_sums);
}

template <class T>
void dispatch_axpy(const T* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s, double* abs_acc) {
  switch (widest()) {
#if defined(__x86_64__)
    case MultiDotKernel::Avx2: return avx2::axpy(x, len, coeff, rounds, s, abs_acc);
    case MultiDotKernel::Avx512: return avx512::axpy(x, len, coeff, rounds, s, abs_acc);
#endif
    default: return axpy_portable(x, len, coeff, rounds, s, abs_acc);
  }
}

}  // namespace

void multi_dot_rows(const float* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                    std::int64_t y_stride, std::int64_t rounds, const double* w, double* dots, double* abs_sums) {
  dispatch_dot_rows(x, rows, ld, len, y, y_stride, rounds, w, dots, abs_sums);
}
void multi_dot_rows(const double* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                    std::int64_t y_stride, std::int64_t rounds, const double* w, double* dots, double* abs_sums) {
  dispatch_dot_rows(x, rows, ld, len, y, y_stride, rounds, w, dots, abs_sums);
}
void multi_axpy(const float* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                double* abs_acc) {
  dispatch_axpy(x, len, coeff, rounds, s, abs_acc);
}
void multi_axpy(const double* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                double* abs_acc) {
  dispatch_axpy(x, len, coeff, rounds, s, abs_acc);
}

namespace detail {
bool multi_dot_rows_with(MultiDotKernel kernel, const float* x, std::int64_t rows, std::int64_t ld, std::int64_t len,
                         const double* y, std::int64_t y_stride, std::int64_t rounds, const double* w, double* dots,
                         double* abs_sums) {
  if (!cpu_runs(kernel)) return false;
  dot_rows_on(kernel, x, rows, ld, len, y, y_stride, rounds, w, dots, abs_sums);
  return true;
}
}  // namespace detail

}  // namespace capsule::checkers
