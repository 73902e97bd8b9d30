// SPDX-License-Identifier: Apache-2.0
// The benchmarks' random numbers: splitmix64, small, fast, and the same on every platform (the
// std distributions are not), so generated catalogs and workloads are reproducible by seed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace capsule::bench {

struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

}  // namespace capsule::bench
