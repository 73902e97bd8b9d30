// SPDX-License-Identifier: Apache-2.0
// The vendor parity suites: which ops each provider's suites cover, and the test bodies.
#pragma once

#include <vector>

#include "capsule/vocab.hpp"

namespace capsule::gpu_test {

/// The ops the parity tables have cases for, per provider (the catalogs' capsules must be among
/// them: test_cuda_device_free.cpp checks that).
const std::vector<Op>& parity_ops(Provider provider);

/// parity_ops(provider) whose CUDA handler this build registers: what the suites declare and run.
std::vector<Op> registered_parity_ops(Provider provider);

/// The bodies of one op's value and VJP test cases. Without a device they skip with the probe's
/// reason. A provider whose handler this build does not register (cuDNN before its handlers
/// land) skips saying so; a cuBLAS handler is required.
void run_value_parity(Op op, Provider provider);
void run_vjp_parity(Op op, Provider provider);

}  // namespace capsule::gpu_test
