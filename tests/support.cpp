// SPDX-License-Identifier: Apache-2.0
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <stdexcept>

namespace capsule::testing {

const Capsule& shipped_capsule(std::string_view name) {
  for (const ModulePtr& module : shipped().modules) {
    for (const Capsule& c : module->capsules) {
      if (c.name == name) return c;
    }
  }
  FAIL("no shipped capsule " << name);
  throw std::logic_error("unreachable");
}

ModulePtr shipped_module(std::string_view name) {
  for (const ModulePtr& m : shipped().modules) {
    if (m->name == name) return m;
  }
  FAIL("no shipped module " << name);
  throw std::logic_error("unreachable");
}

ResolvedProfile shipped_profile(std::string_view name) {
  ProfilePtr profile = shipped().find_profile(name);
  REQUIRE_MESSAGE(profile != nullptr, "no shipped profile " << name);
  auto resolved = resolve_profile(shipped(), profile);
  REQUIRE_MESSAGE(resolved.has_value(), "profile " << name << " does not resolve");
  return std::move(*resolved);
}

CliRun run_cli(std::vector<std::string> args, const cli::Environment& env) {
  std::ostringstream out;
  std::ostringstream err;
  CliRun run;
  run.status = cli::run(args, out, err, env);
  run.out = out.str();
  run.err = err.str();
  return run;
}

std::string mask_digests(std::string text) {
  // A plain scan rather than <regex>: libstdc++'s regex trips -Wmaybe-uninitialized under the
  // sanitizer build.
  const auto is_hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t run = 0;
    while (i + run < text.size() && is_hex(text[i + run])) ++run;
    if (run == 64) {
      out += "<sha256>";
    } else {
      out.append(text, i, run == 0 ? 1 : run);
    }
    i += run == 0 ? 1 : run;
  }
  return out;
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace capsule::testing
