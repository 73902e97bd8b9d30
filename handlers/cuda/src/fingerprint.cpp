// SPDX-License-Identifier: Apache-2.0
// The CUDA providers' entries of the environment fingerprint (docs/fingerprint.md): the driver,
// the runtime, cuBLAS and cuDNN, each as compiled against and as loaded, the shared objects the
// handlers really call (a process that also loads pip's torch can hold a second cuBLAS or cuDNN),
// and device 0 (`device.cuda`, `device.cuda.driver`, the keys a ledger verdict names a run's
// device by). Read from the running process; asking starts no stream and no pool.
#include <cublas_v2.h>
#include <cudnn.h>
#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "capsule/handlers/cuda.hpp"
#include "capsule/text.hpp"
#include "device.hpp"

#ifndef CAPSULE_CUDA_ARCHITECTURES
#define CAPSULE_CUDA_ARCHITECTURES "unknown"
#endif

namespace capsule {
namespace {

std::string cuda_version_text(int version) { return str(version / 1000, ".", (version % 1000) / 10); }

/// The canonical path of the shared object that defines the function at `address`, or "".
template <class Fn>
std::string object_path(Fn* function) {
  void* address = nullptr;
  std::memcpy(&address, &function, sizeof address);
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return {};
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) != nullptr ? std::string(resolved) : std::string(info.dli_fname);
}

}  // namespace

std::vector<std::string> loaded_shared_objects(std::string_view prefix) {
  struct Search {
    std::string_view prefix;
    std::vector<std::string> found;
  } search{prefix, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        const std::string_view path = info->dlpi_name == nullptr ? std::string_view() : info->dlpi_name;
        const std::size_t slash = path.rfind('/');
        const std::string_view file = slash == std::string_view::npos ? path : path.substr(slash + 1);
        if (file.starts_with(s->prefix)) s->found.emplace_back(path);
        return 0;
      },
      &search);
  return search.found;
}

EnvironmentFingerprint cuda_fingerprint() {
  EnvironmentFingerprint fingerprint;
  fingerprint.set("provider.cuda.architectures", CAPSULE_CUDA_ARCHITECTURES);
  fingerprint.set("provider.cuda.runtime.compiled", cuda_version_text(CUDART_VERSION));
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
    fingerprint.set("provider.cuda.runtime.loaded", cuda_version_text(runtime));
  }
  fingerprint.set("provider.cuda.runtime.library", object_path(&cudaRuntimeGetVersion));
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  // device.cuda.* are the keys ledger verdicts name a run's device by (ledger_verdict.cpp).
  fingerprint.set("device.cuda.driver", driver == 0 ? std::string("none") : str("CUDA ", cuda_version_text(driver)));

  fingerprint.set("provider.cuda.cublas.compiled", str(CUBLAS_VER_MAJOR, ".", CUBLAS_VER_MINOR, ".", CUBLAS_VER_PATCH));
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
    fingerprint.set("provider.cuda.cublas.loaded", str(major, ".", minor, ".", patch));
  }
  fingerprint.set("provider.cuda.cublas.library", object_path(&cublasSgemm_v2));
  fingerprint.set("provider.cuda.cudnn.compiled", str(CUDNN_MAJOR, ".", CUDNN_MINOR, ".", CUDNN_PATCHLEVEL));
  const std::size_t cudnn = cudnnGetVersion();
  fingerprint.set("provider.cuda.cudnn.loaded", str(cudnn / 10000, ".", (cudnn % 10000) / 100, ".", cudnn % 100));
  fingerprint.set("provider.cuda.cudnn.library", object_path(&cudnnGetVersion));
  // cuDNN 9's libcudnn.so.9 is a shim that loads its parts (libcudnn_graph, _engines_precompiled,
  // _engines_runtime_compiled, _heuristic, _ops, _cnn, _adv) on first use, from wherever the
  // loader finds them. A ledger run asks at its end, so these are the parts its suites used.
  const std::vector<std::string> parts = loaded_shared_objects("libcudnn_");
  fingerprint.set("provider.cuda.cudnn.parts", parts.empty() ? std::string("not loaded") : join(parts, ", "));

  int count = 0;
  if (driver != 0 && cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, 0) == cudaSuccess) {
      props.name[sizeof props.name - 1] = '\0';
      fingerprint.set("device.cuda", props.name);
      fingerprint.set("device.cuda.compute_capability", str(props.major, ".", props.minor));
    }
  } else {
    fingerprint.set("device.cuda", "none");
  }
  return fingerprint;
}

}  // namespace capsule
