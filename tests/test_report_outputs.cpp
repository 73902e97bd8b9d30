// SPDX-License-Identifier: Apache-2.0
// Issue 12 item 8, outputs: the one Markdown table-cell function shared by the plan and diff
// renderers, tested with hostile capsule names, profile names and reasons built in code (the
// loaders refuse such names, so only code can hand them to a renderer); DOT for op lists; graph DOT
// with shapes and a legend.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/diff.hpp"
#include "capsule/escape.hpp"
#include "capsule/report.hpp"
#include "capsule/text.hpp"
#include "test_support.hpp"

using namespace capsule;
using capsule::testing::has;

namespace {

const std::string kHostileName = "evil<script>alert(1)</script>|`tick`\n&amp;";
const std::string kHostileProfile = "p<b>bold</b>|``x``\n&";
const std::string kHostileReason = "because <script>x</script> | ``` fence & \n::error::forged <br> @octocat";

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    out.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return out;
}

/// `line` without its code spans (a backtick run, up to the next run of the same length), where
/// nothing is markup. An unclosed run is kept: it then opens no span.
std::string outside_code_spans(std::string_view line) {
  std::string out;
  std::size_t at = 0;
  while (at < line.size()) {
    if (line[at] != '`') {
      out += line[at++];
      continue;
    }
    std::size_t run = 0;
    while (at + run < line.size() && line[at + run] == '`') ++run;
    std::size_t close = std::string_view::npos;
    for (std::size_t i = at + run; i < line.size();) {
      std::size_t other = 0;
      while (i + other < line.size() && line[i + other] == '`') ++other;
      if (other == run) {
        close = i;
        break;
      }
      i += other == 0 ? 1 : other;
    }
    if (close == std::string_view::npos) {
      out.append(line.substr(at, run));
      at += run;
    } else {
      at = close + run;
    }
  }
  return out;
}

/// The `|` that split a GitHub table row into cells (any not right after a backslash).
std::size_t cell_bars(std::string_view line) {
  std::size_t bars = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '|' && (i == 0 || line[i - 1] != '\\')) ++bars;
  }
  return bars;
}

/// What the diff's Markdown promises and the plan's must match: outside code spans and fenced
/// blocks (both literal) no input HTML (only the renderer's own `<br>`, `<details>`, `<summary>`
/// and the mention-breaking comment), every `&` an entity, every table row as many cells as its
/// header, and no line an input starts. (The diff's one fenced block is its waiver snippet, TOML
/// to copy, holding change ids only; the plan's Markdown has none.)
void check_markdown_inert(std::string_view markdown) {
  INFO(std::string(markdown));
  std::size_t header_bars = 0;
  bool fenced = false;
  for (const std::string_view line : lines_of(markdown)) {
    CHECK_FALSE(line.starts_with("::"));
    if (line.starts_with("```")) fenced = !fenced;
    if (fenced || line.starts_with("```")) continue;
    const std::string prose = outside_code_spans(line);
    CHECK_FALSE(has(prose, "<script"));
    CHECK_FALSE(has(prose, "<b>"));
    CHECK_FALSE(has(prose, "@octocat"));
    for (std::size_t at = prose.find('&'); at != std::string::npos; at = prose.find('&', at + 1)) {
      const std::string_view rest = std::string_view(prose).substr(at);
      CHECK_MESSAGE((rest.starts_with("&lt;") || rest.starts_with("&gt;") || rest.starts_with("&amp;")), prose);
    }
    for (std::size_t at = prose.find('<'); at != std::string::npos; at = prose.find('<', at + 1)) {
      const std::string_view rest = std::string_view(prose).substr(at);
      const bool own = rest.starts_with("<br>") || rest.starts_with("<!-- -->") || rest.starts_with("<details>") ||
                       rest.starts_with("</details>") || rest.starts_with("<summary>") || rest.starts_with("</summary>");
      CHECK_MESSAGE(own, prose);
    }
    if (!line.starts_with("|")) {
      header_bars = 0;
      continue;
    }
    if (header_bars == 0) header_bars = cell_bars(line);
    CHECK_MESSAGE(cell_bars(line) == header_bars, std::string(line));
  }
}

/// reference.relu renamed to kHostileName, its value resting on a trusted boundary whose reason is
/// kHostileReason.
Capsule hostile_capsule() {
  Capsule c = testing::shipped_capsule("reference.relu");
  c.name = kHostileName;
  Evidence& value = c.contract(Obligation::Value).evidence;
  value = Evidence{};
  value.kind = EvidenceKind::TrustedBoundary;
  value.reason = kHostileReason;
  return c;
}

/// checked_cpu under the name kHostileProfile.
ResolvedProfile hostile_profile() {
  ResolvedProfile resolved = testing::shipped_profile("checked_cpu");
  auto profile = std::make_shared<Profile>(*resolved.profile);
  profile->name = kHostileProfile;
  resolved.profile = profile;
  return resolved;
}

/// Every line outside `//` comments holds an even number of unescaped `"`: no name closes its
/// DOT string.
void check_dot_strings_closed(std::string_view dot) {
  INFO(std::string(dot));
  for (const std::string_view line : lines_of(dot)) {
    if (line.starts_with("  //")) continue;
    std::size_t quotes = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
      std::size_t slashes = 0;
      while (i > slashes && line[i - slashes - 1] == '\\') ++slashes;
      if (line[i] == '"' && slashes % 2 == 0) ++quotes;
    }
    CHECK_MESSAGE(quotes % 2 == 0, std::string(line));
  }
}

std::size_t count(std::string_view text, std::string_view part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string_view::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_SUITE("outputs") {
  TEST_CASE("markdown_cell escapes each line and joins the lines with <br>, its only HTML") {
    CHECK(markdown_cell("a&b <i>|c") == "a&amp;b &lt;i&gt;\\|c");
    CHECK(markdown_cell("x\ny") == "x\\\\ny");  // the visible \n, its backslash escaped: one line
    const std::vector<MarkdownLine> lines{{"first"}, {"<br>"}, {"waived *now*", true}};
    CHECK(markdown_cell(lines) == "first<br>&lt;br&gt;<br>**waived \\*now\\***");
    CHECK(markdown_cell(std::span<const MarkdownLine>{}).empty());
    const std::vector<MarkdownLine> empty_first{{""}, {"b"}};
    CHECK(markdown_cell(empty_first) == "<br>b");  // an empty line still counts as a line
    CHECK(markdown_cell(kHostileReason) == markdown_escape(kHostileReason));
  }

  TEST_CASE("plan and diff Markdown render a hostile capsule name, profile name and reason the same way, inertly") {
    const Capsule capsule = hostile_capsule();
    const KernelPlan plan{{PlannedKernel{Op::Relu, &capsule}}};
    const std::string plan_md =
        plan_report(hostile_profile(), plan, ReportFormat::Markdown, testing::fixed_fingerprint());
    check_markdown_inert(plan_md);
    CHECK(has(plan_md, markdown_code(kHostileProfile, MarkdownPlace::Inline)));
    CHECK(has(plan_md, str("| relu | ", markdown_code(kHostileName), " | reference | checked |")));
    CHECK(has(plan_md, str("| ", markdown_cell(evidence_label(capsule.contract(Obligation::Value).evidence)),
                           " | trusted |")));  // the kernel table and the contracts table
    CHECK(count(plan_md, markdown_cell(kHostileReason)) == 2);
    // The contracts are a table now, not a fenced block. (A line may still start with a code
    // span fenced by three backticks; its backticks inside and after keep it from opening a fence.)
    CHECK_FALSE(has(plan_md, "\n```text\n"));
    CHECK_FALSE(has(plan_md, "\n```\n"));
    CHECK_FALSE(has(plan_md, "<script>x</script>"));  // the reason is nowhere raw, not even in a span

    TrustDiff diff;
    diff.base_label = "base";
    diff.head_label = "head";
    Change change;
    change.kind = ChangeKind::Evidence;
    change.direction = Direction::Weakened;
    change.subject = kHostileName;
    change.obligation = Obligation::Value;
    change.message = kHostileReason;
    change.before = "test-suite";
    change.after = kHostileReason;
    change.notes = {kHostileReason};
    change.id = "weakened:capsule:" + kHostileName + ":value";
    diff.changes.push_back(change);
    Impact impact;
    impact.profile = kHostileProfile;
    impact.op = Op::Relu;
    impact.before.capsule = "reference.relu";
    impact.after.capsule = kHostileName;
    impact.after.evidence[static_cast<std::size_t>(Obligation::Value)] = capsule.contract(Obligation::Value).evidence;
    impact.direction = Direction::Weakened;
    impact.message = kHostileReason;
    impact.id = "weakened:impact:" + kHostileProfile + ":relu";
    diff.impacts.push_back(impact);
    const std::string diff_md = render_markdown(diff);
    check_markdown_inert(diff_md);
    CHECK_FALSE(has(diff_md, "<script>x</script>"));
    CHECK(has(diff_md, markdown_code(change.id)));
    CHECK(has(diff_md, markdown_code(kHostileProfile)));
    CHECK(has(diff_md, str("| ", markdown_code(change.id), " | ", markdown_cell(kHostileReason), "<br>test-suite → ",
                           markdown_escape(kHostileReason), "<br>note: ", markdown_escape(kHostileReason), " |")));
  }

  TEST_CASE("plan --ops --format dot: one node per op in the order given, no edges, and a legend") {
    const testing::CliRun run = testing::run_shipped_cli(
        {"plan", "--profile", "libtorch_forward_cuda", "--ops", "add,scaled_dot_product_attention,add", "--format", "dot"});
    REQUIRE(run.status == 0);
    INFO(run.out);
    CHECK(run.out.starts_with("digraph \"ops\" {\n"));
    const std::size_t first = run.out.find("  op0 [label=\"#1 add\\nnative_cuda.add\\nnative-cuda / checked\"");
    const std::size_t second = run.out.find("  op1 [label=\"#2 scaled_dot_product_attention\\nlibtorch.sdpa_forward");
    const std::size_t third = run.out.find("  op2 [label=\"#3 add\\nnative_cuda.add");
    CHECK(first != std::string::npos);
    CHECK(second > first);
    CHECK(third > second);
    CHECK(third != std::string::npos);
    CHECK_FALSE(has(run.out, "->"));  // an op list states no data flow
    CHECK(has(run.out, "peripheries=2"));  // sdpa's trusted external boundary
    CHECK(has(run.out, "  subgraph cluster_legend {\n"));
    CHECK(has(run.out, "\"legend_native-cuda\" [label=\"provider native-cuda\", fillcolor=\"#f5e3b8\"]"));
    CHECK(has(run.out, "\"legend_libtorch\" [label=\"provider libtorch\""));
    CHECK_FALSE(has(run.out, "legend_reference"));  // only providers drawn are in the legend
    CHECK(has(run.out, "legend_trusted_external"));
    CHECK(has(run.out, "legend_boundary_evidence"));
    CHECK_FALSE(has(run.out, "legend_no_kernel"));
  }

  TEST_CASE("graph DOT: shapes where the graph gives them, the no-kernel entry in the legend") {
    const testing::CliRun run = testing::run_shipped_cli(
        {"plan", "--profile", "checked_cpu", "--format", "dot", "--graph",
         (testing::source_dir() / "examples/graphs/mlp-4-8-1.graph.toml").string()});
    REQUIRE(run.status == 0);
    INFO(run.out);
    CHECK(has(run.out, "  n0 [label=\"0 input\\nshape [4]\", shape=ellipse"));
    CHECK(has(run.out, "  n2 [label=\"2 const\\nshape [8, 4]\", shape=ellipse"));
    CHECK(has(run.out, "  n4 [label=\"4 matmul\\nreference.matmul\\nreference / checked\""));  // no shape given
    CHECK(has(run.out, "legend_no_kernel"));
    CHECK(has(run.out, "\"legend_reference\""));
    check_dot_strings_closed(run.out);
  }

  TEST_CASE("DOT keeps a hostile capsule name, profile name and shape payload inside their strings") {
    const Capsule capsule = hostile_capsule();
    const ResolvedProfile resolved = hostile_profile();
    const KernelPlan plan{{PlannedKernel{Op::Relu, &capsule}}};
    const std::string ops = plan_report(resolved, plan, ReportFormat::Dot, testing::fixed_fingerprint());
    check_dot_strings_closed(ops);
    CHECK(has(ops, dot_escape(kHostileName)));
    CHECK(has(ops, dot_escape(kHostileProfile)));
    CHECK(has(ops, "style=\"rounded,filled,dashed\""));  // checked, but value rests on a boundary

    Graph graph;
    graph.name = kHostileName;
    GraphNode input;
    input.id = 0;
    input.kind = "input";
    input.payload = {{"shape", "[2]\"]; evil [label=\"x\n::error::forged"}};
    GraphNode relu;
    relu.id = 1;
    relu.kind = "relu";
    relu.op = Op::Relu;
    relu.inputs = {0};
    graph.nodes = {input, relu};
    auto planned = resolved.planner.plan_graph(graph);
    REQUIRE(planned.has_value());
    const std::vector<KernelGroup> groups = group(*planned, resolved.profile->lowering);
    const EnvironmentFingerprint environment = testing::fixed_fingerprint();
    const std::string dot = graph_report(GraphReportInput{resolved, graph, *planned, groups, environment}, ReportFormat::Dot);
    check_dot_strings_closed(dot);
    CHECK(has(dot, str("\\nshape ", dot_escape(input.payload.front().second), "\"")));
    CHECK(has(dot, "  n0 -> n1;\n"));
    for (const std::string_view line : lines_of(dot)) CHECK_FALSE(line.starts_with("::"));
  }
}
