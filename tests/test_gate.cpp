// SPDX-License-Identifier: Apache-2.0
// Audit, grouping, contract check and acceptance gate: TorchLean worked examples §10.7–§10.11
// and the §11 assertions on hidden trusted evidence, forged plans and coalescing safety.
#include <doctest/doctest.h>

#include <type_traits>

#include "capsule/gate.hpp"
#include "capsule/report.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

using namespace capsule;
using capsule::testing::shipped;
using capsule::testing::shipped_capsule;
using capsule::testing::shipped_profile;

namespace {

Graph load_example(std::string_view file) {
  Diagnostics diagnostics;
  auto graph = load_graph(capsule::testing::source_dir() / "examples/graphs" / file, diagnostics);
  REQUIRE_MESSAGE(graph.has_value(), render(diagnostics));
  return std::move(*graph);
}

/// A graph of `count` relu nodes after one input, planned with the given capsule per node.
GraphKernelPlan relu_plan(const std::vector<const Capsule*>& capsules) {
  GraphKernelPlan plan;
  plan.node_count = capsules.size() + 1;
  for (std::size_t i = 0; i < capsules.size(); ++i) {
    plan.kernels.push_back(PlannedNodeKernel{static_cast<std::uint32_t>(i + 1), static_cast<std::uint32_t>(i + 1),
                                             Op::Relu, capsules[i]});
  }
  return plan;
}

std::vector<std::string> group_lines(std::span<const KernelGroup> groups) {
  std::vector<std::string> lines;
  for (const KernelGroup& g : groups) lines.push_back(group_line(g));
  return lines;
}

Evidence trusted(std::string reason) { return Evidence{EvidenceKind::TrustedBoundary, {}, std::move(reason), {}, {}, {}, {}, {}}; }

}  // namespace

TEST_SUITE("gate") {
  TEST_CASE("accepted plans can only be made by the gate") {
    static_assert(!std::is_default_constructible_v<AcceptedKernel>);
    static_assert(!std::is_constructible_v<AcceptedKernel, Op, std::shared_ptr<const Capsule>, KernelPolicy>);
    static_assert(!std::is_constructible_v<AcceptedKernel, Op, const Capsule*, KernelPolicy>);
    static_assert(!std::is_default_constructible_v<AcceptedGraphKernelPlan>);
    static_assert(!std::is_constructible_v<AcceptedGraphKernelPlan, GraphKernelPlan, std::vector<KernelGroup>,
                                           KernelPolicy, Lowering>);
    auto accepted = accept(PlannedKernel{Op::Relu, &shipped_capsule("reference.relu")}, KernelPolicy{});
    REQUIRE(accepted.has_value());
    CHECK(accepted->capsule().name == "reference.relu");
    CHECK(accepted->op() == Op::Relu);
  }

  TEST_CASE("10.7 evidence check under two policies") {
    const ResolvedProfile hybrid = shipped_profile("libtorch_forward_cuda");
    auto plan = hybrid.planner.plan_ops(std::vector<Op>{Op::ScaledDotProductAttention});
    REQUIRE(plan.has_value());
    std::string out;
    for (const AssurancePolicy& policy : {AssurancePolicy::checked(), AssurancePolicy::external()}) {
      const auto rejected = rejected_reports(policy, plan->kernels);
      if (rejected.empty()) out += policy.label() + ": accepted\n";
      for (const ObligationReport& r : rejected) {
        out += str(policy.label(), ": rejected ", r.capsule->name, " ", to_string(r.obligation), "\n  ",
                   evidence_label(r.descriptor().evidence), "\n");
      }
    }
    CHECK(out ==
          "checked: rejected libtorch.sdpa_forward value\n"
          "  trusted boundary: LibTorch/CUDA SDPA implementation\n"
          "external: accepted\n");
  }

  TEST_CASE("hidden trusted evidence: the check reads the evidence, not the label") {
    Capsule hidden = shipped_capsule("reference.relu");
    hidden.name = "test.hidden_trusted_relu";
    hidden.contract(Obligation::Value).evidence = trusted("vendor relu, not checked here");
    const KernelPolicy checked_policy = shipped_profile("checked_cpu").profile->policy;
    CHECK(admissible(checked_policy, hidden));  // the label says checked, so it plans
    const std::vector<PlannedKernel> kernels{PlannedKernel{Op::Relu, &hidden}};
    CHECK(rejected_reports(AssurancePolicy::checked(), kernels).size() == 1);
    CHECK(rejected_reports(AssurancePolicy::external(), kernels).empty());
    auto verdict = accept(kernels[0], checked_policy);
    REQUIRE_FALSE(verdict.has_value());
    REQUIRE(verdict.error().size() == 1);
    CHECK(verdict.error()[0].kind == AcceptanceFailure::Kind::EvidenceRejected);
    CHECK(verdict.error()[0].obligation == Obligation::Value);
    CHECK(verdict.error()[0].message() ==
          "test.hidden_trusted_relu has rejected value evidence for relu: trusted boundary: vendor relu, not checked here");
  }

  TEST_CASE("forged plans are rejected with TorchLean's texts") {
    const Capsule& relu = shipped_capsule("reference.relu");
    auto mismatch = accept(PlannedKernel{Op::Sigmoid, &relu}, KernelPolicy{});
    REQUIRE_FALSE(mismatch.has_value());
    CHECK(mismatch.error()[0].kind == AcceptanceFailure::Kind::OperationMismatch);
    CHECK(mismatch.error()[0].message() == "planned operation sigmoid does not match capsule operation relu");

    Capsule relabelled = relu;
    relabelled.trust = Trust::TrustedExternal;
    auto trust = accept(PlannedKernel{Op::Relu, &relabelled}, KernelPolicy{});
    REQUIRE_FALSE(trust.has_value());
    CHECK(trust.error()[0].kind == AcceptanceFailure::Kind::TrustRejected);
    CHECK(trust.error()[0].message() == "reference.relu uses rejected trust level trusted-external for relu");
  }

  TEST_CASE("the failure list keeps TorchLean's order and texts") {
    Capsule bad = shipped_capsule("native_cuda.relu");  // cuda, backend-vjp
    bad.supports_forward = false;
    bad.trust = Trust::TrustedExternal;
    bad.contract(Obligation::Shape).claim.kind = ClaimKind::ValueRefinement;  // misaligned
    bad.contract(Obligation::Shape).evidence = trusted("shape assumed");
    bad.contract(Obligation::Vjp).evidence = trusted("vjp assumed");
    KernelPolicy policy;  // cpu, checked, torchlean-tape
    policy.provider = ProviderPreference::only(Provider::Reference);
    policy.vjp = VjpMode::ExternalAutograd;
    const auto failures = acceptance_failures(PlannedKernel{Op::Gelu, &bad}, policy);
    std::vector<std::string> messages;
    for (const auto& f : failures) messages.push_back(f.message());
    CHECK(messages == std::vector<std::string>{
                          "planned operation gelu does not match capsule operation relu",
                          "native_cuda.relu has no forward implementation for gelu",
                          "native_cuda.relu has misaligned contract claims for gelu",
                          "native_cuda.relu uses rejected trust level trusted-external for gelu",
                          "native_cuda.relu uses rejected provider native-cuda for gelu",
                          "native_cuda.relu targets cuda, not requested cpu, for gelu",
                          "native_cuda.relu offers backend-vjp, not requested external-autograd, for gelu",
                          "native_cuda.relu has rejected shape evidence for gelu: trusted boundary: shape assumed",
                          "native_cuda.relu has rejected vjp evidence for gelu: trusted boundary: vjp assumed",
                      });
  }

  TEST_CASE("10.8 the 18-node MLP graph plans 13 kernels with node ids kept") {
    const Graph graph = load_example("mlp-4-8-1.graph.toml");
    REQUIRE(graph.nodes.size() == 18);
    const ResolvedProfile cpu = shipped_profile("checked_cpu");
    auto plan = cpu.planner.plan_graph(graph);
    REQUIRE(plan.has_value());
    std::string out = str("nodes ", plan->node_count, ", planned ", plan->kernels.size(), "\n");
    for (const PlannedNodeKernel& k : plan->kernels) out += node_line(graph, k) + "\n";
    CHECK(out ==
          "nodes 18, planned 13\n"
          "  1 reshape from=[4] to=[1, 4] -> reference.reshape\n"
          "  3 transpose dim0=0 dim1=1 -> reference.permute\n"
          "  4 matmul -> reference.matmul\n"
          "  6 broadcast_to from=[8] to=[1, 8] -> reference.broadcast\n"
          "  7 add -> reference.add\n"
          "  8 reshape from=[1, 8] to=[8] -> reference.reshape\n"
          "  9 relu -> reference.relu\n"
          "  10 reshape from=[8] to=[1, 8] -> reference.reshape\n"
          "  12 transpose dim0=0 dim1=1 -> reference.permute\n"
          "  13 matmul -> reference.matmul\n"
          "  15 broadcast_to from=[1] to=[1, 1] -> reference.broadcast\n"
          "  16 add -> reference.add\n"
          "  17 reshape from=[1, 1] to=[1] -> reference.reshape\n");
  }

  TEST_CASE("10.9 and 10.11 groups and acceptance of the MLP graph") {
    const Graph graph = load_example("mlp-4-8-1.graph.toml");
    const ResolvedProfile cpu = shipped_profile("checked_cpu");
    auto plan = cpu.planner.plan_graph(graph);
    REQUIRE(plan.has_value());
    const auto groups = coalesce(*plan);
    CHECK(groups.size() == 13);
    std::vector<std::string> short_lines;
    for (const KernelGroup& g : groups) short_lines.push_back(str("#[", g.node_ids.at(0), "] ", to_string(g.op)));
    CHECK(short_lines == std::vector<std::string>{"#[1] reshape", "#[3] permute", "#[4] matmul", "#[6] broadcast",
                                                  "#[7] add", "#[8] reshape", "#[9] relu", "#[10] reshape",
                                                  "#[12] permute", "#[13] matmul", "#[15] broadcast", "#[16] add",
                                                  "#[17] reshape"});
    auto accepted = accept_graph(*plan, cpu.profile->policy);
    REQUIRE(accepted.has_value());
    CHECK(accepted->groups().size() == 13);
    CHECK(distinct_capsule_names(group_kernels(accepted->groups())) ==
          std::vector<std::string>{"reference.reshape", "reference.permute", "reference.matmul", "reference.broadcast",
                                   "reference.add", "reference.relu"});
  }

  TEST_CASE("10.10 the three-ReLU chain coalesces to one group") {
    const Graph graph = load_example("relu-chain.graph.toml");
    const ResolvedProfile cpu = shipped_profile("checked_cpu");
    auto plan = cpu.planner.plan_graph(graph);
    REQUIRE(plan.has_value());
    const auto groups = coalesce(*plan);
    CHECK(str("kernels ", plan->kernels.size(), ", groups ", groups.size()) == "kernels 3, groups 1");
    CHECK(group_lines(groups) == std::vector<std::string>{"  #[1, 2, 3] relu reference.relu"});
  }

  TEST_CASE("10.10 test variant: two relus accepted, and singleton lowering") {
    const Capsule& relu = shipped_capsule("reference.relu");
    const GraphKernelPlan plan = relu_plan({&relu, &relu});
    const KernelPolicy policy = shipped_profile("checked_cpu").profile->policy;
    auto accepted = accept_graph(plan, policy);
    REQUIRE(accepted.has_value());
    CHECK(accepted->capsule_names() == std::vector<std::string>{"reference.relu"});
    CHECK(accepted->node_ids() == std::vector<std::uint32_t>{1, 2});
    CHECK(accepted->groups().size() == 1);
    CHECK(trusted_external_ops(group_kernels(accepted->groups())).empty());
    auto singleton = accept_graph(plan, policy, Lowering::Singleton);
    REQUIRE(singleton.has_value());
    CHECK(singleton->capsule_names() == std::vector<std::string>{"reference.relu", "reference.relu"});
  }

  TEST_CASE("coalescing never merges structurally different capsules with the same name") {
    const Capsule& relu = shipped_capsule("reference.relu");
    const KernelPolicy policy = shipped_profile("checked_cpu").profile->policy;
    Capsule other_trust = relu;
    other_trust.trust = Trust::TrustedExternal;
    Capsule trusted_value = relu;
    trusted_value.contract(Obligation::Value).evidence = trusted("assumed");
    Capsule misaligned = relu;
    misaligned.contract(Obligation::Shape).claim.kind = ClaimKind::ValueRefinement;
    Capsule no_forward = relu;
    no_forward.supports_forward = false;
    for (const Capsule* second : {&other_trust, &trusted_value, &misaligned, &no_forward}) {
      const GraphKernelPlan plan = relu_plan({&relu, second});
      CHECK(coalesce(plan).size() == 2);
      auto verdict = accept_graph(plan, policy);
      REQUIRE_FALSE(verdict.has_value());
      CHECK(verdict.error().groups.size() == 2);
      CHECK_FALSE(verdict.error().failures.empty());
    }
    Capsule other_reduction = relu;
    other_reduction.numerical.reduction = Reduction::FixedLeft;
    CHECK(coalesce(relu_plan({&relu, &other_reduction})).size() == 2);
    // A structurally equal copy (another object) still merges.
    const Capsule copy = relu;
    CHECK(coalesce(relu_plan({&relu, &copy})).size() == 1);
  }

  TEST_CASE("a graph rejected by the gate lists its groups and failures") {
    Capsule hidden = shipped_capsule("reference.relu");
    hidden.contract(Obligation::Value).evidence = trusted("assumed");
    auto verdict = accept_graph(relu_plan({&hidden, &hidden, &hidden}), KernelPolicy{});
    REQUIRE_FALSE(verdict.has_value());
    CHECK(verdict.error().groups.size() == 1);
    REQUIRE(verdict.error().failures.size() == 1);
    CHECK(verdict.error().failures[0].message() ==
          "reference.relu has rejected value evidence for relu: trusted boundary: assumed");
  }
}
