// SPDX-License-Identifier: Apache-2.0
// The hand-made special-value cases of the ops that are not pointwise (docs/libtorch.md, "Special
// values under autograd"; docs/special-values.md): the softmax family, smooth_max_pool, the
// normalisations, clamp's signed-zero ties, the reductions, the products, the convolutions, the
// pools, the losses and the shape ops. Inputs holding NaN, ±inf and −0.0, each with its bounds.
//
// Shared like the parity table: the CPU suites run them on the plain handlers and on the
// external-autograd regions (test_libtorch.cpp), and the GPU suites on LibTorch's CUDA twins
// (tests/gpu/libtorch_cuda_table.cpp) through check_special_case_plain. No ATen here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parity_table.hpp"

namespace capsule::libtorch_parity {

/// A host tensor of `dims` holding `values`.
Tensor tensor_of(const std::vector<std::int64_t>& dims, DType dtype, const std::vector<double>& values);
/// `dims` filled with the special-value classes in turn (−0.0, 1, NaN, 2, inf, −3, −inf, 0.5,
/// 0.0), starting at `offset`.
Tensor specials_of(const std::vector<std::int64_t>& dims, DType dtype, std::size_t offset);

/// One special-value case: `op` on host `inputs` with `attrs`; the output within `forward`
/// (n terms), and each input gradient within `backward` for every output gradient
/// special_case_gradients gives.
struct SpecialCase {
  std::string label;  ///< the op, the dtype and the input shapes
  Op op = Op::Add;
  std::vector<Tensor> inputs;
  OpAttrs attrs;
  Tolerance forward;
  Tolerance backward;
  std::int64_t n = 1;
  bool forward_only = false;       ///< no adjoint check (a forward-only property)
  double constant_g = 0.75;        ///< the first output gradient, everywhere
  bool special_g = false;          ///< then specials_of(output, 2) and specials_of(output, 4)
  std::vector<double> explicit_g;  ///< then this one (one value per output element), when given
};

/// The output gradients of `c` for an output of `shape` and `dtype`.
std::vector<Tensor> special_case_gradients(const SpecialCase& c, const Shape& shape, DType dtype);

/// softmax and log_softmax lanes holding NaN, +inf and −inf, and only −inf; g = 0.5, then (with
/// `non_finite_g`) a gradient holding NaN and ±inf. Lane bounds: 4 forward, 8 adjoint, n = 3.
std::vector<SpecialCase> softmax_special_cases(bool non_finite_g);
/// smooth_max_pool windows (kernel 2, stride 2, padding 1, temperature 0.5) holding only −inf and
/// padding, a NaN, a +inf, only −inf, and a finite value beside padding.
std::vector<SpecialCase> smooth_pool_special_cases(bool non_finite_g);
/// layer_norm and batch_norm groups holding NaN, infinities or one repeated value; g = 0.5.
std::vector<SpecialCase> norm_special_cases();
/// clamp with both bounds 0 on −0.0, 0.0, NaN and ±1: x is kept on a signed-zero tie, as the
/// reference keeps it (forward only, exact).
std::vector<SpecialCase> clamp_tie_special_cases();
/// The reductions, matmul and linear, conv and conv_transpose, max_pool and avg_pool, mse_loss and
/// cross_entropy, reshape, permute and broadcast: g = 0.75, then (special_g) the special-value
/// classes in g. `family` is one of "reduction", "product", "conv", "pool", "loss", "shape".
std::vector<SpecialCase> region_special_cases(const std::string& family);
/// Every family of region_special_cases, in that order.
const std::vector<std::string>& region_special_families();
/// Every case above: softmax, smooth_max_pool (both with `non_finite_g`), norms, clamp's ties,
/// then each region family.
std::vector<SpecialCase> every_special_case(bool non_finite_g);

/// The plain handler's check of one case: `handler` (placed) against `oracle` (on the host), the
/// output within the case's forward bound and, with `vjps` (unless forward_only), every input
/// gradient of its adjoint kernel, given the reference's output, within its backward bound.
void check_special_case_plain(const HandlerSpec& handler, const HandlerSpec& oracle, const SpecialCase& c, bool vjps,
                              const Placement& placement = host_placement());

}  // namespace capsule::libtorch_parity
