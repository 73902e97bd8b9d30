// SPDX-License-Identifier: Apache-2.0
// Registration of the cuBLAS handlers (cublas_kernels.cpp), called by register_cuda_handlers.
#pragma once

#include "capsule/runtime/handler.hpp"

namespace capsule::cuda {

/// matmul (and its batches), scaled_matmul and linear on cuBLAS, forward and backend VJP.
RuntimeStatus register_cublas_handlers(HandlerRegistry& registry);

}  // namespace capsule::cuda
