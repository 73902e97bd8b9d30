// SPDX-License-Identifier: Apache-2.0
// register_cudnn_handlers and the spec the cuDNN handlers share.
#include "capsule/handlers/cuda.hpp"
#include "capsule/text.hpp"
#include "cudnn_graph.hpp"
#include "cudnn_handlers.hpp"

namespace capsule::cuda {

HandlerSpec cudnn_spec(Op op, ForwardKernel forward, BackwardKernel backward) {
  HandlerSpec spec;
  spec.name = str("cuDNN CUDA ", to_string(op));
  spec.op = op;
  spec.provider = Provider::Cudnn;
  spec.device = Device::Cuda;
  spec.layouts = {Layout::FlatRowMajor};
  spec.guards = {std::string(kCudaShapeGuard), std::string(kCudaLayoutGuard)};
  spec.forward = forward;
  spec.backward = backward;
  spec.backend_vjp = true;  // every adjoint is a cuDNN graph (or our per-channel bias sum) on the device
  return spec;
}

RuntimeStatus register_cudnn_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(register_cudnn_conv_handlers(registry));
  CAPSULE_CHECK(register_cudnn_pool_handlers(registry));
  CAPSULE_CHECK(register_cudnn_norm_handlers(registry));
  return std::monostate{};
}

}  // namespace capsule::cuda

namespace capsule {

std::vector<std::string> cudnn_plan_report() { return cuda::plan_report(); }

}  // namespace capsule
