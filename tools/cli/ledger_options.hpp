// SPDX-License-Identifier: Apache-2.0
// `--ledger FILE` (repeatable): the evidence ledgers `capsule check` and `capsule lint` judge
// evidence against (capsule/evidence_ledger.hpp), merged in the order given. The flag itself is a
// row of the command table.
#pragma once

#include <optional>

#include "capsule/evidence_ledger.hpp"
#include "cli_support.hpp"

namespace capsule::cli {

/// The files named by `--ledger`, in order (empty when none).
std::vector<fs::path> ledger_files(const po::variables_map& vm);

/// The merged ledgers named by `--ledger`, or nullopt when none was named. A ledger that does
/// not read prints its diagnostics and throws LedgerLoadFailed (exit 2: a file failed to load).
std::optional<EvidenceLedger> load_ledgers(const po::variables_map& vm, Context& ctx);

struct LedgerLoadFailed {};

/// `evidence ledger: N runs, M entries (files)`, escaped for text.
std::string ledger_summary_line(const EvidenceLedger& ledger);

}  // namespace capsule::cli
