// SPDX-License-Identifier: Apache-2.0
// Models, losses, optimizers and a trainer on top of the eager Session (issue item 7).
//
// A model never names a profile or a device: every layer takes the `Session&` it runs in, and
// every tensor computation — forward, loss and the optimizer's update — is a `session.call`, so
// one model runs unchanged under any profile and the session's "capsules used" report names every
// capsule that touched a number. A model also lowers to the IR graph of docs/format.md#graphs, node for node
// what its eager forward runs, so `capsule plan --graph` audits exactly the ops training uses.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "capsule/catalog.hpp"
#include "capsule/runtime/session.hpp"

namespace capsule {

/// A trainable tensor of a model. Optimizers replace `value` with the tensor their update
/// computed; `var` is `value` as seen by the session of the current step.
struct Parameter {
  std::string name;  ///< e.g. `linear1.weight`; the name of its `const` node in the IR graph
  Tensor value;
  Var var;
  /// The session `var` belongs to; a layer rebinds a parameter used in another session, or whose
  /// value an optimizer replaced.
  const Session* session = nullptr;
};

/// A value flowing through a lowering: the IR node that produces it and its shape.
struct LoweredValue {
  std::uint32_t node = 0;
  std::vector<std::int64_t> shape;
};

/// Appends IR nodes with dense ids in creation order; payload values are TOML renderings, as the
/// graph loader keeps them.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name) { graph_.name = std::move(name); }
  /// Adds a node of `kind` (an op name, IR spelling, `input` or `const`) and returns its id.
  std::uint32_t add(std::string kind, std::vector<std::uint32_t> inputs,
                    std::vector<std::pair<std::string, std::string>> payload = {});
  const Graph& graph() const { return graph_; }
  Graph take() && { return std::move(graph_); }

 private:
  Graph graph_;
};

/// `[1, 4]`, the TOML rendering of a shape or integer list.
std::string toml_int_list(std::span<const std::int64_t> values);

/// A layer or a composition of layers. Implementations run every computation through the
/// session they are given and never store one.
class Module {
 public:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  /// A short description, e.g. `linear 4 8`.
  virtual std::string describe() const = 0;
  /// Runs the layer on `x` in `session`. Parameters not yet bound to this session's current
  /// step are bound on first use (see bind_parameters).
  virtual RuntimeResult<Var> forward(Session& session, const Var& x) = 0;
  /// Appends the nodes the eager forward runs on an input of `input`'s shape.
  virtual RuntimeResult<LoweredValue> lower(GraphBuilder& graph, const LoweredValue& input) const = 0;
  /// Every op forward may call (for a session's `preselect`).
  virtual std::vector<Op> ops() const = 0;
  /// The module's parameters, in a fixed order.
  virtual std::vector<Parameter*> parameters() { return {}; }

  /// The stem a Sequential numbers this layer's parameters with (`linear` -> `linear1`), or ""
  /// for a layer without parameters.
  virtual std::string name_stem() const { return {}; }
  /// Sets the prefix of parameter names (`linear1` gives `linear1.weight`, `linear1.bias`).
  virtual void set_name(const std::string& name) { (void)name; }

 protected:
  // Concrete layers move (a model can be built by a function and returned); moving through a
  // base reference would slice, so the base's moves are not public.
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;
};

/// y = x·Wᵀ + b with W [out, in] and b [out]. A single sample [in] runs TorchLean's IR lowering
/// (reshape to [1, in], transpose W, matmul, broadcast b, add, reshape to [out]); a batch
/// [n, in] the same without the reshapes.
class Linear final : public Module {
 public:
  /// Weights and bias uniform in ±1/sqrt(in) from a splitmix64 stream seeded with `seed`.
  Linear(std::int64_t in, std::int64_t out, std::uint64_t seed, DType dtype = DType::F32);
  std::string describe() const override;
  RuntimeResult<Var> forward(Session& session, const Var& x) override;
  RuntimeResult<LoweredValue> lower(GraphBuilder& graph, const LoweredValue& input) const override;
  std::vector<Op> ops() const override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  std::string name_stem() const override { return "linear"; }
  void set_name(const std::string& name) override;

  Parameter& weight() { return weight_; }
  Parameter& bias() { return bias_; }

 private:
  std::int64_t in_;
  std::int64_t out_;
  Parameter weight_;
  Parameter bias_;
};

class ReLU final : public Module {
 public:
  std::string describe() const override { return "relu"; }
  RuntimeResult<Var> forward(Session& session, const Var& x) override;
  RuntimeResult<LoweredValue> lower(GraphBuilder& graph, const LoweredValue& input) const override;
  std::vector<Op> ops() const override { return {Op::Relu}; }
};

/// 2-D convolution of x [n, c, h, w] with W [out, c, k, k] and bias [out] (the `conv` op).
class Conv2d final : public Module {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel, std::uint64_t seed,
         std::int64_t stride = 1, std::int64_t padding = 0, DType dtype = DType::F32);
  std::string describe() const override;
  RuntimeResult<Var> forward(Session& session, const Var& x) override;
  RuntimeResult<LoweredValue> lower(GraphBuilder& graph, const LoweredValue& input) const override;
  std::vector<Op> ops() const override { return {Op::Conv}; }
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  std::string name_stem() const override { return "conv"; }
  void set_name(const std::string& name) override;

 private:
  std::int64_t in_channels_;
  std::int64_t out_channels_;
  std::int64_t kernel_;
  std::int64_t stride_;
  std::int64_t padding_;
  Parameter weight_;
  Parameter bias_;
};

/// Max pooling over k×k windows of x [n, c, h, w] (stride k, no padding).
class MaxPool2d final : public Module {
 public:
  explicit MaxPool2d(std::int64_t kernel) : kernel_(kernel) {}
  std::string describe() const override;
  RuntimeResult<Var> forward(Session& session, const Var& x) override;
  RuntimeResult<LoweredValue> lower(GraphBuilder& graph, const LoweredValue& input) const override;
  std::vector<Op> ops() const override { return {Op::MaxPool}; }

 private:
  std::int64_t kernel_;
};

/// [n, d1, d2, ...] -> [n, d1·d2·...] (a `reshape`; IR spelling `flatten`).
class Flatten final : public Module {
 public:
  std::string describe() const override { return "flatten"; }
  RuntimeResult<Var> forward(Session& session, const Var& x) override;
  RuntimeResult<LoweredValue> lower(GraphBuilder& graph, const LoweredValue& input) const override;
  std::vector<Op> ops() const override { return {Op::Reshape}; }
};

/// Layers applied in order. Layers with parameters are named by kind and position among layers
/// of that kind: `linear1`, `linear2`, `conv1`.
class Sequential final : public Module {
 public:
  Sequential() = default;
  /// Appends `layer` and names its parameters.
  Sequential& add(std::unique_ptr<Module> layer);
  template <class Layer, class... Args>
  Sequential& emplace(Args&&... args) {
    return add(std::make_unique<Layer>(std::forward<Args>(args)...));
  }

  std::string describe() const override;
  RuntimeResult<Var> forward(Session& session, const Var& x) override;
  RuntimeResult<LoweredValue> lower(GraphBuilder& graph, const LoweredValue& input) const override;
  std::vector<Op> ops() const override;
  std::vector<Parameter*> parameters() override;
  std::size_t size() const { return layers_.size(); }

 private:
  std::vector<std::unique_ptr<Module>> layers_;
  std::vector<std::pair<std::string, int>> stem_counts_;  // layers named so far, per stem
};

/// The IR graph (docs/format.md#graphs) of `model` on one input of `input_shape`: an `input` node, then each
/// layer's nodes in forward order. Sequential[linear 4 8, relu, linear 8 1] on [4] gives exactly
/// TorchLean's 18-node graph of §10.8 (examples/graphs/mlp-4-8-1.graph.toml).
RuntimeResult<Graph> lower(const Module& model, std::span<const std::int64_t> input_shape, std::string name);
inline RuntimeResult<Graph> lower(const Module& model, std::initializer_list<std::int64_t> input_shape, std::string name) {
  return lower(model, std::span<const std::int64_t>(input_shape.begin(), input_shape.size()), std::move(name));
}

/// `graph` as a `.graph.toml` file that load_graph reads back node for node.
std::string graph_toml(const Graph& graph);
/// Writes graph_toml(graph) to `file`; a file that cannot be written is invalid-argument naming
/// the path.
RuntimeStatus write_graph_toml(const Graph& graph, const std::filesystem::path& file);

/// Makes every parameter of `model` a leaf of `session`'s current tape (a constant when the
/// session has gradients off). The trainer does this at the start of each step.
void bind_parameters(Session& session, Module& model);

// ---- losses ---------------------------------------------------------------------------------

/// A loss: (prediction, target) -> scalar, computed in the session.
using LossFn = std::function<RuntimeResult<Var>(Session&, const Var&, const Var&)>;
/// mean((pred - target)^2) through the session's `mse_loss` capsule.
RuntimeResult<Var> mse_loss(Session& session, const Var& pred, const Var& target);
/// Mean over rows of -Σ target·log_softmax(logits); `target` is one-hot (or soft) [n, c].
RuntimeResult<Var> cross_entropy(Session& session, const Var& logits, const Var& target);

// ---- optimizers -----------------------------------------------------------------------------

/// Updates parameters from one backward pass. Updates are session calls on constants, so they
/// are never taped but are counted among the capsules used.
class Optimizer {
 public:
  Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  virtual ~Optimizer() = default;
  /// Replaces each parameter's value with its updated tensor. A parameter without a gradient
  /// (nothing flowed into it) is left as it is. Parameters are matched to state by position, so
  /// pass the same list every step.
  virtual RuntimeStatus step(Session& session, std::span<Parameter* const> parameters, const Gradients& grads) = 0;
  /// Every op step may call.
  virtual std::vector<Op> ops() const = 0;
};

/// p <- p - lr·g.
class SGD final : public Optimizer {
 public:
  explicit SGD(double lr) : lr_(lr) {}
  RuntimeStatus step(Session& session, std::span<Parameter* const> parameters, const Gradients& grads) override;
  std::vector<Op> ops() const override { return {Op::Scale, Op::Sub}; }

 private:
  double lr_;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

/// Adam with bias correction: m <- b1·m + (1-b1)·g, v <- b2·v + (1-b2)·g², p <- p - lr·m̂/(sqrt(v̂)+eps)
/// with m̂ = m/(1-b1^t), v̂ = v/(1-b2^t).
class Adam final : public Optimizer {
 public:
  explicit Adam(AdamOptions options = {}) : options_(options) {}
  RuntimeStatus step(Session& session, std::span<Parameter* const> parameters, const Gradients& grads) override;
  std::vector<Op> ops() const override { return {Op::Scale, Op::Mul, Op::Add, Op::Sqrt, Op::Div, Op::Sub}; }
  std::int64_t steps() const { return t_; }

 private:
  struct Moments {
    Tensor m;
    Tensor v;
    Tensor eps;  // eps broadcast to the parameter's shape, made once
  };
  AdamOptions options_;
  std::int64_t t_ = 0;
  std::vector<Moments> state_;
};

// ---- training -------------------------------------------------------------------------------

struct Batch {
  Tensor inputs;
  Tensor targets;
};

/// One step: forgets the previous tape, binds the parameters, runs forward and the loss,
/// backpropagates and lets the optimizer update. Returns the loss before the update.
RuntimeResult<double> train_step(Session& session, Module& model, const LossFn& loss, Optimizer& optimizer,
                                 const Batch& batch);

/// The ops a training run of `model` with the loss op `loss_op` and `optimizer` dispatches, each
/// followed by the ops its VJP rule composes (vjp_rule_ops), deduplicated in first-seen order.
/// Pass it as a session's `preselect` so a rejected capsule stops the session at open.
std::vector<Op> training_ops(const Module& model, Op loss_op, const Optimizer& optimizer);

/// Appends each op of `ops` and the ops of its VJP rule to `out` unless already there.
void add_ops_with_vjp(std::vector<Op>& out, std::span<const Op> ops);

}  // namespace capsule
