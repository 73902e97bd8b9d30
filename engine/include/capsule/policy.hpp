// SPDX-License-Identifier: Apache-2.0
// What a profile asks of the planner (§1.4, §1.5, §4.1, §9.2): the assurance policy that filters
// trust levels and evidence kinds, the provider preference, the kernel policy, and the declared
// availability of devices and providers. Availability is a declaration, never a hardware probe.
#pragma once

#include <array>
#include <optional>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/capsule.hpp"
#include "capsule/vocab.hpp"

namespace capsule {

/// Which trust levels, evidence kinds and evidence dispositions a profile admits. One record
/// governs both planner selection (by trust) and the contract check (by evidence), as in
/// TorchLean. Evidence passes when its kind is admitted and its disposition is not refused; a
/// `trusted` disposition (a trusted boundary, a partial checker) passes only where
/// `trusted-boundary` evidence is admitted, and `missing` only where `missing` is admitted.
struct AssurancePolicy {
  EnumSet<Trust> trust;
  EnumSet<EvidenceKind> evidence;
  EnumSet<Disposition> refused;  ///< dispositions rejected even when their kind is admitted

  /// Guards, tests, shared definitions, fuzz oracles, checkers and not-applicable; checked
  /// capsules only.
  static AssurancePolicy checked();
  /// `checked` plus trusted-external capsules and trusted-boundary evidence.
  static AssurancePolicy external();
  /// TorchLean's `strict`: evidence decides, whatever the capsule's trust label; only proved and
  /// checked evidence (and not-applicable) is admitted. Guards count only where they check a
  /// shape or layout claim completely (docs/acceptance-presets.md).
  static AssurancePolicy strict();
  /// TorchLean's `checkedRuntime`: evidence decides, whatever the trust label; guards, tests and
  /// fuzzing (sampled checkers) are admitted, trust and missing evidence are not.
  static AssurancePolicy checked_runtime();
  /// TorchLean's `allowTrustedRuntime`: admits the same as `external` and loads as it.
  static AssurancePolicy allow_trusted_runtime() { return external(); }

  bool accepts_trust(Trust level) const { return trust.contains(level); }
  /// Whether `e`, backing a claim of kind `claim`, passes the contract check.
  bool accepts_evidence(ClaimKind claim, const Evidence& e) const;
  /// TorchLean's `acceptsDisposition`, with this engine's rule for `trusted` and `missing`.
  bool accepts_disposition(Disposition d) const;

  /// `checked`, `external`, `strict`, `checked-runtime`, or `custom(trust: a|b; evidence: c|d)`
  /// (with `; refused: e|f` when dispositions are refused) for any other set.
  std::string label() const;

  friend bool operator==(const AssurancePolicy&, const AssurancePolicy&) = default;
};

/// The preset spellings a profile's `assurance` accepts, in documentation order.
inline constexpr std::array<std::string_view, 5> kAssurancePresets{"checked", "external", "strict", "checked-runtime",
                                                                   "allow-trusted-runtime"};
/// The preset of that spelling, or nullopt.
std::optional<AssurancePolicy> assurance_preset(std::string_view name);

struct ProviderPreference {
  enum class Kind : std::uint8_t { Auto, Prefer, Only };
  Kind kind = Kind::Auto;
  Provider provider = Provider::Reference;  ///< ignored for Auto

  static ProviderPreference automatic() { return {}; }
  static ProviderPreference prefer(Provider p) { return {Kind::Prefer, p}; }
  static ProviderPreference only(Provider p) { return {Kind::Only, p}; }

  /// `auto`, `prefer libtorch`, `only external`.
  std::string label() const;

  friend bool operator==(const ProviderPreference&, const ProviderPreference&) = default;
};

/// TorchLean's KernelPolicy: what one plan asks for.
struct KernelPolicy {
  Device device = Device::Cpu;
  ProviderPreference provider;
  AssurancePolicy assurance = AssurancePolicy::checked();
  VjpMode vjp = VjpMode::TorchleanTape;

  friend bool operator==(const KernelPolicy&, const KernelPolicy&) = default;
};

/// How often a session reruns the checker of a capsule whose obligation rests on checker evidence
/// (issue 11, "Recheck at run time"; docs/checkers.md). A profile's `recheck` key sets it:
/// `{ every = N }` checks calls 0, N, 2N, …; `{ sample = p, seed = s }` checks each call with
/// probability p, decided by a stream derived from (s, capsule, call index) only, so turning
/// checks on never changes a run's results. The default is every call.
struct RecheckPolicy {
  enum class Kind : std::uint8_t { Every, Sample };
  Kind kind = Kind::Every;
  std::uint64_t every = 1;   ///< Every: the period (1 = every call)
  double sample = 1.0;       ///< Sample: the probability that a call is checked, in (0, 1]
  std::uint64_t seed = 0;    ///< Sample: the sampling stream's seed

  /// True when every call is checked: what `strict` requires.
  /// `sample = 1` checks every call too.
  bool checks_every_call() const { return kind == Kind::Every ? every == 1 : sample >= 1.0; }
  /// The expected share of calls checked: 1/every, or the sample fraction.
  double checked_fraction() const { return kind == Kind::Every ? 1.0 / static_cast<double>(every) : sample; }

  /// `every call`, `every 4 calls`, `sample 0.01 (seed 7)`: as reports, plans and diffs say it.
  std::string label() const;

  friend bool operator==(const RecheckPolicy&, const RecheckPolicy&) = default;
};

/// Declared devices and providers (§4.1). Default: the CPU preset.
struct Availability {
  EnumSet<Device> devices{Device::Cpu};
  EnumSet<Provider> providers{Provider::Reference, Provider::Torchlean};

  bool admits(const Capsule& c) const { return devices.contains(c.device) && providers.contains(c.provider); }

  friend bool operator==(const Availability&, const Availability&) = default;
};

// Build targets (§9.2): a declared machine from which availability is derived.
enum class OperatingSystem : std::uint8_t { Linux, Macos, Windows, Wasi, Unknown };
enum class Architecture : std::uint8_t { X86_64, Aarch64, Wasm32, Unknown };
enum class Accelerator : std::uint8_t { None, Cuda, Rocm, Metal, Wasm, Tpu, Trainium, Custom, External };
enum class BuildFeature : std::uint8_t {
  NativeCuda, Libtorch, Aten, Mps, Webgpu, Cublas, Cudnn, Cufft, Xla, Neuron, CustomChip, External
};

template <>
struct VocabTable<OperatingSystem> {
  static constexpr std::string_view kind = "operating system";
  static constexpr std::array<std::pair<OperatingSystem, std::string_view>, 5> entries{{
      {OperatingSystem::Linux, "linux"}, {OperatingSystem::Macos, "macos"},
      {OperatingSystem::Windows, "windows"}, {OperatingSystem::Wasi, "wasi"},
      {OperatingSystem::Unknown, "unknown"}}};
};
template <>
struct VocabTable<Architecture> {
  static constexpr std::string_view kind = "architecture";
  static constexpr std::array<std::pair<Architecture, std::string_view>, 4> entries{{
      {Architecture::X86_64, "x86_64"}, {Architecture::Aarch64, "aarch64"},
      {Architecture::Wasm32, "wasm32"}, {Architecture::Unknown, "unknown"}}};
};
template <>
struct VocabTable<Accelerator> {
  static constexpr std::string_view kind = "accelerator";
  static constexpr std::array<std::pair<Accelerator, std::string_view>, 9> entries{{
      {Accelerator::None, "none"}, {Accelerator::Cuda, "cuda"}, {Accelerator::Rocm, "rocm"},
      {Accelerator::Metal, "metal"}, {Accelerator::Wasm, "wasm"}, {Accelerator::Tpu, "tpu"},
      {Accelerator::Trainium, "trainium"}, {Accelerator::Custom, "custom"},
      {Accelerator::External, "external"}}};
};
template <>
struct VocabTable<BuildFeature> {
  static constexpr std::string_view kind = "build feature";
  static constexpr std::array<std::pair<BuildFeature, std::string_view>, 12> entries{{
      {BuildFeature::NativeCuda, "native-cuda"}, {BuildFeature::Libtorch, "libtorch"},
      {BuildFeature::Aten, "aten"}, {BuildFeature::Mps, "mps"}, {BuildFeature::Webgpu, "webgpu"},
      {BuildFeature::Cublas, "cublas"}, {BuildFeature::Cudnn, "cudnn"}, {BuildFeature::Cufft, "cufft"},
      {BuildFeature::Xla, "xla"}, {BuildFeature::Neuron, "neuron"},
      {BuildFeature::CustomChip, "custom-chip"}, {BuildFeature::External, "external"}}};
};
static_assert(detail::table_is_dense(VocabTable<OperatingSystem>::entries));
static_assert(detail::table_is_dense(VocabTable<Architecture>::entries));
static_assert(detail::table_is_dense(VocabTable<Accelerator>::entries));
static_assert(detail::table_is_dense(VocabTable<BuildFeature>::entries));

struct Target {
  OperatingSystem os = OperatingSystem::Unknown;
  Architecture arch = Architecture::Unknown;
  Accelerator accelerator = Accelerator::None;
  std::vector<BuildFeature> features;

  /// devices [cpu] (+ the accelerator's device); providers [reference, torchlean] + one per feature.
  Availability declared_availability() const;

  friend bool operator==(const Target&, const Target&) = default;
};

/// The operating system this binary was compiled for. A profile's [target] naming another one is
/// a declaration: capsule plans with it and runs on this platform, and checks nothing about that.
constexpr OperatingSystem this_build_os() {
#if defined(__linux__)
  return OperatingSystem::Linux;
#elif defined(__APPLE__)
  return OperatingSystem::Macos;
#elif defined(_WIN32)
  return OperatingSystem::Windows;
#elif defined(__wasi__)
  return OperatingSystem::Wasi;
#else
  return OperatingSystem::Unknown;
#endif
}

/// The architecture this binary was compiled for (see this_build_os).
constexpr Architecture this_build_arch() {
#if defined(__x86_64__) || defined(_M_X64)
  return Architecture::X86_64;
#elif defined(__aarch64__) || defined(_M_ARM64)
  return Architecture::Aarch64;
#elif defined(__wasm32__)
  return Architecture::Wasm32;
#else
  return Architecture::Unknown;
#endif
}

}  // namespace capsule
