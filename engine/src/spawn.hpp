// SPDX-License-Identifier: Apache-2.0
// Running a helper program (git) without a shell: argv goes to posix_spawnp as a vector, so no
// argument is ever parsed by a shell, whatever a revision name or a path contains.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/result.hpp"

namespace capsule::detail {

/// What a finished program said.
struct ProcessOutput {
  int exit_code = -1;  ///< -1 when it was killed by a signal
  std::string out;
  std::string err;
  bool truncated = false;  ///< output passed `max_output`; the program was killed, `exit_code` is -1
};

/// Runs `argv` (argv[0] looked up on PATH), stdin from /dev/null, and captures stdout and stderr,
/// at most `max_output` bytes of both together: a program that says more is killed and the result
/// is marked `truncated`, so a hostile repository cannot exhaust memory through it. Fails with a
/// sentence when the program cannot be started (a missing binary says so).
Result<ProcessOutput, std::string> run_program(const std::vector<std::string>& argv,
                                               std::size_t max_output = std::size_t{1} << 30);

/// A long-lived program spoken to line by line over pipes (`git cat-file --batch`). stderr goes
/// to /dev/null: such a program reports problems on stdout, in its protocol.
class Conversation {
 public:
  static Result<Conversation, std::string> start(const std::vector<std::string>& argv);
  Conversation(Conversation&& other) noexcept;
  Conversation& operator=(Conversation&&) = delete;
  Conversation(const Conversation&) = delete;
  ~Conversation();

  /// Writes all of `text`; false when the program went away.
  bool send(std::string_view text);
  /// Reads through the next '\n' (returned without it); nullopt at end of output.
  std::optional<std::string> read_line();
  /// Reads exactly `n` bytes; nullopt when the output ends first.
  std::optional<std::string> read_bytes(std::size_t n);

 private:
  Conversation() = default;
  bool fill();

  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffered_;
};

}  // namespace capsule::detail
