// SPDX-License-Identifier: Apache-2.0
// The libtorch_cpu and libtorch_autograd_cpu profiles and their catalogs in every build:
// checked_cpu never selects a LibTorch capsule (even when a profile edit loads the module),
// libtorch_cpu trains the MLP with LibTorch capsules and libtorch_autograd_cpu the CNN with
// LibTorch autograd owning each call's backward where the provider is built, and both fail at
// bind (never falling back to the reference) where it is not.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#if defined(CAPSULE_HAVE_LIBTORCH)
#include "capsule/handlers/libtorch.hpp"
#endif
#include "test_support.hpp"

using capsule::testing::CliRun;
using capsule::testing::has;
using capsule::testing::source_dir;

namespace {

/// Every op the libtorch-cpu catalog has a capsule for.
std::string libtorch_ops() {
  std::string ops;
  for (const capsule::Capsule& c : capsule::testing::shipped_module("libtorch-cpu")->capsules) {
    ops += (ops.empty() ? "" : ",") + std::string(capsule::to_string(c.op));
  }
  return ops;
}

/// The `losses` array of an example's `--format json` report.
std::vector<double> json_losses(const std::string& out) {
  std::vector<double> losses;
  const std::size_t open = out.find("\"losses\":[");
  if (open == std::string::npos) return losses;
  std::size_t at = open + 10;
  while (at < out.size() && out[at] != ']') {
    std::size_t used = 0;
    losses.push_back(std::stod(out.substr(at), &used));
    at += used;
    if (at < out.size() && out[at] == ',') ++at;
  }
  return losses;
}

CliRun shipped_cli(std::vector<std::string> args) {
  args.push_back("--catalogs");
  args.push_back((source_dir() / "catalogs").string());
  args.push_back("--profiles");
  args.push_back((source_dir() / "profiles").string());
  return capsule::testing::run_cli(std::move(args));
}

}  // namespace

TEST_SUITE("libtorch.profiles") {
  TEST_CASE("checked_cpu never selects a LibTorch capsule, even with the libtorch-cpu module loaded") {
    const std::string ops = libtorch_ops();
    REQUIRE(has(ops, "matmul"));
    const CliRun shipped = shipped_cli({"plan", "--profile", "checked_cpu", "--ops", ops});
    CHECK(shipped.status == 0);
    CHECK(has(shipped.out, "reference.matmul"));
    CHECK_FALSE(has(shipped.out, "provider=libtorch"));

    // A profile edit that loads the module first: availability still admits only the reference
    // and torchlean providers, so nothing changes.
    capsule::testing::ScratchTree tree("libtorch-checked-cpu");
    tree.replace("profiles/checked_cpu.toml", R"(modules = ["attention",)", R"(modules = ["libtorch-cpu", "attention",)");
    const CliRun edited = capsule::testing::run_cli({"plan", "--profile", "checked_cpu", "--ops", ops, "--catalogs",
                                                     tree.catalogs().string(), "--profiles", tree.profiles().string()});
    CHECK(edited.status == 0);
    CHECK(has(edited.out, "reference.matmul"));
    CHECK_FALSE(has(edited.out, "provider=libtorch"));
  }

  TEST_CASE("libtorch_cpu plans every op of the libtorch-cpu catalog on a LibTorch capsule") {
    const CliRun plan = shipped_cli({"plan", "--profile", "libtorch_cpu", "--ops", libtorch_ops()});
    CHECK(plan.status == 0);
    CHECK(has(plan.out, "libtorch.matmul"));
    CHECK(has(plan.out, "libtorch.conv"));
    CHECK_FALSE(has(plan.out, "provider=reference"));
  }

  TEST_CASE("libtorch_autograd_cpu plans every op on an external-autograd LibTorch capsule, and nothing else") {
    const CliRun plan = shipped_cli({"plan", "--profile", "libtorch_autograd_cpu", "--ops", libtorch_ops()});
    CHECK(plan.status == 0);
    CHECK(has(plan.out, "libtorch.autograd.matmul"));
    CHECK(has(plan.out, "libtorch.autograd.conv"));
    CHECK_FALSE(has(plan.out, "provider=reference"));
    CHECK_FALSE(has(plan.out, "vjp=torchlean-tape"));
    // An op without a LibTorch autograd capsule fails to plan; the reference never stands in.
    const CliRun missing = shipped_cli({"plan", "--profile", "libtorch_autograd_cpu", "--ops", "layer_norm"});
    CHECK(missing.status != 0);
    CHECK(has(missing.out + missing.err, "layer_norm"));
    CHECK_FALSE(has(missing.out, "reference.layer_norm"));
  }

#if defined(CAPSULE_HAVE_LIBTORCH)
  TEST_CASE("capsule run cnn_classifier --profile libtorch_autograd_cpu trains through LibTorch autograd") {
    capsule::set_libtorch_threads(1);
    const CliRun run = shipped_cli({"run", "cnn_classifier", "--profile", "libtorch_autograd_cpu"});
    REQUIRE_MESSAGE(run.status == 0, run.err);
    CHECK(has(run.out, "step 25/25 loss "));
    CHECK(has(run.out, "conv -> libtorch.autograd.conv (libtorch/cpu, checked, vjp=external-autograd): 26 forward"));
    CHECK(has(run.out, "max_pool -> libtorch.autograd.max_pool (libtorch/cpu, checked, vjp=external-autograd)"));
    CHECK(has(run.out, "cross_entropy -> libtorch.autograd.cross_entropy"));
    CHECK(has(run.out, "    external-autograd boundary: LibTorch autograd, one region per call: 25 recorded, 25 backward\n"));
    CHECK_FALSE(has(run.out, "-> reference."));
    CHECK_FALSE(has(run.out, "vjp=torchlean-tape"));
    CHECK(capsule::libtorch_live_autograd_regions() == 0);  // every region's graph was freed
  }

  TEST_CASE("libtorch_autograd_cpu's CNN losses track checked_cpu's within 1e-3 relative on the same seed") {
    capsule::set_libtorch_threads(1);
    const CliRun autograd = shipped_cli({"run", "cnn_classifier", "--profile", "libtorch_autograd_cpu", "--format", "json"});
    const CliRun reference = shipped_cli({"run", "cnn_classifier", "--profile", "checked_cpu", "--format", "json"});
    REQUIRE_MESSAGE(autograd.status == 0, autograd.err);
    REQUIRE_MESSAGE(reference.status == 0, reference.err);
    const std::vector<double> got = json_losses(autograd.out);
    const std::vector<double> want = json_losses(reference.out);
    REQUIRE(got.size() == 25);
    REQUIRE(want.size() == got.size());
    for (std::size_t step = 0; step < 10; ++step) {
      CAPTURE(step);
      CHECK(std::abs(got[step] - want[step]) <= 1e-3 * std::abs(want[step]));
    }
    // A falling loss: the run's last loss is well below its first.
    CHECK(got.back() < 0.1 * got.front());
  }

  TEST_CASE("capsule run mlp_regression --profile libtorch_cpu trains on LibTorch capsules") {
    capsule::set_libtorch_threads(1);
    const CliRun run = shipped_cli({"run", "mlp_regression", "--profile", "libtorch_cpu"});
    REQUIRE(run.status == 0);
    CHECK(has(run.out, "(falling)"));
    CHECK(has(run.out, "matmul -> libtorch.matmul (libtorch/cpu, checked, vjp=torchlean-tape): 400 forward"));
    CHECK(has(run.out, "relu -> libtorch.relu (libtorch/cpu, checked, vjp=torchlean-tape): 200 forward"));
    CHECK(has(run.out, "mse_loss -> libtorch.mse_loss"));
    CHECK_FALSE(has(run.out, "-> reference."));
    CHECK(has(run.out, "provider.libtorch.sha256 "));
    CHECK(has(run.out, "provider.libtorch.version LibTorch "));
  }
#else
  TEST_CASE("without the LibTorch provider, libtorch_cpu loads and its run fails at bind, never falling back") {
    const CliRun lint = shipped_cli({"lint"});
    CHECK_FALSE(has(lint.err + lint.out, "error["));
    const CliRun run = shipped_cli({"run", "mlp_regression", "--profile", "libtorch_cpu"});
    CHECK(run.status != 0);
    CHECK(has(run.err, "error[no-handler]"));
    CHECK(has(run.err, "(libtorch/cpu), but no matching executable handler is linked"));
    CHECK_FALSE(has(run.out, "step 1/"));
    CHECK_FALSE(has(run.out, "-> reference.matmul"));
    const CliRun autograd = shipped_cli({"run", "cnn_classifier", "--profile", "libtorch_autograd_cpu"});
    CHECK(autograd.status != 0);
    CHECK(has(autograd.err, "error[no-handler]"));
    CHECK_FALSE(has(autograd.out, "step 1/"));
    CHECK_FALSE(has(autograd.out, "-> reference."));
  }
#endif
}
