// SPDX-License-Identifier: Apache-2.0
// Operand checks and index walks shared by every reference kernel family: every kernel reports a
// wrong input count, an undefined operand, a foreign device, a mixed dtype or a bad gradient in
// the same words, and every strided copy or reduction walks indices the same way, so
// "fixed-left" means one visiting order everywhere.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common.hpp"

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

/// Exactly `count` inputs, each a defined CPU tensor, all of one dtype.
inline RuntimeStatus expect_inputs(Op op, std::span<const Tensor> inputs, std::size_t count) {
  return expect_inputs(to_string(op), inputs, count, count);
}

/// Any number of inputs, each a defined CPU tensor, all of one dtype.
inline RuntimeStatus expect_operands(Op op, std::span<const Tensor> inputs) {
  return expect_inputs(op, inputs, inputs.size());
}

/// A backward kernel's incoming tensor (`what` is "gradient" or "output") is a defined CPU tensor
/// of the forward output's shape and of the inputs' dtype.
inline RuntimeStatus expect_like_output(Op op, std::string_view what, const Tensor& t, const Shape& shape,
                                        DType dtype) {
  if (!t.defined() || t.device() != Device::Cpu) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(to_string(op), " backward: the ", what, " is not a defined CPU tensor; expected a ",
                             to_string(shape), " tensor"));
  }
  if (t.dtype() != dtype) {
    return runtime_error(RuntimeCode::DTypeMismatch, str(to_string(op), " backward: the ", what, " is ",
                                                         to_string(t.dtype()), "; expected ", to_string(dtype)));
  }
  if (t.shape() != shape) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(to_string(op), " backward: the ", what, " has shape ", to_string(t.shape()),
                             "; expected the forward output's shape ", to_string(shape)));
  }
  return std::monostate{};
}

/// A tensor viewed as outer × n × inner around one axis: element (o, j, i) is at
/// (o·n + j)·inner + i. For an empty tensor outer is 0 and inner is not formed, because products
/// of the other dimensions may then overflow (Shape::make only bounds the full product).
struct Lanes {
  std::int64_t outer = 0;
  std::int64_t n = 0;
  std::int64_t inner = 1;
};

inline Lanes lanes_around(const Shape& shape, std::size_t axis) {
  Lanes lanes;
  lanes.n = shape[axis];
  if (shape.numel() == 0) return lanes;
  lanes.outer = 1;
  for (std::size_t d = 0; d < axis; ++d) lanes.outer *= shape[d];
  for (std::size_t d = axis + 1; d < shape.rank(); ++d) lanes.inner *= shape[d];
  return lanes;
}

/// Visits every index of `dims` in row-major order while tracking the offset of the matching
/// element of another tensor whose per-dimension strides are `strides`. A stride of 0 revisits
/// one element (broadcast reads, reductions); permuted strides read a permuted tensor.
class StridedWalk {
 public:
  StridedWalk(std::span<const std::int64_t> dims, std::span<const std::int64_t> strides) : rank_(dims.size()) {
    for (std::size_t d = 0; d < rank_; ++d) {
      dims_[d] = dims[d];
      strides_[d] = strides[d];
    }
  }

  std::int64_t offset() const { return offset_; }

  /// Advances to the next row-major index (the last dimension fastest).
  void next() {
    for (std::size_t d = rank_; d-- > 0;) {
      ++index_[d];
      offset_ += strides_[d];
      if (index_[d] < dims_[d]) return;
      offset_ -= strides_[d] * dims_[d];
      index_[d] = 0;
    }
  }

 private:
  std::array<std::int64_t, Shape::kMaxRank> dims_{};
  std::array<std::int64_t, Shape::kMaxRank> strides_{};
  std::array<std::int64_t, Shape::kMaxRank> index_{};
  std::size_t rank_;
  std::int64_t offset_ = 0;
};

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
