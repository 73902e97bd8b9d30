// SPDX-License-Identifier: Apache-2.0
// Runs this benchmark program again as a child process and returns what it printed: for a figure
// that differs from process to process (a heap's physical pages decide which L2 sets its buffers
// share, and one process keeps its pages for its whole run), so that several fresh processes
// sample what one cannot.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

extern char** environ;

namespace capsule::bench {

/// What a child printed on its standard output, when it exited with status 0.
struct ChildOutput {
  std::string text;
};
/// Why there is no output: the step that failed and its reason.
struct ChildFailure {
  std::string why;
};

/// Runs this executable with `args` (argv[1] on), inheriting the environment (the thread and BLAS
/// settings) and standard error, and waits for it to finish. There is no timeout: the caller is a
/// benchmark run by hand, and a hung child shows as a hung run.
inline std::variant<ChildOutput, ChildFailure> run_self(const std::vector<std::string>& args) {
  auto failure = [](const char* step, int error) { return ChildFailure{std::string(step) + ": " + std::strerror(error)}; };
  std::array<char, 4096> self{};
  const ssize_t length = readlink("/proc/self/exe", self.data(), self.size() - 1);
  if (length <= 0) return failure("readlink /proc/self/exe", errno);
  std::vector<std::string> owned{std::string(self.data(), static_cast<std::size_t>(length))};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : owned) argv.push_back(arg.data());
  argv.push_back(nullptr);

  // Close-on-exec, so that the child holds only the write end it gets as its standard output
  // (dup2 clears the flag on that copy), and the reader sees end of file when the child exits.
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return failure("pipe2", errno);
  posix_spawn_file_actions_t actions;
  int error = posix_spawn_file_actions_init(&actions);
  if (error == 0) error = posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  pid_t child = 0;
  if (error == 0) error = posix_spawn(&child, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (error != 0) {
    close(out[0]);
    return failure("posix_spawn", error);
  }
  std::string text;
  std::array<char, 4096> chunk{};
  for (;;) {
    const ssize_t got = read(out[0], chunk.data(), chunk.size());
    if (got > 0) {
      text.append(chunk.data(), static_cast<std::size_t>(got));
    } else if (got == 0) {
      break;
    } else if (errno != EINTR) {
      error = errno;
      break;
    }
  }
  close(out[0]);
  int status = 0;
  pid_t waited = 0;
  do {
    waited = waitpid(child, &status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited != child) return failure("waitpid", errno);
  if (error != 0) return failure("reading the child's output", error);
  if (WIFSIGNALED(status)) return ChildFailure{"the child was killed by signal " + std::to_string(WTERMSIG(status))};
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return ChildFailure{"the child exited with status " + std::to_string(WEXITSTATUS(status))};
  }
  return ChildOutput{std::move(text)};
}

}  // namespace capsule::bench
