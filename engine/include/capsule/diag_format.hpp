// SPDX-License-Identifier: Apache-2.0
// Renderings of a diagnostic list for people and machines: GCC-style text, JSON, SARIF 2.1.0
// (code-scanning views) and GitHub workflow-command annotations.
#pragma once

#include <string>

#include "capsule/diag.hpp"

namespace capsule {

/// `capsule lint --format` values.
enum class DiagFormat : std::uint8_t { Text, Json, Sarif, Github };

/// Renders `diagnostics`: GCC-style text; JSON `{"diagnostics": [...], "errors", "warnings"}`;
/// one SARIF 2.1.0 run with a rule per code used; or `::error file=…,line=…,col=…::` commands.
std::string format_diagnostics(const Diagnostics& diagnostics, DiagFormat format, const std::string& tool_version);

}  // namespace capsule
