// SPDX-License-Identifier: Apache-2.0
#include "linked_checkers.hpp"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "capsule/checkers/standard.hpp"

namespace capsule::cli {

RuntimeStatus register_linked_checkers(CheckerRegistry& registry) { return register_standard_checkers(registry); }

std::vector<KnownChecker> linked_known_checkers() {
  CheckerRegistry registry;
  if (auto registered = register_linked_checkers(registry); !registered) {
    throw std::logic_error(registered.error().message);
  }
  std::vector<KnownChecker> known;
  for (const RegisteredChecker* checker : registry.all()) {
    const CheckerSpec& spec = checker->spec;
    known.push_back(KnownChecker{spec.name, spec.op, spec.device, spec.coverage, spec.obligation,
                                 registration_loc(checker->site)});
  }
  return known;
}

SourceLoc registration_loc(std::string_view site) {
  namespace fs = std::filesystem;
  const auto colon = site.rfind(':');
  if (colon == std::string_view::npos) return {};
  fs::path file{std::string(site.substr(0, colon))};
  std::error_code error;
  if (file.is_relative() && fs::is_regular_file(fs::path(CAPSULE_SOURCE_DIR) / file, error)) {
    file = fs::path(CAPSULE_SOURCE_DIR) / file;
  }
  const std::string line(site.substr(colon + 1));
  return SourceLoc{file.string(), static_cast<std::uint32_t>(std::strtoul(line.c_str(), nullptr, 10)), 1};
}

}  // namespace capsule::cli
