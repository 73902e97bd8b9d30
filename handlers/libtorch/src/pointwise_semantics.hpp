// SPDX-License-Identifier: Apache-2.0
// The reference's semantics for the payload-reading and sigmoid-based pointwise ops, built from
// ATen ops, shared by the plain kernels (kernels_pointwise.cpp) and the external-autograd regions
// (autograd_region.cpp), so both check the same payload and compute the same function.
#pragma once

#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/div.h>
#include <ATen/ops/erfc.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/where.h>

#include <cmath>
#include <numbers>

#include "boundary.hpp"

namespace capsule::libtorch {

/// σ(x) as the reference computes it: exp is only taken of −|x| ≤ 0, so no intermediate
/// overflows (ATen's sigmoid and silu form 1/(1 + e^−x) and flush to 0 where σ is subnormal).
inline at::Tensor stable_sigmoid(const at::Tensor& x) {
  const at::Tensor e = at::exp(at::neg(at::abs(x)));
  const at::Tensor den = at::add(e, 1.0);
  return at::where(at::ge(x, 0), at::reciprocal(den), at::div(e, den));
}

/// Φ(x) = erfc(−x/√2)/2, the reference's cancellation-free form (ATen's gelu uses 1 + erf and
/// loses every digit for x below about −4 in float32).
inline at::Tensor normal_cdf(const at::Tensor& x) {
  return at::mul(at::erfc(at::mul(at::neg(x), 1.0 / std::numbers::sqrt2)), 0.5);
}

// The slopes f′(x) of the smooth activations whose derivative is a sum of terms, as the
// reference's adjoint forms them; the adjoint kernels multiply g by them once, and the autograd
// regions record x·slope (slope detached) so autograd's gradient is the same single product.

/// gelu′(x) = Φ(x) + x·φ(x), φ(x) = exp(−x²/2)/√(2π).
inline at::Tensor gelu_slope(const at::Tensor& x) {
  const at::Tensor pdf =
      at::mul(at::exp(at::div(at::neg(at::mul(x, x)), 2)), std::numbers::inv_sqrtpi / std::numbers::sqrt2);
  return at::add(normal_cdf(x), at::mul(x, pdf));
}

/// silu′(x) = σ(x)·(1 + x·(1 − σ(x))) with the stable σ.
inline at::Tensor silu_slope(const at::Tensor& x) {
  const at::Tensor s = stable_sigmoid(x);
  return at::mul(s, at::add(at::mul(x, at::rsub(s, 1.0)), 1.0));
}

inline constexpr double kSafeLogDefaultEps = 1e-12;

/// safe_log's eps in the element type, as the reference rounds it (0 = the default 1e-12).
inline at::Scalar safe_log_eps(const OpAttrs& attrs, const at::Tensor& like) {
  const double eps = attrs.eps == 0.0 ? kSafeLogDefaultEps : attrs.eps;
  if (like.scalar_type() == at::kFloat) return at::Scalar(static_cast<double>(static_cast<float>(eps)));
  return at::Scalar(eps);
}

/// The element type's value of a payload bound (clamp's lo and hi), rounded as the reference
/// rounds it.
inline at::Scalar payload_scalar(double value, const at::Tensor& like) {
  if (like.scalar_type() == at::kFloat) return at::Scalar(static_cast<double>(static_cast<float>(value)));
  return at::Scalar(value);
}

}  // namespace capsule::libtorch
