// SPDX-License-Identifier: Apache-2.0
// Catalog loader (docs/format.md#catalogs). A file is read in two steps: every table ([defaults] and each
// [[capsule]]) is parsed into a `PartialCapsule` whose fields are optional, then each capsule is
// merged over the defaults (key by key; each contract as a whole) and validated. Parsing the
// defaults once keeps load time linear in the number of capsules.
#include <map>
#include <tuple>

#include "capsule/load.hpp"
#include "toml_reader.hpp"

namespace capsule {
namespace {

using detail::Fields;
using detail::FileContext;

template <class T>
struct Located {
  T value;
  SourceLoc where;
};

struct PartialContract {
  SourceLoc where;
  std::optional<ClaimKind> claim;
  bool claim_given = false;  ///< the key was present (a bad spelling is already reported)
  std::optional<Op> op;
  std::optional<Located<Layout>> layout;
  std::optional<Located<VjpMode>> mode;
  std::string summary;
  std::optional<Evidence> evidence;
  SourceLoc evidence_where;
  SourceLoc expires_where;
  ContractSites sites;  ///< evidence name and provenance positions, kept for lint
  std::vector<Provenance> provenance;
};

struct PartialCapsule {
  SourceLoc where;
  std::vector<std::string_view> given_but_invalid;  ///< keys already reported as bad values
  std::optional<std::string> name;
  std::optional<std::string> summary;
  std::optional<Op> op;
  std::optional<Provider> provider;
  std::optional<Device> device;
  std::optional<Trust> trust;
  std::optional<bool> forward;
  std::optional<VjpMode> vjp;
  std::optional<Reduction> reduction;
  std::optional<std::string> reason;
  std::optional<std::string> owner;
  std::optional<Located<Date>> expires;
  std::array<std::optional<PartialContract>, 4> contracts;
};

FilePos file_pos(const SourceLoc& where) { return FilePos{where.line, where.column}; }

constexpr std::array<std::string_view, 4> kContractKeys{"shape", "layout", "value", "vjp"};
constexpr std::array<std::string_view, 4> kContractFields{"contracts.shape", "contracts.layout", "contracts.value",
                                                          "contracts.vjp"};

std::optional<Evidence> parse_evidence(FileContext& context, const toml::node& node, SourceLoc& expires_where) {
  const auto* table = node.as_table();
  if (table == nullptr) {
    context.error(DiagCode::WrongType, context.at(node),
                  str("`evidence` must be a table such as { kind = \"test-suite\", name = \"...\" }, got ",
                      detail::type_name(node)));
    return std::nullopt;
  }
  Fields fields(context, *table, "evidence", {"kind", "name", "reason", "owner", "expires", "coverage"});
  const auto kind = fields.vocab<EvidenceKind>("kind");
  Evidence evidence;
  evidence.name = fields.identifier("name", IdentifierKind::Label).value_or("");
  evidence.reason = fields.string("reason").value_or("");
  evidence.owner = fields.string("owner").value_or("");
  evidence.expires = fields.date("expires");
  const auto coverage = fields.vocab<CheckerCoverage>("coverage");
  if (const toml::node* e = fields.node("expires")) expires_where = context.at(*e);
  if (!kind) {
    if (fields.node("kind") == nullptr) fields.missing("kind", "one of the evidence kinds of docs/format.md#evidence");
    return std::nullopt;
  }
  evidence.kind = *kind;
  const bool checker = *kind == EvidenceKind::Checker;
  const bool named = *kind == EvidenceKind::RuntimeGuard || *kind == EvidenceKind::TestSuite ||
                     *kind == EvidenceKind::SharedDefinition || *kind == EvidenceKind::FuzzOracle || checker;
  bool ok = true;
  if (named && evidence.name.empty()) {
    fields.missing("name", str(to_string(*kind), " evidence names ",
                               checker ? "the registered checker" : "the guard, suite or definition"));
    ok = false;
  }
  if (*kind == EvidenceKind::TrustedBoundary && evidence.reason.empty()) {
    context.error(DiagCode::MissingTrustReason, fields.where(),
                  "trusted-boundary evidence is missing `reason` (a trusted boundary says why the code is trusted)");
    ok = false;
  }
  // Coverage decides what a checker discharges (docs/acceptance-presets.md), so it is never
  // defaulted: a reader must see whether a check is full, partial or sampled.
  if (checker && fields.node("coverage") == nullptr) {
    fields.missing("coverage", "checker evidence states its coverage: \"full\", \"partial\" or \"sampled\"");
    ok = false;
  }
  if (checker && fields.node("coverage") != nullptr && !coverage) ok = false;
  if (coverage) evidence.coverage = *coverage;
  const auto misplaced = [&](std::string_view key, bool allowed) {
    if (allowed || fields.node(key) == nullptr) return;
    context.error(DiagCode::InvalidValue, context.at(*fields.node(key)),
                  str("`", key, "` does not belong to ", to_string(*kind), " evidence"));
    ok = false;
  };
  misplaced("name", named);
  misplaced("reason", *kind == EvidenceKind::TrustedBoundary);
  misplaced("owner", *kind == EvidenceKind::TrustedBoundary);
  misplaced("expires", *kind == EvidenceKind::TrustedBoundary);
  misplaced("coverage", checker);
  if (!ok) return std::nullopt;
  return evidence;
}

std::optional<PartialContract> parse_contract(FileContext& context, const toml::node& node,
                                              std::string_view field) {
  const std::string what = str("contracts.", field);
  const auto* table = node.as_table();
  if (table == nullptr) {
    context.error(DiagCode::WrongType, context.at(node),
                  str("`", what, "` must be a table, got ", detail::type_name(node)));
    return std::nullopt;
  }
  Fields fields(context, *table, what, {"claim", "op", "layout", "mode", "summary", "evidence", "provenance"});
  PartialContract contract;
  contract.where = fields.where();
  contract.claim = fields.vocab<ClaimKind>("claim");
  contract.claim_given = fields.node("claim") != nullptr;
  contract.op = fields.vocab<Op>("op");
  if (auto layout = fields.vocab<Layout>("layout")) contract.layout = Located<Layout>{*layout, context.at(*fields.node("layout"))};
  if (auto mode = fields.vocab<VjpMode>("mode")) contract.mode = Located<VjpMode>{*mode, context.at(*fields.node("mode"))};
  contract.summary = fields.string("summary").value_or("");
  if (const toml::node* evidence = fields.node("evidence")) {
    contract.evidence_where = context.at(*evidence);
    contract.evidence = parse_evidence(context, *evidence, contract.expires_where);
    const toml::node* named = evidence->as_table() != nullptr ? evidence->as_table()->get("name") : nullptr;
    contract.sites.evidence = file_pos(context.at(named != nullptr ? *named : *evidence));
  }
  if (const toml::array* provenance = fields.array("provenance")) {
    for (const toml::node& entry : *provenance) {
      const auto* entry_table = entry.as_table();
      if (entry_table == nullptr) {
        context.error(DiagCode::WrongType, context.at(entry),
                      str("each `provenance` entry must be a table { path, symbol, build_target }, got ",
                          detail::type_name(entry)));
        continue;
      }
      Fields ref(context, *entry_table, "provenance entry", {"path", "symbol", "build_target"});
      Provenance item;
      item.path = ref.identifier("path", IdentifierKind::Path).value_or("");
      item.symbol = ref.identifier("symbol", IdentifierKind::Label).value_or("");
      item.build_target = ref.identifier("build_target", IdentifierKind::Label).value_or("");
      if (item.path.empty()) ref.missing("path", "the file that holds the code");
      if (item.symbol.empty()) ref.missing("symbol", "the symbol in that file");
      const toml::node* path = ref.node("path");
      const toml::node* symbol = ref.node("symbol");
      contract.sites.provenance.push_back(
          {file_pos(context.at(path != nullptr ? *path : entry)), file_pos(context.at(symbol != nullptr ? *symbol : entry))});
      contract.provenance.push_back(std::move(item));
    }
  }
  return contract;
}

/// Parses [defaults] (`is_defaults`: no `name`, which must be unique per capsule) or a [[capsule]].
PartialCapsule parse_partial(FileContext& context, const toml::table& table, std::string what, bool is_defaults) {
  // `name` comes first so that [defaults] takes the same list without it.
  static constexpr std::array<std::string_view, 13> kCapsuleKeys{
      "name", "summary", "op", "provider", "device", "trust", "forward", "vjp", "reduction",
      "reason", "owner", "expires", "contracts"};
  Fields fields(context, table, std::move(what), std::span<const std::string_view>(kCapsuleKeys).subspan(is_defaults ? 1 : 0));
  PartialCapsule partial;
  partial.where = fields.where();
  // Records keys whose value was present but rejected, so `finish` does not also call them
  // missing: one problem, one diagnostic.
  const auto note_invalid = [&](const auto& value, std::string_view key) {
    if (!value && fields.node(key) != nullptr) partial.given_but_invalid.push_back(key);
  };
  partial.name = fields.identifier("name", IdentifierKind::Name);
  partial.summary = fields.string("summary");
  partial.op = fields.vocab<Op>("op");
  partial.provider = fields.vocab<Provider>("provider");
  partial.device = fields.vocab<Device>("device");
  partial.trust = fields.vocab<Trust>("trust");
  partial.forward = fields.boolean("forward");
  partial.vjp = fields.vocab<VjpMode>("vjp");
  partial.reduction = fields.vocab<Reduction>("reduction");
  partial.reason = fields.string("reason");
  note_invalid(partial.name, "name");
  note_invalid(partial.op, "op");
  note_invalid(partial.provider, "provider");
  note_invalid(partial.device, "device");
  note_invalid(partial.trust, "trust");
  note_invalid(partial.vjp, "vjp");
  note_invalid(partial.reduction, "reduction");
  partial.owner = fields.string("owner");
  if (auto expires = fields.date("expires")) partial.expires = Located<Date>{*expires, context.at(*fields.node("expires"))};
  if (const toml::table* contracts = fields.table("contracts")) {
    Fields contract_fields(context, *contracts, "contracts", {"shape", "layout", "value", "vjp"});
    for (std::size_t i = 0; i < kContractKeys.size(); ++i) {
      if (const toml::node* node = contract_fields.node(kContractKeys[i])) {
        partial.contracts[i] = parse_contract(context, *node, kContractKeys[i]);
        if (!partial.contracts[i]) partial.given_but_invalid.push_back(kContractFields[i]);
      }
    }
  }
  return partial;
}

template <class T>
const std::optional<T>& pick(const std::optional<T>& own, const std::optional<T>& fallback) {
  return own ? own : fallback;
}

std::string describe_misalignment(const Capsule& capsule, Obligation obligation, const Claim& claim) {
  const std::string_view field = to_string(obligation);
  if (obligation_of(claim.kind) != obligation) {
    return str("capsule `", capsule.name, "` has a ", to_string(claim.kind), " claim in its ", field,
               " contract; the ", field, " obligation of ", to_string(capsule.op), " needs ",
               obligation == Obligation::Shape    ? "shape-safety"
               : obligation == Obligation::Layout ? "layout-compatibility"
               : obligation == Obligation::Value  ? "value-refinement"
                                                  : "vjp-refinement or vjp-unavailable");
  }
  if (claim.op != capsule.op) {
    return str("capsule `", capsule.name, "` implements `", to_string(capsule.op), "` but its ", field,
               " contract claims op `", to_string(claim.op), "`");
  }
  if (claim.kind == ClaimKind::VjpUnavailable) {
    return str("capsule `", capsule.name, "` declares vjp `", to_string(capsule.vjp),
               "` but its vjp contract says vjp-unavailable; that claim is only for vjp = \"none\"");
  }
  if (capsule.vjp == VjpMode::None) {
    return str("capsule `", capsule.name,
               "` has vjp `none`, so its vjp contract must be vjp-unavailable, not a vjp-refinement claim");
  }
  return str("capsule `", capsule.name, "` declares vjp `", to_string(capsule.vjp),
             "` but its vjp contract claims mode `", to_string(claim.mode), "`");
}

struct Finisher {
  FileContext& context;
  const LoadOptions& options;

  void check_expiry(const std::optional<Date>& expires, const SourceLoc& where, const std::string& what) {
    if (expires && *expires < options.today) {
      context.report(Severity::Warning, DiagCode::ExpiredTrust, where,
                     str(what, " expired on ", format_date(*expires), " (today is ", format_date(options.today),
                         "); review the trust or extend `expires`"));
    }
  }

  std::optional<Capsule> finish(const PartialCapsule& own, const PartialCapsule& defaults) {
    bool ok = true;
    const auto reported = [&](std::string_view key) {
      for (const PartialCapsule* p : {&own, &defaults}) {
        for (const std::string_view bad : p->given_but_invalid) {
          if (bad == key) return true;
        }
      }
      return false;
    };
    const auto require = [&](const auto& value, std::string_view key, std::string_view expectation) {
      if (value) return true;
      if (reported(key)) {
        ok = false;
        return false;
      }
      context.error(DiagCode::MissingField, own.where,
                    str("capsule", own.name ? str(" `", *own.name, "`") : std::string(), " is missing `", key,
                        "` (", expectation, key == "name" ? "; every capsule names itself)" : "; set it on the capsule or in [defaults])"));
      ok = false;
      return false;
    };
    const auto& name = own.name;
    const auto& op = pick(own.op, defaults.op);
    const auto& provider = pick(own.provider, defaults.provider);
    const auto& device = pick(own.device, defaults.device);
    const auto& trust = pick(own.trust, defaults.trust);
    const auto& vjp = pick(own.vjp, defaults.vjp);
    const auto& reduction = pick(own.reduction, defaults.reduction);
    require(name, "name", "a unique capsule name");
    require(op, "op", "one of the 56 ops");
    require(provider, "provider", "who implements it");
    require(device, "device", "where it runs");
    require(trust, "trust", "checked or trusted-external");
    require(vjp, "vjp", "who owns the local VJP");
    require(reduction, "reduction", "the reduction order");
    if (name && name->empty()) {
      context.error(DiagCode::InvalidValue, own.where, "capsule `name` must not be empty");
      ok = false;
    }
    std::array<const PartialContract*, 4> contracts{};
    for (std::size_t i = 0; i < contracts.size(); ++i) {
      const auto& chosen = own.contracts[i] ? own.contracts[i] : defaults.contracts[i];
      if (chosen) contracts[i] = &*chosen;
      else require(chosen, kContractFields[i], "every capsule states all four contracts");
    }
    // Without op and vjp nothing else can be judged; otherwise keep going so every problem of
    // this capsule is reported in the same run.
    if (!op || !vjp) return std::nullopt;

    Capsule capsule;
    capsule.name = name.value_or("");
    capsule.summary = pick(own.summary, defaults.summary).value_or("");
    capsule.op = *op;
    capsule.provider = provider.value_or(Provider::Reference);
    capsule.device = device.value_or(Device::Cpu);
    capsule.trust = trust.value_or(Trust::Checked);
    capsule.supports_forward = pick(own.forward, defaults.forward).value_or(true);
    capsule.vjp = *vjp;
    capsule.numerical.reduction = reduction.value_or(Reduction::NotApplicable);
    capsule.trust_record.reason = pick(own.reason, defaults.reason).value_or("");
    capsule.trust_record.owner = pick(own.owner, defaults.owner).value_or("");
    const auto& expires = own.expires ? own.expires : defaults.expires;
    if (expires) capsule.trust_record.expires = expires->value;
    capsule.where = own.where;

    if (trust && capsule.trust == Trust::TrustedExternal) {
      if (capsule.trust_record.reason.empty()) {
        context.error(DiagCode::MissingTrustReason, own.where,
                      str("trusted-external capsule `", capsule.name,
                          "` is missing `reason` (say why its code is trusted)"));
        ok = false;
      }
      if (expires) check_expiry(expires->value, expires->where, str("trust in capsule `", capsule.name, "`"));
    }

    for (const Obligation obligation : all_values<Obligation>()) {
      if (contracts[static_cast<std::size_t>(obligation)] == nullptr) continue;  // reported above
      const PartialContract& partial = *contracts[static_cast<std::size_t>(obligation)];
      bool contract_ok = true;
      const std::string_view field = kContractFields[static_cast<std::size_t>(obligation)];
      ContractDescriptor& descriptor = capsule.contract(obligation);
      if (!partial.claim || !partial.evidence) {
        // Missing pieces: report them unless the parse already reported a bad value there.
        if (!partial.claim_given) {
          context.error(DiagCode::MissingField, partial.where,
                        str("`", field, "` of capsule `", capsule.name, "` is missing `claim`"));
        }
        if (!partial.evidence && partial.evidence_where.line == 0) {
          context.error(DiagCode::MissingField, partial.where,
                        str("`", field, "` of capsule `", capsule.name,
                            "` is missing `evidence` (every claim states what stands behind it)"));
        }
        ok = false;
        continue;
      }
      descriptor.claim.kind = *partial.claim;
      descriptor.claim.op = partial.op.value_or(capsule.op);
      descriptor.summary = partial.summary;
      descriptor.evidence = *partial.evidence;
      descriptor.provenance = partial.provenance;
      capsule.sites[static_cast<std::size_t>(obligation)] = partial.sites;
      if (descriptor.claim.kind == ClaimKind::LayoutCompatibility) {
        if (!partial.layout) {
          context.error(DiagCode::MissingField, partial.where,
                        str("`", field, "` of capsule `", capsule.name,
                            "` is missing `layout` (a layout-compatibility claim names its layout)"));
          contract_ok = false;
        } else {
          descriptor.claim.layout = partial.layout->value;
        }
      } else if (partial.layout) {
        context.error(DiagCode::InvalidValue, partial.layout->where,
                      str("`layout` belongs only to a layout-compatibility claim, not ",
                          to_string(descriptor.claim.kind)));
        contract_ok = false;
      }
      if (descriptor.claim.kind == ClaimKind::VjpRefinement) {
        if (!partial.mode) {
          context.error(DiagCode::MissingField, partial.where,
                        str("`", field, "` of capsule `", capsule.name,
                            "` is missing `mode` (a vjp-refinement claim names its VJP mode)"));
          contract_ok = false;
        } else {
          descriptor.claim.mode = partial.mode->value;
        }
      } else if (partial.mode) {
        context.error(DiagCode::InvalidValue, partial.mode->where,
                      str("`mode` belongs only to a vjp-refinement claim, not ", to_string(descriptor.claim.kind)));
        contract_ok = false;
      }
      if (!contract_ok) {
        ok = false;
        continue;
      }
      if (!matches_obligation(capsule.op, capsule.vjp, obligation, descriptor.claim)) {
        context.error(DiagCode::MisalignedContract, partial.where,
                      describe_misalignment(capsule, obligation, descriptor.claim),
                      {}, {"alignment rule: docs/format.md#contract-alignment (TorchLean contractsAligned, §3.1)"});
        ok = false;
      }
      // "Not applicable" is evidence only that there is nothing to prove: a forward-only capsule's
      // vjp-unavailable claim (TorchLean). Backing any other claim with it would pass a value,
      // shape, layout or VJP claim on no evidence at all.
      if (descriptor.evidence.kind == EvidenceKind::NotApplicable &&
          descriptor.claim.kind != ClaimKind::VjpUnavailable) {
        const FilePos at = partial.sites.evidence;
        context.error(DiagCode::InvalidValue,
                      at.line != 0 ? SourceLoc{partial.where.file, at.line, at.column} : partial.where,
                      str("capsule `", capsule.name, "` ", to_string(obligation), " contract rests its ",
                          to_string(descriptor.claim.kind), " claim on `not-applicable` evidence"),
                      "not-applicable backs only a vjp-unavailable claim; name the evidence that checks this claim");
        ok = false;
      }
      if (descriptor.evidence.kind == EvidenceKind::TrustedBoundary) {
        check_expiry(descriptor.evidence.expires, partial.expires_where,
                     str("trusted boundary of `", capsule.name, "` ", to_string(obligation)));
      }
    }
    if (!ok) return std::nullopt;
    return capsule;
  }
};

}  // namespace

std::optional<CapsuleModule> parse_catalog(std::string_view text, const std::string& path,
                                           const LoadOptions& options, Diagnostics& out) {
  auto root = detail::parse_toml(text, path, out);
  if (!root) return std::nullopt;
  FileContext context(path, out);
  Fields top(context, *root, "catalog", {"schema", "module", "defaults", "capsule"});
  detail::check_schema(context, top);

  CapsuleModule module;
  module.source.path = path;
  if (auto name = top.identifier("module", IdentifierKind::Name)) {
    module.name = *name;
    module.where = context.at(*top.node("module"));
    if (name->empty()) context.error(DiagCode::InvalidValue, module.where, "`module` must not be empty");
  } else if (top.node("module") == nullptr) {
    top.missing("module", "the capsule module name, unique across everything loaded");
  }

  PartialCapsule defaults;
  if (const toml::table* table = top.table("defaults")) defaults = parse_partial(context, *table, "[defaults]", true);

  const toml::array* capsules = top.array("capsule");
  if (capsules != nullptr && capsules->empty()) {
    // `capsule = []` declares a module of nothing, as a missing `capsule` does: same error.
    context.error(DiagCode::MissingField, context.at(*capsules),
                  "catalog declares no capsules (`capsule = []`); expected at least one [[capsule]] table");
  }
  if (capsules == nullptr && top.node("capsule") == nullptr) {
    top.missing("capsule", "at least one [[capsule]] table");
  }
  using Identity = std::tuple<std::string, Op, Provider, Device>;
  std::map<Identity, SourceLoc> seen;
  Finisher finisher{context, options};
  if (capsules != nullptr) {
    module.capsules.reserve(capsules->size());
    for (const toml::node& entry : *capsules) {
      const auto* table = entry.as_table();
      if (table == nullptr) {
        context.error(DiagCode::WrongType, context.at(entry),
                      str("each `capsule` entry must be a [[capsule]] table, got ", detail::type_name(entry)));
        continue;
      }
      auto capsule = finisher.finish(parse_partial(context, *table, "[[capsule]]", false), defaults);
      if (!capsule) continue;
      auto [it, inserted] = seen.emplace(Identity{capsule->name, capsule->op, capsule->provider, capsule->device},
                                         capsule->where);
      if (!inserted) {
        context.error(DiagCode::DuplicateIdentity, capsule->where,
                      str("duplicate backend capsule identity `", capsule->name, "`"), {},
                      {str("first declared at ", it->second.file, ":", it->second.line, ":", it->second.column)});
        continue;
      }
      module.capsules.push_back(std::move(*capsule));
    }
  }
  if (context.failed()) return std::nullopt;
  return module;
}

std::optional<CapsuleModule> load_catalog(const std::filesystem::path& file, const LoadOptions& options,
                                          Diagnostics& out) {
  const std::string path = file.string();
  auto contents = detail::read_file(path, out);
  if (!contents) return std::nullopt;
  auto module = parse_catalog(contents->text, path, options, out);
  if (module) module->source.sha256 = contents->sha256;
  return module;
}

}  // namespace capsule
