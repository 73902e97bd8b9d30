// SPDX-License-Identifier: Apache-2.0
#include "ledger_options.hpp"

#include "capsule/escape.hpp"

namespace capsule::cli {

std::vector<fs::path> ledger_files(const po::variables_map& vm) {
  std::vector<fs::path> files;
  if (!vm.count("ledger")) return files;
  for (const std::string& file : vm["ledger"].as<std::vector<std::string>>()) files.emplace_back(file);
  return files;
}

std::optional<EvidenceLedger> load_ledgers(const po::variables_map& vm, Context& ctx) {
  if (!vm.count("ledger")) return std::nullopt;
  auto ledger = read_evidence_ledgers(ledger_files(vm));
  if (!ledger) {
    ctx.err << render(ledger.error(), ctx.err_style);
    throw LedgerLoadFailed{};
  }
  return std::move(*ledger);
}

std::string ledger_summary_line(const EvidenceLedger& ledger) {
  return text_escape(str("evidence ledger: ", ledger.runs.size(), " run", ledger.runs.size() == 1 ? "" : "s", ", ",
                         ledger.entries.size(), " entries (", join(ledger.paths, ", "), ")"));
}

}  // namespace capsule::cli
