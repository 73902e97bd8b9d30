// SPDX-License-Identifier: Apache-2.0
// The handler spec every vendor CUDA handler (cuBLAS, cuDNN) shares.
#pragma once

#include "capsule/runtime/handler.hpp"

namespace capsule::cuda {

/// Provider `provider` (cublas or cudnn), device cuda, flat row-major buffers, the CUDA shape and
/// layout guards (capsule/handlers/cuda.hpp), and the handler's own complete backward
/// (backend_vjp: every adjoint is a library call, or one of our small kernels, on the device).
HandlerSpec vendor_cuda_spec(Op op, Provider provider, ForwardKernel forward, BackwardKernel backward);

}  // namespace capsule::cuda
