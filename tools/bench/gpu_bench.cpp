// SPDX-License-Identifier: Apache-2.0
// capsule_gpu_bench: our session against calling the vendor library directly, on one GPU, in one
// process (docs/benchmarks.md, "GPU"): cuBLAS matmul and cuDNN conv2d. For each case it times R
// calls through Session::call(vendor_cuda) and R direct calls of the same library routine with the
// same math mode, alternating the two in rounds, and prints the median of the per-round ratios
// ours/direct. Target: <= 1.05x at realistic sizes.
//
// The direct side is the library at its best: its own handle and stream, the output allocated
// once (for cuDNN also the plan, the workspace and the variant pack: cudnn_direct_conv.hpp). Ours
// pays what a session pays per call: the cached selection, the shape checks, a fresh output (and
// cuDNN workspace) from the stream-ordered pool and the after-launch error check.
//
// A plain program, no Google Benchmark and no Boost: it runs on a bare GPU image next to the
// parity tests (tools/gpu-check.sh). Without a usable device it prints why and exits 2.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/handlers/cuda.hpp"
#include "capsule/load.hpp"
#include "capsule/runtime/session.hpp"
#include "capsule/text.hpp"
#include "cudnn_direct_conv.hpp"
#include "gpu_bench_support.hpp"
#include "gpu_ratio.hpp"

using namespace capsule;
using bench::die;
using bench::expect;
using bench::random_device_tensor;

namespace {

void expect_cuda(cudaError_t status, std::string_view what) {
  if (status != cudaSuccess) die(str(what, ": ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ")"));
}
void expect_cublas(cublasStatus_t status, std::string_view what) {
  if (status != CUBLAS_STATUS_SUCCESS) die(str(what, ": ", cublasGetStatusName(status)));
}

struct Verdict {
  int missed = 0;
};

/// Prints one comparison's line and counts a missed target.
void report(const std::string& name, double flops, const bench::GpuRatio& timing, int rounds, int reps,
            Verdict& verdict) {
  const bool met = timing.median <= 1.05;
  if (!met) ++verdict.missed;
  std::printf("%s = %.3fx (target <= 1.05x): %s  [median of %d rounds x %d calls; best ours %.1f us (%.1f TFLOP/s), "
              "best direct %.1f us (%.1f TFLOP/s)]\n",
              name.c_str(), timing.median, met ? "met" : "MISSED", rounds, reps, timing.best_ours * 1e6,
              flops / timing.best_ours / 1e12, timing.best_direct * 1e6, flops / timing.best_direct / 1e12);
}

/// Session matmul [n, n] x [n, n] against cublasSgemm on the same device buffers.
void bench_matmul(Session& session, std::int64_t n, int rounds, int reps, Verdict& verdict) {
  std::mt19937 rng(static_cast<unsigned>(n));
  const Tensor a = random_device_tensor({n, n}, rng);
  const Tensor b = random_device_tensor({n, n}, rng);
  const Var va = session.constant(a);
  const Var vb = session.constant(b);

  cudaStream_t stream = nullptr;
  expect_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cublasHandle_t handle = nullptr;
  expect_cublas(cublasCreate(&handle), "cublasCreate");
  expect_cublas(cublasSetStream(handle, stream), "cublasSetStream");
  expect_cublas(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  float* c = nullptr;
  expect_cuda(cudaMalloc(reinterpret_cast<void**>(&c), static_cast<std::size_t>(n * n) * sizeof(float)), "cudaMalloc");
  const float one = 1.0f, zero = 0.0f;
  const int ni = static_cast<int>(n);
  auto direct = [&] {
    // Row-major C = A·B as column-major Cᵀ = Bᵀ·Aᵀ, as the handler does.
    expect_cublas(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, static_cast<const float*>(b.device_address()),
                              ni, static_cast<const float*>(a.device_address()), ni, &zero, c, ni),
                  "cublasSgemm");
  };
  auto ours = [&] { (void)expect(session.call(Op::Matmul, {va, vb}), "session matmul"); };
  const bench::GpuRatio timing = bench::gpu_ratio(
      rounds, reps, ours, direct, [] { (void)expect(cuda_synchronize("timed session calls"), "sync"); },
      [&] { expect_cuda(cudaStreamSynchronize(stream), "sync"); });
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  report(str("matmul f32 [", n, " x ", n, "] x [", n, " x ", n, "]: ours/cuBLAS direct"), flops, timing, rounds, reps,
         verdict);

  expect_cuda(cudaFree(c), "cudaFree");
  expect_cublas(cublasDestroy(handle), "cublasDestroy");
  expect_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

/// Session conv2d x [batch, c, hw, hw], w [c, c, 3, 3], padding 1, no bias (a ResNet stage's
/// shape; the bias is our own kernel, not cuDNN's) against DirectCudnnConv on the same buffers.
void bench_conv(Session& session, std::int64_t batch, std::int64_t c, std::int64_t hw, int rounds, int reps,
                Verdict& verdict) {
  std::mt19937 rng(static_cast<unsigned>(c + hw));
  const Tensor x = random_device_tensor({batch, c, hw, hw}, rng);
  const Tensor w = random_device_tensor({c, c, 3, 3}, rng);
  const Var vx = session.constant(x);
  const Var vw = session.constant(w);
  OpAttrs attrs;
  attrs.padding = {1, 1};
  auto ours = [&] { (void)expect(session.call(Op::Conv, {vx, vw}, attrs), "session conv"); };
  // The plan our first call builds is the one cached line the report did not have before.
  const std::vector<std::string> plans_before = cudnn_plan_report();
  ours();
  (void)expect(cuda_synchronize("the first session conv"), "sync");
  std::string our_plan = "(no new cuDNN plan: the conv did not run through cuDNN)";
  for (const std::string& line : cudnn_plan_report()) {
    if (std::find(plans_before.begin(), plans_before.end(), line) == plans_before.end()) our_plan = line;
  }
  bench::DirectCudnnConv direct({batch, c, hw, hw}, {c, c, 3, 3}, 1, x.device_address(), w.device_address());
  const bench::GpuRatio timing = bench::gpu_ratio(
      rounds, reps, ours, [&] { direct.run(); },
      [] { (void)expect(cuda_synchronize("timed session calls"), "sync"); }, [&] { direct.sync(); });
  const double flops = 2.0 * static_cast<double>(batch * c * hw * hw) * static_cast<double>(c * 9);
  report(str("conv2d f32 x [", batch, ", ", c, ", ", hw, ", ", hw, "] w [", c, ", ", c,
             ", 3, 3] pad 1: ours/cuDNN direct"),
         flops, timing, rounds, reps, verdict);
  std::printf("  ours: %s\n  direct: %s\n", our_plan.c_str(), direct.description().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const bench::GpuBenchStart start = bench::gpu_bench_start("capsule_gpu_bench", argc, argv, CAPSULE_SOURCE_DIR);
  const bool quick = start.quick;
  const Workspace& workspace = start.workspace;
  HandlerRegistry handlers;
  (void)expect(register_cuda_handlers(handlers), "registering the CUDA handlers");
  SessionOptions options;
  options.profile = "vendor_cuda";
  options.gradients = false;
  options.preselect = {Op::Matmul, Op::Conv};
  Session session = expect(Session::open(workspace, handlers, std::move(options)), "opening vendor_cuda");

  const EnvironmentFingerprint fingerprint = cuda_fingerprint();
  std::printf("device: %s (compute capability %s), driver %s, cuBLAS %s (%s)\n",
              fingerprint.get("device.cuda").c_str(),
              fingerprint.get("device.cuda.compute_capability").c_str(),
              fingerprint.get("device.cuda.driver").c_str(), fingerprint.get("provider.cuda.cublas.loaded").c_str(),
              fingerprint.get("provider.cuda.cublas.library").c_str());
  Verdict verdict;
  const int rounds = quick ? 5 : 15;
  for (std::int64_t n : {1024, 2048, 4096}) {
    const int reps = n >= 4096 ? 10 : 50;
    bench_matmul(session, n, rounds, quick ? reps / 5 : reps, verdict);
  }
  bench_conv(session, 32, 64, 56, rounds, quick ? 4 : 20, verdict);
  bench_conv(session, 32, 256, 14, rounds, quick ? 4 : 20, verdict);
  std::printf("gpu bench: %s\n", verdict.missed == 0 ? "every target met" : str(verdict.missed, " target(s) missed").c_str());
  return verdict.missed == 0 ? 0 : 3;
}
