// SPDX-License-Identifier: Apache-2.0
// register_cudnn_handlers: the cuDNN handler families, each registered by its own file.
#include "capsule/handlers/cuda.hpp"
#include "capsule/text.hpp"
#include "cudnn_graph.hpp"
#include "cudnn_handlers.hpp"

namespace capsule::cuda {

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
