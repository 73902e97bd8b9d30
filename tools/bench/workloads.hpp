// SPDX-License-Identifier: Apache-2.0
// Benchmark inputs built in memory: realistic op lists, MLP-shaped IR graphs, and registries
// padded with capsules for other ops. Everything is deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "capsule/catalog.hpp"
#include "capsule/planner.hpp"

namespace capsule::bench {

/// `count` ops drawn from a weighted mix of what transformer and MLP programs plan (linear,
/// add, reshape, matmul, activations, norms, attention, ...). Every op `checked_cpu` can plan
/// appears (all but fft_fno, selective_scan and custom).
std::vector<Op> checked_cpu_op_mix(std::size_t count, std::uint64_t seed = 7);

/// The ops of an MLP or transformer block: the op list of the index-by-op scaling benchmark.
std::vector<Op> mlp_ops();
/// `count` ops drawn uniformly from `ops`.
std::vector<Op> op_list(const std::vector<Op>& ops, std::size_t count, std::uint64_t seed = 11);

/// One `input` node, then MLP layers as TorchLean lowers `linear` + `relu` (TorchLean §10.8): reshape,
/// const weight, transpose, matmul, const bias, broadcast_to, add, reshape, relu. Exactly `nodes`
/// nodes; the last layer may be cut short.
Graph mlp_graph(std::size_t nodes);

/// A graph plan of `kernels` consecutive kernels of `op` with `capsule`: the case where
/// coalescing merges everything into one group.
GraphKernelPlan uniform_plan(Op op, const Capsule* capsule, std::size_t kernels);

/// Modules whose capsules implement only `ops`, taken from `modules` (order kept).
std::vector<ModulePtr> restrict_to_ops(const std::vector<ModulePtr>& modules, const std::vector<Op>& ops);

}  // namespace capsule::bench
