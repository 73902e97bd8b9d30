// SPDX-License-Identifier: Apache-2.0
// Reading, writing and merging evidence ledgers (see capsule/evidence_ledger.hpp). A ledger can
// come from another machine or a pull request, so every field is checked: names are evidence
// identifiers, vocabulary is spelled as in the catalogs, free text (test case names, files,
// expressions, fingerprint values) is length-capped here and escaped wherever it is printed.
#include "capsule/evidence_ledger.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "capsule/identifier.hpp"
#include "capsule/json.hpp"
#include "capsule/json_reader.hpp"
#include "capsule/sha256.hpp"
#include "capsule/text.hpp"
#include "toml_reader.hpp"

namespace capsule {
namespace {

/// Caps on free text and counts, so a hostile ledger cannot make reports unbounded.
constexpr std::size_t kMaxFreeText = 512;
constexpr std::size_t kMaxFingerprintEntries = 256;
constexpr std::size_t kMaxFingerprintKey = 128;
constexpr std::size_t kMaxFingerprintValue = 1024;

constexpr std::string_view kTopKeys[] = {"format", "schema", "runs", "entries"};
constexpr std::string_view kRunKeys[] = {"id", "finished", "fingerprint"};
constexpr std::string_view kEntryKeys[] = {"run", "kind", "source", "op", "provider", "device", "obligation",
                                           "outcome", "checks", "failed_checks", "failures"};
constexpr std::string_view kFailureKeys[] = {"test_case", "file", "line", "check"};

std::string_view json_type_name(const JsonValue& value) {
  switch (value.kind()) {
    case JsonValue::Kind::Null: return "null";
    case JsonValue::Kind::Bool: return "a boolean";
    case JsonValue::Kind::Number: return "a number";
    case JsonValue::Kind::String: return "a string";
    case JsonValue::Kind::Array: return "an array";
    case JsonValue::Kind::Object: return "an object";
  }
  return "a value";
}

/// Collects diagnostics for one ledger file, each at the position of the value concerned.
class LedgerReader {
 public:
  LedgerReader(std::string path, Diagnostics& out) : path_(std::move(path)), out_(out) {}

  bool failed() const { return failed_; }

  void error(DiagCode code, const JsonValue& at, std::string message, std::string help = {}) {
    failed_ = true;
    out_.push_back(Diagnostic{Severity::Error, code, SourceLoc{path_, at.line, at.column}, std::move(message), {},
                              std::move(help)});
  }

  /// Reports members of `object` outside `keys` (unknown-key, with the nearest known key).
  void check_keys(const JsonValue& object, std::span<const std::string_view> keys, std::string_view what) {
    for (const auto& [key, value] : object.as_object()) {
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      const std::string nearest = nearest_name(key, std::vector<std::string_view>(keys.begin(), keys.end()));
      error(DiagCode::UnknownKey, value, str("unknown key `", clipped(key), "` in ", what),
            nearest.empty() ? std::string() : str("did you mean `", nearest, "`?"));
    }
  }

  /// The member `key` of `object` when it has kind `kind`; reports a missing or mistyped member.
  const JsonValue* member(const JsonValue& object, std::string_view key, JsonValue::Kind kind, std::string_view what,
                          std::string_view expected) {
    const JsonValue* value = object.find(key);
    if (value == nullptr) {
      error(DiagCode::MissingField, object, str(what, " has no `", key, "` (expected ", expected, ")"));
      return nullptr;
    }
    if (value->kind() != kind) {
      error(DiagCode::WrongType, *value, str("`", key, "` of ", what, " must be ", expected, ", got ",
                                             json_type_name(*value)));
      return nullptr;
    }
    return value;
  }

  std::optional<std::string> text(const JsonValue& object, std::string_view key, std::string_view what,
                                  std::size_t max_bytes = kMaxFreeText) {
    const JsonValue* value = member(object, key, JsonValue::Kind::String, what, "a string");
    if (value == nullptr) return std::nullopt;
    if (value->as_string().size() > max_bytes) {
      error(DiagCode::InvalidValue, *value, str("`", key, "` of ", what, " is ", value->as_string().size(),
                                                " bytes long; at most ", max_bytes, " are allowed"));
      return std::nullopt;
    }
    return value->as_string();
  }

  std::optional<std::string> name(const JsonValue& object, std::string_view key, std::string_view what) {
    const JsonValue* value = member(object, key, JsonValue::Kind::String, what, "an evidence name");
    if (value == nullptr) return std::nullopt;
    if (auto problem = identifier_problem(value->as_string(), IdentifierKind::Label)) {
      error(DiagCode::InvalidIdentifier, *value, str("`", key, "` of ", what, ": ", *problem),
            std::string(identifier_rule(IdentifierKind::Label)));
      return std::nullopt;
    }
    return value->as_string();
  }

  template <class E>
  std::optional<E> spelling(const JsonValue& object, std::string_view key, std::string_view what) {
    const JsonValue* value = member(object, key, JsonValue::Kind::String, what, "a string");
    if (value == nullptr) return std::nullopt;
    auto parsed = parse<E>(value->as_string());
    if (!parsed) {
      error(DiagCode::UnknownSpelling, *value, str("`", key, "` of ", what, ": ", parsed.error().message),
            parsed.error().help());
      return std::nullopt;
    }
    return *parsed;
  }

  std::optional<std::int64_t> count(const JsonValue& object, std::string_view key, std::string_view what) {
    const JsonValue* value = member(object, key, JsonValue::Kind::Number, what, "a non-negative integer");
    if (value == nullptr) return std::nullopt;
    if (!value->is_integer() || value->as_int() < 0) {
      error(DiagCode::InvalidValue, *value, str("`", key, "` of ", what, " must be a non-negative integer"));
      return std::nullopt;
    }
    return value->as_int();
  }

 private:
  std::string path_;
  Diagnostics& out_;
  bool failed_ = false;
};

bool is_utc_timestamp(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SSZ, digits where digits belong.
  if (text.size() != 20) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char want = "0000-00-00T00:00:00Z"[i];
    if (want == '0' ? (c < '0' || c > '9') : c != want) return false;
  }
  return true;
}

bool is_hex_digest(std::string_view text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_fingerprint_key(std::string_view key) {
  if (key.empty() || key.size() > kMaxFingerprintKey) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

std::optional<LedgerRun> read_run(LedgerReader& reader, const JsonValue& item) {
  if (!item.is_object()) {
    reader.error(DiagCode::WrongType, item, str("`runs` entries must be objects, got ", json_type_name(item)));
    return std::nullopt;
  }
  reader.check_keys(item, kRunKeys, "a run");
  LedgerRun run;
  bool ok = true;
  if (auto id = reader.text(item, "id", "a run")) {
    if (!is_hex_digest(*id)) {
      reader.error(DiagCode::InvalidValue, *item.find("id"), "a run's `id` must be 64 lower-case hex digits");
      ok = false;
    }
    run.id = *id;
  } else {
    ok = false;
  }
  if (auto finished = reader.text(item, "finished", "a run")) {
    if (!is_utc_timestamp(*finished)) {
      reader.error(DiagCode::InvalidValue, *item.find("finished"),
                   "a run's `finished` must be a UTC time written YYYY-MM-DDTHH:MM:SSZ");
      ok = false;
    }
    run.finished = *finished;
  } else {
    ok = false;
  }
  if (const JsonValue* fp = reader.member(item, "fingerprint", JsonValue::Kind::Object, "a run", "an object")) {
    if (fp->as_object().size() > kMaxFingerprintEntries) {
      reader.error(DiagCode::InvalidValue, *fp, str("a run's fingerprint has ", fp->as_object().size(),
                                                    " entries; at most ", kMaxFingerprintEntries, " are allowed"));
      ok = false;
    }
    for (const auto& [key, value] : fp->as_object()) {
      if (!is_fingerprint_key(key)) {
        reader.error(DiagCode::InvalidValue, value,
                     "fingerprint keys are 1-128 ASCII letters, digits, `.`, `_` or `-`");
        ok = false;
      } else if (!value.is_string() || value.as_string().size() > kMaxFingerprintValue) {
        reader.error(DiagCode::WrongType, value,
                     str("fingerprint entry `", key, "` must be a string of at most ", kMaxFingerprintValue, " bytes"));
        ok = false;
      } else {
        run.fingerprint.set(key, value.as_string());
      }
    }
  } else {
    ok = false;
  }
  if (!ok) return std::nullopt;
  return run;
}

std::optional<LedgerFailure> read_failure(LedgerReader& reader, const JsonValue& item) {
  if (!item.is_object()) {
    reader.error(DiagCode::WrongType, item, str("`failures` entries must be objects, got ", json_type_name(item)));
    return std::nullopt;
  }
  reader.check_keys(item, kFailureKeys, "a failure");
  auto test_case = reader.text(item, "test_case", "a failure");
  auto file = reader.text(item, "file", "a failure");
  auto line = reader.count(item, "line", "a failure");
  auto check = reader.text(item, "check", "a failure");
  if (!test_case || !file || !line || !check) return std::nullopt;
  return LedgerFailure{*test_case, *file, *line, *check};
}

std::optional<LedgerEntry> read_entry(LedgerReader& reader, const JsonValue& item,
                                      const std::map<std::string, std::size_t>& run_index) {
  if (!item.is_object()) {
    reader.error(DiagCode::WrongType, item, str("`entries` members must be objects, got ", json_type_name(item)));
    return std::nullopt;
  }
  reader.check_keys(item, kEntryKeys, "an entry");
  LedgerEntry entry;
  bool ok = true;
  if (auto run = reader.text(item, "run", "an entry")) {
    const auto found = run_index.find(*run);
    if (found == run_index.end()) {
      reader.error(DiagCode::InvalidValue, *item.find("run"), "an entry's `run` names no run of this ledger");
      ok = false;
    } else {
      entry.run = found->second;
    }
  } else {
    ok = false;
  }
  const auto kind = reader.spelling<EvidenceKind>(item, "kind", "an entry");
  if (kind && *kind != EvidenceKind::TestSuite && *kind != EvidenceKind::FuzzOracle &&
      *kind != EvidenceKind::SharedDefinition) {
    reader.error(DiagCode::InvalidValue, *item.find("kind"),
                 str("ledger entries record test-suite, fuzz-oracle or shared-definition evidence, not ",
                     to_string(*kind)));
    ok = false;
  }
  const auto source = reader.name(item, "source", "an entry");
  const auto op = reader.spelling<Op>(item, "op", "an entry");
  const auto provider = reader.spelling<Provider>(item, "provider", "an entry");
  const auto device = reader.spelling<Device>(item, "device", "an entry");
  const auto obligation = reader.spelling<Obligation>(item, "obligation", "an entry");
  std::optional<bool> passed;
  if (const JsonValue* outcome = reader.member(item, "outcome", JsonValue::Kind::String, "an entry",
                                               "\"passed\" or \"failed\"")) {
    if (outcome->as_string() == "passed") passed = true;
    else if (outcome->as_string() == "failed") passed = false;
    else reader.error(DiagCode::InvalidValue, *outcome, "an entry's `outcome` must be \"passed\" or \"failed\"");
  }
  const auto checks = reader.count(item, "checks", "an entry");
  const auto failed_checks = reader.count(item, "failed_checks", "an entry");
  if (const JsonValue* failures = reader.member(item, "failures", JsonValue::Kind::Array, "an entry", "an array")) {
    if (failures->as_array().size() > kMaxLedgerFailures) {
      reader.error(DiagCode::InvalidValue, *failures,
                   str("an entry keeps at most ", kMaxLedgerFailures, " failures, this one has ",
                       failures->as_array().size()));
      ok = false;
    }
    for (const JsonValue& f : failures->as_array()) {
      if (auto failure = read_failure(reader, f)) entry.failures.push_back(std::move(*failure));
      else ok = false;
    }
  } else {
    ok = false;
  }
  if (!ok || !kind || !source || !op || !provider || !device || !obligation || !passed || !checks || !failed_checks) {
    return std::nullopt;
  }
  // The outcome must follow from the counts, so an edited ledger cannot say "passed" over failures.
  const bool consistent = *failed_checks <= *checks && (*passed ? (*checks > 0 && *failed_checks == 0 &&
                                                                   entry.failures.empty())
                                                                : (*failed_checks > 0 || *checks == 0));
  if (!consistent) {
    reader.error(DiagCode::InvalidValue, item,
                 str("entry for ", *source, " on ", to_string(*op), " says ", *passed ? "passed" : "failed", " with ",
                     *checks, " checks and ", *failed_checks, " failed; an entry passes exactly when it has checks "
                     "and none failed"));
    return std::nullopt;
  }
  entry.kind = *kind;
  entry.source = *source;
  entry.covers = CoverageCase{*op, *provider, *device, *obligation};
  entry.passed = *passed;
  entry.checks = *checks;
  entry.failed_checks = *failed_checks;
  return entry;
}

/// Entries are identified by run and case; the sort order of the written file. The views point
/// into `ledger`: use it only while the ledger is not modified.
auto entry_key(const EvidenceLedger& ledger, const LedgerEntry& e) {
  return std::make_tuple(std::string_view(ledger.runs[e.run].id), e.kind, std::string_view(e.source), e.covers);
}

/// The same identity with its own strings, for sets kept while entries are added.
using OwnedEntryKey = std::tuple<std::string, EvidenceKind, std::string, CoverageCase>;
OwnedEntryKey owned_entry_key(const EvidenceLedger& ledger, const LedgerEntry& e) {
  return {ledger.runs[e.run].id, e.kind, e.source, e.covers};
}

bool same_result(const LedgerEntry& a, const LedgerEntry& b) {
  const auto failure_tuple = [](const LedgerFailure& f) { return std::tie(f.test_case, f.file, f.line, f.check); };
  return a.passed == b.passed && a.checks == b.checks && a.failed_checks == b.failed_checks &&
         std::equal(a.failures.begin(), a.failures.end(), b.failures.begin(), b.failures.end(),
                    [&](const LedgerFailure& x, const LedgerFailure& y) { return failure_tuple(x) == failure_tuple(y); });
}

}  // namespace

Result<bool, std::string> EvidenceLedger::merge(const EvidenceLedger& other) {
  std::map<std::string, std::size_t> run_index;
  for (std::size_t i = 0; i < runs.size(); ++i) run_index.emplace(runs[i].id, i);
  std::vector<std::size_t> remap(other.runs.size());
  for (std::size_t i = 0; i < other.runs.size(); ++i) {
    const LedgerRun& run = other.runs[i];
    const auto found = run_index.find(run.id);
    if (found != run_index.end()) {
      if (runs[found->second].fingerprint.entries != run.fingerprint.entries ||
          runs[found->second].finished != run.finished) {
        return fail(str("run ", run.id.substr(0, 12), " appears twice with different fingerprints or times"));
      }
      remap[i] = found->second;
    } else {
      remap[i] = runs.size();
      run_index.emplace(run.id, runs.size());
      runs.push_back(run);
    }
  }
  std::map<OwnedEntryKey, std::size_t> present;
  for (std::size_t i = 0; i < entries.size(); ++i) present.emplace(owned_entry_key(*this, entries[i]), i);
  std::vector<LedgerEntry> added;
  for (const LedgerEntry& entry : other.entries) {
    LedgerEntry copy = entry;
    copy.run = remap[entry.run];
    const auto found = present.find(owned_entry_key(*this, copy));
    if (found != present.end()) {
      if (!same_result(entries[found->second], copy)) {
        return fail(str("entry for ", copy.source, " on ", to_string(copy.covers.op), "/",
                        to_string(copy.covers.provider), "/", to_string(copy.covers.device), " ",
                        to_string(copy.covers.obligation), " in run ", runs[copy.run].id.substr(0, 12),
                        " appears twice with different results"));
      }
      continue;
    }
    added.push_back(std::move(copy));
  }
  for (LedgerEntry& entry : added) entries.push_back(std::move(entry));
  paths.insert(paths.end(), other.paths.begin(), other.paths.end());
  return true;
}

Result<EvidenceLedger, Diagnostics> parse_evidence_ledger(std::string_view text, const std::string& path) {
  Diagnostics out;
  auto parsed = parse_json(text);
  if (!parsed) {
    out.push_back(Diagnostic{Severity::Error, DiagCode::ParseError,
                             SourceLoc{path, parsed.error().line, parsed.error().column},
                             str("not a valid JSON evidence ledger: ", parsed.error().message), {}, {}});
    return fail(std::move(out));
  }
  const JsonValue& top = *parsed;
  LedgerReader reader(path, out);
  if (!top.is_object()) {
    reader.error(DiagCode::WrongType, top, str("an evidence ledger is a JSON object, got ", json_type_name(top)));
    return fail(std::move(out));
  }
  const JsonValue* format = top.find("format");
  if (format == nullptr || !format->is_string() || format->as_string() != kEvidenceLedgerFormat) {
    reader.error(DiagCode::UnsupportedSchema, format != nullptr ? *format : top,
                 str("not an evidence ledger: expected \"format\": \"", kEvidenceLedgerFormat, "\""));
    return fail(std::move(out));
  }
  const JsonValue* schema = top.find("schema");
  if (schema == nullptr || !schema->is_integer() || schema->as_int() != kEvidenceLedgerSchema) {
    reader.error(DiagCode::UnsupportedSchema, schema != nullptr ? *schema : top,
                 str("this build reads evidence ledgers of schema ", kEvidenceLedgerSchema));
    return fail(std::move(out));
  }
  reader.check_keys(top, kTopKeys, "the ledger");
  EvidenceLedger ledger;
  ledger.paths.push_back(path);
  std::map<std::string, std::size_t> run_index;
  if (const JsonValue* runs = reader.member(top, "runs", JsonValue::Kind::Array, "the ledger", "an array")) {
    for (const JsonValue& item : runs->as_array()) {
      std::optional<LedgerRun> run = read_run(reader, item);
      if (!run) continue;
      if (!run_index.emplace(run->id, ledger.runs.size()).second) {
        reader.error(DiagCode::InvalidValue, item, str("run ", run->id.substr(0, 12), " is listed twice"));
        continue;
      }
      ledger.runs.push_back(std::move(*run));
    }
  }
  if (const JsonValue* entries = reader.member(top, "entries", JsonValue::Kind::Array, "the ledger", "an array")) {
    std::set<OwnedEntryKey> seen;
    for (const JsonValue& item : entries->as_array()) {
      std::optional<LedgerEntry> entry = read_entry(reader, item, run_index);
      if (!entry) continue;
      ledger.entries.push_back(std::move(*entry));
      if (!seen.insert(owned_entry_key(ledger, ledger.entries.back())).second) {
        reader.error(DiagCode::InvalidValue, item, "the same run records this entry twice");
      }
    }
  }
  if (reader.failed()) return fail(std::move(out));
  return ledger;
}

Result<EvidenceLedger, Diagnostics> read_evidence_ledgers(std::span<const std::filesystem::path> files) {
  Diagnostics out;
  EvidenceLedger merged;
  for (const std::filesystem::path& file : files) {
    const std::string path = file.string();
    std::optional<detail::ParsedFile> read = detail::read_file(path, out);
    if (!read) continue;
    auto ledger = parse_evidence_ledger(read->text, path);
    if (!ledger) {
      out.insert(out.end(), ledger.error().begin(), ledger.error().end());
      continue;
    }
    auto merge = merged.merge(*ledger);
    if (!merge) {
      out.push_back(Diagnostic{Severity::Error, DiagCode::InvalidValue, SourceLoc{path, 0, 0},
                               str("cannot merge this ledger: ", merge.error()), {}, {}});
    }
  }
  if (!out.empty()) return fail(std::move(out));
  return merged;
}

std::string write_evidence_ledger(const EvidenceLedger& ledger) {
  std::vector<std::size_t> run_order(ledger.runs.size());
  for (std::size_t i = 0; i < run_order.size(); ++i) run_order[i] = i;
  std::sort(run_order.begin(), run_order.end(),
            [&](std::size_t a, std::size_t b) { return ledger.runs[a].id < ledger.runs[b].id; });
  std::vector<const LedgerEntry*> entries;
  for (const LedgerEntry& e : ledger.entries) entries.push_back(&e);
  std::sort(entries.begin(), entries.end(), [&](const LedgerEntry* a, const LedgerEntry* b) {
    return entry_key(ledger, *a) < entry_key(ledger, *b);
  });

  std::string out = str("{\"format\":\"", kEvidenceLedgerFormat, "\",\"schema\":", kEvidenceLedgerSchema,
                        ",\n\"runs\":[");
  for (std::size_t i = 0; i < run_order.size(); ++i) {
    const LedgerRun& run = ledger.runs[run_order[i]];
    JsonWriter json;
    json.begin_object().field("id", run.id).field("finished", run.finished).key("fingerprint").begin_object();
    for (const auto& [key, value] : run.fingerprint.entries) json.field(key, value);
    json.end_object().end_object();
    out += str(i == 0 ? "\n" : ",\n", json.str());
  }
  out += "],\n\"entries\":[";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const LedgerEntry& e = *entries[i];
    JsonWriter json;
    json.begin_object()
        .field("run", ledger.runs[e.run].id)
        .field("kind", to_string(e.kind))
        .field("source", e.source)
        .field("op", to_string(e.covers.op))
        .field("provider", to_string(e.covers.provider))
        .field("device", to_string(e.covers.device))
        .field("obligation", to_string(e.covers.obligation))
        .field("outcome", e.passed ? "passed" : "failed")
        .field("checks", e.checks)
        .field("failed_checks", e.failed_checks)
        .key("failures")
        .begin_array();
    for (const LedgerFailure& f : e.failures) {
      json.begin_object()
          .field("test_case", f.test_case)
          .field("file", f.file)
          .field("line", f.line)
          .field("check", f.check)
          .end_object();
    }
    json.end_array().end_object();
    out += str(i == 0 ? "\n" : ",\n", json.str());
  }
  out += "]}\n";
  return out;
}

std::string ledger_run_id(const EnvironmentFingerprint& fingerprint, std::string_view finished) {
  return sha256_hex(str(fingerprint.digest(), "\n", finished));
}

}  // namespace capsule
