// SPDX-License-Identifier: Apache-2.0
// The float64 kernels behind Freivalds' check: for each row of a matrix, several dot products
// (one per round) and an absolute-value sum, the matrix read once per two rounds (once in all for
// the registered checkers' two). They run with AVX2 and FMA where the CPU has them
// (chosen once at run time, like the reference gemm), else with the portable loops.
// Any summation order and fused multiply-adds are fine here: the check's tolerance bounds its own
// rounding with γ, which holds for every order.
#pragma once

#include <cstdint>

namespace capsule::checkers {

/// For each of `rows` rows x_i of x (row i starts at x + i·ld):
/// dots[i·rounds + ρ] = Σ_j x_i[j]·y[ρ·y_stride + j] for ρ < rounds, and
/// abs_sums[i] = Σ_j |x_i[j]|·w[j] (w null: Σ_j |x_i[j]|), over j < len. rounds >= 1.
/// Blocks of rows share each load of y and w.
void multi_dot_rows(const float* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                    std::int64_t y_stride, std::int64_t rounds, const double* w, double* dots, double* abs_sums);
void multi_dot_rows(const double* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                    std::int64_t y_stride, std::int64_t rounds, const double* w, double* dots, double* abs_sums);

namespace detail {
/// multi_dot_rows's portable loops, whatever the CPU: the tests compare them with the dispatched
/// kernels and with a plain loop.
void multi_dot_rows_portable(const float* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                             std::int64_t y_stride, std::int64_t rounds, const double* w, double* dots,
                             double* abs_sums);
void multi_dot_rows_portable(const double* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                             std::int64_t y_stride, std::int64_t rounds, const double* w, double* dots,
                             double* abs_sums);
}  // namespace detail

/// s[ρ·len + j] += coeff[ρ]·x[j] for ρ < rounds, and abs_acc[j] += |x[j]|, over j < len.
void multi_axpy(const float* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                double* abs_acc);
void multi_axpy(const double* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                double* abs_acc);

}  // namespace capsule::checkers
