// SPDX-License-Identifier: Apache-2.0
#include "workloads.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <string_view>
#include <utility>

#include "rng.hpp"

namespace capsule::bench {
namespace {

struct Weighted {
  Op op;
  unsigned weight;
};

// Roughly what a transformer/MLP step plans: dense layers and elementwise glue dominate, then
// shape ops, norms, softmax and attention. Every other plannable op gets the tail weight.
constexpr std::array<Weighted, 28> kMix{{
    {Op::Linear, 120}, {Op::Add, 110}, {Op::Reshape, 90}, {Op::Matmul, 60}, {Op::Mul, 50},
    {Op::Permute, 45}, {Op::Broadcast, 45}, {Op::Relu, 40}, {Op::Gelu, 40}, {Op::LayerNorm, 40},
    {Op::Softmax, 30}, {Op::ScaledDotProductAttention, 25}, {Op::Silu, 20}, {Op::ScaledMatmul, 15},
    {Op::Slice, 15}, {Op::Concat, 12}, {Op::Gather, 12}, {Op::ReduceSum, 12}, {Op::ReduceMean, 12},
    {Op::Scale, 10}, {Op::Sub, 10}, {Op::Div, 8}, {Op::Sqrt, 8}, {Op::Exp, 8}, {Op::Tanh, 8},
    {Op::Sigmoid, 8}, {Op::BernoulliMask, 8}, {Op::CrossEntropy, 5},
}};
constexpr unsigned kTailWeight = 2;

bool checked_cpu_plans(Op op) { return op != Op::FftFno && op != Op::SelectiveScan && op != Op::Custom; }

GraphNode node(std::uint32_t id, std::string_view kind, std::vector<std::uint32_t> inputs) {
  GraphNode n;
  n.id = id;
  n.kind = std::string(kind);
  bool known = false;
  n.op = ir_node_op(kind, known);
  n.inputs = std::move(inputs);
  return n;
}

}  // namespace

std::vector<Op> checked_cpu_op_mix(std::size_t count, std::uint64_t seed) {
  std::array<unsigned, kOpCount> weights{};
  for (const Op op : all_values<Op>()) weights[static_cast<std::size_t>(op)] = checked_cpu_plans(op) ? kTailWeight : 0;
  for (const Weighted& w : kMix) weights[static_cast<std::size_t>(w.op)] = w.weight;
  // A lookup table with one slot per unit of weight makes each draw O(1).
  std::vector<Op> table;
  for (const Op op : all_values<Op>()) table.insert(table.end(), weights[static_cast<std::size_t>(op)], op);

  std::vector<Op> ops;
  ops.reserve(count);
  Rng rng{seed};
  for (std::size_t i = 0; i < count; ++i) ops.push_back(table[rng.below(table.size())]);
  // Make sure the whole plannable vocabulary is present, however short the list.
  std::size_t slot = 0;
  for (const Op op : all_values<Op>()) {
    if (checked_cpu_plans(op) && slot < ops.size()) ops[slot++ * 7919 % ops.size()] = op;
  }
  return ops;
}

std::vector<Op> mlp_ops() {
  return {Op::Linear, Op::Matmul, Op::Add, Op::Mul, Op::Relu, Op::Gelu, Op::Reshape, Op::Permute,
          Op::Broadcast, Op::LayerNorm, Op::Softmax, Op::ScaledDotProductAttention};
}

std::vector<Op> op_list(const std::vector<Op>& ops, std::size_t count, std::uint64_t seed) {
  std::vector<Op> out;
  out.reserve(count);
  Rng rng{seed};
  for (std::size_t i = 0; i < count; ++i) out.push_back(ops[rng.below(ops.size())]);
  return out;
}

Graph mlp_graph(std::size_t nodes) {
  Graph graph;
  graph.name = "synthetic-mlp";
  graph.nodes.reserve(nodes);
  if (nodes == 0) return graph;
  graph.nodes.push_back(node(0, "input", {}));
  std::uint32_t next = 1;
  std::uint32_t activation = 0;  // the id of the previous layer's output
  const auto add = [&](std::string_view kind, std::vector<std::uint32_t> inputs) {
    if (graph.nodes.size() < nodes) graph.nodes.push_back(node(next, kind, std::move(inputs)));
    return next++;
  };
  while (graph.nodes.size() < nodes) {
    const std::uint32_t flat = add("reshape", {activation});
    const std::uint32_t weight = add("const", {});
    const std::uint32_t weight_t = add("transpose", {weight});
    const std::uint32_t product = add("matmul", {flat, weight_t});
    const std::uint32_t bias = add("const", {});
    const std::uint32_t bias_b = add("broadcast_to", {bias});
    const std::uint32_t sum = add("add", {product, bias_b});
    const std::uint32_t shaped = add("reshape", {sum});
    activation = add("relu", {shaped});
  }
  return graph;
}

GraphKernelPlan uniform_plan(Op op, const Capsule* capsule, std::size_t kernels) {
  GraphKernelPlan plan;
  plan.node_count = kernels;
  plan.kernels.reserve(kernels);
  for (std::size_t i = 0; i < kernels; ++i) {
    const auto id = static_cast<std::uint32_t>(i);
    plan.kernels.push_back(PlannedNodeKernel{id, id, op, capsule});
  }
  return plan;
}

std::vector<ModulePtr> restrict_to_ops(const std::vector<ModulePtr>& modules, const std::vector<Op>& ops) {
  std::vector<ModulePtr> out;
  for (const ModulePtr& module : modules) {
    auto copy = std::make_shared<CapsuleModule>();
    copy->name = module->name;
    copy->source = module->source;
    copy->where = module->where;
    for (const Capsule& c : module->capsules) {
      if (std::find(ops.begin(), ops.end(), c.op) != ops.end()) copy->capsules.push_back(c);
    }
    if (!copy->capsules.empty()) out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace capsule::bench
