// SPDX-License-Identifier: Apache-2.0
// The running side: tensors, the handler registry and binding, eager sessions (device gating, no
// fallback, caching, gate at open) and tape autograd.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "capsule/handlers/reference.hpp"
#include "capsule/runtime/session.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

using testing::shipped;

Session open_session(std::string profile, bool gradients = true, std::vector<Op> preselect = {}) {
  SessionOptions options;
  options.profile = std::move(profile);
  options.gradients = gradients;
  options.preselect = std::move(preselect);
  auto session = Session::open(shipped(), testing::reference_handlers(), options);
  REQUIRE_MESSAGE(session, (session ? std::string() : session.error().message));
  return std::move(session).value();
}

Tensor values(std::initializer_list<std::int64_t> dims, std::initializer_list<double> v, DType dtype = DType::F64) {
  return Tensor::from_values(dims, dtype, v).value();
}

}  // namespace

TEST_SUITE("runtime") {
  TEST_CASE("shapes reject overflowing element counts and negative sizes") {
    auto huge = Shape::make({std::int64_t{1} << 40, std::int64_t{1} << 40});
    REQUIRE_FALSE(huge);
    CHECK(huge.error().code == RuntimeCode::SizeOverflow);
    // The operands as they were, not the wrapped product.
    CHECK(huge.error().message ==
          "tensor element count: 1099511627776 * 1099511627776 does not fit in 64 bits; expected a size below 2^63");
    auto wide = Shape::make({0, std::int64_t{1} << 62, std::int64_t{1} << 62});
    REQUIRE_FALSE(wide);
    CHECK(wide.error().message == "tensor extent (product of the nonzero sizes): 4611686018427387904 * "
                                  "4611686018427387904 does not fit in 64 bits; expected a size below 2^63");
    auto negative = Shape::make({2, -3});
    REQUIRE_FALSE(negative);
    CHECK(negative.error().message.find("dimension 1 is -3") != std::string::npos);
    auto bytes = Tensor::empty(Shape::make({std::int64_t{1} << 61}).value(), DType::F64);
    REQUIRE_FALSE(bytes);
    CHECK(bytes.error().code == RuntimeCode::SizeOverflow);
  }

  TEST_CASE("tensors check value counts and refuse storage on devices without an allocator") {
    auto wrong = Tensor::from_values({2, 2}, DType::F32, {1, 2, 3});
    REQUIRE_FALSE(wrong);
    CHECK(wrong.error().message == "tensor of shape [2, 2] needs 4 values, got 3");
    auto cuda = Tensor::empty(Shape::make({2}).value(), DType::F32, Device::Cuda);
    REQUIRE_FALSE(cuda);
    CHECK(cuda.error().code == RuntimeCode::DeviceUnavailable);
    CHECK(cuda.error().message.find("device `cuda`") != std::string::npos);
    Tensor t = values({2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor r = t.reshaped(Shape::make({3, 2}).value()).value();
    CHECK(r.shares_storage_with(t));
    CHECK(r.at(5) == 6);
    CHECK(to_string(r.shape()) == "[3, 2]");
  }

  TEST_CASE("adopted storage releases its context once, also for zero bytes, and tensors fit inside it") {
    struct Owner {
      int released = 0;
      void* data = nullptr;
    };
    static constexpr auto release = [](void* data, void* context) noexcept {
      auto* owner = static_cast<Owner*>(context);
      ++owner->released;
      owner->data = data;
    };
    Owner owner;
    alignas(8) double buffer[4] = {1, 2, 3, 4};
    {
      auto storage = Storage::adopt(buffer, sizeof buffer, Device::Cpu, release, &owner);
      const Tensor t = Tensor::over(storage, Shape::make({2, 2}).value(), DType::F64).value();
      storage.reset();
      CHECK(t.to_vector() == std::vector<double>{1, 2, 3, 4});
      CHECK(t.data<double>() == buffer);  // no copy
      CHECK(owner.released == 0);         // the tensor keeps the storage alive
      const auto too_big = Tensor::over(Storage::adopt(buffer, 8, Device::Cpu, nullptr, nullptr),
                                        Shape::make({2}).value(), DType::F64);
      REQUIRE_FALSE(too_big.has_value());
      CHECK(too_big.error().code == RuntimeCode::SizeOverflow);
      CHECK(testing::has(too_big.error().message, "needs 16 bytes; the adopted storage holds 8"));
      CHECK_FALSE(Tensor::over(nullptr, Shape{}, DType::F32).has_value());
    }
    CHECK(owner.released == 1);
    CHECK(owner.data == buffer);
    Owner empty;
    {
      const Tensor t = Tensor::over(Storage::adopt(nullptr, 0, Device::Cpu, release, &empty),
                                    Shape::make({0, 3}).value(), DType::F32)
                           .value();
      CHECK(t.numel() == 0);
    }
    CHECK(empty.released == 1);  // a zero-byte buffer's context is released too
    CHECK(empty.data == nullptr);
  }

  TEST_CASE("a storage keeps one foreign view, releases a losing one at once, and the kept one before its bytes") {
    struct Log {
      std::vector<std::string> events;
    };
    static Log log;
    log.events.clear();
    struct Handle {
      std::string name;
    };
    static constexpr auto release = [](void* handle) noexcept {
      auto* h = static_cast<Handle*>(handle);
      log.events.push_back("release " + h->name);
      delete h;
    };
    static constexpr auto free_bytes = [](void* /*data*/, void* /*context*/) noexcept { log.events.push_back("free bytes"); };
    static const char provider_a = 0;
    static const char provider_b = 0;
    alignas(8) float buffer[6] = {1, 2, 3, 4, 5, 6};
    {
      const Tensor t = Tensor::over(Storage::adopt(buffer, sizeof buffer, Device::Cpu, free_bytes, nullptr),
                                    Shape::make({2, 3}).value(), DType::F32)
                           .value();
      CHECK(t.foreign_view() == nullptr);
      const ForeignView* kept = t.attach_foreign_view(ForeignView{&provider_a, new Handle{"first"}, release});
      REQUIRE(kept != nullptr);
      CHECK(kept->provider == &provider_a);
      CHECK(static_cast<Handle*>(kept->handle)->name == "first");
      // A reshape shares the storage, so it sees the same view (the provider checks the shape).
      const Tensor r = t.reshaped(Shape::make({3, 2}).value()).value();
      CHECK(r.foreign_view() == kept);
      // The slot is taken: a second view, even another provider's, is released at once.
      const ForeignView* again = r.attach_foreign_view(ForeignView{&provider_b, new Handle{"second"}, release});
      CHECK(again == kept);
      CHECK(log.events == std::vector<std::string>{"release second"});
    }
    // The view points into the bytes, so it goes first.
    CHECK(log.events == std::vector<std::string>{"release second", "release first", "free bytes"});
    log.events.clear();
    const Tensor undefined;
    CHECK(undefined.foreign_view() == nullptr);
    CHECK(undefined.attach_foreign_view(ForeignView{&provider_a, new Handle{"orphan"}, release}) == nullptr);
    CHECK(log.events == std::vector<std::string>{"release orphan"});
  }

  TEST_CASE("a duplicate handler key names both registration sites") {
    HandlerRegistry registry;
    REQUIRE(register_reference_handlers(registry));
    HandlerSpec again = registry.find(Op::Relu, Provider::Reference, Device::Cpu)->spec;
    again.name = "second relu";
    auto added = registry.add(again);
    REQUIRE_FALSE(added);
    CHECK(added.error().code == RuntimeCode::DuplicateHandler);
    const std::string& message = added.error().message;
    CHECK(message.find("duplicate handler for (relu, reference, cpu)") != std::string::npos);
    CHECK(message.find("`second relu` at tests/test_runtime.cpp:") != std::string::npos);
    CHECK(message.find("`TorchLean reference CPU relu` at handlers/reference/src/") != std::string::npos);
  }

  TEST_CASE("every reference catalog capsule has a reference handler that binds") {
    const ResolvedProfile resolved = testing::shipped_profile("checked_cpu");
    std::size_t bound = 0;
    for (Op op : all_values<Op>()) {
      auto planned = resolved.planner.plan_op(op);
      if (!planned) continue;  // fft_fno, selective_scan and custom have no CPU capsule
      auto accepted = accept(*planned, resolved.planner.policy());
      REQUIRE(accepted);
      auto kernel = bind(*accepted, testing::reference_handlers());
      CHECK_MESSAGE(kernel, to_string(op), ": ", (kernel ? std::string() : kernel.error().message));
      ++bound;
    }
    CHECK(bound == 53);
    CHECK(testing::reference_handlers().size() == 53);
  }

  TEST_CASE("10.17 the reference relu handler binds and runs and a changed identity does not bind") {
    const RegisteredHandler* relu = testing::reference_handlers().find(Op::Relu, Provider::Reference, Device::Cpu);
    REQUIRE(relu != nullptr);
    const Capsule& capsule = testing::shipped_capsule("reference.relu");
    HandlerIdentity identity{relu->spec.name, relu->spec.op, relu->spec.provider, relu->spec.device};
    CHECK_FALSE(binding_mismatch(identity, capsule));
    const ResolvedProfile resolved = testing::shipped_profile("checked_cpu");
    auto accepted = accept(resolved.planner.plan_op(Op::Relu).value(), resolved.planner.policy());
    auto kernel = bind(*accepted, testing::reference_handlers());
    REQUIRE(kernel);
    const Tensor x = values({3}, {-2, 0, 3});
    const Tensor inputs[] = {x};
    CHECK(kernel->run(inputs, OpAttrs{}).value().to_vector() == std::vector<double>{0, 0, 3});

    HandlerIdentity wrong_op = identity;
    wrong_op.op = Op::Add;
    CHECK(binding_mismatch(wrong_op, capsule)->find("implements `add`") != std::string::npos);
    HandlerIdentity wrong_provider = identity;
    wrong_provider.provider = Provider::Torchlean;
    CHECK(binding_mismatch(wrong_provider, capsule)->find("uses provider") != std::string::npos);
    HandlerIdentity wrong_device = identity;
    wrong_device.device = Device::Cuda;
    CHECK(binding_mismatch(wrong_device, capsule)->find("targets `cuda`") != std::string::npos);
  }

  TEST_CASE("binding fails with TorchLean's text when only another provider's handler is linked") {
    HandlerRegistry registry;
    HandlerSpec relu = testing::reference_handlers().find(Op::Relu, Provider::Reference, Device::Cpu)->spec;
    relu.provider = Provider::Torchlean;
    relu.name = "TorchLean composed relu";
    REQUIRE(registry.add(relu));
    const ResolvedProfile resolved = testing::shipped_profile("checked_cpu");
    auto accepted = accept(resolved.planner.plan_op(Op::Relu).value(), resolved.planner.policy());
    REQUIRE(accepted);
    auto kernel = bind(*accepted, registry);
    REQUIRE_FALSE(kernel);
    CHECK(kernel.error().code == RuntimeCode::NoHandler);
    CHECK(kernel.error().message ==
          "torch: `relu` selected capsule `reference.relu` (reference/cpu), but no matching executable handler is "
          "linked; available handlers: TorchLean composed relu (torchlean/cpu)");
  }

  TEST_CASE("a runtime guard the handler does not declare fails to bind") {
    HandlerRegistry registry;
    HandlerSpec relu = testing::reference_handlers().find(Op::Relu, Provider::Reference, Device::Cpu)->spec;
    relu.guards = {"typed tensor layout"};
    REQUIRE(registry.add(relu));
    const ResolvedProfile resolved = testing::shipped_profile("checked_cpu");
    auto accepted = accept(resolved.planner.plan_op(Op::Relu).value(), resolved.planner.policy());
    auto kernel = bind(*accepted, registry);
    REQUIRE_FALSE(kernel);
    CHECK(kernel.error().code == RuntimeCode::BindingRejected);
    CHECK(kernel.error().message ==
          "torch: invalid executable backend binding: capsule `reference.relu` shape evidence names runtime guard "
          "`portable runtime shape checks`, but handler `TorchLean reference CPU relu` declares only "
          "`typed tensor layout`");
  }

  TEST_CASE("the planner's VJP guard of TorchLean's SDPA capsule binds without the handler declaring it") {
    // libtorch.sdpa_forward names `backend profile requires vjp=torchlean-tape` as its VJP evidence:
    // the planner admits a torchlean-tape capsule only under a tape (or inference) policy, so no
    // handler declares it (found binding the LibTorch CUDA twin on a GPU, 2026-12-04).
    HandlerSpec relu = testing::reference_handlers().find(Op::Relu, Provider::Reference, Device::Cpu)->spec;
    Capsule capsule = testing::shipped_capsule("reference.relu");
    Evidence& vjp = capsule.contracts[static_cast<std::size_t>(Obligation::Vjp)].evidence;
    vjp.kind = EvidenceKind::RuntimeGuard;
    vjp.name = "backend profile requires vjp=torchlean-tape";
    REQUIRE(capsule.vjp == VjpMode::TorchleanTape);
    CHECK_FALSE(contract_mismatch(relu, capsule).has_value());
    // Only for a torchlean-tape capsule, and only that guard: others still need the handler.
    capsule.vjp = VjpMode::BackendVjp;
    relu.backend_vjp = true;
    auto other_mode = contract_mismatch(relu, capsule);
    REQUIRE(other_mode);
    CHECK(testing::has(*other_mode, "vjp evidence names runtime guard `backend profile requires vjp=torchlean-tape`"));
    capsule.vjp = VjpMode::TorchleanTape;
    vjp.name = "some other guard";
    CHECK(contract_mismatch(relu, capsule).has_value());
  }

  TEST_CASE("layout claims and backend VJPs must be honoured by the handler") {
    HandlerSpec relu = testing::reference_handlers().find(Op::Relu, Provider::Reference, Device::Cpu)->spec;
    Capsule capsule = testing::shipped_capsule("reference.relu");
    relu.layouts = {Layout::LibtorchCudaView};
    auto layout = contract_mismatch(relu, capsule);
    REQUIRE(layout);
    CHECK(*layout == "handler `TorchLean reference CPU relu` accepts layouts [libtorch-cuda-view], but capsule "
                     "`reference.relu` claims layout `canonical-tensor`");
    relu.layouts = {Layout::CanonicalTensor};
    capsule.vjp = VjpMode::BackendVjp;
    auto vjp = contract_mismatch(relu, capsule);
    REQUIRE(vjp);
    CHECK(vjp->find("has VJP mode backend-vjp, but handler `TorchLean reference CPU relu` computes no backward") !=
          std::string::npos);
    relu.backend_vjp = true;
    CHECK_FALSE(contract_mismatch(relu, capsule));
  }

  TEST_CASE("a CUDA profile fails at session open on a build without a CUDA runtime") {
    for (std::string_view profile : {"checked_cuda", "libtorch_forward_cuda"}) {
      SessionOptions options;
      options.profile = std::string(profile);
      auto session = Session::open(shipped(), testing::reference_handlers(), options);
      REQUIRE_FALSE(session);
      CHECK(session.error().code == RuntimeCode::DeviceUnavailable);
      CHECK(session.error().message.find("torch eager session: ") == 0);
      CHECK(session.error().message.find("no usable CUDA device") != std::string::npos);
      CHECK(session.error().message.find("CPU parity stubs") != std::string::npos);
    }
  }

  TEST_CASE("future device profiles fail session creation with TorchLean's text") {
    for (auto [profile, device] : std::vector<std::pair<std::string, std::string>>{
             {"future_metal", "metal"}, {"future_rocm", "rocm"}, {"future_wasm", "wasm"}, {"future_tpu", "tpu"},
             {"future_trainium", "trainium"}, {"future_custom_chip", "custom"}, {"future_external", "external"}}) {
      SessionOptions options;
      options.profile = profile;
      auto session = Session::open(shipped(), testing::reference_handlers(), options);
      REQUIRE_FALSE(session);
      CHECK(session.error().message ==
            str("torch eager session: backend profile `", profile, "` has no capsule for device `", device, "`"));
    }
  }

  TEST_CASE("a metal profile with capsules but no linked runtime fails at open") {
    testing::ScratchTree tree("metal");
    tree.write("catalogs/metal.toml", std::string(R"(schema = 1
module = "metal-demo"
[defaults]
provider = "mps"
device = "metal"
trust = "checked"
vjp = "torchlean-tape"
reduction = "n/a"
contracts.shape  = { claim = "shape-safety", evidence = { kind = "runtime-guard", name = "metal shape checks" } }
contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", evidence = { kind = "runtime-guard", name = "metal layout" } }
contracts.value  = { claim = "value-refinement", evidence = { kind = "test-suite", name = "metal.values" } }
contracts.vjp    = { claim = "vjp-refinement", mode = "torchlean-tape", evidence = { kind = "test-suite", name = "metal.vjps" } }
[[capsule]]
name = "metal.relu"
op = "relu"
)"));
    tree.write("profiles/metal_demo.toml", R"(schema = 1
name = "metal_demo"
device = "metal"
provider = "auto"
assurance = "checked"
vjp = "torchlean-tape"
modules = ["metal-demo"]
[availability]
devices = ["metal"]
providers = ["mps"]
)");
    Workspace workspace = tree.load();
    REQUIRE_FALSE(has_errors(workspace.diagnostics));
    SessionOptions options;
    options.profile = "metal_demo";
    auto session = Session::open(workspace, testing::reference_handlers(), options);
    REQUIRE_FALSE(session);
    CHECK(session.error().message == "torch eager session: device `metal` has no linked TorchLean execution runtime");
    options.message_style = MessageStyle::Plain;  // `capsule run`'s wording of the same refusal
    auto plain = Session::open(workspace, testing::reference_handlers(), options);
    REQUIRE_FALSE(plain);
    CHECK(plain.error().message == "device `metal` has no linked execution runtime");
  }

  TEST_CASE("an unknown profile names the nearest loaded one") {
    SessionOptions options;
    options.profile = "checked_cpus";
    auto session = Session::open(shipped(), testing::reference_handlers(), options);
    REQUIRE_FALSE(session);
    CHECK(session.error().code == RuntimeCode::UnknownProfile);
    CHECK(session.error().message.find("did you mean `checked_cpu`?") != std::string::npos);
  }

  TEST_CASE("the session caches one selection per op") {
    Session session = open_session("checked_cpu");
    CHECK(session.selection_count() == 0);
    const ExecutableKernel* first = session.select(Op::Relu).value();
    const ExecutableKernel* second = session.select(Op::Relu).value();
    CHECK(first == second);
    CHECK(session.selection_count() == 1);
    CHECK(first->capsule().name == "reference.relu");
    Var x = session.constant(values({3}, {-1, 0.5, 2}));
    for (int i = 0; i < 3; ++i) REQUIRE(session.call(Op::Relu, {x}));
    CHECK(session.selection_count() == 1);
    auto used = session.capsules_used();
    REQUIRE(used.size() == 1);
    CHECK(used[0].forward_calls == 3);
    CHECK(capsules_used_text(used) ==
          "capsules used (1):\n  relu -> reference.relu (reference/cpu, checked, vjp=torchlean-tape): 3 forward, 0 in "
          "VJPs\n    handler: TorchLean reference CPU relu\n");
  }

  TEST_CASE("gradients off means VJP mode none and no tape") {
    Session inference = open_session("checked_cpu", false);
    CHECK(inference.policy().vjp == VjpMode::None);
    Var w = inference.parameter(values({2}, {1, 2}));
    CHECK_FALSE(w.requires_grad());
    Var y = inference.call(Op::Relu, {w}).value();
    CHECK(inference.tape_size() == 0);
    auto grads = inference.backward(y);
    REQUIRE_FALSE(grads);
    CHECK(grads.error().code == RuntimeCode::GradientUnavailable);
    Session training = open_session("checked_cpu", true);
    CHECK(training.policy().vjp == VjpMode::TorchleanTape);
  }

  TEST_CASE("Vars from a cleared tape are constants and never alias the next tape's nodes") {
    Session session = open_session("checked_cpu");
    Var p = session.parameter(values({2}, {1, -2}));
    Var old = session.call(Op::Scale, {p}, [] { OpAttrs a; a.alpha = 3; return a; }()).value();
    session.clear_tape();
    CHECK(session.tape_size() == 0);
    // The new tape reuses node indices 0 and 1; `old` must not be mistaken for either.
    Var q = session.parameter(values({2}, {5, 7}));
    Var filler = session.call(Op::Neg, {q}).value();
    Var y = session.call(Op::Mul, {old, q}).value();
    Var loss = session.call(Op::ReduceSum, {y}).value();
    auto grads = session.backward(loss);
    REQUIRE(grads);
    CHECK(grads->of(q).to_vector() == std::vector<double>{3, -6});
    CHECK_FALSE(grads->of(p).defined());
    CHECK_FALSE(grads->of(old).defined());
    (void)filler;
    auto stale = session.backward(old);
    REQUIRE_FALSE(stale);
    CHECK(stale.error().code == RuntimeCode::GradientUnavailable);
  }

  TEST_CASE("a Var from another session is a constant there") {
    Session first = open_session("checked_cpu");
    Session second = open_session("checked_cpu");
    Var foreign = first.parameter(values({2}, {1, 2}));
    Var own = second.parameter(values({2}, {3, 4}));
    CHECK_FALSE(second.on_tape(foreign));
    Var y = second.call(Op::Mul, {foreign, own}).value();
    auto grads = second.backward(second.call(Op::ReduceSum, {y}).value());
    REQUIRE(grads);
    CHECK(grads->of(own).to_vector() == std::vector<double>{1, 2});
    CHECK_FALSE(grads->of(foreign).defined());
  }

  TEST_CASE("gradients reach inputs beyond the 32nd of one call") {
    Session session = open_session("checked_cpu");
    std::vector<Var> parts;
    for (int i = 0; i < 40; ++i) {
      parts.push_back(i == 35 || i == 2 ? session.parameter(values({1}, {double(i)})) : session.constant(values({1}, {0})));
    }
    OpAttrs along;
    along.axis = 0;
    Var joined = session.call(Op::Concat, parts, along).value();
    Var scaled = session.call(Op::Mul, {joined, joined}).value();
    auto grads = session.backward(session.call(Op::ReduceSum, {scaled}).value());
    REQUIRE(grads);
    CHECK(grads->of(parts[35]).to_vector() == std::vector<double>{70});
    CHECK(grads->of(parts[2]).to_vector() == std::vector<double>{4});
  }

  TEST_CASE("empty tensors with huge sizes are rejected or cost nothing") {
    auto huge = Shape::make({0, std::int64_t{1} << 62, std::int64_t{1} << 62});
    REQUIRE_FALSE(huge);
    CHECK(huge.error().code == RuntimeCode::SizeOverflow);
    Session session = open_session("checked_cpu");
    Var empty = session.constant(Tensor::empty(Shape::make({0, std::int64_t{1} << 40}).value(), DType::F32).value());
    for (Op op : {Op::Softmax, Op::LogSoftmax}) {
      auto out = session.call(op, {empty});
      REQUIRE(out);
      CHECK(out->value().numel() == 0);
    }
    Var batch = session.constant(Tensor::empty(Shape::make({0, std::int64_t{1} << 40}).value(), DType::F32).value());
    auto normed = session.call(Op::BatchNorm, {batch});
    REQUIRE(normed);
    CHECK(normed->value().numel() == 0);
  }

  TEST_CASE("show-backend prints the detailed rows of every selection") {
    std::ostringstream log;
    SessionOptions options;
    options.profile = "checked_cpu";
    options.show_backend = true;
    options.log = &log;
    options.preselect = {Op::Matmul};
    auto session = Session::open(shipped(), testing::reference_handlers(), options);
    REQUIRE(session);
    CHECK(log.str() ==
          "[TorchLean] backend capsules used:\n"
          "  matmul: reference.matmul provider=reference trust=checked vjp=torchlean-tape reduction=fixed-left\n"
          "    shape: shape safety for matmul; guarded at runtime by portable runtime shape checks\n"
          "    layout: canonical-tensor layout compatibility for matmul; guarded at runtime by typed tensor layout\n"
          "    value: matmul forward refines its TorchLean semantics; covered by test suite reference.values\n"
          "    vjp: matmul torchlean-tape VJP refines its TorchLean semantics; covered by test suite reference.vjps\n");
  }

  TEST_CASE("backward through a capsule with VJP mode none is an error naming it") {
    Session session = open_session("checked_cpu");
    Var x = session.parameter(values({4}, {0.1, 0.4, 0.3, 0.2}));
    OpAttrs top;
    top.k = 2;
    top.axis = 0;
    Var mask = session.call(Op::TopKMask, {x}, top).value();
    Var y = session.call(Op::Mul, {mask, x}).value();
    Var loss = session.call(Op::ReduceSum, {y}).value();
    auto grads = session.backward(loss);
    REQUIRE_FALSE(grads);
    CHECK(grads.error().message ==
          "backward through `top_k_mask`: capsule `reference.top_k_mask` has VJP mode none; expected a capsule whose "
          "VJP is torchlean-tape or backend-vjp");
  }

  TEST_CASE("backend-vjp capsules call the handler's own backward") {
    // A handler registry whose relu declares a complete backward, and a catalog that says so.
    testing::ScratchTree tree("backend-vjp");
    tree.replace("catalogs/reference.toml", "name = \"reference.relu\"\nop = \"relu\"\n",
                 "name = \"reference.relu\"\nop = \"relu\"\nvjp = \"backend-vjp\"\n"
                 "contracts.vjp = { claim = \"vjp-refinement\", mode = \"backend-vjp\", evidence = { kind = "
                 "\"test-suite\", name = \"reference.vjps\" } }\n");
    tree.replace("profiles/checked_cpu.toml", "vjp = \"torchlean-tape\"", "vjp = \"backend-vjp\"");
    Workspace workspace = tree.load();
    REQUIRE_FALSE(has_errors(workspace.diagnostics));
    SessionOptions options;
    options.profile = "checked_cpu";
    options.preselect = {Op::Relu};
    auto refused = Session::open(workspace, testing::reference_handlers(), options);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message.find("has VJP mode backend-vjp, but handler `TorchLean reference CPU relu` "
                                       "computes no backward of its own") != std::string::npos);
    HandlerRegistry own;
    REQUIRE(register_reference_handlers(own));
    HandlerRegistry with_backward;
    for (const RegisteredHandler* handler : own.all()) {
      HandlerSpec spec = handler->spec;
      if (spec.op == Op::Relu) spec.backend_vjp = true;
      REQUIRE(with_backward.add(spec));
    }
    auto session = Session::open(workspace, with_backward, options);
    REQUIRE_MESSAGE(session, (session ? std::string() : session.error().message));
    Var x = session->parameter(values({3}, {-1, 2, 3}));
    Var y = session->call(Op::Relu, {x}).value();
    auto grads = session->backward(y);
    REQUIRE_MESSAGE(grads, (grads ? std::string() : grads.error().message));
    CHECK(grads->of(x).to_vector() == std::vector<double>{0, 1, 1});
    CHECK(session->capsules_used()[0].adjoint_calls == 1);
  }

  TEST_CASE("demoting value evidence to a trusted boundary makes checked_cpu reject it at open") {
    testing::ScratchTree tree("demote");
    tree.replace("catalogs/reference.toml", "name = \"reference.relu\"\nop = \"relu\"\n",
                 "name = \"reference.relu\"\nop = \"relu\"\ncontracts.value = { claim = \"value-refinement\", "
                 "evidence = { kind = \"trusted-boundary\", reason = \"demoted for the test\" } }\n");
    Workspace workspace = tree.load();
    REQUIRE_FALSE(has_errors(workspace.diagnostics));
    SessionOptions options;
    options.profile = "checked_cpu";
    options.preselect = {Op::Matmul, Op::Relu};
    auto session = Session::open(workspace, testing::reference_handlers(), options);
    REQUIRE_FALSE(session);
    CHECK(session.error().code == RuntimeCode::GateRejected);
    CHECK(session.error().message.find("torch: backend planning failed for `relu`: backend profile checked_cpu "
                                       "rejected `relu`: ") == 0);
    CHECK(session.error().message.find("reference.relu") != std::string::npos);
    CHECK(session.error().message.find("value") != std::string::npos);
  }

  TEST_CASE("a prepended module's relu capsule is what the session runs") {
    testing::ScratchTree tree("prepend");
    tree.write("catalogs/replacement.toml", std::string(testing::kCatalogHead).replace(
                                                 std::string(testing::kCatalogHead).find("module = \"inline\""),
                                                 17, "module = \"replacement\"") +
                                                 "[[capsule]]\nname = \"replacement.relu\"\nop = \"relu\"\n");
    // The inline head's guards are not the reference handler's: use the reference defaults.
    tree.replace("catalogs/replacement.toml", "name = \"shape checks\"", "name = \"portable runtime shape checks\"");
    tree.replace("catalogs/replacement.toml", "name = \"typed layout\"", "name = \"typed tensor layout\"");
    tree.replace("profiles/checked_cpu.toml", "modules = [", "modules = [\"replacement\", ");
    Workspace workspace = tree.load();
    REQUIRE_MESSAGE(!has_errors(workspace.diagnostics), render(workspace.diagnostics));
    SessionOptions options;
    options.profile = "checked_cpu";
    auto session = Session::open(workspace, testing::reference_handlers(), options);
    REQUIRE(session);
    Var x = session->constant(values({2}, {-1, 1}));
    REQUIRE(session->call(Op::Relu, {x}));
    CHECK(session->capsules_used().at(0).capsule->name == "replacement.relu");
  }
}

}  // namespace capsule
