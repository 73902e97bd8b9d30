// SPDX-License-Identifier: Apache-2.0
// Writing a whole file so that nobody ever sees half of it, and never through a link.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace capsule {

/// Writes `contents` to `file` atomically: a private temporary in the same directory (mkstemp,
/// so never a name somebody prepared), flushed to disk, then renamed over `file`. A reader sees
/// the old file or the new one; a symlink at `file` is replaced, not followed; on any failure the
/// temporary is removed and `file` is untouched. Returns "" on success, else why it failed.
std::string write_file_atomically(const std::filesystem::path& file, std::string_view contents);

}  // namespace capsule
