// SPDX-License-Identifier: Apache-2.0
// The GPU parity suites' support (capsule_gpu_tests): the reference and CUDA handlers, the skip
// without a device, tensors built on the CPU and copied to the device, and the comparisons with
// derived tolerances (parity.cpp says how each bound is derived).
//
// This binary links the engine, the reference and CUDA handlers and doctest only: no CLI and so
// no Boost, because it runs on a bare GPU machine (tools/gpu-check.sh).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "capsule/runtime/handler.hpp"

namespace capsule::gpu_test {

/// The source tree: $CAPSULE_SOURCE_ROOT when set (tools/gpu-check.sh sets it on the GPU machine,
/// where the tree is not where it was built), else the tree this binary was built from.
std::filesystem::path source_root();

/// The reference and CUDA handlers, registered once.
const HandlerRegistry& registry();

/// Why there is no usable CUDA device (cuda_probe()), or nothing when there is one.
std::optional<std::string> device_missing();

/// Without a usable device: prints `capsule-skip: no usable CUDA device: <reason>` (CTest's
/// SKIP_REGULAR_EXPRESSION turns the case into a skip) and returns true; the case then returns.
bool skip_without_device();

/// The CUDA handler of `op` under `provider`, or null when this build registers none. Fetching
/// one records it as exercised by the running suite (suite_coverage.hpp): checks after it are
/// evidence about it in the ledger.
const HandlerSpec* cuda_handler(Op op, Provider provider);
/// The reference CPU handler of `op` (not recorded: the GPU suites cover the CUDA handlers).
const HandlerSpec& reference_handler(Op op);

/// A tensor of `dims` with deterministic values in [lo, hi) rounded to `dtype`.
Tensor random(const std::vector<std::int64_t>& dims, DType dtype, std::uint64_t seed, double lo = -1.0, double hi = 1.0);
/// A tensor of `dims` whose values are pairwise distinct (a permutation of evenly spaced values
/// in [-1, 1)), exactly representable in float32: max pooling has no ties to break.
Tensor distinct(const std::vector<std::int64_t>& dims, DType dtype, std::uint64_t seed);
/// Element-wise |t| in float64 (undefined stays undefined).
Tensor abs64(const Tensor& t);
/// `t` in float64 (undefined stays undefined).
Tensor as64(const Tensor& t);

/// The unit roundoff of `dtype`: 2^-24 for float32, 2^-53 for float64.
double unit_roundoff(DType dtype);

/// Whether `got` equals `want` within factor·magnitude[i] at every element, with equal shapes
/// and dtypes; `detail` names the worst element when not.
struct Comparison {
  bool ok = true;
  std::string detail;
};
Comparison compare(const Tensor& got, const Tensor& want, const Tensor& magnitude, double factor);

/// Copies to the device and back; a failure fails the test case with the error.
Tensor upload(const Tensor& host);
Tensor download(const Tensor& device);
/// The same shape, dtype and bytes.
bool same_bytes(const Tensor& a, const Tensor& b);

}  // namespace capsule::gpu_test
