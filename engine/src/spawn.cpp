// SPDX-License-Identifier: Apache-2.0
// posix_spawnp with pipes; see spawn.hpp.
#include "spawn.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "capsule/text.hpp"

extern char** environ;

namespace capsule::detail {
namespace {

struct Pipe {
  int read = -1;
  int write = -1;
  bool open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    read = fds[0];
    write = fds[1];
    return true;
  }
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::vector<char*> argv_of(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const std::string& arg : argv) out.push_back(const_cast<char*>(arg.c_str()));
  out.push_back(nullptr);
  return out;
}

std::string spawn_error(const std::string& program, int error) {
  if (error == ENOENT) return str("cannot run `", program, "`: no such program on PATH (is ", program, " installed?)");
  return str("cannot run `", program, "`: ", std::strerror(error));
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Spawns `argv` with the given descriptors as its stdin, stdout and stderr (-1: /dev/null).
Result<pid_t, std::string> spawn(const std::vector<std::string>& argv, int in, int out, int err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const int targets[3] = {in, out, err};
  for (int fd = 0; fd < 3; ++fd) {
    if (targets[fd] >= 0) posix_spawn_file_actions_adddup2(&actions, targets[fd], fd);
    else posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
  }
  pid_t pid = -1;
  std::vector<char*> args = argv_of(argv);
  const int error = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) return fail(spawn_error(argv.front(), error));
  return pid;
}

}  // namespace

Result<ProcessOutput, std::string> run_program(const std::vector<std::string>& argv, std::size_t max_output) {
  Pipe out;
  Pipe err;
  if (!out.open() || !err.open()) return fail(str("cannot create a pipe: ", std::strerror(errno)));
  auto pid = spawn(argv, -1, out.write, err.write);
  close_fd(out.write);
  close_fd(err.write);
  if (!pid) {
    close_fd(out.read);
    close_fd(err.read);
    return fail(pid.error());
  }
  ProcessOutput result;
  // Both pipes are drained together, so a chatty stderr cannot stall the program on stdout.
  pollfd fds[2] = {{out.read, POLLIN, 0}, {err.read, POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  char buffer[65536];
  while (open_count > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0 && result.out.size() + result.err.size() + static_cast<std::size_t>(n) > max_output) {
        result.truncated = true;
        ::kill(*pid, SIGKILL);
        open_count = 0;
        break;
      }
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  for (pollfd& fd : fds) {
    if (fd.fd >= 0) ::close(fd.fd);
  }
  const int exit_code = wait_for(*pid);  // reaped in any case, so no zombie is left behind
  result.exit_code = result.truncated ? -1 : exit_code;
  return result;
}

Result<Conversation, std::string> Conversation::start(const std::vector<std::string>& argv) {
  Pipe in;
  Pipe out;
  if (!in.open() || !out.open()) return fail(str("cannot create a pipe: ", std::strerror(errno)));
  auto pid = spawn(argv, in.read, out.write, -1);
  close_fd(in.read);
  close_fd(out.write);
  if (!pid) {
    close_fd(in.write);
    close_fd(out.read);
    return fail(pid.error());
  }
  Conversation conversation;
  conversation.pid_ = *pid;
  conversation.to_child_ = in.write;
  conversation.from_child_ = out.read;
  return conversation;
}

Conversation::Conversation(Conversation&& other) noexcept
    : pid_(other.pid_), to_child_(other.to_child_), from_child_(other.from_child_), buffered_(std::move(other.buffered_)) {
  other.pid_ = -1;
  other.to_child_ = -1;
  other.from_child_ = -1;
}

Conversation::~Conversation() {
  close_fd(to_child_);  // end of input: the program finishes its last answer and exits
  close_fd(from_child_);
  if (pid_ > 0) wait_for(pid_);
}

bool Conversation::send(std::string_view text) {
  // A program that died must not kill us with SIGPIPE; the write then fails with EPIPE.
  struct sigaction ignore {};
  struct sigaction previous {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);
  bool ok = true;
  while (!text.empty()) {
    const ssize_t n = ::write(to_child_, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  ::sigaction(SIGPIPE, &previous, nullptr);
  return ok;
}

bool Conversation::fill() {
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(from_child_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffered_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }
}

std::optional<std::string> Conversation::read_line() {
  std::size_t newline = 0;
  while ((newline = buffered_.find('\n')) == std::string::npos) {
    if (!fill()) return std::nullopt;
  }
  std::string line = buffered_.substr(0, newline);
  buffered_.erase(0, newline + 1);
  return line;
}

std::optional<std::string> Conversation::read_bytes(std::size_t n) {
  while (buffered_.size() < n) {
    if (!fill()) return std::nullopt;
  }
  std::string bytes = buffered_.substr(0, n);
  buffered_.erase(0, n);
  return bytes;
}

}  // namespace capsule::detail
