// SPDX-License-Identifier: Apache-2.0
#include "completion_scripts.hpp"

#include <algorithm>

#include "capsule/assert.hpp"
#include "capsule/text.hpp"
#include "command_table.hpp"
#include "completion_common.hpp"

namespace capsule::cli {

bool is_shell_safe_name(std::string_view name) {
  if (name.empty() || name.size() > 128 || name.front() == '.' || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

std::string completion_script(Shell shell) {
  switch (shell) {
    case Shell::Bash: return completion::bash_script();
    case Shell::Zsh: return completion::zsh_script();
    case Shell::Fish: return completion::fish_script();
  }
  return {};
}

namespace completion {

std::string words(const std::vector<std::string>& list, std::string_view separator) {
  for (const std::string& word : list) {
    const std::string_view bare = std::string_view(word).substr(word.starts_with("--") ? 2 : word.starts_with("-") ? 1 : 0);
    CAPSULE_ASSERT(is_shell_safe_name(bare), "completion words are plain names");
  }
  return join(list, separator);
}

std::vector<const CommandSpec*> visible_commands() {
  std::vector<const CommandSpec*> commands;
  for (const CommandSpec& spec : command_table()) {
    if (!spec.hidden) commands.push_back(&spec);
  }
  return commands;
}

std::vector<std::string> command_names() {
  std::vector<std::string> names;
  for (const CommandSpec* spec : visible_commands()) names.emplace_back(spec->name);
  return names;
}

std::vector<std::string> spellings(const FlagSpec& flag) {
  std::vector<std::string> out{str("--", flag.name)};
  if (flag.short_name != 0) out.push_back(str("-", flag.short_name));
  return out;
}

std::string spelled(const std::vector<const FlagSpec*>& flags, std::string_view separator) {
  std::vector<std::string> all;
  for (const FlagSpec* f : flags) {
    for (std::string& spelling : spellings(*f)) all.push_back(std::move(spelling));
  }
  return words(all, separator);
}

std::vector<std::string> offered_flags(Command command) {
  std::vector<std::string> flags;
  for (const FlagSpec* f : all_flags(command)) {
    if (f->positional != 0) continue;
    for (std::string& spelling : spellings(*f)) flags.push_back(std::move(spelling));
  }
  return flags;
}

std::vector<std::string> leading_words() {
  std::vector<std::string> out = command_names();
  std::vector<const FlagSpec*> flags;
  for (const FlagSpec& f : global_flags()) flags.push_back(&f);
  flags.push_back(&version_flag());
  for (const FlagSpec* f : flags) {
    for (std::string& spelling : spellings(*f)) out.push_back(std::move(spelling));
  }
  return out;
}

std::vector<const FlagSpec*> valued_global_flags() {
  std::vector<const FlagSpec*> flags;
  for (const FlagSpec& f : global_flags()) {
    if (f.kind != ValueKind::None) flags.push_back(&f);
  }
  return flags;
}

std::vector<const FlagSpec*> lookup_flags() {
  std::vector<const FlagSpec*> flags;
  for (const FlagSpec& f : data_flags()) {
    CAPSULE_ASSERT(f.kind != ValueKind::None, "a data flag names a folder");
    flags.push_back(&f);
  }
  return flags;
}

std::string short_description(std::string_view help) {
  std::string_view clause = help;
  for (const std::string_view end : {", e.g. ", " (", "; ", ". "}) clause = clause.substr(0, clause.find(end));
  // `: ` ends the clause after a subject (`this build's evidence manifest: its test suites …`),
  // not after a short qualifier (`with --git: the directory …`).
  for (std::size_t colon = clause.find(": "); colon != std::string_view::npos; colon = clause.find(": ", colon + 1)) {
    if (std::count(clause.begin(), clause.begin() + static_cast<std::ptrdiff_t>(colon), ' ') >= 2) {
      clause = clause.substr(0, colon);
      break;
    }
  }
  while (!clause.empty() && (clause.back() == '.' || clause.back() == ' ')) clause.remove_suffix(1);
  if (clause.size() <= kDescriptionWidth) return std::string(clause);
  constexpr std::string_view kEllipsis = "...";
  // Cut only at a space, so a multi-byte character is never split.
  std::size_t space = clause.rfind(' ', kDescriptionWidth - kEllipsis.size());
  // A first word longer than the width: kept whole, and the rest cut after it.
  if (space == std::string_view::npos || space == 0) space = clause.find(' ');
  if (space == std::string_view::npos) return std::string(clause);
  std::string_view kept = clause.substr(0, space);
  while (!kept.empty() && (kept.back() == ',' || kept.back() == ':')) kept.remove_suffix(1);
  return str(kept, kEllipsis);
}

std::string_view list_kind(ValueKind kind) {
  switch (kind) {
    case ValueKind::Profile: return "profiles";
    case ValueKind::Op:
    case ValueKind::OpList: return "ops";
    case ValueKind::Example: return "examples";
    case ValueKind::RuleList: return "rules";
    default: return "";
  }
}

bool is_list(ValueKind kind) { return kind == ValueKind::OpList || kind == ValueKind::RuleList; }

const FlagSpec* positional_flag(Command command) {
  for (const FlagSpec& f : command_spec(command).flags) {
    if (f.positional != 0) return &f;
  }
  return nullptr;
}

namespace {

/// The `case $prev in … esac` completing the value of each flag in `flags` that takes one.
std::string value_cases(const std::vector<const FlagSpec*>& flags, const CaseDialect& dialect) {
  std::string out = "      case $prev in\n";
  for (const FlagSpec* f : flags) {
    if (f->kind == ValueKind::None || f->positional != 0) continue;
    out += str("        ", spelled({f}, "|"), ") ", dialect.value(*f), "; return ;;\n");
  }
  return out + "      esac\n";
}

}  // namespace

std::string command_dispatch(const CaseDialect& d) {
  const std::vector<const FlagSpec*> skipped = valued_global_flags();
  std::string out = str(
      "  local cmd= i word value\n"
      "  local -a data=()\n"
      "  # The command is the first word that is no flag; the data flags go to the name lookups.\n"
      "  for (( i = ", d.first, "; i < ", d.index, "; i++ )); do\n"
      "    word=${", d.words, "[i]}\n"
      "    case $word in\n"
      "      ", spelled(lookup_flags(), "|"), ")\n"
      "        if (( i + 1 < ", d.index, " )); then\n"
      "          value=${", d.words, "[i+1]}\n"
      "          # The words are as typed: a leading ~ is expanded here, as the shell would have.\n"
      "          [[ $value == \"~\" || $value == \"~/\"* ]] && value=$HOME${value:1}\n"
      "          data+=(\"$word\" \"$value\")\n"
      "        fi\n"
      "        (( i++ )) ;;\n");
  if (!skipped.empty()) out += str("      ", spelled(skipped, "|"), ") (( i++ )) ;;\n");
  out +=
      "      -*) ;;\n"
      "      *) [[ -z $cmd ]] && cmd=$word ;;\n"
      "    esac\n"
      "  done\n"
      "  case $cmd in\n"
      "    '')\n" +
      value_cases(skipped, d) + str("      ", d.offer(leading_words()), "\n      return ;;\n");
  for (const CommandSpec* spec : visible_commands()) {
    out += str("    ", spec->name, ")\n", value_cases(all_flags(spec->command), d));
    out += str("      if [[ $cur == -* ]]; then ", d.offer(offered_flags(spec->command)), "; return; fi\n");
    if (const FlagSpec* p = positional_flag(spec->command)) out += str("      ", d.value(*p), "\n");
    out += "      return ;;\n";
  }
  return out + "  esac\n";
}

}  // namespace completion
}  // namespace capsule::cli
