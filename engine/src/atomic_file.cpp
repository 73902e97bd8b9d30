// SPDX-License-Identifier: Apache-2.0
#include "capsule/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "capsule/text.hpp"

namespace capsule {

std::string write_file_atomically(const std::filesystem::path& file, std::string_view contents) {
  if (!file.has_filename()) return "expected a file name, got a directory path";
  const std::filesystem::path dir = file.parent_path().empty() ? std::filesystem::path(".") : file.parent_path();
  std::string temporary = (dir / ("." + file.filename().string() + ".XXXXXX")).string();
  const int fd = mkstemp(temporary.data());
  if (fd < 0) return str("cannot create a temporary file in `", dir.string(), "`: ", std::strerror(errno));
  const auto fail = [&](const char* what) {
    const std::string reason = str(what, ": ", std::strerror(errno));
    ::close(fd);
    ::unlink(temporary.c_str());
    return reason;
  };
  std::size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write failed");
    written += static_cast<std::size_t>(n);
  }
  // mkstemp creates 0600; a written report is as readable as any file the user creates.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, static_cast<mode_t>(0666 & ~mask)) != 0) return fail("cannot set permissions");
  if (::fsync(fd) != 0) return fail("cannot flush to disk");
  if (::close(fd) != 0) {
    const std::string reason = str("close failed: ", std::strerror(errno));
    ::unlink(temporary.c_str());
    return reason;
  }
  if (::rename(temporary.c_str(), file.c_str()) != 0) {
    const std::string reason = str("cannot replace `", file.string(), "`: ", std::strerror(errno));
    ::unlink(temporary.c_str());
    return reason;
  }
  return {};
}

}  // namespace capsule
