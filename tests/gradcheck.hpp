// SPDX-License-Identifier: Apache-2.0
// Float64 finite-difference checks for local adjoint kernels and for whole sessions.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "capsule/runtime/handler.hpp"

namespace capsule::test {

/// Result of comparing an analytic gradient with central differences.
struct GradcheckReport {
  bool ok = true;
  double worst_error = 0.0;  ///< max |analytic - numeric| / max(1, |numeric|)
  std::string detail;        ///< first failing input and element, for the test message
};

/// Checks `backward` against central differences of `forward` for every input whose index is in
/// `differentiable`. The scalar objective is Σ output·weights with fixed pseudo-random weights, so
/// every output element contributes. Inputs must be float64.
GradcheckReport gradcheck_kernel(ForwardKernel forward, BackwardKernel backward, std::vector<Tensor> inputs,
                                 const OpAttrs& attrs, const std::vector<std::size_t>& differentiable,
                                 double step = 1e-6, double tolerance = 1e-6);

/// A float64 tensor of the given shape filled with deterministic values in [lo, hi).
Tensor random_tensor(std::initializer_list<std::int64_t> dims, std::uint64_t seed, double lo = -1.0, double hi = 1.0);

}  // namespace capsule::test
