// SPDX-License-Identifier: Apache-2.0
#include "capsule/runtime/checker.hpp"

#include <bit>

#include "capsule/text.hpp"
#include "registration_site.hpp"

namespace capsule {
namespace {

// splitmix64's output function: a bijective mix of 64 bits (every input bit reaches every output
// bit), used both as the stream's step and to combine the parts of a stream's seed.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

}  // namespace

std::uint64_t CheckerRng::next() {
  state_ += kGolden;
  return mix64(state_);
}

void CheckerRng::fill_signs(double* out, std::size_t count) {
  for (std::size_t i = 0; i < count; i += 64) {
    const std::uint64_t bits = next();
    const std::size_t chunk = count - i < 64 ? count - i : 64;
    // ±1.0 assembled from its bits: 1.0's with bit b of the draw (from the top) as the sign bit.
    // Without a branch (the bits are random, so a branch would miss half the time) and without
    // an integer-to-double conversion per sign (3% of a 256³ check's time before).
    std::uint64_t rest = bits;
    for (std::size_t b = 0; b < chunk; ++b, rest <<= 1) {
      out[i + b] = std::bit_cast<double>((rest & (std::uint64_t{1} << 63)) | std::bit_cast<std::uint64_t>(1.0));
    }
  }
}

std::uint64_t CheckerRng::below(std::uint64_t bound) {
  if (bound == 0) return 0;  // an empty range has no value to draw; 0 rather than a loop
  // Rejection sampling: the largest multiple of `bound` that fits keeps every value equally likely.
  const std::uint64_t limit = (~std::uint64_t{0} / bound) * bound;
  for (;;) {
    const std::uint64_t draw = next();
    if (draw < limit) return draw % bound;
  }
}

std::uint64_t checker_stream_seed(std::uint64_t seed, std::string_view capsule, std::uint64_t call_index) {
  // FNV-1a over the capsule's name, then each part mixed in turn, so that no two of (seed, name,
  // index) can trade bits: (s, "a", 1) and (s, "a", 2) are unrelated streams, and so are names
  // that differ in one byte.
  std::uint64_t name_hash = 0xcbf29ce484222325ULL;
  for (const char c : capsule) {
    name_hash ^= static_cast<unsigned char>(c);
    name_hash *= 0x100000001b3ULL;
  }
  std::uint64_t h = mix64(seed + kGolden);
  h = mix64(h ^ mix64(name_hash + 2 * kGolden));
  h = mix64(h ^ mix64(call_index + 3 * kGolden));
  return h;
}

RuntimeStatus CheckerRegistry::add(CheckerSpec spec, std::source_location site) {
  if (spec.name.empty()) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("checker for ", to_string(spec.op), " at ", registration_site(site), " has no name"));
  }
  if (spec.check == nullptr) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("checker `", spec.name, "` at ", registration_site(site), " has no check function"));
  }
  if (spec.obligation != Obligation::Value && spec.obligation != Obligation::Vjp) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("checker `", spec.name, "` at ", registration_site(site), " checks the ",
                             to_string(spec.obligation), " obligation; expected value or vjp"));
  }
  if (const RegisteredChecker* existing = find(spec.name)) {
    return runtime_error(RuntimeCode::DuplicateHandler,
                         str("duplicate checker `", spec.name, "` at ", registration_site(site), " and at ",
                             existing->site, "; expected one checker per name"));
  }
  checkers_.push_back(std::make_unique<RegisteredChecker>(RegisteredChecker{std::move(spec), registration_site(site)}));
  return std::monostate{};
}

const RegisteredChecker* CheckerRegistry::find(std::string_view name) const {
  for (const auto& checker : checkers_) {
    if (checker->spec.name == name) return checker.get();
  }
  return nullptr;
}

std::vector<const RegisteredChecker*> CheckerRegistry::for_op(Op op, Device device) const {
  std::vector<const RegisteredChecker*> found;
  for (const auto& checker : checkers_) {
    if (checker->spec.op == op && checker->spec.device == device) found.push_back(checker.get());
  }
  return found;
}

std::vector<const RegisteredChecker*> CheckerRegistry::all() const {
  std::vector<const RegisteredChecker*> found;
  found.reserve(checkers_.size());
  for (const auto& checker : checkers_) found.push_back(checker.get());
  return found;
}

RuntimeResult<CheckVerdict> run_checker(const RegisteredChecker& checker, const CheckCall& call, CheckerRng& rng) {
  if (call.op != checker.spec.op) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("checker `", checker.spec.name, "` checks ", to_string(checker.spec.op), ", not ",
                             to_string(call.op)));
  }
  if (call.output == nullptr || call.attrs == nullptr) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("checker `", checker.spec.name, "` was given no output or no attributes"));
  }
  if (checker.spec.obligation == Obligation::Vjp && call.output_gradient == nullptr) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("checker `", checker.spec.name, "` checks a VJP but was given no output gradient"));
  }
  return checker.spec.check(call, rng);
}

}  // namespace capsule
