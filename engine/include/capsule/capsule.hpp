// SPDX-License-Identifier: Apache-2.0
// Kernel capsules and their four contracts (§2): what an implementation claims about an op, and
// the classified evidence behind each claim. These are plain values; catalogs build them from
// TOML and tests may build them in code. Alignment (§3.1) is a pure function of the value.
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "capsule/diag.hpp"
#include "capsule/vocab.hpp"

namespace capsule {

using Date = std::chrono::year_month_day;

/// A structured claim, independent of its evidence. `layout` is meaningful only for
/// layout-compatibility and `mode` only for vjp-refinement.
struct Claim {
  ClaimKind kind = ClaimKind::ShapeSafety;
  Op op = Op::Custom;
  Layout layout = Layout::CanonicalTensor;
  VjpMode mode = VjpMode::None;

  friend bool operator==(const Claim&, const Claim&) = default;
};

/// What stands behind a claim. Guards, suites, shared definitions, fuzz oracles and checkers carry
/// `name`; a checker also its `coverage`; a trusted boundary carries `reason` (and optionally who
/// owns it and until when); `missing` and `not-applicable` carry nothing.
struct Evidence {
  EvidenceKind kind = EvidenceKind::NotApplicable;
  std::string name;
  std::string reason;
  std::string owner;
  std::optional<Date> expires;
  CheckerCoverage coverage = CheckerCoverage::Full;  ///< checker evidence only
  // Set only by bind_known_checkers (capsule/known_checker.hpp), where a program knows the
  // checkers it links; a loaded catalog never carries them.
  /// The coverage the catalog claimed, when the registered checker's (now in `coverage`) differs.
  std::optional<CheckerCoverage> claimed_coverage;
  /// Why this build cannot bind the checker (not registered, or registered for another op,
  /// device or obligation); non-empty makes the disposition `missing`.
  std::string unbound;

  friend bool operator==(const Evidence&, const Evidence&) = default;
};

/// Identifies the code a contract talks about. Never counts as evidence.
struct Provenance {
  std::string path;
  std::string symbol;
  std::string build_target;

  friend bool operator==(const Provenance&, const Provenance&) = default;
};

struct ContractDescriptor {
  Claim claim;
  std::string summary;
  Evidence evidence;
  std::vector<Provenance> provenance;

  friend bool operator==(const ContractDescriptor&, const ContractDescriptor&) = default;
};

struct NumericalPolicy {
  Reduction reduction = Reduction::NotApplicable;

  friend bool operator==(const NumericalPolicy&, const NumericalPolicy&) = default;
};

/// Why a trusted-external capsule is trusted; empty for checked capsules.
struct TrustRecord {
  std::string reason;
  std::string owner;
  std::optional<Date> expires;

  friend bool operator==(const TrustRecord&, const TrustRecord&) = default;
};

/// A line and column in the file that declares a capsule; 0 when unknown (built in code).
struct FilePos {
  std::uint32_t line = 0;
  std::uint32_t column = 0;
};

/// Where one contract's evidence and provenance were written (in the capsule's own file, perhaps
/// in its [defaults]), so lint can point at the very value it questions.
struct ContractSites {
  struct ProvenanceSite {
    FilePos path;
    FilePos symbol;
  };
  FilePos evidence;                        ///< the evidence's `name` value, else its table
  std::vector<ProvenanceSite> provenance;  ///< one per provenance entry, in order
};

/// One implementation of one op (TorchLean's KernelCapsule). Equality is structural over every
/// field that carries meaning; `where` and `sites` (file positions) are deliberately excluded so
/// the same declaration loaded from two files compares equal (grouping, §5.3).
struct Capsule {
  std::string name;
  std::string summary;  ///< one line for readers; optional
  Op op = Op::Custom;
  Provider provider = Provider::Reference;
  Device device = Device::Cpu;
  Trust trust = Trust::Checked;
  bool supports_forward = true;
  VjpMode vjp = VjpMode::None;
  std::array<ContractDescriptor, 4> contracts;  ///< indexed by Obligation
  NumericalPolicy numerical;
  TrustRecord trust_record;
  SourceLoc where;  ///< declaration site; not part of equality
  std::array<ContractSites, 4> sites;  ///< positions inside the contracts; not part of equality

  const ContractDescriptor& contract(Obligation obligation) const {
    return contracts[static_cast<std::size_t>(obligation)];
  }
  ContractDescriptor& contract(Obligation obligation) {
    return contracts[static_cast<std::size_t>(obligation)];
  }

  friend bool operator==(const Capsule& a, const Capsule& b);
};

/// §3.1: whether `claim` discharges `obligation` for a capsule of `op` with VJP mode `vjp`.
bool matches_obligation(Op op, VjpMode vjp, Obligation obligation, const Claim& claim);

/// All four contracts sit in their own field (§3.1).
bool contracts_aligned(const Capsule& capsule);

/// The obligation a claim kind belongs to (used to explain misalignment).
Obligation obligation_of(ClaimKind kind);

/// Same name, op, provider and device: the registry's duplicate key (§3.2).
bool same_identity(const Capsule& a, const Capsule& b);

// Report labels (§6). These texts are compared by tests and golden files.
std::string claim_label(const Claim& claim);
std::string evidence_label(const Evidence& evidence);

/// TorchLean's disposition of `evidence` backing a claim of kind `claim` (§9.3; the decisions are
/// in docs/acceptance-presets.md). The kind alone decides, except in two places: a runtime guard
/// is a complete executable check (`checked`) of a shape-safety or layout-compatibility claim
/// and only a precondition check (`guarded`) of a value or VJP claim; and a checker is `checked`
/// when its coverage is full, `fuzzed` when sampled and `trusted` when partial (it checks a
/// necessary condition and takes the rest on trust).
Disposition evidence_disposition(ClaimKind claim, const Evidence& evidence);

/// `YYYY-MM-DD`.
std::string format_date(const Date& date);

}  // namespace capsule
