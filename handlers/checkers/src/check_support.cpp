// SPDX-License-Identifier: Apache-2.0
#include "check_support.hpp"

#include <limits>

namespace capsule::checkers {

RuntimeStatus expect_operands(const CheckCall& call, std::size_t min_inputs, std::size_t max_inputs) {
  const std::string_view op = to_string(call.op);
  if (call.inputs.size() < min_inputs || call.inputs.size() > max_inputs) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, " check: ", call.inputs.size(), " inputs; expected ", min_inputs,
                             min_inputs == max_inputs ? std::string() : str(" to ", max_inputs)));
  }
  // The public entry points (check_product, check_product_vjp, check_conv) can be called without
  // run_checker's checks, so every check verifies the pointers it dereferences here.
  if (call.output == nullptr || call.attrs == nullptr) {
    return runtime_error(RuntimeCode::InvalidArgument, str(op, " check: no output or no attributes"));
  }
  const Tensor& out = *call.output;
  if (!out.defined()) return runtime_error(RuntimeCode::InvalidArgument, str(op, " check: the output is undefined"));
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    const Tensor& t = call.inputs[i];
    if (!t.defined()) {
      if (i < min_inputs) return runtime_error(RuntimeCode::InvalidArgument, str(op, " check: input ", i, " is undefined"));
      continue;
    }
    if (t.device() != Device::Cpu) {
      return runtime_error(RuntimeCode::DeviceUnavailable,
                           str(op, " check: input ", i, " is on ", to_string(t.device()), "; the checker reads cpu tensors"));
    }
    if (t.dtype() != out.dtype()) {
      return runtime_error(RuntimeCode::DTypeMismatch, str(op, " check: input ", i, " is ", to_string(t.dtype()),
                                                           " and the output ", to_string(out.dtype())));
    }
  }
  if (out.device() != Device::Cpu) {
    return runtime_error(RuntimeCode::DeviceUnavailable,
                         str(op, " check: the output is on ", to_string(out.device()), "; the checker reads cpu tensors"));
  }
  return std::monostate{};
}

std::optional<CheckVerdict> wrong_output_shape(std::string_view op, const Tensor& output,
                                               std::span<const std::int64_t> want) {
  const auto have = output.shape().dims();
  if (std::equal(have.begin(), have.end(), want.begin(), want.end())) return std::nullopt;
  auto shown = Shape::make(want);
  CheckVerdict verdict;
  verdict.passed = false;
  verdict.worst = CheckViolation{std::numeric_limits<double>::quiet_NaN(), 0.0, -1,
                                 str(op, " output has shape ", to_string(output.shape()), "; the inputs give ",
                                     shown ? to_string(shown.value()) : std::string("an invalid shape"))};
  return verdict;
}

}  // namespace capsule::checkers
