// SPDX-License-Identifier: Apache-2.0
// The standard checkers (docs/checkers.md): Freivalds' product check, the conv checksums, the
// softmax ratio checks, and the attention checks. Each reads runtime Tensors only, so one checker
// serves every provider of its (op, device); all of them are CPU checkers of float32 and float64
// tensors and compute in float64 (attention's recomputation of float64 inputs in long double).
#pragma once

#include "capsule/runtime/checker.hpp"

namespace capsule {

/// Rounds of Freivalds' check per product in the registered product checkers. Each round misses
/// an error above the floor with probability at most 1/2, so a call's miss probability is at most
/// 2^-kFreivaldsRounds (docs/checkers.md).
inline constexpr int kFreivaldsRounds = 2;
/// Rounds of the random-sign checksums in the registered conv checker (each round: one
/// output-channel and one batch checksum).
inline constexpr int kConvChecksumRounds = 1;

/// Registers every standard checker (device cpu). Fails, naming both sites, on a duplicate name.
RuntimeStatus register_standard_checkers(CheckerRegistry& registry);

/// How Freivalds' check reaches each row's tolerance (docs/checkers.md, "The screen").
/// `Screened`, what the registered checkers run: a row whose residuals lie within a lower bound of
/// its tolerance passes on that bound, and only the other rows get the exact tolerance.
/// `ExactOnly` computes the exact tolerance of every row. Both give the same verdict, and a
/// failing verdict names the same row, residual and bound; the one exception is a row whose exact
/// bound overflows, which the screen passes when its residuals meet the finite lower bound. For
/// tests and tools that compare the two.
enum class FreivaldsTolerance { Screened, ExactOnly };

/// Freivalds' check of matmul, scaled_matmul, linear or softmax_matmul (call.op says which) with
/// `rounds` random sign vectors per product (per batch entry). For tools that measure detection
/// power and cost; the registered checkers use kFreivaldsRounds and the screen.
RuntimeResult<CheckVerdict> check_product(const CheckCall& call, CheckerRng& rng, int rounds,
                                          FreivaldsTolerance tolerance = FreivaldsTolerance::Screened);

/// Freivalds' check of the local VJP of matmul, scaled_matmul or linear: every defined entry of
/// call.input_gradients against the output gradient (dA = α·G·Bᵀ, dB = α·Aᵀ·G; linear dX = G·W,
/// dW = Gᵀ·X, db = Σ rows of G), `rounds` rounds per gradient.
RuntimeResult<CheckVerdict> check_product_vjp(const CheckCall& call, CheckerRng& rng, int rounds,
                                              FreivaldsTolerance tolerance = FreivaldsTolerance::Screened);

/// Freivalds' row tolerance τ_i (docs/checkers.md, "Products") for a provider computing in unit
/// roundoff `u` with `terms` roundings per output element, a product of inner dimension k and n
/// columns: γ_terms·M·(1 + γ_{n+k+3}) + γ_{n+k+3}·M + γ_{n+1}·c_abs, where M = |α|·((|A|·|B|·1)_i
/// + Σ|b|) is `magnitude` and c_abs = Σ_j |C_ij| (the last two terms are the check's own float64
/// rounding). The one statement of the formula: the checker, its tests and the power bench use it.
double freivalds_row_tolerance(double u, double terms, std::int64_t k, std::int64_t n, double magnitude, double c_abs);

/// The conv checksums with `rounds` rounds.
RuntimeResult<CheckVerdict> check_conv(const CheckCall& call, CheckerRng& rng, int rounds);

}  // namespace capsule
