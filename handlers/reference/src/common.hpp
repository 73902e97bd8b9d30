// SPDX-License-Identifier: Apache-2.0
// Shared pieces of the reference kernels: the handler description every reference kernel
// registers with, and dtype dispatch. Kernels are compiled with -ffp-contract=off so that a
// fixed-left sum is exactly `acc = acc + term` in index order, with no fused multiply-add.
#pragma once

#include <source_location>
#include <string>

#include "capsule/handlers/reference.hpp"
#include "capsule/text.hpp"

namespace capsule::reference {

/// The handler description for one reference op. Every reference handler accepts canonical and
/// flat row-major tensors (ours are both) and enforces the shape and layout guards.
inline HandlerSpec spec_for(Op op, ForwardKernel forward, BackwardKernel backward) {
  HandlerSpec spec;
  spec.name = str("TorchLean reference CPU ", to_string(op));
  spec.op = op;
  spec.provider = Provider::Reference;
  spec.device = Device::Cpu;
  spec.layouts = {Layout::CanonicalTensor, Layout::FlatRowMajor};
  spec.guards = {std::string(kReferenceShapeGuard), std::string(kReferenceLayoutGuard)};
  if (op == Op::ScaledDotProductAttention) spec.guards.emplace_back(kReferenceAttentionGuard);
  spec.forward = forward;
  spec.backward = backward;
  spec.backend_vjp = false;  // the reference catalog lets the TorchLean tape own every VJP
  return spec;
}

/// Calls `fn.template operator()<T>()` with T = float or double per `dtype`.
template <class Fn>
decltype(auto) with_dtype(DType dtype, Fn&& fn) {
  if (dtype == DType::F32) return fn.template operator()<float>();
  return fn.template operator()<double>();
}

// Each kernel family registers its own handlers; register_reference_handlers calls them all.
RuntimeStatus register_elementwise_handlers(HandlerRegistry& registry);  // kernels_elementwise.cpp
RuntimeStatus register_shape_handlers(HandlerRegistry& registry);        // kernels_shape.cpp
RuntimeStatus register_linalg_handlers(HandlerRegistry& registry);       // kernels_linalg.cpp
RuntimeStatus register_nn_handlers(HandlerRegistry& registry);           // kernels_nn.cpp

}  // namespace capsule::reference
