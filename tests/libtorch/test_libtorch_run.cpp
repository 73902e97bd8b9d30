// SPDX-License-Identifier: Apache-2.0
// The shipped data with the LibTorch handlers linked into the CLI: lint finds a handler for every
// LibTorch CPU capsule; the MLP trains on LibTorch capsules under libtorch_cpu, the report naming
// them, the boundary copies and the provider's fingerprint; the CNN trains under
// libtorch_autograd_cpu with LibTorch autograd owning each call's backward, tracking checked_cpu;
// a session backpropagates through the norm, index, block and scaled_matmul regions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "capsule/handlers/libtorch.hpp"
#include "capsule/handlers/reference.hpp"
#include "capsule/runtime/session.hpp"
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

/// The gradients of x, gamma, beta and w through layer_norm, batch_norm, gather, concat, slice,
/// scatter_add, scaled_matmul and reduce_sum under `profile`; `uses` gets the capsules used.
std::vector<capsule::Tensor> norm_index_gradients(const char* profile, std::vector<capsule::CapsuleUse>* uses) {
  using namespace capsule;
  static const HandlerRegistry handlers = [] {
    HandlerRegistry r;
    REQUIRE(register_reference_handlers(r).has_value());
    REQUIRE(register_libtorch_handlers(r).has_value());
    return r;
  }();
  SessionOptions options;
  options.profile = profile;
  auto opened = Session::open(testing::shipped(), handlers, options);
  REQUIRE_MESSAGE(opened.has_value(), opened.error().message);
  Session& s = *opened;
  auto tensor = [](std::vector<std::int64_t> dims, std::vector<double> v) {
    return Tensor::from_values(Shape::make(dims).value(), DType::F64, v).value();
  };
  const Var x = s.parameter(tensor({2, 3}, {0.5, -1.25, 2, 3, 0.75, -0.5}));
  const Var gamma = s.parameter(tensor({3}, {1.5, -0.5, 2}));
  const Var beta = s.parameter(tensor({3}, {0.25, 0, -1}));
  const Var w = s.parameter(tensor({3, 2}, {1, -2, 0.5, 3, -1.5, 0.25}));
  auto call = [&](Op op, std::initializer_list<Var> in, const OpAttrs& attrs = {}) {
    auto y = s.call(op, in, attrs);
    REQUIRE_MESSAGE(y.has_value(), y.error().message);
    return *y;
  };
  OpAttrs columns;
  columns.axis = 1;
  OpAttrs gather = columns;
  gather.indices = {2, 0, 2};
  OpAttrs slice = columns;
  slice.start = 1;
  slice.end = 3;
  OpAttrs scatter = columns;
  scatter.indices = {1, 1};
  OpAttrs alpha;
  alpha.alpha = 0.5;
  const Var h = call(Op::LayerNorm, {x, gamma, beta});
  const Var b = call(Op::BatchNorm, {h});
  const Var joined = call(Op::Concat, {b, call(Op::Gather, {b}, gather)}, columns);
  const Var added = call(Op::ScatterAdd, {x, call(Op::Slice, {joined}, slice)}, scatter);
  const Var loss = call(Op::ReduceSum, {call(Op::ScaledMatmul, {added, w}, alpha)});
  auto grads = s.backward(loss);
  REQUIRE_MESSAGE(grads.has_value(), grads.error().message);
  *uses = s.capsules_used();
  return {grads->of(x), grads->of(gamma), grads->of(beta), grads->of(w)};
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
                       "    handler: LibTorch CPU matmul\n"
                       "    recheck value by freivalds.matmul (full, every call): 1000 of 1000 calls checked, 1000 "
                       "passed\n"));
    // The products' VJP is checked per backward too (freivalds.matmul.vjp, catalogs/libtorch-checked-cpu.toml).
    CHECK(has(run.out, "    recheck vjp by freivalds.matmul.vjp (full, every call): 400 of 400 calls checked, 400 "
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
    // The regions' copies are reported with every other boundary copy: the shape ops' results and
    // gradients are views of borrowed memory (26 forward calls and 25 backward each for reshape and
    // permute; broadcast's forward only, its gradient is a fresh sum), and add's two gradients are
    // the output gradient itself (25 backward calls).
    CHECK(has(run.out, "\nlibtorch boundary copies: add 50, broadcast 26, permute 51, reshape 51\n"));
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

  TEST_CASE("layer_norm, batch_norm, gather, concat, slice, scatter_add and scaled_matmul backpropagate through LibTorch "
            "autograd boundaries with the reference's gradients") {
    capsule::set_libtorch_threads(1);
    const std::int64_t live = capsule::libtorch_live_autograd_regions();
    std::vector<capsule::CapsuleUse> autograd_uses;
    std::vector<capsule::CapsuleUse> reference_uses;
    const auto autograd = norm_index_gradients("libtorch_autograd_cpu", &autograd_uses);
    const auto reference = norm_index_gradients("checked_cpu", &reference_uses);
    CHECK(capsule::libtorch_live_autograd_regions() == live);  // every graph freed at its VJP
    REQUIRE(autograd.size() == reference.size());
    for (std::size_t i = 0; i < autograd.size(); ++i) {
      CAPTURE(i);
      REQUIRE(autograd[i].defined());
      const std::vector<double> got = autograd[i].to_vector();
      const std::vector<double> want = reference[i].to_vector();
      REQUIRE(got.size() == want.size());
      // float64, eight ops of a few terms each: the parity bounds (k·n·u per op) stay far below 1e-12.
      for (std::size_t k = 0; k < got.size(); ++k) {
        CHECK(std::abs(got[k] - want[k]) <= 1e-12 * std::max(1.0, std::abs(want[k])));
      }
    }
    std::size_t boundaries = 0;
    for (const capsule::CapsuleUse& use : autograd_uses) {
      CAPTURE(use.capsule->name);
      CHECK(use.capsule->name.starts_with("libtorch.autograd."));
      CHECK(use.autograd_runtime == "LibTorch autograd");
      CHECK(use.boundary_regions == use.boundary_vjps);
      boundaries += use.boundary_regions;
    }
    CHECK(boundaries == 8);  // one region per taped call, eight calls
  }
}
