// SPDX-License-Identifier: Apache-2.0
// Operand checks, dtype dispatch and the softmax error model shared by the standard checkers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "capsule/assert.hpp"
#include "capsule/runtime/checker.hpp"
#include "capsule/text.hpp"
#include "rounding.hpp"

namespace capsule::checkers {

/// The call has between `min_inputs` and `max_inputs` inputs (the first `min_inputs` defined), and
/// every defined input and the output are CPU tensors of one dtype, float32 or float64; the output
/// and attribute pointers are non-null.
RuntimeStatus expect_operands(const CheckCall& call, std::size_t min_inputs, std::size_t max_inputs);

/// A failing verdict when the output's shape is not `want` (a wrong result, not a malformed call).
std::optional<CheckVerdict> wrong_output_shape(std::string_view op, const Tensor& output,
                                               std::span<const std::int64_t> want);

/// One allocation carved into consecutive spans, for a check's per-call vectors: one allocation
/// instead of one per vector. `take` leaves its span uninitialised (for values written before they
/// are read), `take_zeroed` fills it with zeros. The sizes are the caller's own arithmetic, so
/// asking for more than the capacity is a bug, stopped before it writes past the buffer.
class ScratchCarver {
 public:
  explicit ScratchCarver(std::size_t capacity)
      : buffer_(std::make_unique_for_overwrite<double[]>(capacity)), capacity_(capacity) {}
  std::span<double> take(std::size_t count) {
    CAPSULE_ASSERT(count <= capacity_ - used_, "a check's scratch spans fit the capacity it computed");
    const std::span<double> out(buffer_.get() + used_, count);
    used_ += count;
    return out;
  }
  std::span<double> take_zeroed(std::size_t count) {
    const std::span<double> out = take(count);
    std::fill(out.begin(), out.end(), 0.0);
    return out;
  }

 private:
  std::unique_ptr<double[]> buffer_;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
};

/// Calls f.template operator()<float>() or <double>() by the output's dtype.
template <class F>
auto dispatch_dtype(const Tensor& output, F&& f) {
  return output.dtype() == DType::F32 ? f.template operator()<float>() : f.template operator()<double>();
}

/// The error a provider may make in softmax over one lane when it computes in unit roundoff u with
/// the max-shifted formula (docs/checkers.md, "Softmax"). y_j = exp(x_j - top)/Σ exp(x_k - top):
/// the shift rounds (u·|x_j - top| relative in the exponential), exp is within kLibmUlps ulps, the
/// sum of `count` positive terms adds γ_{count-1}, the division u; a provider that instead
/// computes exp(x_j - top - log Σ) adds at most u·log(count) for the log term, and one that computes
/// x_j - (top + log Σ) adds u·(|top| + log count) to every entry of the lane (in sum_rel).
struct SoftmaxErrorModel {
  double u = 0.0;
  double sum_rel = 0.0;  ///< bound on the relative error of the provider's sum
  double log_count = 0.0;
  /// Bound on the relative error of the provider's y_j for an entry x_j of the lane.
  double entry(double x, double top) const {
    return u * (std::fabs(x - top) + log_count + 2.0 * kLibmUlps + 2.0) + sum_rel;
  }
};

/// The model for a lane of `count` entries: x(j) the inputs, weight(j) the true softmax (the
/// checker's float64 one), `top` the lane maximum. The sum's error is weighted by the entries, so a
/// far-negative entry (which contributes nothing) does not inflate it.
template <class X, class W>
SoftmaxErrorModel softmax_error_model(X&& x, W&& weight, std::int64_t count, double top, double u) {
  SoftmaxErrorModel model;
  model.u = u;
  model.log_count = std::log(static_cast<double>(count > 1 ? count : 1));
  double weighted = 0.0;
  for (std::int64_t j = 0; j < count; ++j) {
    const double w = weight(j);
    if (w > 0.0) weighted += w * u * (std::fabs(static_cast<double>(x(j)) - top) + 2.0 * kLibmUlps);
  }
  // A provider computing x_j - (top + log Σ) rounds c = top + log Σ by u·(|top| + log Σ), which
  // shifts every entry of the lane alike (log Σ <= log count): a common relative error of the
  // normaliser, so it goes into the sum's. Rounding to nearest never lands farther than top
  // itself (representable), so the shift is also at most log Σ: that caps it for huge |top|.
  const double normaliser = std::fmin(u * (std::fabs(top) + model.log_count), model.log_count);
  model.sum_rel = weighted + gamma(static_cast<double>(count), u) + normaliser;
  return model;
}

/// The model for a contiguous row (softmax_matmul's A).
template <class T>
SoftmaxErrorModel softmax_row_error_model(const T* x, const double* weight, std::int64_t count, double top, double u) {
  return softmax_error_model([x](std::int64_t j) { return x[j]; }, [weight](std::int64_t j) { return weight[j]; },
                             count, top, u);
}

}  // namespace capsule::checkers
