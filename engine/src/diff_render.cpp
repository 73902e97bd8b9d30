// SPDX-License-Identifier: Apache-2.0
// The trust diff's three renderers: text for a terminal, markdown for a pull-request comment, JSON
// for tools. Every input-derived field (names, ids, paths, messages quoting them, reasons, owners,
// revision labels) goes through its format's escaping function (capsule/escape.hpp): text_escape,
// markdown_cell (table cells) / markdown_escape (prose) / markdown_code, or the JSON writer.
#include "capsule/diff.hpp"

#include "capsule/environment_report.hpp"
#include "capsule/escape.hpp"
#include "capsule/json.hpp"
#include "capsule/text.hpp"
#include "diff_internal.hpp"

namespace capsule {
namespace {

using diff_internal::location_words;

std::string summary_words(const DiffCounts& n) {
  return str(n.weakened, " weakened, ", n.strengthened, " strengthened, ", n.neutral, " neutral; ", n.impacted, " op",
             n.impacted == 1 ? "" : "s", " impacted (", n.impact_weakened, " weakened); ", n.waived, " waived");
}

/// `: 2 weakened findings not waived, 1 expired waiver`, or nothing when the run passes.
std::string failing_words(const TrustDiff& diff, const DiffCounts& n) {
  const std::size_t open = n.failing - diff.expired_waivers.size();
  std::vector<std::string> parts;
  if (open != 0) parts.push_back(str(open, " weakened finding", open == 1 ? "" : "s", " not waived"));
  if (!diff.expired_waivers.empty()) {
    parts.push_back(str(diff.expired_waivers.size(), " expired waiver", diff.expired_waivers.size() == 1 ? "" : "s"));
  }
  return parts.empty() ? std::string() : ": " + join(parts, ", ");
}

std::string waiver_words(const Waiver& w) {
  return str("waived by ", w.accepted_by, " until ", format_date(w.expires), ": ", w.reason);
}

/// A selection in words: the capsule, its trust, its value evidence with the suite or reason
/// behind it, any other evidence that differs from `other` (the row's other side: in kind, or for
/// the same capsule in name or reason too), and the gate. Everything that makes two selections
/// differ is shown, so before and after never read alike.
std::string selection_words(const Selection& s, const Selection& other) {
  if (!s.planned()) return "unplannable";
  std::string evidence;
  for (const Obligation o : all_values<Obligation>()) {
    const std::size_t i = static_cast<std::size_t>(o);
    const Evidence& mine = s.evidence[i];
    const Evidence& theirs = other.evidence[i];
    const bool same_capsule = other.planned() && other.capsule == s.capsule;
    const bool differs = !other.planned() || mine.kind != theirs.kind ||
                         (same_capsule && (mine.name != theirs.name || mine.reason != theirs.reason));
    if (o == Obligation::Value || differs) {
      evidence += str(", ", to_string(o), " ", diff_internal::evidence_words(s.evidence[i]));
    }
  }
  return str(s.capsule, " (", to_string(s.trust), evidence, ", gate ", s.accepted ? "accepted" : "rejected", ")");
}

/// A side's folder, or why it has none (that side was read as empty).
std::string folder_words(const std::string& folder, std::string_view kind) {
  return folder.empty() ? str("none (no ", kind, "/ folder: read as empty)") : folder;
}

std::string side_words(Side side) { return side == Side::Head ? "head" : "base"; }

std::string where_words(const SourceLoc& where, Side side) {
  const std::string place = location_words(where);
  if (place.empty()) return {};
  return str(place, " (", side_words(side), ")");
}

std::string markdown_what(const Change& c) {
  std::vector<MarkdownLine> lines{{c.message}};
  if (!c.before.empty() || !c.after.empty()) {
    lines.push_back({str(c.before.empty() ? "(none)" : c.before, " → ", c.after.empty() ? "(none)" : c.after)});
  }
  for (const std::string& note : c.notes) lines.push_back({"note: " + note});
  if (c.waiver) lines.push_back({waiver_words(*c.waiver), true});
  return markdown_cell(lines);
}

std::string markdown_change_table(const std::vector<const Change*>& changes) {
  std::string out = "| change | what | where |\n|---|---|---|\n";
  for (const Change* c : changes) {
    const std::string place = location_words(c->where);
    out += str("| ", markdown_code(c->id), " | ", markdown_what(*c), " | ",
               place.empty() ? std::string() : str(markdown_code(place), " (", side_words(c->side), ")"), " |\n");
  }
  return out;
}

void write_evidence_json(JsonWriter& json, ClaimKind claim, const Evidence& e) {
  json.begin_object().field("kind", to_string(e.kind));
  if (e.kind == EvidenceKind::TrustedBoundary) json.field("reason", e.reason);
  else if (e.kind != EvidenceKind::NotApplicable && e.kind != EvidenceKind::Missing) json.field("name", e.name);
  if (e.kind == EvidenceKind::Checker) json.field("coverage", to_string(e.coverage));
  json.field("disposition", to_string(evidence_disposition(claim, e)));
  json.end_object();
}

void write_where_json(JsonWriter& json, const SourceLoc& where, Side side) {
  json.key("where")
      .begin_object()
      .field("side", side_words(side))
      .field("file", where.file)
      .field("line", static_cast<std::int64_t>(where.line))
      .field("column", static_cast<std::int64_t>(where.column))
      .end_object();
}

void write_waiver_json(JsonWriter& json, const Waiver& w) {
  json.begin_object()
      .field("change", w.change)
      .field("accepted_by", w.accepted_by)
      .field("reason", w.reason)
      .field("expires", format_date(w.expires))
      .field("where", location_words(w.where))
      .end_object();
}

void write_selection_json(JsonWriter& json, const Selection& s) {
  json.begin_object().field("planned", s.planned());
  if (!s.planned()) {
    json.field("reason", s.unplannable).end_object();
    return;
  }
  json.field("capsule", s.capsule).field("module", s.module).field("trust", to_string(s.trust));
  json.key("evidence").begin_object();
  for (const Obligation o : all_values<Obligation>()) {
    json.key(to_string(o));
    write_evidence_json(json, s.claims[static_cast<std::size_t>(o)], s.evidence[static_cast<std::size_t>(o)]);
  }
  json.end_object();
  json.field("gate", s.accepted ? "accepted" : "rejected").string_array("gate_failures", s.gate_failures);
  json.end_object();
}

}  // namespace

std::string render_text(const TrustDiff& diff, const TextStyle& style) {
  const DiffCounts n = diff_counts(diff);
  const int status = n.failing == 0 ? 0 : 1;
  std::string out = str("trust diff ", text_escape(diff.base_label), " -> ", text_escape(diff.head_label), ": ",
                        diff.empty() ? std::string("no changes in meaning") : summary_words(n), "\n");
  out += str("result: ", status == 0 ? style.paint(Tone::Good, "passes") : style.paint(Tone::Bad, "fails"), " (exit ", status,
             ")", failing_words(diff, n), "\n");
  for (const auto& [side, folders] : {std::pair{"base", &diff.base_folders}, std::pair{"head", &diff.head_folders}}) {
    out += str(side, " read: catalogs ", text_escape(folder_words(folders->catalogs, "catalogs")), "; profiles ",
               text_escape(folder_words(folders->profiles, "profiles")), "\n");
  }
  for (const Direction direction : all_values<Direction>()) {
    bool header = false;
    for (const Change& c : diff.changes) {
      if (c.direction != direction) continue;
      if (!header) out += str("\n", to_string(direction), " changes:\n");
      header = true;
      out += str("  ", text_escape(c.id), "\n    ", text_escape(c.message), "\n");
      if (!c.before.empty() || !c.after.empty()) {
        out += str("    ", c.before.empty() ? "(none)" : text_escape(c.before), " -> ",
                   c.after.empty() ? "(none)" : text_escape(c.after), "\n");
      }
      for (const std::string& note : c.notes) out += str("    note: ", text_escape(note), "\n");
      if (c.waiver) out += str("    ", text_escape(waiver_words(*c.waiver)), "\n");
      if (const std::string where = where_words(c.where, c.side); !where.empty()) {
        out += str("    at ", text_escape(where), "\n");
      }
    }
  }
  if (!diff.impacts.empty()) out += "\nimpact on plans:\n";
  for (const Impact& row : diff.impacts) {
    out += str("  ", text_escape(row.id), "\n    ", to_string(row.op), " under ", text_escape(row.profile), ": ",
               text_escape(row.message), "\n");
    for (const std::string& failure : row.after.gate_failures) out += str("    gate: ", text_escape(failure), "\n");
    if (!row.caused_by.empty()) out += str("    caused by: ", text_escape(join(row.caused_by, ", ")), "\n");
    if (row.waiver) {
      out += str("    ", text_escape(waiver_words(*row.waiver)), row.covered_by_cause ? " (via its cause)" : "", "\n");
    }
  }
  if (!diff.expired_waivers.empty() || !diff.unused_waivers.empty()) out += "\nwaivers:\n";
  for (const Waiver& w : diff.expired_waivers) {
    out += str("  expired (fails): ", text_escape(w.change), " accepted by ", text_escape(w.accepted_by), ", expired ",
               format_date(w.expires), " at ", text_escape(location_words(w.where)), "\n");
  }
  for (const Waiver& w : diff.unused_waivers) {
    out += str("  unused: ", text_escape(w.change), " matches no change (", text_escape(location_words(w.where)), ")\n");
  }
  return out + "\n" + environment_block(diff.environment) + "\n";
}

std::string render_markdown(const TrustDiff& diff) {
  const DiffCounts n = diff_counts(diff);
  const int status = n.failing == 0 ? 0 : 1;
  std::string out = str("### Trust diff ", markdown_code(diff.base_label, MarkdownPlace::Inline), " → ",
                        markdown_code(diff.head_label, MarkdownPlace::Inline), "\n\n");
  const std::string result =
      status == 0 ? "**Result: passes** (exit 0)" : str("**Result: fails** (exit 1", failing_words(diff, n), ")");
  if (diff.empty()) {
    out += str("No changes in meaning. ", result, ".\n");
  } else {
    out += str(result, " · ", n.weakened, " weakened, ", n.strengthened, " strengthened, ", n.neutral,
               " neutral changes · ", n.impacted, " op", n.impacted == 1 ? "" : "s", " impacted (", n.impact_weakened,
               " weakened) · ", n.waived, " waived\n");
  }
  const auto folder_cell = [](const std::string& folder, std::string_view kind) {
    return folder.empty() ? markdown_escape(folder_words(folder, kind)) : markdown_code(folder, MarkdownPlace::Inline);
  };
  out += "\n";
  for (const auto& [side, folders] : {std::pair{"base", &diff.base_folders}, std::pair{"head", &diff.head_folders}}) {
    out += str("- ", side, " read catalogs ", folder_cell(folders->catalogs, "catalogs"), "; profiles ",
               folder_cell(folders->profiles, "profiles"), "\n");
  }
  std::vector<const Change*> by_direction[3];
  for (const Change& c : diff.changes) by_direction[static_cast<std::size_t>(c.direction)].push_back(&c);
  const std::vector<const Change*>& weakened = by_direction[static_cast<std::size_t>(Direction::Weakened)];
  const std::vector<const Change*>& strengthened = by_direction[static_cast<std::size_t>(Direction::Strengthened)];
  const std::vector<const Change*>& neutral = by_direction[static_cast<std::size_t>(Direction::Neutral)];
  if (!weakened.empty()) out += str("\n#### Weakened (", weakened.size(), ")\n\n", markdown_change_table(weakened));
  if (!strengthened.empty()) {
    out += str("\n#### Strengthened (", strengthened.size(), ")\n\n", markdown_change_table(strengthened));
  }
  if (!diff.impacts.empty()) {
    out += str("\n#### Impact on plans (", diff.impacts.size(), ")\n\n");
    out += "| profile | op | before | after | direction | change |\n|---|---|---|---|---|---|\n";
    for (const Impact& row : diff.impacts) {
      std::string direction(to_string(row.direction));
      if (row.direction == Direction::Weakened) direction = row.waiver ? "weakened (waived)" : "**weakened**";
      out += str("| ", markdown_code(row.profile), " | ", markdown_code(to_string(row.op)), " | ",
                 markdown_cell(selection_words(row.before, row.after)), " | ",
                 markdown_cell(selection_words(row.after, row.before)), " | ",
                 direction, " | ", markdown_code(row.id), " |\n");
    }
  }
  if (!neutral.empty()) {
    out += str("\n<details><summary>", neutral.size(), " neutral change", neutral.size() == 1 ? "" : "s",
               " (shown, not failing)</summary>\n\n", markdown_change_table(neutral), "\n</details>\n");
  }
  if (!diff.expired_waivers.empty() || !diff.unused_waivers.empty()) {
    out += "\n#### Waivers\n\n| waiver | state | accepted by | where |\n|---|---|---|---|\n";
    for (const Waiver& w : diff.expired_waivers) {
      out += str("| ", markdown_code(w.change), " | **expired ", format_date(w.expires), "** (fails) | ",
                 markdown_cell(w.accepted_by), " | ", markdown_code(location_words(w.where)), " |\n");
    }
    for (const Waiver& w : diff.unused_waivers) {
      out += str("| ", markdown_code(w.change), " | unused | ", markdown_cell(w.accepted_by), " | ",
                 markdown_code(location_words(w.where)), " |\n");
    }
  }
  // The cheapest fix, cargo-vet style: the exact entries a reviewer would add to accept what fails.
  std::vector<std::string> open;
  for (const Change* c : weakened) {
    if (!c->waiver) open.push_back(c->id);
  }
  for (const Impact& row : diff.impacts) {
    // A row with causes is covered once they are waived (Note [Impact causes]).
    if (row.direction == Direction::Weakened && !row.waiver && row.caused_by.empty()) open.push_back(row.id);
  }
  if (!open.empty()) {
    // The CI jobs read the waivers file from the BASE revision (so a change cannot waive
    // itself); a reviewer who adds the entries to the pull request's own tree sees nothing
    // change, so the order of the steps is spelled out where the entries are offered.
    out += "\n<details><summary>Accepting these changes after review</summary>\n\n"
           "Add to the waivers file passed with `--accept`. In CI (`.github/workflows/catalogs.yml`, the "
           "capsule action) that file (`.capsule/waivers.toml` by default) is read from the base revision: a waiver "
           "added by this pull request itself is ignored. Merge the waivers in a pull request of their "
           "own first, then rebase this one so the check runs again "
           "(docs/trust-diff.md#waivers).\n\n```toml\nschema = 1\n";
    for (const std::string& id : open) {
      out += str("\n[[waiver]]\nchange = ", toml_quoted(id), "\naccepted_by = \"\"\nreason = \"\"\nexpires = ",
                 format_date(Date{std::chrono::sys_days{diff.today} + std::chrono::days{90}}), "\n");
    }
    out += "```\n\n</details>\n";
  }
  return out + environment_markdown(diff.environment);
}

std::string render_json(const TrustDiff& diff) {
  const DiffCounts n = diff_counts(diff);
  JsonWriter json;
  json.begin_document().field("base", diff.base_label).field("head", diff.head_label).field("today", format_date(diff.today));
  json.key("summary")
      .begin_object()
      .field("weakened", static_cast<std::int64_t>(n.weakened))
      .field("strengthened", static_cast<std::int64_t>(n.strengthened))
      .field("neutral", static_cast<std::int64_t>(n.neutral))
      .field("impacted", static_cast<std::int64_t>(n.impacted))
      .field("impact_weakened", static_cast<std::int64_t>(n.impact_weakened))
      .field("waived", static_cast<std::int64_t>(n.waived))
      .field("failing", static_cast<std::int64_t>(n.failing))
      .field("exit_status", static_cast<std::int64_t>(n.failing == 0 ? 0 : 1))
      .end_object();
  json.key("folders").begin_object();
  for (const auto& [side, folders] : {std::pair{"base", &diff.base_folders}, std::pair{"head", &diff.head_folders}}) {
    // An empty string: that side has no such folder and was read as empty.
    json.key(side).begin_object().field("catalogs", folders->catalogs).field("profiles", folders->profiles).end_object();
  }
  json.end_object();
  write_environment_json(json, diff.environment);
  json.key("changes").begin_array();
  for (const Change& c : diff.changes) {
    json.begin_object()
        .field("id", c.id)
        .field("direction", to_string(c.direction))
        .field("scope", to_string(scope_of(c.kind)))
        .field("kind", to_string(c.kind))
        .field("subject", c.subject)
        .field("aspect", change_aspect(c));
    if (c.obligation) json.field("obligation", to_string(*c.obligation));
    json.field("before", c.before).field("after", c.after).field("message", c.message).string_array("notes", c.notes);
    write_where_json(json, c.where, c.side);
    if (c.waiver) {
      json.key("waiver");
      write_waiver_json(json, *c.waiver);
    }
    json.end_object();
  }
  json.end_array();
  json.key("impact").begin_array();
  for (const Impact& row : diff.impacts) {
    json.begin_object()
        .field("id", row.id)
        .field("direction", to_string(row.direction))
        .field("profile", row.profile)
        .field("op", to_string(row.op))
        .field("message", row.message);
    json.string_array("caused_by", row.caused_by);
    json.key("before");
    write_selection_json(json, row.before);
    json.key("after");
    write_selection_json(json, row.after);
    write_where_json(json, row.where, Side::Head);
    if (row.waiver) {
      json.field("waived_via_cause", row.covered_by_cause);
      json.key("waiver");
      write_waiver_json(json, *row.waiver);
    }
    json.end_object();
  }
  json.end_array();
  json.key("waivers").begin_object().key("expired").begin_array();
  for (const Waiver& w : diff.expired_waivers) write_waiver_json(json, w);
  json.end_array().key("unused").begin_array();
  for (const Waiver& w : diff.unused_waivers) write_waiver_json(json, w);
  json.end_array().end_object();
  json.end_object();
  return json.str() + "\n";
}

}  // namespace capsule
