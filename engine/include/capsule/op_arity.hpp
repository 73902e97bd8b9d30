// SPDX-License-Identifier: Apache-2.0
// How many inputs each op takes: the one table of the calling conventions written out in
// capsule/runtime/op_args.hpp. The graph loader checks node arity against it; a handler that
// accepts another count would break the convention every provider implements.
#pragma once

#include <cstddef>
#include <limits>

#include "capsule/vocab.hpp"

namespace capsule {

struct OpArity {
  std::size_t min = 0;
  std::size_t max = std::numeric_limits<std::size_t>::max();  ///< unbounded for concat
  bool known = true;  ///< false: the op's convention is not fixed here (fft_fno, selective_scan, custom)
};

constexpr OpArity op_arity(Op op) {
  switch (op) {
    case Op::RandUniform: case Op::BernoulliMask:
      return {0, 0};
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Max: case Op::Min:
    case Op::HardMaskedSoftmax: case Op::ScatterAdd:
    case Op::Matmul: case Op::ScaledMatmul: case Op::SoftmaxMatmul:
    case Op::MseLoss: case Op::CrossEntropy: case Op::Distill:
      return {2, 2};
    case Op::Neg: case Op::Abs: case Op::Sqrt: case Op::Relu: case Op::Gelu: case Op::Sigmoid: case Op::Silu:
    case Op::Tanh: case Op::Softplus: case Op::Exp: case Op::Log: case Op::Sin: case Op::Cos: case Op::Inv:
    case Op::Scale: case Op::Clamp: case Op::SafeLog: case Op::Softmax: case Op::LogSoftmax: case Op::TopKMask:
    case Op::ReduceSum: case Op::ReduceMean: case Op::Reshape: case Op::Permute: case Op::Broadcast:
    case Op::Slice: case Op::Gather: case Op::MaxPool: case Op::AvgPool: case Op::SmoothMaxPool:
      return {1, 1};
    case Op::Concat:
      return {1, std::numeric_limits<std::size_t>::max()};
    case Op::Linear: case Op::Conv: case Op::ConvTranspose:
      return {2, 3};
    case Op::LayerNorm: case Op::BatchNorm:
      return {1, 3};
    case Op::ScaledDotProductAttention:
      return {3, 4};
    case Op::FftFno: case Op::SelectiveScan: case Op::Custom:
      return {0, std::numeric_limits<std::size_t>::max(), false};
  }
  return {0, std::numeric_limits<std::size_t>::max(), false};
}

}  // namespace capsule
