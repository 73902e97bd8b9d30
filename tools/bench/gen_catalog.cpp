// SPDX-License-Identifier: Apache-2.0
// capsule_gen_catalog: writes a large synthetic catalog, for benchmarks and experiments.
//   capsule_gen_catalog --capsules N [--out FILE] [--module NAME] [--seed S]
// Without --out the catalog goes to standard output.
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

#include "synthetic_catalog.hpp"

namespace {

constexpr std::string_view kUsage =
    "usage: capsule_gen_catalog --capsules N [--out FILE] [--module NAME] [--seed S]\n"
    "Writes a valid synthetic catalog of N capsules spread over the 56 ops and many\n"
    "providers and devices. Without --out the catalog goes to standard output.\n";

int usage_error(std::string_view message) {
  std::cerr << "capsule_gen_catalog: " << message << "\n" << kUsage;
  return 2;
}

bool parse_count(std::string_view text, std::uint64_t& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

int main(int argc, char** argv) {
  capsule::bench::SyntheticCatalogOptions options;
  bool have_count = false;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    // Accept both `--key value` and `--key=value`.
    std::string_view key = arg;
    std::string_view value;
    bool inline_value = false;
    if (const auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      key = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    if (key != "--capsules" && key != "--out" && key != "--module" && key != "--seed") {
      return usage_error("unknown argument `" + std::string(arg) + "`");
    }
    if (!inline_value) {
      if (i + 1 >= argc) return usage_error(std::string(key) + " needs a value");
      value = argv[++i];
    }
    if (key == "--capsules") {
      std::uint64_t count = 0;
      if (!parse_count(value, count) || count == 0) {
        return usage_error("--capsules needs a positive integer, got `" + std::string(value) + "`");
      }
      options.capsules = static_cast<std::size_t>(count);
      have_count = true;
    } else if (key == "--seed") {
      if (!parse_count(value, options.seed)) return usage_error("--seed needs an integer, got `" + std::string(value) + "`");
    } else if (key == "--module") {
      if (value.empty() || value.find_first_of("\"\\\n") != std::string_view::npos) {
        return usage_error("--module needs a plain, non-empty name");
      }
      options.module = value;
    } else {
      out = value;
    }
  }
  if (!have_count) return usage_error("--capsules N is required");

  const std::string text = capsule::bench::synthetic_catalog(options);
  if (out.empty() || out == "-") {
    std::cout << text;
    return std::cout.good() ? 0 : 1;
  }
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) {
    std::cerr << "capsule_gen_catalog: cannot write `" << out << "`: " << std::strerror(errno) << "\n";
    return 1;
  }
  std::cerr << "capsule_gen_catalog: wrote " << options.capsules << " capsules (" << text.size() << " bytes) to " << out
            << "\n";
  return 0;
}
