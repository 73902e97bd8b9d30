// SPDX-License-Identifier: Apache-2.0
// The `capsule` command line (README.md#command-line) as a function, so tests drive it in-process with their
// own streams and the binary's main() stays a two-line shim.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "capsule/fingerprint.hpp"

namespace capsule::cli {

/// Exit statuses (README.md#command-line).
enum ExitCode : int { kOk = 0, kRejected = 1, kUsage = 2 };

struct Environment {
  /// Directory of the running binary; the installed layout keeps data in ../share/capsule.
  std::filesystem::path executable_dir;
  /// Where the default data root is looked for (data_dirs.hpp); empty = the process's working directory.
  std::filesystem::path working_dir;
  /// Current date override (YYYY-MM-DD) for trust expiry, from CAPSULE_TODAY; empty = clock.
  std::string today;
  /// Standard output is a terminal.
  bool terminal = false;
  /// Standard error is a terminal. With `terminal`, `capsule run` draws its progress bar on
  /// standard error instead of printing step lines in its report.
  bool error_terminal = false;
  /// NO_COLOR is set and not empty (no-color.org): `--color auto` then writes no colour.
  bool no_color = false;
  /// The environment fingerprint every report prints; unset = this build's and this process's
  /// (capsule::current_fingerprint()). Tests that compare goldens pass a fixed one.
  std::optional<EnvironmentFingerprint> fingerprint;
};

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const Environment& env);

}  // namespace capsule::cli
