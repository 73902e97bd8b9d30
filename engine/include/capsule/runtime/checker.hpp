// SPDX-License-Identifier: Apache-2.0
// Executable checkers and their registry (issue 11, docs/checkers.md). A checker looks at one
// bound call's inputs, output and attributes (and, for a VJP obligation, the output gradient and
// the input gradients) and says whether the result is right within a stated tolerance, checking
// a property from which the claim follows rather than recomputing the op the same way. One
// checker serves every provider of an (op, device): it reads only runtime Tensors.
//
// Checkers are registered by explicit calls such as register_standard_checkers(registry);
// nothing registers itself. Catalog evidence names a checker by its stable name.
//
// A check never throws. Malformed calls (operands the op itself would reject) are RuntimeErrors;
// a well-formed call gives a CheckVerdict, pass or fail with the largest violation found.
// Randomised checkers draw from a CheckerRng whose stream a session derives with
// checker_stream_seed(seed, capsule, call index), so turning checks on never changes the
// randomness of the run being checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/runtime/op_args.hpp"
#include "capsule/runtime/tensor.hpp"
#include "capsule/vocab.hpp"

namespace capsule {

// A checker's coverage label is the catalog's CheckerCoverage (vocab.hpp; docs/checkers.md,
// "Coverage labels"): full (a pass implies the obligation within the stated tolerance and miss
// probability), partial (only a necessary condition: never discharges a value obligation on its
// own) or sampled (an independent recomputation, as costly as the op: meant for sampled calls).
// A checker checks the value or the vjp obligation (registration refuses shape and layout).

/// A deterministic 64-bit stream (splitmix64). Checkers draw random signs and indices from it.
class CheckerRng {
 public:
  explicit CheckerRng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  /// +1.0 or -1.0 with probability 1/2 each.
  double sign() { return (next() >> 63) != 0 ? -1.0 : 1.0; }
  /// `count` independent signs as sign() draws them, but 64 from each next(), most significant bit
  /// first: a sign per draw cost as much as Freivalds' float64 work on a 256-long row.
  void fill_signs(double* out, std::size_t count);
  /// Uniform in [0, bound); 0 when bound is 0.
  std::uint64_t below(std::uint64_t bound);

 private:
  std::uint64_t state_;
};

/// The seed of the checker stream for one call: a function of the run's checker seed, the
/// capsule's name and the call's index only. Distinct capsules and calls get unrelated streams,
/// and the stream is independent of every random op of the run (those draw from their own
/// payload seeds), so enabling checks changes no result of the checked run.
std::uint64_t checker_stream_seed(std::uint64_t seed, std::string_view capsule, std::uint64_t call_index);

/// The worst residual a check found. `index` is the flat index of the output element (or of the
/// checked quantity, `what` says which) the residual belongs to; -1 when it is not one element.
struct CheckViolation {
  double residual = 0.0;
  double bound = 0.0;
  std::int64_t index = -1;
  std::string what;
};

/// pass, or fail with the largest violation found. `worst` is the residual with the largest
/// residual/bound ratio (a NaN residual counts as infinitely large); on a pass it is within its
/// bound and says how close the call came.
struct CheckVerdict {
  bool passed = true;
  CheckViolation worst;
};

/// One bound call as a checker sees it. `output_gradient` and `input_gradients` are set for VJP
/// obligations only (one gradient per input, undefined where the input takes none).
struct CheckCall {
  Op op = Op::Custom;
  std::span<const Tensor> inputs;
  const Tensor* output = nullptr;
  const OpAttrs* attrs = nullptr;
  const Tensor* output_gradient = nullptr;
  std::span<const Tensor> input_gradients;
};

using CheckFunction = RuntimeResult<CheckVerdict> (*)(const CheckCall& call, CheckerRng& rng);

struct CheckerSpec {
  std::string name;  ///< stable, e.g. "freivalds.matmul"; what catalog evidence names
  Op op = Op::Custom;
  Device device = Device::Cpu;
  CheckerCoverage coverage = CheckerCoverage::Full;
  Obligation obligation = Obligation::Value;
  CheckFunction check = nullptr;
  std::string summary;  ///< one line: the property checked (shown in reports)
};

struct RegisteredChecker {
  CheckerSpec spec;
  std::string site;  ///< "file:line" of the registration
};

class CheckerRegistry {
 public:
  /// Adds a checker. Rejected (invalid-argument) with an empty name or no check function;
  /// a second checker with the same name (duplicate-handler) names both registration sites.
  RuntimeStatus add(CheckerSpec spec, std::source_location site = std::source_location::current());

  const RegisteredChecker* find(std::string_view name) const;
  /// The checkers of one (op, device) in registration order, every coverage and obligation.
  std::vector<const RegisteredChecker*> for_op(Op op, Device device) const;
  std::vector<const RegisteredChecker*> all() const;
  std::size_t size() const { return checkers_.size(); }

 private:
  std::vector<std::unique_ptr<RegisteredChecker>> checkers_;
};

/// Runs `checker` on `call`: fails with invalid-argument when the call's op is not the checker's
/// (a checker never vouches for another op), and otherwise returns the checker's answer.
RuntimeResult<CheckVerdict> run_checker(const RegisteredChecker& checker, const CheckCall& call, CheckerRng& rng);

}  // namespace capsule
