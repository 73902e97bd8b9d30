// SPDX-License-Identifier: Apache-2.0
// capsule_bench_torch's comparison 5, the LibTorch provider's overhead per call
// (libtorch_overhead.cpp), for torch_compare.cpp's main.
#pragma once

#include <cstdint>

#include "torch_bench_support.hpp"

#if defined(CAPSULE_HAVE_LIBTORCH)
namespace capsule::torch_bench {

/// add, matmul and two conv2d cases through the libtorch_cpu session against ATen called
/// directly; the large conv2d in fresh child processes (conv_overhead_child). `scale` divides the
/// iteration counts (10 under --capsule_quick).
void bench_libtorch_overhead(Verdicts& verdicts, std::int64_t scale);

/// The body of a child process of bench_libtorch_overhead (--capsule_only=lt_conv_child): prints
/// its one `capsule-conv-child` line.
void conv_overhead_child(bool quick);

/// The LibTorch provider's entries of the fingerprint: its BLAS, core and threads.
void print_libtorch_fingerprint();

}  // namespace capsule::torch_bench
#endif
