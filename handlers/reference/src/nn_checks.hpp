// SPDX-License-Identifier: Apache-2.0
// Input validation shared by the linalg and nn reference kernels, so every op reports a wrong
// input count, an undefined operand, a foreign device, a mixed dtype or a bad gradient in the
// same words.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/runtime/handler.hpp"
#include "capsule/text.hpp"

namespace capsule::reference {

/// True when optional input `i` is given (present and defined).
inline bool has_input(std::span<const Tensor> inputs, std::size_t i) {
  return i < inputs.size() && inputs[i].defined();
}

/// Checks min..max inputs; the first `min` must be defined; all defined ones live on the CPU and
/// share one dtype. Optional trailing inputs may be undefined tensors (meaning "absent").
inline RuntimeStatus expect_inputs(std::string_view op, std::span<const Tensor> inputs, std::size_t min,
                                   std::size_t max) {
  if (inputs.size() < min || inputs.size() > max) {
    const std::string expected = min == max ? std::to_string(min) : str(min, "..", max);
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, ": got ", inputs.size(), " inputs; expected ", expected));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      if (i < min) {
        return runtime_error(RuntimeCode::InvalidArgument,
                             str(op, ": input ", i, " is undefined; expected a tensor"));
      }
      continue;
    }
    if (inputs[i].device() != Device::Cpu) {
      return runtime_error(RuntimeCode::DeviceUnavailable,
                           str(op, ": input ", i, " lives on device `", to_string(inputs[i].device()),
                               "`; the reference handler expects device `cpu`"));
    }
  }
  return expect_same_dtype(op, inputs);
}

/// Checks that the backward's output and gradient match: defined, CPU, same dtype as the inputs
/// and the output's shape.
inline RuntimeStatus expect_grad(std::string_view op, std::span<const Tensor> inputs, const Tensor& output,
                                 const Tensor& grad_output) {
  if (!output.defined() || !grad_output.defined()) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, " backward: the forward output and its gradient must be defined tensors"));
  }
  if (grad_output.device() != Device::Cpu) {
    return runtime_error(RuntimeCode::DeviceUnavailable,
                         str(op, " backward: the output gradient lives on device `", to_string(grad_output.device()),
                             "`; expected device `cpu`"));
  }
  if (grad_output.shape() != output.shape()) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, " backward: output gradient has shape ", to_string(grad_output.shape()),
                             "; expected the output's shape ", to_string(output.shape())));
  }
  if (!inputs.empty() && grad_output.dtype() != inputs.front().dtype()) {
    return runtime_error(RuntimeCode::DTypeMismatch,
                         str(op, " backward: output gradient is ", to_string(grad_output.dtype()),
                             "; expected the inputs' ", to_string(inputs.front().dtype())));
  }
  return std::monostate{};
}

/// An uninitialised tensor of the given dims.
inline RuntimeResult<Tensor> new_tensor(std::span<const std::int64_t> dims, DType dtype) {
  CAPSULE_TRY(Shape shape, Shape::make(dims));
  return Tensor::empty(shape, dtype);
}

/// A zero tensor with `like`'s shape and dtype.
inline RuntimeResult<Tensor> zeros_like(const Tensor& like) { return Tensor::zeros(like.shape(), like.dtype()); }

/// Product of dims[from, to), checked for overflow.
inline RuntimeResult<std::int64_t> dims_product(std::string_view what, std::span<const std::int64_t> dims,
                                                std::size_t from, std::size_t to) {
  std::int64_t product = 1;
  for (std::size_t i = from; i < to; ++i) {
    CAPSULE_TRY(product, checked_mul(what, product, dims[i]));
  }
  return product;
}

/// A size_t index from a non-negative int64 (loop bounds are validated before use).
inline std::size_t idx(std::int64_t i) { return static_cast<std::size_t>(i); }

}  // namespace capsule::reference
