// SPDX-License-Identifier: Apache-2.0
// Reviewed waivers of the trust diff (`--accept FILE`) and the verdict they leave: which weakened
// findings are accepted, which waivers expired or match nothing, and the exit status.
#include "capsule/diff.hpp"

#include <algorithm>
#include <map>

#include "capsule/text.hpp"
#include "diff_internal.hpp"
#include "toml_reader.hpp"

namespace capsule {
namespace {

using diff_internal::location_words;

/// `direction:scope:subject:aspect`, with a known direction and scope and non-empty parts.
std::string change_id_problem(std::string_view id) {
  const std::size_t first = id.find(':');
  if (first == std::string_view::npos) return "expected direction:scope:subject:aspect";
  if (!parse<Direction>(id.substr(0, first))) return "the direction must be weakened, strengthened or neutral";
  const std::size_t second = id.find(':', first + 1);
  if (second == std::string_view::npos) return "expected direction:scope:subject:aspect";
  if (!parse<ChangeScope>(id.substr(first + 1, second - first - 1))) {
    return "the scope must be module, capsule, profile or impact";
  }
  const std::size_t last = id.rfind(':');
  if (last == second || last == second + 1 || last + 1 == id.size()) return "the subject and the aspect must not be empty";
  return {};
}

}  // namespace

Result<std::vector<Waiver>, Diagnostics> parse_waivers(std::string_view text, const std::string& path) {
  Diagnostics diagnostics;
  auto root = detail::parse_toml(text, path, diagnostics);
  if (!root) return fail(std::move(diagnostics));
  detail::FileContext context(path, diagnostics);
  detail::Fields top(context, *root, "waivers file", {"schema", "waiver"});
  detail::check_schema(context, top);
  std::vector<Waiver> waivers;
  std::map<std::string, SourceLoc> seen;
  if (const toml::array* list = top.array("waiver")) {
    for (const toml::node& item : *list) {
      const toml::table* table = item.as_table();
      if (table == nullptr) {
        context.error(DiagCode::WrongType, context.at(item),
                      str("`waiver` entries must be tables ([[waiver]]), got ", detail::type_name(item)));
        continue;
      }
      detail::Fields fields(context, *table, "[[waiver]]", {"change", "accepted_by", "reason", "expires"});
      Waiver waiver;
      waiver.where = fields.where();
      bool ok = true;
      const auto required_text = [&](std::string_view key, std::string_view expectation, std::string& slot) {
        if (auto value = fields.string(key)) {
          slot = *value;
          if (value->empty()) {
            context.error(DiagCode::InvalidValue, context.at(*fields.node(key)), str("`", key, "` must not be empty"));
            ok = false;
          }
        } else {
          if (fields.node(key) == nullptr) fields.missing(key, expectation);
          ok = false;
        }
      };
      required_text("change", "the id of the accepted change, as printed by `capsule diff`", waiver.change);
      required_text("accepted_by", "who reviewed and accepted the change", waiver.accepted_by);
      required_text("reason", "why the change is acceptable", waiver.reason);
      if (auto expires = fields.date("expires")) {
        waiver.expires = *expires;
      } else {
        if (fields.node("expires") == nullptr) fields.missing("expires", "the last day the acceptance holds, e.g. 2027-06-30");
        ok = false;
      }
      if (const toml::node* change = fields.node("change"); change != nullptr && !waiver.change.empty()) {
        waiver.where = context.at(*change);
        const std::string problem = change_id_problem(waiver.change);
        if (!problem.empty()) {
          context.error(DiagCode::InvalidValue, waiver.where, str("malformed change id `", waiver.change, "`: ", problem),
                        "copy the id printed by `capsule diff`, e.g. weakened:capsule:reference.relu:value");
          ok = false;
        }
      }
      if (!ok) continue;
      if (auto [it, inserted] = seen.emplace(waiver.change, waiver.where); !inserted) {
        context.error(DiagCode::InvalidValue, waiver.where, str("duplicate waiver for change `", waiver.change, "`"), {},
                      {str("first waived at ", location_words(it->second))});
        continue;
      }
      waivers.push_back(std::move(waiver));
    }
  }
  if (has_errors(diagnostics)) return fail(std::move(diagnostics));
  return waivers;
}

Result<std::vector<Waiver>, Diagnostics> load_waivers(const std::filesystem::path& file) {
  Diagnostics diagnostics;
  auto parsed = detail::read_input(file.string(), diagnostics);
  if (!parsed) return fail(std::move(diagnostics));
  return parse_waivers(parsed->text, detail::input_name(file.string()));
}

void apply_waivers(TrustDiff& diff, std::span<const Waiver> waivers) {
  diff.expired_waivers.clear();
  diff.unused_waivers.clear();
  for (Change& change : diff.changes) change.waiver.reset();
  for (Impact& row : diff.impacts) {
    row.waiver.reset();
    row.covered_by_cause = false;
  }
  for (const Waiver& waiver : waivers) {
    if (waiver.expires < diff.today) {
      diff.expired_waivers.push_back(waiver);
      continue;
    }
    bool used = false;
    for (Change& change : diff.changes) {
      if (change.id == waiver.change) {
        change.waiver = waiver;
        used = true;
      }
    }
    for (Impact& row : diff.impacts) {
      if (row.id == waiver.change) {
        row.waiver = waiver;
        used = true;
      }
    }
    if (!used) diff.unused_waivers.push_back(waiver);
  }
  // See Note [Impact causes]: a row whose every cause is waived is covered by those waivers.
  for (Impact& row : diff.impacts) {
    if (row.waiver || row.caused_by.empty()) continue;
    const Waiver* cover = nullptr;
    bool all = true;
    for (const std::string& id : row.caused_by) {
      const auto found = std::find_if(diff.changes.begin(), diff.changes.end(),
                                      [&id](const Change& c) { return c.id == id; });
      if (found == diff.changes.end() || !found->waiver) all = false;
      else if (cover == nullptr) cover = &*found->waiver;
    }
    if (all && cover != nullptr) {
      row.waiver = *cover;
      row.covered_by_cause = true;
    }
  }
}

DiffCounts diff_counts(const TrustDiff& diff) {
  DiffCounts n;
  for (const Change& change : diff.changes) {
    switch (change.direction) {
      case Direction::Weakened:
        ++n.weakened;
        if (change.waiver) ++n.waived;
        else ++n.failing;
        break;
      case Direction::Strengthened: ++n.strengthened; break;
      case Direction::Neutral: ++n.neutral; break;
    }
  }
  for (const Impact& row : diff.impacts) {
    ++n.impacted;
    if (row.direction != Direction::Weakened) continue;
    ++n.impact_weakened;
    if (row.waiver) ++n.waived;
    else ++n.failing;
  }
  n.failing += diff.expired_waivers.size();
  return n;
}

int exit_status(const TrustDiff& diff) { return diff_counts(diff).failing == 0 ? 0 : 1; }

}  // namespace capsule
