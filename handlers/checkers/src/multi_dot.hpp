// SPDX-License-Identifier: Apache-2.0
// The float64 kernels behind Freivalds' check: several dot products (one per round) and an
// absolute-value sum over one row, read once. They run with AVX2 and FMA where the CPU has them
// (chosen once at run time, like the reference gemm), else with the portable loops.
// Any summation order and fused multiply-adds are fine here: the check's tolerance bounds its own
// rounding with γ, which holds for every order.
#pragma once

#include <cstdint>

namespace capsule::checkers {

/// dots[ρ] = Σ_j x[j]·y[ρ·y_stride + j] for ρ < rounds, and *abs_sum = Σ_j |x[j]|·w[j] (w null:
/// Σ_j |x[j]|), over j < len. rounds >= 1.
void multi_dot(const float* x, std::int64_t len, const double* y, std::int64_t y_stride, std::int64_t rounds,
               const double* w, double* dots, double* abs_sum);
void multi_dot(const double* x, std::int64_t len, const double* y, std::int64_t y_stride, std::int64_t rounds,
               const double* w, double* dots, double* abs_sum);

/// s[ρ·len + j] += coeff[ρ]·x[j] for ρ < rounds, and abs_acc[j] += |x[j]|, over j < len.
void multi_axpy(const float* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                double* abs_acc);
void multi_axpy(const double* x, std::int64_t len, const double* coeff, std::int64_t rounds, double* s,
                double* abs_acc);

}  // namespace capsule::checkers
