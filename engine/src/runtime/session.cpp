// SPDX-License-Identifier: Apache-2.0
#include "capsule/runtime/session.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <ostream>

#include "capsule/assert.hpp"
#include "capsule/escape.hpp"
#include "capsule/text.hpp"
#include "recheck.hpp"
#include "vjp_rules.hpp"

namespace capsule {
namespace {

/// One taped call. Leaves (parameters) have no kernel.
struct TapeNode {
  const ExecutableKernel* kernel = nullptr;
  Op op = Op::Custom;
  std::vector<Var> inputs;
  Tensor output;
  OpAttrs attrs;
  /// What the handler's saving forward kept for its backward (may be null).
  std::unique_ptr<SavedState> saved;
  /// The external-autograd region's boundary (null when no input needed a gradient).
  std::unique_ptr<AutogradBoundary> boundary;
  /// A backward already ran through this node and freed its saved state and boundary.
  bool released = false;
};

std::string session_error(std::string_view message) { return str(kTorchLeanSessionPrefix, message); }

/// `result` with its refusal worded in `style` (restyle).
template <class T>
RuntimeResult<T> in_style(RuntimeResult<T> result, MessageStyle style) {
  if (!result) result.error().message = restyle(std::move(result.error().message), style);
  return result;
}

/// Whether a taped call through `kernel` runs the handler's saving forward: exactly when its
/// backward calls the handler's adjoint kernel, the only reader of the state.
bool keeps_saved_state(const ExecutableKernel& kernel, Op op) {
  if (kernel.handler().forward_saving == nullptr) return false;
  const VjpMode mode = kernel.capsule().vjp;
  return mode == VjpMode::BackendVjp || (mode == VjpMode::TorchleanTape && vjp_rule_uses_adjoint(op));
}

/// requires_grad[i]: input i of the node is on the tape and the op differentiates it.
std::vector<bool> gradient_needs(const TapeNode& node, bool& any) {
  std::vector<bool> needs(node.inputs.size());
  any = false;
  for (std::size_t j = 0; j < node.inputs.size(); ++j) {
    needs[j] = node.inputs[j].requires_grad() && input_takes_gradient(node.op, j);
    any = any || needs[j];
  }
  return needs;
}

/// Tape ids are unique across every session of the process, so a Var from another session or from
/// a cleared tape can never be mistaken for a node of the current one.
std::uint64_t next_tape_id() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

}  // namespace

struct Session::State {
  const Workspace* workspace = nullptr;
  const HandlerRegistry* handlers = nullptr;
  const CheckerRegistry* checkers = nullptr;  // null: capsules with checker evidence are rejected
  RecheckPolicy recheck;
  SessionOptions options;
  std::optional<ResolvedProfile> resolved;
  std::optional<Planner> planner;  // the profile's registry under the effective policy
  KernelPolicy policy;
  std::array<std::unique_ptr<ExecutableKernel>, kOpCount> selected{};
  std::array<std::int32_t, kOpCount> use_slot{};
  std::vector<CapsuleUse> uses;
  /// Parallel to `uses`: the checker bound to each obligation (null: no checker evidence) and
  /// its entry in the use's `rechecks`.
  struct BoundChecks {
    std::array<const RegisteredChecker*, 2> checker{};
    std::array<std::size_t, 2> slot{};
  };
  std::vector<BoundChecks> bound_checks;
  std::vector<TapeNode> tape;
  std::uint64_t tape_generation = next_tape_id();  // renewed by clear_tape; Vars carry the id they index
  bool in_backward = false;

  /// The tape node `var` refers to on the current tape, or -1 (constant, or an older tape).
  std::int32_t node_of(std::int32_t node, std::uint64_t tape_id) const {
    return tape_id == tape_generation ? node : -1;
  }

  /// The use record of `op`, which must have been selected.
  CapsuleUse& use_of(Op op) { return uses[static_cast<std::size_t>(use_slot[static_cast<std::size_t>(op)])]; }

  /// The kernel bound to `op`: planned, gated and bound on first use, then cached. A refusal is
  /// worded in the session's message style.
  RuntimeResult<const ExecutableKernel*> select(Op op);
  RuntimeResult<const ExecutableKernel*> select_in_torchlean_words(Op op);
  RuntimeResult<Tensor> dispatch(Op op, std::span<const Tensor> inputs, const OpAttrs& attrs);
  /// Counts one call of `op`'s `obligation` (value or vjp) and, when its capsule has checker
  /// evidence and the policy selects the call, runs the checker on it. A failed check is a
  /// check-failed error naming capsule, op, call index and violation, after the reproduction
  /// bundle was written.
  RuntimeStatus recheck_call(Op op, Obligation obligation, CheckCall call);
  /// Runs the forward of a call being recorded as `node` (whose inputs are set), keeping the
  /// handler's saved state or opening the external-autograd boundary on the node.
  RuntimeResult<Tensor> record_forward(TapeNode& node, std::span<const Tensor> inputs);
  /// The node's local VJP from its handler's adjoint kernel, with the node's saved state.
  RuntimeResult<std::vector<Tensor>> adjoint(const TapeNode& node, std::span<const Tensor> inputs, const Tensor& grad);
  /// The node's local VJP from its external-autograd boundary, which is freed here.
  RuntimeResult<std::vector<Tensor>> boundary_vjp(TapeNode& node, const Tensor& grad);
  /// A new tensor filled with `value` on the session's device: the host's own tensors on the CPU,
  /// the device runtime's fill elsewhere (never a host tensor a device kernel would then read).
  RuntimeResult<Tensor> full(const Shape& shape, DType dtype, double value) const {
    if (policy.device == Device::Cpu) return Tensor::full(shape, dtype, value);
    if (DeviceFill fill = handlers->device_fill(policy.device)) return fill(shape, dtype, value);
    return runtime_error(RuntimeCode::DeviceUnavailable,
                         str("the `", to_string(policy.device), "` runtime linked in this build cannot make tensors, ",
                             "so the session cannot make a gradient on that device"));
  }
};

namespace {

/// Lets a VJP rule dispatch ops through the session and call the node's adjoint kernel.
class SessionVjpDispatch final : public VjpDispatch {
 public:
  SessionVjpDispatch(Session::State& state, const TapeNode& node, std::span<const Tensor> inputs, const Tensor& grad)
      : state_(state), node_(node), inputs_(inputs), grad_(grad) {}

  RuntimeResult<Tensor> op(Op op, std::span<const Tensor> inputs, const OpAttrs& attrs) override {
    return state_.dispatch(op, inputs, attrs);
  }

  RuntimeResult<std::vector<Tensor>> adjoint() override { return state_.adjoint(node_, inputs_, grad_); }

  RuntimeResult<Tensor> full(const Shape& shape, DType dtype, double value) override {
    return state_.full(shape, dtype, value);
  }

 private:
  Session::State& state_;
  const TapeNode& node_;
  std::span<const Tensor> inputs_;
  const Tensor& grad_;
};

}  // namespace

RuntimeResult<Session> Session::open(const Workspace& workspace, const HandlerRegistry& handlers,
                                     SessionOptions options) {
  const MessageStyle style = options.message_style;
  return in_style(open_with(workspace, handlers, nullptr, std::move(options)), style);
}

RuntimeResult<Session> Session::open(const Workspace& workspace, const HandlerRegistry& handlers,
                                     const CheckerRegistry& checkers, SessionOptions options) {
  const MessageStyle style = options.message_style;
  return in_style(open_with(workspace, handlers, &checkers, std::move(options)), style);
}

RuntimeResult<Session> Session::open_with(const Workspace& workspace, const HandlerRegistry& handlers,
                                          const CheckerRegistry* checkers, SessionOptions options) {
  ProfilePtr profile = workspace.find_profile(options.profile);
  if (!profile) {
    std::vector<std::string_view> names = workspace.profile_names();
    std::string message = session_error(str("unknown profile `", options.profile, "`"));
    if (std::string near = nearest_name(options.profile, names); !near.empty()) {
      message += str("; did you mean `", near, "`?");
    }
    std::vector<std::string> all(names.begin(), names.end());
    message += str(" (loaded profiles: ", join(all, ", "), ")");
    return runtime_error(RuntimeCode::UnknownProfile, std::move(message));
  }
  auto resolved = resolve_profile(workspace, profile);
  if (!resolved) return runtime_error(RuntimeCode::ProfileInvalid, session_error(resolved.error()));

  const Device device = profile->policy.device;
  // TorchLean's validateDevice, then validateForExecution: capsules first, then a linked runtime.
  if (!resolved->planner.registry().has_device_capsule(device)) {
    return runtime_error(RuntimeCode::DeviceUnavailable,
                         session_error(str("backend profile `", profile->name, "` has no capsule for device `",
                                           to_string(device), "`")));
  }
  if (device != Device::Cpu) {
    if (handlers.device_runtime(device) == nullptr) {
      if (device == Device::Cuda) {
        return runtime_error(
            RuntimeCode::DeviceUnavailable,
            session_error(str("profile `", profile->name, "` targets `cuda`, but this build has ",
                              options.message_style == MessageStyle::TorchLean
                                  ? "only CPU parity stubs for CUDA (no native CUDA runtime is linked)"
                                  : "no CUDA runtime linked",
                              ", so there is no usable CUDA device; nothing falls back to the CPU")));
      }
      return runtime_error(RuntimeCode::DeviceUnavailable,
                           session_error(str("device `", to_string(device), "` has no linked ",
                                             options.message_style == MessageStyle::TorchLean ? "TorchLean " : "",
                                             "execution runtime")));
    }
    if (std::string reason = handlers.probe_device(device); !reason.empty()) {
      return runtime_error(RuntimeCode::DeviceUnavailable,
                           session_error(str("profile `", profile->name, "` targets `", to_string(device),
                                             "`, but there is no usable ", to_string(device), " device: ", reason,
                                             "; nothing falls back to the CPU")));
    }
  }

  auto state = std::make_unique<State>();
  state->workspace = &workspace;
  state->handlers = &handlers;
  state->checkers = checkers;
  state->recheck = options.recheck.value_or(profile->recheck);
  state->policy = profile->policy;
  // TorchLean's effectiveBackendProfile: inference plans with VJP mode none.
  if (!options.gradients) state->policy.vjp = VjpMode::None;
  state->planner.emplace(resolved->planner.registry(), profile->availability, state->policy);
  state->resolved.emplace(std::move(resolved).value());
  state->use_slot.fill(-1);
  state->options = std::move(options);
  if (state->options.show_backend && state->options.log != nullptr) {
    *state->options.log << backend_log_header(state->options.message_style);
  }
  Session session(std::move(state));
  for (Op op : session.state_->options.preselect) {
    // In TorchLean's words here: Session::open words every refusal of the open once.
    auto selected = session.state_->select_in_torchlean_words(op);
    if (!selected) return fail(std::move(selected).error());
  }
  return session;
}

Session::Session(std::unique_ptr<State> state) : state_(std::move(state)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

const Profile& Session::profile() const { return *state_->resolved->profile; }
const KernelPolicy& Session::policy() const { return state_->policy; }
bool Session::gradients() const { return state_->options.gradients; }
const std::vector<SourceFile>& Session::sources() const { return state_->resolved->sources; }
std::size_t Session::tape_size() const { return state_->tape.size(); }
bool Session::on_tape(const Var& var) const { return state_->node_of(var.node_, var.tape_) >= 0; }
void Session::clear_tape() {
  state_->tape.clear();
  state_->tape_generation = next_tape_id();
}

std::size_t Session::selection_count() const {
  return static_cast<std::size_t>(std::count_if(state_->selected.begin(), state_->selected.end(),
                                                [](const auto& kernel) { return kernel != nullptr; }));
}

RuntimeResult<const ExecutableKernel*> Session::select(Op op) { return state_->select(op); }

RuntimeResult<const ExecutableKernel*> Session::State::select(Op op) {
  // The cached choice first: this runs before every call of `op`.
  if (const auto& cached = selected[static_cast<std::size_t>(op)]) return cached.get();
  return in_style(select_in_torchlean_words(op), options.message_style);
}

RuntimeResult<const ExecutableKernel*> Session::State::select_in_torchlean_words(Op op) {
  State& s = *this;
  const auto index = static_cast<std::size_t>(op);
  if (s.selected[index]) return s.selected[index].get();

  const Profile& profile = *s.resolved->profile;
  auto planned = s.planner->plan_op(op);
  if (!planned) {
    return runtime_error(RuntimeCode::PlanningFailed,
                         str(kTorchLeanBackendPrefix, "backend planning failed for `", to_string(op), "`: ", planned.error().render()));
  }
  auto accepted = accept(*planned, s.policy);
  if (!accepted) {
    std::vector<std::string> failures;
    for (const AcceptanceFailure& failure : accepted.error()) failures.push_back(failure.message());
    return runtime_error(RuntimeCode::GateRejected,
                         str(kTorchLeanBackendPrefix, "backend planning failed for `", to_string(op), "`: backend profile ",
                             profile.name, " rejected `", to_string(op), "`: ", join(failures, "; ")));
  }
  if (auto mismatch = eager_request_mismatch(accepted->capsule(), op, s.policy.device)) {
    return runtime_error(RuntimeCode::BindingRejected, str(kTorchLeanBackendPrefix, "invalid eager backend selection: ", *mismatch));
  }
  CAPSULE_TRY(ExecutableKernel kernel, bind(*accepted, *s.handlers));
  const Capsule& capsule = kernel.capsule();
  if (s.options.gradients && capsule.vjp == VjpMode::TorchleanTape && vjp_rule_uses_adjoint(op) &&
      !kernel.handler().has_backward()) {
    return runtime_error(RuntimeCode::BindingRejected,
                         str(kTorchLeanBackendPrefix, "invalid executable backend binding: the torchlean-tape VJP rule for `",
                             to_string(op), "` needs the adjoint kernel of handler `", kernel.handler().name,
                             "`, which declares none"));
  }
  // Checker evidence binds its checker now, before any call of the capsule runs.
  State::BoundChecks bound;
  CapsuleUse use{op, std::make_shared<const Capsule>(capsule), kernel.handler().name, 0, 0, 0,
                 kernel.handler().autograd_runtime, 0, 0, {}};
  for (Obligation obligation : {Obligation::Value, Obligation::Vjp}) {
    CAPSULE_TRY(const RegisteredChecker* checker, bind_checker(capsule, obligation, s.checkers));
    if (checker == nullptr) continue;
    const std::size_t k = obligation == Obligation::Value ? 0 : 1;
    bound.checker[k] = checker;
    bound.slot[k] = use.rechecks.size();
    use.rechecks.push_back(RecheckUse{obligation, checker->spec.name, checker->spec.coverage, s.recheck, 0, 0, 0});
  }
  if (s.options.show_backend && s.options.log != nullptr) {
    for (const std::string& line : detailed_lines(PlannedKernel{op, &capsule})) *s.options.log << line << '\n';
  }
  s.use_slot[index] = static_cast<std::int32_t>(s.uses.size());
  s.uses.push_back(std::move(use));
  s.bound_checks.push_back(bound);
  s.selected[index] = std::make_unique<ExecutableKernel>(std::move(kernel));
  return s.selected[index].get();
}

RuntimeResult<Tensor> Session::State::dispatch(Op op, std::span<const Tensor> inputs, const OpAttrs& attrs) {
  const auto index = static_cast<std::size_t>(op);
  const ExecutableKernel* kernel = selected[index].get();
  if (kernel == nullptr) {
    CAPSULE_TRY(kernel, select(op));
  }
  CapsuleUse& use = use_of(op);
  ++(in_backward ? use.vjp_calls : use.forward_calls);
  CAPSULE_TRY(Tensor out, kernel->run(inputs, attrs));
  CAPSULE_CHECK(recheck_call(op, Obligation::Value, CheckCall{op, inputs, &out, &attrs, nullptr, {}}));
  return out;
}

RuntimeStatus Session::State::recheck_call(Op op, Obligation obligation, CheckCall call) {
  const auto slot = static_cast<std::size_t>(use_slot[static_cast<std::size_t>(op)]);
  const std::size_t k = obligation == Obligation::Value ? 0 : 1;
  const RegisteredChecker* checker = bound_checks[slot].checker[k];
  if (checker == nullptr) return std::monostate{};
  const Capsule& capsule = *uses[slot].capsule;
  RecheckUse& record = uses[slot].rechecks[bound_checks[slot].slot[k]];
  const std::uint64_t call_index = record.calls++;
  if (!recheck_selects(record.policy, capsule.name, call_index)) return std::monostate{};
  // The checker's own stream: (policy seed, capsule, call index) only, the VJP's apart from the
  // value's, so checks never draw from (or perturb) any stream of the run being checked.
  const std::string stream_name = obligation == Obligation::Value ? capsule.name : str(capsule.name, "#vjp");
  CheckerRng rng(checker_stream_seed(record.policy.seed, stream_name, call_index));
  ++record.run;
  auto verdict = run_checker(*checker, call, rng);
  const std::string subject = str("recheck failed: capsule `", capsule.name, "` (op `", to_string(op), "`, device `",
                                  to_string(capsule.device), "`), ", to_string(obligation), " call ", call_index,
                                  ", checker `", checker->spec.name, "`: ");
  if (!verdict) {
    return runtime_error(RuntimeCode::CheckFailed,
                         str(subject, "the checker could not check the call: ", verdict.error().message));
  }
  if (verdict->passed) {
    ++record.passed;
    return std::monostate{};
  }
  const std::filesystem::path parent = options.repro_dir.empty() ? std::filesystem::temp_directory_path()
                                                                 : options.repro_dir;
  auto bundle = write_repro_bundle(parent, ReproBundle{&capsule, obligation, call_index, checker, &call,
                                                       &*verdict, &record.policy, options.fingerprint});
  const CheckViolation& worst = verdict->worst;
  return runtime_error(RuntimeCode::CheckFailed,
                       str(subject, worst.what.empty() ? std::string("residual") : worst.what, " ",
                           recheck_number(worst.residual), " exceeds its bound ", recheck_number(worst.bound),
                           worst.index >= 0 ? str(" at index ", worst.index) : std::string(),
                           "; the run stops (nothing is recomputed with another provider); ",
                           bundle ? str("reproduction bundle: ", bundle->string())
                                  : str("no reproduction bundle: ", bundle.error())));
}

RuntimeResult<Tensor> Session::State::record_forward(TapeNode& node, std::span<const Tensor> inputs) {
  CAPSULE_TRY(const ExecutableKernel* kernel, select(node.op));
  node.kernel = kernel;
  CapsuleUse& use = use_of(node.op);
  ++use.forward_calls;
  const HandlerSpec& handler = kernel->handler();
  if (kernel->capsule().vjp == VjpMode::ExternalAutograd) {
    // One region per call (docs/runtime.md): the boundary covers exactly this op. With no input
    // needing a gradient there is nothing for the external runtime to record.
    bool any = false;
    const std::vector<bool> needs = gradient_needs(node, any);
    if (!any) return kernel->run(inputs, node.attrs);
    CAPSULE_TRY(AutogradForwardResult result, handler.forward_autograd(inputs, node.attrs, needs));
    if (!result.boundary) {
      return runtime_error(RuntimeCode::GradientUnavailable,
                           str("`", to_string(node.op), "` (capsule `", kernel->capsule().name, "`): handler `",
                               handler.name, "` returned no autograd boundary for a call that needs gradients"));
    }
    ++use.boundary_regions;
    node.boundary = std::move(result.boundary);
    return std::move(result.output);
  }
  if (keeps_saved_state(*kernel, node.op)) {
    CAPSULE_TRY(SavingForwardResult result, handler.forward_saving(inputs, node.attrs));
    node.saved = std::move(result.saved);
    return std::move(result.output);
  }
  return kernel->run(inputs, node.attrs);
}

RuntimeResult<std::vector<Tensor>> Session::State::adjoint(const TapeNode& node, std::span<const Tensor> inputs,
                                                           const Tensor& grad) {
  const HandlerSpec& handler = node.kernel->handler();
  if (handler.backward_saved != nullptr) {
    if (node.released) {
      return runtime_error(RuntimeCode::GradientUnavailable,
                           str("backward through `", to_string(node.op), "` (capsule `", node.kernel->capsule().name,
                               "`): the state handler `", handler.name,
                               "` saved in the forward was freed by an earlier backward of this tape; run the "
                               "forward again to backpropagate a second time"));
    }
    ++use_of(node.op).adjoint_calls;
    return handler.backward_saved(inputs, node.output, grad, node.attrs, node.saved.get());
  }
  if (handler.backward == nullptr) {
    return runtime_error(RuntimeCode::GradientUnavailable,
                         str("backward through `", to_string(node.op), "`: handler `", handler.name,
                             "` declares no adjoint kernel, which the torchlean-tape rule needs"));
  }
  ++use_of(node.op).adjoint_calls;
  return handler.backward(inputs, node.output, grad, node.attrs);
}

RuntimeResult<std::vector<Tensor>> Session::State::boundary_vjp(TapeNode& node, const Tensor& grad) {
  const Capsule& capsule = node.kernel->capsule();
  bool any = false;
  const std::vector<bool> needs = gradient_needs(node, any);
  if (!any) return std::vector<Tensor>{};  // no region was opened: nothing flows back
  // Taken off the node first, so the region's retained graph is freed when this returns, whether
  // or not its VJP succeeds.
  std::unique_ptr<AutogradBoundary> boundary = std::move(node.boundary);
  if (!boundary) {
    return runtime_error(RuntimeCode::GradientUnavailable,
                         str("backward through `", to_string(node.op), "` (capsule `", capsule.name,
                             "`): its external-autograd boundary was freed by an earlier backward of this tape; run "
                             "the forward again to backpropagate a second time"));
  }
  ++use_of(node.op).boundary_vjps;
  CAPSULE_TRY(std::vector<Tensor> grads, boundary->vjp(grad));
  if (grads.size() != node.inputs.size()) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("backward through `", to_string(node.op), "` (capsule `", capsule.name,
                             "`): the external-autograd boundary returned ", grads.size(), " gradients for ",
                             node.inputs.size(), " inputs; expected one per input"));
  }
  for (std::size_t j = 0; j < grads.size(); ++j) {
    if (!needs[j]) {
      grads[j] = Tensor();  // masks and constants never take a gradient, whatever the runtime says
    } else if (!grads[j].defined()) {
      // The runtime computed none (an input the region did not use): its gradient is zero.
      const Tensor& input = node.inputs[j].value();
      CAPSULE_TRY(grads[j], full(input.shape(), input.dtype(), 0.0));
    }
  }
  return grads;
}

Var Session::parameter(Tensor value) {
  if (!state_->options.gradients) return Var(std::move(value), -1, 0);
  TapeNode node;
  node.output = value;
  state_->tape.push_back(std::move(node));
  return Var(std::move(value), static_cast<std::int32_t>(state_->tape.size() - 1), state_->tape_generation);
}

RuntimeResult<Var> Session::call(Op op, std::span<const Var> inputs, const OpAttrs& attrs) {
  State& s = *state_;
  // Kernels take a contiguous span of tensors. For the common small arities the copies live in
  // an uninitialised local buffer: only the slots in use are constructed (and destroyed below).
  constexpr std::size_t kInline = 6;
  alignas(Tensor) std::byte inline_buffer[kInline * sizeof(Tensor)];
  std::vector<Tensor> spilled;
  std::span<const Tensor> tensors;
  bool taped = false;
  std::size_t constructed = 0;
  struct InlineGuard {
    Tensor* first;
    std::size_t& count;
    ~InlineGuard() { std::destroy_n(first, count); }
  } guard{reinterpret_cast<Tensor*>(inline_buffer), constructed};
  if (inputs.size() <= kInline) {
    for (; constructed < inputs.size(); ++constructed) {
      std::construct_at(guard.first + constructed, inputs[constructed].value_);
      taped = taped || s.node_of(inputs[constructed].node_, inputs[constructed].tape_) >= 0;
    }
    tensors = std::span<const Tensor>(guard.first, inputs.size());
  } else {
    spilled.reserve(inputs.size());
    for (const Var& input : inputs) {
      spilled.push_back(input.value_);
      taped = taped || s.node_of(input.node_, input.tape_) >= 0;
    }
    tensors = spilled;
  }
  // A tensor moves between devices only when its owner asks (a provider's to_device / to_host):
  // an input on another device than the session's is refused here, before a kernel could read
  // a device address on the host or the reverse.
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].defined() && tensors[i].device() != s.policy.device) {
      return runtime_error(RuntimeCode::DeviceMismatch,
                           str(to_string(op), ": input ", i, " is on `", to_string(tensors[i].device()),
                               "`, but profile `", s.resolved->profile->name, "` runs on `",
                               to_string(s.policy.device), "`; nothing is copied between devices implicitly: "
                               "move it explicitly first"));
    }
  }
  if (!taped || !s.options.gradients || s.in_backward) {
    CAPSULE_TRY(Tensor out, s.dispatch(op, tensors, attrs));
    return Var(std::move(out), -1, 0);
  }
  TapeNode node;
  node.op = op;
  node.attrs = attrs;
  node.inputs.reserve(inputs.size());
  for (const Var& input : inputs) {
    // Inputs from an older tape enter this one as constants.
    node.inputs.push_back(Var(input.value_, s.node_of(input.node_, input.tape_), s.tape_generation));
  }
  CAPSULE_TRY(Tensor out, s.record_forward(node, tensors));
  CAPSULE_CHECK(s.recheck_call(op, Obligation::Value, CheckCall{op, tensors, &out, &attrs, nullptr, {}}));
  node.output = out;
  s.tape.push_back(std::move(node));
  return Var(std::move(out), static_cast<std::int32_t>(s.tape.size() - 1), s.tape_generation);
}

Tensor Gradients::of(const Var& var) const {
  if (var.node_ < 0 || var.tape_ != tape_ || static_cast<std::size_t>(var.node_) >= by_node_.size()) return Tensor();
  return by_node_[static_cast<std::size_t>(var.node_)];
}

RuntimeResult<Gradients> Session::backward(const Var& root) {
  State& s = *state_;
  if (!s.options.gradients) {
    return runtime_error(RuntimeCode::GradientUnavailable,
                         str("backward: gradients are off in this session (profile `", profile().name,
                             "` runs with VJP mode none)"));
  }
  if (s.node_of(root.node_, root.tape_) < 0 || static_cast<std::size_t>(root.node_) >= s.tape.size()) {
    return runtime_error(RuntimeCode::GradientUnavailable,
                         "backward: the root does not depend on any parameter of the current tape");
  }
  struct BackwardScope {
    bool& flag;
    explicit BackwardScope(bool& f) : flag(f) { flag = true; }
    ~BackwardScope() { flag = false; }
  } scope(s.in_backward);

  Gradients grads;
  grads.tape_ = s.tape_generation;
  grads.by_node_.resize(s.tape.size());
  CAPSULE_TRY(grads.by_node_[static_cast<std::size_t>(root.node_)],
              s.full(root.value_.shape(), root.value_.dtype(), 1.0));
  std::vector<Tensor> inputs;
  for (auto i = static_cast<std::size_t>(root.node_) + 1; i-- > 0;) {
    TapeNode& node = s.tape[i];
    const Tensor& grad = grads.by_node_[i];
    if (node.kernel == nullptr || !grad.defined()) continue;
    const Capsule& capsule = node.kernel->capsule();
    inputs.clear();
    std::uint32_t needs = 0;
    for (std::size_t j = 0; j < node.inputs.size(); ++j) {
      inputs.push_back(node.inputs[j].value_);
      if (node.inputs[j].node_ >= 0 && j < 32) needs |= 1u << j;
    }
    RuntimeResult<std::vector<Tensor>> local = std::vector<Tensor>{};
    switch (capsule.vjp) {
      case VjpMode::None:
        return runtime_error(RuntimeCode::GradientUnavailable,
                             str("backward through `", to_string(node.op), "`: capsule `", capsule.name,
                                 "` has VJP mode none; expected a capsule whose VJP is torchlean-tape or backend-vjp"));
      case VjpMode::ExternalAutograd: local = s.boundary_vjp(node, grad); break;
      case VjpMode::BackendVjp: local = s.adjoint(node, inputs, grad); break;
      case VjpMode::TorchleanTape: {
        SessionVjpDispatch dispatch(s, node, inputs, grad);
        local = torchlean_tape_vjp(dispatch, VjpCall{node.op, inputs, &node.output, &grad, &node.attrs, needs});
        break;
      }
    }
    // The node's backward ran: what its forward kept for it is freed now, not at clear_tape.
    node.saved.reset();
    node.released = true;
    if (!local) return fail(std::move(local).error());
    CAPSULE_CHECK(s.recheck_call(node.op, Obligation::Vjp,
                                 CheckCall{node.op, inputs, &node.output, &node.attrs, &grad, *local}));
    for (std::size_t j = 0; j < node.inputs.size() && j < local->size(); ++j) {
      const Var& input = node.inputs[j];
      Tensor& g = (*local)[j];
      if (input.node_ < 0 || !g.defined()) continue;
      if (g.shape() != input.value_.shape()) {
        return runtime_error(RuntimeCode::ShapeMismatch,
                             str("backward through `", to_string(node.op), "` (capsule `", capsule.name,
                                 "`): gradient for input ", j, " has shape ", to_string(g.shape()), "; expected ",
                                 to_string(input.value_.shape())));
      }
      // A handler or external runtime answering in another precision would otherwise surface
      // later as a mismatch inside the gradient sum, far from its cause.
      if (g.dtype() != input.value_.dtype() || g.device() != input.value_.device()) {
        return runtime_error(g.device() != input.value_.device() ? RuntimeCode::DeviceMismatch
                                                                 : RuntimeCode::DTypeMismatch,
                             str("backward through `", to_string(node.op), "` (capsule `", capsule.name,
                                 "`): gradient for input ", j, " is ", to_string(g.dtype()), " on ",
                                 to_string(g.device()), "; expected ", to_string(input.value_.dtype()), " on ",
                                 to_string(input.value_.device())));
      }
      CAPSULE_ASSERT(static_cast<std::size_t>(input.node_) < i, "a taped input precedes the node that uses it");
      Tensor& slot = grads.by_node_[static_cast<std::size_t>(input.node_)];
      if (!slot.defined()) {
        slot = std::move(g);
      } else {
        const std::array<Tensor, 2> pair{slot, g};
        CAPSULE_TRY(slot, s.dispatch(Op::Add, pair, OpAttrs{}));
      }
    }
  }
  return grads;
}

std::vector<CapsuleUse> Session::capsules_used() const {
  std::vector<CapsuleUse> used;
  for (const CapsuleUse& use : state_->uses) {
    if (use.forward_calls + use.vjp_calls + use.adjoint_calls > 0) used.push_back(use);
  }
  return used;
}

std::string capsules_used_text(std::span<const CapsuleUse> uses) {
  std::string out = str("capsules used (", uses.size(), "):\n");
  for (const CapsuleUse& use : uses) {
    const Capsule& c = *use.capsule;
    out += str("  ", to_string(use.op), " -> ", c.name, " (", to_string(c.provider), "/", to_string(c.device), ", ",
               to_string(c.trust), ", vjp=", to_string(c.vjp), "): ", use.forward_calls, " forward, ", use.vjp_calls,
               " in VJPs");
    if (use.adjoint_calls > 0) out += str(", ", use.adjoint_calls, " adjoint");
    // The compiled code that ran, as the handler registered itself: the capsule says what was
    // promised, this line says which kernel kept the promise.
    out += str("\n    handler: ", text_escape(use.handler), "\n");
    if (c.vjp == VjpMode::ExternalAutograd) {
      out += str("    external-autograd boundary: ", use.autograd_runtime, ", one region per call: ",
                 use.boundary_regions, " recorded, ", use.boundary_vjps, " backward\n");
    }
    for (const RecheckUse& r : use.rechecks) {
      out += str("    recheck ", to_string(r.obligation), " by ", r.checker, " (", to_string(r.coverage), ", ",
                 recheck_policy_text(r.policy), "): ", r.run, " of ", r.calls, " calls checked, ", r.passed,
                 " passed\n");
    }
  }
  return out;
}

void write_capsules_used_json(JsonWriter& json, std::span<const CapsuleUse> uses) {
  json.begin_array();
  for (const CapsuleUse& use : uses) {
    const Capsule& c = *use.capsule;
    json.begin_object()
        .field("op", to_string(use.op))
        .field("capsule", std::string_view(c.name))
        .field("provider", to_string(c.provider))
        .field("device", to_string(c.device))
        .field("trust", to_string(c.trust))
        .field("vjp", to_string(c.vjp))
        .field("handler", std::string_view(use.handler))
        .field("forward_calls", static_cast<std::int64_t>(use.forward_calls))
        .field("vjp_calls", static_cast<std::int64_t>(use.vjp_calls))
        .field("adjoint_calls", static_cast<std::int64_t>(use.adjoint_calls));
    if (c.vjp == VjpMode::ExternalAutograd) {
      json.key("boundary")
          .begin_object()
          .field("runtime", std::string_view(use.autograd_runtime))
          .field("region", std::string_view("op"))
          .field("regions_recorded", static_cast<std::int64_t>(use.boundary_regions))
          .field("region_vjps", static_cast<std::int64_t>(use.boundary_vjps))
          .end_object();
    }
    if (!use.rechecks.empty()) {
      json.key("rechecks").begin_array();
      for (const RecheckUse& r : use.rechecks) {
        json.begin_object()
            .field("obligation", to_string(r.obligation))
            .field("checker", std::string_view(r.checker))
            .field("coverage", to_string(r.coverage))
            .key("policy")
            .begin_object();
        if (r.policy.kind == RecheckPolicy::Kind::Every) {
          json.field("every", static_cast<std::int64_t>(r.policy.every));
        } else {
          json.field("sample", r.policy.sample).field("seed", std::string_view(str(r.policy.seed)));
        }
        json.end_object()
            .field("calls", static_cast<std::int64_t>(r.calls))
            .field("checks_run", static_cast<std::int64_t>(r.run))
            .field("checks_passed", static_cast<std::int64_t>(r.passed))
            .end_object();
      }
      json.end_array();
    }
    json.end_object();
  }
  json.end_array();
}

}  // namespace capsule
