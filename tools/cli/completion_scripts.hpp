// SPDX-License-Identifier: Apache-2.0
// `capsule completions bash|zsh|fish`: completion scripts generated from the command table. They
// complete commands, each command's flags, fixed flag values, and names from the loaded data
// by calling back `capsule completions --list KIND` with the command line's data flags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace capsule::cli {

enum class Shell : std::uint8_t { Bash, Zsh, Fish };

std::string completion_script(Shell shell);

/// A name `--list` may print: 1 to 128 characters of `[A-Za-z0-9_.-]`, not starting with `.`
/// or `-`. Catalogs are hostile and shells expand completion words (`compgen -W`), so a name
/// with any other character is left out, never quoted or guessed at.
bool is_shell_safe_name(std::string_view name);

}  // namespace capsule::cli
