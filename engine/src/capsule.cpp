// SPDX-License-Identifier: Apache-2.0
#include "capsule/capsule.hpp"

#include <cstdio>

#include "capsule/text.hpp"

namespace capsule {

bool operator==(const Capsule& a, const Capsule& b) {
  return a.name == b.name && a.summary == b.summary && a.op == b.op && a.provider == b.provider && a.device == b.device &&
         a.trust == b.trust && a.supports_forward == b.supports_forward && a.vjp == b.vjp &&
         a.contracts == b.contracts && a.numerical == b.numerical && a.trust_record == b.trust_record;
}

bool matches_obligation(Op op, VjpMode vjp, Obligation obligation, const Claim& claim) {
  if (claim.op != op) return false;
  switch (obligation) {
    case Obligation::Shape:
      return claim.kind == ClaimKind::ShapeSafety;
    case Obligation::Layout:
      return claim.kind == ClaimKind::LayoutCompatibility;
    case Obligation::Value:
      return claim.kind == ClaimKind::ValueRefinement;
    case Obligation::Vjp:
      if (claim.kind == ClaimKind::VjpRefinement) return claim.mode == vjp && vjp != VjpMode::None;
      if (claim.kind == ClaimKind::VjpUnavailable) return vjp == VjpMode::None;
      return false;
  }
  return false;
}

bool contracts_aligned(const Capsule& capsule) {
  for (const Obligation obligation : all_values<Obligation>()) {
    if (!matches_obligation(capsule.op, capsule.vjp, obligation, capsule.contract(obligation).claim)) {
      return false;
    }
  }
  return true;
}

Obligation obligation_of(ClaimKind kind) {
  switch (kind) {
    case ClaimKind::ShapeSafety: return Obligation::Shape;
    case ClaimKind::LayoutCompatibility: return Obligation::Layout;
    case ClaimKind::ValueRefinement: return Obligation::Value;
    case ClaimKind::VjpRefinement:
    case ClaimKind::VjpUnavailable: return Obligation::Vjp;
  }
  return Obligation::Shape;
}

bool same_identity(const Capsule& a, const Capsule& b) {
  return a.name == b.name && a.op == b.op && a.provider == b.provider && a.device == b.device;
}

std::string claim_label(const Claim& claim) {
  const std::string_view op = to_string(claim.op);
  switch (claim.kind) {
    case ClaimKind::ShapeSafety: return str("shape safety for ", op);
    case ClaimKind::LayoutCompatibility: return str(to_string(claim.layout), " layout compatibility for ", op);
    case ClaimKind::ValueRefinement: return str(op, " forward refines its TorchLean semantics");
    case ClaimKind::VjpRefinement: return str(op, " ", to_string(claim.mode), " VJP refines its TorchLean semantics");
    case ClaimKind::VjpUnavailable: return str(op, " has no VJP in this capsule");
  }
  return {};
}

std::string evidence_label(const Evidence& evidence) {
  switch (evidence.kind) {
    case EvidenceKind::RuntimeGuard: return "guarded at runtime by " + evidence.name;
    case EvidenceKind::TestSuite: return "covered by test suite " + evidence.name;
    case EvidenceKind::SharedDefinition: return "calls shared definition " + evidence.name;
    case EvidenceKind::FuzzOracle: return "compared by fuzz oracle " + evidence.name;
    case EvidenceKind::TrustedBoundary: return "trusted boundary: " + evidence.reason;
    case EvidenceKind::NotApplicable: return "not applicable";
    case EvidenceKind::Checker: {
      if (!evidence.unbound.empty()) return "checker " + evidence.name + " cannot be bound: " + evidence.unbound;
      const std::string claimed =
          evidence.claimed_coverage
              ? str(" (registered coverage; the catalog claims ", to_string(*evidence.claimed_coverage), ")")
              : std::string();
      switch (evidence.coverage) {
        case CheckerCoverage::Full: return "checked on every call by checker " + evidence.name + claimed;
        case CheckerCoverage::Partial:
          return "partly checked by checker " + evidence.name + " (a necessary condition only)" + claimed;
        case CheckerCoverage::Sampled: return "checked on sampled calls by checker " + evidence.name + claimed;
      }
      return {};
    }
    case EvidenceKind::Missing: return "missing: no evidence provided";
  }
  return {};
}

Disposition evidence_disposition(ClaimKind claim, const Evidence& evidence) {
  switch (evidence.kind) {
    case EvidenceKind::RuntimeGuard:
      // A shape or layout claim is a predicate over what the guard sees in full before every call
      // (ranks, sizes, payload, layout), and bind refuses a handler that does not enforce the
      // guard, so the guard decides the claim. On a value or VJP claim it sees no numbers.
      return claim == ClaimKind::ShapeSafety || claim == ClaimKind::LayoutCompatibility ? Disposition::Checked
                                                                                        : Disposition::Guarded;
    case EvidenceKind::TestSuite: return Disposition::Tested;
    // The capsule runs the canonical definition itself: the refinement holds by identity of code.
    case EvidenceKind::SharedDefinition: return Disposition::Proved;
    case EvidenceKind::FuzzOracle: return Disposition::Fuzzed;
    case EvidenceKind::TrustedBoundary: return Disposition::Trusted;
    case EvidenceKind::NotApplicable: return Disposition::NotApplicable;
    case EvidenceKind::Checker:
      // A checker this build cannot run backs nothing: the session would refuse to bind it.
      if (!evidence.unbound.empty()) return Disposition::Missing;
      switch (evidence.coverage) {
        case CheckerCoverage::Full: return Disposition::Checked;
        case CheckerCoverage::Sampled: return Disposition::Fuzzed;
        case CheckerCoverage::Partial: return Disposition::Trusted;
      }
      return Disposition::Trusted;
    case EvidenceKind::Missing: return Disposition::Missing;
  }
  return Disposition::Missing;
}

std::string format_date(const Date& date) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%04d-%02u-%02u", static_cast<int>(date.year()),
                static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()));
  return buffer;
}

}  // namespace capsule
