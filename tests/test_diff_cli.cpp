// SPDX-License-Identifier: Apache-2.0
// `capsule diff BASE HEAD` driven through the CLI on real before/after trees (tests/data/diff),
// on git revisions of a scratch repository, and with a waivers file.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include "capsule/text.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

testing::CliRun diff(std::string_view fixture, std::vector<std::string> extra = {}) {
  const auto root = testing::test_data() / "diff" / fixture;
  std::vector<std::string> args{"diff", (root / "base").string(), (root / "head").string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return testing::run_cli(std::move(args));
}

using testing::has;

}  // namespace

TEST_SUITE("diff") {
  TEST_CASE("cli: value evidence weakened to a trusted boundary exits 1 and names the change") {
    const testing::CliRun run = diff("evidence-weakened");
    CHECK(run.status == 1);
    CHECK(has(run.out, "weakened:capsule:reference.relu:value"));
    CHECK(has(run.out, "test-suite (reference.values) -> trusted-boundary"));
    CHECK(has(run.out, "weakened:impact:checked_cpu:relu"));
  }

  TEST_CASE("cli: a relabel to checked over trusted-boundary evidence says the gate still rejects it") {
    const testing::CliRun run = diff("label-vs-evidence");
    CHECK(run.status == 1);
    CHECK(has(run.out, "libtorch.sdpa_forward"));
    CHECK(has(run.out, "trusted-external -> checked"));
    CHECK(has(run.out, "under `checked`"));
    CHECK(has(run.out, "reject"));
  }

  TEST_CASE("cli: assurance widened to external exits 1 and says the profile now admits a trusted boundary") {
    const testing::CliRun run = diff("assurance-widened");
    CHECK(run.status == 1);
    CHECK(has(run.out, "checked_cpu"));
    CHECK(has(run.out, "trusted boundary"));
  }

  TEST_CASE("cli: a module reorder lists the op whose selected capsule changes") {
    const testing::CliRun run = diff("module-reorder");
    CHECK(run.status == 1);
    CHECK(has(run.out, "weakened:impact:external_auto_cuda:scaled_dot_product_attention"));
    CHECK(has(run.out, "scaled_dot_product_attention"));
    CHECK(has(run.out, "->"));
    CHECK(has(run.out, "module order"));
  }

  TEST_CASE("cli: whitespace and comment edits produce no findings and exit 0") {
    const testing::CliRun run = diff("whitespace-only");
    CHECK(run.status == 0);
    CHECK(has(run.out, "no changes in meaning"));
    const testing::CliRun markdown = diff("whitespace-only", {"--format", "markdown"});
    CHECK(markdown.status == 0);
    CHECK(has(markdown.out, "No changes in meaning"));
  }

  TEST_CASE("cli: markdown and json formats") {
    const testing::CliRun markdown = diff("evidence-weakened", {"--format", "markdown"});
    CHECK(markdown.status == 1);
    CHECK(has(markdown.out, "### Trust diff"));
    CHECK(has(markdown.out, "| "));
    const testing::CliRun json = diff("evidence-weakened", {"--format", "json"});
    CHECK(json.status == 1);
    CHECK(json.out.front() == '{');
    CHECK(has(json.out, "\"changes\""));
    CHECK(has(json.out, "\"weakened:capsule:reference.relu:value\""));
  }

  TEST_CASE("cli: an accepted waiver passes the run and an expired one fails it") {
    testing::ScratchTree tree("diff-waivers");
    auto write_waivers = [&](std::string_view expires) {
      tree.write("waivers.toml", str(R"(schema = 1

[[waiver]]
change = "weakened:capsule:reference.relu:value"
accepted_by = "reviewer@example.org"
reason = "vendor relu accepted for the demo"
expires = )", expires, "\n"));
      return (tree.root() / "waivers.toml").string();
    };
    const std::string live = write_waivers("2099-01-01");
    const testing::CliRun waived = diff("evidence-weakened", {"--accept", live});
    INFO(waived.out);
    CHECK(waived.status == 0);
    CHECK(has(waived.out, "waived"));
    const std::string expired = write_waivers("2001-01-01");
    const testing::CliRun lapsed = diff("evidence-weakened", {"--accept", expired});
    CHECK(lapsed.status == 1);
    CHECK(has(lapsed.out, "expired"));
    tree.write("bad.toml", "schema = 1\n[[waiver]]\nchange = \"weakened:capsule:x:value\"\nacceptedby = \"me\"\n");
    const testing::CliRun bad = diff("evidence-weakened", {"--accept", (tree.root() / "bad.toml").string()});
    CHECK(bad.status == 2);
    CHECK(has(bad.err, "bad.toml:4:1"));
  }

  TEST_CASE("cli: --git compares two revisions without a checkout") {
    testing::ScratchTree tree("diff-git");
    const std::string repo = tree.root().string();
    auto git = [&](const std::string& command) {
      return std::system(str("git -C '", repo, "' ", command, " >/dev/null 2>&1").c_str());
    };
    const std::string commit = "-c user.name=t -c user.email=t@example.org commit -q";
    REQUIRE(git("init -q") == 0);
    // First revision: catalogs only (the profiles arrive later), so a tree may lack a directory.
    REQUIRE(git("add catalogs") == 0);
    REQUIRE(git(commit + " -m catalogs") == 0);
    REQUIRE(git("add profiles") == 0);
    REQUIRE(git(commit + " -m base") == 0);
    tree.replace("catalogs/reference.toml", "name = \"reference.relu\"\nop = \"relu\"\n",
                 "name = \"reference.relu\"\nop = \"relu\"\ncontracts.value = { claim = \"value-refinement\", "
                 "evidence = { kind = \"trusted-boundary\", reason = \"vendor relu\" } }\n");
    // A revision's own .gitattributes must not hide a file from review (git archive would obey
    // export-ignore).
    tree.write(".gitattributes", "catalogs/** export-ignore\n");
    REQUIRE(git("add .gitattributes") == 0);
    REQUIRE(git(commit + " -am head") == 0);
    const testing::CliRun added = testing::run_cli({"diff", "--git", "HEAD~2", "HEAD~1", "--repo", repo});
    INFO(added.err);
    CHECK(added.status != 2);
    CHECK(has(added.out, "checked_cpu"));
    CHECK(has(added.out, "base read: catalogs HEAD~2:catalogs; profiles none (no profiles/ folder: read as empty)"));
    const testing::CliRun run = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD", "--repo", repo});
    INFO(run.err);
    CHECK(run.status == 1);
    CHECK(has(run.out, "base read: catalogs HEAD~1:catalogs; profiles HEAD~1:profiles"));
    // The trees are found relative to the directory named: catalogs/ holds neither folder, and
    // that is an error naming it, never an empty tree.
    const testing::CliRun inner = testing::run_cli({"diff", "--git", "HEAD~1", "HEAD", "--repo", repo + "/catalogs"});
    CHECK(inner.status == 2);
    CHECK(has(inner.err, "`HEAD:catalogs` holds neither catalogs/ nor profiles/"));
    CHECK_FALSE(has(inner.out, "no changes"));
    CHECK(has(run.out, "trust diff HEAD~1 -> HEAD"));
    CHECK(has(run.out, "weakened:capsule:reference.relu:value"));
    // The working tree was not touched by reading the revisions.
    CHECK(has(testing::read_text(tree.root() / "catalogs/reference.toml"), "vendor relu"));
    const testing::CliRun missing = testing::run_cli({"diff", "--git", "no-such-rev", "HEAD", "--repo", repo});
    CHECK(missing.status == 2);
    CHECK(has(missing.err, "no-such-rev"));
  }

  TEST_CASE("cli: a claim that changes kind and now rests on a trusted boundary is weakened") {
    testing::ScratchTree base("diff-claim-base");
    testing::ScratchTree head("diff-claim-head");
    head.replace("catalogs/reference.toml", "name = \"reference.rand_uniform\"\nop = \"rand_uniform\"\nvjp = \"none\"\n",
                 "name = \"reference.rand_uniform\"\nop = \"rand_uniform\"\nvjp = \"torchlean-tape\"\n");
    head.replace("catalogs/reference.toml",
                 "contracts.vjp = { claim = \"vjp-unavailable\", summary = \"Random source: forward-only, no VJP is supplied or required.\", evidence = { kind = \"not-applicable\" } }",
                 "contracts.vjp = { claim = \"vjp-refinement\", mode = \"torchlean-tape\", evidence = { kind = \"trusted-boundary\", reason = \"assumed\" } }");
    const testing::CliRun run = testing::run_cli({"diff", base.root().string(), head.root().string()});
    INFO(run.out, run.err);
    CHECK(run.status == 1);
    CHECK(has(run.out, "weakened:capsule:reference.rand_uniform:vjp"));
    CHECK(has(run.out, "still labelled checked"));
  }

  TEST_CASE("cli: an impact whose gate verdict flips to accepted on a trusted boundary is weakened") {
    const std::string demote = "name = \"reference.relu\"\nop = \"relu\"\ncontracts.value = { claim = \"value-refinement\", "
                               "evidence = { kind = \"trusted-boundary\", reason = \"vendor relu\" } }\n";
    testing::ScratchTree base("diff-gate-base");
    testing::ScratchTree head("diff-gate-head");
    base.replace("catalogs/reference.toml", "name = \"reference.relu\"\nop = \"relu\"\n", demote);
    head.replace("catalogs/reference.toml", "name = \"reference.relu\"\nop = \"relu\"\n", demote);
    head.replace("profiles/checked_cpu.toml", "assurance = \"checked\"", "assurance = \"external\"");
    const testing::CliRun run = testing::run_cli({"diff", base.root().string(), head.root().string()});
    INFO(run.out, run.err);
    CHECK(run.status == 1);
    CHECK(has(run.out, "weakened:impact:checked_cpu:relu"));
  }

  TEST_CASE("cli: markdown escapes markup that a catalog could smuggle into the review summary") {
    testing::ScratchTree base("diff-md-base");
    testing::ScratchTree head("diff-md-head");
    head.replace("catalogs/reference.toml", "name = \"reference.relu\"\nop = \"relu\"\n",
                 "name = \"reference.relu\"\nop = \"relu\"\ncontracts.value = { claim = \"value-refinement\", "
                 "evidence = { kind = \"trusted-boundary\", reason = \"![x](http://e.example/a.png) <img src=x> [link](http://e.example)\" } }\n");
    const testing::CliRun run = testing::run_cli({"diff", base.root().string(), head.root().string(), "--format", "markdown"});
    CHECK(run.status == 1);
    CHECK_FALSE(has(run.out, "![x](http"));
    CHECK_FALSE(has(run.out, "<img"));
    CHECK_FALSE(has(run.out, "[link](http"));
    CHECK(has(run.out, "\\!\\[x\\](http://e.example/a.png) &lt;img src=x&gt;"));
  }

  TEST_CASE("cli: a recheck finding points at the profile's `recheck` key, in the head or, once removed, the base") {
    testing::ScratchTree base("diff-recheck-base");
    testing::ScratchTree head("diff-recheck-head");
    const std::filesystem::path profile = std::filesystem::path("profiles") / "libtorch_checked_cpu.toml";
    // The key moves down two lines in the head, so only the head's position can be right.
    head.replace(profile, "recheck = { every = 1 }", "\n\nrecheck = { sample = 0.25, seed = 3 }");
    const testing::CliRun sampled = testing::run_cli({"diff", base.root().string(), head.root().string()});
    INFO(sampled.out, sampled.err);
    CHECK(sampled.status == 1);
    CHECK(has(sampled.out, "recheck weakened"));
    CHECK(has(sampled.out, "at profiles/libtorch_checked_cpu.toml:17:1 (head)"));
    CHECK_FALSE(has(sampled.out, "at profiles/libtorch_checked_cpu.toml:10:"));  // not the profile's name
    const testing::CliRun json =
        testing::run_cli({"diff", base.root().string(), head.root().string(), "--format", "json"});
    CHECK(has(json.out, R"("where":{"side":"head","file":"profiles/libtorch_checked_cpu.toml","line":17,"column":1})"));

    // Removing the key goes back to the default (every call): the finding is at the base's key.
    head.replace(profile, "recheck = { sample = 0.25, seed = 3 }", "");
    testing::ScratchTree sparse("diff-recheck-sparse");
    sparse.replace(profile, "recheck = { every = 1 }", "recheck = { every = 4 }");
    const testing::CliRun removed = testing::run_cli({"diff", sparse.root().string(), head.root().string()});
    INFO(removed.out, removed.err);
    CHECK(has(removed.out, "recheck strengthened"));
    CHECK(has(removed.out, "at profiles/libtorch_checked_cpu.toml:15:1 (base)"));
  }

  TEST_CASE("cli: usage errors exit 2") {
    CHECK(testing::run_cli({"diff"}).status == 2);
    const testing::CliRun not_dir = testing::run_cli({"diff", "/nonexistent/base", "/nonexistent/head"});
    CHECK(not_dir.status == 2);
    CHECK(has(not_dir.err, "is not a directory"));
    const testing::CliRun format = diff("whitespace-only", {"--format", "markdwon"});
    CHECK(format.status == 2);
    CHECK(has(format.err, "did you mean `markdown`?"));
  }
}

}  // namespace capsule
