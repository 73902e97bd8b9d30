// SPDX-License-Identifier: Apache-2.0
// The shipped catalogs and profiles, and loader behaviour that the invalid gallery does not pin.
#include <doctest/doctest.h>

#include <algorithm>

#include "capsule/load.hpp"
#include "capsule/sha256.hpp"
#include "test_support.hpp"

using namespace capsule;
using capsule::testing::shipped;

namespace {

const CapsuleModule& module_named(std::string_view name) {
  const CapsuleModule* module = shipped().find_module(name);
  REQUIRE_MESSAGE(module != nullptr, "no module " << name);
  return *module;
}

const Capsule* find(const CapsuleModule& module, std::string_view name) {
  for (const Capsule& c : module.capsules) {
    if (c.name == name) return &c;
  }
  return nullptr;
}


}  // namespace

TEST_SUITE("catalog") {
  TEST_CASE("the shipped catalogs and profiles load with no diagnostic") {
    CHECK_MESSAGE(shipped().diagnostics.empty(), render(shipped().diagnostics));
    CHECK(module_named("reference").capsules.size() == 53);
    CHECK(module_named("native-cuda").capsules.size() == 54);
    CHECK(module_named("attention").capsules.size() == 2);
    CHECK(module_named("libtorch").capsules.size() == 2);
    CHECK(module_named("libtorch-cpu").capsules.size() == 50);
    CHECK(module_named("libtorch-autograd-cpu").capsules.size() == 48);
    CHECK(module_named("libtorch-checked-cpu").capsules.size() == 10);
    CHECK(module_named("cublas").capsules.size() == 3);
    CHECK(module_named("cudnn").capsules.size() == 5);
    CHECK(module_named("libtorch-cuda").capsules.size() == 8);
    CHECK(module_named("libtorch-cuda-model").capsules.size() == 40);
    CHECK(shipped().profiles.size() == 20);
    for (const char* name : {"checked_cpu", "libtorch_cpu", "libtorch_autograd_cpu", "checked_cuda", "libtorch_forward_cuda", "libtorch_forward_strict",
                             "libtorch_autograd_cuda", "macos_cpu", "windows_cpu", "future_metal", "future_rocm",
                             "future_wasm", "future_tpu", "future_trainium", "future_custom_chip", "future_external", "strict",
                             "libtorch_checked_cpu", "vendor_cuda", "libtorch_cuda"}) {
      CHECK_MESSAGE(shipped().find_profile(name) != nullptr, name);
    }
  }

  TEST_CASE("every shipped capsule is aligned and the CPU catalog is reference-only") {
    for (const ModulePtr& module : shipped().modules) {
      for (const Capsule& c : module->capsules) {
        CHECK_MESSAGE(contracts_aligned(c), c.name);
        // CPU capsules are the reference's, except the LibTorch CPU modules' own.
        const bool libtorch = module->name == "libtorch-cpu" || module->name == "libtorch-autograd-cpu" ||
                              module->name == "libtorch-checked-cpu";
        const Provider expected = libtorch ? Provider::Libtorch : Provider::Reference;
        if (c.device == Device::Cpu) CHECK_MESSAGE(c.provider == expected, c.name);
      }
    }
    const CapsuleModule& reference = module_named("reference");
    for (const Op op : all_values<Op>()) {
      const bool expected = op != Op::FftFno && op != Op::SelectiveScan && op != Op::Custom;
      const bool present = std::any_of(reference.capsules.begin(), reference.capsules.end(),
                                       [&](const Capsule& c) { return c.op == op; });
      CHECK_MESSAGE(present == expected, to_string(op));
    }
  }

  TEST_CASE("defaults merge key by key and each contract is replaced whole") {
    const Capsule* rand = find(module_named("reference"), "reference.rand_uniform");
    REQUIRE(rand != nullptr);
    CHECK(rand->vjp == VjpMode::None);
    CHECK(rand->contract(Obligation::Vjp).claim.kind == ClaimKind::VjpUnavailable);
    CHECK(rand->contract(Obligation::Vjp).claim.mode == VjpMode::None);  // no mode inherited
    CHECK(rand->contract(Obligation::Vjp).evidence.kind == EvidenceKind::NotApplicable);
    CHECK(rand->contract(Obligation::Shape).evidence.name == "portable runtime shape checks");  // from defaults
    const Capsule* matmul = find(module_named("reference"), "reference.matmul");
    REQUIRE(matmul != nullptr);
    CHECK(matmul->numerical.reduction == Reduction::FixedLeft);
    CHECK(matmul->contract(Obligation::Value).claim.op == Op::Matmul);  // claim op defaults to the capsule's
  }

  TEST_CASE("reductions: reference scatter_add is fixed-left, native CUDA is implementation-defined") {
    CHECK(find(module_named("reference"), "reference.scatter_add")->numerical.reduction == Reduction::FixedLeft);
    CHECK(find(module_named("native-cuda"), "native_cuda.scatter_add")->numerical.reduction ==
          Reduction::ImplementationDefined);
  }

  TEST_CASE("the libtorch SDPA capsule carries its trusted boundary") {
    const Capsule* sdpa = find(module_named("libtorch"), "libtorch.sdpa_forward");
    REQUIRE(sdpa != nullptr);
    CHECK(sdpa->trust == Trust::TrustedExternal);
    CHECK_FALSE(sdpa->trust_record.reason.empty());
    CHECK(sdpa->contract(Obligation::Value).evidence.kind == EvidenceKind::TrustedBoundary);
    CHECK(sdpa->contract(Obligation::Value).evidence.reason == "LibTorch/CUDA SDPA implementation");
    CHECK(sdpa->contract(Obligation::Layout).claim.layout == Layout::LibtorchCudaView);
  }

  TEST_CASE("provenance entries load with the positions of their path and symbol") {
    const std::string text = std::string(capsule::testing::kCatalogHead) +
                             "[[capsule]]\nname = \"inline.relu\"\nop = \"relu\"\n"
                             "contracts.value = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", "
                             "name = \"inline.values\" }, provenance = [{ path = \"src/relu.cpp\", symbol = \"relu_forward\", "
                             "build_target = \"relu\" }] }\n";
    Diagnostics diagnostics;
    auto module = parse_catalog(text, "provenance.toml", LoadOptions{}, diagnostics);
    INFO(render(diagnostics));
    REQUIRE(module.has_value());
    const Capsule& relu = module->capsules.at(0);
    REQUIRE(relu.contract(Obligation::Value).provenance.size() == 1);
    CHECK(relu.contract(Obligation::Value).provenance[0] == Provenance{"src/relu.cpp", "relu_forward", "relu"});
    const ContractSites& sites = relu.sites[static_cast<std::size_t>(Obligation::Value)];
    REQUIRE(sites.provenance.size() == 1);
    CHECK(sites.provenance[0].path.line == 17);
    CHECK(sites.provenance[0].symbol.line == 17);
    CHECK(sites.provenance[0].symbol.column > sites.provenance[0].path.column);
    CHECK(sites.evidence.line == 17);
    // Evidence from [defaults] points into [defaults].
    CHECK(relu.sites[static_cast<std::size_t>(Obligation::Vjp)].evidence.line == 13);
  }

  TEST_CASE("each module records its file and the SHA-256 of its bytes") {
    const CapsuleModule& reference = module_named("reference");
    CHECK(reference.source.path.ends_with("catalogs/reference.toml"));
    CHECK(reference.source.sha256 == sha256_hex(capsule::testing::read_text(reference.source.path)));
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    // 1000 bytes span several blocks and a padding block; checked against sha256sum.
    CHECK(sha256_hex(std::string(1000, 'x')) == "44f8354494a5ba03ba1792a8d3e9c534c47a9181980fde7a3f44b06ef2ae7c7f");
  }

  TEST_CASE("a value claim in the shape field is a misaligned contract at its position") {
    const std::string text = std::string(capsule::testing::kCatalogHead) +
                             "[[capsule]]\nname = \"demo.misfiled\"\nop = \"relu\"\n"
                             "contracts.shape = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", name = \"s\" } }\n";
    Diagnostics diagnostics;
    auto module = parse_catalog(text, "demo.toml", LoadOptions{}, diagnostics);
    CHECK_FALSE(module.has_value());
    REQUIRE(diagnostics.size() == 1);
    CHECK(diagnostics[0].code == DiagCode::MisalignedContract);
    CHECK(diagnostics[0].where == SourceLoc{"demo.toml", 17, 19});
    CHECK(diagnostics[0].message ==
          "capsule `demo.misfiled` has a value-refinement claim in its shape contract; the shape obligation of relu "
          "needs shape-safety");
  }

  TEST_CASE("vjp alignment: mode must match the capsule and vjp-unavailable needs vjp none") {
    const std::string text = std::string(capsule::testing::kCatalogHead) +
                             "[[capsule]]\nname = \"a\"\nop = \"relu\"\nvjp = \"backend-vjp\"\n"
                             "[[capsule]]\nname = \"b\"\nop = \"relu\"\n"
                             "contracts.vjp = { claim = \"vjp-unavailable\", evidence = { kind = \"not-applicable\" } }\n"
                             "[[capsule]]\nname = \"c\"\nop = \"relu\"\nvjp = \"none\"\n"
                             "contracts.vjp = { claim = \"vjp-refinement\", mode = \"none\", evidence = { kind = \"test-suite\", name = \"s\" } }\n";
    Diagnostics diagnostics;
    CHECK_FALSE(parse_catalog(text, "vjp.toml", LoadOptions{}, diagnostics).has_value());
    REQUIRE(diagnostics.size() == 3);  // every problem in one run
    for (const Diagnostic& d : diagnostics) CHECK(d.code == DiagCode::MisalignedContract);
    CHECK(diagnostics[0].message ==
          "capsule `a` declares vjp `backend-vjp` but its vjp contract claims mode `torchlean-tape`");
    CHECK(diagnostics[1].message.find("says vjp-unavailable") != std::string::npos);
    CHECK(diagnostics[2].message.find("has vjp `none`, so its vjp contract must be vjp-unavailable") != std::string::npos);
  }

  TEST_CASE("every problem of one capsule is reported in the same run") {
    const std::string text = std::string(capsule::testing::kCatalogHead) +
                             "[[capsule]]\nname = \"several\"\nop = \"relu\"\ntrust = \"trusted-external\"\n"
                             "vjp = \"backend-vjp\"\n"
                             "contracts.shape = { claim = \"value-refinement\", evidence = { kind = \"test-suite\", name = \"s\" } }\n"
                             "contracts.layout = { claim = \"layout-compatibility\", evidence = { kind = \"runtime-guard\", name = \"g\" } }\n";
    Diagnostics diagnostics;
    CHECK_FALSE(parse_catalog(text, "several.toml", LoadOptions{}, diagnostics).has_value());
    std::vector<DiagCode> codes;
    for (const Diagnostic& d : diagnostics) codes.push_back(d.code);
    // Missing reason, misfiled shape claim, layout claim without a layout, vjp mode mismatch.
    CHECK(codes == std::vector<DiagCode>{DiagCode::MissingTrustReason, DiagCode::MisalignedContract,
                                         DiagCode::MissingField, DiagCode::MisalignedContract});
  }

  TEST_CASE("unknown keys and spellings suggest the nearest name") {
    const std::string text = std::string(capsule::testing::kCatalogHead) +
                             "[[capsule]]\nname = \"x\"\nop = \"reluu\"\nprovidr = \"reference\"\n";
    Diagnostics diagnostics;
    CHECK_FALSE(parse_catalog(text, "typo.toml", LoadOptions{}, diagnostics).has_value());
    REQUIRE(diagnostics.size() >= 2);
    CHECK(diagnostics[0].code == DiagCode::UnknownKey);
    CHECK(diagnostics[0].help == "did you mean `provider`?");
    CHECK(diagnostics[1].code == DiagCode::UnknownSpelling);
    CHECK(diagnostics[1].where == SourceLoc{"typo.toml", 16, 6});
    CHECK(diagnostics[1].help == "did you mean `relu`?");
  }

  TEST_CASE("expired trust is a warning that names the date, the capsule still loads") {
    const std::string text = std::string(capsule::testing::kCatalogHead) +
                             "[[capsule]]\nname = \"vendor.relu\"\nop = \"relu\"\ntrust = \"trusted-external\"\n"
                             "reason = \"vendor kernel\"\nexpires = 2026-01-31\n";
    LoadOptions options;
    options.today = Date{std::chrono::year{2026}, std::chrono::month{11}, std::chrono::day{29}};
    Diagnostics diagnostics;
    auto module = parse_catalog(text, "expiry.toml", options, diagnostics);
    CHECK(module.has_value());
    REQUIRE(diagnostics.size() == 1);
    CHECK(diagnostics[0].severity == Severity::Warning);
    CHECK(diagnostics[0].code == DiagCode::ExpiredTrust);
    CHECK(diagnostics[0].message.find("expired on 2026-01-31") != std::string::npos);
    options.today = Date{std::chrono::year{2026}, std::chrono::month{1}, std::chrono::day{1}};
    Diagnostics fresh;
    CHECK(parse_catalog(text, "expiry.toml", options, fresh).has_value());
    CHECK(fresh.empty());
  }

  TEST_CASE("a trusted-external capsule without a reason does not load") {
    const std::string text = std::string(capsule::testing::kCatalogHead) +
                             "[[capsule]]\nname = \"vendor.relu\"\nop = \"relu\"\ntrust = \"trusted-external\"\n";
    Diagnostics diagnostics;
    CHECK_FALSE(parse_catalog(text, "reason.toml", LoadOptions{}, diagnostics).has_value());
    REQUIRE(diagnostics.size() == 1);
    CHECK(diagnostics[0].code == DiagCode::MissingTrustReason);
    CHECK(diagnostics[0].message.find("is missing `reason`") != std::string::npos);
  }

  TEST_CASE("graph files map TorchLean IR spellings and keep payload in file order") {
    bool known = false;
    CHECK(ir_node_op("input", known) == std::nullopt);
    CHECK(known);
    CHECK(ir_node_op("const", known) == std::nullopt);
    CHECK(ir_node_op("detach", known) == std::nullopt);
    CHECK(ir_node_op("mul_elem", known) == Op::Mul);
    CHECK(ir_node_op("transpose", known) == Op::Permute);
    CHECK(ir_node_op("broadcast_to", known) == Op::Broadcast);
    CHECK(ir_node_op("flatten", known) == Op::Reshape);
    CHECK(ir_node_op("sum", known) == Op::ReduceSum);
    CHECK(ir_node_op("layernorm", known) == Op::LayerNorm);
    CHECK(ir_node_op("batch_norm_eval", known) == Op::BatchNorm);
    for (const Op op : {Op::Add, Op::Linear, Op::Conv, Op::MaxPool, Op::RandUniform, Op::Permute, Op::HardMaskedSoftmax}) {
      CHECK(ir_node_op(to_string(op), known) == op);
    }
    CHECK(ir_node_op("bogus", known) == std::nullopt);
    CHECK_FALSE(known);

    Diagnostics diagnostics;
    auto graph = parse_graph("schema = 1\nname = \"g\"\n[[node]]\nid = 0\nkind = \"input\"\nshape = [2]\n"
                             "[[node]]\nid = 1\nkind = \"reshape\"\ninputs = [0]\nto = [1, 2]\nfrom = [2]\n",
                             "g.graph.toml", diagnostics);
    REQUIRE_MESSAGE(graph.has_value(), render(diagnostics));
    REQUIRE(graph->nodes[1].payload.size() == 2);
    CHECK(graph->nodes[1].payload[0] == std::pair<std::string, std::string>{"to", "[1, 2]"});
    CHECK(graph->nodes[1].payload[1] == std::pair<std::string, std::string>{"from", "[2]"});
  }

  TEST_CASE("profiles: a target derives availability, and a bad module name is located") {
    const ProfilePtr autograd = shipped().find_profile("libtorch_autograd_cuda");
    REQUIRE(autograd != nullptr);
    CHECK(autograd->availability.providers.contains(Provider::Libtorch));
    CHECK(autograd->policy.provider == ProviderPreference::only(Provider::Libtorch));
    CHECK(autograd->policy.vjp == VjpMode::ExternalAutograd);

    // In a directory, an unknown module is reported at the offending array element.
    Workspace bad = load_workspace({capsule::testing::source_dir() / "catalogs"},
                                   {capsule::testing::test_data() / "unknown-module-profile"});
    REQUIRE(bad.diagnostics.size() == 1);
    CHECK(bad.diagnostics[0].code == DiagCode::UnknownModule);
    CHECK(bad.diagnostics[0].where.line == 5);
    CHECK(bad.diagnostics[0].where.column == 25);
    CHECK(bad.diagnostics[0].help == "did you mean `reference`?");

    Workspace workspace = load_workspace({capsule::testing::source_dir() / "catalogs"}, {});
    Diagnostics diagnostics;
    auto profile = parse_profile("schema = 1\nname = \"p\"\ndevice = \"cpu\"\nmodules = [\"refrence\"]\n"
                                 "[availability]\ndevices = [\"cpu\"]\nproviders = [\"reference\"]\n",
                                 "p.toml", LoadOptions{}, diagnostics);
    REQUIRE(profile.has_value());
    auto modules = profile_modules(workspace, *profile);
    REQUIRE_FALSE(modules.has_value());
    CHECK(modules.error() == "unknown capsule module `refrence`");
  }
}
