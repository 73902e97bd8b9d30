// SPDX-License-Identifier: Apache-2.0
// Evidence integrity for `capsule lint` and its rule overrides (see capsule/lint.hpp).
#include "capsule/lint.hpp"
#include "lint_internal.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include "capsule/resolve.hpp"
#include "capsule/text.hpp"
#include "capsule/source_tree.hpp"

namespace capsule {
namespace {

namespace fs = std::filesystem;

/// Long lists in notes stop after this many names; the count says how many more there are.
constexpr std::size_t kListedNames = 8;
/// A "did you mean" names a parsed identifier of at most this many characters.
constexpr std::size_t kMaxSuggestedSymbol = 128;

std::string quoted_list(const std::vector<std::string>& names, std::size_t limit = kListedNames) {
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < names.size() && i < limit; ++i) shown.push_back(str("`", names[i], "`"));
  std::string out = join(shown, ", ");
  if (names.size() > limit) out += str(" and ", names.size() - limit, " more");
  return out;
}

/// Evidence kinds whose names the build's manifest declares.
bool declared_in_manifest(EvidenceKind kind) {
  return kind == EvidenceKind::TestSuite || kind == EvidenceKind::FuzzOracle || kind == EvidenceKind::SharedDefinition;
}

std::string_view source_words(EvidenceKind kind) {
  switch (kind) {
    case EvidenceKind::FuzzOracle: return "fuzz oracle";
    case EvidenceKind::SharedDefinition: return "shared definition";
    default: return "test suite";
  }
}

std::string_view plural_words(EvidenceKind kind) {
  switch (kind) {
    case EvidenceKind::FuzzOracle: return "fuzz oracles";
    case EvidenceKind::SharedDefinition: return "shared definitions";
    default: return "test suites";
  }
}

std::string_view obligation_name(std::size_t index) { return to_string(static_cast<Obligation>(index)); }

using detail::site;

bool identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/// Whether `symbol` occurs in `text` as a whole word: `sdpa_forward` is not found inside
/// `libtorch_sdpa_forward_impl`, so a provenance entry cannot be satisfied by a longer name.
bool occurs_as_word(std::string_view text, std::string_view symbol) {
  if (symbol.empty()) return false;
  for (std::size_t at = text.find(symbol); at != std::string_view::npos; at = text.find(symbol, at + 1)) {
    const bool starts = at == 0 || !identifier_char(text[at - 1]) || !identifier_char(symbol.front());
    const std::size_t end = at + symbol.size();
    const bool ends = end == text.size() || !identifier_char(text[end]) || !identifier_char(symbol.back());
    if (starts && ends) return true;
  }
  return false;
}

/// A provenance file, read once however many contracts name it.
struct ScannedFile {
  bool readable = false;
  detail::SourceRead::Status status = detail::SourceRead::Status::Missing;
  std::string text;
  std::vector<std::string> identifiers;  ///< filled on first use, for "did you mean"
  bool identifiers_ready = false;
};

/// One evidence finding that several capsules may share (evidence written once in [defaults]).
struct SharedFinding {
  std::size_t index;                ///< into the output
  std::vector<std::string> others;  ///< capsules after the first that carry the same evidence
};

/// Capsules of one module that no compiled handler can run, with what lint could not check.
struct Unhandled {
  std::vector<const Capsule*> capsules;
  std::set<std::string> guards;
  std::set<std::string> suites;       ///< named suites the manifest lacks
  std::set<std::string> oracles;      ///< named fuzz oracles the manifest lacks
  std::set<std::string> definitions;  ///< named shared definitions the manifest lacks
  std::set<std::string> keys;         ///< "provider/device" pairs, for the note
};

class EvidenceChecker {
 public:
  EvidenceChecker(const EvidenceCheckInputs& inputs, Diagnostics& out) : inputs_(inputs), out_(out) {}

  void module(const CapsuleModule& module) {
    Unhandled unhandled;
    for (const Capsule& capsule : module.capsules) {
      checked_label(capsule);
      missing_evidence(capsule);
      const LintHandler* handler = find_handler(capsule);
      for (std::size_t i = 0; i < capsule.contracts.size(); ++i) {
        const Evidence& evidence = capsule.contracts[i].evidence;
        if (evidence.kind == EvidenceKind::RuntimeGuard) {
          if (handler != nullptr) guard(capsule, i, *handler);
          else unhandled.guards.insert(evidence.name);
        } else if (evidence.kind == EvidenceKind::Checker) {
          if (inputs_.checkers) checker(capsule, i, *inputs_.checkers);
          else unresolved_checker(capsule, i);
        } else if (declared_in_manifest(evidence.kind) && inputs_.suites) {
          const CoverageCase wanted{capsule.op, capsule.provider, capsule.device, static_cast<Obligation>(i)};
          // A source the build has must cover the capsule, handler or not: a CUDA capsule
          // cannot borrow the name of a suite that only ran reference kernels on the CPU.
          if (const EvidenceSource* source = inputs_.suites->find(evidence.kind, evidence.name)) {
            if (!source->covers(wanted)) uncovered(capsule, i, *source, wanted);
            continue;
          }
          if (handler != nullptr) unknown_source(capsule, i, wanted);
          else if (evidence.kind == EvidenceKind::TestSuite) unhandled.suites.insert(evidence.name);
          else if (evidence.kind == EvidenceKind::FuzzOracle) unhandled.oracles.insert(evidence.name);
          else unhandled.definitions.insert(evidence.name);
        }
      }
      provenance(module, capsule);
      if (handler != nullptr) vjp_mode(capsule, *handler);
      if (handler == nullptr) {
        unhandled.capsules.push_back(&capsule);
        unhandled.keys.insert(str(to_string(capsule.provider), "/", to_string(capsule.device)));
      }
    }
    report_unhandled(module, unhandled);
  }

  /// Compiled handlers whose (op, provider, device) no loaded capsule has, one warning per
  /// provider and device.
  void unlisted_handlers(const std::vector<const CapsuleModule*>& modules) {
    std::set<std::tuple<Op, Provider, Device>> mentioned;
    for (const CapsuleModule* module : modules) {
      for (const Capsule& c : module->capsules) mentioned.insert({c.op, c.provider, c.device});
    }
    std::map<std::pair<Provider, Device>, std::vector<const LintHandler*>> groups;
    std::vector<std::pair<Provider, Device>> order;
    for (const LintHandler& handler : inputs_.handlers) {
      if (mentioned.count({handler.op, handler.provider, handler.device}) != 0) continue;
      const auto key = std::make_pair(handler.provider, handler.device);
      if (groups[key].empty()) order.push_back(key);
      groups[key].push_back(&handler);
    }
    for (const auto& key : order) {
      const std::vector<const LintHandler*>& list = groups[key];
      const LintHandler& first = *list.front();
      if (list.size() == 1) {
        add(DiagCode::UnlistedHandler, first.where,
            str("compiled handler `", first.name, "` (", to_string(first.op), ", ", to_string(first.provider), "/",
                to_string(first.device), ") is not mentioned by any loaded capsule, so no plan can select it"),
            {}, "add a capsule for it to a catalog, or stop registering the handler");
        continue;
      }
      std::vector<std::string> ops;
      for (const LintHandler* h : list) ops.emplace_back(to_string(h->op));
      add(DiagCode::UnlistedHandler, first.where,
          str(list.size(), " compiled handlers for ", to_string(key.first), "/", to_string(key.second),
              " are not mentioned by any loaded capsule, so no plan can select them"),
          {str("ops: ", quoted_list(ops, ops.size()))},
          "add capsules for them to a catalog, or load the catalog that has them");
    }
  }

  void finish() {
    for (const auto& item : shared_) {
      const SharedFinding& finding = item.second;
      if (finding.others.empty()) continue;
      out_[finding.index].notes.push_back(str("the same evidence backs ", finding.others.size(), " more capsule",
                                              finding.others.size() == 1 ? "" : "s", ": ",
                                              quoted_list(finding.others)));
    }
  }

 private:
  const LintHandler* find_handler(const Capsule& capsule) const {
    for (const LintHandler& handler : inputs_.handlers) {
      if (handler.op == capsule.op && handler.provider == capsule.provider && handler.device == capsule.device) {
        return &handler;
      }
    }
    return nullptr;
  }

  Diagnostic& add(DiagCode code, SourceLoc where, std::string message, std::vector<std::string> notes = {},
                  std::string help = {}) {
    const LintRule* rule = find_lint_rule(code);
    out_.push_back(Diagnostic{rule != nullptr ? rule->severity : Severity::Error, code, std::move(where),
                              std::move(message), std::move(notes), std::move(help)});
    return out_.back();
  }

  /// Reports a finding once per (code, position, subject); a later capsule with the same
  /// evidence is only counted. Returns false when the finding was already reported.
  bool first_report(DiagCode code, const SourceLoc& where, std::string_view subject, const Capsule& capsule) {
    const std::string key = str(static_cast<int>(code), "\n", where.file, "\n", where.line, ":", where.column, "\n",
                                subject);
    auto found = shared_.find(key);
    if (found != shared_.end()) {
      found->second.others.push_back(capsule.name);
      return false;
    }
    shared_.emplace(key, SharedFinding{out_.size(), {}});
    return true;
  }

  /// A `checked` label on a capsule that rests an obligation on a trusted boundary: plans and
  /// gates reading the label would not show the boundary (diff already ranks this as weakened).
  void checked_label(const Capsule& capsule) {
    if (capsule.trust != Trust::Checked) return;
    for (std::size_t i = 0; i < capsule.contracts.size(); ++i) {
      if (capsule.contracts[i].evidence.kind != EvidenceKind::TrustedBoundary) continue;
      const SourceLoc where = site(capsule, capsule.sites[i].evidence);
      if (!first_report(DiagCode::CheckedOnTrustedBoundary, where, "", capsule)) continue;
      add(DiagCode::CheckedOnTrustedBoundary, where,
          str("capsule `", capsule.name, "` is labelled `checked` but its ", obligation_name(i),
              " obligation rests on trusted-boundary evidence"),
          {"plans report it under \"trusted boundaries by evidence\", not under the trusted external boundary"},
          "label it `trust = \"trusted-external\"`, or back the obligation with checked evidence");
    }
  }

  /// An obligation that says outright that nothing backs its claim. It is honest, and every
  /// preset rejects it at the gate, so it cannot slip into a plan; lint warns so the gap stays
  /// visible (`--deny missing-evidence` makes it an error).
  void missing_evidence(const Capsule& capsule) {
    for (std::size_t i = 0; i < capsule.contracts.size(); ++i) {
      if (capsule.contracts[i].evidence.kind != EvidenceKind::Missing) continue;
      const SourceLoc where = site(capsule, capsule.sites[i].evidence);
      if (!first_report(DiagCode::MissingEvidence, where, "", capsule)) continue;
      add(DiagCode::MissingEvidence, where,
          str("capsule `", capsule.name, "` declares `missing` evidence for its ", obligation_name(i),
              " obligation: nothing stands behind the claim"),
          {"every acceptance preset rejects it at the gate (failure class `missing`)"},
          "name the guard, suite, definition, oracle or checker that backs the claim");
    }
  }

  /// Lint has no checker registry to resolve a checker's name against (checkers register in the
  /// runtime), so it says so rather than let a misspelt checker pass in silence.
  void unresolved_checker(const Capsule& capsule, std::size_t index) {
    const Evidence& evidence = capsule.contracts[index].evidence;
    const SourceLoc where = site(capsule, capsule.sites[index].evidence);
    if (!first_report(DiagCode::UnverifiableEvidence, where, evidence.name, capsule)) return;
    add(DiagCode::UnverifiableEvidence, where,
        str("capsule `", capsule.name, "` ", obligation_name(index), " evidence names checker `", evidence.name,
            "` (", to_string(evidence.coverage), "), which lint cannot resolve: checkers register in the runtime"),
        {}, "");
  }

  /// Checker evidence against the checkers the program links: the session binds the same name
  /// at run time and refuses the capsule when it is not registered or checks another call, so
  /// lint says so first, and plan and check gate on the registered coverage, not the catalog's.
  void checker(const Capsule& capsule, std::size_t index, const std::vector<KnownChecker>& known) {
    const Obligation obligation = static_cast<Obligation>(index);
    const CheckerJudgement judgement = judge_checker_evidence(capsule, obligation, known);
    if (judgement.verdict != CheckerJudgement::Verdict::Unknown &&
        judgement.verdict != CheckerJudgement::Verdict::Mismatch) {
      return;
    }
    const Evidence& evidence = capsule.contract(obligation).evidence;
    const SourceLoc where = site(capsule, capsule.sites[index].evidence);
    const DiagCode code = judgement.verdict == CheckerJudgement::Verdict::Unknown ? DiagCode::UnknownChecker
                                                                                 : DiagCode::CheckerMismatch;
    if (!first_report(code, where, evidence.name, capsule)) return;
    const std::vector<std::string> fitting = checkers_for(capsule, obligation, known);
    const std::string fitting_note =
        fitting.empty() ? str("no registered checker checks ", to_string(capsule.op), " on ", to_string(capsule.device),
                              " (", obligation_name(index), ")")
                        : str("registered checkers for ", to_string(capsule.op), " on ", to_string(capsule.device), " (",
                              obligation_name(index), "): ", quoted_list(fitting, fitting.size()));
    if (judgement.verdict == CheckerJudgement::Verdict::Unknown) {
      std::vector<std::string_view> names;
      for (const KnownChecker& k : known) names.push_back(k.name);
      const std::string nearest = nearest_name(evidence.name, names);
      add(DiagCode::UnknownChecker, where,
          str("capsule `", capsule.name, "` ", obligation_name(index), " evidence names checker `", evidence.name,
              "`, which this program does not register"),
          {fitting_note, "a session refuses to bind the capsule (binding-rejected), and plan and check refuse its "
                         "evidence (disposition missing)"},
          !nearest.empty()      ? str("did you mean `", nearest, "`?")
          : !fitting.empty()    ? str("name `", fitting.front(), "`")
                                : std::string("register a checker for this op, or back the claim with other evidence"));
      return;
    }
    const KnownChecker& registered = *judgement.checker;
    std::vector<std::string> notes = judgement.disagreements;
    if (!registered.where.file.empty()) notes.push_back(str("`", registered.name, "` is registered at ",
                                                            registered.where.file, ":", registered.where.line));
    notes.push_back(judgement.coverage_only
                        ? std::string("plan and check gate on the registered coverage, and a session refuses to bind "
                                      "the capsule (binding-rejected)")
                        : std::string("a session refuses to bind the capsule (binding-rejected), and plan and check "
                                      "refuse its evidence (disposition missing)"));
    notes.push_back(fitting_note);
    add(DiagCode::CheckerMismatch, where,
        str("capsule `", capsule.name, "` (", to_string(capsule.op), " on ", to_string(capsule.device), ") ",
            obligation_name(index), " evidence names checker `", evidence.name, "` with coverage `",
            to_string(evidence.coverage), "`, but the registered checker checks ", to_string(registered.op), " on ",
            to_string(registered.device), " (", to_string(registered.obligation), ") with coverage `",
            to_string(registered.coverage), "`"),
        std::move(notes),
        judgement.coverage_only ? str("claim coverage `", to_string(registered.coverage), "`")
        : !fitting.empty()      ? str("name `", fitting.front(), "`")
                                : std::string("name a checker of this op, device and obligation, or back the claim "
                                              "with other evidence"));
  }

  void guard(const Capsule& capsule, std::size_t index, const LintHandler& handler) {
    const Evidence& evidence = capsule.contracts[index].evidence;
    if (std::find(handler.guards.begin(), handler.guards.end(), evidence.name) != handler.guards.end()) return;
    const SourceLoc where = site(capsule, capsule.sites[index].evidence);
    if (!first_report(DiagCode::UnknownRuntimeGuard, where, evidence.name, capsule)) return;
    std::vector<std::string_view> candidates(handler.guards.begin(), handler.guards.end());
    const std::string nearest = nearest_name(evidence.name, candidates);
    add(DiagCode::UnknownRuntimeGuard, where,
        str("capsule `", capsule.name, "` ", obligation_name(index), " evidence names runtime guard `", evidence.name,
            "`, but its handler `", handler.name, "` (", to_string(handler.provider), "/", to_string(handler.device),
            ") declares ",
            handler.guards.empty() ? std::string("no guards")
                                   : str("only ", quoted_list(handler.guards, handler.guards.size()))),
        {"binding the capsule to its handler would fail: a runtime guard is evidence only when the handler "
         "enforces it"},
        nearest.empty() ? std::string() : str("did you mean `", nearest, "`?"));
  }

  /// The capsule's VJP mode against what its handler can run: binding refuses the pair at session
  /// open (runtime/handler.cpp, contract_mismatch), so lint says so before anything runs.
  void vjp_mode(const Capsule& capsule, const LintHandler& handler) {
    std::string lacks;
    if (capsule.vjp == VjpMode::BackendVjp && !handler.backend_vjp) lacks = "computes no backward of its own";
    if (capsule.vjp == VjpMode::ExternalAutograd && !handler.autograd_region) {
      lacks = "opens no autograd region (no forward_autograd)";
    }
    if (lacks.empty()) return;
    add(DiagCode::HandlerVjpMismatch, capsule.where,
        str("capsule `", capsule.name, "` has VJP mode ", to_string(capsule.vjp), ", but its handler `", handler.name,
            "` (", to_string(handler.provider), "/", to_string(handler.device), ") ", lacks),
        {"binding refuses this capsule at session open, so a plan that selects it cannot run in this build"},
        "implement that VJP mode in the handler, or declare the mode the handler runs");
  }

  /// Sources of the manifest that cover `wanted`: those of `kind` first, then the other kinds.
  std::vector<const EvidenceSource*> covering(EvidenceKind kind, const CoverageCase& wanted) const {
    std::vector<const EvidenceSource*> same;
    std::vector<const EvidenceSource*> other;
    for (const EvidenceSource& source : inputs_.suites->sources) {
      if (source.covers(wanted)) (source.kind == kind ? same : other).push_back(&source);
    }
    same.insert(same.end(), other.begin(), other.end());
    return same;
  }

  /// The help line naming the source nearest to `name` among those that cover `wanted`: by
  /// coverage first (only a covering source is ever suggested), then by spelling.
  std::string covering_help(EvidenceKind kind, std::string_view name, const CoverageCase& wanted) const {
    const std::vector<const EvidenceSource*> candidates = covering(kind, wanted);
    if (candidates.empty()) {
      return str("no test suite, fuzz oracle or shared definition of this build covers ", case_words(wanted),
                 "; add a suite that runs it and declare its coverage (tests/suite_coverage.hpp)");
    }
    std::vector<std::string_view> same_kind;
    for (const EvidenceSource* source : candidates) {
      if (source->kind == kind) same_kind.push_back(source->name);
    }
    const std::string close = nearest_name(name, same_kind);
    // Only covering sources are candidates, so a close spelling keeps the short form.
    if (!close.empty()) return str("did you mean `", close, "`?");
    const EvidenceSource& best = *candidates.front();
    std::string help = str("name ", source_words(best.kind), " `", best.name, "`, which covers ", case_words(wanted));
    if (candidates.size() > 1) help += str(" (", candidates.size() - 1, " more cover it too)");
    return help;
  }

  static std::string case_words(const CoverageCase& c) {
    return str(to_string(c.obligation), " of ", to_string(c.op), " on ", to_string(c.provider), "/",
               to_string(c.device));
  }

  /// Evidence names a source the manifest has, which does not declare the capsule's case.
  void uncovered(const Capsule& capsule, std::size_t index, const EvidenceSource& source, const CoverageCase& wanted) {
    const Evidence& evidence = capsule.contracts[index].evidence;
    const SourceLoc where = site(capsule, capsule.sites[index].evidence);
    if (!first_report(DiagCode::UncoveredEvidence, where, str(to_string(evidence.kind), "\n", evidence.name),
                      capsule)) {
      return;
    }
    add(DiagCode::UncoveredEvidence, where,
        str("capsule `", capsule.name, "` ", obligation_name(index), " evidence names ", source_words(source.kind),
            " `", source.name, "`, which does not cover ", case_words(wanted)),
        {str("`", source.name, "` ", describe_coverage(source), " (", inputs_.suites->path, ")"),
         str("a name that resolves is not evidence: the ", source_words(source.kind),
             " must declare this obligation of this op on this provider and device")},
        covering_help(source.kind, source.name, wanted));
  }

  /// Evidence of a capsule with a handler names a source the manifest lacks.
  void unknown_source(const Capsule& capsule, std::size_t index, const CoverageCase& wanted) {
    const Evidence& evidence = capsule.contracts[index].evidence;
    const SourceLoc where = site(capsule, capsule.sites[index].evidence);
    const DiagCode code =
        evidence.kind == EvidenceKind::TestSuite ? DiagCode::UnknownTestSuite : DiagCode::UnknownEvidenceSource;
    if (!first_report(code, where, str(to_string(evidence.kind), "\n", evidence.name), capsule)) return;
    const std::vector<std::string> declared = inputs_.suites->names(evidence.kind);
    add(code, where,
        str("capsule `", capsule.name, "` ", obligation_name(index), " evidence names ", source_words(evidence.kind),
            " `", evidence.name, "`, which this build ",
            evidence.kind == EvidenceKind::TestSuite ? "does not have" : "does not declare"),
        {str(plural_words(evidence.kind), " of this build (", inputs_.suites->path, "): ",
             declared.empty() ? std::string("none") : quoted_list(declared, declared.size()))},
        covering_help(evidence.kind, evidence.name, wanted));
  }

  /// The tree provenance paths of `module` are relative to, opened once per root; nullptr (after
  /// one io-error) when it cannot be read.
  const detail::SourceTree* tree_for(const CapsuleModule& module, fs::path& root) {
    if (inputs_.source_root) {
      root = *inputs_.source_root;
    } else if (!module.source.path.empty()) {
      root = fs::path(module.source.path).lexically_normal().parent_path().parent_path();
    } else {
      return nullptr;  // a module built in code has no files to be relative to
    }
    if (root.empty()) root = ".";
    const std::string key = root.string();
    auto found = trees_.find(key);
    if (found == trees_.end()) {
      found = trees_.emplace(key, std::make_unique<detail::SourceTree>(root, inputs_.use_openat2)).first;
      if (!found->second->problem().empty()) {
        add(DiagCode::IoError, SourceLoc{key, 0, 0},
            str("cannot check provenance under source root ", key, ": ", found->second->problem()),
            {}, "pass --source-root DIR naming the project's top directory");
      }
    }
    return found->second->problem().empty() ? found->second.get() : nullptr;
  }

  ScannedFile& scan(const detail::SourceTree& tree, const fs::path& root, const std::string& relative) {
    const std::string key = str(root.string(), "\n", relative);
    auto found = files_.find(key);
    if (found != files_.end()) return found->second;
    ScannedFile scanned;
    detail::SourceRead read = tree.read(relative);
    scanned.status = read.status;
    scanned.readable = read.status == detail::SourceRead::Status::Read;
    scanned.text = std::move(read.text);
    return files_.emplace(key, std::move(scanned)).first->second;
  }

  /// Identifier-like tokens of a file, for "did you mean": a hint may only ever print a parsed
  /// symbol name, never raw contents, and never an absurdly long token.
  static const std::vector<std::string>& identifiers(ScannedFile& file) {
    if (!file.identifiers_ready) {
      std::set<std::string> unique;
      const std::string& text = file.text;
      for (std::size_t i = 0; i < text.size();) {
        if (!identifier_char(text[i])) {
          ++i;
          continue;
        }
        std::size_t end = i;
        while (end < text.size() && identifier_char(text[end])) ++end;
        if (end - i <= kMaxSuggestedSymbol) unique.insert(text.substr(i, end - i));
        i = end;
      }
      file.identifiers.assign(unique.begin(), unique.end());
      file.identifiers_ready = true;
    }
    return file.identifiers;
  }

  void provenance(const CapsuleModule& module, const Capsule& capsule) {
    bool any = false;
    for (const ContractDescriptor& contract : capsule.contracts) any = any || !contract.provenance.empty();
    if (!any) return;
    fs::path root;
    const detail::SourceTree* tree = tree_for(module, root);
    if (tree == nullptr) return;
    for (std::size_t i = 0; i < capsule.contracts.size(); ++i) {
      const std::vector<Provenance>& entries = capsule.contracts[i].provenance;
      const std::vector<ContractSites::ProvenanceSite>& sites = capsule.sites[i].provenance;
      for (std::size_t j = 0; j < entries.size(); ++j) {
        const Provenance& entry = entries[j];
        if (entry.path.empty()) continue;  // reported at load
        const ContractSites::ProvenanceSite pos = j < sites.size() ? sites[j] : ContractSites::ProvenanceSite{};
        // Provenance names code of this project: an absolute path, one climbing out of the
        // source root or one under .git is reported and never read.
        const std::optional<std::string> relative = detail::SourceTree::eligible_path(entry.path);
        if (!relative) {
          missing_file(capsule, i, entry, site(capsule, pos.path), root, *tree, std::nullopt, {});
          continue;
        }
        ScannedFile& scanned = scan(*tree, root, *relative);
        if (!scanned.readable) {
          missing_file(capsule, i, entry, site(capsule, pos.path), root, *tree, relative, scanned.status);
          continue;
        }
        if (entry.symbol.empty() || occurs_as_word(scanned.text, entry.symbol)) continue;
        const SourceLoc where = site(capsule, pos.symbol);
        const std::string file = (root / *relative).string();
        if (!first_report(DiagCode::MissingProvenanceSymbol, where, str(file, "\n", entry.symbol), capsule)) {
          continue;
        }
        const std::vector<std::string>& words = identifiers(scanned);
        const std::string nearest =
            entry.symbol.size() > kMaxSuggestedSymbol
                ? std::string()
                : nearest_name(entry.symbol, std::vector<std::string_view>(words.begin(), words.end()));
        add(DiagCode::MissingProvenanceSymbol, where,
            str("capsule `", capsule.name, "` ", obligation_name(i), " provenance names symbol `", entry.symbol,
                "`, which does not occur in `", entry.path, "`"),
            {str("searched ", file, " for the whole word")},
            nearest.empty() ? std::string() : str("did you mean `", nearest, "`?"));
      }
    }
  }

  /// `relative` is unset when the path itself is refused (absolute, climbing out, under .git).
  void missing_file(const Capsule& capsule, std::size_t index, const Provenance& entry, const SourceLoc& where,
                    const fs::path& root, const detail::SourceTree& tree, const std::optional<std::string>& relative,
                    detail::SourceRead::Status status) {
    const std::string file = relative ? (root / *relative).string() : entry.path;
    if (!first_report(DiagCode::MissingProvenanceFile, where, str(root.string(), "\n", file), capsule)) return;
    std::vector<std::string> notes;
    std::string help;
    if (!relative) {
      notes.push_back(str("`", entry.path, "` is absolute, leaves the source root ", root.string(),
                          " or lies under .git"));
      help = "name a file inside the project, relative to its top directory";
    } else {
      notes.push_back(str("looked for ", file, " (paths are relative to the source root ", root.string(), "): ",
                          detail::describe(status)));
      notes.push_back(str("lint reads ", tree.rule()));
      if (status == detail::SourceRead::Status::Missing) {
        const fs::path wanted(*relative);
        const std::vector<std::string> names = tree.names_in(wanted.parent_path().generic_string());
        const std::string nearest = nearest_name(wanted.filename().string(),
                                                 std::vector<std::string_view>(names.begin(), names.end()));
        if (!nearest.empty()) help = str("did you mean `", (wanted.parent_path() / nearest).generic_string(), "`?");
      }
    }
    add(DiagCode::MissingProvenanceFile, where,
        str("capsule `", capsule.name, "` ", obligation_name(index), " provenance names `", entry.path,
            "`, which is not a file under the source root"),
        std::move(notes), std::move(help));
  }

  void report_unhandled(const CapsuleModule& module, const Unhandled& unhandled) {
    if (unhandled.capsules.empty()) return;
    const std::vector<std::string> keys(unhandled.keys.begin(), unhandled.keys.end());
    std::vector<std::string> names;
    for (const Capsule* c : unhandled.capsules) names.push_back(c->name);
    SourceLoc where;
    std::string message;
    if (unhandled.capsules.size() == 1) {
      const Capsule& c = *unhandled.capsules.front();
      where = c.where;
      message = str("capsule `", c.name, "` (", to_string(c.op), ", ", keys.front(),
                    ") has no compiled handler in this build: plans may select it, but nothing here can run it");
    } else {
      where = module.where.line != 0 ? module.where : unhandled.capsules.front()->where;
      message = str(unhandled.capsules.size(), " capsules of module `", module.name, "` (", join(keys, ", "),
                    ") have no compiled handler in this build: plans may select them, but nothing here can run them");
    }
    std::vector<std::string> notes;
    if (unhandled.capsules.size() > 1) notes.push_back(str("capsules: ", quoted_list(names)));
    add(DiagCode::NoCompiledHandler, where, std::move(message), std::move(notes),
        "build the provider that implements them, or pass --allow no-compiled-handler where that is expected");

    std::vector<std::string> unchecked;
    if (!unhandled.guards.empty()) {
      const std::vector<std::string> guards(unhandled.guards.begin(), unhandled.guards.end());
      unchecked.push_back(str("runtime guards ", quoted_list(guards),
                              " (no handler declares them here)"));
    }
    const auto lacking = [&](const std::set<std::string>& lacked, std::string_view words) {
      if (lacked.empty()) return;
      unchecked.push_back(str(words, " ", quoted_list(std::vector<std::string>(lacked.begin(), lacked.end())),
                              " (not in this build's manifest)"));
    };
    lacking(unhandled.suites, "test suites");
    lacking(unhandled.oracles, "fuzz oracles");
    lacking(unhandled.definitions, "shared definitions");
    if (unchecked.empty()) return;
    add(DiagCode::UnverifiableEvidence, where,
        str("evidence of ", unhandled.capsules.size() == 1 ? str("capsule `", names.front(), "`")
                                                           : str("module `", module.name, "`"),
            " cannot be checked by this build"),
        std::move(unchecked));
  }

  const EvidenceCheckInputs& inputs_;
  Diagnostics& out_;
  std::map<std::string, SharedFinding> shared_;
  std::map<std::string, ScannedFile> files_;
  std::map<std::string, std::unique_ptr<detail::SourceTree>> trees_;
};

}  // namespace

SourceLoc detail::site(const Capsule& capsule, FilePos pos) {
  if (pos.line == 0) return capsule.where;
  return SourceLoc{capsule.where.file, pos.line, pos.column};
}

std::vector<const CapsuleModule*> detail::loaded_modules(const Workspace& workspace) {
  std::vector<const CapsuleModule*> modules;
  std::set<std::string> files;
  for (const ModulePtr& m : workspace.modules) {
    modules.push_back(m.get());
    if (!m->source.path.empty()) files.insert(m->source.path);
  }
  for (const ProfilePtr& profile : workspace.profiles) {
    for (const ModulePtr& m : profile->with_modules) {
      if (std::find(modules.begin(), modules.end(), m.get()) != modules.end()) continue;
      if (!m->source.path.empty() && !files.insert(m->source.path).second) continue;
      modules.push_back(m.get());
    }
  }
  return modules;
}

const LintRule* find_lint_rule(DiagCode code) {
  for (const LintRule& rule : kLintRules) {
    if (rule.code == code) return &rule;
  }
  return nullptr;
}

const LintRule* find_lint_rule(std::string_view id) {
  for (const LintRule& rule : kLintRules) {
    if (to_string(rule.code) == id) return &rule;
  }
  return nullptr;
}

Diagnostics check_profile_intent(const Workspace& workspace) {
  Diagnostics out;
  const LintRule* rule = find_lint_rule(DiagCode::UnplannableProfile);
  for (const ProfilePtr& profile : workspace.profiles) {
    auto resolved = resolve_profile(workspace, profile);
    if (!resolved) continue;  // its modules are reported by the loader
    std::vector<std::string> planned;
    for (const auto& entry : VocabTable<Op>::entries) {
      if (resolved->planner.chosen(entry.first) != nullptr) planned.emplace_back(entry.second);
    }
    if (planned.empty() && !profile->plans_nothing) {
      out.push_back(Diagnostic{rule->severity, DiagCode::UnplannableProfile, profile->where,
                               str("profile `", profile->name, "` plans no op: no capsule of its modules is admitted by "
                                   "its availability, provider and assurance"),
                               {},
                               "admit the capsules it should plan, or mark a placeholder profile "
                               "`plans_nothing = true`"});
    } else if (!planned.empty() && profile->plans_nothing) {
      out.push_back(Diagnostic{rule->severity, DiagCode::UnplannableProfile, profile->where,
                               str("profile `", profile->name, "` is marked `plans_nothing = true` but plans ",
                                   planned.size(), " op", planned.size() == 1 ? "" : "s"),
                               {str("it plans ", quoted_list(planned))},
                               "remove `plans_nothing`, or narrow the profile so it plans nothing"});
    }
  }
  return out;
}

Diagnostics check_evidence(const Workspace& workspace, const EvidenceCheckInputs& inputs) {
  Diagnostics out;
  if (!inputs.suites) {
    std::vector<std::string> notes;
    if (!inputs.manifest_searched.empty()) notes.push_back(str("looked for ", join(inputs.manifest_searched, ", ")));
    out.push_back(Diagnostic{Severity::Warning, DiagCode::NoTestSuiteManifest, {},
                             "no test-suite manifest found, so test-suite, fuzz-oracle and shared-definition evidence is not checked", std::move(notes),
                             "build capsule_tests (it writes the manifest), or pass --test-suites FILE"});
  }
  const std::vector<const CapsuleModule*> modules = detail::loaded_modules(workspace);
  EvidenceChecker checker(inputs, out);
  for (const CapsuleModule* module : modules) checker.module(*module);
  checker.unlisted_handlers(modules);
  checker.finish();
  Diagnostics intent = check_profile_intent(workspace);
  out.insert(out.end(), intent.begin(), intent.end());
  return out;
}

namespace {

/// Loadable files of one kind in `dir` (catalogs and profiles are `*.toml`, graphs excluded), as
/// the workspace loader counts them.
std::size_t toml_entries(const fs::path& dir) {
  std::size_t count = 0;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (it->path().extension() == ".toml" && !name.ends_with(".graph.toml")) ++count;
  }
  return count;
}

}  // namespace

Diagnostics check_lint_scope(const Workspace& workspace, const LintScope& scope) {
  Diagnostics out;
  const auto nothing = [&](const fs::path& where, std::string message, std::string help) {
    out.push_back(Diagnostic{Severity::Error, DiagCode::NothingToLint, SourceLoc{where.string(), 0, 0},
                             std::move(message), {}, std::move(help)});
  };
  std::error_code error;
  // Catalog directories only: a tree may have no profiles yet, and lint still checks its
  // catalogs; a catalog directory without catalogs checked nothing.
  for (const fs::path& dir : scope.catalog_dirs) {
    // A directory that cannot be read is already an io-error from the loader.
    if (fs::is_directory(dir, error) && toml_entries(dir) == 0) {
      nothing(dir, "no catalog files (`*.toml`) in this directory, so lint checked nothing there",
              "point --catalogs at the directory that holds the catalog files");
    }
  }
  if (scope.catalog_dirs.empty()) {
    nothing({}, "no catalog directory was given, so lint checked nothing", "pass --catalogs DIR");
  } else if (workspace.modules.empty() && !has_errors(workspace.diagnostics) && out.empty()) {
    nothing(scope.catalog_dirs.front(), "no catalog loaded, so lint checked nothing", "pass --catalogs DIR");
  }
  if (scope.source_root && !fs::is_directory(*scope.source_root, error)) {
    nothing(*scope.source_root,
            str("--source-root `", scope.source_root->string(), "` is not a directory, so no provenance could be checked"),
            "name the project's top directory");
  }
  return out;
}

std::optional<fs::path> catalogs_work_tree_top(const LintScope& scope) {
  if (scope.catalog_dirs.empty()) return std::nullopt;
  std::error_code error;
  if (!fs::is_directory(scope.catalog_dirs.front(), error)) return std::nullopt;
  return detail::git_work_tree_top(scope.catalog_dirs.front());
}

fs::path annotation_root(const LintScope& scope) { return annotation_root(scope, catalogs_work_tree_top(scope)); }

fs::path annotation_root(const LintScope& scope, const std::optional<fs::path>& work_tree_top) {
  if (work_tree_top) return *work_tree_top;
  if (scope.source_root) return *scope.source_root;
  if (scope.catalog_dirs.empty()) return {};
  std::error_code error;
  fs::path dir = fs::absolute(scope.catalog_dirs.front(), error).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // `catalogs/` names the directory itself
  return dir.parent_path();
}

Diagnostics apply_lint_rules(Diagnostics diagnostics, const RuleOverrides& overrides) {
  const auto listed = [](const std::vector<DiagCode>& codes, DiagCode code) {
    return std::find(codes.begin(), codes.end(), code) != codes.end();
  };
  Diagnostics out;
  out.reserve(diagnostics.size());
  for (Diagnostic& d : diagnostics) {
    if (const LintRule* rule = find_lint_rule(d.code)) d.severity = rule->severity;
    for (const auto& [code, severity] : overrides.severity) {
      if (code == d.code) d.severity = severity;
    }
    if (listed(overrides.allow, d.code)) continue;
    if (listed(overrides.deny, d.code) || (overrides.deny_warnings && d.severity == Severity::Warning)) {
      d.severity = Severity::Error;
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace capsule
