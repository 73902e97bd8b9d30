// SPDX-License-Identifier: Apache-2.0
#include "capsule/checkers/standard.hpp"
#include "checks.hpp"

namespace capsule {
namespace {

RuntimeResult<CheckVerdict> freivalds_registered(const CheckCall& call, CheckerRng& rng) {
  return check_product(call, rng, kFreivaldsRounds);
}

RuntimeResult<CheckVerdict> freivalds_vjp_registered(const CheckCall& call, CheckerRng& rng) {
  return check_product_vjp(call, rng, kFreivaldsRounds);
}

RuntimeResult<CheckVerdict> conv_registered(const CheckCall& call, CheckerRng& rng) {
  return check_conv(call, rng, kConvChecksumRounds);
}

}  // namespace

RuntimeStatus register_standard_checkers(CheckerRegistry& registry) {
  using checkers::check_attention_blocked_rows;
  using checkers::check_attention_recompute;
  using checkers::check_inverse_elementwise;
  using checkers::check_softmax_family;
  constexpr auto full = CheckerCoverage::Full;
  constexpr auto value = Obligation::Value;
  const CheckerSpec specs[] = {
      {"freivalds.matmul", Op::Matmul, Device::Cpu, full, value, freivalds_registered,
       "C·r = A·(B·r) for random sign vectors r, per batch entry"},
      {"freivalds.scaled_matmul", Op::ScaledMatmul, Device::Cpu, full, value, freivalds_registered,
       "C·r = alpha·A·(B·r) for random sign vectors r, per batch entry"},
      {"freivalds.linear", Op::Linear, Device::Cpu, full, value, freivalds_registered,
       "Y·r = X·(Wᵀ·r) + b·r for random sign vectors r"},
      {"freivalds.softmax_matmul", Op::SoftmaxMatmul, Device::Cpu, full, value, freivalds_registered,
       "C·r = softmax(A)·(B·r) for random sign vectors r, softmax(A) in float64"},
      {"freivalds.matmul.vjp", Op::Matmul, Device::Cpu, full, Obligation::Vjp, freivalds_vjp_registered,
       "dA·r = G·(Bᵀ·r) and dB·r = Aᵀ·(G·r) for random sign vectors r"},
      {"freivalds.scaled_matmul.vjp", Op::ScaledMatmul, Device::Cpu, full, Obligation::Vjp,
       freivalds_vjp_registered, "dA·r = alpha·G·(Bᵀ·r) and dB·r = alpha·Aᵀ·(G·r) for random sign vectors r"},
      {"freivalds.linear.vjp", Op::Linear, Device::Cpu, full, Obligation::Vjp, freivalds_vjp_registered,
       "dX·r = G·(W·r), dW·r = Gᵀ·(X·r), db·r = Σ_rows G·r for random sign vectors r"},
      {"checksum.conv", Op::Conv, Device::Cpu, full, value, conv_registered,
       "random-sign output-channel and batch checksums equal convolutions with the summed filter / image"},
      {"ratio.softmax", Op::Softmax, Device::Cpu, full, value, check_softmax_family,
       "y_i = y_r·exp(x_i - x_r) and Σ y = 1 per lane"},
      {"ratio.log_softmax", Op::LogSoftmax, Device::Cpu, full, value, check_softmax_family,
       "z_i - z_r = x_i - x_r and Σ exp(z) = 1 per lane"},
      {"ratio.hard_masked_softmax", Op::HardMaskedSoftmax, Device::Cpu, full, value, check_softmax_family,
       "blocked entries exactly 0; the softmax ratio and sum checks over the allowed entries"},
      {"inverse.sqrt", Op::Sqrt, Device::Cpu, full, value, check_inverse_elementwise,
       "y >= 0 and y² = x within one rounding, special values exact"},
      {"inverse.inv", Op::Inv, Device::Cpu, full, value, check_inverse_elementwise,
       "x·y = 1 within one rounding, special values exact"},
      {"blocked_rows.attention", Op::ScaledDotProductAttention, Device::Cpu, CheckerCoverage::Partial, value,
       check_attention_blocked_rows, "every fully blocked query row is exactly +0 (necessary only)"},
      {"recompute.attention", Op::ScaledDotProductAttention, Device::Cpu, CheckerCoverage::Sampled, value,
       check_attention_recompute, "independent streaming recomputation in higher precision, entrywise"},
  };
  for (const CheckerSpec& spec : specs) CAPSULE_CHECK(registry.add(spec));
  return std::monostate{};
}

}  // namespace capsule
