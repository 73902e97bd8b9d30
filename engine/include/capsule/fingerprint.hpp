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

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
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
// Informational keys (docs/fingerprint.md lists every key and what it means).
inline constexpr std::string_view kCapsuleVersion = "capsule.version";  ///< the project version, e.g. "0.1.0"
inline constexpr std::string_view kHostCpus = "host.cpus";              ///< logical CPUs online
inline constexpr std::string_view kHardwareThreads = "threads.hardware";  ///< std::thread::hardware_concurrency()
inline constexpr std::string_view kOpenblas = "blas.openblas";          ///< openblas_get_config(), or why there is none
inline constexpr std::string_view kOpenblasCore = "blas.openblas.corename";
inline constexpr std::string_view kOpenblasThreads = "blas.openblas.threads";
/// `provider.<provider>.library`: the file name of the provider's compiled handler library.
std::string provider_library_file(std::string_view provider);
/// `env.<NAME>`: an environment variable a result depends on, as set, or "unset".
std::string environment_variable(std::string_view name);
/// `provider.<provider>.sha256`: SHA-256 of the compiled handler library of that provider (its
/// static archive or shared object as built). The ledger matches entries on it: a ledger entry
/// counts for this build only when its provider's library digest equals this one's.
std::string provider_library_digest(std::string_view provider);
/// `provider.<provider>.version`: the provider's library version ("capsule 0.x" for reference).
std::string provider_version(std::string_view provider);
}  // namespace fingerprint_key

/// The longest value a fingerprint stores, in bytes. Values come from the environment (an
/// exported variable can be megabytes); a longer value keeps its first bytes and says how many
/// it dropped, so reports stay readable and the digest still tells two long values apart.
inline constexpr std::size_t kMaxFingerprintValue = 512;

/// A fingerprint: entries sorted by key, each key once.
struct EnvironmentFingerprint {
  std::vector<std::pair<std::string, std::string>> entries;

  /// The value of `key`, or "" when absent.
  std::string get(std::string_view key) const;
  /// Sets `key` (keeps entries sorted and unique). The value is stored as given, any bytes,
  /// capped at kMaxFingerprintValue (see `capped_fingerprint_value`); renderers escape it.
  void set(std::string key, std::string value);
  /// SHA-256 (hex) of the entries, one "key=value\n" per entry in key order, where value is
  /// written as `<byte length>:<bytes>` so a value holding a newline or `=` cannot pass for
  /// another entry: equal digests mean equal fingerprints.
  std::string digest() const;
};

/// `value` when it fits kMaxFingerprintValue, else its first kMaxFingerprintValue bytes followed
/// by `... (N more bytes; sha256 of the whole value H)`, so two long values that differ only
/// after the cap still differ.
std::string capped_fingerprint_value(std::string value);

/// Sets every entry of `extra` in `fingerprint` (later entries win). This is how a provider
/// contributes its entries (library version, configuration, device, driver): its registration
/// code returns them and the program that links the provider passes them in. Nothing registers
/// itself at static-initialisation time.
void add_entries(EnvironmentFingerprint& fingerprint, const EnvironmentFingerprint& extra);

/// Reads one environment variable: its value, or nullopt when unset. Tests pass their own.
using EnvironmentLookup = std::function<std::optional<std::string>(std::string_view name)>;
/// The process environment (getenv).
std::optional<std::string> process_environment(std::string_view name);

/// What this host says about itself, with no provider header and no link dependency: host.os
/// (uname sysname and release), host.arch, host.cpus, device.cpu (/proc/cpuinfo), the thread
/// settings (hardware concurrency; OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS as
/// env.* entries), OPENBLAS_CORETYPE, and, when an OpenBLAS is loaded in this process, its
/// configuration, core name and thread count (found with dlsym, so nothing links OpenBLAS).
/// Build identity (commit, compiler, flags, library digests) is not here: the generated
/// capsule_build_info target adds it (capsule/build_info.hpp, current_fingerprint()).
EnvironmentFingerprint collect_host_fingerprint(const EnvironmentLookup& lookup = process_environment);

}  // namespace capsule
