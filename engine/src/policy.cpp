// SPDX-License-Identifier: Apache-2.0
#include "capsule/policy.hpp"

#include "capsule/text.hpp"

namespace capsule {

AssurancePolicy AssurancePolicy::checked() {
  // Fuzz oracles are accepted as checked evidence, as A's checkedRuntime gate did; a profile that
  // wants them excluded spells out its own { trust, evidence } lists.
  return {EnumSet<Trust>{Trust::Checked},
          EnumSet<EvidenceKind>{EvidenceKind::RuntimeGuard, EvidenceKind::TestSuite,
                                EvidenceKind::SharedDefinition, EvidenceKind::FuzzOracle,
                                EvidenceKind::NotApplicable}};
}

AssurancePolicy AssurancePolicy::external() {
  AssurancePolicy policy = checked();
  policy.trust.insert(Trust::TrustedExternal);
  policy.evidence.insert(EvidenceKind::TrustedBoundary);
  return policy;
}

std::string AssurancePolicy::label() const {
  if (*this == checked()) return "checked";
  if (*this == external()) return "external";
  std::vector<std::string> trusts;
  for (Trust t : trust.values()) trusts.emplace_back(to_string(t));
  std::vector<std::string> kinds;
  for (EvidenceKind k : evidence.values()) kinds.emplace_back(to_string(k));
  return str("custom(trust: ", join(trusts, "|"), "; evidence: ", join(kinds, "|"), ")");
}

std::string ProviderPreference::label() const {
  switch (kind) {
    case Kind::Auto: return "auto";
    case Kind::Prefer: return str("prefer ", to_string(provider));
    case Kind::Only: return str("only ", to_string(provider));
  }
  return {};
}

Availability Target::declared_availability() const {
  Availability availability;
  availability.devices = EnumSet<Device>{Device::Cpu};
  if (accelerator != Accelerator::None) {
    // Accelerator i (i >= 1) names device i: both tables list cuda..external in the same slots.
    static_assert(static_cast<int>(Accelerator::External) == static_cast<int>(Device::External));
    availability.devices.insert(static_cast<Device>(accelerator));
  }
  availability.providers = EnumSet<Provider>{Provider::Reference, Provider::Torchlean};
  for (BuildFeature feature : features) {
    const auto provider = parse<Provider>(to_string(feature));
    if (provider) availability.providers.insert(*provider);
  }
  return availability;
}

}  // namespace capsule
