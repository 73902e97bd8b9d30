// SPDX-License-Identifier: Apache-2.0
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  capsule::cli::Environment env;
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  env.executable_dir = error ? std::filesystem::path(argv[0]).parent_path() : self.parent_path();
  if (const char* today = std::getenv("CAPSULE_TODAY")) env.today = today;
  env.terminal = isatty(STDOUT_FILENO) != 0;
  return capsule::cli::run(args, std::cout, std::cerr, env);
}
