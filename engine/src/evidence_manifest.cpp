// SPDX-License-Identifier: Apache-2.0
// Reading and writing the build's evidence manifest (see capsule/evidence_manifest.hpp).
#include "capsule/evidence_manifest.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "capsule/identifier.hpp"
#include "capsule/text.hpp"
#include "toml_reader.hpp"

namespace capsule {
namespace {

using detail::Fields;
using detail::FileContext;

constexpr std::string_view kTopKeys[] = {"schema", "test-suite", "fuzz-oracle", "shared-definition"};
constexpr std::string_view kSourceKeys[] = {"name", "covers"};
constexpr std::string_view kCoverKeys[] = {"obligation", "provider", "device", "ops"};

void read_covers(FileContext& context, const toml::array& covers, EvidenceSource& source) {
  for (const toml::node& item : covers) {
    const toml::table* table = item.as_table();
    if (table == nullptr) {
      context.error(DiagCode::WrongType, context.at(item),
                    str("`covers` entries must be tables {obligation, provider, device, ops}, got ",
                        detail::type_name(item)));
      continue;
    }
    Fields fields(context, *table, "covers", std::span<const std::string_view>(kCoverKeys));
    const auto obligation = fields.vocab<Obligation>("obligation");
    const auto provider = fields.vocab<Provider>("provider");
    const auto device = fields.vocab<Device>("device");
    const toml::array* ops = fields.array("ops");
    for (const std::string_view key : {"obligation", "provider", "device", "ops"}) {
      if (fields.node(key) == nullptr) fields.missing(key, "every `covers` entry names it");
    }
    if (ops == nullptr) continue;
    for (const toml::node& op_node : *ops) {
      const auto op = detail::vocab_value<Op>(context, op_node, "ops");
      if (op && obligation && provider && device) source.cases.push_back({*op, *provider, *device, *obligation});
    }
  }
}

void read_section(FileContext& context, const toml::node& node, EvidenceKind kind, std::string_view key,
                  EvidenceManifest& manifest) {
  const toml::array* list = node.as_array();
  if (list == nullptr) {
    context.error(DiagCode::WrongType, context.at(node),
                  str("`", key, "` must be an array of tables (`[[", key, "]]`), got ", detail::type_name(node)));
    return;
  }
  for (const toml::node& item : *list) {
    const toml::table* table = item.as_table();
    if (table == nullptr) {
      context.error(DiagCode::WrongType, context.at(item),
                    str("`", key, "` entries must be tables, got ", detail::type_name(item)));
      continue;
    }
    Fields fields(context, *table, std::string(key), std::span<const std::string_view>(kSourceKeys));
    EvidenceSource source;
    source.kind = kind;
    const auto name = fields.identifier("name", IdentifierKind::Label);
    if (!name) {
      if (fields.node("name") == nullptr) fields.missing("name", "every evidence source has a name");
      continue;
    }
    source.name = *name;
    if (const toml::array* covers = fields.array("covers")) read_covers(context, *covers, source);
    manifest.sources.push_back(std::move(source));
  }
}

std::string_view section_key(EvidenceKind kind) {
  for (const auto& [k, key] : kManifestSections) {
    if (k == kind) return key;
  }
  return "test-suite";
}

}  // namespace

bool EvidenceSource::covers(const CoverageCase& wanted) const {
  return std::binary_search(cases.begin(), cases.end(), wanted);
}

const EvidenceSource* EvidenceManifest::find(EvidenceKind kind, std::string_view name) const {
  const auto at = std::lower_bound(sources.begin(), sources.end(), std::make_pair(kind, name),
                                   [](const EvidenceSource& s, const std::pair<EvidenceKind, std::string_view>& key) {
                                     // Compared field by field: a tuple of string and string_view
                                     // references is not ordered under Clang's libstdc++.
                                     if (s.kind != key.first) return s.kind < key.first;
                                     return std::string_view(s.name) < key.second;
                                   });
  if (at == sources.end() || at->kind != kind || at->name != name) return nullptr;
  return &*at;
}

std::vector<std::string> EvidenceManifest::names(EvidenceKind kind) const {
  std::vector<std::string> out;
  for (const EvidenceSource& source : sources) {
    if (source.kind == kind) out.push_back(source.name);
  }
  return out;
}

void EvidenceManifest::normalise() {
  std::map<std::pair<EvidenceKind, std::string>, std::set<CoverageCase>> merged;
  for (EvidenceSource& source : sources) {
    auto& cases = merged[{source.kind, source.name}];
    cases.insert(source.cases.begin(), source.cases.end());
  }
  sources.clear();
  for (auto& [key, cases] : merged) {
    sources.push_back(EvidenceSource{key.first, key.second, std::vector<CoverageCase>(cases.begin(), cases.end())});
  }
}

Result<EvidenceManifest, Diagnostics> parse_evidence_manifest(std::string_view text, const std::string& path) {
  Diagnostics out;
  std::optional<toml::table> document = detail::parse_toml(text, path, out);
  if (!document) return fail(std::move(out));
  FileContext context(path, out);
  Fields top(context, *document, "manifest", std::span<const std::string_view>(kTopKeys));
  if (!detail::check_schema(context, top)) return fail(std::move(out));
  EvidenceManifest manifest;
  manifest.path = path;
  for (const auto& [kind, key] : kManifestSections) {
    if (const toml::node* node = top.node(key)) read_section(context, *node, kind, key, manifest);
  }
  if (context.failed()) return fail(std::move(out));
  manifest.normalise();
  return manifest;
}

Result<EvidenceManifest, Diagnostics> read_evidence_manifest(const std::filesystem::path& file) {
  Diagnostics out;
  const std::string path = file.string();
  std::optional<detail::ParsedFile> read = detail::read_file(path, out);
  if (!read) return fail(std::move(out));
  return parse_evidence_manifest(read->text, path);
}

std::string write_evidence_manifest(const EvidenceManifest& manifest) {
  EvidenceManifest sorted = manifest;
  sorted.normalise();
  std::string out =
      "# The evidence this build can show: every test suite of its test binaries, and the\n"
      "# (op, provider, device, obligation) cases each declares it exercises. Written by the build\n"
      "# for `capsule lint`; format in docs/decisions.md, \"Evidence names\".\n";
  out += str("schema = ", kEvidenceManifestSchema, "\n");
  for (const EvidenceSource& source : sorted.sources) {
    out += str("\n[[", section_key(source.kind), "]]\nname = ", toml_quoted(source.name), "\n");
    if (source.cases.empty()) continue;
    // One line per (obligation, provider, device), its ops in vocabulary order.
    std::map<std::tuple<Obligation, Provider, Device>, std::vector<Op>> groups;
    for (const CoverageCase& c : source.cases) groups[{c.obligation, c.provider, c.device}].push_back(c.op);
    out += "covers = [\n";
    for (const auto& [key, ops] : groups) {
      std::vector<std::string> names;
      for (const Op op : ops) names.push_back(toml_quoted(to_string(op)));
      out += str("  { obligation = ", toml_quoted(to_string(std::get<0>(key))), ", provider = ",
                 toml_quoted(to_string(std::get<1>(key))), ", device = ", toml_quoted(to_string(std::get<2>(key))),
                 ", ops = [", join(names, ", "), "] },\n");
    }
    out += "]\n";
  }
  return out;
}

std::string describe_coverage(const EvidenceSource& source) {
  if (source.cases.empty()) return "declares no cases";
  std::map<std::tuple<Obligation, Provider, Device>, std::size_t> groups;
  for (const CoverageCase& c : source.cases) ++groups[{c.obligation, c.provider, c.device}];
  std::vector<std::string> parts;
  for (const auto& [key, count] : groups) {
    parts.push_back(str(to_string(std::get<0>(key)), " of ", count, " op", count == 1 ? "" : "s", " on ",
                        to_string(std::get<1>(key)), "/", to_string(std::get<2>(key))));
  }
  return str("covers ", join(parts, "; "));
}

}  // namespace capsule
