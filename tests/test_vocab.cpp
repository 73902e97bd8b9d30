// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include "capsule/capsule.hpp"
#include "capsule/policy.hpp"
#include "capsule/vocab.hpp"

using namespace capsule;

namespace {
template <class E>
void check_round_trip() {
  for (const E value : all_values<E>()) {
    auto parsed = parse<E>(to_string(value));
    REQUIRE(parsed.has_value());
    CHECK(*parsed == value);
  }
}
}  // namespace

TEST_SUITE("vocab") {
  TEST_CASE("every vocabulary name round-trips through its table") {
    check_round_trip<Device>();
    check_round_trip<Provider>();
    check_round_trip<Op>();
    check_round_trip<Trust>();
    check_round_trip<VjpMode>();
    check_round_trip<Layout>();
    check_round_trip<Reduction>();
    check_round_trip<ClaimKind>();
    check_round_trip<EvidenceKind>();
    check_round_trip<Obligation>();
    check_round_trip<Lowering>();
    check_round_trip<OperatingSystem>();
    check_round_trip<Architecture>();
    check_round_trip<Accelerator>();
    check_round_trip<BuildFeature>();
  }

  TEST_CASE("the op vocabulary has the 56 stable SPEC spellings") {
    CHECK(kOpCount == 56);
    CHECK(to_string(Op::RandUniform) == "rand_uniform");
    CHECK(to_string(Op::ScaledDotProductAttention) == "scaled_dot_product_attention");
    CHECK(to_string(Op::TopKMask) == "top_k_mask");
    CHECK(to_string(Op::Custom) == "custom");
    CHECK(to_string(Provider::NativeCuda) == "native-cuda");
    CHECK(to_string(Reduction::NotApplicable) == "n/a");
    CHECK(to_string(VjpMode::ExternalAutograd) == "external-autograd");
  }

  TEST_CASE("unknown spellings list the valid names and the nearest one") {
    auto provider = parse<Provider>("libtorh");
    REQUIRE_FALSE(provider.has_value());
    CHECK(provider.error().nearest == "libtorch");
    CHECK(provider.error().message.find("reference | torchlean | native-cuda") != std::string::npos);
    CHECK(provider.error().help() == "did you mean `libtorch`?");

    auto device = parse<Device>("cdua");
    REQUIRE_FALSE(device.has_value());
    CHECK(device.error().message ==
          "unknown device cdua (known targets: cpu | cuda | rocm | metal | wasm | tpu | trainium | custom | external)");
    CHECK(device.error().nearest == "cuda");

    // docs/format.md#vocabulary: the error always names the nearest spelling, however far.
    auto far = parse<Trust>("zzzzzzzzzzzzzzzz");
    REQUIRE_FALSE(far.has_value());
    CHECK(far.error().nearest == "checked");
  }

  TEST_CASE("gpu is an input alias for cuda") {
    auto device = parse<Device>("gpu");
    REQUIRE(device.has_value());
    CHECK(*device == Device::Cuda);
    CHECK(to_string(*device) == "cuda");
  }

  TEST_CASE("requires_vjp is false exactly for the random sources and the top-k mask") {
    for (const Op op : all_values<Op>()) {
      const bool constant = op == Op::RandUniform || op == Op::BernoulliMask || op == Op::TopKMask;
      CHECK_MESSAGE(requires_vjp(op) == !constant, to_string(op));
    }
  }

  TEST_CASE("a target derives its declared availability") {
    Target target{OperatingSystem::Linux, Architecture::X86_64, Accelerator::Cuda,
                  {BuildFeature::NativeCuda, BuildFeature::Libtorch}};
    const Availability a = target.declared_availability();
    CHECK(a.devices.values() == std::vector<Device>{Device::Cpu, Device::Cuda});
    CHECK(a.providers.values() ==
          std::vector<Provider>{Provider::Reference, Provider::Torchlean, Provider::NativeCuda, Provider::Libtorch});
    Target metal{OperatingSystem::Macos, Architecture::Aarch64, Accelerator::Metal, {BuildFeature::Mps}};
    CHECK(metal.declared_availability().devices.contains(Device::Metal));
    CHECK(metal.declared_availability().providers.contains(Provider::Mps));
  }
}
