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
#include <cmath>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "capsule/load.hpp"
#include "capsule/handlers/reference.hpp"
#if defined(CAPSULE_HAVE_LIBTORCH)
#include "capsule/handlers/libtorch.hpp"
#endif
#include "capsule/runtime/model.hpp"
#include "capsule/runtime/session.hpp"
#include "median_interval.hpp"
#include "rng.hpp"
#include "self_process.hpp"

#ifndef CAPSULE_SOURCE_DIR
#error "CAPSULE_SOURCE_DIR must name the source tree (catalogs/ and profiles/)"
#endif
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

namespace {

constexpr int kRuns = 11;  // interleaved timed pairs per comparison; medians reported

[[noreturn]] void die(const std::string& message) {
  std::cerr << "capsule_bench_torch: " << message << "\n";
  std::exit(2);
}

template <class T>
T expect(RuntimeResult<T> result, std::string_view what) {
  if (!result) die(std::string(what) + ": " + result.error().message);
  return std::move(result).value();
}

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

// ---- timing -------------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

/// Nanoseconds per iteration of `iters` calls of body().
template <class F>
double ns_per_iter(std::int64_t iters, F&& body) {
  const auto start = Clock::now();
  for (std::int64_t i = 0; i < iters; ++i) body();
  const auto stop = Clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count() / static_cast<double>(iters);
}

double median(std::vector<double> values) { return bench::median_interval(values).median; }

struct Timing {
  double ours = 0;    // median ns per iteration
  double theirs = 0;  // median ns per iteration
  double ours_min = 0;
  double theirs_min = 0;
  /// Median over the pairs of (ours − theirs): a pair's two blocks run back to back, so a drift
  /// of the machine's speed between pairs cancels, which the difference of the medians keeps.
  double paired_overhead = 0;
};

/// No guard around a timed block.
struct Unscoped {};

/// One warm-up loop of each side, then kRuns interleaved timed pairs. Each timed block of
/// theirs runs inside one TheirsScope (a guard a LibTorch user sets once around a workload, such
/// as c10::InferenceMode), so the guard's own cost is not charged per call.
template <class TheirsScope = Unscoped, class Ours, class Theirs>
Timing compare(std::int64_t iters, Ours&& ours, Theirs&& theirs, int runs = kRuns) {
  auto time_theirs = [&](std::int64_t n) {
    [[maybe_unused]] const TheirsScope scope;
    return ns_per_iter(n, theirs);
  };
  ns_per_iter(std::max<std::int64_t>(iters / 4, 1), ours);
  time_theirs(std::max<std::int64_t>(iters / 4, 1));
  std::vector<double> a, b;
  std::vector<double> differences;
  for (int run = 0; run < runs; ++run) {
    if (run % 2 == 0) {
      a.push_back(ns_per_iter(iters, ours));
      b.push_back(time_theirs(iters));
    } else {
      b.push_back(time_theirs(iters));
      a.push_back(ns_per_iter(iters, ours));
    }
    differences.push_back(a.back() - b.back());
  }
  return Timing{median(a), median(b), *std::min_element(a.begin(), a.end()), *std::min_element(b.begin(), b.end()),
                median(differences)};
}

/// One call per side per pair, each timed alone, the order alternating from pair to pair; judged on
/// the median of the per-pair differences. For a call of tens of µs whose speed drifts by more
/// than a µs between blocks of calls (the large conv2d), block timing cannot resolve a few hundred
/// ns of overhead; a pair of single calls run back to back sees the same machine state on both
/// sides, and the clock's own cost (one steady_clock read per call side) is the same on both and
/// cancels in the difference. When both sides' times differ only by a shift δ plus noise of the
/// same distribution, each difference is δ plus a symmetric error, so its median estimates δ.
struct PairedCalls {
  double ours = 0;    // median ns per call
  double theirs = 0;  // median ns per call
  double ours_min = 0;
  double theirs_min = 0;
  double overhead = 0;  // median of (ours − theirs) over the pairs
  double overhead_low = 0;  // its 95% confidence interval (median_interval.hpp)
  double overhead_high = 0;
  std::int64_t pairs = 0;
};

/// Calls body() once and returns its duration in ns. The guard, if any, is made before the clock
/// starts, so its cost is not charged (a LibTorch user sets InferenceMode once around a workload).
template <class Scope, class F>
double time_one_call(F& body) {
  [[maybe_unused]] const Scope scope;
  const auto start = Clock::now();
  body();
  const auto stop = Clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count();
}

/// Made before a timed call (time_one_call's Scope): walks a buffer four times the size of this
/// CPU's L2 cache (4 MiB, more than the 1 MiB of a Zen 4 core), so the call starts with L1d and
/// L2 holding none of its data and, L2 being unified, none of its code beyond what L1i keeps. A
/// heavy call (the large conv2d's im2col buffer and output) leaves its successor in about that
/// state; this shows what the same fixed work costs there when the op itself is small.
struct EvictedCaches {
  EvictedCaches() {
    static std::vector<unsigned char> walk(std::size_t{4} << 20, 1);
    unsigned sum = 0;
    for (std::size_t i = 0; i < walk.size(); i += 64) sum += walk[i]++;
    benchmark::DoNotOptimize(sum);
  }
};

template <class TheirsScope = Unscoped, class OursScope = Unscoped, class Ours, class Theirs>
PairedCalls compare_calls(std::int64_t pairs, Ours&& ours, Theirs&& theirs) {
  for (std::int64_t i = 0; i < std::max<std::int64_t>(pairs / 10, 1); ++i) {
    time_one_call<OursScope>(ours);
    time_one_call<TheirsScope>(theirs);
  }
  std::vector<double> a(static_cast<std::size_t>(pairs));
  std::vector<double> b(a.size());
  std::vector<double> differences(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (i % 2 == 0) {
      a[i] = time_one_call<OursScope>(ours);
      b[i] = time_one_call<TheirsScope>(theirs);
    } else {
      b[i] = time_one_call<TheirsScope>(theirs);
      a[i] = time_one_call<OursScope>(ours);
    }
    differences[i] = a[i] - b[i];
  }
  PairedCalls result;
  result.pairs = pairs;
  result.ours = median(a);
  result.theirs = median(b);
  result.ours_min = *std::min_element(a.begin(), a.end());
  result.theirs_min = *std::min_element(b.begin(), b.end());
  const bench::MedianInterval overhead = bench::median_interval(differences);
  result.overhead = overhead.median;
  result.overhead_low = overhead.low;
  result.overhead_high = overhead.high;
  return result;
}

std::string duration(double ns) {
  char buffer[32];
  if (ns < 1e3) {
    std::snprintf(buffer, sizeof buffer, "%.1f ns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buffer, sizeof buffer, "%.2f us", ns / 1e3);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.3f ms", ns / 1e6);
  }
  return buffer;
}

struct Verdicts {
  int failed = 0;
  const char* mark(bool pass) {
    if (!pass) ++failed;
    return pass ? "PASS" : "FAIL";
  }
};

void print_time_ratio(Verdicts& verdicts, const char* what, const char* unit, const Timing& t, double target,
                      std::int64_t iters) {
  const double ratio = t.ours / t.theirs;
  std::printf("%s: ours %s/%s, LibTorch %s/%s: ratio ours/LibTorch = %.3fx (target <= %.2fx): %s  "
              "[median of %d runs x %lld; best ours %s, best LibTorch %s]\n",
              what, duration(t.ours).c_str(), unit, duration(t.theirs).c_str(), unit, ratio, target,
              verdicts.mark(ratio <= target), kRuns, static_cast<long long>(iters), duration(t.ours_min).c_str(),
              duration(t.theirs_min).c_str());
}

// ---- fixtures -----------------------------------------------------------------------------------

struct Fixture {
  Workspace workspace;
  HandlerRegistry handlers;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture out;
    const fs::path source = CAPSULE_SOURCE_DIR;
    out.workspace = load_workspace({source / "catalogs"}, {source / "profiles"});
    if (has_errors(out.workspace.diagnostics)) die("shipped catalogs failed to load:\n" + render(out.workspace.diagnostics));
    expect(register_reference_handlers(out.handlers), "registering the reference handlers");
#if defined(CAPSULE_HAVE_LIBTORCH)
    expect(register_libtorch_handlers(out.handlers), "registering the LibTorch handlers");
#endif
    return out;
  }();
  return f;
}

Session open_session(bool gradients, std::vector<Op> preselect, std::string profile = "checked_cpu") {
  SessionOptions options;
  options.profile = profile;
  options.gradients = gradients;
  options.preselect = std::move(preselect);
  return expect(Session::open(fixture().workspace, fixture().handlers, std::move(options)), "opening " + profile);
}

/// `op -> capsule (handler)` for every capsule a session ran.
std::string capsules_line(const Session& session) {
  std::string out;
  for (const CapsuleUse& use : session.capsules_used()) {
    if (!out.empty()) out += ", ";
    out += std::string(to_string(use.op)) + " -> " + use.capsule->name;
  }
  return out;
}

Tensor random_tensor(std::span<const std::int64_t> dims, std::uint64_t seed) {
  const Shape shape = expect(Shape::make(dims), "shape");
  bench::Rng rng{seed};
  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  // Uniform in [-1, 1) on a 2^-24 grid: exactly representable in float32.
  for (double& v : values) v = static_cast<double>(rng.next() >> 40) / 8388608.0 - 1.0;
  return expect(Tensor::from_values(shape, DType::F32, values), "tensor");
}

Tensor random_tensor(std::initializer_list<std::int64_t> dims, std::uint64_t seed) {
  return random_tensor(std::span<const std::int64_t>(dims.begin(), dims.size()), seed);
}

at::Tensor to_torch(const Tensor& t) {
  std::vector<std::int64_t> dims = t.shape().to_vector();
  return torch::from_blob(const_cast<float*>(t.data<float>()), dims, torch::kFloat32).clone();
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

// ---- 5: the LibTorch provider's overhead per call -----------------------------------------------
// The same ATen function three ways, gradients off, one thread: Session::call on the libtorch_cpu
// profile (our dispatch, the handler's checks, from_blob views, our output buffer, the `*_out`
// call, the in-place check, and any boundary copy the handler reports), the functional ATen call
// (ATen allocates the result) and its `*_out` form into a buffer allocated once. The overhead is
// ours minus ATen, in ns per call; the targets (issue 10) are <= 300 ns over the functional form
// and, for the 64x64 matmul, ours/ATen <= 1.2x.

#if defined(CAPSULE_HAVE_LIBTORCH)

struct OverheadCase {
  const char* name;
  Op op;
  std::vector<Tensor> inputs;
  OpAttrs attrs;
};

template <class Functional, class Out>
void bench_overhead(Verdicts& verdicts, std::int64_t iters, const OverheadCase& c, Functional&& functional, Out&& out,
                    double ratio_target) {
  Session session = open_session(false, {c.op}, "libtorch_cpu");
  std::vector<Var> vars;
  for (const Tensor& t : c.inputs) vars.push_back(session.constant(t));
  const std::uint64_t copies_before = [] {
    std::uint64_t n = 0;
    for (const LibTorchBoundaryCopies& op : libtorch_boundary_copies()) n += op.total();
    return n;
  }();
  auto ours = [&] {
    RuntimeResult<Var> result = session.call(c.op, vars, c.attrs);
    if (!result) die(std::string(c.name) + " failed: " + result.error().message);
    benchmark::DoNotOptimize(result->value().data<float>());
  };
  ours();
  std::uint64_t copies_per_call = 0;
  for (const LibTorchBoundaryCopies& op : libtorch_boundary_copies()) copies_per_call += op.total();
  copies_per_call -= copies_before;
  torch::NoGradGuard no_grad;
  // ATen at its best: each baseline is timed with grad off and again under c10::InferenceMode
  // (which also skips the Autograd and ADInplaceOrView kernels and version counters), and the
  // faster of the two is the baseline: the one our paired overhead is larger against. Judged on
  // the paired differences, not on the two baselines' medians, which come from different stretches
  // of time and drift apart by more than the modes differ on this VM.
  const auto faster = [](const PairedCalls& x, const PairedCalls& y) { return x.overhead >= y.overhead ? x : y; };
  // One call a side per pair (compare_calls): the overhead is the median of the per-pair
  // differences, with its 95% confidence interval. Earlier versions timed blocks of calls and
  // could not resolve the large conv2d's overhead from its drift between blocks.
  const std::int64_t pairs = std::max<std::int64_t>(iters * 11, 1);
  const PairedCalls fn_grad_off = compare_calls(pairs, ours, functional);
  const PairedCalls fn_inference = compare_calls<c10::InferenceMode>(pairs, ours, functional);
  const PairedCalls fn = faster(fn_grad_off, fn_inference);
  const PairedCalls into = faster(compare_calls(pairs, ours, out), compare_calls<c10::InferenceMode>(pairs, ours, out));
  const double over_fn = fn.overhead;
  const double over_out = into.overhead;
  const double ratio = fn.ours / fn.theirs;
  const bool overhead_ok = over_fn <= 300.0;
  std::printf("%s: ours %s/call, ATen functional %s, ATen _out %s: overhead %+.0f ns over functional (95%% CI %+.0f "
              "to %+.0f; target <= 300 ns): %s, %+.0f ns over _out; ratio ours/functional = %.3fx",
              c.name, duration(fn.ours).c_str(), duration(fn.theirs).c_str(), duration(into.theirs).c_str(), over_fn,
              fn.overhead_low, fn.overhead_high, verdicts.mark(overhead_ok), over_out, ratio);
  if (ratio_target > 0) std::printf(" (target <= %.2fx): %s", ratio_target, verdicts.mark(ratio <= ratio_target));
  std::printf("  [medians of %lld pairs of single timed calls; best ours %s, best functional %s, best _out %s; "
              "functional with grad off %s (overhead %+.0f ns), under InferenceMode %s (overhead %+.0f ns)]\n",
              static_cast<long long>(pairs), duration(fn.ours_min).c_str(), duration(fn.theirs_min).c_str(),
              duration(into.theirs_min).c_str(), duration(fn_grad_off.theirs).c_str(), fn_grad_off.overhead,
              duration(fn_inference.theirs).c_str(), fn_inference.overhead);
  std::printf("  ours: %s; %llu boundary copies per call\n", capsules_line(session).c_str(),
              static_cast<unsigned long long>(copies_per_call));
  // The same pairs with L1d and L2 evicted before each call (both sides, untimed), against the
  // functional form with grad off: no target, it attributes the overhead's growth with a heavy
  // call's working set (docs/benchmarks.md). Fewer pairs: each eviction walks 4 MiB.
  const PairedCalls cold =
      compare_calls<EvictedCaches, EvictedCaches>(std::min<std::int64_t>(pairs, 20'000), ours, functional);
  std::printf("  with L1d and L2 evicted before each call: ours %s/call, ATen functional %s: overhead %+.0f ns "
              "(95%% CI %+.0f to %+.0f; info, no target)  [medians of %lld pairs]\n",
              duration(cold.ours).c_str(), duration(cold.theirs).c_str(), cold.overhead, cold.overhead_low,
              cold.overhead_high, static_cast<long long>(cold.pairs));
}

/// The same memory as our tensor, not a copy: ATen's side of an overhead case reads exactly the
/// buffers our session reads (the session's constants share their storage), so the two sides
/// differ only in the call path, never in their inputs' addresses and alignment, which decide
/// cache-set conflicts and differ from process to process. ATen's functional ops never write
/// their inputs, so our immutable storage stays unchanged.
at::Tensor aten_of(const Tensor& t) {
  if (t.dtype() != DType::F32) die("aten_of: the overhead cases are float32; got " + std::string(to_string(t.dtype())));
  return torch::from_blob(const_cast<float*>(t.data<float>()), t.shape().to_vector(), torch::kFloat32);
}

/// conv2d with padding 1, stride 1 and a bias, x [n, c, h, w] and w [o, c, 3, 3].
OverheadCase conv_case(const char* name, const std::vector<std::int64_t>& x_dims,
                       const std::vector<std::int64_t>& w_dims, std::uint64_t seed) {
  OpAttrs attrs;
  attrs.padding = {1, 1};
  return {name, Op::Conv,
          {random_tensor(x_dims, seed), random_tensor(w_dims, seed + 1), random_tensor({w_dims[0]}, seed + 2)}, attrs};
}

/// at::convolution on the case's own buffers, as our handler calls it (padding 1, stride 1).
at::Tensor aten_conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  return at::convolution(x, w, bias, {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1);
}

/// A conv through our session against at::convolution and at::convolution_out.
void bench_conv_overhead(Verdicts& verdicts, std::int64_t iters, const char* name, std::vector<std::int64_t> x_dims,
                         std::vector<std::int64_t> w_dims, std::uint64_t seed) {
  const OverheadCase c = conv_case(name, x_dims, w_dims, seed);
  const at::Tensor x = aten_of(c.inputs[0]);
  const at::Tensor w = aten_of(c.inputs[1]);
  const at::Tensor bias = aten_of(c.inputs[2]);
  at::Tensor into = at::empty({x_dims[0], w_dims[0], x_dims[2], x_dims[3]});
  bench_overhead(
      verdicts, iters, c, [&] { benchmark::DoNotOptimize(aten_conv(x, w, bias).data_ptr<float>()); },
      [&] {
        benchmark::DoNotOptimize(
            at::convolution_out(into, x, w, bias, {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1).data_ptr<float>());
      },
      0);
}

// The large conv's overhead, across processes. Its call takes about 44 µs, and within one process
// the paired medians carry a bias of their own: the functional call timed against itself (A/A)
// came out at +1382, -230, -61 and -30 ns in four processes (2026-12-04), each with a 95% interval
// about 10 ns wide. A process keeps its heap's physical pages, which decide which L2 sets the
// buffers of each side share, for its whole run. So the target is judged on the median over
// several fresh processes, each measuring both our overhead and the A/A difference; the A/A
// figures show the harness's own bias. Many short processes rather than a few long ones: within
// one, 2,000 pairs already put the median within tens of ns; across processes it moves by
// hundreds.
// 41 processes put the median's 95% interval within about ±200 ns (63 processes pooled from three
// runs of 21: median +154 ns, interval +1 to +308 ns); --capsule_quick runs 7.
constexpr int kConvProcesses = 41;
constexpr int kConvProcessesQuick = 7;
/// Pairs per child process; the child and the parent's report both read it from here.
std::int64_t large_conv_pairs(bool quick) { return quick ? 200 : 2'000; }
constexpr const char* kLargeConv = "conv2d x[1, 8, 32, 32] w[16, 8, 3, 3] pad 1 f32";
const std::vector<std::int64_t> kLargeConvX{1, 8, 32, 32};
const std::vector<std::int64_t> kLargeConvW{16, 8, 3, 3};

/// The child's side (--capsule_only=lt_conv_child): one line, `capsule-conv-child <overhead> <a/a>`
/// in ns, the overhead against the faster of the grad-off and InferenceMode baselines, as
/// bench_overhead judges it.
void conv_overhead_child(std::int64_t pairs) {
  const OverheadCase c = conv_case(kLargeConv, kLargeConvX, kLargeConvW, 45);
  Session session = open_session(false, {c.op}, "libtorch_cpu");
  std::vector<Var> vars;
  for (const Tensor& t : c.inputs) vars.push_back(session.constant(t));
  const at::Tensor x = aten_of(c.inputs[0]);
  const at::Tensor w = aten_of(c.inputs[1]);
  const at::Tensor bias = aten_of(c.inputs[2]);
  auto ours = [&] {
    RuntimeResult<Var> result = session.call(c.op, vars, c.attrs);
    if (!result) die(std::string(c.name) + " failed: " + result.error().message);
    benchmark::DoNotOptimize(result->value().data<float>());
  };
  auto functional = [&] { benchmark::DoNotOptimize(aten_conv(x, w, bias).data_ptr<float>()); };
  // The same call again, as a lambda of its own (a copy of `functional` would be the same code,
  // and code placement is one of the things that differ between two sides).
  auto functional_again = [&] { benchmark::DoNotOptimize(aten_conv(x, w, bias).data_ptr<float>()); };
  torch::NoGradGuard no_grad;
  const PairedCalls grad_off = compare_calls(pairs, ours, functional);
  const PairedCalls inference = compare_calls<c10::InferenceMode>(pairs, ours, functional);
  const PairedCalls same = compare_calls(pairs, functional_again, functional);
  std::printf("capsule-conv-child %.1f %.1f\n", std::max(grad_off.overhead, inference.overhead), same.overhead);
}

void bench_conv_overhead_across_processes(Verdicts& verdicts, bool quick) {
  const std::int64_t pairs = large_conv_pairs(quick);
  std::vector<double> overheads, same;
  std::vector<std::string> args{"--capsule_only=lt_conv_child"};
  if (quick) args.emplace_back("--capsule_quick");
  const int processes = quick ? kConvProcessesQuick : kConvProcesses;
  for (int p = 0; p < processes; ++p) {
    const auto run = bench::run_self(args);
    if (const auto* failed = std::get_if<bench::ChildFailure>(&run)) {
      die("the large conv2d's child process " + std::to_string(p + 1) + " failed: " + failed->why);
    }
    const std::string& out = std::get<bench::ChildOutput>(run).text;
    double overhead = 0, aa = 0;
    const std::size_t at = out.find("capsule-conv-child ");
    if (at == std::string::npos || std::sscanf(out.c_str() + at, "capsule-conv-child %lf %lf", &overhead, &aa) != 2) {
      die("the large conv2d's child process " + std::to_string(p + 1) + " printed no `capsule-conv-child` line");
    }
    overheads.push_back(overhead);
    same.push_back(aa);
  }
  auto list = [](const std::vector<double>& values) {
    std::string text;
    for (double v : values) text += (text.empty() ? "" : ", ") + std::to_string(static_cast<long long>(std::lround(v)));
    return text;
  };
  const bench::MedianInterval overhead = bench::median_interval(overheads);
  const bench::MedianInterval aa = bench::median_interval(same);
  const char* resolution = overhead.high <= 300.0  ? ""
                           : overhead.low > 300.0  ? "; the whole interval lies above the target"
                                                   : "; the interval straddles the target: not resolved in this run";
  std::printf("%s: overhead over functional, one figure per fresh process (%d processes, %lld pairs each): [%s] "
              "ns; median %+.0f ns (95%% CI %+.0f to %+.0f; target <= 300 ns): %s%s\n",
              kLargeConv, processes, static_cast<long long>(pairs),
              list(overheads).c_str(), overhead.median, overhead.low, overhead.high,
              verdicts.mark(overhead.median <= 300.0), resolution);
  std::printf("  the functional call against itself (A/A), in the same processes: [%s] ns, median %+.0f ns (95%% CI "
              "%+.0f to %+.0f): the harness's own bias\n",
              list(same).c_str(), aa.median, aa.low, aa.high);
}

void bench_libtorch_overhead(Verdicts& verdicts, std::int64_t scale) {
  {
    const OverheadCase c{"add [64, 64] f32", Op::Add, {random_tensor({64, 64}, 41), random_tensor({64, 64}, 42)}, {}};
    const at::Tensor a = aten_of(c.inputs[0]);
    const at::Tensor b = aten_of(c.inputs[1]);
    at::Tensor into = at::empty_like(a);
    bench_overhead(
        verdicts, 100'000 / scale, c, [&] { benchmark::DoNotOptimize(at::add(a, b).data_ptr<float>()); },
        [&] { benchmark::DoNotOptimize(at::add_out(into, a, b).data_ptr<float>()); }, 0);
  }
  {
    const OverheadCase c{"matmul 64x64x64 f32", Op::Matmul, {random_tensor({64, 64}, 43), random_tensor({64, 64}, 44)}, {}};
    const at::Tensor a = aten_of(c.inputs[0]);
    const at::Tensor b = aten_of(c.inputs[1]);
    at::Tensor into = at::empty({64, 64});
    bench_overhead(
        verdicts, 20'000 / scale, c, [&] { benchmark::DoNotOptimize(at::matmul(a, b).data_ptr<float>()); },
        [&] { benchmark::DoNotOptimize(at::matmul_out(into, a, b).data_ptr<float>()); }, 1.2);
  }
  // A conv small enough that ATen's own time (a few µs) varies less than the target: the per-call
  // overhead, measured in this process.
  bench_conv_overhead(verdicts, 20'000 / scale, "conv2d x[1, 2, 8, 8] w[4, 2, 3, 3] pad 1 f32", {1, 2, 8, 8},
                      {4, 2, 3, 3}, 48);
  bench_conv_overhead_across_processes(verdicts, scale != 1);
}

/// The LibTorch provider's entries of the fingerprint: its BLAS, core and threads.
void print_libtorch_fingerprint() {
  std::printf("LibTorch provider fingerprint:");
  for (const auto& [key, value] : libtorch_fingerprint().entries) std::printf(" %s=%s;", key.c_str(), value.c_str());
  std::printf("\n");
}

#endif  // CAPSULE_HAVE_LIBTORCH

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
  if (only == "lt_conv_child") {  // a child of bench_conv_overhead_across_processes: its one line
    conv_overhead_child(large_conv_pairs(quick));
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
