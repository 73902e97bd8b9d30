// SPDX-License-Identifier: Apache-2.0
// The GPU parity suites cublas.values, cublas.vjps, cudnn.values and cudnn.vjps: every CUDA
// vendor handler against the reference on the same inputs, forward and VJP (parity.hpp). One
// test case per op and obligation, so a failure in one op's cases never hides another op's
// checks from the ledger. Each suite declares its coverage from the same table its cases iterate.
#include "parity_suites.hpp"

#include <doctest/doctest.h>

#include <iostream>

#include "gpu_support.hpp"
#include "libtorch_cuda_table.hpp"
#include "parity.hpp"
#include "suite_coverage.hpp"

namespace capsule::gpu_test {

const std::vector<Op>& parity_ops(Provider provider) {
  static const std::vector<Op> cublas = {Op::Matmul, Op::ScaledMatmul, Op::Linear};
  static const std::vector<Op> cudnn = {Op::Conv, Op::ConvTranspose, Op::MaxPool, Op::AvgPool, Op::BatchNorm};
  // LibTorch on CUDA: the vendor ops, whose cases and bounds (parity.cpp) the twins share; every
  // other twin runs the LibTorch parity tables (libtorch_cuda_table.cpp).
  static const std::vector<Op> libtorch = {Op::Matmul,  Op::ScaledMatmul, Op::Linear,  Op::Conv,
                                           Op::ConvTranspose, Op::MaxPool, Op::AvgPool, Op::BatchNorm};
  static const std::vector<Op> none;
  switch (provider) {
    case Provider::Cublas: return cublas;
    case Provider::Cudnn: return cudnn;
    case Provider::Libtorch: return libtorch;
    default: return none;
  }
}

std::vector<Op> registered_parity_ops(Provider provider) {
  std::vector<Op> out;
  for (const Op op : parity_ops(provider)) {
    if (registry().find(op, provider, Device::Cuda) != nullptr) out.push_back(op);
  }
  return out;
}

namespace {

const HandlerSpec* handler_or_skip(Op op, Provider provider) {
  if (skip_without_device()) return nullptr;
  const HandlerSpec* h = cuda_handler(op, provider);
  if (h == nullptr && provider == Provider::Cudnn) {
    std::cout << "capsule-skip: this build registers no cudnn handler for " << to_string(op) << " on cuda\n";
    return nullptr;
  }
  REQUIRE_MESSAGE(h != nullptr, "this build registers no " << to_string(provider) << " handler for " << to_string(op));
  return h;
}

}  // namespace

void run_value_parity(Op op, Provider provider) {
  const HandlerSpec* h = handler_or_skip(op, provider);
  if (h == nullptr) return;
  for (const ParityCase& c : parity_cases(op)) check_forward(*h, c);
}

void run_vjp_parity(Op op, Provider provider) {
  const HandlerSpec* h = handler_or_skip(op, provider);
  if (h == nullptr) return;
  for (const ParityCase& c : parity_cases(op)) check_vjp(*h, c);
}

namespace {

using testing::SuiteCoverage;

const SuiteCoverage kCublasValues("cublas.values", Obligation::Value, Provider::Cublas, Device::Cuda,
                                  [] { return registered_parity_ops(Provider::Cublas); });
const SuiteCoverage kCublasVjps("cublas.vjps", Obligation::Vjp, Provider::Cublas, Device::Cuda,
                                [] { return registered_parity_ops(Provider::Cublas); });
const SuiteCoverage kCudnnValues("cudnn.values", Obligation::Value, Provider::Cudnn, Device::Cuda,
                                 [] { return registered_parity_ops(Provider::Cudnn); });
const SuiteCoverage kCudnnVjps("cudnn.vjps", Obligation::Vjp, Provider::Cudnn, Device::Cuda,
                               [] { return registered_parity_ops(Provider::Cudnn); });
#if defined(CAPSULE_HAVE_LIBTORCH_CUDA)
/// The parity ops, the ops held to the LibTorch parity table (libtorch_cuda_table.cpp), and
/// scaled_dot_product_attention, whose §10.16 fixture the suites also run
/// (libtorch_sdpa_fixture.cpp).
std::vector<Op> libtorch_cuda_ops() {
  std::vector<Op> ops = registered_parity_ops(Provider::Libtorch);
  for (const Op op : libtorch_table_ops()) {
    if (registry().find(op, Provider::Libtorch, Device::Cuda) != nullptr) ops.push_back(op);
  }
  if (registry().find(Op::ScaledDotProductAttention, Provider::Libtorch, Device::Cuda) != nullptr) {
    ops.push_back(Op::ScaledDotProductAttention);
  }
  return ops;
}
const SuiteCoverage kLibtorchCudaValues("libtorch.cuda.values", Obligation::Value, Provider::Libtorch, Device::Cuda,
                                        libtorch_cuda_ops);
const SuiteCoverage kLibtorchCudaVjps("libtorch.cuda.vjps", Obligation::Vjp, Provider::Libtorch, Device::Cuda,
                                      libtorch_cuda_ops);
#endif

}  // namespace
}  // namespace capsule::gpu_test

using capsule::Op;
using capsule::Provider;
using capsule::gpu_test::run_value_parity;
using capsule::gpu_test::run_vjp_parity;

// Test case names start with "parity:" (tests/gpu/CMakeLists.txt labels those `gpu`).
TEST_SUITE("cublas.values") {
  TEST_CASE("parity: cublas matmul forward") { run_value_parity(Op::Matmul, Provider::Cublas); }
  TEST_CASE("parity: cublas scaled_matmul forward") { run_value_parity(Op::ScaledMatmul, Provider::Cublas); }
  TEST_CASE("parity: cublas linear forward") { run_value_parity(Op::Linear, Provider::Cublas); }
}

TEST_SUITE("cublas.vjps") {
  TEST_CASE("parity: cublas matmul vjp") { run_vjp_parity(Op::Matmul, Provider::Cublas); }
  TEST_CASE("parity: cublas scaled_matmul vjp") { run_vjp_parity(Op::ScaledMatmul, Provider::Cublas); }
  TEST_CASE("parity: cublas linear vjp") { run_vjp_parity(Op::Linear, Provider::Cublas); }
}

TEST_SUITE("cudnn.values") {
  TEST_CASE("parity: cudnn conv forward") { run_value_parity(Op::Conv, Provider::Cudnn); }
  TEST_CASE("parity: cudnn conv_transpose forward") { run_value_parity(Op::ConvTranspose, Provider::Cudnn); }
  TEST_CASE("parity: cudnn max_pool forward") { run_value_parity(Op::MaxPool, Provider::Cudnn); }
  TEST_CASE("parity: cudnn avg_pool forward") { run_value_parity(Op::AvgPool, Provider::Cudnn); }
  TEST_CASE("parity: cudnn batch_norm forward") { run_value_parity(Op::BatchNorm, Provider::Cudnn); }
}

TEST_SUITE("cudnn.vjps") {
  TEST_CASE("parity: cudnn conv vjp") { run_vjp_parity(Op::Conv, Provider::Cudnn); }
  TEST_CASE("parity: cudnn conv_transpose vjp") { run_vjp_parity(Op::ConvTranspose, Provider::Cudnn); }
  TEST_CASE("parity: cudnn max_pool vjp") { run_vjp_parity(Op::MaxPool, Provider::Cudnn); }
  TEST_CASE("parity: cudnn avg_pool vjp") { run_vjp_parity(Op::AvgPool, Provider::Cudnn); }
  TEST_CASE("parity: cudnn batch_norm vjp") { run_vjp_parity(Op::BatchNorm, Provider::Cudnn); }
}

#if defined(CAPSULE_HAVE_LIBTORCH_CUDA)
// LibTorch's device-generic kernels on our device tensors and stream (libtorch_cuda.cpp).
TEST_SUITE("libtorch.cuda.values") {
  TEST_CASE("parity: libtorch matmul forward") { run_value_parity(Op::Matmul, Provider::Libtorch); }
  TEST_CASE("parity: libtorch scaled_matmul forward") { run_value_parity(Op::ScaledMatmul, Provider::Libtorch); }
  TEST_CASE("parity: libtorch linear forward") { run_value_parity(Op::Linear, Provider::Libtorch); }
  TEST_CASE("parity: libtorch conv forward") { run_value_parity(Op::Conv, Provider::Libtorch); }
  TEST_CASE("parity: libtorch conv_transpose forward") { run_value_parity(Op::ConvTranspose, Provider::Libtorch); }
  TEST_CASE("parity: libtorch max_pool forward") { run_value_parity(Op::MaxPool, Provider::Libtorch); }
  TEST_CASE("parity: libtorch avg_pool forward") { run_value_parity(Op::AvgPool, Provider::Libtorch); }
  TEST_CASE("parity: libtorch batch_norm forward") { run_value_parity(Op::BatchNorm, Provider::Libtorch); }
}

TEST_SUITE("libtorch.cuda.vjps") {
  TEST_CASE("parity: libtorch matmul vjp") { run_vjp_parity(Op::Matmul, Provider::Libtorch); }
  TEST_CASE("parity: libtorch scaled_matmul vjp") { run_vjp_parity(Op::ScaledMatmul, Provider::Libtorch); }
  TEST_CASE("parity: libtorch linear vjp") { run_vjp_parity(Op::Linear, Provider::Libtorch); }
  TEST_CASE("parity: libtorch conv vjp") { run_vjp_parity(Op::Conv, Provider::Libtorch); }
  TEST_CASE("parity: libtorch conv_transpose vjp") { run_vjp_parity(Op::ConvTranspose, Provider::Libtorch); }
  TEST_CASE("parity: libtorch max_pool vjp") { run_vjp_parity(Op::MaxPool, Provider::Libtorch); }
  TEST_CASE("parity: libtorch avg_pool vjp") { run_vjp_parity(Op::AvgPool, Provider::Libtorch); }
  TEST_CASE("parity: libtorch batch_norm vjp") { run_vjp_parity(Op::BatchNorm, Provider::Libtorch); }
}
#endif
