// SPDX-License-Identifier: Apache-2.0
// The semantic trust diff (docs/trust-diff.md): real before/after trees under tests/data/diff,
// plus edits of the shipped tree made in code for the finer classification rules.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>

#include <unistd.h>

#include "capsule/diff.hpp"
#include "capsule/gate.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

using std::chrono::day;
using std::chrono::month;
using std::chrono::year;

const Date kToday{year{2026}, month{1}, day{15}};

std::filesystem::path case_dir(std::string_view name) {
  return std::filesystem::path(CAPSULE_TEST_DATA) / "diff" / std::string(name);
}

LoadOptions load_options() {
  LoadOptions options;
  options.today = kToday;
  return options;
}

DiffOptions diff_options() {
  DiffOptions options;
  options.today = kToday;
  return options;
}

Tree load(const std::filesystem::path& root, std::string label) {
  auto tree = load_tree(root, std::move(label), load_options());
  if (!tree) FAIL_CHECK(render(tree.error()));
  REQUIRE(tree.has_value());
  return std::move(*tree);
}

TrustDiff diff_case(std::string_view name) {
  const Tree base = load(case_dir(name) / "base", "base");
  const Tree head = load(case_dir(name) / "head", "head");
  return diff_trees(base, head, diff_options());
}

const Tree& shipped() {
  static const Tree tree = load(std::filesystem::path(CAPSULE_SOURCE_DIR), "shipped");
  return tree;
}

const Change* find_change(const TrustDiff& diff, std::string_view id) {
  for (const Change& c : diff.changes) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

const Impact* find_impact(const TrustDiff& diff, std::string_view profile, Op op) {
  for (const Impact& row : diff.impacts) {
    if (row.profile == profile && row.op == op) return &row;
  }
  return nullptr;
}

using testing::has;

bool any_note(const Change& c, std::string_view part) {
  return std::any_of(c.notes.begin(), c.notes.end(), [part](const std::string& n) { return has(n, part); });
}

std::string all_ids(const TrustDiff& diff) {
  std::string out;
  for (const Change& c : diff.changes) out += c.id + "\n";
  for (const Impact& row : diff.impacts) out += row.id + "\n";
  return out;
}

/// A copy of `tree` whose capsule `name` went through `edit` (in a fresh module value).
Tree with_capsule(const Tree& tree, std::string_view name, const std::function<void(Capsule&)>& edit) {
  Tree out = tree;
  out.label = "edited";
  bool found = false;
  for (ModulePtr& module : out.workspace.modules) {
    auto copy = std::make_shared<CapsuleModule>(*module);
    for (Capsule& c : copy->capsules) {
      if (c.name == name) {
        edit(c);
        found = true;
      }
    }
    module = copy;
  }
  REQUIRE_MESSAGE(found, "no shipped capsule " << name);
  return out;
}

Tree with_module(const Tree& tree, std::string_view name, const std::function<void(CapsuleModule&)>& edit) {
  Tree out = tree;
  out.label = "edited";
  for (ModulePtr& module : out.workspace.modules) {
    if (module->name != name) continue;
    auto copy = std::make_shared<CapsuleModule>(*module);
    edit(*copy);
    module = copy;
  }
  return out;
}

Tree with_profile(const Tree& tree, std::string_view name, const std::function<void(Profile&)>& edit) {
  Tree out = tree;
  out.label = "edited";
  for (ProfilePtr& profile : out.workspace.profiles) {
    if (profile->name != name) continue;
    auto copy = std::make_shared<Profile>(*profile);
    edit(*copy);
    profile = copy;
  }
  return out;
}

Waiver waiver_for(std::string change, Date expires) {
  Waiver w;
  w.change = std::move(change);
  w.accepted_by = "Ada Reviewer";
  w.reason = "reviewed in the pull request";
  w.expires = expires;
  return w;
}

}  // namespace

TEST_SUITE("diff") {

// ---- the five acceptance cases, each on real before/after trees ----------------------------------

TEST_CASE("value evidence moved from a test suite to a trusted boundary is weakened and fails") {
  const TrustDiff diff = diff_case("evidence-weakened");
  INFO(all_ids(diff));
  const Change* change = find_change(diff, "weakened:capsule:reference.relu:value");
  REQUIRE(change != nullptr);
  CHECK(change->kind == ChangeKind::Evidence);
  CHECK(change->obligation == Obligation::Value);
  CHECK(change->before == "test-suite (reference.values)");
  CHECK(change->after == "trusted-boundary (vendor relu kernel)");
  CHECK(has(change->message, "now rests on a trusted boundary"));
  CHECK(any_note(*change, "still labelled checked"));
  CHECK(change->side == Side::Head);
  CHECK(change->where.file == "catalogs/reference.toml");
  CHECK(change->where.line > 0);
  // Under checked_cpu the op keeps its capsule, but the gate now refuses it.
  const Impact* impact = find_impact(diff, "checked_cpu", Op::Relu);
  REQUIRE(impact != nullptr);
  CHECK(impact->id == "weakened:impact:checked_cpu:relu");
  CHECK(impact->before.accepted);
  CHECK_FALSE(impact->after.accepted);
  CHECK(has(impact->message, "gate under checked: accepted -> rejected"));
  CHECK(diff.impacts.size() == 1);
  CHECK(exit_status(diff) == 1);
}

TEST_CASE("relabelling trusted-external as checked while the evidence stays a trusted boundary is the label trap") {
  const TrustDiff diff = diff_case("label-vs-evidence");
  INFO(all_ids(diff));
  const Change* change = find_change(diff, "weakened:capsule:libtorch.sdpa_forward:trust");
  REQUIRE(change != nullptr);
  CHECK(change->before == "trusted-external");
  CHECK(change->after == "checked");
  CHECK(has(change->message, "the acceptance gate still rejects it under `checked`"));
  CHECK(any_note(*change, "rejected value evidence"));
  CHECK(any_note(*change, "trusted boundary: LibTorch/CUDA SDPA implementation"));
  // The evidence itself did not change, so no evidence change is reported.
  for (const Change& c : diff.changes) CHECK(c.kind != ChangeKind::Evidence);

  // The diff's verdict is the gate's: run it directly on HEAD's capsule under checked.
  const Tree head = load(case_dir("label-vs-evidence") / "head", "head");
  const Capsule* relabelled = nullptr;
  for (const ModulePtr& m : head.workspace.modules) {
    for (const Capsule& c : m->capsules) {
      if (c.name == "libtorch.sdpa_forward") relabelled = &c;
    }
  }
  REQUIRE(relabelled != nullptr);
  CHECK(relabelled->trust == Trust::Checked);
  KernelPolicy checked;
  checked.device = Device::Cuda;
  checked.assurance = AssurancePolicy::checked();
  const PlannedKernel kernel{Op::ScaledDotProductAttention, relabelled};
  CHECK_FALSE(accept(kernel, checked).has_value());
  const auto failures = acceptance_failures(kernel, checked);
  REQUIRE(failures.size() == 1);
  CHECK(failures[0].kind == AcceptanceFailure::Kind::EvidenceRejected);
  CHECK(failures[0].obligation == Obligation::Value);
  CHECK(any_note(*change, failures[0].message()));

  // The checked profile that prefers LibTorch now selects it by its label and fails at the gate.
  const Impact* impact = find_impact(diff, "libtorch_forward_strict", Op::ScaledDotProductAttention);
  REQUIRE(impact != nullptr);
  CHECK(impact->before.capsule == "native_cuda.direct_attention");
  CHECK(impact->before.accepted);
  CHECK(impact->after.capsule == "libtorch.sdpa_forward");
  CHECK_FALSE(impact->after.accepted);
  CHECK(impact->direction == Direction::Weakened);
  CHECK(exit_status(diff) == 1);
}

TEST_CASE("a relabel ranked weakened never yields impact rows ranked strengthened") {
  // Every trusted-external capsule that rests a claim on a trusted boundary relabelled checked
  // while its evidence stays what it was: the external profiles keep selecting the same capsules,
  // which rest on the same boundaries. (A trusted-external capsule whose every claim a checker or
  // test backs, as libtorch-checked-cpu's, is another case: its relabel rests on no boundary.)
  Tree head = shipped();
  std::vector<std::string> relabelled;
  for (const ModulePtr& m : shipped().workspace.modules) {
    for (const Capsule& c : m->capsules) {
      const bool on_boundary = std::any_of(c.contracts.begin(), c.contracts.end(), [](const ContractDescriptor& d) {
        return d.evidence.kind == EvidenceKind::TrustedBoundary;
      });
      if (c.trust == Trust::TrustedExternal && on_boundary) relabelled.push_back(c.name);
    }
  }
  REQUIRE_FALSE(relabelled.empty());
  for (const std::string& name : relabelled) {
    head = with_capsule(head, name, [](Capsule& c) { c.trust = Trust::Checked; });
  }
  const TrustDiff diff = diff_trees(shipped(), head, diff_options());
  INFO(all_ids(diff));
  std::size_t same_capsule_rows = 0;
  for (const Impact& row : diff.impacts) {
    CAPTURE(row.id);
    CHECK(row.direction != Direction::Strengthened);
    if (row.before.capsule == row.after.capsule) ++same_capsule_rows;
  }
  CHECK(same_capsule_rows > 0);  // the external profiles' rows exist and were judged
  for (const std::string& name : relabelled) {
    CHECK(find_change(diff, "weakened:capsule:" + name + ":trust") != nullptr);
  }
}

TEST_CASE("a profile's assurance widened to external now admits a trusted boundary and fails") {
  const TrustDiff diff = diff_case("assurance-widened");
  INFO(all_ids(diff));
  REQUIRE(diff.changes.size() == 1);
  const Change& change = diff.changes.front();
  CHECK(change.id == "weakened:profile:checked_cpu:assurance");
  CHECK(change.kind == ChangeKind::Assurance);
  CHECK(has(change.message, "assurance widened"));
  CHECK(has(change.message, "now admits a trusted boundary it did not admit before"));
  CHECK(has(change.message, "now admits trust trusted-external"));
  CHECK(has(change.before, "checked"));
  CHECK(has(change.after, "external"));
  CHECK(change.where.file == "profiles/checked_cpu.toml");
  CHECK(diff.impacts.empty());  // the same reference capsules are still selected
  CHECK(exit_status(diff) == 1);
}

TEST_CASE("reordering modules so another capsule is selected lists the op with old and new capsule") {
  const TrustDiff diff = diff_case("module-reorder");
  INFO(all_ids(diff));
  const Change* change = find_change(diff, "neutral:profile:external_auto_cuda:module-order");
  REQUIRE(change != nullptr);
  CHECK(change->before == "[attention, libtorch]");
  CHECK(change->after == "[libtorch, attention]");
  REQUIRE(diff.impacts.size() == 1);
  const Impact& impact = diff.impacts.front();
  CHECK(impact.op == Op::ScaledDotProductAttention);
  CHECK(impact.before.capsule == "native_cuda.direct_attention");
  CHECK(impact.after.capsule == "libtorch.sdpa_forward");
  CHECK(has(impact.message, "native_cuda.direct_attention -> libtorch.sdpa_forward"));
  CHECK(has(impact.message, "value evidence test-suite (native_cuda.attention) -> trusted-boundary"));
  // Catalog order alone moved the op onto a trusted boundary: weakened.
  CHECK(impact.id == "weakened:impact:external_auto_cuda:scaled_dot_product_attention");
  CHECK(exit_status(diff) == 1);
  const std::string markdown = render_markdown(diff);
  CHECK(has(markdown, "#### Impact on plans (1)"));
  CHECK(has(markdown, "native\\_cuda.direct\\_attention (checked, value test-suite (native\\_cuda.attention), vjp "
                      "test-suite (native\\_cuda.attention), gate accepted)"));
  CHECK(has(markdown, "libtorch.sdpa\\_forward (trusted-external, value trusted-boundary (LibTorch/CUDA SDPA "
                      "implementation), vjp runtime-guard (backend profile requires vjp=torchlean-tape), gate accepted)"));
}

TEST_CASE("whitespace / comments and key order produce no findings") {
  const Tree base = load(case_dir("whitespace-only") / "base", "base");
  const Tree head = load(case_dir("whitespace-only") / "head", "head");
  CHECK(head.workspace.diagnostics.empty());
  const TrustDiff diff = diff_trees(base, head, diff_options());
  INFO(all_ids(diff));
  CHECK(diff.empty());
  CHECK(exit_status(diff) == 0);
  const std::string text = render_text(diff);
  CHECK(text.starts_with("trust diff base -> head: no changes in meaning\nresult: passes (exit 0)\nbase read: catalogs "));
  // The two folder lines, then a blank line and the environment block (no entries in `diff`).
  CHECK(std::count(text.begin(), text.end(), '\n') == 6);
  CHECK(text.ends_with("\n\nenvironment: sha256 " + EnvironmentFingerprint{}.digest() + "\n"));
  const std::string markdown = render_markdown(diff);
  CHECK(markdown.starts_with("### Trust diff `base` → `head`\n\nNo changes in meaning. **Result: passes** (exit 0).\n"));
  CHECK_FALSE(has(markdown, "####"));
  CHECK(has(render_json(diff), "\"changes\":[],\"impact\":[]"));
}

// ---- finer rules, on edits of the shipped tree --------------------------------------------------

TEST_CASE("the shipped tree compared with itself is empty") {
  const TrustDiff diff = diff_trees(shipped(), shipped(), diff_options());
  CHECK(diff.empty());
  CHECK(exit_status(diff) == 0);
}

TEST_CASE("evidence order: a trusted boundary is the weakest real evidence / not-applicable fits only vjp-unavailable") {
  for (const ClaimKind claim : all_values<ClaimKind>()) {
    for (const EvidenceKind kind : all_values<EvidenceKind>()) {
      if (kind == EvidenceKind::TrustedBoundary || kind == EvidenceKind::NotApplicable || kind == EvidenceKind::Missing) {
        continue;
      }
      CHECK(evidence_rank(claim, kind) > evidence_rank(claim, EvidenceKind::TrustedBoundary));
    }
    // Missing evidence is no evidence: below a boundary for every claim.
    CHECK(evidence_rank(claim, EvidenceKind::Missing) < evidence_rank(claim, EvidenceKind::TrustedBoundary));
    if (claim == ClaimKind::VjpUnavailable) {
      CHECK(evidence_rank(claim, EvidenceKind::NotApplicable) > evidence_rank(claim, EvidenceKind::TestSuite));
    } else {
      CHECK(evidence_rank(claim, EvidenceKind::NotApplicable) < evidence_rank(claim, EvidenceKind::TrustedBoundary));
    }
  }
  CHECK(evidence_rank(ClaimKind::ValueRefinement, EvidenceKind::TestSuite) >
        evidence_rank(ClaimKind::ValueRefinement, EvidenceKind::RuntimeGuard));
  CHECK(evidence_rank(ClaimKind::ShapeSafety, EvidenceKind::RuntimeGuard) >
        evidence_rank(ClaimKind::ShapeSafety, EvidenceKind::TestSuite));
}

TEST_CASE("evidence changes are ranked per claim, a renamed suite needs review") {
  SUBCASE("shape: runtime guard to test suite is weakened") {
    const Tree head = with_capsule(shipped(), "reference.relu", [](Capsule& c) {
      c.contract(Obligation::Shape).evidence = Evidence{EvidenceKind::TestSuite, "reference.shapes", {}, {}, {}, {}, {}, {}};
    });
    const TrustDiff diff = diff_trees(shipped(), head, diff_options());
    CHECK(find_change(diff, "weakened:capsule:reference.relu:shape") != nullptr);
  }
  SUBCASE("value: test suite to shared definition is strengthened") {
    const Tree head = with_capsule(shipped(), "reference.relu", [](Capsule& c) {
      c.contract(Obligation::Value).evidence = Evidence{EvidenceKind::SharedDefinition, "Spec.relu", {}, {}, {}, {}, {}, {}};
    });
    const TrustDiff diff = diff_trees(shipped(), head, diff_options());
    CHECK(find_change(diff, "strengthened:capsule:reference.relu:value") != nullptr);
    CHECK(exit_status(diff) == 0);
  }
  SUBCASE("value: same kind, other suite needs review, and every format shows both names") {
    const Tree head = with_capsule(shipped(), "reference.relu", [](Capsule& c) {
      c.contract(Obligation::Value).evidence.name = "reference.values_v2";
    });
    const TrustDiff diff = diff_trees(shipped(), head, diff_options());
    INFO(all_ids(diff));
    const Change* change = find_change(diff, "weakened:capsule:reference.relu:value");
    REQUIRE(change != nullptr);
    CHECK(has(change->message, "value evidence now names another test-suite"));
    CHECK(change->before == "test-suite (reference.values)");
    CHECK(change->after == "test-suite (reference.values_v2)");
    CHECK(exit_status(diff) == 1);
    // The impact of the same capsule is not neutral either, and its cause covers it.
    const Impact* row = find_impact(diff, "checked_cpu", Op::Relu);
    REQUIRE(row != nullptr);
    CHECK(row->direction == Direction::Weakened);
    CHECK(row->caused_by == std::vector<std::string>{change->id});
    const std::string text = render_text(diff);
    CHECK(has(text, "test-suite (reference.values) -> test-suite (reference.values_v2)"));
    const std::string json = render_json(diff);
    CHECK(has(json, "\"name\":\"reference.values\""));
    CHECK(has(json, "\"name\":\"reference.values_v2\""));
    const std::string markdown = render_markdown(diff);
    CHECK(has(markdown, "reference.values\\_v2"));
    // Each impact row's before and after cells differ.
    std::istringstream lines(markdown);
    std::size_t rows = 0;
    for (std::string line; std::getline(lines, line);) {
      if (!line.starts_with("| `checked_cpu` | `relu`")) continue;
      ++rows;
      std::vector<std::string> cells;
      std::size_t start = 0;
      for (std::size_t bar = line.find(" | "); bar != std::string::npos; bar = line.find(" | ", start)) {
        cells.push_back(line.substr(start, bar - start));
        start = bar + 3;
      }
      REQUIRE(cells.size() >= 4);
      CHECK(cells[2] != cells[3]);
      CHECK(has(cells[2], "reference.values)"));
      CHECK(has(cells[3], "reference.values\\_v2)"));
    }
    CHECK(rows == 1);
  }
  SUBCASE("value: not-applicable backs no value claim and the checked gate would not catch it") {
    const Tree head = with_capsule(shipped(), "reference.relu", [](Capsule& c) {
      c.contract(Obligation::Value).evidence = Evidence{};
    });
    const TrustDiff diff = diff_trees(shipped(), head, diff_options());
    const Change* change = find_change(diff, "weakened:capsule:reference.relu:value");
    REQUIRE(change != nullptr);
    CHECK(any_note(*change, "not-applicable fits only a vjp-unavailable claim"));
    CHECK(exit_status(diff) == 1);
  }
}

TEST_CASE("trust label changes") {
  SUBCASE("checked to trusted-external is weakened") {
    const Tree head = with_capsule(shipped(), "reference.relu", [](Capsule& c) {
      c.trust = Trust::TrustedExternal;
      c.trust_record.reason = "vendor kernel";
    });
    const TrustDiff diff = diff_trees(shipped(), head, diff_options());
    const Change* change = find_change(diff, "weakened:capsule:reference.relu:trust");
    REQUIRE(change != nullptr);
    CHECK(change->before == "checked");
    CHECK(change->after == "trusted-external");
    // checked_cpu no longer admits it: relu becomes unplannable there (fails closed, neutral).
    const Impact* impact = find_impact(diff, "checked_cpu", Op::Relu);
    REQUIRE(impact != nullptr);
    CHECK_FALSE(impact->after.planned());
    CHECK(impact->direction == Direction::Neutral);
    CHECK(exit_status(diff) == 1);
  }
  SUBCASE("trusted-external to checked with checked evidence is strengthened") {
    const Tree head = with_capsule(shipped(), "libtorch.sdpa_forward", [](Capsule& c) {
      c.trust = Trust::Checked;
      c.contract(Obligation::Value).evidence = Evidence{EvidenceKind::TestSuite, "libtorch.values", {}, {}, {}, {}, {}, {}};
    });
    const TrustDiff diff = diff_trees(shipped(), head, diff_options());
    CHECK(find_change(diff, "strengthened:capsule:libtorch.sdpa_forward:trust") != nullptr);
    CHECK(find_change(diff, "strengthened:capsule:libtorch.sdpa_forward:value") != nullptr);
  }
}

TEST_CASE("trusted-external expiry added / extended / shortened / removed or lapsed") {
  const auto expiring = [](std::optional<Date> expires) {
    return with_capsule(shipped(), "libtorch.sdpa_forward", [expires](Capsule& c) { c.trust_record.expires = expires; });
  };
  const Tree base = expiring(Date{year{2026}, month{6}, day{30}});
  SUBCASE("added") {
    const TrustDiff diff = diff_trees(shipped(), base, diff_options());
    const Change* change = find_change(diff, "strengthened:capsule:libtorch.sdpa_forward:trust-expiry");
    REQUIRE(change != nullptr);
    CHECK(change->after == "2026-06-30");
    CHECK(change->message == "trusted-external expiry added: 2026-06-30");
  }
  SUBCASE("extended") {
    const TrustDiff diff = diff_trees(base, expiring(Date{year{2027}, month{6}, day{30}}), diff_options());
    const Change* change = find_change(diff, "weakened:capsule:libtorch.sdpa_forward:trust-expiry");
    REQUIRE(change != nullptr);
    CHECK(has(change->message, "extended from 2026-06-30 to 2027-06-30"));
  }
  SUBCASE("shortened") {
    const TrustDiff diff = diff_trees(base, expiring(Date{year{2026}, month{3}, day{1}}), diff_options());
    CHECK(find_change(diff, "strengthened:capsule:libtorch.sdpa_forward:trust-expiry") != nullptr);
  }
  SUBCASE("removed") {
    const TrustDiff diff = diff_trees(base, expiring(std::nullopt), diff_options());
    CHECK(find_change(diff, "weakened:capsule:libtorch.sdpa_forward:trust-expiry") != nullptr);
  }
  SUBCASE("lapsed") {
    const TrustDiff diff = diff_trees(base, expiring(Date{year{2025}, month{12}, day{31}}), diff_options());
    const Change* change = find_change(diff, "weakened:capsule:libtorch.sdpa_forward:trust-expiry");
    REQUIRE(change != nullptr);
    CHECK(has(change->message, "lapsed: expired on 2025-12-31 (today is 2026-01-15)"));
  }
}

TEST_CASE("a renamed capsule is matched by identity minus name") {
  const Tree head = with_capsule(shipped(), "reference.relu", [](Capsule& c) { c.name = "reference.rectifier"; });
  const TrustDiff diff = diff_trees(shipped(), head, diff_options());
  INFO(all_ids(diff));
  REQUIRE(diff.changes.size() == 1);
  CHECK(diff.changes[0].id == "neutral:capsule:reference.rectifier:renamed");
  CHECK(diff.changes[0].before == "reference.relu");
  // Every profile that selected it now names the new capsule: neutral impact rows.
  const Impact* impact = find_impact(diff, "checked_cpu", Op::Relu);
  REQUIRE(impact != nullptr);
  CHECK(impact->direction == Direction::Neutral);
  CHECK(exit_status(diff) == 0);
}

TEST_CASE("added and removed capsules") {
  SUBCASE("removed is neutral for trust but shown, and the op becomes unplannable") {
    const Tree head = with_module(shipped(), "reference", [](CapsuleModule& m) {
      std::erase_if(m.capsules, [](const Capsule& c) { return c.name == "reference.relu"; });
    });
    const TrustDiff diff = diff_trees(shipped(), head, diff_options());
    const Change* change = find_change(diff, "neutral:capsule:reference.relu:removed");
    REQUIRE(change != nullptr);
    CHECK(change->side == Side::Base);
    const Impact* impact = find_impact(diff, "checked_cpu", Op::Relu);
    REQUIRE(impact != nullptr);
    CHECK(has(impact->message, "now unplannable: no admissible kernel capsule for op relu on device cpu"));
    CHECK(exit_status(diff) == 0);
  }
  SUBCASE("added labelled checked on a trusted boundary is the label trap, weakened") {
    const Tree head = with_module(shipped(), "reference", [](CapsuleModule& m) {
      Capsule extra = m.capsules.front();
      extra.name = "reference.fast_matmul";
      extra.contract(Obligation::Value).evidence = Evidence{EvidenceKind::TrustedBoundary, {}, "vendor BLAS", {}, {}, {}, {}, {}};
      m.capsules.push_back(extra);
    });
    const TrustDiff diff = diff_trees(shipped(), head, diff_options());
    const Change* change = find_change(diff, "weakened:capsule:reference.fast_matmul:added");
    REQUIRE(change != nullptr);
    CHECK(has(change->message, "label versus evidence"));
  }
}

TEST_CASE("capsule order inside a module is a change in meaning, equal evidence keeps the impact neutral") {
  const Tree head = with_module(shipped(), "attention", [](CapsuleModule& m) {
    std::swap(m.capsules[0], m.capsules[1]);
  });
  const TrustDiff diff = diff_trees(shipped(), head, diff_options());
  INFO(all_ids(diff));
  const Change* change = find_change(diff, "neutral:module:attention:capsule-order");
  REQUIRE(change != nullptr);
  CHECK(change->before == "native_cuda.direct_attention, torchlean.composed_attention");
  CHECK(change->after == "torchlean.composed_attention, native_cuda.direct_attention");
  // libtorch_forward_strict falls back to catalog order; the new first capsule has the same
  // kinds of evidence, so the row is shown but neutral.
  const Impact* impact = find_impact(diff, "libtorch_forward_strict", Op::ScaledDotProductAttention);
  REQUIRE(impact != nullptr);
  CHECK(impact->after.capsule == "torchlean.composed_attention");
  CHECK(impact->direction == Direction::Neutral);
  CHECK(exit_status(diff) == 0);
}

TEST_CASE("assurance narrowed is strengthened and the impact shows the safer capsule") {
  const Tree head = with_profile(shipped(), "libtorch_forward_cuda",
                                 [](Profile& p) { p.policy.assurance = AssurancePolicy::checked(); });
  const TrustDiff diff = diff_trees(shipped(), head, diff_options());
  const Change* change = find_change(diff, "strengthened:profile:libtorch_forward_cuda:assurance");
  REQUIRE(change != nullptr);
  CHECK(has(change->message, "no longer admits trust trusted-external"));
  const Impact* impact = find_impact(diff, "libtorch_forward_cuda", Op::ScaledDotProductAttention);
  REQUIRE(impact != nullptr);
  CHECK(impact->before.capsule == "libtorch.sdpa_forward");
  CHECK(impact->after.capsule == "native_cuda.direct_attention");
  CHECK(impact->direction == Direction::Strengthened);
  CHECK(exit_status(diff) == 0);
}

TEST_CASE("a new profile that admits a trusted boundary is weakened") {
  Tree head = shipped();
  auto added = std::make_shared<Profile>(*head.workspace.find_profile("libtorch_forward_cuda"));
  added->name = "libtorch_forward_cuda_copy";
  head.workspace.profiles.push_back(added);
  const TrustDiff diff = diff_trees(shipped(), head, diff_options());
  CHECK(find_change(diff, "weakened:profile:libtorch_forward_cuda_copy:added") != nullptr);
  CHECK(diff.impacts.empty());
}

// ---- waivers ---------------------------------------------------------------------------------------

TEST_CASE("waived changes are shown but do not fail, an expired waiver fails") {
  TrustDiff diff = diff_case("evidence-weakened");
  REQUIRE(exit_status(diff) == 1);
  const Date later{year{2026}, month{6}, day{30}};
  const Impact* impact = find_impact(diff, "checked_cpu", Op::Relu);
  REQUIRE(impact != nullptr);
  // The profile kept reference.relu, so the capsule's own change explains the row.
  CHECK(impact->caused_by == std::vector<std::string>{"weakened:capsule:reference.relu:value"});
  SUBCASE("waiving the capsule change covers the impact it causes") {
    const std::vector<Waiver> waivers{waiver_for("weakened:capsule:reference.relu:value", later)};
    apply_waivers(diff, waivers);
    CHECK(exit_status(diff) == 0);
    const DiffCounts n = diff_counts(diff);
    CHECK(n.waived == 2);
    CHECK(n.weakened == 1);
    CHECK(impact->covered_by_cause);
    CHECK(has(render_text(diff), "waived by Ada Reviewer until 2026-06-30: reviewed in the pull request"));
    CHECK(has(render_text(diff), "caused by: weakened:capsule:reference.relu:value"));
    CHECK(has(render_markdown(diff), "weakened (waived)"));
    CHECK(has(render_json(diff), "\"waiver\":{\"change\":\"weakened:capsule:reference.relu:value\""));
    CHECK(has(render_json(diff), "\"waived_via_cause\":true"));
  }
  SUBCASE("an expired waiver waives nothing and fails even when nothing else would") {
    const std::vector<Waiver> waivers{waiver_for("weakened:capsule:reference.relu:value", later),
                                      waiver_for("weakened:capsule:reference.add:value", Date{year{2026}, month{1}, day{14}})};
    apply_waivers(diff, waivers);
    CHECK(diff.expired_waivers.size() == 1);
    CHECK(exit_status(diff) == 1);
    CHECK(has(render_text(diff), "result: fails (exit 1): 1 expired waiver\n"));
    CHECK(has(render_text(diff), "expired (fails): weakened:capsule:reference.add:value"));
  }
  SUBCASE("a waiver expiring today still holds; one naming nothing is listed as unused") {
    const std::vector<Waiver> waivers{waiver_for("weakened:capsule:reference.relu:value", kToday),
                                      waiver_for("weakened:capsule:reference.gelu:value", later)};
    apply_waivers(diff, waivers);
    CHECK(exit_status(diff) == 0);
    CHECK(diff.unused_waivers.size() == 1);
    apply_waivers(diff, {});  // applying again starts over
    CHECK(exit_status(diff) == 1);
    CHECK(diff.unused_waivers.empty());
  }
}

TEST_CASE("an impact whose capsule moved must be accepted on its own") {
  SUBCASE("module order") {
    TrustDiff diff = diff_case("module-reorder");
    REQUIRE(diff.impacts.size() == 1);
    CHECK(diff.impacts[0].caused_by.empty());
    const std::vector<Waiver> waivers{
        waiver_for("weakened:impact:external_auto_cuda:scaled_dot_product_attention", Date{year{2026}, month{6}, day{30}})};
    apply_waivers(diff, waivers);
    CHECK(exit_status(diff) == 0);
  }
  SUBCASE("label trap: waiving the relabel leaves the moved selection open") {
    TrustDiff diff = diff_case("label-vs-evidence");
    const std::vector<Waiver> waivers{
        waiver_for("weakened:capsule:libtorch.sdpa_forward:trust", Date{year{2026}, month{6}, day{30}})};
    apply_waivers(diff, waivers);
    CHECK(exit_status(diff) == 1);
    CHECK(has(render_markdown(diff), "change = \"weakened:impact:libtorch_forward_strict:scaled_dot_product_attention\""));
  }
}

// CI reads waivers from the base revision, so the offer of ready-made waivers must say in which
// order a reviewer acts, or a waiver added to the pull request itself looks like it had no effect.
TEST_CASE("the Markdown waiver offer says waivers come from the base revision: merge first, then rebase") {
  TrustDiff diff = diff_case("label-vs-evidence");
  const std::string markdown = render_markdown(diff);
  CHECK(has(markdown, "Accepting these changes after review"));
  CHECK(has(markdown, "is read from the base revision: a waiver added by this pull request itself is ignored"));
  CHECK(has(markdown, "Merge the waivers in a pull request of their own first, then rebase this one"));
  // Nothing is offered when nothing fails.
  TrustDiff clean = diff_case("label-vs-evidence");
  for (Change& change : clean.changes) change.direction = Direction::Neutral;
  for (Impact& row : clean.impacts) row.direction = Direction::Neutral;
  CHECK_FALSE(has(render_markdown(clean), "is read from the base revision"));
}

TEST_CASE("waiver files: every key required / unknown keys and malformed ids reported at file:line:col") {
  SUBCASE("a valid file") {
    const auto waivers = parse_waivers(R"(schema = 1

[[waiver]]
change = "weakened:capsule:reference.relu:value"
accepted_by = "Ada Reviewer"
reason = "vendor relu matched the reference on the value suite"
expires = 2026-06-30
)",
                                       "waivers.toml");
    REQUIRE(waivers.has_value());
    REQUIRE(waivers->size() == 1);
    CHECK(waivers->front().change == "weakened:capsule:reference.relu:value");
    CHECK(waivers->front().expires == Date{year{2026}, month{6}, day{30}});
    CHECK(waivers->front().where.line == 4);
  }
  SUBCASE("an unknown key") {
    const auto waivers = parse_waivers(R"(schema = 1
[[waiver]]
change = "weakened:capsule:reference.relu:value"
acepted_by = "Ada Reviewer"
reason = "r"
expires = 2026-06-30
)",
                                       "waivers.toml");
    REQUIRE_FALSE(waivers.has_value());
    const Diagnostics& errors = waivers.error();
    REQUIRE(!errors.empty());
    CHECK(errors[0].code == DiagCode::UnknownKey);
    CHECK(errors[0].where == SourceLoc{"waivers.toml", 4, 1});
    CHECK(errors[0].help == "did you mean `accepted_by`?");
    CHECK(render(errors[0]).rfind("waivers.toml:4:1: error[unknown-key]", 0) == 0);
    // The misspelt key also leaves accepted_by missing.
    CHECK(std::any_of(errors.begin(), errors.end(), [](const Diagnostic& d) { return d.code == DiagCode::MissingField; }));
  }
  SUBCASE("a missing expiry, a malformed id and a duplicate") {
    const auto waivers = parse_waivers(R"(schema = 1
[[waiver]]
change = "weakened:capsule:reference.relu:value"
accepted_by = "a"
reason = "r"

[[waiver]]
change = "weaker:capsule:reference.relu:value"
accepted_by = "a"
reason = "r"
expires = 2026-06-30

[[waiver]]
change = "weakened:impact:checked_cpu:relu"
accepted_by = "a"
reason = "r"
expires = 2026-06-30

[[waiver]]
change = "weakened:impact:checked_cpu:relu"
accepted_by = "b"
reason = "r"
expires = 2026-07-30
)",
                                       "w.toml");
    REQUIRE_FALSE(waivers.has_value());
    const std::string text = render(waivers.error());
    INFO(text);
    CHECK(has(text, "error[missing-field]: [[waiver]] is missing `expires`"));
    CHECK(has(text, "w.toml:8:10: error[invalid-value]: malformed change id `weaker:capsule:reference.relu:value`"));
    CHECK(has(text, "w.toml:20:10: error[invalid-value]: duplicate waiver for change `weakened:impact:checked_cpu:relu`"));
    CHECK(has(text, "first waived at w.toml:14:10"));
  }
  SUBCASE("a file that cannot be read") {
    const auto waivers = load_waivers(case_dir("no-such-waivers.toml"));
    REQUIRE_FALSE(waivers.has_value());
    CHECK(waivers.error()[0].code == DiagCode::IoError);
  }
}

// ---- renderers -------------------------------------------------------------------------------------

TEST_CASE("renderers: text lists ids / markdown reads as a pull-request comment / JSON carries everything") {
  const TrustDiff diff = diff_case("evidence-weakened");
  const std::string text = render_text(diff);
  INFO(text);
  CHECK(text.rfind("trust diff base -> head: 1 weakened, 0 strengthened, 1 neutral; 1 op impacted (1 weakened); 0 waived\n"
                   "result: fails (exit 1): 2 weakened findings not waived\n",
                   0) == 0);
  CHECK(has(text, "\nweakened changes:\n  weakened:capsule:reference.relu:value\n    value evidence weakened; the claim "
                       "now rests on a trusted boundary\n    test-suite (reference.values) -> trusted-boundary (vendor relu "
                       "kernel)\n"));
  CHECK(has(text, "    at catalogs/reference.toml:"));
  CHECK(has(text, "\nimpact on plans:\n  weakened:impact:checked_cpu:relu\n"));

  const std::string markdown = render_markdown(diff);
  INFO(markdown);
  CHECK(markdown.rfind("### Trust diff `base` → `head`\n\n**Result: fails** (exit 1: 2 weakened findings not waived) · 1 weakened, "
                           "0 strengthened, 1 neutral", 0) == 0);
  CHECK(has(markdown, "#### Weakened (1)\n\n| change | what | where |\n|---|---|---|\n| `weakened:capsule:reference.relu:value` |"));
  CHECK(has(markdown, "<details><summary>1 neutral change (shown, not failing)</summary>"));
  CHECK(has(markdown, "| `checked_cpu` | `relu` | reference.relu (checked, value test-suite (reference.values), gate "
                      "accepted) | reference.relu (checked, value trusted-boundary (vendor relu kernel), gate rejected) | "
                      "**weakened** |"));
  CHECK(has(markdown, "[[waiver]]\nchange = \"weakened:capsule:reference.relu:value\"\naccepted_by = \"\""));
  CHECK(has(markdown, "expires = 2026-04-15"));

  const std::string json = render_json(diff);
  INFO(json);
  CHECK(json.rfind("{\"format_version\":1,\"base\":\"base\",\"head\":\"head\",\"today\":\"2026-01-15\",\"summary\":{\"weakened\":1,", 0) == 0);
  CHECK(has(json, "\"exit_status\":1"));
  CHECK(has(json, "{\"id\":\"weakened:capsule:reference.relu:value\",\"direction\":\"weakened\",\"scope\":\"capsule\","
                       "\"kind\":\"evidence\",\"subject\":\"reference.relu\",\"aspect\":\"value\",\"obligation\":\"value\""));
  CHECK(has(json, "\"after\":{\"planned\":true,\"capsule\":\"reference.relu\",\"module\":\"reference\""));
  CHECK(has(json, "\"gate\":\"rejected\""));
}

TEST_CASE("change ids are unique and use the documented key format") {
  const Tree head = with_capsule(shipped(), "native_cuda.relu", [](Capsule& c) {
    c.trust = Trust::TrustedExternal;
    c.numerical.reduction = Reduction::ImplementationDefined;
    c.contract(Obligation::Vjp).evidence = Evidence{EvidenceKind::TrustedBoundary, {}, "vendor VJP", {}, {}, {}, {}, {}};
  });
  const TrustDiff diff = diff_trees(shipped(), head, diff_options());
  std::vector<std::string> ids;
  for (const Change& c : diff.changes) ids.push_back(c.id);
  for (const Impact& row : diff.impacts) ids.push_back(row.id);
  std::sort(ids.begin(), ids.end());
  CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
  CHECK(find_change(diff, "weakened:capsule:native_cuda.relu:trust") != nullptr);
  CHECK(find_change(diff, "weakened:capsule:native_cuda.relu:vjp") != nullptr);
  CHECK(find_change(diff, "neutral:capsule:native_cuda.relu:reduction") != nullptr);
}

// ---- git revisions ---------------------------------------------------------------------------------

TEST_CASE("load_git_tree reads catalogs and profiles of a revision without a checkout") {
  const std::filesystem::path repo(CAPSULE_SOURCE_DIR);
  // A source tarball, a machine without git, or a checkout git refuses to read (another owner)
  // cannot answer; that is the environment, not the diff.
  const std::string probe = "git -C '" + repo.string() + "' rev-parse --verify -q HEAD >/dev/null 2>&1";
  if (!std::filesystem::exists(repo / ".git") || std::system(probe.c_str()) != 0) {
    MESSAGE("no readable git checkout at " << repo.string() << "; skipped");
    return;
  }
  const std::filesystem::path scratch =
      std::filesystem::temp_directory_path() / ("capsule-diff-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(scratch);
  const auto tree = load_git_tree("HEAD", repo, scratch, load_options());
  REQUIRE_MESSAGE(tree.has_value(), (tree ? std::string() : render(tree.error())));
  CHECK(std::filesystem::exists(scratch / "catalogs" / "reference.toml"));
  CHECK(std::filesystem::exists(scratch / "profiles" / "checked_cpu.toml"));
  CHECK_FALSE(std::filesystem::exists(scratch / "engine"));
  CHECK(tree->workspace.find_module("reference") != nullptr);
  CHECK(tree->workspace.find_profile("checked_cpu") != nullptr);
  CHECK(tree->folders.catalogs == "HEAD:catalogs");
  CHECK(tree->folders.profiles == "HEAD:profiles");

  const auto missing = load_git_tree("no-such-revision-xyz", repo, scratch / "bad", load_options());
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().front().code == DiagCode::GitError);
  CHECK(has(missing.error().front().message, "`no-such-revision-xyz` is not a commit of the repository"));
  const auto option = load_git_tree("--output=/tmp/x", repo, scratch / "bad", load_options());
  REQUIRE_FALSE(option.has_value());
  CHECK(has(option.error().front().message, "invalid git revision"));
  std::filesystem::remove_all(scratch);
}

}  // TEST_SUITE

}  // namespace capsule

namespace capsule {
namespace {

Evidence checker_evidence(std::string name, CheckerCoverage coverage) {
  Evidence evidence;
  evidence.kind = EvidenceKind::Checker;
  evidence.name = std::move(name);
  evidence.coverage = coverage;
  return evidence;
}

}  // namespace

TEST_SUITE("diff") {
TEST_CASE("checker evidence ranks: trusted-boundary -> checker strengthens, the reverse and lost coverage weaken") {
  SUBCASE("value: trusted boundary to a full checker is strengthened, and back is weakened") {
    const Tree checked = with_capsule(shipped(), "libtorch.sdpa_forward", [](Capsule& c) {
      c.contract(Obligation::Value).evidence = checker_evidence("sdpa.sampled_reference", CheckerCoverage::Full);
    });
    const TrustDiff up = diff_trees(shipped(), checked, diff_options());
    INFO(all_ids(up));
    const Change* strengthened = find_change(up, "strengthened:capsule:libtorch.sdpa_forward:value");
    REQUIRE(strengthened != nullptr);
    CHECK(strengthened->after == "checker (sdpa.sampled_reference, full)");
    const TrustDiff down = diff_trees(checked, shipped(), diff_options());
    INFO(all_ids(down));
    CHECK(find_change(down, "weakened:capsule:libtorch.sdpa_forward:value") != nullptr);
    CHECK(exit_status(down) == 1);
  }
  SUBCASE("value: a full checker becoming partial or sampled is weakened, and the JSON says so") {
    const Tree full = with_capsule(shipped(), "reference.relu", [](Capsule& c) {
      c.contract(Obligation::Value).evidence = checker_evidence("relu.check", CheckerCoverage::Full);
    });
    for (const CheckerCoverage lower : {CheckerCoverage::Partial, CheckerCoverage::Sampled}) {
      const Tree head = with_capsule(full, "reference.relu", [&](Capsule& c) {
        c.contract(Obligation::Value).evidence.coverage = lower;
      });
      const TrustDiff diff = diff_trees(full, head, diff_options());
      INFO(all_ids(diff));
      const Change* change = find_change(diff, "weakened:capsule:reference.relu:value");
      REQUIRE(change != nullptr);
      CHECK(has(change->message, str("checker coverage weakened: full -> ", to_string(lower))));
      CHECK(exit_status(diff) == 1);
      CHECK(has(render_json(diff), str("\"coverage\":\"", to_string(lower), "\"")));
      // Impact selections carry the disposition: a partial checker is trusted, a sampled one fuzzed.
      CHECK(has(render_json(diff), lower == CheckerCoverage::Partial ? R"("coverage":"partial","disposition":"trusted")"
                                                                    : R"("coverage":"sampled","disposition":"fuzzed")"));
      // Back to full is a strengthening.
      const TrustDiff back = diff_trees(head, full, diff_options());
      CHECK(find_change(back, "strengthened:capsule:reference.relu:value") != nullptr);
    }
  }
  SUBCASE("value: a checker renamed while its coverage moves reports both changes") {
    const Tree full = with_capsule(shipped(), "reference.relu", [](Capsule& c) {
      c.contract(Obligation::Value).evidence = checker_evidence("relu.check", CheckerCoverage::Full);
    });
    const Tree head = with_capsule(full, "reference.relu", [](Capsule& c) {
      c.contract(Obligation::Value).evidence = checker_evidence("relu.other_check", CheckerCoverage::Sampled);
    });
    const TrustDiff diff = diff_trees(full, head, diff_options());
    INFO(all_ids(diff));
    int coverage = 0, renamed = 0;
    for (const Change& c : diff.changes) {
      if (c.subject != "reference.relu" || c.kind != ChangeKind::Evidence) continue;
      CHECK(c.direction == Direction::Weakened);
      if (has(c.message, "checker coverage weakened: full -> sampled")) ++coverage;
      if (has(c.message, "evidence now names another checker")) ++renamed;
    }
    CHECK(coverage == 1);
    CHECK(renamed == 1);
    CHECK(exit_status(diff) == 1);
  }
    SUBCASE("value: a test suite becoming missing is weakened") {
    const Tree head = with_capsule(shipped(), "reference.relu", [](Capsule& c) {
      c.contract(Obligation::Value).evidence = Evidence{};
      c.contract(Obligation::Value).evidence.kind = EvidenceKind::Missing;
    });
    const TrustDiff diff = diff_trees(shipped(), head, diff_options());
    INFO(all_ids(diff));
    CHECK(find_change(diff, "weakened:capsule:reference.relu:value") != nullptr);
  }
  SUBCASE("profiles: strict -> checked-runtime no longer refuses evidence and is weakened; the reverse narrows") {
    const Tree runtime = with_profile(shipped(), "strict", [](Profile& p) {
      p.policy.assurance = AssurancePolicy::checked_runtime();
    });
    const TrustDiff widened = diff_trees(shipped(), runtime, diff_options());
    INFO(all_ids(widened));
    const Change* change = find_change(widened, "weakened:profile:strict:assurance");
    REQUIRE(change != nullptr);
    CHECK(has(change->message, "no longer refuses guarded, tested, fuzzed evidence"));
    CHECK(has(change->before, "strict (trust checked, trusted-external; evidence "));
    CHECK(has(change->before, "; refused guarded, tested, fuzzed, trusted, missing)"));
    const TrustDiff narrowed = diff_trees(runtime, shipped(), diff_options());
    INFO(all_ids(narrowed));
    CHECK(find_change(narrowed, "strengthened:profile:strict:assurance") != nullptr);
  }
  SUBCASE("profiles: a new strict or checked-runtime profile admits no trusted boundary, so it is neutral") {
    const Tree base = with_profile(shipped(), "strict", [](Profile& p) { p.name = "strict_old"; });
    const TrustDiff diff = diff_trees(base, shipped(), diff_options());
    INFO(all_ids(diff));
    CHECK(find_change(diff, "neutral:profile:strict:added") != nullptr);
    const Tree runtime = with_profile(shipped(), "strict", [](Profile& p) {
      p.policy.assurance = AssurancePolicy::checked_runtime();
    });
    const TrustDiff runtime_diff = diff_trees(base, runtime, diff_options());
    INFO(all_ids(runtime_diff));
    CHECK(find_change(runtime_diff, "neutral:profile:strict:added") != nullptr);
    // Widening checked-runtime back to external does admit one.
    const Tree external = with_profile(runtime, "strict", [](Profile& p) { p.policy.assurance = AssurancePolicy::external(); });
    const TrustDiff widening = diff_trees(runtime, external, diff_options());  // outlives `widened`
    const Change* widened = find_change(widening, "weakened:profile:strict:assurance");
    REQUIRE(widened != nullptr);
    CHECK(has(widened->message, "now admits a trusted boundary it did not admit before"));
  }
  SUBCASE("the order itself") {
    const auto rank = [](ClaimKind claim, CheckerCoverage coverage) {
      return evidence_rank(claim, checker_evidence("c", coverage));
    };
    for (const ClaimKind claim : {ClaimKind::ValueRefinement, ClaimKind::VjpRefinement}) {
      CHECK(rank(claim, CheckerCoverage::Full) > evidence_rank(claim, EvidenceKind::TestSuite));
      CHECK(rank(claim, CheckerCoverage::Full) < evidence_rank(claim, EvidenceKind::SharedDefinition));
      CHECK(rank(claim, CheckerCoverage::Sampled) < evidence_rank(claim, EvidenceKind::TestSuite));
      CHECK(rank(claim, CheckerCoverage::Sampled) > evidence_rank(claim, EvidenceKind::FuzzOracle));
      CHECK(rank(claim, CheckerCoverage::Partial) < evidence_rank(claim, EvidenceKind::RuntimeGuard));
      CHECK(rank(claim, CheckerCoverage::Partial) > evidence_rank(claim, EvidenceKind::TrustedBoundary));
    }
    CHECK(rank(ClaimKind::ShapeSafety, CheckerCoverage::Full) == evidence_rank(ClaimKind::ShapeSafety, EvidenceKind::RuntimeGuard));
  }
}

}  // TEST_SUITE

}  // namespace capsule
