// SPDX-License-Identifier: Apache-2.0
// The environment fingerprint in reports: a text block, a JSON object and a Markdown table, each
// printed next to the sources. Keys and values go through their format's one escaping function,
// because values come from the environment (an exported OPENBLAS_CORETYPE can hold a newline or
// a GitHub workflow command).
#include "capsule/environment_report.hpp"

#include "capsule/escape.hpp"
#include "capsule/text.hpp"

namespace capsule {

std::string environment_block(const EnvironmentFingerprint& environment) {
  std::string out = str("environment: sha256 ", environment.digest());
  for (const auto& [key, value] : environment.entries) out += str("\n  ", text_escape(key), " ", text_escape(value));
  return out;
}

void write_environment_json(JsonWriter& json, const EnvironmentFingerprint& environment) {
  json.key("environment").begin_object().field("sha256", environment.digest()).key("entries").begin_object();
  for (const auto& [key, value] : environment.entries) json.field(key, value);
  json.end_object().end_object();
}

std::string environment_markdown(const EnvironmentFingerprint& environment) {
  std::string out = str("\n**Environment** (sha256 ", markdown_code(environment.digest(), MarkdownPlace::Inline),
                        ")\n\n| key | value |\n|---|---|\n");
  for (const auto& [key, value] : environment.entries) out += str("| ", markdown_cell(key), " | ", markdown_cell(value), " |\n");
  return out;
}

std::string environment_dot_comments(const EnvironmentFingerprint& environment) {
  std::string out = str("  // environment sha256 ", environment.digest(), "\n");
  for (const auto& [key, value] : environment.entries) out += str("  //   ", text_escape(key), " ", text_escape(value), "\n");
  return out;
}

}  // namespace capsule
