// SPDX-License-Identifier: Apache-2.0
// The libtorch.cuda suites for the CUDA twins declared in catalogs/libtorch-cuda-model.toml, and
// for TorchLean's SDPA pair on CUDA: the LibTorch parity tables (tests/libtorch/parity_table.hpp,
// and attention_table.hpp for the attention family), the ones their CPU twins pass in
// libtorch.values and libtorch.vjps, run with the handler on the device. Inputs and the
// reference's answer are made on the host; the twin gets copies on the device and its results
// come back (upload, download). Same cases, and the same bounds but two (AtenBackend::Cuda):
// ATen's CUDA index_add_ sums repeated indices with atomics, so gather's adjoint and scatter_add
// get the bound of a sum in any order where the CPU's in-order sums are exact, and sigmoid's
// forward, 1/(1 + expf(−x)) with libdevice's expf, gets 6 ulps for the CPU's 4. The other bounds
// hold for any summation order and for libdevice's function accuracy (docs/libtorch.md, "Parity
// bounds on CUDA"); where a CUDA kernel misses one, the derivation is what a GPU run corrects.
//
// The eight vendor-class ops (matmul, scaled_matmul, linear, conv, conv_transpose, max_pool,
// avg_pool, batch_norm) keep their own GPU cases (parity.cpp), shared with cuBLAS and cuDNN.
//
// This file needs no LibTorch header, so it is compiled in every build of capsule_gpu_tests; its
// cases exist only where LibTorch has CUDA (CAPSULE_HAVE_LIBTORCH_CUDA), like the twins.
#include "libtorch_cuda_table.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "attention_table.hpp"
#include "gpu_support.hpp"
#include "parity_suites.hpp"
#include "parity_table.hpp"
#include "special_cases.hpp"

namespace capsule::gpu_test {

std::vector<Op> libtorch_table_ops() {
  const std::vector<Op>& own_cases = parity_ops(Provider::Libtorch);
  const auto has_own_cases = [&](Op op) { return std::find(own_cases.begin(), own_cases.end(), op) != own_cases.end(); };
  std::vector<Op> ops;
  for (const Op op : libtorch_parity::covered_ops()) {
    if (!has_own_cases(op)) ops.push_back(op);
  }
  // SDPA's CUDA capsules are TorchLean's pair (catalogs/libtorch.toml); the attention table runs
  // on them too (run_libtorch_table), beside the §10.16 fixture.
  for (const Op op : libtorch_parity::attention_ops()) {
    if (!has_own_cases(op) && op != Op::ScaledDotProductAttention) ops.push_back(op);
  }
  return ops;
}

namespace {

bool in_attention_table(Op op) {
  const std::vector<Op> ops = libtorch_parity::attention_ops();
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

/// The attention table's cases of `op`, in both dtypes. Each case checks the forward and the
/// adjoint together (the adjoint takes the forward's output), in either suite, as on the CPU.
std::size_t run_attention_table(const HandlerSpec& twin, Op op, Obligation obligation,
                                const libtorch_parity::Placement& on_device) {
  std::mt19937_64 rng(obligation == Obligation::Value ? 3900 : 3950);
  std::size_t cases = 0;
  for (const DType dtype : {DType::F32, DType::F64}) {
    std::vector<libtorch_parity::AttentionCase> all = libtorch_parity::attention_random_cases(dtype, rng);
    for (libtorch_parity::AttentionCase& c : libtorch_parity::attention_special_cases(dtype)) all.push_back(std::move(c));
    for (const libtorch_parity::AttentionCase& c : all) {
      if (c.op != op) continue;
      libtorch_parity::check_attention_case(twin, reference_handler(op), c, rng, on_device);
      ++cases;
    }
  }
  return cases;
}

}  // namespace

void run_libtorch_table(Op op, Obligation obligation) {
  if (skip_without_device()) return;
  const HandlerSpec* twin = cuda_handler(op, Provider::Libtorch);
  REQUIRE_MESSAGE(twin != nullptr, "this build registers no libtorch handler for " << to_string(op) << " on cuda");
  const libtorch_parity::Placement on_device{&upload, &download};
  if (in_attention_table(op)) {
    CHECK_MESSAGE(run_attention_table(*twin, op, obligation, on_device) > 0,
                  "the attention table has no case for " << to_string(op));
    return;
  }
  // The CPU suites' seeds differ; any seed is a fair draw, and a fixed one makes a miss repeatable.
  std::uint64_t seed = obligation == Obligation::Value ? 3100 : 3500;
  std::size_t cases = 0;
  for (const libtorch_parity::ParityCase& c : libtorch_parity::parity_cases(libtorch_parity::AtenBackend::Cuda)) {
    if (c.op != op) continue;
    for (const DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(c.name);
      CAPTURE(to_string(dtype));
      if (obligation == Obligation::Value) {
        libtorch_parity::check_forward(*twin, reference_handler(op), c, dtype, ++seed, on_device);
      } else {
        libtorch_parity::check_backward(*twin, reference_handler(op), c, dtype, ++seed, on_device);
      }
      ++cases;
    }
  }
  CHECK_MESSAGE(cases > 0, "the parity table has no case for " << to_string(op));
}

void run_libtorch_specials(Obligation obligation) {
  if (skip_without_device()) return;
  const libtorch_parity::Placement on_device{&upload, &download};
  const bool backward = obligation == Obligation::Vjp;
  // The plain handlers' checks of the CPU suites' "pointwise ... special-value classes" cases:
  // forward, and adjoints with finite and non-finite g.
  (void)libtorch_parity::for_each_special(
      backward, /*non_finite_g=*/backward, [&](Op op, const std::vector<Tensor>& inputs, const std::vector<double>& g) {
        const HandlerSpec* twin = cuda_handler(op, Provider::Libtorch);
        REQUIRE_MESSAGE(twin != nullptr, "this build registers no libtorch handler for " << to_string(op) << " on cuda");
        libtorch_parity::check_special_plain(*twin, reference_handler(op), op, inputs, g, on_device,
                                             libtorch_parity::AtenBackend::Cuda);
        return std::size_t{0};
      });
}

void run_libtorch_special_cases(Obligation obligation) {
  if (skip_without_device()) return;
  const libtorch_parity::Placement on_device{&upload, &download};
  const bool vjps = obligation == Obligation::Vjp;
  // The CPU suites' hand-made special-value cases of the other ops, on the plain handlers: the
  // softmax family and smooth_max_pool (with non-finite g in the adjoints), the normalisations,
  // clamp's signed-zero ties (forward only), and the reductions, products, convolutions, pools,
  // losses and shape ops (g = 0.75, then the special-value classes in g). Their bounds hold for
  // any summation order (Terms, Lane) or are exact where no arithmetic happens.
  for (const libtorch_parity::SpecialCase& c : libtorch_parity::every_special_case(/*non_finite_g=*/vjps)) {
    const HandlerSpec* twin = cuda_handler(c.op, Provider::Libtorch);
    REQUIRE_MESSAGE(twin != nullptr, "this build registers no libtorch handler for " << to_string(c.op) << " on cuda");
    libtorch_parity::check_special_case_plain(*twin, reference_handler(c.op), c, vjps, on_device);
  }
}

}  // namespace capsule::gpu_test

#if defined(CAPSULE_HAVE_LIBTORCH_CUDA)
using capsule::Obligation;
using capsule::Op;
using capsule::gpu_test::run_libtorch_special_cases;
using capsule::gpu_test::run_libtorch_specials;
using capsule::gpu_test::run_libtorch_table;

// Test case names start with "parity: libtorch " and end with "forward" or "vjp": CMake labels
// them `gpu` and libtorch.cuda.values or libtorch.cuda.vjps (tests/gpu/CMakeLists.txt).
TEST_SUITE("libtorch.cuda.values") {
  TEST_CASE("parity: libtorch add forward") { run_libtorch_table(Op::Add, Obligation::Value); }
  TEST_CASE("parity: libtorch sub forward") { run_libtorch_table(Op::Sub, Obligation::Value); }
  TEST_CASE("parity: libtorch mul forward") { run_libtorch_table(Op::Mul, Obligation::Value); }
  TEST_CASE("parity: libtorch div forward") { run_libtorch_table(Op::Div, Obligation::Value); }
  TEST_CASE("parity: libtorch max forward") { run_libtorch_table(Op::Max, Obligation::Value); }
  TEST_CASE("parity: libtorch min forward") { run_libtorch_table(Op::Min, Obligation::Value); }
  TEST_CASE("parity: libtorch neg forward") { run_libtorch_table(Op::Neg, Obligation::Value); }
  TEST_CASE("parity: libtorch abs forward") { run_libtorch_table(Op::Abs, Obligation::Value); }
  TEST_CASE("parity: libtorch sqrt forward") { run_libtorch_table(Op::Sqrt, Obligation::Value); }
  TEST_CASE("parity: libtorch relu forward") { run_libtorch_table(Op::Relu, Obligation::Value); }
  TEST_CASE("parity: libtorch gelu forward") { run_libtorch_table(Op::Gelu, Obligation::Value); }
  TEST_CASE("parity: libtorch sigmoid forward") { run_libtorch_table(Op::Sigmoid, Obligation::Value); }
  TEST_CASE("parity: libtorch tanh forward") { run_libtorch_table(Op::Tanh, Obligation::Value); }
  TEST_CASE("parity: libtorch exp forward") { run_libtorch_table(Op::Exp, Obligation::Value); }
  TEST_CASE("parity: libtorch log forward") { run_libtorch_table(Op::Log, Obligation::Value); }
  TEST_CASE("parity: libtorch sin forward") { run_libtorch_table(Op::Sin, Obligation::Value); }
  TEST_CASE("parity: libtorch cos forward") { run_libtorch_table(Op::Cos, Obligation::Value); }
  TEST_CASE("parity: libtorch inv forward") { run_libtorch_table(Op::Inv, Obligation::Value); }
  TEST_CASE("parity: libtorch scale forward") { run_libtorch_table(Op::Scale, Obligation::Value); }
  TEST_CASE("parity: libtorch clamp forward") { run_libtorch_table(Op::Clamp, Obligation::Value); }
  TEST_CASE("parity: libtorch safe_log forward") { run_libtorch_table(Op::SafeLog, Obligation::Value); }
  TEST_CASE("parity: libtorch softplus forward") { run_libtorch_table(Op::Softplus, Obligation::Value); }
  TEST_CASE("parity: libtorch silu forward") { run_libtorch_table(Op::Silu, Obligation::Value); }
  TEST_CASE("parity: libtorch softmax forward") { run_libtorch_table(Op::Softmax, Obligation::Value); }
  TEST_CASE("parity: libtorch log_softmax forward") { run_libtorch_table(Op::LogSoftmax, Obligation::Value); }
  TEST_CASE("parity: libtorch reduce_sum forward") { run_libtorch_table(Op::ReduceSum, Obligation::Value); }
  TEST_CASE("parity: libtorch reduce_mean forward") { run_libtorch_table(Op::ReduceMean, Obligation::Value); }
  TEST_CASE("parity: libtorch mse_loss forward") { run_libtorch_table(Op::MseLoss, Obligation::Value); }
  TEST_CASE("parity: libtorch cross_entropy forward") { run_libtorch_table(Op::CrossEntropy, Obligation::Value); }
  TEST_CASE("parity: libtorch smooth_max_pool forward") { run_libtorch_table(Op::SmoothMaxPool, Obligation::Value); }
  TEST_CASE("parity: libtorch reshape forward") { run_libtorch_table(Op::Reshape, Obligation::Value); }
  TEST_CASE("parity: libtorch permute forward") { run_libtorch_table(Op::Permute, Obligation::Value); }
  TEST_CASE("parity: libtorch broadcast forward") { run_libtorch_table(Op::Broadcast, Obligation::Value); }
  TEST_CASE("parity: libtorch layer_norm forward") { run_libtorch_table(Op::LayerNorm, Obligation::Value); }
  TEST_CASE("parity: libtorch gather forward") { run_libtorch_table(Op::Gather, Obligation::Value); }
  TEST_CASE("parity: libtorch scatter_add forward") { run_libtorch_table(Op::ScatterAdd, Obligation::Value); }
  TEST_CASE("parity: libtorch concat forward") { run_libtorch_table(Op::Concat, Obligation::Value); }
  TEST_CASE("parity: libtorch slice forward") { run_libtorch_table(Op::Slice, Obligation::Value); }
  TEST_CASE("parity: libtorch hard_masked_softmax forward") { run_libtorch_table(Op::HardMaskedSoftmax, Obligation::Value); }
  TEST_CASE("parity: libtorch softmax_matmul forward") { run_libtorch_table(Op::SoftmaxMatmul, Obligation::Value); }
  TEST_CASE("parity: libtorch scaled_dot_product_attention forward") {
    run_libtorch_table(Op::ScaledDotProductAttention, Obligation::Value);
  }
  TEST_CASE("parity: libtorch pointwise special-value classes forward") { run_libtorch_specials(Obligation::Value); }
  TEST_CASE("parity: libtorch special-value cases of the other ops forward") {
    run_libtorch_special_cases(Obligation::Value);
  }
}

TEST_SUITE("libtorch.cuda.vjps") {
  TEST_CASE("parity: libtorch add vjp") { run_libtorch_table(Op::Add, Obligation::Vjp); }
  TEST_CASE("parity: libtorch sub vjp") { run_libtorch_table(Op::Sub, Obligation::Vjp); }
  TEST_CASE("parity: libtorch mul vjp") { run_libtorch_table(Op::Mul, Obligation::Vjp); }
  TEST_CASE("parity: libtorch div vjp") { run_libtorch_table(Op::Div, Obligation::Vjp); }
  TEST_CASE("parity: libtorch max vjp") { run_libtorch_table(Op::Max, Obligation::Vjp); }
  TEST_CASE("parity: libtorch min vjp") { run_libtorch_table(Op::Min, Obligation::Vjp); }
  TEST_CASE("parity: libtorch neg vjp") { run_libtorch_table(Op::Neg, Obligation::Vjp); }
  TEST_CASE("parity: libtorch abs vjp") { run_libtorch_table(Op::Abs, Obligation::Vjp); }
  TEST_CASE("parity: libtorch sqrt vjp") { run_libtorch_table(Op::Sqrt, Obligation::Vjp); }
  TEST_CASE("parity: libtorch relu vjp") { run_libtorch_table(Op::Relu, Obligation::Vjp); }
  TEST_CASE("parity: libtorch gelu vjp") { run_libtorch_table(Op::Gelu, Obligation::Vjp); }
  TEST_CASE("parity: libtorch sigmoid vjp") { run_libtorch_table(Op::Sigmoid, Obligation::Vjp); }
  TEST_CASE("parity: libtorch tanh vjp") { run_libtorch_table(Op::Tanh, Obligation::Vjp); }
  TEST_CASE("parity: libtorch exp vjp") { run_libtorch_table(Op::Exp, Obligation::Vjp); }
  TEST_CASE("parity: libtorch log vjp") { run_libtorch_table(Op::Log, Obligation::Vjp); }
  TEST_CASE("parity: libtorch sin vjp") { run_libtorch_table(Op::Sin, Obligation::Vjp); }
  TEST_CASE("parity: libtorch cos vjp") { run_libtorch_table(Op::Cos, Obligation::Vjp); }
  TEST_CASE("parity: libtorch inv vjp") { run_libtorch_table(Op::Inv, Obligation::Vjp); }
  TEST_CASE("parity: libtorch scale vjp") { run_libtorch_table(Op::Scale, Obligation::Vjp); }
  TEST_CASE("parity: libtorch clamp vjp") { run_libtorch_table(Op::Clamp, Obligation::Vjp); }
  TEST_CASE("parity: libtorch safe_log vjp") { run_libtorch_table(Op::SafeLog, Obligation::Vjp); }
  TEST_CASE("parity: libtorch softplus vjp") { run_libtorch_table(Op::Softplus, Obligation::Vjp); }
  TEST_CASE("parity: libtorch silu vjp") { run_libtorch_table(Op::Silu, Obligation::Vjp); }
  TEST_CASE("parity: libtorch softmax vjp") { run_libtorch_table(Op::Softmax, Obligation::Vjp); }
  TEST_CASE("parity: libtorch log_softmax vjp") { run_libtorch_table(Op::LogSoftmax, Obligation::Vjp); }
  TEST_CASE("parity: libtorch reduce_sum vjp") { run_libtorch_table(Op::ReduceSum, Obligation::Vjp); }
  TEST_CASE("parity: libtorch reduce_mean vjp") { run_libtorch_table(Op::ReduceMean, Obligation::Vjp); }
  TEST_CASE("parity: libtorch mse_loss vjp") { run_libtorch_table(Op::MseLoss, Obligation::Vjp); }
  TEST_CASE("parity: libtorch cross_entropy vjp") { run_libtorch_table(Op::CrossEntropy, Obligation::Vjp); }
  TEST_CASE("parity: libtorch smooth_max_pool vjp") { run_libtorch_table(Op::SmoothMaxPool, Obligation::Vjp); }
  TEST_CASE("parity: libtorch reshape vjp") { run_libtorch_table(Op::Reshape, Obligation::Vjp); }
  TEST_CASE("parity: libtorch permute vjp") { run_libtorch_table(Op::Permute, Obligation::Vjp); }
  TEST_CASE("parity: libtorch broadcast vjp") { run_libtorch_table(Op::Broadcast, Obligation::Vjp); }
  TEST_CASE("parity: libtorch layer_norm vjp") { run_libtorch_table(Op::LayerNorm, Obligation::Vjp); }
  TEST_CASE("parity: libtorch gather vjp") { run_libtorch_table(Op::Gather, Obligation::Vjp); }
  TEST_CASE("parity: libtorch scatter_add vjp") { run_libtorch_table(Op::ScatterAdd, Obligation::Vjp); }
  TEST_CASE("parity: libtorch concat vjp") { run_libtorch_table(Op::Concat, Obligation::Vjp); }
  TEST_CASE("parity: libtorch slice vjp") { run_libtorch_table(Op::Slice, Obligation::Vjp); }
  TEST_CASE("parity: libtorch hard_masked_softmax vjp") { run_libtorch_table(Op::HardMaskedSoftmax, Obligation::Vjp); }
  TEST_CASE("parity: libtorch softmax_matmul vjp") { run_libtorch_table(Op::SoftmaxMatmul, Obligation::Vjp); }
  TEST_CASE("parity: libtorch scaled_dot_product_attention vjp") {
    run_libtorch_table(Op::ScaledDotProductAttention, Obligation::Vjp);
  }
  TEST_CASE("parity: libtorch pointwise special-value classes vjp") { run_libtorch_specials(Obligation::Vjp); }
  TEST_CASE("parity: libtorch special-value cases of the other ops vjp") { run_libtorch_special_cases(Obligation::Vjp); }
}
#endif
