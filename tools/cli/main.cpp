// SPDX-License-Identifier: Apache-2.0
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
  env.error_terminal = isatty(STDERR_FILENO) != 0;
  // no-color.org: NO_COLOR present and not empty disables colour that --color auto would write.
  if (const char* no_color = std::getenv("NO_COLOR")) env.no_color = no_color[0] != '\0';
  int status = capsule::cli::run(args, std::cout, std::cerr, env);
  // A report that never reached its reader is a failure, not a success: a closed standard output,
  // a full disk, or a reader that went away while SIGPIPE is ignored (docs/security.md).
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  const int cause = errno;
  if (!flushed || std::ferror(stdout) != 0 || !std::cout) {
    std::cerr << "capsule: cannot write standard output: "
              << (cause != 0 ? std::strerror(cause) : "write error") << "; the report is incomplete\n";
    status = capsule::cli::kUsage;
  }
  return status;
}
