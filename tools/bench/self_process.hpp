// SPDX-License-Identifier: Apache-2.0
// Runs this benchmark program again as a child process and returns what it printed: for a figure
// that differs from process to process (a heap's physical pages decide which L2 sets its buffers
// share, and one process keeps its pages for its whole run), so that several fresh processes
// sample what one cannot.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

namespace capsule::bench {

/// The standard output of this executable run with `args` (argv[1] on), or nullopt when it could
/// not be started or did not exit with status 0. The child inherits the environment (the thread
/// and BLAS settings). It runs to completion before this returns.
inline std::optional<std::string> run_self(const std::vector<std::string>& args) {
  std::array<char, 4096> self{};
  const ssize_t length = readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (length <= 0) return std::nullopt;
  std::vector<std::string> owned{std::string(self.data(), static_cast<std::size_t>(length))};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : owned) argv.push_back(arg.data());
  argv.push_back(nullptr);

  int out[2];
  if (pipe(out) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  pid_t child = 0;
  const int spawned = posix_spawn(&child, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    return std::nullopt;
  }
  std::string text;
  std::array<char, 4096> chunk{};
  for (;;) {
    const ssize_t got = read(out[0], chunk.data(), chunk.size());
    if (got <= 0) break;
    text.append(chunk.data(), static_cast<std::size_t>(got));
  }
  close(out[0]);
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return text;
}

}  // namespace capsule::bench
