// SPDX-License-Identifier: Apache-2.0
// `capsule-lint.toml`: a repository's allowed, denied and re-ranked lint rules (capsule/lint_config.hpp).
#include "capsule/lint_config.hpp"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "capsule/source_tree.hpp"
#include "capsule/text.hpp"
#include "toml_reader.hpp"

namespace capsule {
namespace fs = std::filesystem;
namespace {

constexpr std::array<std::pair<std::string_view, Severity>, 3> kSeverityNames{{
    {"error", Severity::Error}, {"warning", Severity::Warning}, {"note", Severity::Note}}};

std::vector<std::string_view> rule_ids(bool with_warnings) {
  std::vector<std::string_view> ids;
  if (with_warnings) ids.push_back("warnings");
  for (const LintRule& rule : kLintRules) ids.push_back(to_string(rule.code));
  return ids;
}

/// The rule `id` names, or an invalid-value error at `where` with the nearest rule id.
const LintRule* known_rule(detail::FileContext& context, const SourceLoc& where, std::string_view key,
                           std::string_view id, bool warnings_allowed) {
  if (const LintRule* rule = find_lint_rule(id)) return rule;
  const std::string nearest = nearest_name(id, rule_ids(warnings_allowed));
  context.error(DiagCode::InvalidValue, where, str("`", key, "` names an unknown lint rule `", clipped(id), "`"),
                nearest.empty() ? std::string("`capsule lint --help` lists the rules")
                                : str("did you mean `", nearest, "`? (`capsule lint --help` lists the rules)"));
  return nullptr;
}

/// The strings of `allow` or `deny`: an array of rule ids.
std::vector<std::pair<std::string, SourceLoc>> rule_list(detail::FileContext& context, detail::Fields& top,
                                                          std::string_view key) {
  std::vector<std::pair<std::string, SourceLoc>> items;
  const toml::array* list = top.array(key);
  if (list == nullptr) return items;
  for (const toml::node& item : *list) {
    if (const auto* text = item.as_string()) {
      items.emplace_back(text->get(), context.at(item));
    } else {
      context.error(DiagCode::WrongType, context.at(item),
                    str("`", key, "` entries must be strings naming lint rules, got ", detail::type_name(item), " ",
                        detail::render_for_message(item)));
    }
  }
  return items;
}

bool has(const std::vector<DiagCode>& codes, DiagCode code) {
  return std::find(codes.begin(), codes.end(), code) != codes.end();
}

}  // namespace

Result<RuleOverrides, Diagnostics> parse_lint_config(std::string_view text, const std::string& path) {
  Diagnostics diagnostics;
  auto root = detail::parse_toml(text, path, diagnostics);
  if (!root) return fail(std::move(diagnostics));
  detail::FileContext context(path, diagnostics);
  detail::Fields top(context, *root, "lint configuration", {"schema", "allow", "deny", "severity"});
  detail::check_schema(context, top);
  RuleOverrides overrides;

  for (const auto& [id, where] : rule_list(context, top, "deny")) {
    if (id == "warnings") {
      overrides.deny_warnings = true;
    } else if (const LintRule* rule = known_rule(context, where, "deny", id, true)) {
      overrides.deny.push_back(rule->code);
    }
  }
  for (const auto& [id, where] : rule_list(context, top, "allow")) {
    const LintRule* rule = known_rule(context, where, "allow", id, false);
    if (rule == nullptr) continue;
    if (rule->blocks_loading) {
      context.error(DiagCode::InvalidValue, where,
                    str("`allow`: rule `", id, "` cannot be allowed: a file with that error does not load, so every "
                        "other command would still refuse it"));
    } else if (has(overrides.deny, rule->code)) {
      context.error(DiagCode::InvalidValue, where, str("rule `", id, "` is both denied and allowed"));
    } else {
      overrides.allow.push_back(rule->code);
    }
  }
  if (const toml::table* table = top.table("severity")) {
    for (const auto& [key, value] : *table) {
      const SourceLoc where = context.at(value);
      const std::string id(key.str());
      const LintRule* rule = known_rule(context, where, "severity", id, false);
      const auto* spelled = value.as_string();
      if (spelled == nullptr) {
        context.error(DiagCode::WrongType, where,
                      str("`severity.", clipped(id), "` must be a string: \"error\", \"warning\" or \"note\", got ",
                          detail::type_name(value), " ", detail::render_for_message(value)));
        continue;
      }
      const auto named = std::find_if(kSeverityNames.begin(), kSeverityNames.end(),
                                      [&](const auto& entry) { return entry.first == spelled->get(); });
      if (named == kSeverityNames.end()) {
        context.error(DiagCode::InvalidValue, where,
                      str("`severity.", clipped(id), "` is \"", clipped(spelled->get()),
                          "\"; expected \"error\", \"warning\" or \"note\""));
        continue;
      }
      if (rule == nullptr) continue;
      if (rule->blocks_loading && named->second != Severity::Error) {
        context.error(DiagCode::InvalidValue, where,
                      str("rule `", id, "` cannot be made a ", named->first,
                          ": a file with that error does not load, so every other command would still refuse it"));
      } else if (has(overrides.allow, rule->code) || has(overrides.deny, rule->code)) {
        context.error(DiagCode::InvalidValue, where,
                      str("rule `", id, "` is given a severity and is also ",
                          has(overrides.allow, rule->code) ? "allowed" : "denied", "; name it once"));
      } else {
        overrides.severity.emplace_back(rule->code, named->second);
      }
    }
  }
  if (context.failed()) return fail(std::move(diagnostics));
  return overrides;
}

Result<RuleOverrides, Diagnostics> read_lint_config(const fs::path& path, bool discovered) {
  Diagnostics diagnostics;
  std::error_code error;
  if (discovered && fs::symlink_status(path, error).type() != fs::file_type::regular) {
    diagnostics.push_back(Diagnostic{Severity::Error, DiagCode::NonRegularFile, SourceLoc{path.string(), 0, 0},
                                     "the lint configuration is not a regular file (a symbolic link, a directory or "
                                     "a device); lint does not follow it",
                                     {}, "replace it with a regular file, or remove it"});
    return fail(std::move(diagnostics));
  }
  auto file = detail::read_file(path.string(), diagnostics);
  if (!file) return fail(std::move(diagnostics));
  return parse_lint_config(file->text, path.string());
}

std::optional<fs::path> find_lint_config(const LintScope& scope) {
  if (scope.catalog_dirs.empty()) return std::nullopt;
  std::error_code error;
  fs::path catalogs = fs::absolute(scope.catalog_dirs.front(), error).lexically_normal();
  if (error) return std::nullopt;
  if (!catalogs.has_filename()) catalogs = catalogs.parent_path();  // `catalogs/` names the directory itself
  fs::path dir = catalogs.parent_path();
  // The work tree is the one holding the catalogs. When the catalogs directory is itself its top,
  // the directory above lies outside every tree lint was asked about: nothing is looked for there.
  const std::optional<fs::path> top = fs::is_directory(catalogs, error) ? detail::git_work_tree_top(catalogs)
                                                                          : std::nullopt;
  std::size_t levels_up = 0;  // how far the work tree's top lies above `dir`
  if (top) {
    const fs::path below = dir.lexically_relative(*top);
    if (below.empty() || *below.begin() == "..") return std::nullopt;
    for (const fs::path& part : below) levels_up += part == "." ? 0U : 1U;
  }
  for (std::size_t level = 0;; ++level) {
    const fs::path candidate = dir / kLintConfigName;
    // symlink_status: a link is found here, and refused when read, never silently skipped; so is
    // a path that cannot be examined (permissions, a loop), which the read then reports.
    const fs::file_status status = fs::symlink_status(candidate, error);
    if ((error && error != std::errc::no_such_file_or_directory) || status.type() != fs::file_type::not_found) {
      return candidate;
    }
    if (level == levels_up) return std::nullopt;
    dir = dir.parent_path();
  }
}

RuleOverrides merge_rule_overrides(RuleOverrides from_file, const RuleOverrides& from_command_line) {
  const auto drop = [](std::vector<DiagCode>& codes, DiagCode code) {
    codes.erase(std::remove(codes.begin(), codes.end(), code), codes.end());
  };
  const auto drop_severity = [&](DiagCode code) {
    std::erase_if(from_file.severity, [&](const auto& entry) { return entry.first == code; });
  };
  for (DiagCode code : from_command_line.deny) {
    drop(from_file.allow, code);
    drop_severity(code);
    if (!has(from_file.deny, code)) from_file.deny.push_back(code);
  }
  for (DiagCode code : from_command_line.allow) {
    drop(from_file.deny, code);
    drop_severity(code);
    if (!has(from_file.allow, code)) from_file.allow.push_back(code);
  }
  from_file.deny_warnings = from_file.deny_warnings || from_command_line.deny_warnings;
  return from_file;
}

}  // namespace capsule
