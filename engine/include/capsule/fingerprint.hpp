// SPDX-License-Identifier: Apache-2.0
// The environment fingerprint: what a result depends on besides the catalogs, profiles and
// graph (host, compiler and flags, the compiled handler libraries, provider library versions and
// their configuration, threads, device and driver), in the spirit of PyTorch's `collect_env`.
// Every text, JSON and Markdown report prints it next to the catalog hashes, and the evidence
// ledger (capsule/evidence_ledger.hpp) stores it with each test run, so "passed" always says on
// what.
//
// Entries are flat `key = value` pairs with dotted ASCII keys. The keys the ledger matches on
// are fixed here; the others are informational and may grow. Values come from the environment
// (environment variables, /proc, the compiler), so renderers escape them like any input.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace capsule {

/// Keys with a fixed meaning (the ledger and the tests rely on them).
namespace fingerprint_key {
inline constexpr std::string_view kCommit = "build.commit";      ///< 40 hex digits, "-dirty" when the tree had changes; "unknown" outside git
inline constexpr std::string_view kCompiler = "build.compiler";  ///< e.g. "GNU 12.2.0"
inline constexpr std::string_view kFlags = "build.flags";        ///< the C++ flags the handlers were compiled with
inline constexpr std::string_view kBuildType = "build.type";     ///< CMAKE_BUILD_TYPE
inline constexpr std::string_view kHostArch = "host.arch";
inline constexpr std::string_view kHostOs = "host.os";
inline constexpr std::string_view kCpuModel = "device.cpu";      ///< the CPU model name, e.g. from /proc/cpuinfo
/// `provider.<provider>.sha256`: SHA-256 of the compiled handler library of that provider (its
/// static archive or shared object as built). The ledger matches entries on it: a ledger entry
/// counts for this build only when its provider's library digest equals this one's.
std::string provider_library_digest(std::string_view provider);
/// `provider.<provider>.version`: the provider's library version ("capsule 0.x" for reference).
std::string provider_version(std::string_view provider);
}  // namespace fingerprint_key

/// A fingerprint: entries sorted by key, each key once.
struct EnvironmentFingerprint {
  std::vector<std::pair<std::string, std::string>> entries;

  /// The value of `key`, or "" when absent.
  std::string get(std::string_view key) const;
  /// Sets `key` (keeps entries sorted and unique).
  void set(std::string key, std::string value);
  /// SHA-256 (hex) of the entries, one "key=value\n" per entry in key order: equal digests mean
  /// equal fingerprints.
  std::string digest() const;
};

}  // namespace capsule
