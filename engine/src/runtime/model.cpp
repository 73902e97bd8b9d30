// SPDX-License-Identifier: Apache-2.0
#include "capsule/runtime/model.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "capsule/atomic_file.hpp"
#include "capsule/text.hpp"

namespace capsule {
namespace {

// splitmix64: a tiny, well-mixed generator whose stream is the same on every platform, so a
// seeded model starts from the same weights everywhere.
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// Uniform in [-bound, bound) from the top 53 bits of the stream.
double uniform(std::uint64_t& state, double bound) {
  const double unit = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
  return (2.0 * unit - 1.0) * bound;
}

/// A parameter of `dims` drawn uniform in ±bound; undefined when the dims are invalid (the layer
/// reports that when it is used, since constructors cannot return errors).
Parameter make_parameter(std::string name, std::initializer_list<std::int64_t> dims, DType dtype, double bound,
                         std::uint64_t& state) {
  Parameter p;
  p.name = std::move(name);
  auto shape = Shape::make(dims);
  if (!shape) return p;
  std::vector<double> values(static_cast<std::size_t>(shape->numel()));
  for (double& v : values) v = uniform(state, bound);
  if (auto tensor = Tensor::from_values(*shape, dtype, values)) p.value = std::move(*tensor);
  return p;
}

/// The parameter as a Var of `session`'s current step, binding it when it is not.
const Var& use(Session& session, Parameter& p) {
  if (p.session != &session || !p.var.value().shares_storage_with(p.value) ||
      (session.gradients() && !session.on_tape(p.var))) {
    p.var = session.parameter(p.value);
    p.session = &session;
  }
  return p.var;
}

RuntimeStatus check_defined(const Parameter& p, std::string_view layer) {
  if (p.value.defined()) return std::monostate{};
  return runtime_error(RuntimeCode::InvalidArgument,
                       str(layer, ": parameter ", p.name, " was not created; expected positive layer sizes"));
}

RuntimeError shape_error(std::string_view layer, std::string_view expected, std::span<const std::int64_t> got) {
  return RuntimeError{RuntimeCode::ShapeMismatch,
                      str(layer, ": input of shape ", toml_int_list(got), "; expected ", expected)};
}

/// The `const` node of a parameter: its name and shape.
std::uint32_t add_const(GraphBuilder& graph, const Parameter& p, std::span<const std::int64_t> shape) {
  return graph.add("const", {}, {{"name", toml_quoted(p.name)}, {"shape", toml_int_list(shape)}});
}

/// Output length of a convolution or pooling window along one axis.
std::int64_t window_out(std::int64_t size, std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

}  // namespace

// ---- graph building ---------------------------------------------------------------------------

std::string toml_int_list(std::span<const std::int64_t> values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i != 0) out += ", ";
    out += std::to_string(values[i]);
  }
  return out + "]";
}

std::uint32_t GraphBuilder::add(std::string kind, std::vector<std::uint32_t> inputs,
                                std::vector<std::pair<std::string, std::string>> payload) {
  GraphNode node;
  node.id = static_cast<std::uint32_t>(graph_.nodes.size());
  bool known = false;
  node.op = ir_node_op(kind, known);
  node.kind = std::move(kind);
  node.inputs = std::move(inputs);
  node.payload = std::move(payload);
  graph_.nodes.push_back(std::move(node));
  return graph_.nodes.back().id;
}

RuntimeResult<Graph> lower(const Module& model, std::span<const std::int64_t> input_shape, std::string name) {
  GraphBuilder graph(std::move(name));
  LoweredValue input{graph.add("input", {}, {{"shape", toml_int_list(input_shape)}}),
                     std::vector<std::int64_t>(input_shape.begin(), input_shape.end())};
  CAPSULE_TRY(const LoweredValue output, model.lower(graph, input));
  (void)output;
  return std::move(graph).take();
}

std::string graph_toml(const Graph& graph) {
  std::ostringstream out;
  out << "# IR graph (docs/format.md#graphs) lowered from a model by capsule; plan it with\n"
         "# `capsule plan --profile NAME --graph FILE`.\n"
      << "schema = 1\nname = " << toml_quoted(graph.name) << "\n";
  for (const GraphNode& node : graph.nodes) {
    out << "\n[[node]]\nid = " << node.id << "\nkind = " << toml_quoted(node.kind) << "\n";
    if (!node.inputs.empty()) {
      out << "inputs = [";
      for (std::size_t i = 0; i < node.inputs.size(); ++i) out << (i == 0 ? "" : ", ") << node.inputs[i];
      out << "]\n";
    }
    for (const auto& entry : node.payload) out << entry.first << " = " << entry.second << "\n";
  }
  return out.str();
}

RuntimeStatus write_graph_toml(const Graph& graph, const std::filesystem::path& file) {
  // Atomic: an interrupted or failed dump never leaves a truncated graph where a good file was.
  if (const std::string failure = write_file_atomically(file, graph_toml(graph)); !failure.empty()) {
    return runtime_error(RuntimeCode::InvalidArgument, str("cannot write graph file `", file.string(), "`: ", failure));
  }
  return std::monostate{};
}

void bind_parameters(Session& session, Module& model) {
  for (Parameter* p : model.parameters()) {
    p->var = session.parameter(p->value);
    p->session = &session;
  }
}

// ---- Linear -----------------------------------------------------------------------------------

Linear::Linear(std::int64_t in, std::int64_t out, std::uint64_t seed, DType dtype) : in_(in), out_(out) {
  std::uint64_t state = seed;
  const double bound = in > 0 ? 1.0 / std::sqrt(static_cast<double>(in)) : 0.0;
  weight_ = make_parameter("linear.weight", {out, in}, dtype, bound, state);
  bias_ = make_parameter("linear.bias", {out}, dtype, bound, state);
}

std::string Linear::describe() const { return str("linear ", in_, " ", out_); }

void Linear::set_name(const std::string& name) {
  weight_.name = name + ".weight";
  bias_.name = name + ".bias";
}

RuntimeResult<Var> Linear::forward(Session& session, const Var& x) {
  CAPSULE_CHECK(check_defined(weight_, describe()));
  CAPSULE_CHECK(check_defined(bias_, describe()));
  const Shape& shape = x.shape();
  const bool sample = shape.rank() == 1 && shape[0] == in_;
  const bool batch = shape.rank() == 2 && shape[1] == in_;
  if (!sample && !batch) return fail(shape_error(describe(), str("[", in_, "] or [n, ", in_, "]"), x.shape().dims()));
  // TorchLean's IR lowering runs a single sample as a one-row batch; the eager path does the same
  // so the ops it runs are the ops the lowered graph plans.
  Var rows = x;
  if (sample) {
    OpAttrs to_row;
    to_row.shape = {1, in_};
    CAPSULE_TRY(rows, session.call(Op::Reshape, {x}, to_row));
  }
  const std::int64_t n = rows.shape()[0];
  OpAttrs transpose;
  transpose.axes = {1, 0};
  CAPSULE_TRY(const Var weight_t, session.call(Op::Permute, {use(session, weight_)}, transpose));
  CAPSULE_TRY(const Var product, session.call(Op::Matmul, {rows, weight_t}));
  OpAttrs spread;
  spread.shape = {n, out_};
  CAPSULE_TRY(const Var bias, session.call(Op::Broadcast, {use(session, bias_)}, spread));
  CAPSULE_TRY(Var y, session.call(Op::Add, {product, bias}));
  if (!sample) return y;
  OpAttrs to_vector;
  to_vector.shape = {out_};
  return session.call(Op::Reshape, {y}, to_vector);
}

RuntimeResult<LoweredValue> Linear::lower(GraphBuilder& graph, const LoweredValue& input) const {
  CAPSULE_CHECK(check_defined(weight_, describe()));
  CAPSULE_CHECK(check_defined(bias_, describe()));
  const auto& shape = input.shape;
  const bool sample = shape.size() == 1 && shape[0] == in_;
  const bool batch = shape.size() == 2 && shape[1] == in_;
  if (!sample && !batch) return fail(shape_error(describe(), str("[", in_, "] or [n, ", in_, "]"), shape));
  std::uint32_t rows = input.node;
  const std::int64_t n = sample ? 1 : shape[0];
  if (sample) {
    const std::vector<std::int64_t> to{1, in_};
    rows = graph.add("reshape", {input.node}, {{"from", toml_int_list(shape)}, {"to", toml_int_list(to)}});
  }
  const std::vector<std::int64_t> weight_shape{out_, in_};
  const std::uint32_t weight = add_const(graph, weight_, weight_shape);
  const std::uint32_t weight_t = graph.add("transpose", {weight}, {{"dim0", "0"}, {"dim1", "1"}});
  const std::uint32_t product = graph.add("matmul", {rows, weight_t});
  const std::vector<std::int64_t> bias_shape{out_};
  const std::vector<std::int64_t> rows_shape{n, out_};
  const std::uint32_t bias = add_const(graph, bias_, bias_shape);
  const std::uint32_t spread =
      graph.add("broadcast_to", {bias}, {{"from", toml_int_list(bias_shape)}, {"to", toml_int_list(rows_shape)}});
  const std::uint32_t sum = graph.add("add", {product, spread});
  if (!sample) return LoweredValue{sum, rows_shape};
  const std::uint32_t out =
      graph.add("reshape", {sum}, {{"from", toml_int_list(rows_shape)}, {"to", toml_int_list(bias_shape)}});
  return LoweredValue{out, bias_shape};
}

std::vector<Op> Linear::ops() const { return {Op::Reshape, Op::Permute, Op::Matmul, Op::Broadcast, Op::Add}; }

// ---- ReLU, Flatten ------------------------------------------------------------------------------

RuntimeResult<Var> ReLU::forward(Session& session, const Var& x) { return session.call(Op::Relu, {x}); }

RuntimeResult<LoweredValue> ReLU::lower(GraphBuilder& graph, const LoweredValue& input) const {
  return LoweredValue{graph.add("relu", {input.node}), input.shape};
}

namespace {
RuntimeResult<std::vector<std::int64_t>> flattened(std::span<const std::int64_t> shape) {
  if (shape.size() < 2) return fail(shape_error("flatten", "[n, d1, ...] of rank >= 2", shape));
  std::int64_t rest = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) {
    CAPSULE_TRY(rest, checked_mul("flatten", rest, shape[i]));
  }
  return std::vector<std::int64_t>{shape[0], rest};
}
}  // namespace

RuntimeResult<Var> Flatten::forward(Session& session, const Var& x) {
  OpAttrs attrs;
  CAPSULE_TRY(attrs.shape, flattened(x.shape().dims()));
  return session.call(Op::Reshape, {x}, attrs);
}

RuntimeResult<LoweredValue> Flatten::lower(GraphBuilder& graph, const LoweredValue& input) const {
  CAPSULE_TRY(std::vector<std::int64_t> to, flattened(input.shape));
  const std::uint32_t node =
      graph.add("flatten", {input.node}, {{"from", toml_int_list(input.shape)}, {"to", toml_int_list(to)}});
  return LoweredValue{node, std::move(to)};
}

// ---- Conv2d, MaxPool2d ------------------------------------------------------------------------

Conv2d::Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel, std::uint64_t seed,
               std::int64_t stride, std::int64_t padding, DType dtype)
    : in_channels_(in_channels), out_channels_(out_channels), kernel_(kernel), stride_(stride), padding_(padding) {
  std::uint64_t state = seed;
  const std::int64_t fan_in = in_channels * kernel * kernel;
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  weight_ = make_parameter("conv.weight", {out_channels, in_channels, kernel, kernel}, dtype, bound, state);
  bias_ = make_parameter("conv.bias", {out_channels}, dtype, bound, state);
}

std::string Conv2d::describe() const {
  return str("conv2d ", in_channels_, " ", out_channels_, " k", kernel_, " s", stride_, " p", padding_);
}

void Conv2d::set_name(const std::string& name) {
  weight_.name = name + ".weight";
  bias_.name = name + ".bias";
}

namespace {
/// The output shape of a 2-D window op on [n, c, h, w], or a shape error naming `layer`.
RuntimeResult<std::vector<std::int64_t>> window_shape(std::string_view layer, std::span<const std::int64_t> shape,
                                                      std::int64_t channels_in, std::int64_t channels_out,
                                                      std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
  const std::string expected = channels_in > 0 ? str("[n, ", channels_in, ", h, w]") : std::string("[n, c, h, w]");
  if (shape.size() != 4 || (channels_in > 0 && shape[1] != channels_in)) return fail(shape_error(layer, expected, shape));
  if (kernel <= 0 || stride <= 0 || padding < 0) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(layer, ": kernel ", kernel, ", stride ", stride, ", padding ", padding,
                             "; expected kernel and stride >= 1 and padding >= 0"));
  }
  const std::int64_t h = window_out(shape[2], kernel, stride, padding);
  const std::int64_t w = window_out(shape[3], kernel, stride, padding);
  if (shape[2] + 2 * padding < kernel || shape[3] + 2 * padding < kernel) {
    return fail(shape_error(layer, str("spatial sizes of at least ", kernel - 2 * padding), shape));
  }
  return std::vector<std::int64_t>{shape[0], channels_out > 0 ? channels_out : shape[1], h, w};
}
}  // namespace

RuntimeResult<Var> Conv2d::forward(Session& session, const Var& x) {
  CAPSULE_CHECK(check_defined(weight_, describe()));
  CAPSULE_CHECK(check_defined(bias_, describe()));
  CAPSULE_CHECK(window_shape(describe(), x.shape().dims(), in_channels_, out_channels_, kernel_, stride_, padding_));
  OpAttrs attrs;
  attrs.stride = {stride_, stride_};
  attrs.padding = {padding_, padding_};
  return session.call(Op::Conv, {x, use(session, weight_), use(session, bias_)}, attrs);
}

RuntimeResult<LoweredValue> Conv2d::lower(GraphBuilder& graph, const LoweredValue& input) const {
  CAPSULE_CHECK(check_defined(weight_, describe()));
  CAPSULE_CHECK(check_defined(bias_, describe()));
  CAPSULE_TRY(std::vector<std::int64_t> out,
              window_shape(describe(), input.shape, in_channels_, out_channels_, kernel_, stride_, padding_));
  const std::vector<std::int64_t> weight_shape{out_channels_, in_channels_, kernel_, kernel_};
  const std::vector<std::int64_t> bias_shape{out_channels_};
  const std::vector<std::int64_t> stride{stride_, stride_};
  const std::vector<std::int64_t> padding{padding_, padding_};
  const std::uint32_t weight = add_const(graph, weight_, weight_shape);
  const std::uint32_t bias = add_const(graph, bias_, bias_shape);
  const std::uint32_t node =
      graph.add("conv", {input.node, weight, bias}, {{"stride", toml_int_list(stride)}, {"padding", toml_int_list(padding)}});
  return LoweredValue{node, std::move(out)};
}

std::string MaxPool2d::describe() const { return str("max_pool2d k", kernel_); }

RuntimeResult<Var> MaxPool2d::forward(Session& session, const Var& x) {
  CAPSULE_CHECK(window_shape(describe(), x.shape().dims(), 0, 0, kernel_, kernel_, 0));
  OpAttrs attrs;
  attrs.kernel = {kernel_, kernel_};
  attrs.stride = {kernel_, kernel_};
  return session.call(Op::MaxPool, {x}, attrs);
}

RuntimeResult<LoweredValue> MaxPool2d::lower(GraphBuilder& graph, const LoweredValue& input) const {
  CAPSULE_TRY(std::vector<std::int64_t> out, window_shape(describe(), input.shape, 0, 0, kernel_, kernel_, 0));
  const std::vector<std::int64_t> window{kernel_, kernel_};
  const std::uint32_t node =
      graph.add("max_pool", {input.node}, {{"kernel", toml_int_list(window)}, {"stride", toml_int_list(window)}});
  return LoweredValue{node, std::move(out)};
}

// ---- Sequential -------------------------------------------------------------------------------

Sequential& Sequential::add(std::unique_ptr<Module> layer) {
  const std::string stem = layer->name_stem();
  if (!stem.empty()) {
    auto it = std::find_if(stem_counts_.begin(), stem_counts_.end(),
                           [&stem](const std::pair<std::string, int>& entry) { return entry.first == stem; });
    if (it == stem_counts_.end()) it = stem_counts_.insert(stem_counts_.end(), std::pair<std::string, int>(stem, 0));
    layer->set_name(str(stem, ++it->second));
  }
  layers_.push_back(std::move(layer));
  return *this;
}

std::string Sequential::describe() const {
  std::vector<std::string> parts;
  for (const auto& layer : layers_) parts.push_back(layer->describe());
  return "Sequential[" + join(parts, ", ") + "]";
}

RuntimeResult<Var> Sequential::forward(Session& session, const Var& x) {
  Var value = x;
  for (const auto& layer : layers_) {
    CAPSULE_TRY(value, layer->forward(session, value));
  }
  return value;
}

RuntimeResult<LoweredValue> Sequential::lower(GraphBuilder& graph, const LoweredValue& input) const {
  LoweredValue value = input;
  for (const auto& layer : layers_) {
    CAPSULE_TRY(value, layer->lower(graph, value));
  }
  return value;
}

std::vector<Op> Sequential::ops() const {
  std::vector<Op> ops;
  for (const auto& layer : layers_) {
    for (const Op op : layer->ops()) {
      if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    }
  }
  return ops;
}

std::vector<Parameter*> Sequential::parameters() {
  std::vector<Parameter*> all;
  for (const auto& layer : layers_) {
    for (Parameter* p : layer->parameters()) all.push_back(p);
  }
  return all;
}

// ---- losses -----------------------------------------------------------------------------------

RuntimeResult<Var> mse_loss(Session& session, const Var& pred, const Var& target) {
  return session.call(Op::MseLoss, {pred, target});
}

RuntimeResult<Var> cross_entropy(Session& session, const Var& logits, const Var& target) {
  return session.call(Op::CrossEntropy, {logits, target});
}

// ---- optimizers -------------------------------------------------------------------------------

namespace {
RuntimeResult<Var> scaled(Session& session, const Var& x, double alpha) {
  OpAttrs attrs;
  attrs.alpha = alpha;
  return session.call(Op::Scale, {x}, attrs);
}
}  // namespace

RuntimeStatus SGD::step(Session& session, std::span<Parameter* const> parameters, const Gradients& grads) {
  for (Parameter* p : parameters) {
    const Tensor grad = grads.of(p->var);
    if (!grad.defined()) continue;
    // Inputs are constants, so the update is dispatched (and counted) but never taped.
    CAPSULE_TRY(const Var delta, scaled(session, session.constant(grad), lr_));
    CAPSULE_TRY(const Var next, session.call(Op::Sub, {session.constant(p->value), delta}));
    p->value = next.value();
  }
  return std::monostate{};
}

RuntimeStatus Adam::step(Session& session, std::span<Parameter* const> parameters, const Gradients& grads) {
  if (state_.size() < parameters.size()) state_.resize(parameters.size());
  ++t_;
  const double b1 = options_.beta1;
  const double b2 = options_.beta2;
  const double correction1 = 1.0 - std::pow(b1, static_cast<double>(t_));
  const double correction2 = 1.0 - std::pow(b2, static_cast<double>(t_));
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    Parameter& p = *parameters[i];
    const Tensor grad = grads.of(p.var);
    if (!grad.defined()) continue;
    Moments& state = state_[i];
    if (!state.m.defined() || !(state.m.shape() == p.value.shape())) {
      CAPSULE_TRY(state.m, Tensor::zeros(p.value.shape(), p.value.dtype()));
      CAPSULE_TRY(state.v, Tensor::zeros(p.value.shape(), p.value.dtype()));
      CAPSULE_TRY(state.eps, Tensor::full(p.value.shape(), p.value.dtype(), options_.eps));
    }
    const Var g = session.constant(grad);
    CAPSULE_TRY(const Var m_old, scaled(session, session.constant(state.m), b1));
    CAPSULE_TRY(const Var m_new, scaled(session, g, 1.0 - b1));
    CAPSULE_TRY(const Var m, session.call(Op::Add, {m_old, m_new}));
    CAPSULE_TRY(const Var g2, session.call(Op::Mul, {g, g}));
    CAPSULE_TRY(const Var v_old, scaled(session, session.constant(state.v), b2));
    CAPSULE_TRY(const Var v_new, scaled(session, g2, 1.0 - b2));
    CAPSULE_TRY(const Var v, session.call(Op::Add, {v_old, v_new}));
    CAPSULE_TRY(const Var m_hat, scaled(session, m, 1.0 / correction1));
    CAPSULE_TRY(const Var v_hat, scaled(session, v, 1.0 / correction2));
    CAPSULE_TRY(const Var root, session.call(Op::Sqrt, {v_hat}));
    CAPSULE_TRY(const Var denom, session.call(Op::Add, {root, session.constant(state.eps)}));
    CAPSULE_TRY(const Var ratio, session.call(Op::Div, {m_hat, denom}));
    CAPSULE_TRY(const Var delta, scaled(session, ratio, options_.lr));
    CAPSULE_TRY(const Var next, session.call(Op::Sub, {session.constant(p.value), delta}));
    state.m = m.value();
    state.v = v.value();
    p.value = next.value();
  }
  return std::monostate{};
}

// ---- training ---------------------------------------------------------------------------------

RuntimeResult<double> train_step(Session& session, Module& model, const LossFn& loss, Optimizer& optimizer,
                                 const Batch& batch) {
  session.clear_tape();
  bind_parameters(session, model);
  CAPSULE_TRY(const Var prediction, model.forward(session, session.constant(batch.inputs)));
  CAPSULE_TRY(const Var value, loss(session, prediction, session.constant(batch.targets)));
  if (value.value().numel() != 1) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str("train_step: the loss has shape ", to_string(value.shape()), "; expected a scalar"));
  }
  const double before = value.value().at(0);
  CAPSULE_TRY(const Gradients grads, session.backward(value));
  const std::vector<Parameter*> parameters = model.parameters();
  CAPSULE_CHECK(optimizer.step(session, parameters, grads));
  return before;
}

void add_ops_with_vjp(std::vector<Op>& out, std::span<const Op> ops) {
  const auto push = [&out](Op op) {
    if (std::find(out.begin(), out.end(), op) == out.end()) out.push_back(op);
  };
  for (const Op op : ops) {
    push(op);
    for (const Op rule_op : vjp_rule_ops(op)) push(rule_op);
  }
}

std::vector<Op> training_ops(const Module& model, Op loss_op, const Optimizer& optimizer) {
  std::vector<Op> used = model.ops();
  used.push_back(loss_op);
  for (const Op op : optimizer.ops()) used.push_back(op);
  // Updates run on constants and are never differentiated, but their VJP rules are selected
  // too, so the list stays "every op and its rule" and a rejected rule op also stops at open.
  std::vector<Op> ops;
  add_ops_with_vjp(ops, used);
  return ops;
}

}  // namespace capsule
