// SPDX-License-Identifier: Apache-2.0
// `capsule-lint.toml`: a repository's allowed, denied and re-ranked lint rules (capsule/lint_config.hpp).
#include "capsule/lint_config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "capsule/lint_rule_ids.hpp"
#include "capsule/source_tree.hpp"
#include "capsule/text.hpp"
#include "toml_reader.hpp"

namespace capsule {
namespace fs = std::filesystem;
namespace {

constexpr std::array<std::pair<std::string_view, Severity>, 3> kSeverityNames{{
    {"error", Severity::Error}, {"warning", Severity::Warning}, {"note", Severity::Note}}};

/// The help of an unknown rule id: the nearest id, and where the rules are listed.
std::string unknown_rule_help(const std::string& nearest) {
  return nearest.empty() ? std::string("`capsule lint --help` lists the rules")
                         : str("did you mean `", nearest, "`? (`capsule lint --help` lists the rules)");
}

/// The strings of `allow` or `deny` (an array of rule ids) with their positions. Entries of
/// another type are wrong-type errors, held back in `wrong_types` so the caller reports each
/// list's problems together: its wrong types first, then its ids' problems in the list's order.
struct RuleListEntries {
  std::vector<std::string> ids;
  std::vector<SourceLoc> where;
  std::vector<std::pair<SourceLoc, std::string>> wrong_types;
};

RuleListEntries rule_list(detail::FileContext& context, detail::Fields& top, std::string_view key) {
  RuleListEntries entries;
  const toml::array* list = top.array(key);
  if (list == nullptr) return entries;
  for (const toml::node& item : *list) {
    if (const auto* text = item.as_string()) {
      entries.ids.push_back(text->get());
      entries.where.push_back(context.at(item));
    } else {
      entries.wrong_types.emplace_back(context.at(item),
                                       str("`", key, "` entries must be strings naming lint rules, got ",
                                           detail::type_name(item), " ", detail::render_for_message(item)));
    }
  }
  return entries;
}

bool has(const std::vector<DiagCode>& codes, DiagCode code) {
  return std::find(codes.begin(), codes.end(), code) != codes.end();
}

/// Closes a descriptor when it goes out of scope.
struct Descriptor {
  int fd = -1;
  explicit Descriptor(int value) : fd(value) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

Result<RuleOverrides, Diagnostics> refused(const fs::path& path, DiagCode code, std::string message, std::string help) {
  Diagnostics diagnostics;
  diagnostics.push_back(Diagnostic{Severity::Error, code, SourceLoc{path.string(), 0, 0}, std::move(message), {},
                                   std::move(help)});
  return fail(std::move(diagnostics));
}

Result<RuleOverrides, Diagnostics> not_regular(const fs::path& path) {
  return refused(path, DiagCode::NonRegularFile,
                 "the lint configuration is not a regular file (a symbolic link, a directory or a device); lint does "
                 "not follow it",
                 "replace it with a regular file, or remove it");
}

/// A discovered file, opened once without following a link; every check is made on what was
/// opened (fstat), so nothing can be swapped in between the check and the read.
Result<RuleOverrides, Diagnostics> read_discovered(const fs::path& path) {
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const Descriptor dir(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.fd < 0) {
    return refused(path, DiagCode::IoError,
                   str("cannot open the lint configuration's directory: ", std::strerror(errno)), {});
  }
  // Looked at before opening, so a device or a FIFO is never opened at all; the descriptor is
  // checked again after, which is what counts.
  const std::string name = path.filename().string();
  struct stat entry{};
  if (fstatat(dir.fd, name.c_str(), &entry, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(entry.st_mode)) {
    return not_regular(path);
  }
  // O_NONBLOCK: a FIFO swapped in after the look must not hang lint.
  const Descriptor file(detail::open_beneath(dir.fd, name, O_RDONLY | O_NOCTTY | O_NONBLOCK));
  if (file.fd < 0) {
    if (errno == ELOOP || errno == ENXIO) return not_regular(path);
    return refused(path, DiagCode::IoError, str("cannot open the lint configuration: ", std::strerror(errno)), {});
  }
  struct stat opened{};
  struct stat directory{};
  if (fstat(file.fd, &opened) != 0 || fstat(dir.fd, &directory) != 0) {
    return refused(path, DiagCode::IoError, str("cannot examine the lint configuration: ", std::strerror(errno)), {});
  }
  if (!S_ISREG(opened.st_mode)) return not_regular(path);
  const std::string distrusted =
      detail::trust_problem({opened.st_uid, opened.st_mode}, {directory.st_uid, directory.st_mode}, ::geteuid());
  if (!distrusted.empty()) {
    return refused(path, DiagCode::IoError,
                   str("lint does not read the lint configuration it found: ", distrusted,
                       ", so another user could have put it there"),
                   "if you trust the file, name it with --config FILE; otherwise remove it, or pass --no-config");
  }
  Diagnostics diagnostics;
  auto text = detail::read_descriptor(file.fd, path.string(), diagnostics);
  if (!text) return fail(std::move(diagnostics));
  return parse_lint_config(text->text, path.string());
}

}  // namespace

namespace detail {

std::string trust_problem(const Ownership& file, const Ownership& directory, std::uint32_t euid) {
  constexpr std::uint32_t kRoot = 0;
  constexpr std::uint32_t kOthersWrite = S_IWGRP | S_IWOTH;
  if (file.owner != euid && file.owner != kRoot) {
    return str("it belongs to user ", file.owner, ", neither you (user ", euid, ") nor root");
  }
  if (file.owner != euid && (file.mode & kOthersWrite) != 0) {
    return str("it belongs to root but users other than root may write it");
  }
  // Your own file is still refused when anyone may write it: any local user could rewrite it
  // between runs. Group write stays allowed there (a umask of 002 gives it).
  if ((file.mode & S_IWOTH) != 0) return str("every user may write it");
  if (directory.owner != euid && (directory.mode & kOthersWrite) != 0) {
    return str("its directory belongs to user ", directory.owner, ", not you (user ", euid,
               "), and users other than its owner may write it");
  }
  return {};
}

}  // namespace detail

Result<RuleOverrides, Diagnostics> parse_lint_config(std::string_view text, const std::string& path) {
  Diagnostics diagnostics;
  auto root = detail::parse_toml(text, path, diagnostics);
  if (!root) return fail(std::move(diagnostics));
  detail::FileContext context(path, diagnostics);
  detail::Fields top(context, *root, "lint configuration", {"schema", "allow", "deny", "severity"});
  detail::check_schema(context, top);

  // The same resolution as --deny/--allow (capsule/lint_rule_ids.hpp); this file words the
  // problems as diagnostics at each entry's position.
  const RuleListEntries deny = rule_list(context, top, "deny");
  const RuleListEntries allow = rule_list(context, top, "allow");
  ResolvedRuleIds resolved = resolve_rule_ids(deny.ids, allow.ids);
  for (const RuleList list : {RuleList::Deny, RuleList::Allow}) {
    const RuleListEntries& entries = list == RuleList::Deny ? deny : allow;
    const std::string_view key = list == RuleList::Deny ? "deny" : "allow";
    for (const auto& [where, message] : entries.wrong_types) context.error(DiagCode::WrongType, where, message);
    for (const RuleIdProblem& problem : resolved.problems) {
      if (problem.list != list) continue;
      const SourceLoc& where = entries.where[problem.index];
      switch (problem.kind) {
        case RuleIdProblem::Kind::Unknown:
          context.error(DiagCode::InvalidValue, where,
                        str("`", key, "` names an unknown lint rule `", clipped(problem.id), "`"),
                        unknown_rule_help(problem.suggestion));
          break;
        case RuleIdProblem::Kind::CannotBeAllowed:
          context.error(DiagCode::InvalidValue, where, str("`", key, "`: ", describe(problem)));
          break;
        case RuleIdProblem::Kind::DeniedAndAllowed:
        case RuleIdProblem::Kind::Repeated:
          context.error(DiagCode::InvalidValue, where, describe(problem));
          break;
      }
    }
  }
  RuleOverrides overrides = std::move(resolved.overrides);

  if (const toml::table* table = top.table("severity")) {
    for (const auto& [key, value] : *table) {
      const SourceLoc where = context.at(value);
      const std::string id(key.str());
      const LintRule* rule = find_lint_rule(std::string_view(id));
      if (rule == nullptr) {
        context.error(DiagCode::InvalidValue, where,
                      str("`severity` names an unknown lint rule `", clipped(id), "`"),
                      unknown_rule_help(nearest_rule_id(id, false)));
      }
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
                      str("rule `", id, "` cannot be made a ", named->first, ": ", kBlocksLoadingReason));
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
  if (discovered) return read_discovered(path);
  Diagnostics diagnostics;
  auto file = detail::read_file(path.string(), diagnostics);
  if (!file) return fail(std::move(diagnostics));
  return parse_lint_config(file->text, path.string());
}

Result<std::optional<fs::path>, Diagnostics> find_lint_config(const LintScope& scope,
                                                              const std::optional<fs::path>& work_tree_top) {
  const std::optional<fs::path> none;
  if (scope.catalog_dirs.empty()) return none;
  std::error_code error;
  fs::path catalogs = fs::absolute(scope.catalog_dirs.front(), error).lexically_normal();
  if (error) return none;
  if (!catalogs.has_filename()) catalogs = catalogs.parent_path();  // `catalogs/` names the directory itself
  fs::path dir = catalogs.parent_path();
  // The work tree is the one holding the catalogs. When the catalogs directory is itself its top,
  // the directory above lies outside every tree lint was asked about: nothing is looked for there.
  std::size_t levels_up = 0;  // how far the work tree's top lies above `dir`
  if (work_tree_top) {
    const fs::path below = dir.lexically_relative(*work_tree_top);
    if (below.empty() || *below.begin() == "..") return none;
    for (const fs::path& part : below) levels_up += part == "." ? 0U : 1U;
  } else if (fs::is_directory(catalogs, error) && detail::inside_repository(catalogs)) {
    // A repository git could not read: where its work tree ends is unknown, and the directory
    // above the catalogs may lie outside it. Searching anyway would be a silent fallback.
    Diagnostics diagnostics;
    diagnostics.push_back(Diagnostic{
        Severity::Error, DiagCode::IoError, SourceLoc{scope.catalog_dirs.front().string(), 0, 0},
        "the catalogs are in a git repository, but git could not name the top of its work tree (no `git` program, "
        "or git refused the repository), so lint cannot tell where to look for capsule-lint.toml",
        {},
        "let git read the repository (check `git config safe.directory`), or name the file with --config FILE, "
        "or pass --no-config"});
    return fail(std::move(diagnostics));
  }
  for (std::size_t level = 0;; ++level) {
    const fs::path candidate = dir / kLintConfigName;
    // symlink_status: a link is found here, and refused when read, never silently skipped; so is
    // a path that cannot be examined (permissions, a loop), which the read then reports.
    const fs::file_status status = fs::symlink_status(candidate, error);
    if ((error && error != std::errc::no_such_file_or_directory) || status.type() != fs::file_type::not_found) {
      return std::optional<fs::path>(candidate);
    }
    if (level == levels_up) return none;
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
