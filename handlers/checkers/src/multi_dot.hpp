// SPDX-License-Identifier: Apache-2.0
// The float64 kernels behind Freivalds' check: for each row of a matrix, several dot products
// (one per round) and an absolute-value sum, the matrix read once per two rounds (once in all for
// the registered checkers' two). They run with AVX-512F, else AVX2 and FMA, where the CPU has
// them (chosen once at run time, like the reference gemm), else with the portable loops.
// Any summation order and fused multiply-adds are fine here: the check's tolerance bounds its own
// rounding with γ, which holds for every order.
#pragma once

#include <cstdint>

namespace capsule::checkers {

/// For each of `rows` rows x_i of x (row i starts at x + i·ld):
/// dots[ρ·rows + i] = Σ_j x_i[j]·y[ρ·y_stride + j] for ρ < rounds (round-major: each round's dots
/// are one contiguous vector, as B·r_ρ is for the next pass), and, unless abs_sums is
/// null, abs_sums[i] = Σ_j |x_i[j]|·w[j] (w null: Σ_j |x_i[j]|), over j < len. rounds >= 0 (0:
/// the magnitudes alone; dots and y are then not read). A null abs_sums skips the magnitude's
/// work, not just its store. Blocks of rows share each load of y and w.
void multi_dot_rows(const float* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                    std::int64_t y_stride, std::int64_t rounds, const double* w, double* dots, double* abs_sums);
void multi_dot_rows(const double* x, std::int64_t rows, std::int64_t ld, std::int64_t len, const double* y,
                    std::int64_t y_stride, std::int64_t rounds, const double* w, double* dots, double* abs_sums);

namespace detail {
/// The kernels multi_dot_rows chooses from (the widest the CPU runs).
enum class MultiDotKernel { Portable, Avx2, Avx512 };
/// multi_dot_rows with the given kernel, whatever the dispatch would choose: the tests compare
/// each kernel the CPU runs with a plain loop. Returns false, computing nothing, when the CPU (or
/// the build's architecture) lacks the kernel's instructions.
bool multi_dot_rows_with(MultiDotKernel kernel, const float* x, std::int64_t rows, std::int64_t ld, std::int64_t len,
                         const double* y, std::int64_t y_stride, std::int64_t rounds, const double* w, double* dots,
                         double* abs_sums);
}  // namespace detail

/// s[ρ·len + j] += coeff[ρ]·x[j] for ρ < rounds, and abs_acc[j] += |x[j]| unless abs_acc is null,
/// over j < len.
void multi_axpy(const float* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                double* abs_acc);
void multi_axpy(const double* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                double* abs_acc);

}  // namespace capsule::checkers
