// SPDX-License-Identifier: Apache-2.0
// capsule_gpu_bench_libtorch: LibTorch on CUDA through our session (profile libtorch_forward_cuda,
// whose libtorch-cuda capsules run ATen on our device tensors and stream) against the same ATen
// functions called directly, on one GPU, in one process (docs/benchmarks.md, "GPU"): matmul,
// conv2d and scaled dot-product attention, whose lines also say which computation our handler ran
// and which SDPA backend ATen picked (libtorch_cuda_attention_route). Target: ours/direct <= 1.05x
// at realistic sizes, judged as capsule_gpu_bench judges cuBLAS (gpu_ratio.hpp).
//
// The direct side is ATen at its best: tensors made once, ATen's own pool stream, its caching
// allocator for the outputs, grad off and InferenceMode on, the math modes ours sets (no TF32,
// deterministic cuDNN) so both compute the same thing. Ours pays what a session pays per call:
// the cached selection, the shape checks, a fresh output from our pool, the stream guard.
//
// Built only where LibTorch has CUDA (tools/gpu-check.sh phase 3 builds it on the GPU machine).
#include <ATen/Context.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <c10/core/InferenceMode.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdio>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/handlers/cuda.hpp"
#include "capsule/handlers/libtorch.hpp"
#include "capsule/load.hpp"
#include "capsule/runtime/session.hpp"
#include "capsule/text.hpp"
#include "gpu_bench_support.hpp"
#include "gpu_ratio.hpp"

using namespace capsule;
using bench::die;
using bench::expect;
using bench::random_device_tensor;

namespace {

/// ATen's own copy of a device tensor of ours (the direct side must not read through our wrapper).
at::Tensor aten_copy(const Tensor& t) {
  const at::Tensor view = at::from_blob(const_cast<void*>(t.device_address()), t.shape().to_vector(),
                                        at::TensorOptions().dtype(at::kFloat).device(c10::Device(c10::kCUDA, 0)));
  at::Tensor copy = view.clone();
  // The clone is queued on ATen's current stream; the direct side reads it from a pool stream,
  // which is not ordered after it.
  c10::cuda::getCurrentCUDAStream().synchronize();
  return copy;
}

struct Verdict {
  int missed = 0;
};

/// One comparison: `ours` through the session, `direct` on ATen's pool stream. `judged`: whether
/// the 1.05x target applies (a missed one counts in `verdict`); otherwise the ratio is printed
/// for information only.
template <class Ours, class Direct>
void compare(const char* name, double flops, int rounds, int reps, Ours&& ours, Direct&& direct, Verdict& verdict,
             bool judged = true) {
  const c10::cuda::CUDAStream aten_stream = c10::cuda::getStreamFromPool(false, 0);
  const auto direct_on_its_stream = [&] {
    const c10::InferenceMode inference;
    const c10::cuda::CUDAStreamGuard guard(aten_stream);
    direct();
  };
  const bench::GpuRatio timing = bench::gpu_ratio(
      rounds, reps, ours, direct_on_its_stream,
      [] { (void)expect(cuda_synchronize("timed session calls"), "sync"); }, [&] { aten_stream.synchronize(); });
  const bool met = timing.median <= 1.05;
  if (judged && !met) ++verdict.missed;
  std::printf("%s: ours/ATen direct = %.3fx (%s): %s  [median of %d rounds x %d calls; best ours %.1f us "
              "(%.1f TFLOP/s), best direct %.1f us (%.1f TFLOP/s)]\n",
              name, timing.median, judged ? "target <= 1.05x" : "no target", judged ? (met ? "met" : "MISSED") : "info",
              rounds, reps, timing.best_ours * 1e6,
              flops / timing.best_ours / 1e12, timing.best_direct * 1e6, flops / timing.best_direct / 1e12);
}

void bench_matmul(Session& session, std::int64_t n, int rounds, int reps, Verdict& verdict) {
  std::mt19937 rng(static_cast<unsigned>(n));
  const Tensor a = random_device_tensor({n, n}, rng);
  const Tensor b = random_device_tensor({n, n}, rng);
  const Var va = session.constant(a);
  const Var vb = session.constant(b);
  const at::Tensor da = aten_copy(a);
  const at::Tensor db = aten_copy(b);
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  compare(str("matmul f32 [", n, " x ", n, "] x [", n, " x ", n, "]").c_str(), flops, rounds, reps,
          [&] { (void)expect(session.call(Op::Matmul, {va, vb}), "session matmul"); },
          [&] { (void)at::matmul(da, db); }, verdict);
}

/// conv2d x [batch, c, hw, hw], w [c, c, 3, 3], bias, padding 1 (a ResNet stage's shape).
void bench_conv(Session& session, std::int64_t batch, std::int64_t c, std::int64_t hw, int rounds, int reps,
                Verdict& verdict) {
  std::mt19937 rng(static_cast<unsigned>(c + hw));
  const Tensor x = random_device_tensor({batch, c, hw, hw}, rng);
  const Tensor w = random_device_tensor({c, c, 3, 3}, rng);
  const Tensor bias = random_device_tensor({c}, rng);
  const Var vx = session.constant(x);
  const Var vw = session.constant(w);
  const Var vb = session.constant(bias);
  OpAttrs attrs;
  attrs.padding = {1, 1};
  const at::Tensor dx = aten_copy(x);
  const at::Tensor dw = aten_copy(w);
  const at::Tensor dbias = aten_copy(bias);
  const double flops = 2.0 * static_cast<double>(batch * c * hw * hw) * static_cast<double>(c * 9);
  compare(str("conv2d f32 x [", batch, ", ", c, ", ", hw, ", ", hw, "] w [", c, ", ", c, ", 3, 3] pad 1").c_str(), flops,
          rounds, reps, [&] { (void)expect(session.call(Op::Conv, {vx, vw, vb}, attrs), "session conv"); },
          [&] { (void)at::convolution(dx, dw, dbias, {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1); }, verdict);
}

/// scaled_dot_product_attention q, k, v [batch, heads, n, d], scale 1/sqrt(d), without and with a
/// [n, n] mask (a random third of the keys blocked per query, none fully blocked): ours through
/// the session against at::scaled_dot_product_attention on ATen's copies (the mask made kBool
/// once, on the direct side's setup). Our handler pays its TorchLean checks per call: the score
/// bound (max|q|, max|k|, read back to the host) and, with a mask, the mask's conversion to kBool,
/// a finiteness test of v (read back too) and the fully-blocked-row fix. So no target applies:
/// the ratio shows what those cost. Both sides' SDPA backends are printed.
void bench_sdpa(Session& session, std::int64_t batch, std::int64_t heads, std::int64_t n, std::int64_t d, bool masked,
                int rounds, int reps, Verdict& verdict) {
  std::mt19937 rng(static_cast<unsigned>(n + d + (masked ? 1 : 0)));
  const Tensor q = random_device_tensor({batch, heads, n, d}, rng);
  const Tensor k = random_device_tensor({batch, heads, n, d}, rng);
  const Tensor v = random_device_tensor({batch, heads, n, d}, rng);
  std::vector<double> keep(static_cast<std::size_t>(n * n));
  for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = (i % static_cast<std::size_t>(n) == 0 || rng() % 3 != 0) ? 1.0 : 0.0;
  const Tensor mask = expect(to_device(expect(Tensor::from_values(expect(Shape::make({n, n}), "shape"), DType::F32, keep),
                                              "mask")),
                             "mask to_device");
  std::vector<Var> args{session.constant(q), session.constant(k), session.constant(v)};
  std::vector<Tensor> operands{q, k, v};
  if (masked) {
    args.push_back(session.constant(mask));
    operands.push_back(mask);
  }
  const OpAttrs attrs;  // scale 0: 1/sqrt(d), ATen's default
  const std::string route = expect(libtorch_cuda_attention_route(operands, attrs), "asking the SDPA route");
  const at::Tensor dq = aten_copy(q);
  const at::Tensor dk = aten_copy(k);
  const at::Tensor dv = aten_copy(v);
  const at::Tensor allowed = at::ne(aten_copy(mask), 0);
  c10::cuda::getCurrentCUDAStream().synchronize();
  const double flops = 4.0 * static_cast<double>(batch * heads) * static_cast<double>(n) * static_cast<double>(n) *
                       static_cast<double>(d);
  compare(str("sdpa f32 q, k, v [", batch, ", ", heads, ", ", n, ", ", d, "]", masked ? " with a [n, n] mask" : "")
              .c_str(),
          flops, rounds, reps,
          [&] { (void)expect(session.call(Op::ScaledDotProductAttention, args, attrs), "session sdpa"); },
          [&] {
            if (masked) {
              (void)at::scaled_dot_product_attention(dq, dk, dv, allowed);
            } else {
              (void)at::scaled_dot_product_attention(dq, dk, dv);
            }
          },
          verdict, /*judged=*/false);
  const std::int64_t direct_choice = masked ? at::_fused_sdp_choice(dq, dk, dv, allowed) : at::_fused_sdp_choice(dq, dk, dv);
  std::printf("  ours ran: %s\n  direct ran: ATen's fused SDPA, backend %s\n", route.c_str(),
              libtorch_sdp_backend_name(direct_choice).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const bench::GpuBenchStart start = bench::gpu_bench_start("capsule_gpu_bench_libtorch", argc, argv, CAPSULE_SOURCE_DIR);
  const bool quick = start.quick;
  const Workspace& workspace = start.workspace;
  HandlerRegistry handlers;
  (void)expect(register_cuda_handlers(handlers), "registering the CUDA handlers");
  (void)expect(register_libtorch_cuda_handlers(handlers), "registering the LibTorch CUDA handlers");
  SessionOptions options;
  options.profile = "libtorch_forward_cuda";
  options.gradients = false;
  options.preselect = {Op::Matmul, Op::Conv, Op::ScaledDotProductAttention};
  Session session = expect(Session::open(workspace, handlers, std::move(options)), "opening libtorch_forward_cuda");

  const EnvironmentFingerprint fingerprint = cuda_fingerprint();
  const EnvironmentFingerprint libtorch = libtorch_cuda_fingerprint();
  std::printf("device: %s (compute capability %s), driver %s; LibTorch %s; cuBLAS %s; cuDNN %s; %s\n",
              fingerprint.get("device.cuda").c_str(), fingerprint.get("device.cuda.compute_capability").c_str(),
              fingerprint.get("device.cuda.driver").c_str(), libtorch_version().c_str(),
              libtorch.get("provider.libtorch.cuda.libcublas").c_str(),
              libtorch.get("provider.libtorch.cuda.libcudnn").c_str(),
              libtorch.get("provider.libtorch.cuda.math").c_str());
  Verdict verdict;
  const int rounds = quick ? 5 : 15;
  for (const std::int64_t n : {1024, 4096}) bench_matmul(session, n, rounds, quick ? 4 : (n >= 4096 ? 10 : 50), verdict);
  bench_conv(session, 32, 64, 56, rounds, quick ? 4 : 20, verdict);
  bench_conv(session, 32, 256, 14, rounds, quick ? 4 : 20, verdict);
  for (const bool masked : {false, true}) bench_sdpa(session, 8, 16, 1024, 64, masked, rounds, quick ? 4 : 20, verdict);
  // Which capsules ran: the plan must have chosen LibTorch's; a ratio of another provider's
  // capsule against ATen would say nothing about LibTorch on our tensors.
  const std::vector<CapsuleUse> uses = session.capsules_used();
  std::printf("ours ran: %s\n", capsules_used_text(uses).c_str());
  for (const CapsuleUse& use : uses) {
    if (use.capsule->provider != Provider::Libtorch || use.capsule->device != Device::Cuda) {
      die(str("libtorch_forward_cuda planned `", use.capsule->name, "` for ", to_string(use.op),
              ", not a LibTorch CUDA capsule: the ratios above do not measure LibTorch"));
    }
  }
  std::printf("gpu bench libtorch: %s\n",
              verdict.missed == 0 ? "every target met" : str(verdict.missed, " target(s) missed").c_str());
  return verdict.missed == 0 ? 0 : 3;
}
