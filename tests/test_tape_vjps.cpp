// SPDX-License-Identifier: Apache-2.0
// The TorchLean tape's VJPs, end to end through an eager session under checked_cpu: for every
// differentiable op, the gradient from Session::backward (composed from dispatched ops, or the
// capsule handler's adjoint kernel for the ops that need one) matches float64 central
// differences of the session's own forward.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "capsule/handlers/reference.hpp"
#include "capsule/runtime/session.hpp"
#include "capsule/text.hpp"
#include "gradcheck.hpp"
#include "suite_coverage.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

struct InputSpec {
  std::vector<std::int64_t> dims;
  double lo = -1.0;
  double hi = 1.0;
  bool differentiable = true;
  std::vector<double> fixed = {};  ///< explicit values (masks, targets)
};

struct TapeCase {
  std::string label;
  Op op;
  std::vector<InputSpec> inputs;
  OpAttrs attrs = {};
};

Tensor make_input(const InputSpec& spec, std::uint64_t seed) {
  const Shape shape = Shape::make(spec.dims).value();
  if (!spec.fixed.empty()) return Tensor::from_values(shape, DType::F64, spec.fixed).value();
  std::vector<double> v(static_cast<std::size_t>(shape.numel()));
  std::uint64_t state = seed * 2654435761u + 1;
  for (double& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = spec.lo + (spec.hi - spec.lo) * static_cast<double>(state >> 11) * 0x1.0p-53;
  }
  return Tensor::from_values(shape, DType::F64, v).value();
}

/// Σ op(inputs)·weights as a session computation (weights constant).
RuntimeResult<Var> objective(Session& session, const TapeCase& c, const std::vector<Var>& inputs, const Tensor& weights) {
  CAPSULE_TRY(Var y, session.call(c.op, inputs, c.attrs));
  CAPSULE_TRY(Var weighted, session.call(Op::Mul, {y, session.constant(weights)}));
  return session.call(Op::ReduceSum, {weighted});
}

void check_case(const TapeCase& c) {
  CAPTURE(c.label);
  testing::record_exercised(c.op, Provider::Reference, Device::Cpu);
  SessionOptions options;
  options.profile = "checked_cpu";
  auto opened = Session::open(testing::shipped(), testing::reference_handlers(), options);
  REQUIRE(opened);
  Session& session = *opened;
  std::vector<Tensor> values;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) values.push_back(make_input(c.inputs[i], i + 3));
  std::vector<Var> vars;
  for (std::size_t i = 0; i < values.size(); ++i) {
    vars.push_back(c.inputs[i].differentiable ? session.parameter(values[i]) : session.constant(values[i]));
  }
  auto y = session.call(c.op, vars, c.attrs);
  REQUIRE_MESSAGE(y, (y ? std::string() : y.error().message));
  InputSpec weight_spec{y->shape().to_vector(), 0.5, 1.5};
  const Tensor weights = make_input(weight_spec, 77);
  auto loss = objective(session, c, vars, weights);
  REQUIRE_MESSAGE(loss, (loss ? std::string() : loss.error().message));
  auto grads = session.backward(*loss);
  REQUIRE_MESSAGE(grads, (grads ? std::string() : grads.error().message));

  const double step = 1e-6;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!c.inputs[i].differentiable) continue;
    Tensor analytic = grads->of(vars[i]);
    REQUIRE_MESSAGE(analytic.defined(), "input ", i, " got no gradient");
    REQUIRE(analytic.shape() == values[i].shape());
    for (std::int64_t e = 0; e < values[i].numel(); ++e) {
      auto probe = [&](double delta) {
        std::vector<Var> shifted;
        for (std::size_t j = 0; j < values.size(); ++j) {
          Tensor t = values[j];
          if (j == i) {
            t = values[j].clone().value();
            t.mutable_data<double>()[e] += delta;
          }
          shifted.push_back(session.constant(t));
        }
        return objective(session, c, shifted, weights).value().value().at(0);
      };
      const double numeric = (probe(step) - probe(-step)) / (2 * step);
      const double error = std::abs(analytic.at(e) - numeric) / std::max(1.0, std::abs(numeric));
      CHECK_MESSAGE(error < 1e-6, "input ", i, " element ", e, ": tape ", analytic.at(e), " numeric ", numeric);
    }
  }
}

OpAttrs attrs_with(auto&& fill) {
  OpAttrs attrs;
  fill(attrs);
  return attrs;
}

std::vector<TapeCase> cases() {
  const InputSpec m23{{2, 3}};
  const InputSpec pos23{{2, 3}, 0.5, 2.0};
  std::vector<TapeCase> out;
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Min}) out.push_back({str(to_string(op)), op, {m23, m23}});
  out.push_back({"div", Op::Div, {m23, pos23}});
  for (Op op : {Op::Neg, Op::Abs, Op::Relu, Op::Gelu, Op::Sigmoid, Op::Silu, Op::Tanh, Op::Softplus, Op::Exp, Op::Sin,
                Op::Cos, Op::Softmax, Op::LogSoftmax}) {
    out.push_back({str(to_string(op)), op, {m23}});
  }
  for (Op op : {Op::Sqrt, Op::Log, Op::Inv, Op::SafeLog}) out.push_back({str(to_string(op)), op, {pos23}});
  out.push_back({"scale", Op::Scale, {m23}, attrs_with([](OpAttrs& a) { a.alpha = -2.5; })});
  out.push_back({"clamp", Op::Clamp, {m23}, attrs_with([](OpAttrs& a) { a.lo = -0.5; a.hi = 0.5; })});
  out.push_back({"softmax axis 0", Op::Softmax, {m23}, attrs_with([](OpAttrs& a) { a.axis = 0; })});
  out.push_back({"hard_masked_softmax", Op::HardMaskedSoftmax,
                 {InputSpec{{3, 3}}, InputSpec{{3, 3}, 0, 1, false, {1, 0, 0, 1, 1, 0, 0, 0, 0}}}});
  out.push_back({"reduce_sum axis 1", Op::ReduceSum, {m23}, attrs_with([](OpAttrs& a) { a.axes = {1}; })});
  out.push_back({"reduce_mean all", Op::ReduceMean, {m23}});
  out.push_back({"reshape", Op::Reshape, {m23}, attrs_with([](OpAttrs& a) { a.shape = {3, 2}; })});
  out.push_back({"permute", Op::Permute, {InputSpec{{2, 3, 2}}}, attrs_with([](OpAttrs& a) { a.axes = {2, 0, 1}; })});
  out.push_back({"broadcast rank", Op::Broadcast, {InputSpec{{3}}}, attrs_with([](OpAttrs& a) { a.shape = {2, 3}; })});
  out.push_back({"broadcast ones", Op::Broadcast, {InputSpec{{2, 1}}}, attrs_with([](OpAttrs& a) { a.shape = {2, 3}; })});
  out.push_back({"concat", Op::Concat, {m23, InputSpec{{2, 2}}}, attrs_with([](OpAttrs& a) { a.axis = 1; })});
  out.push_back({"slice", Op::Slice, {InputSpec{{4, 3}}}, attrs_with([](OpAttrs& a) { a.axis = 0; a.start = 1; a.end = 3; })});
  out.push_back({"gather", Op::Gather, {InputSpec{{4, 2}}}, attrs_with([](OpAttrs& a) { a.axis = 0; a.indices = {3, 0, 3}; })});
  out.push_back({"scatter_add", Op::ScatterAdd, {InputSpec{{4, 2}}, InputSpec{{3, 2}}},
                 attrs_with([](OpAttrs& a) { a.axis = 0; a.indices = {1, 1, 2}; })});
  out.push_back({"matmul", Op::Matmul, {m23, InputSpec{{3, 4}}}});
  out.push_back({"matmul batched", Op::Matmul, {InputSpec{{2, 2, 3}}, InputSpec{{2, 3, 2}}}});
  out.push_back({"scaled_matmul", Op::ScaledMatmul, {m23, InputSpec{{3, 2}}}, attrs_with([](OpAttrs& a) { a.alpha = 0.5; })});
  out.push_back({"softmax_matmul", Op::SoftmaxMatmul, {m23, InputSpec{{3, 2}}}});
  out.push_back({"linear", Op::Linear, {m23, InputSpec{{4, 3}}, InputSpec{{4}}}});
  out.push_back({"mse_loss", Op::MseLoss, {m23, m23}});
  out.push_back({"cross_entropy", Op::CrossEntropy, {m23, InputSpec{{2, 3}, 0.1, 1.0}}});
  out.push_back({"distill", Op::Distill, {m23, m23}, attrs_with([](OpAttrs& a) { a.temperature = 2.0; })});
  out.push_back({"layer_norm", Op::LayerNorm, {InputSpec{{2, 4}}, InputSpec{{4}}, InputSpec{{4}}}});
  out.push_back({"batch_norm", Op::BatchNorm, {InputSpec{{3, 2, 2}}, InputSpec{{2}}, InputSpec{{2}}}});
  out.push_back({"conv 1d", Op::Conv, {InputSpec{{1, 2, 5}}, InputSpec{{2, 2, 3}}, InputSpec{{2}}},
                 attrs_with([](OpAttrs& a) { a.stride = {2}; a.padding = {1}; })});
  out.push_back({"conv 2d groups", Op::Conv, {InputSpec{{1, 2, 4, 4}}, InputSpec{{2, 1, 2, 2}}},
                 attrs_with([](OpAttrs& a) { a.groups = 2; a.dilation = {1, 2}; })});
  out.push_back({"conv_transpose 1d", Op::ConvTranspose, {InputSpec{{1, 2, 3}}, InputSpec{{2, 1, 3}}},
                 attrs_with([](OpAttrs& a) { a.stride = {2}; a.padding = {1}; })});
  out.push_back({"max_pool 2d", Op::MaxPool, {InputSpec{{1, 1, 4, 4}}}, attrs_with([](OpAttrs& a) { a.kernel = {2, 2}; })});
  out.push_back({"avg_pool 1d", Op::AvgPool, {InputSpec{{1, 2, 6}}}, attrs_with([](OpAttrs& a) { a.kernel = {3}; a.stride = {2}; a.padding = {1}; })});
  out.push_back({"smooth_max_pool 1d", Op::SmoothMaxPool, {InputSpec{{1, 1, 6}}},
                 attrs_with([](OpAttrs& a) { a.kernel = {2}; a.temperature = 0.5; })});
  out.push_back({"attention causal", Op::ScaledDotProductAttention, {InputSpec{{3, 2}}, InputSpec{{3, 2}}, InputSpec{{3, 2}}},
                 attrs_with([](OpAttrs& a) { a.causal = true; })});
  return out;
}

/// Ops the tape treats as constants: §1.3 requires no VJP of them, so their VJP obligation is
/// that the reference has no adjoint kernel for the tape to call. (The manifest asks for this list
/// outside any test, so it reads the vocabulary, not the handler registry.)
std::vector<Op> constant_ops() {
  std::vector<Op> out;
  for (const Op op : all_values<Op>()) {
    if (!requires_vjp(op)) out.push_back(op);
  }
  return out;
}

/// The VJP cases this suite covers: every op its tape cases differentiate, and the constant ops.
std::vector<Op> covered_ops() {
  std::set<Op> ops;
  for (const TapeCase& c : cases()) ops.insert(c.op);
  for (const Op op : constant_ops()) ops.insert(op);
  return {ops.begin(), ops.end()};
}

const testing::SuiteCoverage kCoverage{"reference.vjps", Obligation::Vjp, Provider::Reference, Device::Cpu,
                                       covered_ops};

}  // namespace

TEST_SUITE("reference.vjps") {
  TEST_CASE("ops without a VJP have no adjoint kernel for the tape to call") {
    const std::vector<Op> ops = constant_ops();
    CHECK(ops.size() == 3);
    for (const Op op : ops) {
      CAPTURE(to_string(op));
      CHECK((testing::reference_handler(op).backward == nullptr));
    }
  }

  TEST_CASE("every differentiable op's tape VJP matches float64 central differences") {
    std::size_t checked = 0;
    for (const TapeCase& c : cases()) {
      check_case(c);
      ++checked;
    }
    CHECK(checked >= 50);
  }

  TEST_CASE("tape VJPs cover every differentiable op of the reference catalog") {
    std::set<Op> covered;
    for (const TapeCase& c : cases()) covered.insert(c.op);
    const ResolvedProfile resolved = testing::shipped_profile("checked_cpu");
    for (Op op : all_values<Op>()) {
      for (const Capsule* capsule : resolved.planner.registry().for_op(op)) {
        if (capsule->device != Device::Cpu || !requires_vjp(op)) continue;
        CHECK_MESSAGE(covered.count(op) == 1, "no tape gradient check for ", to_string(op));
      }
    }
  }
}

}  // namespace capsule
