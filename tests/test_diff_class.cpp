// SPDX-License-Identifier: Apache-2.0
// The class test of the trust diff (issue 8, "What it must show"): every single-field weakening
// of the shipped catalogs and profiles, generated here rather than listed by hand, must fail the
// diff; and no neutral edit of the shipped files (comments, whitespace, key order) may produce a
// finding. Calls the library, not the CLI, so the hundreds of cases stay fast.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>

#include "capsule/diff.hpp"
#include "capsule/gate.hpp"
#include "capsule/resolve.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

namespace fs = std::filesystem;
using testing::has;

DiffOptions options(bool impact) {
  DiffOptions o;
  o.today = Date{std::chrono::sys_days{std::chrono::year{2026} / 1 / 15}};
  o.impact = impact;
  return o;
}

const Tree& shipped() {
  static const Tree tree = [] {
    LoadOptions load;
    load.today = options(true).today;
    auto loaded = load_tree(testing::source_dir(), "shipped", load);
    REQUIRE(loaded.has_value());
    return std::move(*loaded);
  }();
  return tree;
}

/// `tree` with capsule `index` of module `m` edited.
Tree with_capsule(std::size_t m, std::size_t index, const std::function<void(Capsule&)>& edit) {
  Tree out = shipped();
  out.label = "edited";
  auto copy = std::make_shared<CapsuleModule>(*out.workspace.modules[m]);
  edit(copy->capsules[index]);
  out.workspace.modules[m] = copy;
  return out;
}

Tree with_module(std::size_t m, const std::function<void(CapsuleModule&)>& edit) {
  Tree out = shipped();
  out.label = "edited";
  auto copy = std::make_shared<CapsuleModule>(*out.workspace.modules[m]);
  edit(*copy);
  out.workspace.modules[m] = copy;
  return out;
}

Tree with_profile(std::size_t p, const std::function<void(Profile&)>& edit) {
  Tree out = shipped();
  out.label = "edited";
  auto copy = std::make_shared<Profile>(*out.workspace.profiles[p]);
  edit(*copy);
  out.workspace.profiles[p] = copy;
  return out;
}

bool rests_on_boundary(const Capsule& c) {
  if (c.trust == Trust::TrustedExternal) return true;
  return std::any_of(c.contracts.begin(), c.contracts.end(),
                     [](const ContractDescriptor& d) { return d.evidence.kind == EvidenceKind::TrustedBoundary; });
}

/// The oracle, written from the contract rather than from the diff's code: some op of some
/// profile now runs (gate accepted) on a capsule that rests on a trusted boundary it did not
/// rest on, or on evidence ranked lower for the same claim.
std::string plan_got_weaker(const Tree& base, const Tree& head) {
  for (const ProfilePtr& h : head.workspace.profiles) {
    const ProfilePtr b = base.workspace.find_profile(h->name);
    if (!b) continue;
    const auto was_plan = resolve_profile(base.workspace, b);
    const auto now_plan = resolve_profile(head.workspace, h);
    if (!now_plan) continue;
    for (const Op op : all_values<Op>()) {
      const Capsule* now = now_plan->planner.chosen(op);
      if (now == nullptr || !acceptance_failures(PlannedKernel{op, now}, now_plan->planner.policy()).empty()) continue;
      const Capsule* was = was_plan ? was_plan->planner.chosen(op) : nullptr;
      const bool was_runs =
          was != nullptr && acceptance_failures(PlannedKernel{op, was}, was_plan->planner.policy()).empty();
      const std::string where = str(h->name, " / ", to_string(op));
      if (rests_on_boundary(*now) && (!was_runs || !rests_on_boundary(*was))) return where + ": newly on a boundary";
      if (was == nullptr) continue;
      for (std::size_t i = 0; i < now->contracts.size(); ++i) {
        const ContractDescriptor& a = was->contracts[i];
        const ContractDescriptor& z = now->contracts[i];
        if (a.claim.kind == z.claim.kind &&
            evidence_rank(z.claim.kind, z.evidence.kind) < evidence_rank(a.claim.kind, a.evidence.kind)) {
          return where + ": weaker evidence";
        }
      }
    }
  }
  return {};
}

Evidence evidence_of(EvidenceKind kind) {
  Evidence e;
  e.kind = kind;
  if (kind == EvidenceKind::TrustedBoundary) e.reason = "generated boundary";
  else if (kind != EvidenceKind::NotApplicable && kind != EvidenceKind::Missing) {
    e.name = "generated." + std::string(to_string(kind));
  }
  return e;
}

/// One evidence of every kind, and a checker at every coverage.
std::vector<Evidence> every_evidence() {
  std::vector<Evidence> out;
  for (const EvidenceKind kind : all_values<EvidenceKind>()) {
    if (kind != EvidenceKind::Checker) {
      out.push_back(evidence_of(kind));
      continue;
    }
    for (const CheckerCoverage coverage : all_values<CheckerCoverage>()) {
      Evidence e = evidence_of(kind);
      e.coverage = coverage;
      out.push_back(e);
    }
  }
  return out;
}

/// Rewrites text without changing meaning: a comment after every line, padded `=` on key lines,
/// trailing blanks, and consecutive one-line keys of each table in reverse order.
std::string neutral_rewrite(const std::string& text) {
  static const std::regex key_line(R"(^[A-Za-z0-9_."-]+\s*=.*$)");
  const auto balanced = [](const std::string& line) {
    return std::count(line.begin(), line.end(), '[') == std::count(line.begin(), line.end(), ']') &&
           std::count(line.begin(), line.end(), '{') == std::count(line.begin(), line.end(), '}');
  };
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  // Reverse each run of one-line keys (a run never crosses a table header or a blank line).
  for (std::size_t i = 0; i < lines.size();) {
    std::size_t j = i;
    while (j < lines.size() && std::regex_match(lines[j], key_line) && balanced(lines[j])) ++j;
    if (j > i + 1) std::reverse(lines.begin() + static_cast<std::ptrdiff_t>(i), lines.begin() + static_cast<std::ptrdiff_t>(j));
    i = j == i ? i + 1 : j;
  }
  std::string out = "# rewritten without changing meaning\n\n";
  for (std::string line : lines) {
    if (std::regex_match(line, key_line)) {
      const std::size_t eq = line.find(" = ");
      if (eq != std::string::npos) line.replace(eq, 3, "   =\t ");
      line = "  " + line + "   ";
    }
    out += line + "\n# a comment line\n";
  }
  return out;
}

}  // namespace

TEST_SUITE("diff class") {
  TEST_CASE("every single-field weakening of a shipped capsule fails the diff") {
    const Tree& base = shipped();
    std::size_t cases = 0;
    for (std::size_t m = 0; m < base.workspace.modules.size(); ++m) {
      const CapsuleModule& module = *base.workspace.modules[m];
      for (std::size_t c = 0; c < module.capsules.size(); ++c) {
        const Capsule& capsule = module.capsules[c];
        // Evidence kind: every kind ranked lower for the obligation's claim.
        for (std::size_t o = 0; o < capsule.contracts.size(); ++o) {
          const ContractDescriptor& d = capsule.contracts[o];
          for (const Evidence& weaker : every_evidence()) {
            if (evidence_rank(d.claim.kind, weaker) >= evidence_rank(d.claim.kind, d.evidence)) continue;
            const Tree head = with_capsule(m, c, [&](Capsule& x) { x.contracts[o].evidence = weaker; });
            const TrustDiff diff = diff_trees(base, head, options(false));
            CAPTURE(capsule.name);
            CAPTURE(to_string(static_cast<Obligation>(o)));
            CAPTURE(to_string(weaker.kind));
            CAPTURE(to_string(weaker.coverage));
            CHECK(exit_status(diff) == 1);
            ++cases;
          }
          // Evidence naming another suite, guard, definition or reason needs review too.
          if (!d.evidence.name.empty() || !d.evidence.reason.empty()) {
            const Tree head = with_capsule(m, c, [&](Capsule& x) {
              Evidence& e = x.contracts[o].evidence;
              (e.name.empty() ? e.reason : e.name) += ".elsewhere";
            });
            CAPTURE(capsule.name);
            CAPTURE(to_string(static_cast<Obligation>(o)));
            CHECK(exit_status(diff_trees(base, head, options(false))) == 1);
            ++cases;
          }
        }
        // Trust: a checked capsule relabelled trusted-external.
        if (capsule.trust == Trust::Checked) {
          const Tree head = with_capsule(m, c, [](Capsule& x) {
            x.trust = Trust::TrustedExternal;
            x.trust_record.reason = "generated";
          });
          CAPTURE(capsule.name);
          CHECK(exit_status(diff_trees(base, head, options(false))) == 1);
          ++cases;
        }
      }
    }
    MESSAGE(cases << " capsule weakenings generated");
    CHECK(cases > 100);
  }

  TEST_CASE("every single-field widening of a shipped profile's assurance fails the diff") {
    const Tree& base = shipped();
    std::size_t cases = 0;
    for (std::size_t p = 0; p < base.workspace.profiles.size(); ++p) {
      const Profile& profile = *base.workspace.profiles[p];
      CAPTURE(profile.name);
      for (const Trust trust : all_values<Trust>()) {
        if (profile.policy.assurance.trust.contains(trust)) continue;
        const Tree head = with_profile(p, [&](Profile& x) { x.policy.assurance.trust.insert(trust); });
        CAPTURE(to_string(trust));
        CHECK(exit_status(diff_trees(base, head, options(false))) == 1);
        ++cases;
      }
      for (const EvidenceKind kind : all_values<EvidenceKind>()) {
        if (profile.policy.assurance.evidence.contains(kind)) continue;
        const Tree head = with_profile(p, [&](Profile& x) { x.policy.assurance.evidence.insert(kind); });
        CAPTURE(to_string(kind));
        CHECK(exit_status(diff_trees(base, head, options(false))) == 1);
        ++cases;
      }
      for (const Disposition refused : all_values<Disposition>()) {
        if (!profile.policy.assurance.refused.contains(refused)) continue;
        const Tree head = with_profile(p, [&](Profile& x) { x.policy.assurance.refused.erase(refused); });
        CAPTURE(to_string(refused));
        CHECK(exit_status(diff_trees(base, head, options(false))) == 1);
        ++cases;
      }
    }
    MESSAGE(cases << " assurance widenings generated");
    CHECK(cases > 10);
  }

  TEST_CASE("every recheck of fewer calls fails the diff, more calls or another seed does not") {
    const Tree& base = shipped();
    const auto recheck_change = [](const TrustDiff& diff) -> const Change* {
      for (const Change& change : diff.changes) {
        if (change.kind == ChangeKind::Recheck) return &change;
      }
      return nullptr;
    };
    const auto every = [](std::uint64_t n) {
      RecheckPolicy r;
      r.every = n;
      return r;
    };
    const auto sample = [](double p, std::uint64_t seed) {
      RecheckPolicy r;
      r.kind = RecheckPolicy::Kind::Sample;
      r.sample = p;
      r.seed = seed;
      return r;
    };
    struct Case {
      RecheckPolicy from;
      RecheckPolicy to;
      Direction direction;
    };
    const std::vector<Case> cases{
        {every(1), sample(0.01, 7), Direction::Weakened},   {every(1), every(2), Direction::Weakened},
        {every(2), every(3), Direction::Weakened},          {sample(0.5, 7), sample(0.01, 7), Direction::Weakened},
        {sample(0.5, 7), every(3), Direction::Weakened},    {sample(0.01, 7), every(1), Direction::Strengthened},
        {every(4), every(2), Direction::Strengthened},      {sample(0.01, 7), sample(0.5, 7), Direction::Strengthened},
        {sample(0.01, 7), sample(0.01, 8), Direction::Neutral}, {every(1), sample(1.0, 3), Direction::Neutral},
    };
    std::size_t generated = 0;
    for (std::size_t p = 0; p < base.workspace.profiles.size(); ++p) {
      CAPTURE(base.workspace.profiles[p]->name);
      for (const Case& c : cases) {
        CAPTURE(c.from.label());
        CAPTURE(c.to.label());
        Tree from = with_profile(p, [&](Profile& x) { x.recheck = c.from; });
        from.label = "base";
        const Tree to = with_profile(p, [&](Profile& x) { x.recheck = c.to; });
        const TrustDiff diff = diff_trees(from, to, options(false));
        const Change* change = recheck_change(diff);
        REQUIRE(change != nullptr);
        CHECK(change->direction == c.direction);
        CHECK(change->before == c.from.label());
        CHECK(change->after == c.to.label());
        CHECK(has(change->id, ":profile:" + base.workspace.profiles[p]->name + ":recheck"));
        CHECK(exit_status(diff) == (c.direction == Direction::Weakened ? 1 : 0));
        ++generated;
      }
    }
    CHECK(generated >= cases.size() * 10);
  }

  TEST_CASE("every module order, capsule order, availability and VJP edit that weakens a plan fails the diff") {
    // These fields carry no direction of their own: whether an edit weakens trust depends on
    // what the planner then selects. The oracle plans both trees; every edit it calls weaker
    // must fail the diff, and the generator must find some.
    const Tree& base = shipped();
    std::vector<std::pair<std::string, Tree>> edits;
    for (std::size_t p = 0; p < base.workspace.profiles.size(); ++p) {
      const Profile& profile = *base.workspace.profiles[p];
      for (std::size_t i = 0; i + 1 < profile.module_names.size(); ++i) {
        for (std::size_t j = i + 1; j < profile.module_names.size(); ++j) {
          edits.emplace_back(str(profile.name, " modules swap ", i, ",", j), with_profile(p, [&](Profile& x) {
                               std::swap(x.module_names[i], x.module_names[j]);
                             }));
        }
      }
      for (const Device device : all_values<Device>()) {
        edits.emplace_back(str(profile.name, " availability toggles device ", to_string(device)),
                           with_profile(p, [&](Profile& x) {
                             if (x.availability.devices.contains(device)) x.availability.devices.erase(device);
                             else x.availability.devices.insert(device);
                           }));
      }
      for (const Provider provider : all_values<Provider>()) {
        edits.emplace_back(str(profile.name, " availability toggles provider ", to_string(provider)),
                           with_profile(p, [&](Profile& x) {
                             if (x.availability.providers.contains(provider)) x.availability.providers.erase(provider);
                             else x.availability.providers.insert(provider);
                           }));
      }
      for (const VjpMode mode : all_values<VjpMode>()) {
        if (mode == profile.policy.vjp) continue;
        edits.emplace_back(str(profile.name, " vjp ", to_string(mode)),
                           with_profile(p, [&](Profile& x) { x.policy.vjp = mode; }));
      }
    }
    for (std::size_t m = 0; m < base.workspace.modules.size(); ++m) {
      const CapsuleModule& module = *base.workspace.modules[m];
      for (std::size_t c = 0; c + 1 < module.capsules.size(); ++c) {
        edits.emplace_back(str(module.name, " capsule order swap ", c), with_module(m, [&](CapsuleModule& x) {
                             std::swap(x.capsules[c], x.capsules[c + 1]);
                           }));
      }
      for (std::size_t c = 0; c < module.capsules.size(); ++c) {
        for (const VjpMode mode : all_values<VjpMode>()) {
          if (mode == module.capsules[c].vjp) continue;
          edits.emplace_back(str(module.capsules[c].name, " vjp ", to_string(mode)),
                             with_module(m, [&](CapsuleModule& x) { x.capsules[c].vjp = mode; }));
        }
      }
    }
    std::size_t weakening = 0;
    for (const auto& [name, head] : edits) {
      const std::string why = plan_got_weaker(base, head);
      if (why.empty()) continue;
      ++weakening;
      CAPTURE(name);
      CAPTURE(why);
      CHECK(exit_status(diff_trees(base, head, options(true))) == 1);
    }
    MESSAGE(edits.size() << " structural edits generated, " << weakening << " weaken a plan");
    CHECK(weakening > 0);
  }

  TEST_CASE("profiles that plan alike share their planning, each keeping its own name and place") {
    // Note [Impact cost]: the rows of equal planning inputs are computed once and reused.
    Tree base = shipped();
    const ProfilePtr original = base.workspace.find_profile("checked_cpu");
    REQUIRE(original != nullptr);
    auto twin = std::make_shared<Profile>(*original);
    twin->name = "checked_cpu_twin";
    twin->where.line = 99;
    base.workspace.profiles.push_back(twin);
    Tree head = base;
    for (ModulePtr& m : head.workspace.modules) {
      if (m->name != "reference") continue;
      auto copy = std::make_shared<CapsuleModule>(*m);
      for (Capsule& c : copy->capsules) {
        if (c.name == "reference.relu") c.contract(Obligation::Value).evidence = evidence_of(EvidenceKind::TrustedBoundary);
      }
      m = copy;
    }
    const TrustDiff diff = diff_trees(base, head, options(true));
    std::vector<std::string> rows;
    for (const Impact& row : diff.impacts) {
      if (row.op == Op::Relu && row.direction == Direction::Weakened && row.profile.starts_with("checked_cpu")) rows.push_back(str(row.profile, "@", row.where.line));
    }
    std::sort(rows.begin(), rows.end());
    CHECK(rows == std::vector<std::string>{str("checked_cpu@", original->where.line), "checked_cpu_twin@99"});
  }

  TEST_CASE("neutral rewrites of every shipped file (comments, whitespace, key order) produce no finding") {
    const fs::path scratch = fs::temp_directory_path() / str("capsule-diff-class-", ::getpid());
    fs::remove_all(scratch);
    std::size_t rewritten = 0;
    for (const std::string_view dir : {"catalogs", "profiles"}) {
      fs::create_directories(scratch / dir);
      for (const auto& entry : fs::directory_iterator(testing::source_dir() / dir)) {
        const std::string text = testing::read_text(entry.path());
        const std::string neutral = neutral_rewrite(text);
        CHECK(neutral != text);
        std::ofstream(scratch / dir / entry.path().filename()) << neutral;
        ++rewritten;
      }
    }
    LoadOptions load;
    load.today = options(true).today;
    const auto head = load_tree(scratch, "rewritten", load);
    REQUIRE_MESSAGE(head.has_value(), (head ? std::string() : render(head.error())));
    const TrustDiff diff = diff_trees(shipped(), *head, options(true));
    for (const Change& c : diff.changes) CHECK_MESSAGE(false, c.id);
    for (const Impact& row : diff.impacts) CHECK_MESSAGE(false, row.id);
    CHECK(diff.empty());
    CHECK(exit_status(diff) == 0);
    CHECK(rewritten > 10);
    fs::remove_all(scratch);
  }
}

}  // namespace capsule
