// SPDX-License-Identifier: Apache-2.0
// Planner acceptance cases: TorchLean worked examples §10.1–§10.6 and §10.12–§10.14, and the
// policy assertions of §11 that need no tensors.
#include <doctest/doctest.h>

#include <algorithm>

#include "capsule/binding.hpp"
#include "capsule/gate.hpp"
#include "capsule/planner.hpp"
#include "capsule/registry.hpp"
#include "capsule/report.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

using namespace capsule;
using capsule::testing::shipped;
using capsule::testing::shipped_capsule;
using capsule::testing::shipped_module;
using capsule::testing::shipped_profile;

namespace {

ModulePtr module_of(std::string name, std::vector<Capsule> capsules) {
  auto module = std::make_shared<CapsuleModule>();
  module->name = std::move(name);
  module->capsules = std::move(capsules);
  return module;
}

std::vector<std::string> planned_names(const ResolvedProfile& resolved, std::vector<Op> ops) {
  auto plan = resolved.planner.plan_ops(ops);
  REQUIRE_MESSAGE(plan.has_value(), (plan ? std::string() : plan.error().render()));
  std::vector<std::string> names;
  for (const PlannedKernel& k : plan->kernels) names.push_back(k.capsule->name);
  return names;
}

std::string plan_failure(const Planner& planner, std::vector<Op> ops) {
  auto plan = planner.plan_ops(ops);
  REQUIRE_FALSE(plan.has_value());
  return plan.error().message;
}

Capsule relu_like(std::string name, Provider provider, Device device) {
  Capsule c = shipped_capsule("reference.relu");
  c.name = std::move(name);
  c.provider = provider;
  c.device = device;
  return c;
}

const std::vector<Op> kProfileOps{Op::Matmul,  Op::Relu,      Op::Softmax,       Op::HardMaskedSoftmax, Op::LayerNorm,
                                  Op::BatchNorm, Op::Conv,    Op::ConvTranspose, Op::MaxPool,           Op::SmoothMaxPool,
                                  Op::AvgPool, Op::MseLoss,   Op::ScaledDotProductAttention};

}  // namespace

TEST_SUITE("planner") {
  TEST_CASE("10.1 maintained profile lookup by device") {
    std::string out;
    for (const Device d : {Device::Cpu, Device::Cuda, Device::Rocm, Device::Metal, Device::Tpu}) {
      const auto name = maintained_profile_for(d);
      out += str(to_string(d), ": ", name ? std::string(*name) : std::string("no maintained profile"), "\n");
      if (name) CHECK(shipped().find_profile(*name) != nullptr);
    }
    CHECK(out ==
          "cpu: checked_cpu\ncuda: checked_cuda\nrocm: no maintained profile\nmetal: no maintained profile\n"
          "tpu: no maintained profile\n");
  }

  TEST_CASE("10.2 duplicate module names are rejected, the maintained modules are not") {
    const ModulePtr libtorch = shipped_module("libtorch");
    REQUIRE(libtorch != nullptr);
    CHECK(validate_modules({libtorch, libtorch}) == "duplicate backend capsule module `libtorch`");
    CHECK(validate_modules(shipped().modules).empty());
    auto registry = Registry::from_modules({libtorch, libtorch});
    REQUIRE_FALSE(registry.has_value());
    CHECK(registry.error() == "duplicate backend capsule module `libtorch`");
  }

  TEST_CASE("duplicate capsule identities across modules are rejected") {
    const Capsule relu = shipped_capsule("reference.relu");
    CHECK(validate_modules({module_of("a", {relu}), module_of("b", {relu})}) ==
          "duplicate backend capsule identity `reference.relu`");
    Capsule other_provider = relu;
    other_provider.provider = Provider::Torchlean;  // same name, other identity: allowed
    CHECK(validate_modules({module_of("a", {relu}), module_of("b", {other_provider})}).empty());
  }

  TEST_CASE("10.3 a misfiled contract is misaligned and never selected") {
    const Capsule& attention = shipped_capsule("reference.attention");
    Capsule misfiled = attention;
    misfiled.name = "demo.misfiled";
    misfiled.contract(Obligation::Shape) =
        ContractDescriptor{Claim{ClaimKind::ValueRefinement, Op::ScaledDotProductAttention}, "misfiled value test",
                           Evidence{EvidenceKind::TestSuite, "demo suite", {}, {}, {}, {}, {}, {}}, {}};
    CHECK(std::pair{contracts_aligned(attention), contracts_aligned(misfiled)} == std::pair{true, false});
    auto registry = Registry::from_modules({module_of("demo", {misfiled})});
    REQUIRE(registry.has_value());
    Planner planner(*registry, shipped_profile("checked_cpu").profile->availability,
                    shipped_profile("checked_cpu").profile->policy);
    auto plan = planner.plan_op(Op::ScaledDotProductAttention);
    REQUIRE_FALSE(plan.has_value());
    CHECK(plan.error().message == "no admissible kernel capsule for op scaled_dot_product_attention on device cpu");
    REQUIRE(plan.error().candidates.size() == 1);
    CHECK(plan.error().candidates[0].reasons.at(0).find("misaligned: its shape contract holds a value-refinement") == 0);
  }

  TEST_CASE("10.4 plan rows for matmul and relu under checked_cpu") {
    const ResolvedProfile cpu = shipped_profile("checked_cpu");
    auto plan = cpu.planner.plan_ops(std::vector<Op>{Op::Matmul, Op::Relu});
    REQUIRE(plan.has_value());
    std::string out;
    for (const PlannedKernel& k : plan->kernels) {
      for (const std::string& line : plan_rows(k)) out += line + "\n";
    }
    CHECK(out ==
          "matmul -> reference.matmul\n"
          "  provider reference, trust checked\n"
          "  reduction fixed-left\n"
          "  value: covered by test suite reference.values\n"
          "relu -> reference.relu\n"
          "  provider reference, trust checked\n"
          "  reduction n/a\n"
          "  value: covered by test suite reference.values\n");
  }

  TEST_CASE("10.5 the CPU has no fft_fno or selective_scan capsule") {
    const ResolvedProfile cpu = shipped_profile("checked_cpu");
    CHECK(plan_failure(cpu.planner, {Op::SelectiveScan}) == "no admissible kernel capsule for op selective_scan on device cpu");
    CHECK(plan_failure(cpu.planner, {Op::FftFno}) == "no admissible kernel capsule for op fft_fno on device cpu");
    CHECK(plan_failure(cpu.planner, {Op::Custom}) == "no admissible kernel capsule for op custom on device cpu");
  }

  TEST_CASE("10.6 preference is a request, assurance is a filter it cannot override") {
    const Op sdpa = Op::ScaledDotProductAttention;
    CHECK(planned_names(shipped_profile("checked_cuda"), {sdpa}) == std::vector<std::string>{"torchlean.composed_attention"});
    CHECK(planned_names(shipped_profile("libtorch_forward_cuda"), {sdpa}) == std::vector<std::string>{"libtorch.sdpa_forward"});
    CHECK(planned_names(shipped_profile("libtorch_forward_strict"), {sdpa}) ==
          std::vector<std::string>{"native_cuda.direct_attention"});
  }

  TEST_CASE("10.12 a CUDA request against a CPU-only build has no capsule") {
    const ResolvedProfile cpu = shipped_profile("checked_cpu");
    KernelPolicy policy = cpu.profile->policy;
    policy.device = Device::Cuda;
    Planner planner(cpu.planner.registry(), cpu.profile->availability, policy);
    Diagnostics diagnostics;
    auto graph = load_graph(capsule::testing::source_dir() / "examples/graphs/mlp-4-8-1.graph.toml", diagnostics);
    REQUIRE(graph.has_value());
    auto plan = planner.plan_graph(*graph);
    REQUIRE_FALSE(plan.has_value());
    CHECK(plan.error().message == "no admissible kernel capsule for op reshape on device cuda");
    CHECK(plan.error().node_id == std::optional<std::uint32_t>{1});
    // The same graph under checked_cuda uses the native CUDA capsules.
    auto cuda = shipped_profile("checked_cuda").planner.plan_graph(*graph);
    REQUIRE(cuda.has_value());
    const std::vector<std::string> names = distinct_capsule_names(group_kernels(coalesce(*cuda)));
    CHECK(names == std::vector<std::string>{"native_cuda.reshape", "native_cuda.permute", "native_cuda.matmul",
                                            "native_cuda.broadcast", "native_cuda.add", "native_cuda.relu"});
  }

  TEST_CASE("10.13 hybrid plan: native CUDA where it exists, LibTorch SDPA behind a trusted boundary") {
    const ResolvedProfile hybrid = shipped_profile("libtorch_forward_cuda");
    CHECK(planned_names(hybrid, {Op::Softmax}) == std::vector<std::string>{"native_cuda.softmax"});
    const std::vector<Op> ops{Op::Add, Op::ScaledDotProductAttention, Op::Relu};
    CHECK(planned_names(hybrid, ops) ==
          std::vector<std::string>{"native_cuda.add", "libtorch.sdpa_forward", "native_cuda.relu"});
    auto plan = hybrid.planner.plan_ops(ops);
    REQUIRE(plan.has_value());
    CHECK(trusted_external_ops(plan->kernels) == std::vector<Op>{Op::ScaledDotProductAttention});
    const std::string report = plan_report(hybrid, *plan, ReportFormat::Text, EnvironmentFingerprint{});
    CHECK(report.find("vjp=torchlean-tape") != std::string::npos);
    CHECK(report.find("scaled_dot_product_attention: libtorch.sdpa_forward") != std::string::npos);
    CHECK(report.find("trusted external boundary: scaled_dot_product_attention\n") != std::string::npos);
  }

  TEST_CASE("10.14 the profile op list plans to reference on CPU and native CUDA on CUDA") {
    const auto cpu = planned_names(shipped_profile("checked_cpu"), kProfileOps);
    const auto cuda = planned_names(shipped_profile("checked_cuda"), kProfileOps);
    for (std::size_t i = 0; i + 1 < kProfileOps.size(); ++i) {
      CHECK(cpu[i] == str("reference.", to_string(kProfileOps[i])));
      CHECK(cuda[i] == str("native_cuda.", to_string(kProfileOps[i])));
    }
    CHECK(cpu.back() == "reference.attention");
    CHECK(cuda.back() == "torchlean.composed_attention");
    auto cpu_plan = shipped_profile("checked_cpu").planner.plan_ops(kProfileOps);
    REQUIRE(cpu_plan.has_value());
    CHECK(trusted_external_ops(cpu_plan->kernels).empty());

    // Every op with both a reference and a native CUDA capsule plans to `reference.{op}` on the
    // CPU and `native_cuda.{op}` on CUDA.
    std::size_t exact = 0;
    for (const Op op : all_values<Op>()) {
      const ResolvedProfile c = shipped_profile("checked_cpu");
      const ResolvedProfile g = shipped_profile("checked_cuda");
      if (c.planner.chosen(op) == nullptr || g.planner.chosen(op) == nullptr || op == Op::ScaledDotProductAttention) continue;
      ++exact;
      CHECK(c.planner.chosen(op)->name == str("reference.", to_string(op)));
      CHECK(g.planner.chosen(op)->name == str("native_cuda.", to_string(op)));
    }
    CHECK(exact == 52);
  }

  TEST_CASE("gradients off plans inference, training rejects forward-only capsules") {
    Capsule forward_only = shipped_capsule("reference.relu");
    forward_only.name = "test.forward_only_relu";
    forward_only.vjp = VjpMode::None;
    forward_only.contract(Obligation::Vjp) =
        ContractDescriptor{Claim{ClaimKind::VjpUnavailable, Op::Relu}, "", Evidence{EvidenceKind::NotApplicable, {}, {}, {}, {}, {}, {}, {}}, {}};
    REQUIRE(contracts_aligned(forward_only));
    KernelPolicy training;  // cpu, auto, checked, torchlean-tape
    KernelPolicy inference = training;
    inference.vjp = VjpMode::None;
    CHECK(admissible(inference, shipped_capsule("reference.relu")));
    CHECK(admissible(inference, forward_only));
    CHECK_FALSE(admissible(training, forward_only));
    // Random sources need no VJP, so training still accepts them.
    CHECK(admissible(training, shipped_capsule("reference.rand_uniform")));
    // A backend-vjp policy admits only backend-vjp capsules for differentiable ops.
    KernelPolicy backend = training;
    backend.vjp = VjpMode::BackendVjp;
    backend.device = Device::Cuda;
    CHECK(admissible(backend, shipped_capsule("native_cuda.relu")));
    CHECK_FALSE(admissible(backend, shipped_capsule("torchlean.composed_attention")));
  }

  TEST_CASE("external-autograd policies admit only external-autograd capsules") {
    const ResolvedProfile autograd = shipped_profile("libtorch_autograd_cuda");
    CHECK(planned_names(autograd, {Op::ScaledDotProductAttention}) == std::vector<std::string>{"libtorch.sdpa_autograd"});
    CHECK(plan_failure(autograd.planner, {Op::Matmul}) == "no admissible kernel capsule for op matmul on device cuda");
    // The tape profile never picks the external-autograd capsule.
    const ResolvedProfile forward = shipped_profile("libtorch_forward_cuda");
    CHECK(forward.planner.chosen(Op::ScaledDotProductAttention)->name == "libtorch.sdpa_forward");
  }

  TEST_CASE("availability filters capsules, only forces a provider") {
    const Capsule external = relu_like("external.relu", Provider::External, Device::External);
    auto registry = Registry::from_modules({module_of("ext", {external}), shipped_module("reference")});
    REQUIRE(registry.has_value());
    // The CPU profile rejects an external/external capsule.
    Planner cpu(*registry, Availability{}, KernelPolicy{});
    REQUIRE(cpu.chosen(Op::Relu) != nullptr);
    CHECK(cpu.chosen(Op::Relu)->name == "reference.relu");
    // Declared external availability with `only external` on device external plans it.
    Availability available;
    available.devices = EnumSet<Device>{Device::Cpu, Device::External};
    available.providers = EnumSet<Provider>{Provider::Reference, Provider::External};
    KernelPolicy policy;
    policy.device = Device::External;
    policy.provider = ProviderPreference::only(Provider::External);
    Planner planner(*registry, available, policy);
    REQUIRE(planner.chosen(Op::Relu) != nullptr);
    CHECK(planner.chosen(Op::Relu)->name == "external.relu");
    // ...but not without the declaration: availability is never probed or assumed.
    Planner undeclared(*registry, Availability{}, policy);
    CHECK(undeclared.chosen(Op::Relu) == nullptr);
  }

  TEST_CASE("CPU availability excludes every LibTorch capsule, CUDA availability with LibTorch admits all") {
    const ResolvedProfile cpu = shipped_profile("checked_cpu");
    const ResolvedProfile hybrid = shipped_profile("libtorch_forward_cuda");
    std::size_t libtorch = 0;
    for (const Capsule* c : hybrid.planner.registry().capsules()) {
      if (c->provider != Provider::Libtorch) continue;
      ++libtorch;
      CHECK_FALSE(cpu.profile->availability.admits(*c));
      CHECK(hybrid.profile->availability.admits(*c));
    }
    CHECK(libtorch == 10);  // libtorch: the SDPA pair; libtorch-cuda: eight ops
    CHECK(hybrid.planner.available().capsules().size() == hybrid.planner.registry().capsules().size());
  }

  TEST_CASE("libtorch_cuda plans a whole model with LibTorch's CUDA twins, and libtorch_forward_cuda keeps TorchLean's plan") {
    const ResolvedProfile twin = shipped_profile("libtorch_cuda");
    const std::vector<Op> model{Op::Reshape, Op::Permute, Op::Matmul, Op::Broadcast, Op::Add,    Op::Relu,
                                Op::Linear,  Op::Conv,    Op::MaxPool, Op::Softmax,  Op::MseLoss, Op::CrossEntropy,
                                Op::LayerNorm, Op::HardMaskedSoftmax, Op::SoftmaxMatmul};
    for (const std::string& name : planned_names(twin, model)) CHECK_MESSAGE(name.starts_with("libtorch_cuda."), name);
    // An op no checked LibTorch CUDA capsule declares plans to the device's own capsule, never to
    // the CPU: TorchLean's SDPA pair is trusted-external, and the profile asks for checked.
    CHECK(planned_names(twin, {Op::ScaledDotProductAttention, Op::RandUniform}) ==
          std::vector<std::string>{"native_cuda.direct_attention", "native_cuda.rand_uniform"});
    // The twins of module libtorch-cuda-model stay out of libtorch_forward_cuda (semantics §10.13).
    CHECK(planned_names(shipped_profile("libtorch_forward_cuda"), {Op::Add, Op::Relu, Op::Softmax}) ==
          std::vector<std::string>{"native_cuda.add", "native_cuda.relu", "native_cuda.softmax"});
  }

  TEST_CASE("only excludes other providers and the error says so") {
    const ResolvedProfile cuda = shipped_profile("checked_cuda");
    KernelPolicy policy = cuda.profile->policy;
    policy.provider = ProviderPreference::only(Provider::Torchlean);
    Planner planner(cuda.planner.registry(), cuda.profile->availability, policy);
    auto plan = planner.plan_op(Op::Add);
    REQUIRE_FALSE(plan.has_value());
    CHECK(plan.error().message == "no admissible kernel capsule for op add on device cuda");
    const std::string text = plan.error().render();
    CHECK(text.find("candidate native_cuda.add (native-cuda/cuda, checked, vjp backend-vjp):\n"
                    "    - provider native-cuda is excluded by `only torchlean`") != std::string::npos);
    CHECK(text.find("candidate reference.add (reference/cpu, checked, vjp torchlean-tape):\n"
                    "    - provider reference is excluded by `only torchlean`\n"
                    "    - targets cpu, not requested cuda") != std::string::npos);
    // `only torchlean` still plans attention, which torchlean provides.
    CHECK(planner.chosen(Op::ScaledDotProductAttention)->name == "torchlean.composed_attention");
  }

  TEST_CASE("prefer picks the preferred provider regardless of module order") {
    const ResolvedProfile hybrid = shipped_profile("libtorch_forward_cuda");
    std::vector<ModulePtr> reversed(hybrid.planner.registry().modules().rbegin(), hybrid.planner.registry().modules().rend());
    auto registry = Registry::from_modules(reversed);
    REQUIRE(registry.has_value());
    Planner planner(*registry, hybrid.profile->availability, hybrid.profile->policy);
    CHECK(planner.chosen(Op::ScaledDotProductAttention)->name == "libtorch.sdpa_forward");
    // Without a preferred-provider match, catalog order decides.
    CHECK(planner.chosen(Op::Add)->name == "native_cuda.add");
  }

  TEST_CASE("supports_forward = false is never admissible") {
    Capsule no_forward = shipped_capsule("reference.relu");
    no_forward.supports_forward = false;
    CHECK_FALSE(admissible(KernelPolicy{}, no_forward));
    auto registry = Registry::from_modules({module_of("m", {no_forward})});
    REQUIRE(registry.has_value());
    Planner planner(*registry, Availability{}, KernelPolicy{});
    auto plan = planner.plan_op(Op::Relu);
    REQUIRE_FALSE(plan.has_value());
    CHECK(plan.error().candidates.at(0).reasons.at(0) == "has no forward implementation");
  }

  TEST_CASE("module replacement and prepending (withCapsuleModules)") {
    const ResolvedProfile cpu = shipped_profile("checked_cpu");
    const std::vector<ModulePtr>& base = cpu.planner.registry().modules();
    const Capsule replacement = relu_like("replacement.relu", Provider::Reference, Device::Cpu);

    const auto replaced = with_capsule_modules(base, {module_of("reference", {replacement})});
    CHECK(std::count_if(replaced.begin(), replaced.end(), [](const ModulePtr& m) { return m->name == "reference"; }) == 1);
    auto registry = Registry::from_modules(replaced);
    REQUIRE(registry.has_value());
    CHECK(Planner(*registry, cpu.profile->availability, cpu.profile->policy).chosen(Op::Relu)->name == "replacement.relu");

    const auto prepended = with_capsule_modules(base, {module_of("profile-test-replacement", {replacement})});
    auto registry2 = Registry::from_modules(prepended);
    REQUIRE(registry2.has_value());
    Planner planner(*registry2, cpu.profile->availability, cpu.profile->policy);
    auto plan = planner.plan_ops(std::vector<Op>{Op::Relu, Op::Matmul});
    REQUIRE(plan.has_value());
    CHECK(plan->kernels[0].capsule->name == "replacement.relu");
    CHECK(plan->kernels[1].capsule->name == "reference.matmul");

    // Duplicates inside the added modules survive and are rejected at plan time.
    const auto doubled = with_capsule_modules(base, {module_of("x", {replacement}), module_of("x", {replacement})});
    CHECK(validate_modules(doubled) == "duplicate backend capsule module `x`");
  }

  TEST_CASE("a profile file can prepend a replacement catalog with no rebuild") {
    Workspace workspace = load_workspace({capsule::testing::source_dir() / "catalogs"}, {});
    ProfilePtr profile = add_profile_file(workspace, capsule::testing::test_data() / "replacement/replacement_cpu.toml");
    REQUIRE_MESSAGE(profile != nullptr, render(workspace.diagnostics));
    auto resolved = resolve_profile(workspace, profile);
    REQUIRE(resolved.has_value());
    auto plan = resolved->planner.plan_ops(std::vector<Op>{Op::Relu, Op::Matmul});
    REQUIRE(plan.has_value());
    CHECK(plan->kernels[0].capsule->name == "replacement.relu");
    CHECK(plan->kernels[1].capsule->name == "reference.matmul");
    // The report names the replacement catalog file among its sources.
    CHECK(plan_report(*resolved, *plan, ReportFormat::Text, EnvironmentFingerprint{}).find("replacement/relu.toml sha256") != std::string::npos);
  }

  TEST_CASE("every future_* profile fails to plan rather than falling back") {
    std::size_t futures = 0;
    for (const ProfilePtr& profile : shipped().profiles) {
      if (!profile->name.starts_with("future_")) continue;
      ++futures;
      auto resolved = resolve_profile(shipped(), profile);
      REQUIRE(resolved.has_value());
      auto plan = resolved->planner.plan_op(Op::Matmul);
      REQUIRE_FALSE(plan.has_value());
      CHECK(plan.error().message ==
            str("no admissible kernel capsule for op matmul on device ", to_string(profile->policy.device)));
      CHECK_FALSE(resolved->planner.registry().has_device_capsule(profile->policy.device));
    }
    CHECK(futures == 7);
  }

  TEST_CASE("macos_cpu and windows_cpu plan like checked_cpu from their declared targets") {
    for (const char* name : {"macos_cpu", "windows_cpu"}) {
      const ResolvedProfile p = shipped_profile(name);
      REQUIRE(p.profile->target.has_value());
      CHECK(planned_names(p, kProfileOps) == planned_names(shipped_profile("checked_cpu"), kProfileOps));
    }
  }

  TEST_CASE("the registry is indexed by op in catalog order") {
    const ResolvedProfile hybrid = shipped_profile("libtorch_forward_cuda");
    const auto sdpa = hybrid.planner.registry().for_op(Op::ScaledDotProductAttention);
    std::vector<std::string> names;
    for (const Capsule* c : sdpa) names.push_back(c->name);
    CHECK(names == std::vector<std::string>{"native_cuda.direct_attention", "torchlean.composed_attention",
                                            "reference.attention", "libtorch.sdpa_forward", "libtorch.sdpa_autograd"});
    for (const Op op : all_values<Op>()) {
      for (const Capsule* c : hybrid.planner.registry().for_op(op)) CHECK(c->op == op);
    }
  }

  TEST_CASE("explain gives every candidate a verdict") {
    const ResolvedProfile strict = shipped_profile("libtorch_forward_strict");
    const auto verdicts = strict.planner.explain(Op::ScaledDotProductAttention);
    REQUIRE(verdicts.size() == 5);
    CHECK(verdicts[0].chosen);
    CHECK(verdicts[1].admissible);
    CHECK_FALSE(verdicts[1].chosen);
    CHECK(verdicts[3].capsule->name == "libtorch.sdpa_forward");
    CHECK_FALSE(verdicts[3].admissible);
    CHECK(verdicts[3].reasons == std::vector<std::string>{"trust level trusted-external is not admitted by assurance checked"});
    CHECK(verdicts[3].gate_notes.size() == 1);
  }

  TEST_CASE("10.17 binding identity texts") {
    const Capsule& relu = shipped_capsule("reference.relu");
    HandlerIdentity handler{"reference relu", Op::Relu, Provider::Reference, Device::Cpu};
    CHECK(matches_capsule(handler, relu));
    CHECK_FALSE(binding_mismatch(handler, relu).has_value());
    HandlerIdentity wrong_op = handler;
    wrong_op.op = Op::Add;
    CHECK(binding_mismatch(wrong_op, relu)->find("implements `add`") != std::string::npos);
    HandlerIdentity wrong_provider = handler;
    wrong_provider.provider = Provider::Torchlean;
    CHECK(binding_mismatch(wrong_provider, relu)->find("uses provider") != std::string::npos);
    HandlerIdentity wrong_device = handler;
    wrong_device.device = Device::Cuda;
    CHECK(binding_mismatch(wrong_device, relu)->find("targets `cuda`") != std::string::npos);
    CHECK(*eager_request_mismatch(relu, Op::Add, Device::Cpu) == "capsule `reference.relu` implements `relu`, not `add`");
    CHECK(*eager_request_mismatch(relu, Op::Relu, Device::Cuda) == "capsule `reference.relu` targets `cpu`, not `cuda`");
  }
}
