// SPDX-License-Identifier: Apache-2.0
// The LibTorch CUDA twins held to the LibTorch parity table (libtorch_cuda_table.cpp).
#pragma once

#include <vector>

#include "capsule/vocab.hpp"

namespace capsule::gpu_test {

/// The ops whose CUDA twins the libtorch.cuda suites check with the LibTorch parity tables: every
/// op of the main table and of the attention table except those with their own GPU cases
/// (parity_ops(Provider::Libtorch)) and scaled_dot_product_attention (TorchLean's pair, declared
/// in catalogs/libtorch.toml). These are the ops of catalogs/libtorch-cuda-model.toml
/// (test_cuda_device_free.cpp checks that).
std::vector<Op> libtorch_table_ops();

/// The body of one op's value or VJP case: every case of `op` in its table, in float32 and
/// float64, with the twin on the device. Without a device it skips with the probe's reason.
void run_libtorch_table(Op op, Obligation obligation);

/// The body of the value or VJP case of the pointwise ops' special-value classes (NaN, ±inf, ±0,
/// a denormal, …; parity_table.hpp, for_each_special): the plain twins on the device against the
/// reference, the adjoints with finite and non-finite output gradients.
void run_libtorch_specials(Obligation obligation);

/// The body of the value or VJP case of the other ops' hand-made special-value cases
/// (special_cases.hpp: softmax family, smooth_max_pool, norms, clamp's ties, reductions,
/// products, convolutions, pools, losses, shape ops), the plain twins on the device.
void run_libtorch_special_cases(Obligation obligation);

}  // namespace capsule::gpu_test
