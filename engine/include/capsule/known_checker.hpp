// SPDX-License-Identifier: Apache-2.0
// Checker evidence judged against the checkers a program links (issue 11; docs/acceptance-presets.md,
// "Checker evidence against the linked registry"). The engine includes no handler header: a
// program that registers checkers describes them as `KnownChecker` values (as it describes its
// compiled handlers as `LintHandler`s), and lint, plan and check judge catalog evidence against
// that list instead of taking the catalog's name and coverage at their word.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "capsule/catalog.hpp"
#include "capsule/load.hpp"
#include "capsule/vocab.hpp"

namespace capsule {

/// A registered checker as the engine sees it (runtime/checker.hpp's CheckerSpec without its function).
struct KnownChecker {
  std::string name;
  Op op = Op::Custom;
  Device device = Device::Cpu;
  CheckerCoverage coverage = CheckerCoverage::Full;
  Obligation obligation = Obligation::Value;
  SourceLoc where;  ///< registration site, when known
};

/// What one piece of checker evidence amounts to against the known checkers.
struct CheckerJudgement {
  enum class Verdict : std::uint8_t {
    NotChecker,  ///< the evidence is of another kind
    Bound,       ///< registered, and its op, device, coverage and obligation are the catalog's
    Unknown,     ///< no known checker has that name
    Mismatch,    ///< registered, but for another op, device, coverage or obligation
  };
  Verdict verdict = Verdict::NotChecker;
  const KnownChecker* checker = nullptr;  ///< Bound and Mismatch
  /// Mismatch: one line per disagreement, `op: the catalog's capsule is relu, the checker checks matmul`.
  std::vector<std::string> disagreements;
  /// The catalog's claimed coverage differs from the registered one (its line is the last one).
  bool coverage_differs = false;
  /// Mismatch on coverage only: the capsule may still be planned, with the registered coverage.
  bool coverage_only = false;
};

CheckerJudgement judge_checker_evidence(const Capsule& capsule, Obligation obligation,
                                        std::span<const KnownChecker> known);

/// Names of known checkers that could back `obligation` of `capsule` (same op, device and
/// obligation), in registration order; for "did you mean" and notes.
std::vector<std::string> checkers_for(const Capsule& capsule, Obligation obligation,
                                      std::span<const KnownChecker> known);

/// Rewrites `capsule`'s checker evidence as the known checkers decide it, so that the gate never
/// takes a catalog's claim at its word: a registered checker whose coverage differs lends its
/// own coverage (`Evidence::claimed_coverage` keeps the catalog's), and evidence naming no
/// known checker, or one of another op, device or obligation, is marked unbound
/// (`Evidence::unbound` says why), which every preset refuses (disposition `missing`).
void bind_known_checkers(Capsule& capsule, std::span<const KnownChecker> known);

/// The same for every capsule of every loaded module, the workspace's and those profiles
/// prepend through `with_catalogs`. Modules are shared and immutable, so a module with checker
/// evidence is replaced by a bound copy (and a profile that prepends one by a copy naming it).
void bind_known_checkers(Workspace& workspace, std::span<const KnownChecker> known);

}  // namespace capsule
