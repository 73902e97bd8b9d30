// SPDX-License-Identifier: Apache-2.0
// Row primitives shared by softmax, log_softmax, hard_masked_softmax, softmax_matmul,
// cross_entropy, distill and attention, so every op that normalises exponentials does it the same
// way: subtract the row maximum (over allowed entries), exponentiate, and divide by a fixed-left
// sum.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace capsule::reference {

/// y = softmax(x) over n contiguous entries.
template <class T>
void softmax_row(const T* x, T* y, std::int64_t n) {
  T row_max = -std::numeric_limits<T>::infinity();
  for (std::int64_t j = 0; j < n; ++j) row_max = x[j] > row_max ? x[j] : row_max;
  T sum = T(0);
  for (std::int64_t j = 0; j < n; ++j) {
    y[j] = std::exp(x[j] - row_max);
    sum = sum + y[j];
  }
  for (std::int64_t j = 0; j < n; ++j) y[j] = y[j] / sum;
}

/// y = log_softmax(x) over n contiguous entries: x - max - log Σ exp(x - max).
template <class T>
void log_softmax_row(const T* x, T* y, std::int64_t n) {
  T row_max = -std::numeric_limits<T>::infinity();
  for (std::int64_t j = 0; j < n; ++j) row_max = x[j] > row_max ? x[j] : row_max;
  T sum = T(0);
  for (std::int64_t j = 0; j < n; ++j) sum = sum + std::exp(x[j] - row_max);
  const T log_sum = std::log(sum);
  for (std::int64_t j = 0; j < n; ++j) y[j] = x[j] - row_max - log_sum;
}

/// TorchLean's boolean hard mask (§10.15): a blocked entry (mask value 0) contributes exactly 0;
/// an allowed one contributes exp(x - max over allowed entries); a fully blocked row is all zeros.
/// A blocked entry is written 0 and never divided, so a NaN or infinite sum over the allowed
/// entries (NaN/±inf among them) cannot reach it: blocked stays exactly 0 whatever the row holds.
template <class T, class MaskAllowed>
void hard_masked_softmax_row(const T* x, MaskAllowed allowed, T* y, std::int64_t n) {
  T row_max = -std::numeric_limits<T>::infinity();
  bool any = false;
  for (std::int64_t j = 0; j < n; ++j) {
    if (!allowed(j)) continue;
    row_max = (!any || x[j] > row_max) ? x[j] : row_max;
    any = true;
  }
  if (!any) {
    for (std::int64_t j = 0; j < n; ++j) y[j] = T(0);
    return;
  }
  T sum = T(0);
  for (std::int64_t j = 0; j < n; ++j) {
    y[j] = allowed(j) ? std::exp(x[j] - row_max) : T(0);
    sum = sum + y[j];
  }
  for (std::int64_t j = 0; j < n; ++j) {
    if (allowed(j)) y[j] = y[j] / sum;
  }
}

}  // namespace capsule::reference
