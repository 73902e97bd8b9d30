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
                                            const double* w, double* dots, std::int64_t dots_stride,
                                            double* abs_sum) {
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
    dots[r * dots_stride] = total;
  }
  if constexpr (M != Magnitude::None) {
    double total = 0.0;
    for (std::int64_t l = 0; l < kL; ++l) total += abs_acc[l];
    *abs_sum = total;
  }
}

template <class T, std::size_t R>
void dot_portable(const T* x, std::int64_t len, const double* y, std::int64_t ys, const double* w, double* dots,
                  std::int64_t dots_stride, double* abs_sum) {
  if (abs_sum == nullptr) dot_body<T, R, Magnitude::None>(x, len, y, ys, w, dots, dots_stride, abs_sum);
  else if (w != nullptr) dot_body<T, R, Magnitude::Weighted>(x, len, y, ys, w, dots, dots_stride, abs_sum);
  else dot_body<T, R, Magnitude::Abs>(x, len, y, ys, w, dots, dots_stride, abs_sum);
}

template <class T>
void dot_rows_portable(const T* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                       std::int64_t ys, std::int64_t rounds, const double* w, double* dots, double* abs_sums) {
  for (std::int64_t i = 0; i < rows; ++i) {
    double* abs_out = abs_sums != nullptr ? abs_sums + i : nullptr;
    if (rounds == 0) dot_portable<T, 0>(x + i * ld, len, y, ys, w, dots, rows, abs_out);
    for_round_pairs(rounds, [&](std::int64_t first, bool two) {
      double* abs_first = first == 0 ? abs_out : nullptr;
      double* dots_out = dots + first * rows + i;
      if (two) dot_portable<T, 2>(x + i * ld, len, y + first * ys, ys, w, dots_out, rows, abs_first);
      else dot_portable<T, 1>(x + i * ld, len, y + first * ys, ys, w, dots_out, rows, abs_first);
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

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2 {
using Vec = __m256d;
constexpr std::int64_t kWidth = 4;
/// Blocks of four rows (then the last rows one at a time): at two rounds and a magnitude, 12
/// accumulators of AVX2's 16 registers.
constexpr std::int64_t kBlockRows = 4;
inline Vec load(const float* x) { return _mm256_cvtps_pd(_mm_loadu_ps(x)); }
inline Vec load(const double* x) { return _mm256_loadu_pd(x); }
inline void store(double* x, Vec v) { _mm256_storeu_pd(x, v); }
inline Vec zero() { return _mm256_setzero_pd(); }
inline Vec splat(double v) { return _mm256_set1_pd(v); }
inline Vec add(Vec a, Vec b) { return _mm256_add_pd(a, b); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_pd(a, b, c); }
inline Vec abs(Vec v) { return _mm256_and_pd(v, _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL))); }
/// (v0 + v1) + (v2 + v3), in hsum_group's order: a row's sums are then the same bits whether its
/// block had one row or several, which the screen's verdicts rely on (the exact path recomputes a
/// row's magnitudes alone and must get the bound the unscreened check gets).
inline double hsum(Vec v) {
  const Vec pairs = _mm256_add_pd(v, _mm256_permute_pd(v, 0b0101));
  return _mm256_cvtsd_f64(pairs) + _mm_cvtsd_f64(_mm256_extractf128_pd(pairs, 1));
}
/// The horizontal sums of v[0..3], as lanes 0..3 of one vector: a transposing tree of 3 adds.
inline Vec hsum_group(const Vec* v) {
  const Vec t01 = _mm256_add_pd(_mm256_unpacklo_pd(v[0], v[1]), _mm256_unpackhi_pd(v[0], v[1]));
  const Vec t23 = _mm256_add_pd(_mm256_unpacklo_pd(v[2], v[3]), _mm256_unpackhi_pd(v[2], v[3]));
  return _mm256_add_pd(_mm256_permute2f128_pd(t01, t23, 0x20), _mm256_permute2f128_pd(t01, t23, 0x31));
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
/// Blocks of eight rows (then the last rows one at a time): at two rounds and a magnitude, 24
/// accumulators of AVX-512's 32 registers. Against four rows, a block's fixed work (zeroing,
/// the horizontal sums, the loop's setup) is spread over twice the elements, and the kernel ran
/// in 0.9 of the time (docs/checkers.md, "Cost of Freivalds' check").
constexpr std::int64_t kBlockRows = 8;
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
/// ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)), in hsum_group's order (see avx2::hsum).
inline double hsum(Vec v) {
  const Vec pairs = _mm512_add_pd(v, _mm512_maskz_permute_pd(0xFF, v, 0x55));
  const Vec quads = _mm512_add_pd(pairs, _mm512_maskz_shuffle_f64x2(0xFF, pairs, pairs, 0xB1));
  return _mm512_cvtsd_f64(quads) + _mm256_cvtsd_f64(_mm512_maskz_extractf64x4_pd(0xF, quads, 1));
}
/// Lane pairs of a and b summed: 128-bit chunk q holds (a[2q] + a[2q+1], b[2q] + b[2q+1]).
inline Vec pair_sums(Vec a, Vec b) {
  return _mm512_add_pd(_mm512_maskz_unpacklo_pd(0xFF, a, b), _mm512_maskz_unpackhi_pd(0xFF, a, b));
}
/// Chunk pairs of a and b summed: chunks (a0 + a1, a2 + a3, b0 + b1, b2 + b3).
inline Vec chunk_sums(Vec a, Vec b) {
  return _mm512_add_pd(_mm512_maskz_shuffle_f64x2(0xFF, a, b, 0x88), _mm512_maskz_shuffle_f64x2(0xFF, a, b, 0xDD));
}
/// The horizontal sums of v[0..7], as lanes 0..7 of one vector: a transposing tree of 7 adds.
inline Vec hsum_group(const Vec* v) {
  return chunk_sums(chunk_sums(pair_sums(v[0], v[1]), pair_sums(v[2], v[3])),
                    chunk_sums(pair_sums(v[4], v[5]), pair_sums(v[6], v[7])));
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
