// SPDX-License-Identifier: Apache-2.0
// The parity check: one CUDA handler against the reference handler on the same inputs (built on
// the CPU, copied to the device), forward and VJP, with tolerances derived from the dtype's unit
// roundoff and the op's reduction sizes (parity.cpp). Each comparison is one doctest check, so
// the evidence ledger counts one check per compared tensor.
#pragma once

#include <string>
#include <vector>

#include "capsule/runtime/handler.hpp"

namespace capsule::gpu_test {

/// How an op's rounding error is bounded (parity.cpp derives each).
enum class Bound {
  /// Each output element (and each gradient element) is a sum of at most `terms` products of
  /// one element per input: |Δ| ≤ 2·(terms+2)·u·|f|(|inputs|). matmul, linear, conv, avg_pool.
  Multilinear,
  /// max_pool: the forward is exact; the gradient sums at most `terms` routed elements of g.
  MaxPool,
  /// batch_norm: statistics over `terms` = n·spatial elements per channel.
  BatchNorm,
};

struct ParityCase {
  std::string label;          ///< shapes and payload, for the failure message
  Op op = Op::Custom;
  std::vector<Tensor> inputs;  ///< on the CPU; an undefined entry is an optional input left out
  OpAttrs attrs;
  Bound bound = Bound::Multilinear;
  double terms = 1;  ///< the most terms one output or gradient element sums (see Bound)
};

/// How tensors reach the handler under test and come back: copies to the CUDA device (the parity
/// suites), or none (the harness's own device-free test, with a CPU handler under test).
struct Transfer {
  Tensor (*upload)(const Tensor&);
  Tensor (*download)(const Tensor&);
  Device device;
};
Transfer cuda_transfer();
Transfer host_transfer();

/// Forward: the handler's output equals the reference's within the bound; its inputs are bitwise
/// unchanged after the call. `handler` is the CUDA handler (already recorded as exercised).
void check_forward(const HandlerSpec& handler, const ParityCase& c, const Transfer& transfer = cuda_transfer());
/// VJP: the handler's adjoint (backward, or forward_saving then backward_saved) equals the
/// reference's for one output gradient, input by input; inputs and the gradient are unchanged.
void check_vjp(const HandlerSpec& handler, const ParityCase& c, const Transfer& transfer = cuda_transfer());

/// The bound check_forward holds the handler's output to: factor · magnitude[i] per element.
struct ForwardBound {
  Tensor magnitude;
  double factor = 0.0;
};
ForwardBound forward_bound(const ParityCase& c);

/// The cases of each op the parity suites run, for float32 and float64: several shapes, batched
/// ones, and edge sizes (an empty inner dimension, an empty batch).
std::vector<ParityCase> parity_cases(Op op);

}  // namespace capsule::gpu_test
