// SPDX-License-Identifier: Apache-2.0
// The check functions the registration file names, one per family.
#pragma once

#include "capsule/runtime/checker.hpp"

namespace capsule::checkers {

/// softmax, log_softmax and hard_masked_softmax (call.op says which): the ratio checks.
RuntimeResult<CheckVerdict> check_softmax_family(const CheckCall& call, CheckerRng& rng);

/// sqrt and inv (call.op says which): the exact inverse checks y² = x and x·y = 1.
RuntimeResult<CheckVerdict> check_inverse_elementwise(const CheckCall& call, CheckerRng& rng);

/// scaled_dot_product_attention, partial: every fully blocked query row is exactly +0.
RuntimeResult<CheckVerdict> check_attention_blocked_rows(const CheckCall& call, CheckerRng& rng);

/// scaled_dot_product_attention, sampled: an independent recomputation in higher precision.
RuntimeResult<CheckVerdict> check_attention_recompute(const CheckCall& call, CheckerRng& rng);

}  // namespace capsule::checkers
