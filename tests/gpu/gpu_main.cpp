// SPDX-License-Identifier: Apache-2.0
// capsule_gpu_tests' main: the shared runner (tests/runner.hpp) with this build's
// fingerprint plus the CUDA providers' (driver, runtime, cuBLAS, cuDNN, device 0), so a ledger
// written on the GPU machine names the device it ran on. A --ledger or --verify-coverage run is
// refused without a usable device: the parity suites could not run, and a ledger of cases that
// did not run would only say so. `--probe` only prints whether device 0 is usable (exit 0) or
// why not (exit 1): tools/gpu-check.sh asks it before running anything. After a run, the cuDNN
// plans it built are listed, one line each.
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/build_info.hpp"
#include "capsule/handlers/cuda.hpp"
#if defined(CAPSULE_HAVE_LIBTORCH_CUDA)
#include "capsule/handlers/libtorch.hpp"
#endif
#include "gpu_support.hpp"
#include "runner.hpp"

namespace {

capsule::EnvironmentFingerprint gpu_fingerprint() {
  capsule::EnvironmentFingerprint fingerprint = capsule::current_fingerprint();
  const capsule::EnvironmentFingerprint cuda = capsule::cuda_fingerprint();
  // cuda_fingerprint names the device by the keys a ledger verdict describes a run's device with
  // (`device.cuda`, `device.cuda.driver`): "passed: ... on cuda (NVIDIA H200), driver CUDA 13.0".
  capsule::add_entries(fingerprint, cuda);
#if defined(CAPSULE_HAVE_LIBTORCH_CUDA)
  // Which CUDA runtime, cuBLAS and cuDNN objects the process really loaded: pip's torch brings
  // its own, and one object per soname serves every handler.
  capsule::add_entries(fingerprint, capsule::libtorch_fingerprint());
  capsule::add_entries(fingerprint, capsule::libtorch_cuda_fingerprint());
#endif
  return fingerprint;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--probe") {
    if (auto reason = capsule::gpu_test::device_missing()) {
      std::cout << "no usable CUDA device: " << *reason << "\n";
      return 1;
    }
    const capsule::EnvironmentFingerprint cuda = capsule::cuda_fingerprint();
    std::cout << "CUDA device 0 is usable: " << cuda.get("device.cuda") << " (compute capability "
              << cuda.get("device.cuda.compute_capability") << "), driver " << cuda.get("device.cuda.driver")
              << "\n";
    return 0;
  }
  capsule::testing::TestBinary binary;
  binary.name = "capsule_gpu_tests";
  binary.fingerprint = gpu_fingerprint;
  binary.refuse_evidence_run = []() -> std::optional<std::string> {
    if (auto reason = capsule::gpu_test::device_missing()) {
      return "no usable CUDA device: " + *reason + "; the parity suites need one, so no ledger is written";
    }
    return std::nullopt;
  };
  const int status = capsule::testing::run_test_binary(argc, argv, binary);
  // Which cuDNN graph, layout and engine served each shape the suites ran (a channels-last or
  // channel-padded copy says so in its graph's name), so a GPU run's log shows the path taken.
  const std::vector<std::string> plans = capsule::cudnn_plan_report();
  if (!plans.empty()) std::cout << "cudnn plans built by this run (" << plans.size() << "):\n";
  for (const std::string& line : plans) std::cout << "  " << line << "\n";
  return status;
}
