// SPDX-License-Identifier: Apache-2.0
// The LibTorch parity table: the cases, the per-op bounds (docs/libtorch.md, "Parity bounds") and
// the forward and adjoint comparisons with the reference, shared by the CPU suites
// (test_libtorch.cpp: libtorch.values, libtorch.vjps) and the GPU suites of LibTorch's CUDA twins
// (tests/gpu/libtorch_cuda_table.cpp: libtorch.cuda.values, libtorch.cuda.vjps). One table, so a
// CUDA twin is held to its CPU twin's cases and bounds.
//
// No ATen here: handlers are driven through their HandlerSpec, so the GPU suites' binary, which a
// bare GPU machine builds (tools/gpu-check.sh), compiles this without LibTorch's headers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "capsule/runtime/handler.hpp"

namespace capsule::libtorch_parity {

enum class Bound {
  Exact,  ///< bit for bit (NaN matches NaN; the sign of zero counts)
  Ulps,   ///< |l − r| ≤ k·ulp(r) (ulp floored at the smallest normal)
  Terms,  ///< |l − r| ≤ k·n·u·Σ|terms|; Σ|terms| is the op on |inputs| (bilinear ops)
  Lane,   ///< |l − r| ≤ k·n·u·max(1, ‖r‖∞) over a lane or loss of n terms
};

struct Tolerance {
  Bound bound = Bound::Exact;
  double k = 0;
};
inline constexpr Tolerance kExact{Bound::Exact, 0};

struct InputSpec {
  std::vector<std::int64_t> dims;
  double lo = -2.0;
  double hi = 2.0;
  bool random_sign = false;  ///< magnitudes in [lo, hi] with a random sign (division)
};

struct ParityCase {
  std::string name;
  Op op;
  std::vector<InputSpec> inputs;
  OpAttrs attrs;
  Tolerance forward;
  Tolerance backward;
  std::int64_t terms = 1;  ///< n of the Terms and Lane bounds
};

/// The unit roundoff u of `dtype`: 2^-24 for float32, 2^-53 for float64.
double unit_roundoff(DType dtype);
/// Bit-for-bit equality, NaN matching NaN and the sign of zero counting.
bool same_bits(double l, double r);

/// What keeps two results from being compared element by element: "one side has no gradient",
/// a shape or dtype difference, or "" when both are undefined (nothing to compare). Nothing when
/// both are defined with one shape and dtype. The first step of every comparison below.
std::optional<std::string> structural_difference(const Tensor& lib, const Tensor& ref);

/// Compares one output under `tol`; `terms[i]` is Σ|terms| (Terms) or unused, `n` the n of the
/// Terms and Lane bounds. Returns "" or the first element that misses, with both values.
std::string compare(const Tensor& lib, const Tensor& ref, const Tolerance& tol, const Tensor* terms, std::int64_t n);

/// A host tensor of `spec`'s shape with values drawn from `rng`.
RuntimeResult<Tensor> make_input(const InputSpec& spec, DType dtype, std::mt19937_64& rng);
/// The bytes of a host tensor's elements (empty for an undefined one).
std::vector<unsigned char> bytes_of(const Tensor& t);
/// Element-wise |t| of a host tensor, in its dtype.
RuntimeResult<Tensor> absolute(const Tensor& t);
RuntimeResult<std::vector<Tensor>> absolute_all(std::span<const Tensor> ts);
OpAttrs with_axis(std::int64_t axis);

/// Which of ATen's backends runs the handler under test. Two bounds depend on it (docs/libtorch.md,
/// "Parity bounds on CUDA"):
///  - repeated-index sums (gather's adjoint, scatter_add; both index_add along the axis): ATen's
///    CPU index_add_ adds in index order, as the reference folds, so the sums round identically
///    and are held exact; ATen's CUDA index_add_ adds with atomics in no fixed order, so they get
///    2·n·u·Σ|terms|, n the most terms one position sums;
///  - sigmoid's forward: ATen's CUDA kernel is 1/(1 + expf(−x)) with libdevice's expf (≤ 2 ulps),
///    within 3 ulps, against the reference's 2.5: 6 ulps, where the CPU (Sleef, ≤ 1 ulp) takes 4.
enum class AtenBackend { Cpu, Cuda };

/// Every case, for every op the table covers, with its bounds for `backend`.
std::vector<ParityCase> parity_cases(AtenBackend backend = AtenBackend::Cpu);
/// The ops of parity_cases(), in first-case order.
std::vector<Op> covered_ops();

/// Where the handler under test runs. Inputs are built on the host, and so is the reference's
/// answer; `to_handler` copies a host tensor to the handler's device and `to_host` copies one
/// back (both the identity for a CPU handler). A failed copy fails the running test case.
struct Placement {
  Tensor (*to_handler)(const Tensor&);
  Tensor (*to_host)(const Tensor&);

  /// Each tensor copied with to_handler or to_host; an undefined one (no gradient) stays undefined.
  std::vector<Tensor> handler_copies(std::span<const Tensor> host) const;
  std::vector<Tensor> host_copies(std::span<const Tensor> placed) const;
  /// The bytes of a tensor on the handler's device, read on the host (bytes_of its host copy).
  std::vector<unsigned char> host_bytes(const Tensor& placed) const;
};
/// The identity placement, for CPU handlers.
Placement host_placement();

/// Forward parity of one case in one dtype: `handler`'s output equals `oracle`'s (the reference
/// handler, on the host) within the case's forward bound, the handler's inputs are bitwise
/// unchanged after the call, and its output shares no storage with them.
void check_forward(const HandlerSpec& handler, const HandlerSpec& oracle, const ParityCase& c, DType dtype,
                   std::uint64_t seed, const Placement& placement = host_placement());
/// Adjoint parity of one case in one dtype: `handler`'s adjoint equals `oracle`'s input by input
/// within the case's backward bound, leaving inputs, output and gradient unchanged. A handler
/// that keeps forward state also gives, from that state, its recomputing adjoint's bits.
void check_backward(const HandlerSpec& handler, const HandlerSpec& oracle, const ParityCase& c, DType dtype,
                    std::uint64_t seed, const Placement& placement = host_placement());

// ---------------------------------------------------------------------------------------------
// The pointwise ops' special-value classes (docs/special-values.md).

/// NaN, ±inf, ±0, ±1, 2.5, a denormal of `dtype` and 1e30.
std::vector<double> special_values(DType dtype);
const std::vector<Op>& special_binary_ops();
const std::vector<Op>& special_unary_ops();
/// The payload of the special-value checks: scale's alpha, and clamp's bounds ±1 (±1 and 2.5 of
/// the classes sit on or beyond them).
OpAttrs special_attrs();
/// The output gradients of the special-value adjoint checks: 0.75 everywhere, and (with
/// `non_finite_g`) NaN, +inf and −inf everywhere in turn. A constant gradient meets every input
/// class; the non-finite ones test that a selection's dropped branch stays exactly 0 and that no
/// formula turns g = NaN into a clean value.
std::vector<double> special_gradients(bool non_finite_g);
/// The bound a pointwise op's finite results keep under special inputs: its random case's.
Tolerance pointwise_tolerance(Op op, bool backward, AtenBackend backend = AtenBackend::Cpu);

/// One special-value check of a pointwise op on host `inputs`, forward only (`g` empty) or with
/// the output gradient `g` (one value per output element). Returns a count the caller sums per op.
using SpecialCheck = std::function<std::size_t(Op op, const std::vector<Tensor>& inputs, const std::vector<double>& g)>;
/// Every pointwise op on the special-value classes, float32 and float64: each class against each
/// (binary ops) or each class alone (unary ops), forward only, or (`backward`) with each gradient
/// of special_gradients(non_finite_g). Returns `check`'s counts summed per op.
std::map<Op, std::size_t> for_each_special(bool backward, bool non_finite_g, const SpecialCheck& check);
/// The plain handler's special-value check: `handler` (placed) against `oracle` (on the host), the
/// output within the op's bound (non-finite results exactly) and, with `g`, every input gradient
/// of its adjoint kernel on the reference's output.
void check_special_plain(const HandlerSpec& handler, const HandlerSpec& oracle, Op op, const std::vector<Tensor>& inputs,
                         const std::vector<double>& g, const Placement& placement = host_placement(),
                         AtenBackend backend = AtenBackend::Cpu);

}  // namespace capsule::libtorch_parity
