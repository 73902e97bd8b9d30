// SPDX-License-Identifier: Apache-2.0
// The fingerprint as data: sorted unique entries, capped values and the digest the ledger and the
// reports compare. Host collection is in fingerprint_host.cpp; rendering in environment_report.cpp.
#include "capsule/fingerprint.hpp"

#include <algorithm>
#include <cstdlib>

#include "capsule/sha256.hpp"
#include "capsule/text.hpp"

namespace capsule {

namespace fingerprint_key {
std::string provider_library_digest(std::string_view provider) { return str("provider.", provider, ".sha256"); }
std::string provider_version(std::string_view provider) { return str("provider.", provider, ".version"); }
std::string provider_library_file(std::string_view provider) { return str("provider.", provider, ".library"); }
std::string environment_variable(std::string_view name) { return str("env.", name); }
}  // namespace fingerprint_key

namespace {

auto find_key(const std::vector<std::pair<std::string, std::string>>& entries, std::string_view key) {
  return std::lower_bound(entries.begin(), entries.end(), key,
                          [](const std::pair<std::string, std::string>& e, std::string_view k) { return e.first < k; });
}

}  // namespace

std::string capped_fingerprint_value(std::string value) {
  if (value.size() <= kMaxFingerprintValue) return value;
  const std::size_t dropped = value.size() - kMaxFingerprintValue;
  const std::string whole = sha256_hex(value);
  value.resize(kMaxFingerprintValue);
  return str(value, "... (", dropped, " more bytes; sha256 of the whole value ", whole, ")");
}

std::string EnvironmentFingerprint::get(std::string_view key) const {
  const auto it = find_key(entries, key);
  return it != entries.end() && it->first == key ? it->second : std::string();
}

void EnvironmentFingerprint::set(std::string key, std::string value) {
  value = capped_fingerprint_value(std::move(value));
  auto it = std::lower_bound(entries.begin(), entries.end(), key,
                             [](const std::pair<std::string, std::string>& e, const std::string& k) { return e.first < k; });
  if (it != entries.end() && it->first == key) {
    it->second = std::move(value);
    return;
  }
  entries.emplace(it, std::move(key), std::move(value));
}

std::string EnvironmentFingerprint::digest() const {
  std::string text;
  for (const auto& [key, value] : entries) text += str(key, "=", value.size(), ":", value, "\n");
  return sha256_hex(text);
}

void add_entries(EnvironmentFingerprint& fingerprint, const EnvironmentFingerprint& extra) {
  for (const auto& [key, value] : extra.entries) fingerprint.set(key, value);
}

std::optional<std::string> process_environment(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());  // NOLINT(concurrency-mt-unsafe): read-only use
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace capsule
