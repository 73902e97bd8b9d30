// SPDX-License-Identifier: Apache-2.0
// The environment fingerprint (capsule/fingerprint.hpp) as a block of every report format. Each
// report that prints its sources prints one of these next to them (docs/fingerprint.md).
#pragma once

#include <string>

#include "capsule/fingerprint.hpp"
#include "capsule/json.hpp"

namespace capsule {

/// `environment: sha256 {digest}` followed by one `  {key} {value}` line per entry, both
/// text_escape'd (a value holding a newline or `::error::` stays inside its line). No final newline.
std::string environment_block(const EnvironmentFingerprint& environment);
/// Writes `"environment": {"sha256": digest, "entries": {key: value, ...}}` into an open JSON object.
void write_environment_json(JsonWriter& json, const EnvironmentFingerprint& environment);
/// A bold `Environment` heading with the digest, then a `| key | value |` table whose cells go
/// through markdown_cell. Starts with a blank line, ends with a newline.
std::string environment_markdown(const EnvironmentFingerprint& environment);
/// The fingerprint as Graphviz `//` comment lines (text_escape'd, so no value ends its comment).
std::string environment_dot_comments(const EnvironmentFingerprint& environment);

}  // namespace capsule
