// SPDX-License-Identifier: Apache-2.0
// The LibTorch CUDA twins held to the LibTorch parity table (libtorch_cuda_table.cpp).
#pragma once

#include <vector>

#include "capsule/vocab.hpp"

namespace capsule::gpu_test {

/// The ops whose CUDA twins the libtorch.cuda suites check with the LibTorch parity table: every op
/// of the table except those with their own GPU cases (parity_ops(Provider::Libtorch)). These are
/// the ops of catalogs/libtorch-cuda-model.toml (test_cuda_device_free.cpp checks that).
std::vector<Op> libtorch_table_ops();

/// The body of one op's value or VJP case: every table case of `op`, in float32 and float64, with
/// the twin on the device. Without a device it skips with the probe's reason.
void run_libtorch_table(Op op, Obligation obligation);

}  // namespace capsule::gpu_test
