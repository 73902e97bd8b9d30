// SPDX-License-Identifier: Apache-2.0
// Run-time rechecks (docs/checkers.md, "Recheck at run time"): which checker a capsule's
// checker evidence binds, which calls a RecheckPolicy selects, and the reproduction bundle a
// failed check leaves behind. Internal to the session.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "capsule/fingerprint.hpp"
#include "capsule/policy.hpp"
#include "capsule/runtime/checker.hpp"

namespace capsule {

struct Capsule;

/// The checker that `capsule`'s `obligation` evidence names: null when that evidence is not a
/// checker. A binding-rejected error (naming capsule, checker, op and device) when no registry
/// was given, the name is not registered, or the registered checker's op, device, coverage or
/// obligation differs from what the catalog says: a check is never skipped silently.
RuntimeResult<const RegisteredChecker*> bind_checker(const Capsule& capsule, Obligation obligation,
                                                     const CheckerRegistry* registry);

/// Whether `policy` checks call `call_index` (0-based) of `capsule`. Every N: calls 0, N, 2N, ...
/// Sample: a draw from a stream derived from (policy seed, capsule, call index) only.
bool recheck_selects(const RecheckPolicy& policy, std::string_view capsule, std::uint64_t call_index);

/// The shortest text that reads back as `value`; `nan`, `inf` and `-inf` spelled out.
std::string recheck_number(double value);

/// `every call`, `every N calls`, or `sample p=P seed=S`.
std::string recheck_policy_text(const RecheckPolicy& policy);

/// What a failed check leaves for reproduction.
struct ReproBundle {
  const Capsule* capsule = nullptr;
  Obligation obligation = Obligation::Value;
  std::uint64_t call_index = 0;
  const RegisteredChecker* checker = nullptr;
  const CheckCall* call = nullptr;
  const CheckVerdict* verdict = nullptr;
  const RecheckPolicy* policy = nullptr;
  const EnvironmentFingerprint* fingerprint = nullptr;  ///< may be null: recorded as absent
};

/// Writes the bundle into a new directory under `parent` (created here, never reused; its name
/// is built from the capsule name with every character outside [A-Za-z0-9._-] replaced) and
/// returns that directory, or a message saying why nothing could be written.
Result<std::filesystem::path, std::string> write_repro_bundle(const std::filesystem::path& parent,
                                                             const ReproBundle& bundle);

}  // namespace capsule
