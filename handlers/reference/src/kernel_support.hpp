// SPDX-License-Identifier: Apache-2.0
// Operand checks and index walks shared by the elementwise and shape kernels: every kernel starts
// by checking its operands the same way, and every strided copy or reduction walks indices the
// same way, so "fixed-left" means one visiting order everywhere.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "common.hpp"

namespace capsule::reference {

/// Each operand is a defined CPU tensor and all share one dtype. Checked before any data() call,
/// since data() asserts on undefined or non-CPU storage.
inline RuntimeStatus expect_operands(Op op, std::span<const Tensor> inputs) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(to_string(op), ": input ", i, " is an undefined tensor; expected a tensor"));
    }
    if (inputs[i].device() != Device::Cpu) {
      return runtime_error(RuntimeCode::DeviceUnavailable,
                           str(to_string(op), ": input ", i, " lives on device `", to_string(inputs[i].device()),
                               "`; the reference handlers expect device `cpu`"));
    }
  }
  return expect_same_dtype(to_string(op), inputs);
}

/// Exactly `count` inputs, each passing expect_operands.
inline RuntimeStatus expect_inputs(Op op, std::span<const Tensor> inputs, std::size_t count) {
  if (inputs.size() != count) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(to_string(op), ": got ", inputs.size(), " inputs; expected ", count));
  }
  return expect_operands(op, inputs);
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

}  // namespace capsule::reference
