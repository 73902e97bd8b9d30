// SPDX-License-Identifier: Apache-2.0
// The one matrix product every reference kernel uses (matmul, linear, attention, their adjoints).
// Its result is bitwise the naive left fold `acc = 0; for k: acc = acc + a[i,k]*b[k,j]`: vector
// lanes run across output columns only, each lane doing exactly that scalar multiply-then-add,
// so the vector width (chosen per CPU at run time) never changes a bit.
#pragma once

#include <cstdint>

namespace capsule::reference {

/// c[m×n] = a[m×k]·b[k×n], all contiguous row-major; each element is the fixed-left sum over
/// k = 0..k-1 of the rounded products, starting from +0. k == 0 gives zeros. `c` must not alias
/// `a` or `b`.
void gemm_fixed_left(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k, std::int64_t n);
void gemm_fixed_left(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k, std::int64_t n);

/// dst[cols×rows] = src[rows×cols]ᵀ (both contiguous row-major).
template <class T>
void transpose_into(const T* src, T* dst, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  }
}

}  // namespace capsule::reference
