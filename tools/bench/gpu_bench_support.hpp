// SPDX-License-Identifier: Apache-2.0
// What the GPU benchmark programs (gpu_bench.cpp, gpu_bench_libtorch.cpp) share: failing with a
// message, random device tensors, their command line, the device probe and the shipped workspace.
// Header-only: each program is one translation unit.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/handlers/cuda.hpp"
#include "capsule/load.hpp"
#include "capsule/text.hpp"

namespace capsule::bench {

/// The running program's name, for its messages (set by gpu_bench_start).
inline std::string& gpu_bench_name() {
  static std::string name = "capsule_gpu_bench";
  return name;
}

[[noreturn]] inline void die(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", gpu_bench_name().c_str(), message.c_str());
  std::exit(1);
}

template <class T>
T expect(RuntimeResult<T> result, std::string_view what) {
  if (!result) die(str(what, ": ", result.error().message));
  return std::move(result).value();
}

/// A float32 tensor of uniform values in [-1, 1) on the device.
inline Tensor random_device_tensor(const std::vector<std::int64_t>& dims, std::mt19937& rng) {
  Shape shape = expect(Shape::make(dims), "shape");
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  for (double& v : values) v = uniform(rng);
  Tensor host = expect(Tensor::from_values(shape, DType::F32, values), "host tensor");
  return expect(to_device(host), "to_device");
}

struct GpuBenchStart {
  bool quick = false;
  Workspace workspace;
};

/// Parses `[--source REPO_ROOT] [--quick]`, probes the device and loads the shipped catalogs and
/// profiles. Exits 1 on a bad command line or catalog, and 2, printing the probe's reason as a
/// `capsule-skip:` line, without a usable device.
inline GpuBenchStart gpu_bench_start(std::string name, int argc, char** argv, std::filesystem::path source) {
  gpu_bench_name() = std::move(name);
  GpuBenchStart start;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--source" && i + 1 < argc) {
      source = argv[++i];
    } else if (arg == "--quick") {
      start.quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--source REPO_ROOT] [--quick]\n", gpu_bench_name().c_str());
      std::exit(1);
    }
  }
  if (std::string reason = cuda_probe(); !reason.empty()) {
    std::printf("capsule-skip: no usable CUDA device: %s\n", reason.c_str());
    std::exit(2);
  }
  start.workspace = load_workspace({source / "catalogs"}, {source / "profiles"});
  if (has_errors(start.workspace.diagnostics)) {
    die("the shipped catalogs failed to load:\n" + render(start.workspace.diagnostics));
  }
  return start;
}

}  // namespace capsule::bench
