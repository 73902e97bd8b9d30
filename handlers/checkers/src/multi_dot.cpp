// SPDX-License-Identifier: Apache-2.0
#include "multi_dot.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace capsule::checkers {
namespace {

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

template <class T, std::size_t R, bool Weighted>
[[gnu::always_inline]] inline void dot_body(const T* x, std::int64_t len, const double* y, std::int64_t y_stride,
                                            const double* w, double* dots, double* abs_sum) {
  double acc[R][kLanes] = {};
  double abs_acc[kLanes] = {};
  constexpr std::int64_t kR = static_cast<std::int64_t>(R);
  std::int64_t j = 0;
  for (; j + kL <= len; j += kL) {
    for (std::int64_t l = 0; l < kL; ++l) {
      const double v = static_cast<double>(x[j + l]);
      for (std::int64_t r = 0; r < kR; ++r) acc[r][l] += v * y[r * y_stride + j + l];
      if constexpr (Weighted) {
        abs_acc[l] += std::fabs(v) * w[j + l];
      } else {
        abs_acc[l] += std::fabs(v);
      }
    }
  }
  for (; j < len; ++j) {
    const double v = static_cast<double>(x[j]);
    for (std::int64_t r = 0; r < kR; ++r) acc[r][0] += v * y[r * y_stride + j];
    abs_acc[0] += Weighted ? std::fabs(v) * w[j] : std::fabs(v);
  }
  for (std::int64_t r = 0; r < kR; ++r) {
    double total = 0.0;
    for (std::int64_t l = 0; l < kL; ++l) total += acc[r][l];
    dots[r] = total;
  }
  if (abs_sum != nullptr) {
    double total = 0.0;
    for (std::int64_t l = 0; l < kL; ++l) total += abs_acc[l];
    *abs_sum = total;
  }
}

template <class T, std::size_t R>
void dot_portable(const T* x, std::int64_t len, const double* y, std::int64_t ys, const double* w, double* dots,
                  double* abs_sum) {
  if (w != nullptr) dot_body<T, R, true>(x, len, y, ys, w, dots, abs_sum);
  else dot_body<T, R, false>(x, len, y, ys, w, dots, abs_sum);
}

template <class T>
void dot_rows_portable(const T* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                       std::int64_t ys, std::int64_t rounds, const double* w, double* dots, double* abs_sums) {
  for (std::int64_t i = 0; i < rows; ++i) {
    for_round_pairs(rounds, [&](std::int64_t first, bool two) {
      double* abs_out = first == 0 ? abs_sums + i : nullptr;
      double* dots_out = dots + i * rounds + first;
      if (two) dot_portable<T, 2>(x + i * ld, len, y + first * ys, ys, w, dots_out, abs_out);
      else dot_portable<T, 1>(x + i * ld, len, y + first * ys, ys, w, dots_out, abs_out);
    });
  }
}

template <class T>
void axpy_portable(const T* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                   double* abs_acc) {
  for (std::int64_t j = 0; j < len; ++j) abs_acc[j] += std::fabs(static_cast<double>(x[j]));
  for (std::int64_t r = 0; r < rounds; ++r) {
    const double c = coeff[r];
    double* sr = s + r * len;
    for (std::int64_t j = 0; j < len; ++j) sr[j] += c * static_cast<double>(x[j]);
  }
}

// ---- AVX2 with FMA -----------------------------------------------------------------------------

#if defined(__x86_64__)
// Written with intrinsics: GCC's auto-vectoriser shuffles the partial sums of the portable body
// instead of keeping them in registers. Four doubles per register.
#define CAPSULE_AVX2 __attribute__((target("avx2,fma")))

CAPSULE_AVX2 inline __m256d load4(const float* x) { return _mm256_cvtps_pd(_mm_loadu_ps(x)); }
CAPSULE_AVX2 inline __m256d load4(const double* x) { return _mm256_loadu_pd(x); }

CAPSULE_AVX2 inline double hsum(__m256d v) {
  const __m128d pair = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(pair, _mm_unpackhi_pd(pair, pair)));
}

/// kRows rows of x against the same y (and w) at once: each y and w vector is loaded once per
/// block of rows instead of once per row, which halves the loads per element of x at four rows;
/// one row at a time is bound by those loads. One accumulator per (row, round) and per row's
/// absolute sum: at four rows, twelve independent chains, enough to hide the FMA latency.
template <class T, std::size_t R, std::size_t kRows, bool Weighted>
CAPSULE_AVX2 void dot_rows_avx2(const T* x, std::int64_t ld, std::int64_t len, const double* y, std::int64_t ys,
                                const double* w, double* dots, std::int64_t dots_stride, double* abs_sums) {
  const __m256d magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  __m256d acc[kRows][R];
  __m256d abs_acc[kRows];
  for (std::size_t i = 0; i < kRows; ++i) {
    for (std::size_t r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_pd();
    abs_acc[i] = _mm256_setzero_pd();
  }
  // The rows stream from memory (a product a provider just computed may be out of cache), and
  // several streams at once outrun the hardware prefetcher: ask for each row's line kAhead on.
  constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(T));
  constexpr std::int64_t kAhead = 1024 / static_cast<std::int64_t>(sizeof(T));
  std::int64_t j = 0;
  for (; j + 4 <= len; j += 4) {
    if (j % kLine == 0) {
      for (std::size_t i = 0; i < kRows; ++i) {
        // Computed as an integer: the address may lie past the matrix (a prefetch never faults),
        // and pointer arithmetic past an array's end would be undefined.
        const auto ahead = reinterpret_cast<std::uintptr_t>(x + static_cast<std::int64_t>(i) * ld + j) +
                           static_cast<std::uintptr_t>(kAhead) * sizeof(T);
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
      }
    }
    __m256d yv[R];
    for (std::size_t r = 0; r < R; ++r) yv[r] = _mm256_loadu_pd(y + static_cast<std::int64_t>(r) * ys + j);
    const __m256d wv = Weighted ? _mm256_loadu_pd(w + j) : _mm256_setzero_pd();
    for (std::size_t i = 0; i < kRows; ++i) {
      const __m256d v = load4(x + static_cast<std::int64_t>(i) * ld + j);
      for (std::size_t r = 0; r < R; ++r) acc[i][r] = _mm256_fmadd_pd(v, yv[r], acc[i][r]);
      const __m256d a = _mm256_and_pd(v, magnitude);
      abs_acc[i] = Weighted ? _mm256_fmadd_pd(a, wv, abs_acc[i]) : _mm256_add_pd(a, abs_acc[i]);
    }
  }
  for (std::size_t i = 0; i < kRows; ++i) {
    double tail[R + 1] = {};
    const T* row = x + static_cast<std::int64_t>(i) * ld;
    for (std::int64_t t = j; t < len; ++t) {
      const double v = static_cast<double>(row[t]);
      for (std::size_t r = 0; r < R; ++r) tail[r] += v * y[static_cast<std::int64_t>(r) * ys + t];
      tail[R] += Weighted ? std::fabs(v) * w[t] : std::fabs(v);
    }
    for (std::size_t r = 0; r < R; ++r) {
      dots[static_cast<std::int64_t>(i) * dots_stride + static_cast<std::int64_t>(r)] = hsum(acc[i][r]) + tail[r];
    }
    if (abs_sums != nullptr) abs_sums[i] = hsum(abs_acc[i]) + tail[R];
  }
}

template <class T, std::size_t R, std::size_t kRows>
CAPSULE_AVX2 void dot_block_avx2(const T* x, std::int64_t ld, std::int64_t len, const double* y, std::int64_t ys,
                                 const double* w, double* dots, std::int64_t dots_stride, double* abs_sums) {
  if (w != nullptr) dot_rows_avx2<T, R, kRows, true>(x, ld, len, y, ys, w, dots, dots_stride, abs_sums);
  else dot_rows_avx2<T, R, kRows, false>(x, ld, len, y, ys, w, dots, dots_stride, abs_sums);
}

/// Blocks of four rows, then the last rows one at a time.
constexpr std::int64_t kBlockRows = 4;

template <class T>
CAPSULE_AVX2 void dot_rows_avx2_all(const T* x, std::int64_t rows, std::int64_t ld, std::int64_t len,
                                    const double* y, std::int64_t ys, std::int64_t rounds, const double* w,
                                    double* dots, double* abs_sums) {
  for (std::int64_t i = 0; i < rows;) {
    const bool block = rows - i >= kBlockRows;
    for_round_pairs(rounds, [&](std::int64_t first, bool two) {
      const T* xi = x + i * ld;
      const double* yr = y + first * ys;
      double* dots_out = dots + i * rounds + first;
      double* abs_out = first == 0 ? abs_sums + i : nullptr;
      if (block && two) dot_block_avx2<T, 2, kBlockRows>(xi, ld, len, yr, ys, w, dots_out, rounds, abs_out);
      else if (block) dot_block_avx2<T, 1, kBlockRows>(xi, ld, len, yr, ys, w, dots_out, rounds, abs_out);
      else if (two) dot_block_avx2<T, 2, 1>(xi, ld, len, yr, ys, w, dots_out, rounds, abs_out);
      else dot_block_avx2<T, 1, 1>(xi, ld, len, yr, ys, w, dots_out, rounds, abs_out);
    });
    i += block ? kBlockRows : 1;
  }
}

template <class T>
CAPSULE_AVX2 void axpy_avx2(const T* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                            double* abs_acc) {
  const __m256d magnitude = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  std::int64_t j = 0;
  for (; j + 4 <= len; j += 4) {
    const __m256d v = load4(x + j);
    _mm256_storeu_pd(abs_acc + j, _mm256_add_pd(_mm256_loadu_pd(abs_acc + j), _mm256_and_pd(v, magnitude)));
    for (std::int64_t r = 0; r < rounds; ++r) {
      double* sr = s + r * len + j;
      _mm256_storeu_pd(sr, _mm256_fmadd_pd(_mm256_set1_pd(coeff[r]), v, _mm256_loadu_pd(sr)));
    }
  }
  for (; j < len; ++j) {
    const double v = static_cast<double>(x[j]);
    abs_acc[j] += std::fabs(v);
    for (std::int64_t r = 0; r < rounds; ++r) s[r * len + j] += coeff[r] * v;
  }
}
#undef CAPSULE_AVX2

// ---- AVX-512F ----------------------------------------------------------------------------------

// The AVX2 kernels above at eight doubles per register. The check is bound by its float64
// multiply-adds (eight per element triple of A, B and C at two rounds, at the AVX2 kernels' peak
// of eight per cycle), so a core with full-width AVX-512 units (Zen 5, Intel server cores) runs
// it in about half the time; a core that splits a 512-bit operation in two (Zen 4) runs it as
// fast as AVX2. The same accumulation order per lane group, so the same bounds hold (the
// residual bound is over the real sums, not over one summation order).
#define CAPSULE_AVX512 __attribute__((target("avx512f")))

// The zero-masked forms of the conversion and the extraction: GCC 12's unmasked ones start from an
// undefined register and trip -Wuninitialized where they are inlined.
CAPSULE_AVX512 inline __m512d load8(const float* x) { return _mm512_maskz_cvtps_pd(0xFF, _mm256_loadu_ps(x)); }
CAPSULE_AVX512 inline __m512d load8(const double* x) { return _mm512_loadu_pd(x); }
CAPSULE_AVX512 inline double hsum8(__m512d v) {
  const __m256d quad = _mm256_add_pd(_mm512_maskz_extractf64x4_pd(0xF, v, 0), _mm512_maskz_extractf64x4_pd(0xF, v, 1));
  const __m128d pair = _mm_add_pd(_mm256_castpd256_pd128(quad), _mm256_extractf128_pd(quad, 1));
  return _mm_cvtsd_f64(_mm_add_sd(pair, _mm_unpackhi_pd(pair, pair)));
}
CAPSULE_AVX512 inline __m512d abs8(__m512d v) {
  return _mm512_castsi512_pd(_mm512_and_epi64(_mm512_castpd_si512(v), _mm512_set1_epi64(0x7fffffffffffffffLL)));
}

template <class T, std::size_t R, std::size_t kRows, bool Weighted>
CAPSULE_AVX512 void dot_rows_avx512(const T* x, std::int64_t ld, std::int64_t len, const double* y, std::int64_t ys,
                                    const double* w, double* dots, std::int64_t dots_stride, double* abs_sums) {
  __m512d acc[kRows][R];
  __m512d abs_acc[kRows];
  for (std::size_t i = 0; i < kRows; ++i) {
    for (std::size_t r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_pd();
    abs_acc[i] = _mm512_setzero_pd();
  }
  constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(T));
  constexpr std::int64_t kAhead = 1024 / static_cast<std::int64_t>(sizeof(T));
  std::int64_t j = 0;
  for (; j + 8 <= len; j += 8) {
    if (j % kLine == 0) {
      for (std::size_t i = 0; i < kRows; ++i) {
        // As in dot_rows_avx2: an integer address, which may lie past the matrix.
        const auto ahead = reinterpret_cast<std::uintptr_t>(x + static_cast<std::int64_t>(i) * ld + j) +
                           static_cast<std::uintptr_t>(kAhead) * sizeof(T);
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
      }
    }
    __m512d yv[R];
    for (std::size_t r = 0; r < R; ++r) yv[r] = _mm512_loadu_pd(y + static_cast<std::int64_t>(r) * ys + j);
    const __m512d wv = Weighted ? _mm512_loadu_pd(w + j) : _mm512_setzero_pd();
    for (std::size_t i = 0; i < kRows; ++i) {
      const __m512d v = load8(x + static_cast<std::int64_t>(i) * ld + j);
      for (std::size_t r = 0; r < R; ++r) acc[i][r] = _mm512_fmadd_pd(v, yv[r], acc[i][r]);
      abs_acc[i] = Weighted ? _mm512_fmadd_pd(abs8(v), wv, abs_acc[i]) : _mm512_add_pd(abs8(v), abs_acc[i]);
    }
  }
  for (std::size_t i = 0; i < kRows; ++i) {
    double tail[R + 1] = {};
    const T* row = x + static_cast<std::int64_t>(i) * ld;
    for (std::int64_t t = j; t < len; ++t) {
      const double v = static_cast<double>(row[t]);
      for (std::size_t r = 0; r < R; ++r) tail[r] += v * y[static_cast<std::int64_t>(r) * ys + t];
      tail[R] += Weighted ? std::fabs(v) * w[t] : std::fabs(v);
    }
    for (std::size_t r = 0; r < R; ++r) {
      dots[static_cast<std::int64_t>(i) * dots_stride + static_cast<std::int64_t>(r)] =
          hsum8(acc[i][r]) + tail[r];
    }
    if (abs_sums != nullptr) abs_sums[i] = hsum8(abs_acc[i]) + tail[R];
  }
}

template <class T, std::size_t R, std::size_t kRows>
CAPSULE_AVX512 void dot_block_avx512(const T* x, std::int64_t ld, std::int64_t len, const double* y,
                                     std::int64_t ys, const double* w, double* dots, std::int64_t dots_stride,
                                     double* abs_sums) {
  if (w != nullptr) dot_rows_avx512<T, R, kRows, true>(x, ld, len, y, ys, w, dots, dots_stride, abs_sums);
  else dot_rows_avx512<T, R, kRows, false>(x, ld, len, y, ys, w, dots, dots_stride, abs_sums);
}

template <class T>
CAPSULE_AVX512 void dot_rows_avx512_all(const T* x, std::int64_t rows, std::int64_t ld, std::int64_t len,
                                        const double* y, std::int64_t ys, std::int64_t rounds, const double* w,
                                        double* dots, double* abs_sums) {
  for (std::int64_t i = 0; i < rows;) {
    const bool block = rows - i >= kBlockRows;
    for_round_pairs(rounds, [&](std::int64_t first, bool two) {
      const T* xi = x + i * ld;
      const double* yr = y + first * ys;
      double* dots_out = dots + i * rounds + first;
      double* abs_out = first == 0 ? abs_sums + i : nullptr;
      if (block && two) dot_block_avx512<T, 2, kBlockRows>(xi, ld, len, yr, ys, w, dots_out, rounds, abs_out);
      else if (block) dot_block_avx512<T, 1, kBlockRows>(xi, ld, len, yr, ys, w, dots_out, rounds, abs_out);
      else if (two) dot_block_avx512<T, 2, 1>(xi, ld, len, yr, ys, w, dots_out, rounds, abs_out);
      else dot_block_avx512<T, 1, 1>(xi, ld, len, yr, ys, w, dots_out, rounds, abs_out);
    });
    i += block ? kBlockRows : 1;
  }
}

template <class T>
CAPSULE_AVX512 void axpy_avx512(const T* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                                double* abs_acc) {
  std::int64_t j = 0;
  for (; j + 8 <= len; j += 8) {
    const __m512d v = load8(x + j);
    _mm512_storeu_pd(abs_acc + j, _mm512_add_pd(_mm512_loadu_pd(abs_acc + j), abs8(v)));
    for (std::int64_t r = 0; r < rounds; ++r) {
      double* sr = s + r * len + j;
      _mm512_storeu_pd(sr, _mm512_fmadd_pd(_mm512_set1_pd(coeff[r]), v, _mm512_loadu_pd(sr)));
    }
  }
  for (; j < len; ++j) {
    const double v = static_cast<double>(x[j]);
    abs_acc[j] += std::fabs(v);
    for (std::int64_t r = 0; r < rounds; ++r) s[r * len + j] += coeff[r] * v;
  }
}
#undef CAPSULE_AVX512
#endif

// ---- dispatch ----------------------------------------------------------------------------------

enum class Isa { Portable, Avx2, Avx512 };

Isa isa() {
  static const Isa chosen = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
    return Isa::Portable;
  }();
  return chosen;
}

template <class T>
void dispatch_dot_rows(const T* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                       std::int64_t ys, std::int64_t rounds, const double* w, double* dots, double* abs_sums) {
  switch (isa()) {
#if defined(__x86_64__)
    case Isa::Avx2: return dot_rows_avx2_all(x, rows, ld, len, y, ys, rounds, w, dots, abs_sums);
    case Isa::Avx512: return dot_rows_avx512_all(x, rows, ld, len, y, ys, rounds, w, dots, abs_sums);
#endif
    default: return dot_rows_portable(x, rows, ld, len, y, ys, rounds, w, dots, abs_sums);
  }
}

template <class T>
void dispatch_axpy(const T* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s, double* abs_acc) {
  switch (isa()) {
#if defined(__x86_64__)
    case Isa::Avx2: return axpy_avx2(x, len, coeff, rounds, s, abs_acc);
    case Isa::Avx512: return axpy_avx512(x, len, coeff, rounds, s, abs_acc);
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
#if defined(__x86_64__)
  __builtin_cpu_init();
#endif
  switch (kernel) {
    case MultiDotKernel::Portable:
      dot_rows_portable(x, rows, ld, len, y, y_stride, rounds, w, dots, abs_sums);
      return true;
#if defined(__x86_64__)
    case MultiDotKernel::Avx2:
      if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return false;
      dot_rows_avx2_all(x, rows, ld, len, y, y_stride, rounds, w, dots, abs_sums);
      return true;
    case MultiDotKernel::Avx512:
      if (!__builtin_cpu_supports("avx512f")) return false;
      dot_rows_avx512_all(x, rows, ld, len, y, y_stride, rounds, w, dots, abs_sums);
      return true;
#endif
    default:
      return false;
  }
}
}  // namespace detail

}  // namespace capsule::checkers
