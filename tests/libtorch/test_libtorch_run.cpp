// SPDX-License-Identifier: Apache-2.0
// The shipped data with the LibTorch handlers linked into the CLI: lint finds a handler for every
// LibTorch CPU capsule; the MLP trains on LibTorch capsules under libtorch_cpu, the report naming
// them, the boundary copies and the provider's fingerprint; the CNN trains under
// libtorch_autograd_cpu with LibTorch autograd owning each call's backward, tracking checked_cpu.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "capsule/handlers/libtorch.hpp"
#include "test_support.hpp"

using capsule::testing::CliRun;
using capsule::testing::has;
using capsule::testing::run_shipped_cli;

namespace {

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

}  // namespace

TEST_SUITE("libtorch.run") {
  TEST_CASE("with the LibTorch handlers linked, lint finds a compiled handler for every LibTorch CPU capsule") {
    const CliRun lint = run_shipped_cli({"lint"});
    INFO(lint.out << lint.err);
    CHECK(lint.status == 0);
    CHECK_FALSE(has(lint.out, "error["));
    CHECK_FALSE(has(lint.out, "libtorch-cpu.toml:9:10: warning[no-compiled-handler]"));
    CHECK_FALSE(has(lint.out, "(libtorch/cpu) have no compiled handler"));
    CHECK_FALSE(has(lint.out, "(libtorch/cpu) has no compiled handler"));
    // The CPU SDPA handler opens an autograd region, so the external-autograd SDPA capsule binds:
    // no LibTorch capsule has a VJP mode its handler cannot run.
    CHECK_FALSE(has(lint.out, "warning[handler-vjp-mismatch]"));
    CHECK_FALSE(has(lint.out, "libtorch.sdpa_autograd_cpu"));
    // The CUDA capsules still have none here.
    CHECK(has(lint.out, "warning[no-compiled-handler]: 54 capsules of module `native-cuda`"));
  }

  TEST_CASE("capsule run mlp_regression --profile libtorch_checked_cpu rechecks every checked call and trains") {
    capsule::set_libtorch_threads(1);
    const CliRun run = run_shipped_cli({"run", "mlp_regression", "--profile", "libtorch_checked_cpu"});
    INFO(run.out << run.err);
    REQUIRE(run.status == 0);
    CHECK(has(run.out, "(falling)"));
    CHECK(has(run.out, "matmul -> libtorch.checked.matmul (libtorch/cpu, trusted-external, vjp=torchlean-tape): "
                       "400 forward, 600 in VJPs\n"
                       "    recheck value by freivalds.matmul (full, every call): 1000 of 1000 calls checked, 1000 "
                       "passed\n"));
    CHECK(has(run.out, "recheck value by inverse.sqrt (full, every call): 800 of 800 calls checked, 800 passed"));
    CHECK(has(run.out, "relu -> libtorch.relu (libtorch/cpu, checked"));
    CHECK_FALSE(has(run.out, "-> reference."));
  }

  TEST_CASE("capsule run mlp_regression --profile libtorch_cpu trains on LibTorch capsules") {
    capsule::set_libtorch_threads(1);
    const CliRun run = run_shipped_cli({"run", "mlp_regression", "--profile", "libtorch_cpu"});
    REQUIRE(run.status == 0);
    CHECK(has(run.out, "(falling)"));
    CHECK(has(run.out, "matmul -> libtorch.matmul (libtorch/cpu, checked, vjp=torchlean-tape): 400 forward"));
    CHECK(has(run.out, "relu -> libtorch.relu (libtorch/cpu, checked, vjp=torchlean-tape): 200 forward"));
    CHECK(has(run.out, "mse_loss -> libtorch.mse_loss"));
    CHECK_FALSE(has(run.out, "-> reference."));
    CHECK(has(run.out, "provider.libtorch.sha256 "));
    CHECK(has(run.out, "provider.libtorch.version LibTorch "));
    // The fingerprint names LibTorch's BLAS, its core and its threads (docs/fingerprint.md).
    CHECK(has(run.out, "\n  provider.libtorch.blas "));
    CHECK(has(run.out, "\n  provider.libtorch.blas.library "));
    CHECK(has(run.out, "\n  provider.libtorch.blas.core "));
    CHECK(has(run.out, "\n  provider.libtorch.threads 1\n"));
    // Every boundary copy is reported, by op: the shape ops' contiguous outputs and mse_loss's
    // scalar (docs/libtorch.md, "Copies at the boundary").
    CHECK(has(run.out, "\nlibtorch boundary copies: broadcast 600, mse_loss 200, permute 1400, reshape 400\n"));
  }

  TEST_CASE("capsule run cnn_classifier --profile libtorch_autograd_cpu trains through LibTorch autograd") {
    capsule::set_libtorch_threads(1);
    const CliRun run = run_shipped_cli({"run", "cnn_classifier", "--profile", "libtorch_autograd_cpu"});
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
    const CliRun autograd = run_shipped_cli({"run", "cnn_classifier", "--profile", "libtorch_autograd_cpu", "--format", "json"});
    const CliRun reference = run_shipped_cli({"run", "cnn_classifier", "--profile", "checked_cpu", "--format", "json"});
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
}
