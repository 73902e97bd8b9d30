// SPDX-License-Identifier: Apache-2.0
// The engine side of the VJP modes (docs/runtime.md "Tape autograd"): state a handler's forward
// saves for its backend VJP, and external-autograd boundaries. The handlers here are test
// stand-ins defined in this file (no LibTorch): their values come from the reference kernels, and
// the "external runtime" is a small recorder that computes each region's VJP when asked.
#include <doctest/doctest.h>

#include <cmath>
#include <utility>

#include "capsule/handlers/reference.hpp"
#include "capsule/json.hpp"
#include "capsule/runtime/session.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

using testing::has;

Tensor values(std::initializer_list<std::int64_t> dims, std::initializer_list<double> v) {
  return Tensor::from_values(dims, DType::F64, v).value();
}

/// The reference kernels, looked up directly (not through testing::reference_handler, which
/// records coverage for the reference suites).
const HandlerSpec& reference(Op op) {
  static HandlerRegistry registry;
  static const bool registered = static_cast<bool>(register_reference_handlers(registry));
  REQUIRE(registered);
  const RegisteredHandler* handler = registry.find(op, Provider::Reference, Device::Cpu);
  REQUIRE(handler != nullptr);
  return handler->spec;
}

/// A handler of the test provider `external` with the inline catalog's guard names.
HandlerSpec external_spec(Op op, std::string name) {
  HandlerSpec spec;
  spec.name = std::move(name);
  spec.op = op;
  spec.provider = Provider::External;
  spec.device = Device::Cpu;
  spec.layouts = {Layout::CanonicalTensor};
  spec.guards = {"shape checks", "typed layout"};
  spec.forward = reference(op).forward;
  return spec;
}

/// kCatalogHead as module `module` of the test provider, with `vjp` as every capsule's mode.
std::string catalog_head(std::string_view module, std::string_view vjp) {
  std::string text(testing::kCatalogHead);
  auto replace_all = [&](std::string_view from, std::string_view to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
  };
  replace_all("module = \"inline\"", str("module = \"", module, "\""));
  replace_all("provider = \"reference\"", "provider = \"external\"");
  replace_all("\"torchlean-tape\"", str("\"", vjp, "\""));
  return text;
}

std::string capsule_entry(std::string_view module, Op op) {
  return str("\n[[capsule]]\nname = \"", module, ".", to_string(op), "\"\nop = \"", to_string(op), "\"\n");
}

/// A CPU profile that plans only from `module` with the given VJP mode.
std::string profile_text(std::string_view name, std::string_view module, std::string_view vjp) {
  return str("schema = 1\nname = \"", name, "\"\nsummary = \"test profile for VJP modes\"\ndevice = \"cpu\"\n",
             "provider = { only = \"external\" }\nassurance = \"checked\"\nvjp = \"", vjp,
             "\"\nlowering = \"coalesced\"\nmodules = [\"", module, "\"]\n\n[availability]\ndevices = [\"cpu\"]\n",
             "providers = [\"external\"]\n");
}

Session open(const Workspace& workspace, const HandlerRegistry& handlers, std::string profile,
             std::vector<Op> preselect) {
  SessionOptions options;
  options.profile = std::move(profile);
  options.preselect = std::move(preselect);
  auto session = Session::open(workspace, handlers, options);
  REQUIRE_MESSAGE(session, (session ? std::string() : session.error().message));
  return std::move(session).value();
}

// ---- Saved state: a relu whose backward reads only what its forward saved --------------------

int live_saved_states = 0;

/// Which inputs were positive: the relu analogue of max_pool's argmax indices.
struct PositiveMask final : SavedState {
  explicit PositiveMask(std::vector<bool> mask) : positive(std::move(mask)) { ++live_saved_states; }
  ~PositiveMask() override { --live_saved_states; }
  PositiveMask(const PositiveMask&) = delete;
  PositiveMask& operator=(const PositiveMask&) = delete;
  std::vector<bool> positive;
};

RuntimeResult<SavingForwardResult> saving_relu_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(Tensor out, reference(Op::Relu).forward(inputs, attrs));
  std::vector<bool> positive;
  for (double x : inputs[0].to_vector()) positive.push_back(x > 0);
  return SavingForwardResult{std::move(out), std::make_unique<PositiveMask>(std::move(positive))};
}

/// Ignores the inputs and the output: a wrong or missing saved state gives a wrong gradient or
/// an error, so the test sees whether the tape passed the node's own state.
RuntimeResult<std::vector<Tensor>> saved_relu_backward(std::span<const Tensor>, const Tensor&, const Tensor& grad,
                                                       const OpAttrs&, const SavedState* saved) {
  const auto* mask = dynamic_cast<const PositiveMask*>(saved);
  if (mask == nullptr || mask->positive.size() != static_cast<std::size_t>(grad.numel())) {
    return runtime_error(RuntimeCode::InvalidArgument, "test relu backward: no saved mask for this node");
  }
  std::vector<double> g = grad.to_vector();
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (!mask->positive[i]) g[i] = 0;
  }
  CAPSULE_TRY(Tensor gx, Tensor::from_values(grad.shape(), grad.dtype(), g));
  return std::vector<Tensor>{std::move(gx)};
}

HandlerSpec saving_relu_spec() {
  HandlerSpec spec = external_spec(Op::Relu, "test saving relu");
  spec.backend_vjp = true;
  spec.forward_saving = saving_relu_forward;
  spec.backward_saved = saved_relu_backward;
  return spec;
}

// ---- External autograd: a recorder standing in for an external runtime's autograd ----------

int live_boundaries = 0;
/// Every requires_grad vector the autograd forwards received, with the op.
std::vector<std::pair<Op, std::vector<bool>>> autograd_requests;
/// Fault switches for the boundary-contract tests.
bool leave_second_gradient_undefined = false;
bool return_no_gradients = false;
bool answer_in_float32 = false;

RuntimeResult<Tensor> run_reference(Op op, std::initializer_list<Tensor> inputs, const OpAttrs& attrs = {}) {
  return reference(op).forward(std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

RuntimeResult<Tensor> transposed(const Tensor& matrix) {
  OpAttrs attrs;
  attrs.axes = {1, 0};
  return run_reference(Op::Permute, {matrix}, attrs);
}

/// One recorded region: the op's inputs, output and attrs, kept until the tape frees it.
class RecordedRegion final : public AutogradBoundary {
 public:
  RecordedRegion(Op op, std::span<const Tensor> inputs, Tensor output, OpAttrs attrs, std::vector<bool> requires_grad)
      : op_(op), inputs_(inputs.begin(), inputs.end()), output_(std::move(output)), attrs_(std::move(attrs)),
        requires_grad_(std::move(requires_grad)) {
    ++live_boundaries;
  }
  ~RecordedRegion() override { --live_boundaries; }
  RecordedRegion(const RecordedRegion&) = delete;
  RecordedRegion& operator=(const RecordedRegion&) = delete;

  RuntimeResult<std::vector<Tensor>> vjp(const Tensor& g) override {
    if (return_no_gradients) return std::vector<Tensor>{};
    if (answer_in_float32) {
      CAPSULE_TRY(Tensor ones, Tensor::full(g.shape(), DType::F32, 1.0));
      return std::vector<Tensor>(inputs_.size(), ones);
    }
    std::vector<Tensor> grads(inputs_.size());
    if (op_ == Op::Matmul) {
      if (requires_grad_[0]) {
        CAPSULE_TRY(Tensor bt, transposed(inputs_[1]));
        CAPSULE_TRY(grads[0], run_reference(Op::Matmul, {g, bt}));
      }
      if (requires_grad_[1]) {
        CAPSULE_TRY(Tensor at, transposed(inputs_[0]));
        CAPSULE_TRY(grads[1], run_reference(Op::Matmul, {at, g}));
      }
    } else if (op_ == Op::Add) {
      grads = {g, leave_second_gradient_undefined ? Tensor() : g};
    } else if (op_ == Op::Mul) {
      if (requires_grad_[0]) { CAPSULE_TRY(grads[0], run_reference(Op::Mul, {g, inputs_[1]})); }
      if (requires_grad_[1]) { CAPSULE_TRY(grads[1], run_reference(Op::Mul, {g, inputs_[0]})); }
    } else if (op_ == Op::ReduceSum) {  // over every axis: each element's gradient is the scalar g
      CAPSULE_TRY(grads[0], Tensor::full(inputs_[0].shape(), g.dtype(), g.at(0)));
    } else if (op_ == Op::HardMaskedSoftmax) {
      CAPSULE_TRY(grads, reference(Op::HardMaskedSoftmax).backward(inputs_, output_, g, attrs_));
      // A careless runtime that also differentiates the mask: the engine must drop this.
      CAPSULE_TRY(grads[1], Tensor::full(inputs_[1].shape(), g.dtype(), 7.0));
    } else {
      return runtime_error(RuntimeCode::InvalidArgument, str("test autograd: no VJP for ", to_string(op_)));
    }
    return grads;
  }

 private:
  Op op_;
  std::vector<Tensor> inputs_;
  Tensor output_;
  OpAttrs attrs_;
  std::vector<bool> requires_grad_;
};

template <Op kOp>
RuntimeResult<AutogradForwardResult> recording_forward(std::span<const Tensor> inputs, const OpAttrs& attrs,
                                                       const std::vector<bool>& requires_grad) {
  CAPSULE_TRY(Tensor out, reference(kOp).forward(inputs, attrs));
  autograd_requests.emplace_back(kOp, requires_grad);
  auto region = std::make_unique<RecordedRegion>(kOp, inputs, out, attrs, requires_grad);
  return AutogradForwardResult{std::move(out), std::move(region)};
}

template <Op kOp>
HandlerSpec boundary_spec() {
  HandlerSpec spec = external_spec(kOp, str("test autograd ", to_string(kOp)));
  spec.forward_autograd = recording_forward<kOp>;
  spec.autograd_runtime = "test autograd recorder";
  return spec;
}

constexpr std::string_view kBoundaryModule = "boundary";
const std::vector<Op> kBoundaryOps = {Op::Matmul, Op::Add, Op::HardMaskedSoftmax, Op::Mul, Op::ReduceSum};

/// The shipped tree plus module `boundary` (external-autograd capsules of kBoundaryOps) and
/// profile `boundary_cpu` asking for vjp = "external-autograd".
Workspace boundary_workspace(testing::ScratchTree& tree) {
  std::string catalog = catalog_head(kBoundaryModule, "external-autograd");
  for (Op op : kBoundaryOps) catalog += capsule_entry(kBoundaryModule, op);
  tree.write("catalogs/boundary.toml", catalog);
  tree.write("profiles/boundary_cpu.toml", profile_text("boundary_cpu", kBoundaryModule, "external-autograd"));
  Workspace workspace = tree.load();
  REQUIRE_MESSAGE(!has_errors(workspace.diagnostics), render(workspace.diagnostics));
  return workspace;
}

void register_boundary_handlers(HandlerRegistry& registry) {
  REQUIRE(registry.add(boundary_spec<Op::Matmul>()));
  REQUIRE(registry.add(boundary_spec<Op::Add>()));
  REQUIRE(registry.add(boundary_spec<Op::HardMaskedSoftmax>()));
  REQUIRE(registry.add(boundary_spec<Op::Mul>()));
  REQUIRE(registry.add(boundary_spec<Op::ReduceSum>()));
}

struct Inputs {
  Tensor x = values({2, 3}, {0.5, -1.0, 2.0, 1.5, 0.25, -0.75});
  Tensor w = values({3, 4}, {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 0.2});
  Tensor mask = values({2, 4}, {1, 0, 1, 1, 0, 1, 1, 0});
  Tensor q = values({2, 4}, {1.0, 2.0, -3.0, 0.5, -1.0, 0.25, 4.0, 2.0});
};

/// loss = Σ hard_masked_softmax(x·w + x·w, mask) ⊙ q, with the mask a taped parameter so that
/// only the op's own rule keeps a gradient from it.
struct Model {
  Var w, mask, loss;
};

Model run_model(Session& session, const Inputs& in) {
  Model m;
  Var x = session.constant(in.x);
  m.w = session.parameter(in.w);
  m.mask = session.parameter(in.mask);
  Var q = session.constant(in.q);
  Var s = session.call(Op::Matmul, {x, m.w}).value();
  Var s2 = session.call(Op::Add, {s, s}).value();  // s's gradient is accumulated in the backward
  OpAttrs last;
  last.axis = -1;
  Var p = session.call(Op::HardMaskedSoftmax, {s2, m.mask}, last).value();
  Var weighted = session.call(Op::Mul, {p, q}).value();
  m.loss = session.call(Op::ReduceSum, {weighted}).value();
  return m;
}

}  // namespace

TEST_SUITE("runtime") {
  TEST_CASE("a backend-vjp handler's backward receives the state its forward saved, freed after backward and at clear_tape") {
    testing::ScratchTree tree("saved-state");
    tree.write("catalogs/saving.toml", catalog_head("saving", "backend-vjp") + capsule_entry("saving", Op::Relu));
    tree.write("profiles/saving_cpu.toml", profile_text("saving_cpu", "saving", "backend-vjp"));
    Workspace workspace = tree.load();
    REQUIRE_MESSAGE(!has_errors(workspace.diagnostics), render(workspace.diagnostics));
    HandlerRegistry handlers;
    REQUIRE(handlers.add(saving_relu_spec()));
    Session session = open(workspace, handlers, "saving_cpu", {Op::Relu});
    REQUIRE(live_saved_states == 0);

    // An untaped call keeps nothing.
    REQUIRE(session.call(Op::Relu, {session.constant(values({2}, {1, -1}))}));
    CHECK(live_saved_states == 0);

    Var x = session.parameter(values({4}, {-1, 2, 3, -0.5}));
    Var y = session.call(Op::Relu, {x}).value();
    CHECK(live_saved_states == 1);
    auto grads = session.backward(y);
    REQUIRE_MESSAGE(grads, (grads ? std::string() : grads.error().message));
    CHECK(grads->of(x).to_vector() == std::vector<double>{0, 1, 1, 0});
    CHECK(live_saved_states == 0);  // freed once the node's backward ran
    CHECK(session.capsules_used().at(0).adjoint_calls == 1);

    // The state is gone: a second backward through the node is refused, never run without it.
    auto again = session.backward(y);
    REQUIRE_FALSE(again);
    CHECK(again.error().code == RuntimeCode::GradientUnavailable);
    CHECK(again.error().message ==
          "backward through `relu` (capsule `saving.relu`): the state handler `test saving relu` saved in the "
          "forward was freed by an earlier backward of this tape; run the forward again to backpropagate a second "
          "time");

    // Recorded but never backpropagated: clear_tape frees it.
    REQUIRE(session.call(Op::Relu, {x}));
    REQUIRE(session.call(Op::Relu, {x}));
    CHECK(live_saved_states == 2);
    session.clear_tape();
    CHECK(live_saved_states == 0);
  }

  TEST_CASE("a torchlean-tape rule that calls the adjoint passes the node's saved state") {
    testing::ScratchTree tree("saved-state-tape");
    tree.write("catalogs/saving.toml", catalog_head("saving", "torchlean-tape") + capsule_entry("saving", Op::Relu));
    tree.write("profiles/saving_cpu.toml", profile_text("saving_cpu", "saving", "torchlean-tape"));
    Workspace workspace = tree.load();
    REQUIRE_MESSAGE(!has_errors(workspace.diagnostics), render(workspace.diagnostics));
    HandlerRegistry handlers;
    HandlerSpec spec = saving_relu_spec();
    spec.backend_vjp = false;  // an adjoint kernel for the tape's rule only
    REQUIRE(handlers.add(spec));
    Session session = open(workspace, handlers, "saving_cpu", {Op::Relu});
    Var x = session.parameter(values({3}, {2, -2, 0}));
    Var y = session.call(Op::Relu, {x}).value();
    CHECK(live_saved_states == 1);
    auto grads = session.backward(y);
    REQUIRE_MESSAGE(grads, (grads ? std::string() : grads.error().message));
    CHECK(grads->of(x).to_vector() == std::vector<double>{1, 0, 0});
    CHECK(live_saved_states == 0);
  }

  TEST_CASE("handler registration refuses half a saving pair and an autograd forward without a runtime name") {
    HandlerRegistry registry;
    HandlerSpec forward_only = saving_relu_spec();
    forward_only.backward_saved = nullptr;
    forward_only.backend_vjp = false;
    auto refused = registry.add(forward_only);
    REQUIRE_FALSE(refused);
    CHECK(has(refused.error().message, "has a saving forward but no backward_saved kernel; expected both or neither"));

    HandlerSpec backward_only = saving_relu_spec();
    backward_only.forward_saving = nullptr;
    refused = registry.add(backward_only);
    REQUIRE_FALSE(refused);
    CHECK(has(refused.error().message, "has a backward_saved kernel but no saving forward"));

    HandlerSpec unnamed = boundary_spec<Op::Add>();
    unnamed.autograd_runtime.clear();
    refused = registry.add(unnamed);
    REQUIRE_FALSE(refused);
    CHECK(has(refused.error().message, "has an autograd forward but names no autograd runtime"));
    CHECK(registry.size() == 0);

    // backend_vjp is satisfied by a saving backward alone.
    HandlerSpec saving = saving_relu_spec();
    saving.backward = nullptr;
    CHECK(registry.add(saving));
  }

  TEST_CASE("an external-autograd profile trains through per-op boundaries with the reference tape's gradients") {
    testing::ScratchTree tree("external-autograd");
    Workspace workspace = boundary_workspace(tree);
    HandlerRegistry handlers;
    register_boundary_handlers(handlers);
    Session session = open(workspace, handlers, "boundary_cpu", kBoundaryOps);
    CHECK(session.policy().vjp == VjpMode::ExternalAutograd);
    for (Op op : kBoundaryOps) {
      const ExecutableKernel* kernel = session.select(op).value();
      CHECK(kernel->capsule().vjp == VjpMode::ExternalAutograd);
      CHECK(kernel->capsule().provider == Provider::External);
    }

    autograd_requests.clear();
    REQUIRE(live_boundaries == 0);
    const Inputs in;
    Model model = run_model(session, in);
    CHECK(live_boundaries == 5);  // one region per external-autograd call
    // Each runtime was told exactly which inputs need a gradient: never the constant x or q, and
    // never the mask, although it is a taped parameter.
    const std::vector<std::pair<Op, std::vector<bool>>> expected_requests = {
        {Op::Matmul, {false, true}}, {Op::Add, {true, true}}, {Op::HardMaskedSoftmax, {true, false}},
        {Op::Mul, {true, false}},    {Op::ReduceSum, {true}}};
    CHECK(autograd_requests == expected_requests);

    auto grads = session.backward(model.loss);
    REQUIRE_MESSAGE(grads, (grads ? std::string() : grads.error().message));
    CHECK(live_boundaries == 0);  // every region's retained state is freed by its backward
    CHECK_FALSE(grads->of(model.mask).defined());  // the runtime's mask gradient was dropped

    // The same model on the reference tape (checked_cpu): the gradients agree.
    SessionOptions options;
    options.profile = "checked_cpu";
    auto reference_session = Session::open(testing::shipped(), testing::reference_handlers(), options);
    REQUIRE(reference_session);
    Model reference_model = run_model(*reference_session, in);
    auto reference_grads = reference_session->backward(reference_model.loss);
    REQUIRE(reference_grads);
    CHECK(model.loss.value().to_vector() == reference_model.loss.value().to_vector());
    const std::vector<double> got = grads->of(model.w).to_vector();
    const std::vector<double> want = reference_grads->of(reference_model.w).to_vector();
    REQUIRE(got.size() == want.size());
    double largest = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      CHECK(std::abs(got[i] - want[i]) <= 1e-12 * (1 + std::abs(want[i])));
      largest = std::max(largest, std::abs(want[i]));
    }
    CHECK(largest > 0.01);  // the comparison is not between zeros
    CHECK_FALSE(reference_grads->of(reference_model.mask).defined());

    // The report names the boundary under every external-autograd capsule.
    const std::vector<CapsuleUse> uses = session.capsules_used();
    const std::string report = capsules_used_text(uses);
    CHECK(has(report,
              "  matmul -> boundary.matmul (external/cpu, checked, vjp=external-autograd): 1 forward, 0 in VJPs\n"
              "    handler: test autograd matmul\n"
              "    external-autograd boundary: test autograd recorder, one region per call: 1 recorded, 1 backward\n"));
    CHECK(has(report,
              "  add -> boundary.add (external/cpu, checked, vjp=external-autograd): 1 forward, 1 in VJPs\n"
              "    handler: test autograd add\n"
              "    external-autograd boundary: test autograd recorder, one region per call: 1 recorded, 1 backward\n"));
    JsonWriter json;
    write_capsules_used_json(json, uses);
    CHECK(has(json.str(), "\"boundary\":{\"runtime\":\"test autograd recorder\",\"region\":\"op\","
                               "\"regions_recorded\":1,\"region_vjps\":1}"));

    // The regions were freed with their backward: a second backward is refused.
    auto again = session.backward(model.loss);
    REQUIRE_FALSE(again);
    CHECK(again.error().message ==
          "backward through `reduce_sum` (capsule `boundary.reduce_sum`): its external-autograd boundary was freed "
          "by an earlier backward of this tape; run the forward again to backpropagate a second time");

    // Regions recorded and never backpropagated are freed by clear_tape.
    session.clear_tape();
    run_model(session, in);
    CHECK(live_boundaries == 5);
    session.clear_tape();
    CHECK(live_boundaries == 0);

    // Untaped calls open no region.
    Var constant = session.constant(in.w);
    REQUIRE(session.call(Op::ReduceSum, {constant}));
    CHECK(live_boundaries == 0);
  }

  TEST_CASE("an external-autograd boundary's undefined gradient becomes zeros, a short or mistyped answer is an error") {
    testing::ScratchTree tree("external-autograd-contract");
    Workspace workspace = boundary_workspace(tree);
    HandlerRegistry handlers;
    register_boundary_handlers(handlers);
    Session session = open(workspace, handlers, "boundary_cpu", kBoundaryOps);

    struct Reset {
      ~Reset() { leave_second_gradient_undefined = return_no_gradients = answer_in_float32 = false; }
    } reset;
    leave_second_gradient_undefined = true;  // as a runtime reports an input its region did not use
    Var a = session.parameter(values({2}, {1, 2}));
    Var b = session.parameter(values({2}, {3, 4}));
    Var sum = session.call(Op::Add, {a, b}).value();
    auto grads = session.backward(sum);
    REQUIRE_MESSAGE(grads, (grads ? std::string() : grads.error().message));
    CHECK(grads->of(a).to_vector() == std::vector<double>{1, 1});
    REQUIRE(grads->of(b).defined());
    CHECK(grads->of(b).to_vector() == std::vector<double>{0, 0});

    return_no_gradients = true;
    session.clear_tape();
    a = session.parameter(values({2}, {1, 2}));
    sum = session.call(Op::Add, {a, a}).value();
    auto short_answer = session.backward(sum);
    REQUIRE_FALSE(short_answer);
    CHECK(short_answer.error().message ==
          "backward through `add` (capsule `boundary.add`): the external-autograd boundary returned 0 gradients for 2 "
          "inputs; expected one per input");
    CHECK(live_boundaries == 0);  // freed even though its VJP failed

    return_no_gradients = false;
    answer_in_float32 = true;
    session.clear_tape();
    a = session.parameter(values({2}, {1, 2}));
    sum = session.call(Op::Add, {a, a}).value();
    auto other_precision = session.backward(sum);
    REQUIRE_FALSE(other_precision);
    CHECK(other_precision.error().code == RuntimeCode::DTypeMismatch);
    CHECK(other_precision.error().message ==
          "backward through `add` (capsule `boundary.add`): gradient for input 0 is float32 on cpu; expected float64 "
          "on cpu");
  }

  TEST_CASE("an external-autograd capsule binds only to a handler that opens an autograd boundary") {
    testing::ScratchTree tree("external-autograd-bind");
    Workspace workspace = boundary_workspace(tree);
    HandlerRegistry handlers;
    REQUIRE(handlers.add(external_spec(Op::Matmul, "test plain matmul")));
    SessionOptions options;
    options.profile = "boundary_cpu";
    options.preselect = {Op::Matmul};
    auto refused = Session::open(workspace, handlers, options);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == RuntimeCode::BindingRejected);
    CHECK(refused.error().message ==
          "torch: invalid executable backend binding: capsule `boundary.matmul` has VJP mode external-autograd, but "
          "handler `test plain matmul` opens no autograd boundary (no forward_autograd)");
  }
}

}  // namespace capsule
