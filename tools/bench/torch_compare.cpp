// SPDX-License-Identifier: Apache-2.0
// capsule_bench_torch: the eager runtime against LibTorch, measured in the same process on the
// same thread (docs/benchmarks.md, "Eager runtime against LibTorch"). Four comparisons, each
// printed with both times, the ratio and a PASS/FAIL verdict against its target:
//   1. `add` on 1-element float32 tensors, gradients off: Session::call against at::add under
//      torch::NoGradGuard; time ours / time LibTorch <= 0.25.
//   2. the same with gradients on: a taped Session::call (the tape cleared every 1000 calls, that
//      cost included) against at::add building an autograd node; <= 0.5.
//   3. one Adam training step (lr 0.01) of the 4-8-1 MLP at batch 1: capsule::train_step against
//      torch::nn::Sequential + torch::optim::Adam (zero_grad, forward, mse_loss, backward, step);
//      <= 0.5.
//   4. a 256x256x256 float32 matmul through the session (the reference handler) against
//      at::matmul (OpenBLAS sgemm); GFLOP/s ours / GFLOP/s LibTorch >= 0.25. The program also
//      checks that our product is bitwise the naive fixed-left loop.
// With the LibTorch provider built (CAPSULE_HAVE_LIBTORCH), two more, on the libtorch_cpu profile:
//   5. the provider's overhead per call: Session::call into the LibTorch handler against the same
//      ATen function called directly, functional and `*_out` forms, for add [64, 64], matmul
//      64x64x64 and conv2d; overhead over the functional form <= 300 ns, and for the matmul
//      ours / ATen <= 1.2x. Each case but the large conv2d adds a line without a target: the same
//      pairs with L1d and L2 evicted before every call (EvictedCaches), which shows how the
//      overhead grows when a heavy call has left the caches cold. The large conv2d (44 µs a call) is judged instead on
//      the median over fresh child processes of this program (--capsule_only=lt_conv_child), each
//      with an A/A control, because one process's figure carries that process's bias;
//   6. the MLP Adam step of 3 under libtorch_cpu (LibTorch forward and adjoint kernels, our tape)
//      against torch::nn, reported without a target.
//   The header then also prints the provider's fingerprint entries (its BLAS, core and threads).
// Everything runs single-threaded: at::set_num_threads(1), at::set_num_interop_threads(1) and
// OpenBLAS at one thread (openblas_set_num_threads(1) at start; run with OPENBLAS_NUM_THREADS=1,
// as tools/bench.sh does, so OpenBLAS never starts its pool). The header states which BLAS
// library LibTorch runs, from /proc/self/maps, from where `sgemm_` resolves, and by counting the
// sgemm_ calls at::matmul makes (see the interposer below).
//
// Timing: each comparison first warms both sides up, then runs kRuns interleaved pairs of timed
// loops (the order alternates from pair to pair) and reports the median time per iteration of
// each side; the ratio is of the medians. Both sides see the same machine noise. The LibTorch
// overhead cases (lt_overhead) instead time single calls in interleaved pairs and judge the median
// of the per-pair differences, with its 95% confidence interval (compare_calls).
//
// Flags: --capsule_strict       exit 1 when a target is missed (exit 0 otherwise)
//        --capsule_quick        a tenth of the iterations (a smoke run; numbers are noisier)
//        --capsule_only=NAME    run one comparison: add, add_grad, mlp, matmul, lt_overhead or lt_mlp
//                               (for profiling)
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <torch/torch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/runtime/model.hpp"
#include "capsule/runtime/session.hpp"
#include "libtorch_overhead.hpp"
#include "torch_bench_support.hpp"

#ifndef CAPSULE_BENCH_BUILD_TYPE
#define CAPSULE_BENCH_BUILD_TYPE "unknown"
#endif

// ---- sgemm_ interposer ------------------------------------------------------------------------
// LibTorch's CPU float matmul ends in the Fortran BLAS symbol `sgemm_`, bound at load time in the
// global symbol scope, where this executable comes first (ENABLE_EXPORTS). Defining it here lets
// the program count the calls and forward each one, unchanged, to the next definition (the
// system libblas.so.3), so it can say that at::matmul really ran that BLAS. The cost is one
// counter increment and one indirect call per sgemm_ call, a few nanoseconds against calls of
// microseconds (the MLP step) to a millisecond (the 256^3 matmul).
namespace {
using SgemmFn = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                         const int*, const float*, const int*, const float*, float*, const int*);
std::uint64_t g_sgemm_calls = 0;
SgemmFn next_sgemm() {
  static const SgemmFn next = reinterpret_cast<SgemmFn>(dlsym(RTLD_NEXT, "sgemm_"));
  return next;
}
}  // namespace

extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc) {
  ++g_sgemm_calls;
  const SgemmFn next = next_sgemm();
  if (next == nullptr) {
    std::fputs("capsule_bench_torch: sgemm_ called but no BLAS library defines it\n", stderr);
    std::abort();
  }
  next(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace fs = std::filesystem;
using namespace capsule;
using namespace capsule::torch_bench;

namespace {

// ---- environment --------------------------------------------------------------------------------

template <class Fn>
Fn openblas_fn(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

/// OpenBLAS reads OPENBLAS_NUM_THREADS when it loads (before main); setting its thread count
/// through its API as well covers a run without the variable.
void single_thread_everything() {
  if (auto set = openblas_fn<void (*)(int)>("openblas_set_num_threads")) set(1);
  at::set_num_threads(1);
  try {
    at::set_num_interop_threads(1);
  } catch (const std::exception& error) {
    std::printf("note: at::set_num_interop_threads(1) refused: %s\n", error.what());
  }
}

/// Distinct mapped files whose name mentions BLAS, LAPACK or OpenMP.
std::vector<std::string> mapped_math_libraries() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> seen;
  std::vector<std::string> out;
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    const std::string name = fs::path(path).filename().string();
    const bool math = name.find("blas") != std::string::npos || name.find("lapack") != std::string::npos ||
                      name.find("gomp") != std::string::npos || name.find("omp.so") != std::string::npos;
    if (math && seen.insert(path).second) out.push_back(std::move(path));
  }
  return out;
}

std::string library_of(const void* address) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "(unknown)";
  std::error_code error;
  const fs::path real = fs::canonical(info.dli_fname, error);
  return error ? std::string(info.dli_fname) : real.string();
}

void print_environment() {
  std::printf("== capsule eager runtime vs LibTorch, same process, one thread (build type %s%s) ==\n",
              CAPSULE_BENCH_BUILD_TYPE,
#ifdef NDEBUG
              ""
#else
              "; assertions ON, numbers are not representative"
#endif
  );
  std::printf("LibTorch %s (headers), parallel backend: %s\n", TORCH_VERSION,
              at::get_parallel_info().find("OpenMP") != std::string::npos ? "OpenMP" : "native");
  const char* env = std::getenv("OPENBLAS_NUM_THREADS");
  auto get_threads = openblas_fn<int (*)()>("openblas_get_num_threads");
  auto corename = openblas_fn<char* (*)()>("openblas_get_corename");
  auto config = openblas_fn<char* (*)()>("openblas_get_config");
  std::printf("threads: at::get_num_threads() = %d, at::get_num_interop_threads() = %d, openblas_get_num_threads() = %s, "
              "OPENBLAS_NUM_THREADS=%s; capsule reference handlers are single-threaded\n",
              at::get_num_threads(), at::get_num_interop_threads(),
              get_threads ? std::to_string(get_threads()).c_str() : "(no OpenBLAS)", env ? env : "(unset)");
  if (env == nullptr || std::string_view(env) != "1") {
    std::printf("note: run with OPENBLAS_NUM_THREADS=1 (tools/bench.sh does) so OpenBLAS never starts worker threads\n");
  }
  if (config) std::printf("OpenBLAS: %s; core %s\n", config(), corename ? corename() : "?");
  __builtin_cpu_init();
  if (corename && std::string_view(corename()) == "Haswell" && __builtin_cpu_supports("avx512f")) {
    std::printf("note: OpenBLAS runs its Haswell (AVX2) kernels on this AVX-512 CPU (it does not know the CPU "
                "model); OPENBLAS_CORETYPE=SkylakeX gives LibTorch its AVX-512 kernels\n");
  }

  // One float matmul through LibTorch, then: which library answers sgemm_, and did it run?
  const std::uint64_t before = g_sgemm_calls;
  {
    torch::NoGradGuard no_grad;
    at::Tensor product = at::matmul(torch::ones({64, 64}), torch::ones({64, 64}));
    benchmark::DoNotOptimize(product.data_ptr<float>());
  }
  const std::uint64_t calls = g_sgemm_calls - before;
  std::printf("BLAS used by LibTorch: at::matmul float32 -> sgemm_ %s; sgemm_ forwards to %s\n",
              calls > 0 ? ("called (" + std::to_string(calls) + (calls == 1 ? " call)" : " calls)")).c_str() : "NOT called (another kernel ran)",
              library_of(reinterpret_cast<const void*>(next_sgemm())).c_str());
  std::printf("mapped BLAS/LAPACK/OpenMP libraries:");
  for (const std::string& path : mapped_math_libraries()) std::printf(" %s", path.c_str());
  std::printf("\n");
  std::string torch_config = at::show_config();
  for (std::string_view key : {"BLAS_INFO", "LAPACK_INFO"}) {
    const auto at_key = torch_config.find(key);
    if (at_key == std::string::npos) continue;
    const auto end = torch_config.find_first_of(",\n", at_key);
    std::printf("LibTorch build config: %s\n", torch_config.substr(at_key, end - at_key).c_str());
  }
}

// ---- 1 and 2: add on 1-element tensors ------------------------------------------------------------

Tensor one_element(double value) {
  return expect(Tensor::full(expect(Shape::make({1}), "shape"), DType::F32, value), "tensor");
}

// 1. gradients off: a session opened with gradients=false, constants in, nothing taped.
void bench_add(Verdicts& verdicts, std::int64_t iters) {
  Session session = open_session(false, {Op::Add});
  const Var a = session.constant(one_element(1.5));
  const Var b = session.constant(one_element(2.25));
  torch::NoGradGuard no_grad;
  const at::Tensor ta = torch::full({1}, 1.5f);
  const at::Tensor tb = torch::full({1}, 2.25f);
  auto ours = [&] {
    RuntimeResult<Var> sum = session.call(Op::Add, {a, b});
    if (!sum) die("add failed: " + sum.error().message);
    benchmark::DoNotOptimize(sum->value().data<float>());
  };
  auto theirs = [&] {
    at::Tensor sum = at::add(ta, tb);
    benchmark::DoNotOptimize(sum.unsafeGetTensorImpl());
  };
  const Timing t = compare(iters, ours, theirs);
  print_time_ratio(verdicts, "add 1-element f32, gradients off", "call", t, 0.25, iters);
  std::printf("  ours: %s (session gradients=false, constants); LibTorch: at::add under NoGradGuard\n",
              capsules_line(session).c_str());
}

// 2. gradients on: `a` is a parameter, so every call is taped (ours) or builds an autograd node
// (LibTorch).
void bench_add_grad(Verdicts& verdicts, std::int64_t iters) {
  constexpr std::int64_t kClearEvery = 1000;
  Session session = open_session(true, {Op::Add});
  const Tensor leaf = one_element(1.5);
  Var a = session.parameter(leaf);
  const Var b = session.constant(one_element(2.25));
  std::int64_t since_clear = 0;
  const at::Tensor ta = torch::full({1}, 1.5f).requires_grad_(true);
  const at::Tensor tb = torch::full({1}, 2.25f);
  if (!at::add(ta, tb).requires_grad()) die("LibTorch did not record the add");
  auto ours = [&] {
    if (++since_clear == kClearEvery) {
      session.clear_tape();
      a = session.parameter(leaf);  // a leaf of the new tape
      since_clear = 0;
    }
    RuntimeResult<Var> sum = session.call(Op::Add, {a, b});
    if (!sum || !sum->requires_grad()) die("taped add failed");
    benchmark::DoNotOptimize(sum->value().data<float>());
  };
  auto theirs = [&] {
    at::Tensor sum = at::add(ta, tb);
    benchmark::DoNotOptimize(sum.unsafeGetTensorImpl());
  };
  const Timing t = compare(iters, ours, theirs);
  print_time_ratio(verdicts, "add 1-element f32, gradients on", "call", t, 0.5, iters);
  std::printf("  ours: taped call, tape cleared every %lld calls (included); LibTorch: at::add with "
              "a.requires_grad() (AddBackward0 node made and freed per call)\n",
              static_cast<long long>(kClearEvery));
}

// ---- 3: Adam step of the 4-8-1 MLP ---------------------------------------------------------------

/// `profile` checked_cpu (reference handlers, target <= 0.5x) or libtorch_cpu (LibTorch handlers,
/// our tape; the issue sets no ratio for it, so it is reported without a verdict).
void bench_mlp(Verdicts& verdicts, std::int64_t iters, const std::string& profile = "checked_cpu") {
  constexpr double kLr = 0.01;
  Sequential model;
  model.emplace<Linear>(4, 8, 11).emplace<ReLU>().emplace<Linear>(8, 1, 12);
  AdamOptions adam_options;
  adam_options.lr = kLr;
  Adam adam(adam_options);
  Session session = open_session(true, training_ops(model, Op::MseLoss, adam), profile);
  const Batch batch{random_tensor({1, 4}, 21), random_tensor({1, 1}, 22)};
  const LossFn loss = capsule::mse_loss;

  torch::nn::Sequential net(torch::nn::Linear(4, 8), torch::nn::ReLU(), torch::nn::Linear(8, 1));
  // Same starting weights on both sides (parameter order: weight, bias per linear layer).
  {
    torch::NoGradGuard no_grad;
    const std::vector<Parameter*> ours = model.parameters();
    std::vector<at::Tensor> theirs = net->parameters();
    if (ours.size() != theirs.size()) die("the two MLPs have different parameter counts");
    for (std::size_t i = 0; i < ours.size(); ++i) {
      if (ours[i]->value.shape().to_vector() != theirs[i].sizes().vec()) die("parameter shapes differ: " + ours[i]->name);
      theirs[i].copy_(to_torch(ours[i]->value));
    }
  }
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(kLr));
  const at::Tensor x = to_torch(batch.inputs);
  const at::Tensor y = to_torch(batch.targets);

  auto ours = [&] {
    RuntimeResult<double> value = train_step(session, model, loss, adam, batch);
    if (!value) die("train_step failed: " + value.error().message);
    benchmark::DoNotOptimize(*value);
  };
  double last_torch_loss = 0;
  auto theirs = [&] {
    optimizer.zero_grad();
    at::Tensor value = torch::mse_loss(net->forward(x), y);
    value.backward();
    optimizer.step();
    benchmark::DoNotOptimize(value.unsafeGetTensorImpl());
  };

  // Same work: the first steps give the same losses (up to float rounding).
  double max_diff = 0;
  for (int step = 0; step < 5; ++step) {
    const double mine = expect(train_step(session, model, loss, adam, batch), "train_step");
    optimizer.zero_grad();
    at::Tensor value = torch::mse_loss(net->forward(x), y);
    last_torch_loss = value.item<double>();
    value.backward();
    optimizer.step();
    max_diff = std::max(max_diff, std::abs(mine - last_torch_loss));
  }

  // How many capsule calls one step makes.
  const auto count_calls = [&session] {
    std::array<std::uint64_t, 3> total{};
    for (const CapsuleUse& use : session.capsules_used()) {
      total[0] += use.forward_calls;
      total[1] += use.vjp_calls;
      total[2] += use.adjoint_calls;
    }
    return total;
  };
  const std::array<std::uint64_t, 3> calls_before = count_calls();
  ours();
  const std::array<std::uint64_t, 3> calls_after = count_calls();

  const Timing t = compare(iters, ours, theirs);
  if (profile == "checked_cpu") {
    print_time_ratio(verdicts, "Adam step, MLP 4-8-1, batch 1", "step", t, 0.5, iters);
  } else {
    std::printf("Adam step, MLP 4-8-1, batch 1, profile %s: ours %s/step, LibTorch %s/step: ratio ours/LibTorch = "
                "%.3fx (no target)  [median of %d runs x %lld; best ours %s, best LibTorch %s]\n",
                profile.c_str(), duration(t.ours).c_str(), duration(t.theirs).c_str(), t.ours / t.theirs, kRuns,
                static_cast<long long>(iters), duration(t.ours_min).c_str(), duration(t.theirs_min).c_str());
  }
  std::printf("  same losses over the first 5 steps: max |ours - LibTorch| = %.2g; per step: tape of %zu nodes, "
              "%llu capsule calls by the program, %llu in VJP rules, %llu adjoint kernel calls\n",
              max_diff, session.tape_size(), static_cast<unsigned long long>(calls_after[0] - calls_before[0]),
              static_cast<unsigned long long>(calls_after[1] - calls_before[1]),
              static_cast<unsigned long long>(calls_after[2] - calls_before[2]));
  std::printf("  ours: capsule::train_step (Sequential[linear 4 8, relu, linear 8 1], mse_loss, Adam lr %.2g) "
              "ran %s\n",
              kLr, capsules_line(session).c_str());
  std::printf("  LibTorch: torch::nn::Sequential(Linear, ReLU, Linear), torch::mse_loss, torch::optim::Adam; "
              "zero_grad, forward, backward, step\n");
}

// ---- 4: 256^3 matmul ------------------------------------------------------------------------------

void bench_matmul(Verdicts& verdicts, std::int64_t iters) {
  constexpr std::int64_t n = 256;
  const Tensor a = random_tensor({n, n}, 31);
  const Tensor b = random_tensor({n, n}, 32);
  Session session = open_session(false, {Op::Matmul});
  const Var va = session.constant(a);
  const Var vb = session.constant(b);

  // Bitwise check against the naive fixed-left loop (this file is built with -ffp-contract=off).
  const Tensor product = expect(session.call(Op::Matmul, {va, vb}), "matmul").value();
  std::vector<float> naive(static_cast<std::size_t>(n * n));
  {
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (std::int64_t k = 0; k < n; ++k) acc = acc + pa[i * n + k] * pb[k * n + j];
        naive[static_cast<std::size_t>(i * n + j)] = acc;
      }
    }
  }
  const bool bitwise = std::memcmp(naive.data(), product.data<float>(), naive.size() * sizeof(float)) == 0;

  torch::NoGradGuard no_grad;
  const at::Tensor ta = to_torch(a);
  const at::Tensor tb = to_torch(b);
  const float max_diff = (at::matmul(ta, tb) - to_torch(product)).abs().max().item<float>();

  auto ours = [&] {
    RuntimeResult<Var> out = session.call(Op::Matmul, {va, vb});
    if (!out) die("matmul failed: " + out.error().message);
    benchmark::DoNotOptimize(out->value().data<float>());
  };
  auto theirs = [&] {
    at::Tensor out = at::matmul(ta, tb);
    benchmark::DoNotOptimize(out.data_ptr<float>());
  };
  const std::uint64_t sgemm_before = g_sgemm_calls;
  const Timing t = compare(iters, ours, theirs);
  const std::uint64_t sgemm_calls = g_sgemm_calls - sgemm_before;

  const double flops = 2.0 * static_cast<double>(n * n * n);
  const double ours_gflops = flops / t.ours;  // flop per ns = GFLOP/s
  const double theirs_gflops = flops / t.theirs;
  const double ratio = ours_gflops / theirs_gflops;
  std::printf("matmul 256x256x256 f32: ours %.2f GFLOP/s (%s), LibTorch %.2f GFLOP/s (%s): throughput ratio "
              "ours/LibTorch = %.3fx (target >= 0.25x): %s  [median of %d runs x %lld; best ours %.2f GFLOP/s, "
              "best LibTorch %.2f GFLOP/s]\n",
              ours_gflops, duration(t.ours).c_str(), theirs_gflops, duration(t.theirs).c_str(), ratio,
              verdicts.mark(ratio >= 0.25), kRuns, static_cast<long long>(iters), flops / t.ours_min,
              flops / t.theirs_min);
  std::printf("  ours: %s through Session::call (gradients=false); LibTorch: at::matmul, %llu sgemm_ calls in "
              "the timed loops\n",
              capsules_line(session).c_str(), static_cast<unsigned long long>(sgemm_calls));
  std::printf("  bitwise fixed-left: %s (max |ours - LibTorch| = %.3g)\n", bitwise ? "yes" : "no",
              static_cast<double>(max_diff));
  if (!bitwise) ++verdicts.failed;
}

}  // namespace

int main(int argc, char** argv) {
  bool strict = false;
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--capsule_strict") {
      strict = true;
    } else if (arg == "--capsule_quick") {
      quick = true;
    } else if (arg.starts_with("--capsule_only=")) {
      only = arg.substr(std::string_view("--capsule_only=").size());
    } else {
      std::cerr << "usage: capsule_bench_torch [--capsule_strict] [--capsule_quick] "
                   "[--capsule_only=add|add_grad|mlp|matmul|lt_overhead|lt_mlp]\n"
                   "(--capsule_only=lt_conv_child is lt_overhead's own child process: one line of figures)\n";
      return 2;
    }
  }
  single_thread_everything();
#if defined(CAPSULE_HAVE_LIBTORCH)
  if (only == "lt_conv_child") {  // a child of the large conv2d case (libtorch_overhead.cpp): its one line
    conv_overhead_child(quick);
    return 0;
  }
#endif
  print_environment();
  (void)fixture();

  const std::int64_t scale = quick ? 10 : 1;
  Verdicts verdicts;
  const auto wanted = [&only](std::string_view name) { return only.empty() || only == name; };
  if (!only.empty() && !wanted("add") && !wanted("add_grad") && !wanted("mlp") && !wanted("matmul") &&
      !wanted("lt_overhead") && !wanted("lt_mlp")) {
    std::cerr << "capsule_bench_torch: unknown comparison `" << only << "`\n";
    return 2;
  }
  if (wanted("add")) bench_add(verdicts, 200'000 / scale);
  if (wanted("add_grad")) bench_add_grad(verdicts, 200'000 / scale);
  if (wanted("mlp")) bench_mlp(verdicts, 2'000 / scale);
  if (wanted("matmul")) bench_matmul(verdicts, quick ? 4 : 20);
#if defined(CAPSULE_HAVE_LIBTORCH)
  print_libtorch_fingerprint();
  if (wanted("lt_overhead")) bench_libtorch_overhead(verdicts, scale);
  if (wanted("lt_mlp")) bench_mlp(verdicts, 2'000 / scale, "libtorch_cpu");
#else
  std::printf("the LibTorch provider is not built: no lt_overhead or lt_mlp comparison\n");
#endif
  std::printf("targets: %s\n",
              verdicts.failed == 0 ? "all met" : (std::to_string(verdicts.failed) + " missed").c_str());
  std::fflush(stdout);
  return strict && verdicts.failed != 0 ? 1 : 0;
}
