// SPDX-License-Identifier: Apache-2.0
// Loader entry points shared inside the engine only: a profile parse that also returns the
// partial result of a file with errors, so cross-file checks (unknown modules, ...) still run
// and one `capsule lint` reports every problem.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "capsule/load.hpp"

namespace capsule::detail {

/// `complete` is true when the profile had no error; the value is empty only for unreadable or
/// syntactically invalid files.
std::optional<Profile> parse_profile_partial(std::string_view text, const std::string& path, Diagnostics& out,
                                             bool& complete);
std::optional<Profile> load_profile_partial(const std::filesystem::path& file, const LoadOptions& options,
                                            Diagnostics& out, bool& complete);

}  // namespace capsule::detail
