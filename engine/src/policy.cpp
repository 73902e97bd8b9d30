// SPDX-License-Identifier: Apache-2.0
#include "capsule/policy.hpp"

#include <charconv>

#include "capsule/text.hpp"

namespace capsule {

AssurancePolicy AssurancePolicy::checked() {
  // Fuzz oracles are accepted as checked evidence, as A's checkedRuntime gate did; a profile that
  // wants them excluded spells out its own { trust, evidence } lists. A checker is checked
  // evidence, so `checked` admits it; a partial one is `trusted` and is refused below anyway.
  return {EnumSet<Trust>{Trust::Checked},
          EnumSet<EvidenceKind>{EvidenceKind::RuntimeGuard, EvidenceKind::TestSuite,
                                EvidenceKind::SharedDefinition, EvidenceKind::FuzzOracle,
                                EvidenceKind::NotApplicable, EvidenceKind::Checker},
          {}};
}

AssurancePolicy AssurancePolicy::external() {
  AssurancePolicy policy = checked();
  policy.trust.insert(Trust::TrustedExternal);
  policy.evidence.insert(EvidenceKind::TrustedBoundary);
  return policy;
}

AssurancePolicy AssurancePolicy::checked_runtime() {
  // TorchLean's acceptance presets read evidence only; the trust label is the planner's filter.
  // Admitting both labels lets a trusted-external capsule whose every claim is checked pass,
  // which is what a per-call checker is for (issue 11).
  // Trusted and missing evidence are refused explicitly (their kinds are not admitted anyway), so
  // that the record itself says no claim may rest on trust, whatever label a capsule carries.
  AssurancePolicy policy = checked();
  policy.trust.insert(Trust::TrustedExternal);
  policy.refused = EnumSet<Disposition>{Disposition::Trusted, Disposition::Missing};
  return policy;
}

AssurancePolicy AssurancePolicy::strict() {
  AssurancePolicy policy = checked_runtime();
  for (const Disposition d : {Disposition::Guarded, Disposition::Tested, Disposition::Fuzzed}) policy.refused.insert(d);
  return policy;
}

std::optional<AssurancePolicy> assurance_preset(std::string_view name) {
  if (name == "checked") return AssurancePolicy::checked();
  if (name == "external") return AssurancePolicy::external();
  if (name == "strict") return AssurancePolicy::strict();
  if (name == "checked-runtime") return AssurancePolicy::checked_runtime();
  if (name == "allow-trusted-runtime") return AssurancePolicy::allow_trusted_runtime();
  return std::nullopt;
}

bool AssurancePolicy::accepts_disposition(Disposition d) const {
  if (refused.contains(d)) return false;
  if (d == Disposition::Trusted) return evidence.contains(EvidenceKind::TrustedBoundary);
  if (d == Disposition::Missing) return evidence.contains(EvidenceKind::Missing);
  return true;
}

bool AssurancePolicy::accepts_evidence(ClaimKind claim, const Evidence& e) const {
  return evidence.contains(e.kind) && accepts_disposition(evidence_disposition(claim, e));
}

std::string AssurancePolicy::label() const {
  if (*this == checked()) return "checked";
  if (*this == external()) return "external";
  if (*this == strict()) return "strict";
  if (*this == checked_runtime()) return "checked-runtime";
  std::vector<std::string> trusts;
  for (Trust t : trust.values()) trusts.emplace_back(to_string(t));
  std::vector<std::string> kinds;
  for (EvidenceKind k : evidence.values()) kinds.emplace_back(to_string(k));
  std::string out = str("custom(trust: ", join(trusts, "|"), "; evidence: ", join(kinds, "|"));
  if (!refused.empty()) {
    std::vector<std::string> dispositions;
    for (Disposition d : refused.values()) dispositions.emplace_back(to_string(d));
    out += str("; refused: ", join(dispositions, "|"));
  }
  return out + ")";
}

std::string ProviderPreference::label() const {
  switch (kind) {
    case Kind::Auto: return "auto";
    case Kind::Prefer: return str("prefer ", to_string(provider));
    case Kind::Only: return str("only ", to_string(provider));
  }
  return {};
}

std::string RecheckPolicy::label() const {
  if (kind == Kind::Every) return every == 1 ? std::string("every call") : str("every ", every, " calls");
  // Shortest round-trip spelling, so 0.01 prints as written in the profile.
  char buffer[32];
  const auto written = std::to_chars(buffer, buffer + sizeof buffer, sample);
  return str("sample ", std::string_view(buffer, written.ptr), " (seed ", seed, ")");
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
