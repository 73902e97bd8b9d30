// SPDX-License-Identifier: Apache-2.0
// The build's evidence manifest: every test suite of this build, and every fuzz oracle and
// shared definition it declares, each with the (op, provider, device, obligation) cases it says
// it exercises. The test binary writes it after each link (tests/suite_coverage.hpp);
// `capsule lint` reads it to decide whether evidence a catalog names covers the capsule that
// names it. Format: docs/decisions.md, "Evidence names".
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "capsule/diag.hpp"
#include "capsule/result.hpp"
#include "capsule/vocab.hpp"

namespace capsule {

/// The manifest format this build reads and writes.
inline constexpr std::int64_t kEvidenceManifestSchema = 1;

/// One case an evidence source exercises. A later evidence ledger records pass or fail per
/// (source, case), so these five fields are the ledger's key.
struct CoverageCase {
  Op op = Op::Custom;
  Provider provider = Provider::Reference;
  Device device = Device::Cpu;
  Obligation obligation = Obligation::Value;

  friend auto operator<=>(const CoverageCase&, const CoverageCase&) = default;
};

/// A test suite, fuzz oracle or shared definition of this build and the cases it covers.
struct EvidenceSource {
  EvidenceKind kind = EvidenceKind::TestSuite;
  std::string name;
  std::vector<CoverageCase> cases;  ///< sorted, unique; empty for a suite that declares none

  bool covers(const CoverageCase& wanted) const;
};

/// What the build can show as evidence.
struct EvidenceManifest {
  std::string path;                     ///< where it was read from (empty when built in code)
  std::vector<EvidenceSource> sources;  ///< sorted by (kind, name), unique

  /// The named source of `kind`, or nullptr.
  const EvidenceSource* find(EvidenceKind kind, std::string_view name) const;
  bool contains(std::string_view suite) const { return find(EvidenceKind::TestSuite, suite) != nullptr; }
  /// Names of every source of `kind`, sorted.
  std::vector<std::string> names(EvidenceKind kind) const;
  /// Sorts sources and their cases and merges sources declared twice under one (kind, name).
  void normalise();
};

/// The evidence kinds a manifest can declare, and the array-of-tables key each is written under.
inline constexpr std::array<std::pair<EvidenceKind, std::string_view>, 3> kManifestSections{{
    {EvidenceKind::TestSuite, "test-suite"},
    {EvidenceKind::FuzzOracle, "fuzz-oracle"},
    {EvidenceKind::SharedDefinition, "shared-definition"},
}};

/// Reads a manifest, reporting every problem (unreadable file, invalid TOML, unknown schema,
/// keys, spellings or names) with its position. Source names must be evidence names
/// (capsule/identifier.hpp), so a manifest cannot put control characters into lint's output.
Result<EvidenceManifest, Diagnostics> read_evidence_manifest(const std::filesystem::path& file);
/// The same, from text already read; `path` names it in diagnostics.
Result<EvidenceManifest, Diagnostics> parse_evidence_manifest(std::string_view text, const std::string& path);

/// The manifest as TOML: deterministic (sorted, one op list per provider, device and
/// obligation), so the build rewrites the file only when a claim changes.
std::string write_evidence_manifest(const EvidenceManifest& manifest);

/// One line summarising what `source` covers, e.g. "value of 53 ops on reference/cpu".
std::string describe_coverage(const EvidenceSource& source);

}  // namespace capsule
