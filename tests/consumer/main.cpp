// SPDX-License-Identifier: Apache-2.0
// A consumer of the installed capsule package: loads the installed catalogs and profiles, plans
// matmul under checked_cpu and prints the chosen capsule and the reference handler that would
// run it. tests/package_check.cmake builds it against a scratch install and checks the output.
#include <cstdio>
#include <filesystem>
#include <string>

// Every installed header, so each compiles without capsule's source tree or toml++'s headers.
#include "capsule_headers.hpp"

#if defined(TOML_LIB_MAJOR) || defined(TOMLPLUSPLUS_H)
#error "an installed capsule header includes toml++"
#endif

int main() {
  const std::filesystem::path data = CONSUMER_DATA_DIR;
  capsule::LoadOptions options;
  options.check_every_profile = false;
  const capsule::Workspace workspace = capsule::load_workspace({data / "catalogs"}, {data / "profiles"}, options);
  if (capsule::has_errors(workspace.diagnostics)) {
    std::fprintf(stderr, "consumer: the installed catalogs or profiles failed to load (%zu diagnostics)\n",
                 workspace.diagnostics.size());
    return 1;
  }
  const capsule::ProfilePtr profile = workspace.find_profile("checked_cpu");
  if (!profile) {
    std::fprintf(stderr, "consumer: no profile checked_cpu\n");
    return 1;
  }
  const auto resolved = capsule::resolve_profile(workspace, profile);
  if (!resolved) {
    std::fprintf(stderr, "consumer: %s\n", resolved.error().c_str());
    return 1;
  }
  const auto planned = resolved->planner.plan_op(capsule::Op::Matmul);
  if (!planned) {
    std::fprintf(stderr, "consumer: %s\n", planned.error().render().c_str());
    return 1;
  }
  const capsule::Capsule& chosen = *planned->capsule;

  capsule::HandlerRegistry handlers;
  if (const auto registered = capsule::register_reference_handlers(handlers); !registered) {
    std::fprintf(stderr, "consumer: %s\n", registered.error().message.c_str());
    return 1;
  }
  const bool runnable = handlers.find(chosen.op, chosen.provider, chosen.device) != nullptr;
  std::printf("checked_cpu matmul -> %s (provider %s, device %s, handler %s)\n", chosen.name.c_str(),
              std::string(capsule::to_string(chosen.provider)).c_str(),
              std::string(capsule::to_string(chosen.device)).c_str(), runnable ? "linked" : "missing");
  return 0;
}
