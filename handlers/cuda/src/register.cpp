// SPDX-License-Identifier: Apache-2.0
// register_cuda_handlers: the CUDA device runtime, then each vendor library's handlers.
#include "capsule/handlers/cuda.hpp"
#include "cublas_handlers.hpp"
#include "cudnn_handlers.hpp"

namespace capsule {

RuntimeStatus register_cuda_handlers(HandlerRegistry& registry) {
  registry.add_device_runtime(Device::Cuda, std::string(kCudaRuntimeName), &cuda_probe, &full_on_device);
  CAPSULE_CHECK(cuda::register_cublas_handlers(registry));
  CAPSULE_CHECK(cuda::register_cudnn_handlers(registry));
  return std::monostate{};
}

}  // namespace capsule
