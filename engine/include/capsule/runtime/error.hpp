// SPDX-License-Identifier: Apache-2.0
// Errors of the running side (tensors, handlers, binding, sessions, autograd). Like the loader's
// diagnostics they are values with a stable kebab-case code; the message names the op, the
// offending values and what was expected.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>

#include "capsule/result.hpp"

namespace capsule {

enum class RuntimeCode : std::uint8_t {
  ShapeMismatch,       ///< operand shapes disagree with each other or with the op's payload
  InvalidArgument,     ///< a payload value is out of range (axis, stride, k, probability, ...)
  DTypeMismatch,       ///< operands of different element types, or an unsupported type
  SizeOverflow,        ///< an element count or byte size does not fit in 64 bits
  DeviceUnavailable,   ///< storage or execution requested on a device this build cannot use
  UnknownProfile,      ///< the session's profile is not loaded
  ProfileInvalid,      ///< the profile's modules fail validation
  PlanningFailed,      ///< no admissible capsule for an op
  GateRejected,        ///< the acceptance gate rejected the selected capsule
  NoHandler,           ///< no linked handler has the capsule's (op, provider, device)
  BindingRejected,     ///< a handler exists but does not honour the capsule's loaded contract
  DuplicateHandler,    ///< two registrations of one (op, provider, device)
  GradientUnavailable, ///< backward through an op whose capsule has VJP mode none, or gradients off
  UnknownExample,      ///< `capsule run` was given an example that does not exist
  CheckFailed,         ///< a run-time recheck (docs/checkers.md) found a result outside its bound
  DeviceMismatch,      ///< an input lives on another device than the op's capsule runs on
  DeviceError,         ///< the device runtime reported a failure (a CUDA error, device memory exhausted)
};

std::string_view to_string(RuntimeCode code);

struct RuntimeError {
  RuntimeCode code = RuntimeCode::InvalidArgument;
  std::string message;
};

std::ostream& operator<<(std::ostream& out, const RuntimeError& error);

template <class T>
using RuntimeResult = Result<T, RuntimeError>;
/// A result with no value: success or a RuntimeError.
using RuntimeStatus = Result<std::monostate, RuntimeError>;

/// Cold and out of line: a failure is the rare path of every kernel and dispatch, so the
/// compiler predicts each branch that builds one as not taken and moves that block (the message's
/// formatting included) out of the hot code. A call through a kernel then touches fewer
/// instruction cache lines, which is most of its cost when a heavy op ran just before and left
/// the caches cold (docs/benchmarks.md, "The LibTorch provider's overhead (issue 10)").
[[gnu::cold, gnu::noinline]] inline Failure<RuntimeError> runtime_error(RuntimeCode code, std::string message) {
  return Failure<RuntimeError>{RuntimeError{code, std::move(message)}};
}

}  // namespace capsule

/// Unwraps a RuntimeResult into `lhs`, or returns its error from the enclosing function. The
/// enclosing function must return a Result whose error type is RuntimeError.
#define CAPSULE_CONCAT_INNER(a, b) a##b
#define CAPSULE_CONCAT(a, b) CAPSULE_CONCAT_INNER(a, b)
#define CAPSULE_TRY_IMPL(tmp, lhs, expr)             \
  auto tmp = (expr);                                 \
  if (!tmp) [[unlikely]] return ::capsule::fail(std::move(tmp).error()); \
  lhs = std::move(tmp).value()
#define CAPSULE_TRY(lhs, expr) CAPSULE_TRY_IMPL(CAPSULE_CONCAT(capsule_try_, __LINE__), lhs, expr)
/// Returns the error of a RuntimeStatus (or any Result) from the enclosing function.
#define CAPSULE_CHECK(expr)                                                   \
  do {                                                                        \
    auto capsule_check_result = (expr);                                       \
    if (!capsule_check_result) [[unlikely]] return ::capsule::fail(std::move(capsule_check_result).error()); \
  } while (false)
