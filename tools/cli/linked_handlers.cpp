// SPDX-License-Identifier: Apache-2.0
#include "linked_handlers.hpp"

#include "capsule/build_info.hpp"
#include "capsule/handlers/reference.hpp"
#if defined(CAPSULE_HAVE_LIBTORCH)
#include "capsule/handlers/libtorch.hpp"
#endif
#if defined(CAPSULE_HAVE_CUDA)
#include "capsule/handlers/cuda.hpp"
#endif

namespace capsule::cli {

RuntimeStatus register_linked_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(register_reference_handlers(registry));
#if defined(CAPSULE_HAVE_LIBTORCH)
  CAPSULE_CHECK(register_libtorch_handlers(registry));
#endif
#if defined(CAPSULE_HAVE_CUDA)
  // Registering needs no device: a CUDA profile then fails at session open with the probe's reason.
  CAPSULE_CHECK(register_cuda_handlers(registry));
#endif
#if defined(CAPSULE_HAVE_LIBTORCH_CUDA)
  // After the CUDA runtime: the LibTorch CUDA handlers run on its device and stream.
  CAPSULE_CHECK(register_libtorch_cuda_handlers(registry));
#endif
  return std::monostate{};
}

EnvironmentFingerprint linked_fingerprint() {
  EnvironmentFingerprint fingerprint = current_fingerprint();
#if defined(CAPSULE_HAVE_LIBTORCH)
  add_entries(fingerprint, libtorch_fingerprint());
#endif
#if defined(CAPSULE_HAVE_CUDA)
  add_entries(fingerprint, cuda_fingerprint());
#endif
#if defined(CAPSULE_HAVE_LIBTORCH_CUDA)
  add_entries(fingerprint, libtorch_cuda_fingerprint());
#endif
  return fingerprint;
}

std::vector<examples::ProviderBoundaryCopies> linked_boundary_copies() {
  std::vector<examples::ProviderBoundaryCopies> providers;
#if defined(CAPSULE_HAVE_LIBTORCH)
  examples::ProviderBoundaryCopies libtorch{Provider::Libtorch, {}};
  for (const LibTorchBoundaryCopies& op : libtorch_boundary_copies()) libtorch.by_op.push_back({op.op, op.total()});
  providers.push_back(std::move(libtorch));
#endif
  return providers;
}

}  // namespace capsule::cli
