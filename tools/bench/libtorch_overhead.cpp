// SPDX-License-Identifier: Apache-2.0
// capsule_bench_torch's comparison 5 (torch_compare.cpp's header): the LibTorch provider's
// overhead per call, and the provider's fingerprint line.
#include "libtorch_overhead.hpp"

#if defined(CAPSULE_HAVE_LIBTORCH)

#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "capsule/handlers/libtorch.hpp"
#include "capsule/runtime/session.hpp"
#include "median_interval.hpp"
#include "self_process.hpp"
#include "torch_bench_support.hpp"

namespace capsule::torch_bench {
namespace {

// ---- 5: the LibTorch provider's overhead per call -----------------------------------------------
// The same ATen function three ways, gradients off, one thread: Session::call on the libtorch_cpu
// profile (our dispatch, the handler's checks, from_blob views, our output buffer, the `*_out`
// call, the in-place check, and any boundary copy the handler reports), the functional ATen call
// (ATen allocates the result) and its `*_out` form into a buffer allocated once. The overhead is
// ours minus ATen, in ns per call; the targets (issue 10) are <= 300 ns over the functional form
// and, for the 64x64 matmul, ours/ATen <= 1.2x.

struct OverheadCase {
  const char* name;
  Op op;
  std::vector<Tensor> inputs;
  OpAttrs attrs;
};

/// Our side of a case: the op through a libtorch_cpu session, on the case's inputs as constants.
class OursThroughSession {
 public:
  explicit OursThroughSession(const OverheadCase& c) : case_(c), session_(open_session(false, {c.op}, "libtorch_cpu")) {
    for (const Tensor& t : c.inputs) vars_.push_back(session_.constant(t));
  }
  void operator()() {
    RuntimeResult<Var> result = session_.call(case_.op, vars_, case_.attrs);
    if (!result) die(std::string(case_.name) + " failed: " + result.error().message);
    benchmark::DoNotOptimize(result->value().data<float>());
  }
  const Session& session() const { return session_; }

 private:
  const OverheadCase& case_;
  Session session_;
  std::vector<Var> vars_;
};

template <class Functional, class Out>
void bench_overhead(Verdicts& verdicts, std::int64_t iters, const OverheadCase& c, Functional&& functional, Out&& out,
                    double ratio_target) {
  OursThroughSession ours(c);
  const std::uint64_t copies_before = [] {
    std::uint64_t n = 0;
    for (const LibTorchBoundaryCopies& op : libtorch_boundary_copies()) n += op.total();
    return n;
  }();
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
  std::printf("  ours: %s; %llu boundary copies per call\n", capsules_line(ours.session()).c_str(),
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
// 41 processes give the median a 95% interval about ±130 ns wide (docs/benchmarks.md, "The large
// conv2d, judged across processes"); --capsule_quick runs 7.
constexpr int kConvProcesses = 41;
constexpr int kConvProcessesQuick = 7;
/// Pairs per child process; the child and the parent's report both read it from here.
std::int64_t large_conv_pairs(bool quick) { return quick ? 200 : 2'000; }
constexpr const char* kLargeConv = "conv2d x[1, 8, 32, 32] w[16, 8, 3, 3] pad 1 f32";
const std::vector<std::int64_t> kLargeConvX{1, 8, 32, 32};
const std::vector<std::int64_t> kLargeConvW{16, 8, 3, 3};

}  // namespace

/// The child's side (--capsule_only=lt_conv_child): one line, `capsule-conv-child <overhead> <a/a>`
/// in ns, the overhead against the faster of the grad-off and InferenceMode baselines, as
/// bench_overhead judges it.
void conv_overhead_child(bool quick) {
  const std::int64_t pairs = large_conv_pairs(quick);
  const OverheadCase c = conv_case(kLargeConv, kLargeConvX, kLargeConvW, 45);
  OursThroughSession ours(c);
  const at::Tensor x = aten_of(c.inputs[0]);
  const at::Tensor w = aten_of(c.inputs[1]);
  const at::Tensor bias = aten_of(c.inputs[2]);
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

namespace {

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
  const char* resolution = bench::interval_against(overhead, 300.0);
  std::printf("%s: overhead over functional, one figure per fresh process (%d processes, %lld pairs each): [%s] "
              "ns; median %+.0f ns (95%% CI %+.0f to %+.0f; target <= 300 ns): %s%s\n",
              kLargeConv, processes, static_cast<long long>(pairs),
              list(overheads).c_str(), overhead.median, overhead.low, overhead.high,
              verdicts.mark(overhead.median <= 300.0), resolution);
  std::printf("  the functional call against itself (A/A), in the same processes: [%s] ns, median %+.0f ns (95%% CI "
              "%+.0f to %+.0f): the harness's own bias\n",
              list(same).c_str(), aa.median, aa.low, aa.high);
}

}  // namespace

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

}  // namespace capsule::torch_bench

#endif  // CAPSULE_HAVE_LIBTORCH
