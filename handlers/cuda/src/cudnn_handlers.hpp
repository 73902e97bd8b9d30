// SPDX-License-Identifier: Apache-2.0
// Registration of the cuDNN handlers, called by register_cuda_handlers: conv and conv_transpose
// (cudnn_conv.cpp), max_pool and avg_pool (cudnn_pool.cpp), batch_norm (cudnn_batch_norm.cpp).
#pragma once

#include "capsule/runtime/handler.hpp"

namespace capsule::cuda {

/// Every cuDNN handler, forward and backend VJP.
RuntimeStatus register_cudnn_handlers(HandlerRegistry& registry);

// The parts, each registering its file's handlers.
RuntimeStatus register_cudnn_conv_handlers(HandlerRegistry& registry);
RuntimeStatus register_cudnn_pool_handlers(HandlerRegistry& registry);
RuntimeStatus register_cudnn_norm_handlers(HandlerRegistry& registry);

}  // namespace capsule::cuda
