// SPDX-License-Identifier: Apache-2.0
// The LibTorch parity table of the attention family (hard_masked_softmax, scaled_matmul,
// softmax_matmul, scaled_dot_product_attention): random and edge-shape cases, the special-value
// cases of docs/special-values.md (masks, NaN and infinities at blocked entries, fully blocked
// rows), and the bound |lib − ref| ≤ 8·N·u·M of docs/libtorch.md, "Parity bounds", with N and M
// computed per case from its operands. Shared, like parity_table.hpp, by the CPU suites
// (test_libtorch_attention.cpp) and the GPU suites of LibTorch's CUDA twins
// (tests/gpu/libtorch_cuda_table.cpp); no ATen header.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "capsule/runtime/handler.hpp"
#include "parity_table.hpp"

namespace capsule::libtorch_parity {

/// The absolute bound of one case: on the forward value and on each gradient.
struct AttentionBounds {
  double forward = 0;
  std::vector<double> backward;  ///< one per gradient
};
using AttentionBoundsOf = AttentionBounds (*)(const std::vector<Tensor>& inputs, const Tensor& grad,
                                              const OpAttrs& attrs);

struct AttentionCase {
  std::string name;
  Op op;
  std::vector<Tensor> inputs;  ///< on the host
  OpAttrs attrs;
  AttentionBoundsOf bounds;
  Tensor grad = Tensor();  ///< undefined: random in [−2, 2]
};

/// The largest finite magnitude in `t` (0 for an undefined or empty tensor).
double max_abs(const Tensor& t);
/// "" or the first element where `l` leaves `r`: a non-finite reference value must be matched
/// exactly (NaN for NaN, the same infinity), a finite one within `allowed` (absolute).
std::string compare_absolute(const Tensor& l, const Tensor& r, double allowed);
/// Every element of `t` at the positions `where` marks is +0 or −0 exactly.
bool zero_at(const Tensor& t, const std::vector<bool>& where);

Tensor host_tensor(std::vector<std::int64_t> dims, DType dtype, const std::vector<double>& values);
Tensor random_tensor(std::vector<std::int64_t> dims, DType dtype, std::mt19937_64& rng, double lo = -2, double hi = 2);
/// A 0/1 mask with about a third of its entries blocked, and its row `blocked_row` (over the
/// last axis) fully blocked when that row exists.
Tensor random_mask(std::vector<std::int64_t> dims, DType dtype, std::mt19937_64& rng, std::int64_t blocked_row = 0);
OpAttrs axis_attrs(std::int64_t axis);
OpAttrs attention_attrs(double scale, bool causal = false);

/// The random and edge-shape cases of one dtype, including inputs both sides must reject.
std::vector<AttentionCase> attention_random_cases(DType t, std::mt19937_64& rng);
/// The special-value cases of one dtype (the softmax-family and attention rows of
/// docs/special-values.md).
std::vector<AttentionCase> attention_special_cases(DType t);
/// The ops these cases cover.
std::vector<Op> attention_ops();

/// Runs `handler` (placed by `placement`) and `oracle` (the reference, on the host) forward and
/// backward on one case: both fail with the same code or both succeed; the forward and every
/// gradient within the case's bounds; inputs, output and gradient bitwise unchanged.
void check_attention_case(const HandlerSpec& handler, const HandlerSpec& oracle, const AttentionCase& c,
                          std::mt19937_64& rng, const Placement& placement = host_placement());

}  // namespace capsule::libtorch_parity
