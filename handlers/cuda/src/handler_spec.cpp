// SPDX-License-Identifier: Apache-2.0
// The shared vendor CUDA handler spec (handler_spec.hpp).
#include "handler_spec.hpp"

#include "capsule/handlers/cuda.hpp"
#include "capsule/text.hpp"

namespace capsule::cuda {

HandlerSpec vendor_cuda_spec(Op op, Provider provider, ForwardKernel forward, BackwardKernel backward) {
  HandlerSpec spec;
  spec.name = str(provider == Provider::Cublas ? "cuBLAS" : "cuDNN", " CUDA ", to_string(op));
  spec.op = op;
  spec.provider = provider;
  spec.device = Device::Cuda;
  spec.layouts = {Layout::FlatRowMajor};
  spec.guards = {std::string(kCudaShapeGuard), std::string(kCudaLayoutGuard)};
  spec.forward = forward;
  spec.backward = backward;
  spec.backend_vjp = true;
  return spec;
}

}  // namespace capsule::cuda
