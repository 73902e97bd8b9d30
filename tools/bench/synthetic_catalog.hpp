// SPDX-License-Identifier: Apache-2.0
// Large synthetic catalogs for benchmarks (and for anyone who wants to try the engine on a
// catalog far bigger than the shipped ones). The text is a valid schema-1 catalog: one module,
// a [defaults] table like the shipped catalogs, then N [[capsule]] tables whose ops, providers,
// devices, trust levels, VJP owners and evidence vary the way real catalogs do. Output is
// deterministic for a given set of options.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "capsule/vocab.hpp"

namespace capsule::bench {

struct SyntheticCatalogOptions {
  std::size_t capsules = 1000;
  /// The `module` name; capsule names are `<module>.<op>.<provider>.<index>`, so unique.
  std::string module = "synthetic";
  /// Ops to spread the capsules over, round-robin in a shuffled order. Empty: all 56 ops.
  std::vector<Op> ops;
  /// Varies the provider/device/evidence mix; the same seed gives the same text.
  std::uint64_t seed = 1;
};

/// The catalog TOML text. Loads with no error and no warning (`capsule lint` exits 0).
std::string synthetic_catalog(const SyntheticCatalogOptions& options);

/// Every op except those in `excluded`, in vocabulary order.
std::vector<Op> ops_except(const std::vector<Op>& excluded);

}  // namespace capsule::bench
