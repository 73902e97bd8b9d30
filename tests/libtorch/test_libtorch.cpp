// SPDX-License-Identifier: Apache-2.0
// The LibTorch CPU provider's parity suites (libtorch.values, libtorch.vjps, and for external
// autograd libtorch.autograd_values, libtorch.autograd_vjps) and its boundary tests. Every LibTorch
// handler is compared with the reference handler of its op, forward and local adjoint, on random
// inputs of both dtypes, broadcasting and size-0/1 edge cases (the parity table, parity_table.hpp,
// which the CUDA twins' GPU suites share) and the special-value classes of docs/special-values.md,
// under the per-op bounds of docs/libtorch.md. Built only when the LibTorch provider is
// (CAPSULE_HAVE_LIBTORCH).
#if defined(CAPSULE_HAVE_LIBTORCH)

#include <ATen/record_function.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>
#include <dlfcn.h>
#include <doctest/doctest.h>
#include <torch/csrc/api/include/torch/version.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>
#include <random>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "capsule/handlers/libtorch.hpp"
#include "capsule/text.hpp"
#include "parity_table.hpp"
#include "special_cases.hpp"
#include "suite_coverage.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

const HandlerRegistry& libtorch_handlers() {
  static const HandlerRegistry registry = [] {
    set_libtorch_threads(1);  // ctest -j2 on two cores: one thread per test process
    HandlerRegistry r;
    auto status = register_libtorch_handlers(r);
    REQUIRE_MESSAGE(status.has_value(), (status ? std::string() : status.error().message));
    return r;
  }();
  return registry;
}

/// The LibTorch CPU handler of `op`, recorded as exercised by the running suite (the ledger
/// attributes the case's checks to it).
const HandlerSpec& libtorch_handler(Op op) {
  const RegisteredHandler* h = libtorch_handlers().find(op, Provider::Libtorch, Device::Cpu);
  REQUIRE_MESSAGE(h != nullptr, "no LibTorch handler for " << to_string(op));
  testing::record_exercised(op, Provider::Libtorch, Device::Cpu);
  return h->spec;
}

/// The oracle: the reference handler, fetched without recording (the suites judge LibTorch).
const HandlerSpec& oracle(Op op) {
  const RegisteredHandler* h = testing::reference_handlers().find(op, Provider::Reference, Device::Cpu);
  REQUIRE_MESSAGE(h != nullptr, "no reference handler for " << to_string(op));
  return h->spec;
}

// ---------------------------------------------------------------------------------------------
// The parity table (parity_table.hpp, shared with the CUDA twins' GPU suites), run on the CPU.

using namespace libtorch_parity;  // the table's cases, bounds and comparisons

void check_forward(const ParityCase& c, DType dtype, std::uint64_t seed) {
  libtorch_parity::check_forward(libtorch_handler(c.op), oracle(c.op), c, dtype, seed);
}

void check_backward(const ParityCase& c, DType dtype, std::uint64_t seed) {
  libtorch_parity::check_backward(libtorch_handler(c.op), oracle(c.op), c, dtype, seed);
}

/// The LibTorch path a special-value check runs: the plain handler (its forward, then its adjoint
/// kernel on the reference's output, as the tape calls it) or the external-autograd region
/// (`forward_autograd` with every differentiable input tracked, then its boundary's one VJP).
enum class Path { Plain, Autograd };

std::string to_string(Path path) { return path == Path::Plain ? "plain handler" : "autograd region"; }

/// What one LibTorch path computed: the output and, when a gradient was given, one gradient per
/// input (zeros where autograd did not reach a tracked input, as the engine makes them).
struct LibtorchRun {
  Tensor output;
  std::vector<Tensor> grads;
};

LibtorchRun run_libtorch(Path path, Op op, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                         const Tensor& ref_output, const Tensor* grad, const std::vector<bool>* tracked = nullptr) {
  const HandlerSpec& h = libtorch_handler(op);
  LibtorchRun run;
  if (path == Path::Plain) {
    RuntimeResult<Tensor> out = h.forward(inputs, attrs);
    REQUIRE_MESSAGE(out.has_value(), out.error().message);
    run.output = *out;
    if (grad == nullptr) return run;
    auto grads = h.backward(inputs, ref_output, *grad, attrs);
    REQUIRE_MESSAGE(grads.has_value(), grads.error().message);
    run.grads = std::move(*grads);
    return run;
  }
  REQUIRE((h.forward_autograd != nullptr));
  std::vector<bool> needs(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) needs[i] = inputs[i].defined() && input_takes_gradient(op, i);
  if (tracked != nullptr) needs = *tracked;  // the engine's flags, as the caller gives them
  auto region = h.forward_autograd(inputs, attrs, needs);
  REQUIRE_MESSAGE(region.has_value(), region.error().message);
  run.output = region->output;
  if (grad == nullptr) return run;
  auto grads = region->boundary->vjp(*grad);
  REQUIRE_MESSAGE(grads.has_value(), grads.error().message);
  REQUIRE(grads->size() == inputs.size());
  run.grads = std::move(*grads);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (needs[i] && inputs[i].defined() && !run.grads[i].defined()) {
      run.grads[i] = Tensor::zeros(inputs[i].shape(), inputs[i].dtype()).value();
    }
  }
  return run;
}

/// A gradient element where ATen autograd legitimately differs from the reference's adjoint
/// (docs/libtorch.md, "Differences from the reference under autograd"): the value ATen gives
/// there, or nothing where the reference's value holds. `x` is the input element, `g` the output
/// gradient's. relu's threshold_backward passes g at a NaN input, and abs's g·sgn(x) has sgn(NaN)
/// = +0, so its gradient is g·(+0) (NaN for an infinite g); the reference's slope there is NaN.
std::optional<double> autograd_gradient_difference(Op op, double x, double g) {
  if (!std::isnan(x)) return std::nullopt;
  if (op == Op::Relu) return g;
  if (op == Op::Abs) return g * 0.0;
  return std::nullopt;
}

/// `want` with the elements `pinned` names replaced by ATen's value. Returns the patched tensor and
/// counts in `differing` the pinned elements whose value is not the reference's (so a test can
/// assert that the difference it pins is real).
Tensor with_pinned(const Tensor& want, const std::vector<std::optional<double>>& pinned, std::size_t& differing) {
  std::vector<double> v = want.to_vector();
  for (std::size_t i = 0; i < v.size() && i < pinned.size(); ++i) {
    if (!pinned[i]) continue;
    if (!same_bits(*pinned[i], v[i])) ++differing;
    v[i] = *pinned[i];
  }
  return Tensor::from_values(want.shape(), want.dtype(), v).value();
}

/// One special-value check of a pointwise op on `path`: the output against the reference's under
/// the op's bound (non-finite results exactly), and with a gradient `g` (one value per output
/// element, or empty for the forward only) every input gradient against the reference's adjoint.
/// The plain path is the shared check (parity_table.hpp), which the CUDA twins run too. Under
/// autograd a documented difference is pinned to ATen's value, exactly; the count of elements
/// where it differs from the reference is returned.
std::size_t check_special(Path path, Op op, const std::vector<Tensor>& inputs, const std::vector<double>& g) {
  if (path == Path::Plain) {
    check_special_plain(libtorch_handler(op), oracle(op), op, inputs, g);
    return 0;
  }
  CAPTURE(to_string(op));
  CAPTURE(to_string(path));
  const OpAttrs attrs = special_attrs();
  const Tensor out = oracle(op).forward(inputs, attrs).value();
  if (g.empty()) {
    const LibtorchRun lib = run_libtorch(path, op, inputs, attrs, out, nullptr);
    const std::string miss = compare(lib.output, out, pointwise_tolerance(op, false), nullptr, 1);
    CHECK_MESSAGE(miss.empty(), miss);
    return 0;
  }
  const Tensor grad = Tensor::from_values(out.shape(), out.dtype(), g).value();
  const LibtorchRun lib = run_libtorch(path, op, inputs, attrs, out, &grad);
  const auto ref = oracle(op).backward(inputs, out, grad, attrs).value();
  REQUIRE(lib.grads.size() == ref.size());
  std::size_t differing = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    Tensor want = ref[i];
    if (inputs.size() == 1) {
      const std::vector<double> x = inputs[0].to_vector();
      std::vector<std::optional<double>> pinned(x.size());
      for (std::size_t e = 0; e < x.size(); ++e) pinned[e] = autograd_gradient_difference(op, x[e], g[e]);
      want = with_pinned(want, pinned, differing);
      // A pinned element holds ATen's value bit for bit, whatever the op's bound.
      const std::vector<double> got = lib.grads[i].to_vector();
      const std::vector<double> patched = want.to_vector();
      for (std::size_t e = 0; e < x.size(); ++e) {
        if (!pinned[e]) continue;
        CHECK_MESSAGE(same_bits(got[e], patched[e]), "element " << e << ": " << got[e] << " vs ATen's " << patched[e]);
      }
    }
    const std::string miss = compare(lib.grads[i], want, pointwise_tolerance(op, true), nullptr, 1);
    CHECK_MESSAGE(miss.empty(), "gradient " << i << ": " << miss);
  }
  return differing;
}

/// Every pointwise op on the special-value classes (for_each_special, parity_table.hpp) on
/// `path`. Returns the pinned differences found per op (autograd only).
std::map<Op, std::size_t> check_specials(Path path, bool backward, bool non_finite_g = false) {
  return for_each_special(backward, non_finite_g, [&](Op op, const std::vector<Tensor>& inputs,
                                                      const std::vector<double>& g) {
    return check_special(path, op, inputs, g);
  });
}

/// The special-value cases `cases` (special_cases.hpp) on `path`: the plain handler through the
/// shared check, which the CUDA twins run too, or the autograd region with every input tracked.
/// A region's VJP runs even for a values check (with the first gradient), as the engine runs
/// it, so a VJP that fails also fails that check. Defined below, after expect_path_matches.
void run_special_cases(Path path, bool vjps, const std::vector<SpecialCase>& cases);

/// Softmax lanes holding NaN, +inf and −inf (the table's softmax-family row), on `path`; the
/// adjoint with g = 0.5 and (with `non_finite_g`) with a gradient holding NaN and ±inf.
void check_softmax_specials(Path path, bool backward, bool non_finite_g = false) {
  run_special_cases(path, backward, softmax_special_cases(non_finite_g));
}

/// smooth_max_pool windows (kernel 2, stride 2, padding 1) holding only −inf and padding, a NaN,
/// a +inf, only −inf, and a finite value beside padding (the table's windows row), on `path`.
void check_smooth_pool_specials(Path path, bool backward, bool non_finite_g = false) {
  run_special_cases(path, backward, smooth_pool_special_cases(non_finite_g));
}

const testing::SuiteCoverage kValueCoverage{"libtorch.values", Obligation::Value, Provider::Libtorch, Device::Cpu,
                                            covered_ops};
const testing::SuiteCoverage kVjpCoverage{"libtorch.vjps", Obligation::Vjp, Provider::Libtorch, Device::Cpu,
                                          covered_ops};

// ---------------------------------------------------------------------------------------------
// Copy accounting (docs/libtorch.md, "Copies at the boundary"): a probe that sees what ATen does
// during a handler call, to compare with what the handler reports.

/// The ATen buffers now alive that ATen's CPU allocator handed out while a probe was installed,
/// each with ATen's own DataPtr, which frees it.
struct LiveAtenBuffers {
  std::mutex mutex;
  std::map<const void*, c10::DataPtr> live;
};

LiveAtenBuffers& live_aten_buffers() {
  static LiveAtenBuffers buffers;
  return buffers;
}

/// The deleter of a probed buffer. Its context is the data pointer itself, as
/// Allocator::raw_allocate requires (oneDNN allocates that way).
void free_probed(void* data) {
  c10::DataPtr original;
  {
    LiveAtenBuffers& buffers = live_aten_buffers();
    const std::lock_guard lock(buffers.mutex);
    const auto it = buffers.live.find(data);
    if (it == buffers.live.end()) return;
    original = std::move(it->second);
    buffers.live.erase(it);
  }
}  // `original` frees the buffer here, outside the lock

/// Wraps ATen's CPU allocator: counts the buffers it hands out (every ATen tensor's storage on the
/// CPU; our from_blob inputs and our outputs never come from it) and tracks which are still alive.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* wrapped) : wrapped_(wrapped) {}
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  // LibTorch 2.3 made allocate non-const and added copy_data (unverified: no 2.x build here).
  c10::DataPtr allocate(std::size_t n) override { return track(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { wrapped_->copy_data(dest, src, count); }
#else
  c10::DataPtr allocate(std::size_t n) const override { return track(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return &free_probed; }
  std::uint64_t count() const { return count_; }

 private:
  c10::DataPtr track(std::size_t n) const {
    ++count_;
    c10::DataPtr original = wrapped_->allocate(n);
    void* data = original.get();
    if (data == nullptr) return original;  // nothing allocated, nothing an output could lie on
    const c10::Device device = original.device();
    {
      LiveAtenBuffers& buffers = live_aten_buffers();
      const std::lock_guard lock(buffers.mutex);
      buffers.live.emplace(data, std::move(original));
    }
    return c10::DataPtr(data, data, &free_probed, device);
  }

  c10::Allocator* wrapped_;
  mutable std::uint64_t count_ = 0;
};

/// Whether `data` starts a buffer ATen allocated under a probe that is still alive.
bool is_live_aten_buffer(const void* data) {
  LiveAtenBuffers& buffers = live_aten_buffers();
  const std::lock_guard lock(buffers.mutex);
  return buffers.live.contains(data);
}

/// The address of `t`'s first element.
const void* data_of(const Tensor& t) {
  return t.dtype() == DType::F32 ? static_cast<const void*>(t.data<float>()) : static_cast<const void*>(t.data<double>());
}

/// Whether `t`'s elements lie on such a buffer (an output ATen allocated and we adopted).
bool on_live_aten_buffer(const Tensor& t) {
  if (!t.defined() || t.numel() == 0) return false;
  return is_live_aten_buffer(data_of(t));
}

/// The ATen calls that copy data into another buffer when a handler issues them itself.
bool is_copy_call(std::string_view name) {
  return name == "aten::copy_" || name == "aten::to" || name == "aten::_to_copy" || name == "aten::contiguous" ||
         name == "aten::clone";
}

/// The outermost ATen calls on this thread: calls made inside another ATen call are the
/// operator's own business; the outermost ones are what a handler issued.
thread_local int t_aten_depth = 0;
thread_local std::uint64_t t_copy_calls = 0;

std::unique_ptr<at::ObserverContext> on_aten_enter(const at::RecordFunction& call) {
  if (t_aten_depth++ == 0 && is_copy_call(call.name())) ++t_copy_calls;
  return nullptr;
}

void on_aten_exit(const at::RecordFunction& /*call*/, at::ObserverContext* /*context*/) { --t_aten_depth; }

/// Installs the counting allocator and the call observer for its lifetime, restoring ATen's
/// allocator afterwards (SetCPUAllocator replaces at equal priority).
class CopyProbe {
 public:
  CopyProbe() : previous_(c10::GetCPUAllocator()), counting_(previous_) {
    c10::SetCPUAllocator(&counting_, kPriority);
    t_aten_depth = 0;
    t_copy_calls = 0;
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(on_aten_enter, on_aten_exit).scopes({at::RecordScope::FUNCTION}));
  }
  ~CopyProbe() {
    at::removeCallback(handle_);
    c10::SetCPUAllocator(previous_, kPriority);
  }
  CopyProbe(const CopyProbe&) = delete;
  CopyProbe& operator=(const CopyProbe&) = delete;

  std::uint64_t allocations() const { return counting_.count(); }
  std::uint64_t copies() const { return t_copy_calls; }

 private:
  static constexpr std::uint8_t kPriority = 0;  // the default CPU allocator's
  c10::Allocator* previous_;
  CountingAllocator counting_;
  at::CallbackHandle handle_ = 0;
};

/// Every boundary copy the LibTorch handlers reported so far.
std::uint64_t reported_copies() {
  std::uint64_t total = 0;
  for (const LibTorchBoundaryCopies& op : libtorch_boundary_copies()) total += op.total();
  return total;
}

/// Every ATen output the LibTorch handlers reported adopting so far.
std::uint64_t reported_adoptions() {
  std::uint64_t total = 0;
  for (const LibTorchBoundaryCopies& op : libtorch_boundary_copies()) total += op.adoptions;
  return total;
}

/// Outside any handler: a sum ATen allocates, copied once into another ATen buffer.
at::Tensor probe_aten_add(const Tensor& a) {
  const at::Tensor x = at::from_blob(const_cast<float*>(a.data<float>()), {a.dim(0), a.dim(1)}, at::kFloat);
  const at::Tensor sum = at::add(x, x);
  at::Tensor copy = at::empty_like(sum);
  copy.copy_(sum);
  return copy;
}

/// One handler call under the probe: the copies it issued itself equal the copies it reported,
/// and the outputs that lie on a buffer ATen allocated are exactly the adoptions it reported
/// (every other output is ours, written in place or filled by a reported copy).
template <class Call>
void expect_copies_reported(std::string_view what, Call&& call) {
  const std::uint64_t before = reported_copies();
  const std::uint64_t adopted_before = reported_adoptions();
  std::uint64_t issued = 0;
  std::uint64_t on_aten = 0;
  std::vector<const void*> aten_buffers;
  {
    CopyProbe probe;
    const std::vector<Tensor> outputs = call();
    issued = probe.copies();
    // Checked while the probe is installed: it knows the buffers ATen allocated under it.
    for (const Tensor& out : outputs) {
      if (!on_live_aten_buffer(out)) continue;
      ++on_aten;
      aten_buffers.push_back(data_of(out));
    }
  }
  // The outputs are gone, and with them every ATen buffer adopted for one: the storage's deleter
  // gave ATen's reference back (none leaked).
  for (const void* buffer : aten_buffers) {
    CHECK_MESSAGE(!is_live_aten_buffer(buffer), what << ": an adopted ATen buffer outlived the output over it");
  }
  const std::uint64_t reported = reported_copies() - before;
  const std::uint64_t adopted = reported_adoptions() - adopted_before;
  CHECK_MESSAGE(issued == reported, what << ": issued " << issued << " copies, reported " << reported);
  CHECK_MESSAGE(on_aten == adopted, what << ": " << on_aten << " outputs lie on buffers ATen allocated, "
                                         << adopted << " adoptions reported");
}

void check_copies_reported(const ParityCase& c, DType dtype, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> inputs;
  for (const InputSpec& spec : c.inputs) inputs.push_back(make_input(spec, dtype, rng).value());
  const Tensor out = oracle(c.op).forward(inputs, c.attrs).value();
  const Tensor grad = make_input({out.shape().to_vector()}, dtype, rng).value();
  const HandlerSpec& handler = libtorch_handler(c.op);
  expect_copies_reported("forward", [&] {
    RuntimeResult<Tensor> y = handler.forward(inputs, c.attrs);
    REQUIRE_MESSAGE(y.has_value(), (y ? std::string() : y.error().message));
    return std::vector<Tensor>{*y};
  });
  expect_copies_reported("adjoint", [&] {
    RuntimeResult<std::vector<Tensor>> grads = handler.backward(inputs, out, grad, c.attrs);
    REQUIRE_MESSAGE(grads.has_value(), (grads ? std::string() : grads.error().message));
    return *grads;
  });
}

}  // namespace

TEST_SUITE("libtorch.values") {
  TEST_CASE("every LibTorch handler's forward matches the reference on random inputs and edge shapes") {
    std::uint64_t seed = 100;
    for (const ParityCase& c : parity_cases()) {
      for (const DType dtype : {DType::F32, DType::F64}) {
        CAPTURE(c.name);
        CAPTURE(to_string(dtype));
        check_forward(c, dtype, ++seed);
      }
    }
  }
  TEST_CASE("pointwise forwards match the reference on the special-value classes") {
    (void)check_specials(Path::Plain, false);
  }
  TEST_CASE("softmax and log_softmax lanes with NaN and infinities match the reference") {
    check_softmax_specials(Path::Plain, false);
  }
  TEST_CASE("smooth_max_pool windows with NaN, infinities or only padding match the reference") {
    check_smooth_pool_specials(Path::Plain, false);
  }
  TEST_CASE("a LibTorch CPU handler refuses a tensor on another device, forward and backward, before reading it") {
    // A stand-in device tensor: its bytes are host memory nobody may read (the handler must refuse
    // it from its device alone; a read would still see finite values, so the codes decide).
    static std::array<float, 6> elsewhere{};
    const auto on_cuda = [](std::vector<std::int64_t> dims) {
      std::shared_ptr<Storage> storage = Storage::adopt(elsewhere.data(), sizeof elsewhere, Device::Cuda, nullptr, nullptr);
      return Tensor::over(std::move(storage), Shape::make(dims).value(), DType::F32).value();
    };
    const Tensor host = Tensor::from_values({2, 3}, DType::F32, {1, 2, 3, 4, 5, 6}).value();
    const Tensor device = on_cuda({2, 3});
    for (const auto& inputs : {std::vector<Tensor>{device, host}, std::vector<Tensor>{host, device}}) {
      const auto added = libtorch_handler(Op::Add).forward(inputs, {});
      REQUIRE_FALSE(added.has_value());
      CHECK(added.error().code == RuntimeCode::DeviceMismatch);
      CHECK(testing::has(added.error().message, "lives on device `cuda`; the LibTorch cpu handler expects device `cpu`"));
    }
    const Tensor square = on_cuda({2, 2});
    const auto product = libtorch_handler(Op::Matmul).forward(std::vector<Tensor>{square, square}, {});
    REQUIRE_FALSE(product.has_value());
    CHECK(product.error().code == RuntimeCode::DeviceMismatch);
    // A backward whose output gradient lives elsewhere is refused too.
    const Tensor y = libtorch_handler(Op::Relu).forward(std::vector<Tensor>{host}, {}).value();
    const auto grads = libtorch_handler(Op::Relu).backward(std::vector<Tensor>{host}, y, device, {});
    REQUIRE_FALSE(grads.has_value());
    CHECK(testing::has(grads.error().message, "must be defined tensors on device `cpu`"));
  }

  TEST_CASE("LibTorch handlers reject what the reference rejects") {
    const Tensor a = Tensor::from_values({2, 3}, DType::F32, {1, 2, 3, 4, 5, 6}).value();
    const Tensor b = Tensor::from_values({3}, DType::F32, {1, 2, 3}).value();
    // ATen would broadcast [2, 3] + [3]; the op's contract wants equal shapes.
    const auto add = libtorch_handler(Op::Add).forward(std::vector<Tensor>{a, b}, {});
    REQUIRE_FALSE(add.has_value());
    CHECK(add.error().code == RuntimeCode::ShapeMismatch);
    const Tensor d = Tensor::from_values({3}, DType::F64, {1, 2, 3}).value();
    const auto mixed = libtorch_handler(Op::Mul).forward(std::vector<Tensor>{b, d}, {});
    REQUIRE_FALSE(mixed.has_value());
    CHECK(mixed.error().code == RuntimeCode::DTypeMismatch);
    // Padding above half the kernel is the reference's error, checked before ATen is called.
    OpAttrs pool;
    pool.kernel = {2};
    pool.padding = {5};
    const Tensor x = Tensor::from_values({1, 1, 3}, DType::F32, {1, 2, 3}).value();
    const auto padded = libtorch_handler(Op::MaxPool).forward(std::vector<Tensor>{x}, pool);
    REQUIRE_FALSE(padded.has_value());
    CHECK(padded.error().code == RuntimeCode::InvalidArgument);
    CHECK(testing::has(padded.error().message, "max_pool: x has shape [1, 1, 3] and the window (kernel [2], stride "
                                               "[], padding [5]) does not fit"));
    // Hostile payload near INT64_MAX is refused without overflow: a window larger than the input
    // by our check, one that fits only through huge padding by ATen's (its kernels take int).
    OpAttrs huge;
    huge.kernel = {std::numeric_limits<std::int64_t>::max()};
    OpAttrs padded_huge = huge;
    padded_huge.padding = {std::numeric_limits<std::int64_t>::max() / 2};
    for (const Op op : {Op::MaxPool, Op::AvgPool, Op::SmoothMaxPool}) {
      const auto refused = libtorch_handler(op).forward(std::vector<Tensor>{x}, huge);
      REQUIRE_FALSE(refused.has_value());
      CHECK_MESSAGE(testing::has(refused.error().message, "does not fit"), refused.error().message);
      const auto rejected = libtorch_handler(op).forward(std::vector<Tensor>{x}, padded_huge);
      REQUIRE_FALSE(rejected.has_value());
      CHECK_MESSAGE(testing::has(rejected.error().message, "ATen rejected the call"), rejected.error().message);
    }
    // Pools take no dilation: refused, as the reference does, instead of ignored.
    OpAttrs dilated;
    dilated.kernel = {2};
    dilated.dilation = {2};
    for (const Op op : {Op::MaxPool, Op::AvgPool, Op::SmoothMaxPool}) {
      const auto refused = libtorch_handler(op).forward(std::vector<Tensor>{x}, dilated);
      REQUIRE_FALSE(refused.has_value());
      CHECK(testing::has(refused.error().message, "dilation [2] given; pools take no dilation"));
    }
    OpAttrs cold;
    cold.kernel = {2};
    cold.temperature = 0;
    const auto frozen = libtorch_handler(Op::SmoothMaxPool).forward(std::vector<Tensor>{x}, cold);
    REQUIRE_FALSE(frozen.has_value());
    CHECK(testing::has(frozen.error().message, "temperature is 0; expected a finite value > 0"));
    // What only ATen checks (conv_transpose's output_padding below the stride) fails with ATen's
    // one-line reason, not an exception.
    OpAttrs wide;
    wide.output_padding = {2};
    const Tensor w = Tensor::from_values({1, 1, 2}, DType::F32, {1, 1}).value();
    const auto rejected = libtorch_handler(Op::ConvTranspose).forward(std::vector<Tensor>{x, w}, wide);
    REQUIRE_FALSE(rejected.has_value());
    CHECK(testing::has(rejected.error().message, "LibTorch conv_transpose: ATen rejected the call"));
    CHECK_FALSE(testing::has(rejected.error().message, "\n"));
  }
}

TEST_SUITE("libtorch.vjps") {
  TEST_CASE("every LibTorch adjoint kernel matches the reference on random inputs and edge shapes") {
    std::uint64_t seed = 500;
    for (const ParityCase& c : parity_cases()) {
      for (const DType dtype : {DType::F32, DType::F64}) {
        CAPTURE(c.name);
        CAPTURE(to_string(dtype));
        check_backward(c, dtype, ++seed);
      }
    }
  }
  TEST_CASE("pointwise adjoints match the reference on the special-value classes") {
    (void)check_specials(Path::Plain, true);
  }
  TEST_CASE("pointwise adjoints match the reference on the special-value classes with NaN and infinite g") {
    (void)check_specials(Path::Plain, true, /*non_finite_g=*/true);
  }
  TEST_CASE("softmax and log_softmax adjoints with NaN and infinities match the reference") {
    check_softmax_specials(Path::Plain, true);
  }
  TEST_CASE("smooth_max_pool adjoints of windows with NaN, infinities or only padding match the reference") {
    check_smooth_pool_specials(Path::Plain, true);
  }
}

// Special values, refused differences and payload errors of the ops added for coverage.
TEST_SUITE("libtorch.values") {
  TEST_CASE("clamp keeps x on a signed-zero tie with a bound, as the reference") {
    // Exact: the sign of zero counts, so clamp(−0.0, 0, 0) must stay −0.0.
    run_special_cases(Path::Plain, false, clamp_tie_special_cases());
    OpAttrs zero;
    zero.lo = 0.0;
    zero.hi = 0.0;
    for (const DType dtype : {DType::F32, DType::F64}) {
      const Tensor x = Tensor::from_values({1}, dtype, {-0.0}).value();
      CHECK(std::signbit(libtorch_handler(Op::Clamp).forward(std::vector<Tensor>{x}, zero).value().to_vector()[0]));
    }
  }
  TEST_CASE("payload the reference rejects is rejected before ATen runs") {
    const Tensor x = Tensor::from_values({2}, DType::F32, {1, 2}).value();
    const std::vector<Tensor> in{x};
    OpAttrs unordered;
    unordered.lo = 1.0;
    unordered.hi = -1.0;
    OpAttrs nan_bound;
    nan_bound.lo = std::numeric_limits<double>::quiet_NaN();
    OpAttrs negative_eps;
    negative_eps.eps = -1.0;
    OpAttrs infinite_alpha;
    infinite_alpha.alpha = std::numeric_limits<double>::infinity();
    const std::vector<std::pair<Op, OpAttrs>> bad{{Op::Clamp, unordered},
                                                  {Op::Clamp, nan_bound},
                                                  {Op::SafeLog, negative_eps},
                                                  {Op::Scale, infinite_alpha},
                                                  {Op::LayerNorm, negative_eps}};
    for (const auto& [op, attrs] : bad) {
      CAPTURE(to_string(op));
      const auto ref = oracle(op).forward(in, attrs);
      const auto lib = libtorch_handler(op).forward(in, attrs);
      REQUIRE_FALSE(ref.has_value());
      REQUIRE_FALSE(lib.has_value());
      CHECK(lib.error().code == RuntimeCode::InvalidArgument);
      CHECK(lib.error().message == ref.error().message);
    }
  }
  TEST_CASE("layer_norm and batch_norm groups holding NaN, infinities or one repeated value match the reference") {
    run_special_cases(Path::Plain, true, norm_special_cases());
  }
  TEST_CASE("a finite group whose variance overflows ATen's accumulation is refused, never normalised to zeros") {
    // float32 layer_norm accumulates in float32: 1e20² overflows. The reference scales the row
    // and normalises it; the LibTorch handler says why it cannot.
    const Tensor x = Tensor::from_values({2, 4}, DType::F32, {1e20, -1e20, 1e20, 0, 1, 2, 3, 4}).value();
    const std::vector<Tensor> in{x};
    REQUIRE(oracle(Op::LayerNorm).forward(in, {}).has_value());
    const auto lib = libtorch_handler(Op::LayerNorm).forward(in, {});
    REQUIRE_FALSE(lib.has_value());
    CHECK(lib.error().code == RuntimeCode::InvalidArgument);
    CHECK(testing::has(lib.error().message, "overflows in ATen's accumulation"));
    const Tensor grad = Tensor::full(x.shape(), DType::F32, 1.0).value();
    CHECK_FALSE(libtorch_handler(Op::LayerNorm).backward(in, x, grad, {}).has_value());
    // float64 batch_norm accumulates in double: 1e200² overflows it too.
    const Tensor y = Tensor::from_values({4, 1}, DType::F64, {1e200, -1e200, 1e200, 0}).value();
    const std::vector<Tensor> by{y};
    REQUIRE(oracle(Op::BatchNorm).forward(by, {}).has_value());
    const auto bn = libtorch_handler(Op::BatchNorm).forward(by, {});
    REQUIRE_FALSE(bn.has_value());
    CHECK(testing::has(bn.error().message, "overflows in ATen's accumulation"));
  }
  TEST_CASE("gather, scatter_add, concat and slice reject what the reference rejects, with its message") {
    const Tensor x = Tensor::from_values({2, 3}, DType::F32, {1, 2, 3, 4, 5, 6}).value();
    OpAttrs out_of_range;
    out_of_range.axis = 1;
    out_of_range.indices = {0, 3};
    OpAttrs negative;
    negative.axis = 0;
    negative.indices = {-1};
    OpAttrs bad_axis;
    bad_axis.axis = 2;
    OpAttrs past_end;
    past_end.axis = 1;
    past_end.start = 1;
    past_end.end = 4;
    OpAttrs reversed;
    reversed.axis = 0;
    reversed.start = 2;
    reversed.end = 1;
    const Tensor other = Tensor::from_values({3, 2}, DType::F32, {1, 2, 3, 4, 5, 6}).value();
    struct Bad {
      Op op;
      std::vector<Tensor> inputs;
      OpAttrs attrs;
    };
    const std::vector<Bad> bad{{Op::Gather, {x}, out_of_range},  {Op::Gather, {x}, negative},
                               {Op::Gather, {x}, bad_axis},      {Op::ScatterAdd, {x, x}, out_of_range},
                               {Op::ScatterAdd, {x, other}, negative}, {Op::Slice, {x}, past_end},
                               {Op::Slice, {x}, reversed},       {Op::Concat, {x, other}, with_axis(0)},
                               {Op::Concat, {}, with_axis(0)}};
    for (const Bad& b : bad) {
      CAPTURE(to_string(b.op));
      const auto ref = oracle(b.op).forward(b.inputs, b.attrs);
      const auto lib = libtorch_handler(b.op).forward(b.inputs, b.attrs);
      REQUIRE_FALSE(ref.has_value());
      REQUIRE_FALSE(lib.has_value());
      CHECK(lib.error().code == ref.error().code);
      CHECK(lib.error().message == ref.error().message);
    }
  }
}

TEST_SUITE("libtorch.boundary") {
  TEST_CASE("every LibTorch handler reports exactly the copies it makes, and no output is ATen's buffer") {
    // Table-free: every case of the parity table, forward and adjoint, in both dtypes.
    std::uint64_t seed = 900;
    for (const ParityCase& c : parity_cases()) {
      for (const DType dtype : {DType::F32, DType::F64}) {
        CAPTURE(c.name);
        CAPTURE(to_string(dtype));
        check_copies_reported(c, dtype, ++seed);
      }
    }
  }
  TEST_CASE("the copy probe sees an unreported copy and an output on a live ATen buffer") {
    // The probe itself must be able to fail: a copy_ issued outside any handler is seen, no
    // boundary copy is reported for it, and a tensor adopting ATen's buffer is recognised.
    const Tensor a = Tensor::from_values({2, 3}, DType::F32, {1, 2, 3, 4, 5, 6}).value();
    const std::uint64_t reported = reported_copies();
    CopyProbe probe;
    at::Tensor copy = probe_aten_add(a);  // at::add allocates its result; one copy_ into another
    CHECK(probe.allocations() >= 2);
    CHECK(probe.copies() == 1);
    CHECK(reported_copies() == reported);
    // A buffer ATen allocated is known while alive (an output adopting it would be seen), and
    // forgotten once freed (an address reused by our allocator is not mistaken for it).
    const void* data = copy.data_ptr();
    CHECK(is_live_aten_buffer(data));
    copy = at::Tensor();
    CHECK_FALSE(is_live_aten_buffer(data));
  }
  TEST_CASE("conv and max_pool adopt the output ATen allocated instead of copying it, and report the adoption") {
    // ATen's CPU convolution and max_pool have no kernel that writes a caller's buffer: the
    // output is ATen's, adopted without a copy; a later read of it sees the same elements.
    std::mt19937_64 rng(77);
    const Tensor x = make_input({{2, 3, 6, 5}}, DType::F32, rng).value();
    const Tensor w = make_input({{4, 3, 3, 2}}, DType::F32, rng).value();
    const Tensor b = make_input({{4}}, DType::F32, rng).value();
    const std::vector<Tensor> inputs{x, w, b};
    OpAttrs conv;
    conv.stride = {1, 1};
    conv.padding = {1, 0};
    conv.dilation = {1, 1};
    const std::uint64_t copies_before = reported_copies();
    const std::uint64_t adopted_before = reported_adoptions();
    Tensor y;
    {
      CopyProbe probe;
      y = libtorch_handler(Op::Conv).forward(inputs, conv).value();
      CHECK(probe.copies() == 0);
      CHECK(on_live_aten_buffer(y));
    }
    CHECK(reported_copies() == copies_before);
    CHECK(reported_adoptions() == adopted_before + 1);
    const Tensor expected = oracle(Op::Conv).forward(inputs, conv).value();
    REQUIRE(y.shape() == expected.shape());
    const std::vector<double> got = y.to_vector(), want = expected.to_vector();
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::fabs(got[i] - want[i]) <= 1e-5 * (1.0 + std::fabs(want[i])));
    OpAttrs pool;
    pool.kernel = {2, 2};
    pool.stride = {2, 2};
    pool.padding = {0, 0};
    pool.dilation = {1, 1};
    const Tensor pooled = libtorch_handler(Op::MaxPool).forward(std::vector<Tensor>{y}, pool).value();
    CHECK(reported_adoptions() == adopted_before + 2);
    // A selection: the reference's max_pool over the adopted elements gives the same bits.
    CHECK(pooled.to_vector() == oracle(Op::MaxPool).forward(std::vector<Tensor>{y}, pool).value().to_vector());
  }
  TEST_CASE("a tensor is wrapped for ATen once: its view is cached on its storage, per shape, and outputs keep theirs") {
    const HandlerSpec& add = libtorch_handler(Op::Add);
    const Tensor a = Tensor::from_values({2, 3}, DType::F32, {1, 2, 3, 4, 5, 6}).value();
    const Tensor b = Tensor::from_values({2, 3}, DType::F32, {10, 20, 30, 40, 50, 60}).value();
    CHECK(a.foreign_view() == nullptr);
    const Tensor sum = add.forward(std::vector<Tensor>{a, b}, OpAttrs{}).value();
    // Both inputs and the output now carry a view over their own elements, of their own shape.
    for (const Tensor* t : {&a, &b, &sum}) {
      const ForeignView* view = t->foreign_view();
      REQUIRE(view != nullptr);
      const auto* impl = static_cast<const c10::TensorImpl*>(view->handle);
      CHECK(impl->data() == static_cast<const void*>(t->data<float>()));
      CHECK(impl->sizes().vec() == std::vector<std::int64_t>{2, 3});
    }
    // The output's view (built directly, not by from_blob) does not own our bytes and cannot be
    // resized, so an ATen call that tried to reallocate an output would throw.
    const auto* out_impl = static_cast<const c10::TensorImpl*>(sum.foreign_view()->handle);
    CHECK_FALSE(out_impl->storage().resizable());
    // No owner and the do-nothing deleter: nothing of ours is ever freed through ATen.
    const c10::DataPtr& bytes = out_impl->storage().data_ptr();
    CHECK(bytes.get_context() == nullptr);
    const bool frees_nothing = bytes.get_deleter() == &c10::detail::deleteNothing;
    CHECK(frees_nothing);
    CHECK(out_impl->storage().allocator() == nullptr);
    CHECK(out_impl->storage().nbytes() == 6 * sizeof(float));
    CHECK(out_impl->is_contiguous());
    CHECK(out_impl->device_type() == c10::kCPU);
    const ForeignView* cached = a.foreign_view();
    const Tensor twice = add.forward(std::vector<Tensor>{a, sum}, OpAttrs{}).value();
    CHECK(a.foreign_view() == cached);  // reused, not replaced
    CHECK(twice.to_vector() == std::vector<double>{12, 24, 36, 48, 60, 72});
    // A reshape shares the storage (and so the cached [2, 3] view) but is read as [3, 2]: with
    // the cached view ATen would refuse (or broadcast) the shapes.
    const Tensor a32 = a.reshaped(Shape::make({3, 2}).value()).value();
    const Tensor c = Tensor::from_values({3, 2}, DType::F32, {1, 1, 1, 1, 1, 1}).value();
    const Tensor reshaped_sum = add.forward(std::vector<Tensor>{a32, c}, OpAttrs{}).value();
    CHECK(to_string(reshaped_sum.shape()) == "[3, 2]");
    CHECK(reshaped_sum.to_vector() == std::vector<double>{2, 3, 4, 5, 6, 7});
    // Another provider's view in the slot is left alone; the handler wraps the tensor anew.
    static const char other_provider = 0;
    int released = 0;  // declared before d, which releases into it when destroyed
    const Tensor d = Tensor::from_values({2, 3}, DType::F32, {0, 0, 0, 0, 0, 1}).value();
    (void)d.attach_foreign_view(ForeignView{&other_provider, &released, [](void* handle) noexcept { ++*static_cast<int*>(handle); }});
    CHECK(add.forward(std::vector<Tensor>{d, b}, OpAttrs{}).value().to_vector() == std::vector<double>{10, 20, 30, 40, 50, 61});
    CHECK(d.foreign_view()->provider == &other_provider);
    CHECK(released == 0);
  }
  TEST_CASE("the LibTorch handlers declare the catalog's guards and let our tape own the VJP") {
    for (const RegisteredHandler* h : libtorch_handlers().all()) {
      CAPTURE(h->spec.name);
      CHECK(h->spec.provider == Provider::Libtorch);
      CHECK(h->spec.device == Device::Cpu);
      CHECK_FALSE(h->spec.backend_vjp);
      CHECK(h->spec.guards == std::vector<std::string>{std::string(kLibTorchShapeGuard), std::string(kLibTorchLayoutGuard)});
    }
    const std::string version = libtorch_version();
    const bool known_major = version.rfind("1.", 0) == 0 || version.rfind("2.", 0) == 0;
    CHECK_MESSAGE(known_major, version);
  }
}

// --- LibTorch fingerprint (issue 10: version, BLAS, core type, threads) ---
TEST_SUITE("libtorch.fingerprint") {
  TEST_CASE("the LibTorch entries name the loaded version, the BLAS LibTorch calls, its core and the threads") {
    set_libtorch_threads(1);
    EnvironmentFingerprint fp = libtorch_fingerprint();
    CHECK(fp.get("provider.libtorch.loaded_version") == libtorch_version());
    CHECK(fp.get("provider.libtorch.threads") == "1");
    const std::string blas_info = fp.get("provider.libtorch.blas");
    CHECK_FALSE(blas_info.empty());
    CHECK(blas_info != "unknown");
    CHECK(fp.get("provider.libtorch.cpu_capability") != "unknown");
    CHECK(fp.get("provider.libtorch.onednn") != "");
    // The named BLAS is a loaded object that defines sgemm_; its core is OpenBLAS's own answer,
    // or says why there is none.
    const std::string library = fp.get("provider.libtorch.blas.library");
    REQUIRE_MESSAGE(std::filesystem::is_regular_file(library), library);
    void* blas = dlopen(library.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    REQUIRE_MESSAGE(blas != nullptr, library << " is not loaded in this process");
    CHECK(dlsym(blas, "sgemm_") != nullptr);
    void* corename = dlsym(blas, "openblas_get_corename");
    const std::string core = fp.get("provider.libtorch.blas.core");
    if (corename == nullptr) {
      CHECK(core.starts_with("none: "));
    } else {
      char* (*get)() = nullptr;
      std::memcpy(&get, &corename, sizeof get);
      CHECK(core == std::string(get()));
    }
    dlclose(blas);
    // Threads are read when the fingerprint is taken, not at build time.
    set_libtorch_threads(2);
    fp = libtorch_fingerprint();
    set_libtorch_threads(1);
    CHECK(fp.get("provider.libtorch.threads") == "2");
  }
}

// ---------------------------------------------------------------------------------------------
// External autograd (libtorch.autograd_values, libtorch.autograd_vjps, libtorch.autograd_boundary):
// each handler's forward_autograd records the op under LibTorch autograd and returns a boundary
// whose one VJP is torch::autograd::grad. Its output and gradients are compared with the
// reference on the parity table above, under the same per-op bounds (docs/libtorch.md).

namespace {

/// The LibTorch handlers without doctest assertions: the coverage declaration below also runs
/// outside any test case (--evidence-manifest), where an assertion cannot report.
const HandlerRegistry& declared_handlers() {
  static const HandlerRegistry registry = [] {
    HandlerRegistry r;
    (void)register_libtorch_handlers(r);  // a failure leaves it empty: the suites then declare nothing
    return r;
  }();
  return registry;
}

/// Parity cases whose LibTorch handler opens an autograd region (ops another change adds without
/// a region formula are left to the suites above).
std::vector<ParityCase> autograd_cases() {
  std::vector<ParityCase> cases;
  for (ParityCase& c : parity_cases()) {
    const RegisteredHandler* h = declared_handlers().find(c.op, Provider::Libtorch, Device::Cpu);
    if (h != nullptr && h->spec.forward_autograd != nullptr) cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<Op> autograd_ops() {
  std::vector<Op> ops;
  for (const ParityCase& c : autograd_cases()) {
    if (std::find(ops.begin(), ops.end(), c.op) == ops.end()) ops.push_back(c.op);
  }
  return ops;
}


std::vector<bool> all_need(Op op, std::size_t n) {
  std::vector<bool> needs(n);
  for (std::size_t i = 0; i < n; ++i) needs[i] = input_takes_gradient(op, i);
  return needs;
}

/// One region of a parity case: forward compared with the reference, then its VJP; the inputs,
/// the output gradient and the (adopted) output stay bitwise unchanged, and a second VJP is
/// refused because the first freed the graph.
void check_region(const ParityCase& c, DType dtype, std::uint64_t seed, bool vjps) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> inputs;
  for (const InputSpec& spec : c.inputs) inputs.push_back(make_input(spec, dtype, rng).value());
  std::vector<std::vector<unsigned char>> before;
  for (const Tensor& t : inputs) before.push_back(bytes_of(t));
  const RuntimeResult<Tensor> ref = oracle(c.op).forward(inputs, c.attrs);
  auto region = libtorch_handler(c.op).forward_autograd(inputs, c.attrs, all_need(c.op, inputs.size()));
  REQUIRE_MESSAGE(ref.has_value() == region.has_value(),
                  "reference " << (ref ? "succeeds" : ref.error().message) << "; libtorch region "
                               << (region ? "succeeds" : region.error().message));
  if (!ref) return;
  REQUIRE(region->boundary != nullptr);
  for (const Tensor& t : inputs) CHECK_FALSE(region->output.shares_storage_with(t));
  if (!vjps) {
    Tensor terms;
    if (c.forward.bound == Bound::Terms) terms = oracle(c.op).forward(absolute_all(inputs).value(), c.attrs).value();
    const std::string miss = compare(region->output, *ref, c.forward, &terms, c.terms);
    CHECK_MESSAGE(miss.empty(), to_string(dtype) << ": " << miss);
  }
  const std::vector<unsigned char> out_before = bytes_of(region->output);
  const Tensor grad = make_input({ref->shape().to_vector()}, dtype, rng).value();
  const std::vector<unsigned char> grad_before = bytes_of(grad);
  auto lib = region->boundary->vjp(grad);
  REQUIRE_MESSAGE(lib.has_value(), lib.error().message);
  auto again = region->boundary->vjp(grad);
  REQUIRE_FALSE(again.has_value());
  CHECK(again.error().code == RuntimeCode::GradientUnavailable);
  for (std::size_t i = 0; i < inputs.size(); ++i) CHECK_MESSAGE(bytes_of(inputs[i]) == before[i], "input " << i << " changed");
  CHECK(bytes_of(grad) == grad_before);
  CHECK(bytes_of(region->output) == out_before);
  if (!vjps) return;
  const auto want = oracle(c.op).backward(inputs, *ref, grad, c.attrs);
  REQUIRE(want.has_value());
  REQUIRE(lib->size() == inputs.size());
  std::vector<Tensor> terms(want->size());
  if (c.backward.bound == Bound::Terms) {
    terms = oracle(c.op).backward(absolute_all(inputs).value(), absolute(*ref).value(), absolute(grad).value(), c.attrs)
                .value();
  }
  for (std::size_t i = 0; i < want->size(); ++i) {
    Tensor got = (*lib)[i];
    // An unused input's gradient is undefined at the boundary; the engine makes it zeros.
    if (!got.defined() && (*want)[i].defined()) got = Tensor::zeros(inputs[i].shape(), dtype).value();
    for (const Tensor& t : inputs) CHECK_FALSE(got.shares_storage_with(t));
    CHECK_FALSE(got.shares_storage_with(grad));
    const std::string miss = compare(got, (*want)[i], c.backward, &terms[i], c.terms);
    CHECK_MESSAGE(miss.empty(), to_string(dtype) << " gradient " << i << ": " << miss);
  }
}

/// One special-value region of a pointwise op: x and g given element by element; the region's
/// output and gradient are compared with the reference under the op's parity bounds (non-finite
/// results exactly), and the region's gradient is returned for the caller's own assertions.
Tensor check_region_special(Op op, const OpAttrs& attrs, DType dtype, const std::vector<double>& x,
                            const std::vector<double>& g) {
  CAPTURE(to_string(op));
  CAPTURE(to_string(dtype));
  const auto n = static_cast<std::int64_t>(x.size());
  const Tensor in = Tensor::from_values(Shape::make({n}).value(), dtype, x).value();
  const Tensor grad = Tensor::from_values(Shape::make({n}).value(), dtype, g).value();
  const std::vector<Tensor> inputs{in};
  const Tensor ref = oracle(op).forward(inputs, attrs).value();
  auto region = libtorch_handler(op).forward_autograd(inputs, attrs, {true});
  REQUIRE_MESSAGE(region.has_value(), region.error().message);
  const std::string miss = compare(region->output, ref, pointwise_tolerance(op, false), nullptr, 1);
  CHECK_MESSAGE(miss.empty(), "forward: " << miss);
  const auto got = region->boundary->vjp(grad);
  REQUIRE_MESSAGE(got.has_value(), got.error().message);
  const auto want = oracle(op).backward(inputs, ref, grad, attrs).value();
  const std::string gmiss = compare((*got)[0], want[0], pointwise_tolerance(op, true), nullptr, 1);
  CHECK_MESSAGE(gmiss.empty(), "gradient: " << gmiss);
  return (*got)[0];
}

const testing::SuiteCoverage kAutogradValueCoverage{"libtorch.autograd_values", Obligation::Value, Provider::Libtorch,
                                                    Device::Cpu, autograd_ops};
const testing::SuiteCoverage kAutogradVjpCoverage{"libtorch.autograd_vjps", Obligation::Vjp, Provider::Libtorch,
                                                  Device::Cpu, autograd_ops};

}  // namespace

TEST_SUITE("libtorch.autograd_values") {
  TEST_CASE("every LibTorch autograd region's output matches the reference on random inputs and edge shapes") {
    std::uint64_t seed = 900;
    const std::vector<ParityCase> cases = autograd_cases();
    CHECK(cases.size() >= 60);  // every op of the table above has a region
    for (const ParityCase& c : cases) {
      for (const DType dtype : {DType::F32, DType::F64}) {
        CAPTURE(c.name);
        CAPTURE(to_string(dtype));
        check_region(c, dtype, ++seed, false);
      }
    }
  }
}

TEST_SUITE("libtorch.autograd_vjps") {
  TEST_CASE("every LibTorch autograd boundary's VJP matches the reference on random inputs and edge shapes") {
    std::uint64_t seed = 1300;
    for (const ParityCase& c : autograd_cases()) {
      for (const DType dtype : {DType::F32, DType::F64}) {
        CAPTURE(c.name);
        CAPTURE(to_string(dtype));
        check_region(c, dtype, ++seed, true);
      }
    }
  }
}

// External autograd of the normalisations, the index and block ops and scaled_matmul
// (autograd_formulas_norm_index.cpp): special-value classes, refused differences, payload the
// region must own, and inputs the engine leaves untracked.

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// One call of `op` on `path` compared with the reference on hand-made inputs: the output under
/// `fwd`, then (with `vjps`) every gradient of `grad` under `bwd` (n terms). On the autograd path
/// the VJP runs either way, as the engine runs it; an input `needs` leaves untracked gets no
/// gradient, and one autograd did not reach is the engine's zeros.
void expect_path_matches(Path path, bool vjps, Op op, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                         const Tensor& grad, Tolerance fwd, Tolerance bwd, std::int64_t n,
                         const std::vector<bool>& needs) {
  const Tensor ref = oracle(op).forward(inputs, attrs).value();
  const bool run_vjp = vjps || path == Path::Autograd;
  const LibtorchRun lib = run_libtorch(path, op, inputs, attrs, ref, run_vjp ? &grad : nullptr, &needs);
  Tensor terms;
  if (fwd.bound == Bound::Terms) terms = oracle(op).forward(absolute_all(inputs).value(), attrs).value();
  const std::string miss = compare(lib.output, ref, fwd, &terms, n);
  CHECK_MESSAGE(miss.empty(), to_string(op) << ": " << miss);
  if (!vjps) return;
  const auto want = oracle(op).backward(inputs, ref, grad, attrs).value();
  REQUIRE(lib.grads.size() == want.size());
  std::vector<Tensor> grad_terms(want.size());
  if (bwd.bound == Bound::Terms) {
    grad_terms =
        oracle(op).backward(absolute_all(inputs).value(), absolute(ref).value(), absolute(grad).value(), attrs).value();
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    if (path == Path::Autograd && !needs[i]) {
      CHECK_FALSE(lib.grads[i].defined());
      continue;
    }
    const std::string gmiss = compare(lib.grads[i], want[i], bwd, &grad_terms[i], n);
    CHECK_MESSAGE(gmiss.empty(), to_string(op) << " gradient " << i << ": " << gmiss);
  }
}

/// expect_path_matches on the autograd region.
void expect_region_matches(bool vjps, Op op, const std::vector<Tensor>& inputs, const OpAttrs& attrs,
                           const Tensor& grad, Tolerance fwd, Tolerance bwd, std::int64_t n,
                           const std::vector<bool>& needs) {
  expect_path_matches(Path::Autograd, vjps, op, inputs, attrs, grad, fwd, bwd, n, needs);
}

std::vector<bool> every_input(std::size_t n) { return std::vector<bool>(n, true); }

void run_special_cases(Path path, bool vjps, const std::vector<SpecialCase>& cases) {
  for (const SpecialCase& c : cases) {
    if (path == Path::Plain) {
      check_special_case_plain(libtorch_handler(c.op), oracle(c.op), c, vjps);
      continue;
    }
    CAPTURE(c.label);
    CAPTURE(to_string(path));
    const Tensor ref = oracle(c.op).forward(c.inputs, c.attrs).value();
    std::vector<bool> needs(c.inputs.size());
    for (std::size_t i = 0; i < c.inputs.size(); ++i) needs[i] = c.inputs[i].defined() && input_takes_gradient(c.op, i);
    std::vector<Tensor> grads = special_case_gradients(c, ref.shape(), ref.dtype());
    if (!vjps) grads.resize(1);  // the region's VJP still runs, as the engine runs it
    for (const Tensor& grad : grads) {
      expect_path_matches(path, vjps && !c.forward_only, c.op, c.inputs, c.attrs, grad, c.forward, c.backward, c.n,
                          needs);
    }
  }
}

/// The region families of special_cases.hpp on `path`.
void check_region_specials(Path path, bool vjps, const std::string& family) {
  run_special_cases(path, vjps, region_special_cases(family));
}

/// layer_norm and batch_norm regions on groups holding NaN, ±inf or one repeated value (rows of
/// layer_norm, channels of batch_norm), with and without the affine inputs, tracked or not.
void check_norm_region_specials(bool vjps) {
  const Tolerance fwd{Bound::Lane, 4};
  const Tolerance bwd{Bound::Lane, 8};
  for (const DType dtype : {DType::F32, DType::F64}) {
    CAPTURE(to_string(dtype));
    const Tensor x = tensor_of({4, 3}, dtype, {1, kNan, 2, kInf, 0, 1, 3, 3, 3, -kInf, 1, kInf});
    const Tensor gamma = tensor_of({3}, dtype, {0.5, -2, 1.5});
    const Tensor beta = tensor_of({3}, dtype, {-0.0, 1, 0.25});
    const Tensor g = tensor_of({4, 3}, dtype, {0.5, -1, 2, 0.75, -0.0, 1, 0.5, -0.5, 3, 1, 1, -2});
    for (const Op op : {Op::LayerNorm, Op::BatchNorm}) {
      CAPTURE(to_string(op));
      expect_region_matches(vjps, op, {x}, {}, g, fwd, bwd, 12, every_input(1));
      expect_region_matches(vjps, op, {x, gamma, beta}, {}, g, fwd, bwd, 12, every_input(3));
    }
    // A finite [n, c, h, w] batch with a constant channel; the affine inputs tracked or not.
    const Tensor images = tensor_of({2, 2, 1, 3}, dtype, {1, -0.0, 4, 2, 2, 2, -3, 0.5, 7, 2, 2, 2});
    const Tensor scale = tensor_of({2}, dtype, {1.5, -1});
    const Tensor shift = tensor_of({2}, dtype, {0.5, 0});
    const Tensor gi = tensor_of({2, 2, 1, 3}, dtype, {1, -1, 0.5, 2, 0.25, -3, 1, 1, -0.5, 2, 0, 1});
    expect_region_matches(vjps, Op::BatchNorm, {images, scale, shift}, {}, gi, fwd, bwd, 12, {true, false, true});
    expect_region_matches(vjps, Op::BatchNorm, {images, scale, shift}, {}, gi, fwd, bwd, 12, {false, true, false});
    expect_region_matches(vjps, Op::LayerNorm, {images, tensor_of({3}, dtype, {1, 2, -1}), Tensor()}, {}, gi, fwd,
                          bwd, 12, {true, true, false});
  }
}

/// gather, scatter_add, concat and slice regions on NaN, ±inf and −0.0. Repeated indices make
/// the gradients add up (inf + −inf = NaN, −0 + −0 = −0) in position order, bit for bit.
void check_index_region_specials(bool vjps) {
  for (const DType dtype : {DType::F32, DType::F64}) {
    CAPTURE(to_string(dtype));
    const Tensor x = tensor_of({2, 4}, dtype, {kNan, -0.0, kInf, -kInf, 1, -0.0, 2.5, 0.0});
    OpAttrs gather;
    gather.axis = 1;
    gather.indices = {1, 3, 1, 2, 1};
    const Tensor gg = tensor_of({2, 5}, dtype, {-0.0, kInf, -0.0, 1, -0.0, kInf, 1, -kInf, kNan, 0.5});
    expect_region_matches(vjps, Op::Gather, {x}, gather, gg, kExact, kExact, 1, every_input(1));
    OpAttrs scatter;
    scatter.axis = 0;
    scatter.indices = {1, 1, 0};
    const Tensor src = tensor_of({3, 4}, dtype, {-0.0, -kInf, 1, kInf, -0.0, 1, -0.0, kNan, 3, -0.0, -0.0, 2});
    const Tensor gs = tensor_of({2, 4}, dtype, {-0.0, kInf, kNan, 1, 2, -kInf, -0.0, 0.0});
    expect_region_matches(vjps, Op::ScatterAdd, {x, src}, scatter, gs, kExact, kExact, 1, every_input(2));
    expect_region_matches(vjps, Op::ScatterAdd, {x, src}, scatter, gs, kExact, kExact, 1, {false, true});
    // Three inputs, the middle one untracked: only the others get their block of the gradient.
    const Tensor tail = tensor_of({2, 1}, dtype, {-0.0, kNan});
    expect_region_matches(vjps, Op::Concat, {x, tail, x}, with_axis(-1), specials_of({2, 9}, dtype, 0), kExact, kExact,
                          1, {true, false, true});
    expect_region_matches(vjps, Op::Concat, {tail, x}, with_axis(1), specials_of({2, 5}, dtype, 3), kExact, kExact, 1,
                          every_input(2));
    OpAttrs slice;
    slice.axis = 1;
    slice.start = 1;
    slice.end = 3;
    expect_region_matches(vjps, Op::Slice, {x}, slice, specials_of({2, 2}, dtype, 5), kExact, kExact, 1,
                          every_input(1));
  }
}

/// scaled_matmul regions whose rows and columns hold NaN, ±inf and −0.0 (IEEE through the dot
/// product on both sides: 0·inf and inf − inf are NaN), and a k = 0 product (alpha·(+0)).
void check_scaled_matmul_region_specials(bool vjps) {
  OpAttrs alpha;
  alpha.alpha = -0.5;
  for (const DType dtype : {DType::F32, DType::F64}) {
    CAPTURE(to_string(dtype));
    const Tensor a = tensor_of({3, 2}, dtype, {1, kNan, kInf, 2, -0.0, 0.5});
    const Tensor b = tensor_of({2, 3}, dtype, {1, 0.0, -2, 3, 1, -0.0});
    expect_region_matches(vjps, Op::ScaledMatmul, {a, b}, alpha, specials_of({3, 3}, dtype, 1), {Bound::Terms, 4},
                          {Bound::Terms, 4}, 3, every_input(2));
    const Tensor none_a = Tensor::zeros(Shape::make({2, 0}).value(), dtype).value();
    const Tensor none_b = Tensor::zeros(Shape::make({0, 3}).value(), dtype).value();
    expect_region_matches(vjps, Op::ScaledMatmul, {none_a, none_b}, alpha, specials_of({2, 3}, dtype, 0), kExact,
                          kExact, 1, every_input(2));
  }
}

// The special-value classes for every other op (docs/libtorch.md, "Special values under
// autograd"), on either path: the output against the reference's forward, and the gradients (the
// boundary's VJP, or the adjoint kernel) against the reference's adjoint with g = 0.75 and with
// gradients holding NaN and ±inf.

/// `t` [n, c, h, w] with `ph` rows and `pw` columns of zeros added on each side (grow) or removed
/// from each side (shrink).
Tensor resize_hw(const Tensor& t, std::int64_t ph, std::int64_t pw, bool grow) {
  const std::int64_t n = t.dim(0), c = t.dim(1), h = t.dim(2), w = t.dim(3);
  const std::int64_t sign = grow ? 1 : -1;
  const std::int64_t oh = h + 2 * sign * ph, ow = w + 2 * sign * pw;
  const std::vector<double> v = t.to_vector();
  std::vector<double> out(static_cast<std::size_t>(n * c * oh * ow), 0.0);
  for (std::int64_t b = 0; b < n * c; ++b) {
    for (std::int64_t i = 0; i < std::min(h, oh); ++i) {
      for (std::int64_t j = 0; j < std::min(w, ow); ++j) {
        const std::int64_t si = grow ? i : i + ph, sj = grow ? j : j + pw;
        const std::int64_t di = grow ? i + ph : i, dj = grow ? j + pw : j;
        out[static_cast<std::size_t>((b * oh + di) * ow + dj)] = v[static_cast<std::size_t>((b * h + si) * w + sj)];
      }
    }
  }
  return tensor_of({n, c, oh, ow}, t.dtype(), out);
}

/// The padding difference of conv and conv_transpose (docs/libtorch.md): ATen's convolution
/// multiplies its implicit zero padding by the weights, so a padded position meeting a NaN or
/// infinite weight adds 0·w = NaN, where the reference adds no term for it. Pinned on `path`: the
/// LibTorch results are the reference's on explicitly zero-padded operands (conv: the input, its
/// gradient cropped back; conv_transpose: the output gradient, as its adjoint is a convolution
/// of g padded by the same amount), and they differ from the reference's own.
void check_conv_padding_meets_non_finite_weight(Path path) {
  const Tolerance products{Bound::Terms, 2};
  for (const DType dtype : {DType::F32, DType::F64}) {
    CAPTURE(to_string(dtype));
    CAPTURE(to_string(path));
    const Tensor x =
        tensor_of({1, 2, 3, 3}, dtype, {1, 2, -1, 0.5, 0, 3, -2, 1, 1, 0.25, -0.0, 2, 1, -1, 0, 3, 2, 1});
    const Tensor w = specials_of({2, 2, 2, 2}, dtype, 1);
    std::size_t differing = 0;
    const auto expect = [&](const Tensor& got, const Tensor& aten, const Tensor& ref, const Tensor& terms,
                            std::int64_t n) {
      const std::string miss = compare(got, aten, products, &terms, n);
      CHECK_MESSAGE(miss.empty(), miss);
      if (!compare(got, ref, products, &terms, n).empty()) ++differing;
    };
    {
      OpAttrs padded;
      padded.padding = {1, 0};
      const Tensor ref = oracle(Op::Conv).forward(std::vector<Tensor>{x, w}, padded).value();
      const std::vector<Tensor> explicit_in{resize_hw(x, 1, 0, true), w};
      const Tensor aten = oracle(Op::Conv).forward(explicit_in, {}).value();
      const Tensor g = specials_of(ref.shape().to_vector(), dtype, 2);
      const LibtorchRun lib = run_libtorch(path, Op::Conv, {x, w}, padded, ref, &g);
      const Tensor terms = oracle(Op::Conv).forward(absolute_all(explicit_in).value(), {}).value();
      expect(lib.output, aten, ref, terms, 12);
      const std::vector<Tensor> want = oracle(Op::Conv).backward(std::vector<Tensor>{x, w}, ref, g, padded).value();
      const std::vector<Tensor> aten_grads = oracle(Op::Conv).backward(explicit_in, aten, g, {}).value();
      const std::vector<Tensor> grad_terms =
          oracle(Op::Conv)
              .backward(absolute_all(explicit_in).value(), absolute(aten).value(), absolute(g).value(), {})
              .value();
      expect(lib.grads[0], resize_hw(aten_grads[0], 1, 0, false), want[0], resize_hw(grad_terms[0], 1, 0, false), 12);
      expect(lib.grads[1], aten_grads[1], want[1], grad_terms[1], 12);
    }
    {
      OpAttrs strided;
      strided.stride = {2, 1};
      strided.padding = {1, 0};
      strided.output_padding = {1, 0};
      OpAttrs unpadded = strided;
      unpadded.padding = {0, 0};
      const std::vector<Tensor> in{x, w};
      const Tensor ref = oracle(Op::ConvTranspose).forward(in, strided).value();
      const Tensor g = specials_of(ref.shape().to_vector(), dtype, 2);
      const LibtorchRun lib = run_libtorch(path, Op::ConvTranspose, in, strided, ref, &g);
      const std::vector<Tensor> want = oracle(Op::ConvTranspose).backward(in, ref, g, strided).value();
      const Tensor full = oracle(Op::ConvTranspose).forward(in, unpadded).value();
      const Tensor padded_g = resize_hw(g, 1, 0, true);
      const std::vector<Tensor> aten_grads = oracle(Op::ConvTranspose).backward(in, full, padded_g, unpadded).value();
      const std::vector<Tensor> grad_terms =
          oracle(Op::ConvTranspose)
              .backward(absolute_all(in).value(), absolute(full).value(), absolute(padded_g).value(), unpadded)
              .value();
      // The forward reads no padded position (its padding crops the output): the reference's.
      const Tensor out_terms = oracle(Op::ConvTranspose).forward(absolute_all(in).value(), strided).value();
      const std::string miss = compare(lib.output, ref, products, &out_terms, 9);
      CHECK_MESSAGE(miss.empty(), miss);
      expect(lib.grads[0], aten_grads[0], want[0], grad_terms[0], 9);
      expect(lib.grads[1], aten_grads[1], want[1], grad_terms[1], 9);
    }
    CHECK(differing > 0);
  }
}

}  // namespace

TEST_SUITE("libtorch.autograd_values") {
  TEST_CASE("layer_norm and batch_norm regions on NaN, infinite or constant groups match the reference") {
    check_norm_region_specials(false);
  }
  TEST_CASE("gather, scatter_add, concat and slice regions move NaN, infinities and -0.0 bit for bit") {
    check_index_region_specials(false);
  }
  TEST_CASE("scaled_matmul regions on NaN, infinities, -0.0 and k = 0 match the reference") {
    check_scaled_matmul_region_specials(false);
  }
}

TEST_SUITE("libtorch.autograd_vjps") {
  TEST_CASE("layer_norm and batch_norm boundaries on NaN, infinite or constant groups match the reference's adjoint") {
    check_norm_region_specials(true);
  }
  TEST_CASE("gather, scatter_add, concat and slice boundaries route NaN, infinities and -0.0 as the reference") {
    check_index_region_specials(true);
  }
  TEST_CASE("scaled_matmul boundaries on NaN, infinities, -0.0 and k = 0 match the reference's adjoint") {
    check_scaled_matmul_region_specials(true);
  }
}

// The special-value classes under autograd for the pointwise ops, the softmax family, the
// reductions, the products, the windows, the losses and the shape ops.
TEST_SUITE("libtorch.autograd_values") {
  TEST_CASE("pointwise regions match the reference's forward on the special-value classes") {
    (void)check_specials(Path::Autograd, false);
  }
  TEST_CASE("softmax and log_softmax regions on lanes with NaN, +inf and only -inf match the reference") {
    check_softmax_specials(Path::Autograd, false);
  }
  TEST_CASE("smooth_max_pool regions on windows with NaN, infinities or only padding match the reference") {
    check_smooth_pool_specials(Path::Autograd, false);
  }
  TEST_CASE("reduction regions on lanes with NaN, inf beside -inf and -0.0 match the reference") {
    check_region_specials(Path::Autograd, false, "reduction");
  }
  TEST_CASE("matmul and linear regions on operands with NaN, infinities and -0.0 match the reference") {
    check_region_specials(Path::Autograd, false, "product");
  }
  TEST_CASE("conv and conv_transpose regions with NaN and infinities in inputs and weights match the reference") {
    check_region_specials(Path::Autograd, false, "conv");
  }
  TEST_CASE("max_pool and avg_pool regions on windows with NaN, infinities and signed-zero ties match the reference") {
    check_region_specials(Path::Autograd, false, "pool");
  }
  TEST_CASE("mse_loss and cross_entropy regions on NaN and infinite operands match the reference") {
    check_region_specials(Path::Autograd, false, "loss");
  }
  TEST_CASE("reshape, permute and broadcast regions move NaN, infinities and -0.0 bit for bit") {
    check_region_specials(Path::Autograd, false, "shape");
  }
}

TEST_SUITE("libtorch.autograd_vjps") {
  TEST_CASE("pointwise boundaries match the reference's adjoint on the special-value classes with finite and "
            "non-finite g, except relu's and abs's slope at NaN, which are ATen's") {
    const std::map<Op, std::size_t> differing = check_specials(Path::Autograd, true, /*non_finite_g=*/true);
    // The pinned differences are real: the reference's NaN slope differs at some case of each.
    // Every other op is compared with the reference inside check_specials (only relu and abs
    // have a pinned difference to count).
    for (const Op op : {Op::Relu, Op::Abs}) {
      CAPTURE(to_string(op));
      CHECK(differing.contains(op));
      CHECK((differing.contains(op) && differing.at(op) > 0));
    }
  }
  TEST_CASE("relu's and abs's boundaries at a NaN input give ATen's g and g·(+0), where the reference gives NaN") {
    for (const DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(to_string(dtype));
      const Tensor x = tensor_of({4}, dtype, {kNan, kNan, kNan, -kNan});
      const std::vector<double> g{0.75, -2, kInf, 1};
      for (const Op op : {Op::Relu, Op::Abs}) {
        CAPTURE(to_string(op));
        const Tensor grad = tensor_of({4}, dtype, g);
        const Tensor ref = oracle(op).forward(std::vector<Tensor>{x}, {}).value();
        const std::vector<double> want =
            oracle(op).backward(std::vector<Tensor>{x}, ref, grad, {}).value()[0].to_vector();
        const std::vector<double> got =
            run_libtorch(Path::Autograd, op, std::vector<Tensor>{x}, {}, ref, &grad).grads[0].to_vector();
        for (std::size_t i = 0; i < g.size(); ++i) {
          CAPTURE(i);
          CHECK(std::isnan(want[i]));
          const double aten = op == Op::Relu ? g[i] : g[i] * 0.0;
          CHECK(same_bits(got[i], aten));
        }
      }
    }
  }
  TEST_CASE("softmax and log_softmax boundaries on lanes with NaN, +inf and only -inf match the reference's adjoint") {
    check_softmax_specials(Path::Autograd, true, /*non_finite_g=*/true);
  }
  TEST_CASE("smooth_max_pool boundaries on windows with NaN, infinities or only padding match the reference's "
            "adjoint") {
    check_smooth_pool_specials(Path::Autograd, true, /*non_finite_g=*/true);
  }
  TEST_CASE("reduction boundaries with NaN, infinities and -0.0 in x or g match the reference's adjoint") {
    check_region_specials(Path::Autograd, true, "reduction");
  }
  TEST_CASE("matmul and linear boundaries with NaN, infinities and -0.0 in operands or g match the reference's "
            "adjoint") {
    check_region_specials(Path::Autograd, true, "product");
  }
  TEST_CASE("conv and conv_transpose boundaries with NaN and infinities in inputs, weights or g match the reference's "
            "adjoint") {
    check_region_specials(Path::Autograd, true, "conv");
  }
  TEST_CASE("max_pool and avg_pool boundaries route NaN, infinities and ties as the reference") {
    check_region_specials(Path::Autograd, true, "pool");
  }
  TEST_CASE("mse_loss and cross_entropy boundaries with NaN and infinite operands or loss gradient match the "
            "reference's adjoint") {
    check_region_specials(Path::Autograd, true, "loss");
  }
  TEST_CASE("reshape, permute and broadcast boundaries route NaN, infinities and -0.0 as the reference") {
    check_region_specials(Path::Autograd, true, "shape");
  }
  TEST_CASE("gelu, silu, softplus and cross_entropy boundaries give the adjoint kernel's bits, infinite g included") {
    // Their regions record x·slope with the slope detached (linearised_root), so autograd's
    // gradient is the adjoint kernel's single product g·slope, not a sum of g-scaled terms.
    const std::vector<double> s = special_values(DType::F64);
    std::vector<double> xs = s;
    for (const double x : {-40.0, -8.0, -1.0, -1e-3, 0.5, 3.0, 40.0, 800.0}) xs.push_back(x);
    for (const DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(to_string(dtype));
      const Tensor x = tensor_of({static_cast<std::int64_t>(xs.size())}, dtype, xs);
      const Tensor z = tensor_of({3, 3}, dtype, {1, -kInf, 2, 0.5, -0.0, 3, kNan, 1, 0});
      const Tensor t = tensor_of({3, 3}, dtype, {0, 0.25, 0.75, 1, 0, 0, 0.5, 0.5, 0});
      struct Call {
        Op op;
        std::vector<Tensor> inputs;
      };
      for (const Call& call : {Call{Op::Gelu, {x}}, Call{Op::Silu, {x}}, Call{Op::Softplus, {x}},
                               Call{Op::CrossEntropy, {z, t}}}) {
        CAPTURE(to_string(call.op));
        const Tensor out = libtorch_handler(call.op).forward(call.inputs, {}).value();
        for (const double g : special_gradients(true)) {
          CAPTURE(g);
          const Tensor grad = Tensor::full(out.shape(), dtype, g).value();
          const LibtorchRun region = run_libtorch(Path::Autograd, call.op, call.inputs, {}, out, &grad);
          const std::vector<Tensor> adjoint = libtorch_handler(call.op).backward(call.inputs, out, grad, {}).value();
          CHECK(bytes_of(region.output) == bytes_of(out));
          REQUIRE(region.grads.size() == adjoint.size());
          for (std::size_t i = 0; i < adjoint.size(); ++i) CHECK(bytes_of(region.grads[i]) == bytes_of(adjoint[i]));
        }
      }
    }
  }
  TEST_CASE("a div boundary's b-gradient is ATen's -g*((a/b)/b), which over- or underflows where the reference's "
            "value is finite") {
    // The documented div difference (docs/libtorch.md), pinned under autograd: the quotient a/b
    // overflows (first element) or underflows (second) although −g·a/b² is representable; the
    // reference's significand/exponent form gives the finite value.
    for (const DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(to_string(dtype));
      const double big = dtype == DType::F32 ? 1e38 : 1e307;
      const double tiny = dtype == DType::F32 ? 1e-30 : 1e-300;
      const std::vector<double> av{big, tiny};
      // −g·a/b²: 1e-10·big/0.01 (1e30 or 1e299) and 1e20·1e-30/1e20 = 1e-30 (float32) or
      // 1e60·1e-300/1e60 = 1e-300 (float64), while (a/b) is inf or (a/b)/b is 0.
      const std::vector<double> bv{0.1, dtype == DType::F32 ? 1e10 : 1e30};
      const std::vector<double> gv{1e-10, dtype == DType::F32 ? 1e20 : 1e60};
      const Tensor a = tensor_of({2}, dtype, av);
      const Tensor b = tensor_of({2}, dtype, bv);
      const Tensor g = tensor_of({2}, dtype, gv);
      const std::vector<Tensor> in{a, b};
      const Tensor ref = oracle(Op::Div).forward(in, {}).value();
      const std::vector<double> want = oracle(Op::Div).backward(in, ref, g, {}).value()[1].to_vector();
      const LibtorchRun region = run_libtorch(Path::Autograd, Op::Div, in, {}, ref, &g);
      const std::vector<double> got = region.grads[1].to_vector();
      const std::vector<double> x = a.to_vector();
      const std::vector<double> y = b.to_vector();
      const std::vector<double> w = g.to_vector();
      for (std::size_t i = 0; i < 2; ++i) {
        CAPTURE(i);
        // ATen's order, rounded in the element type at each step.
        const double aten = dtype == DType::F32
                                ? double(-(float(w[i]) * ((float(x[i]) / float(y[i])) / float(y[i]))))
                                : -(w[i] * ((x[i] / y[i]) / y[i]));
        CHECK(std::isfinite(want[i]));
        CHECK(want[i] != 0);
        CHECK(same_bits(got[i], aten));
        CHECK_FALSE(same_bits(got[i], want[i]));
      }
    }
  }
  TEST_CASE("a max_pool boundary routes a window's gradient to its last NaN, ATen's choice, where the reference picks "
            "the first") {
    // The documented max_pool difference (docs/libtorch.md), pinned under autograd: ATen's argmax
    // takes every NaN it meets, so the last one wins.
    OpAttrs pool;
    pool.kernel = {4};
    for (const DType dtype : {DType::F32, DType::F64}) {
      CAPTURE(to_string(dtype));
      const Tensor x = tensor_of({1, 1, 4}, dtype, {1, kNan, 2, kNan});
      const Tensor g = tensor_of({1, 1, 1}, dtype, {0.75});
      const Tensor ref = oracle(Op::MaxPool).forward(std::vector<Tensor>{x}, pool).value();
      CHECK(std::isnan(ref.to_vector()[0]));
      const std::vector<double> want =
          oracle(Op::MaxPool).backward(std::vector<Tensor>{x}, ref, g, pool).value()[0].to_vector();
      CHECK(want == std::vector<double>{0, 0.75, 0, 0});
      const LibtorchRun region = run_libtorch(Path::Autograd, Op::MaxPool, std::vector<Tensor>{x}, pool, ref, &g);
      CHECK(std::isnan(region.output.to_vector()[0]));
      CHECK(region.grads[0].to_vector() == std::vector<double>{0, 0, 0, 0.75});
    }
  }
}

TEST_SUITE("libtorch.autograd_boundary") {
  TEST_CASE("a norm region refuses a finite group whose variance overflows ATen's accumulation, and keeps no graph") {
    const std::int64_t live = libtorch_live_autograd_regions();
    const Tensor x = tensor_of({2, 4}, DType::F32, {1e20, -1e20, 1e20, 0, 1, 2, 3, 4});
    REQUIRE(oracle(Op::LayerNorm).forward(std::vector<Tensor>{x}, {}).has_value());
    const auto refused = libtorch_handler(Op::LayerNorm).forward_autograd(std::vector<Tensor>{x}, {}, {true});
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == RuntimeCode::InvalidArgument);
    CHECK(testing::has(refused.error().message, "overflows in ATen's accumulation"));
    const Tensor y = tensor_of({4, 1}, DType::F64, {1e200, -1e200, 1e200, 0});
    const auto bn = libtorch_handler(Op::BatchNorm).forward_autograd(std::vector<Tensor>{y}, {}, {true});
    REQUIRE_FALSE(bn.has_value());
    CHECK(testing::has(bn.error().message, "overflows in ATen's accumulation"));
    CHECK(libtorch_live_autograd_regions() == live);
  }

  TEST_CASE("gather and scatter_add regions own a counted copy of their indices, which the payload need not outlive") {
    const Tensor x = tensor_of({2, 3}, DType::F64, {1, 2, 3, 4, 5, 6});
    const Tensor src = tensor_of({2, 2}, DType::F64, {10, 20, 30, 40});
    const Tensor g = tensor_of({2, 2}, DType::F64, {1, 2, 3, 4});
    std::unique_ptr<AutogradBoundary> gather_boundary;
    std::unique_ptr<AutogradBoundary> scatter_boundary;
    {
      auto attrs = std::make_unique<OpAttrs>();
      attrs->axis = 1;
      attrs->indices = {2, 2};
      const std::uint64_t gathers = libtorch_boundary_copies_of(Op::Gather).conversions;
      auto gathered = libtorch_handler(Op::Gather).forward_autograd(std::vector<Tensor>{x}, *attrs, {true});
      REQUIRE(gathered.has_value());
      CHECK(libtorch_boundary_copies_of(Op::Gather).conversions == gathers + 1);
      CHECK(gathered->output.to_vector() == std::vector<double>{3, 3, 6, 6});
      gather_boundary = std::move(gathered->boundary);
      const std::uint64_t scatters = libtorch_boundary_copies_of(Op::ScatterAdd).conversions;
      auto scattered = libtorch_handler(Op::ScatterAdd).forward_autograd(std::vector<Tensor>{x, src}, *attrs,
                                                                         {true, true});
      REQUIRE(scattered.has_value());
      CHECK(libtorch_boundary_copies_of(Op::ScatterAdd).conversions == scatters + 1);
      CHECK(scattered->output.to_vector() == std::vector<double>{1, 2, 33, 4, 5, 76});
      scatter_boundary = std::move(scattered->boundary);
      // The caller's payload changes and goes away before the VJPs run.
      attrs->indices = {0, 1};
      attrs.reset();
    }
    auto dx = gather_boundary->vjp(g);
    REQUIRE(dx.has_value());
    CHECK((*dx)[0].to_vector() == std::vector<double>{0, 0, 3, 0, 0, 7});
    const Tensor gy = tensor_of({2, 3}, DType::F64, {1, 2, 3, 4, 5, 6});
    auto ds = scatter_boundary->vjp(gy);
    REQUIRE(ds.has_value());
    CHECK((*ds)[0].to_vector() == gy.to_vector());
    CHECK((*ds)[1].to_vector() == std::vector<double>{3, 3, 6, 6});
  }

  TEST_CASE("norm, index, block and scaled_matmul regions give the plain forward's and adjoint kernel's bits") {
    // Each region runs the plain forward's ATen computation in functional form, and autograd's
    // backward is the function the adjoint kernel calls (docs/libtorch.md): same bits, not only
    // the same bound.
    const std::vector<Op> ops{Op::LayerNorm, Op::BatchNorm, Op::Gather, Op::ScatterAdd,
                              Op::Concat,    Op::Slice,     Op::ScaledMatmul};
    std::uint64_t seed = 2100;
    std::size_t compared = 0;
    for (const ParityCase& c : parity_cases()) {
      if (std::find(ops.begin(), ops.end(), c.op) == ops.end()) continue;
      for (const DType dtype : {DType::F32, DType::F64}) {
        CAPTURE(c.name);
        CAPTURE(to_string(dtype));
        std::mt19937_64 rng(++seed);
        std::vector<Tensor> inputs;
        for (const InputSpec& spec : c.inputs) inputs.push_back(make_input(spec, dtype, rng).value());
        const HandlerSpec& h = libtorch_handler(c.op);
        const Tensor plain = h.forward(inputs, c.attrs).value();
        auto region = h.forward_autograd(inputs, c.attrs, every_input(inputs.size()));
        REQUIRE_MESSAGE(region.has_value(), region.error().message);
        CHECK(bytes_of(region->output) == bytes_of(plain));
        const Tensor grad = make_input({plain.shape().to_vector()}, dtype, rng).value();
        const std::vector<Tensor> adjoint = h.backward(inputs, plain, grad, c.attrs).value();
        const std::vector<Tensor> got = region->boundary->vjp(grad).value();
        REQUIRE(got.size() == adjoint.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          CAPTURE(i);
          // An input autograd did not reach (an empty norm's affine inputs) is the engine's zeros.
          const Tensor g = got[i].defined() ? got[i] : Tensor::zeros(inputs[i].shape(), dtype).value();
          CHECK(bytes_of(g) == bytes_of(adjoint[i]));
        }
        ++compared;
      }
    }
    CHECK(compared >= 2 * 30);
  }

  TEST_CASE("norm, index, block and scaled_matmul regions refuse what their plain forwards refuse, with the same "
            "message") {
    const std::int64_t live = libtorch_live_autograd_regions();
    const Tensor x = tensor_of({2, 3}, DType::F32, {1, 2, 3, 4, 5, 6});
    const Tensor other = tensor_of({3, 2}, DType::F32, {1, 2, 3, 4, 5, 6});
    const Tensor vec = tensor_of({3}, DType::F32, {1, 2, 3});
    OpAttrs out_of_range;
    out_of_range.axis = 1;
    out_of_range.indices = {0, 3};
    OpAttrs past_end;
    past_end.axis = 1;
    past_end.start = 1;
    past_end.end = 4;
    OpAttrs negative_eps;
    negative_eps.eps = -1.0;
    OpAttrs infinite_alpha;
    infinite_alpha.alpha = kInf;
    struct Bad {
      Op op;
      std::vector<Tensor> inputs;
      OpAttrs attrs;
    };
    const std::vector<Bad> bad{{Op::Gather, {x}, out_of_range},
                               {Op::ScatterAdd, {x, x}, out_of_range},
                               {Op::Slice, {x}, past_end},
                               {Op::Concat, {x, other}, with_axis(0)},
                               {Op::Concat, {}, with_axis(0)},
                               {Op::LayerNorm, {x}, negative_eps},
                               {Op::LayerNorm, {x, other}, {}},
                               {Op::BatchNorm, {vec}, {}},
                               {Op::ScaledMatmul, {x, other}, infinite_alpha},
                               {Op::ScaledMatmul, {x, x}, {}}};
    for (const Bad& b : bad) {
      CAPTURE(to_string(b.op));
      const auto plain = libtorch_handler(b.op).forward(b.inputs, b.attrs);
      const auto region = libtorch_handler(b.op).forward_autograd(b.inputs, b.attrs, every_input(b.inputs.size()));
      REQUIRE_FALSE(plain.has_value());
      REQUIRE_FALSE(region.has_value());
      CHECK(region.error().code == plain.error().code);
      CHECK(region.error().message == plain.error().message);
    }
    CHECK(libtorch_live_autograd_regions() == live);
  }
}

TEST_SUITE("libtorch.autograd_vjps") {
  TEST_CASE("autograd regions of clamp, safe_log, softplus and silu give the reference's adjoint at ties, floors, NaN and large |x|") {
    constexpr double nan = std::numeric_limits<double>::quiet_NaN();
    constexpr double inf = std::numeric_limits<double>::infinity();
    for (const DType dtype : {DType::F32, DType::F64}) {
      // Every special-value class with g = 0.75 (±1 and 2.5 sit on or beyond clamp's bounds).
      OpAttrs unit;
      unit.lo = -1.0;
      unit.hi = 1.0;
      const std::vector<double> s = special_values(dtype);
      const std::vector<double> g075(s.size(), 0.75);
      for (const Op op : {Op::Clamp, Op::SafeLog, Op::Softplus, Op::Silu}) (void)check_region_special(op, unit, dtype, s, g075);

      // clamp: both bounds pass g (ties), a clamped point takes exactly +0 whatever g holds (NaN,
      // inf), the slope at NaN is NaN (autograd's `where` chain alone would pass g there).
      OpAttrs clamp;
      clamp.lo = -1.0;
      clamp.hi = 0.5;
      const Tensor dclamp = check_region_special(Op::Clamp, clamp, dtype, {-1, 0.5, -1.5, 0.7, nan, -0.0, inf, -inf},
                                                 {2, 3, nan, inf, 1, -0.5, 1, 1});
      const std::vector<double> c = dclamp.to_vector();
      CHECK(c[0] == 2);
      CHECK(c[1] == 3);
      CHECK((c[2] == 0 && !std::signbit(c[2])));
      CHECK((c[3] == 0 && !std::signbit(c[3])));
      CHECK(std::isnan(c[4]));
      CHECK(c[5] == -0.5);

      // safe_log: at x = eps the right-hand derivative g/eps; below eps exactly 0 whatever g holds;
      // the slope at NaN is NaN.
      OpAttrs safe_log;
      safe_log.eps = 0.5;
      const Tensor dlog = check_region_special(Op::SafeLog, safe_log, dtype, {0.5, 0.25, nan, 1, 0, inf, -inf},
                                               {1, nan, 1, 2, inf, 1, 1});
      const std::vector<double> l = dlog.to_vector();
      CHECK(l[0] == 2);
      CHECK(l[1] == 0);
      CHECK(std::isnan(l[2]));
      CHECK(l[3] == 2);
      CHECK(l[4] == 0);

      // softplus: σ(±0) = 1/2 at the tie (max(x, 0) and |x| would give g or 0 there); the large-|x|
      // branches (ATen's own softplus switches to x above 20) and the infinities.
      const std::vector<double> xs{0, -0.0, 20, -20, 30, -30, 50, -50, 1e30, -1e30, inf, -inf, nan};
      const Tensor dsoft = check_region_special(Op::Softplus, {}, dtype, xs, std::vector<double>(xs.size(), 1.0));
      CHECK(dsoft.to_vector()[0] == 0.5);
      CHECK(dsoft.to_vector()[1] == 0.5);
      CHECK(std::isnan(dsoft.to_vector()[12]));

      // silu: σ(0) at ±0; NaN at ±inf (0·inf in σ·(1 + x·(1 − σ)), as the table says).
      const Tensor dsilu = check_region_special(Op::Silu, {}, dtype, {0, -0.0, inf, -inf, nan, 1e30, -1e30, 4, -4},
                                                std::vector<double>(9, 1.0));
      CHECK(dsilu.to_vector()[0] == 0.5);
      CHECK(std::isnan(dsilu.to_vector()[2]));
      CHECK(std::isnan(dsilu.to_vector()[3]));
    }
  }
}

// The same special-value cases on the plain handlers (forward, then the adjoint kernel the tape
// calls).
TEST_SUITE("libtorch.values") {
  TEST_CASE("reduction, matmul, linear, conv, pool, loss and shape forwards on NaN, infinities and -0.0 match the "
            "reference") {
    for (const std::string& family : region_special_families()) check_region_specials(Path::Plain, false, family);
  }
}

TEST_SUITE("libtorch.vjps") {
  TEST_CASE("reduction, matmul, linear, conv, pool, loss and shape adjoints on NaN, infinities and -0.0, with finite "
            "and non-finite g, match the reference") {
    for (const std::string& family : region_special_families()) check_region_specials(Path::Plain, true, family);
  }
}

TEST_SUITE("libtorch.vjps") {
  TEST_CASE("conv and conv_transpose multiply their zero padding by a non-finite weight (0*w = NaN), ATen's "
            "convolution, where the reference adds no term") {
    check_conv_padding_meets_non_finite_weight(Path::Plain);
  }
}

TEST_SUITE("libtorch.autograd_vjps") {
  TEST_CASE("conv and conv_transpose regions multiply their zero padding by a non-finite weight (0*w = NaN), ATen's "
            "convolution, where the reference adds no term") {
    check_conv_padding_meets_non_finite_weight(Path::Autograd);
  }
}

TEST_SUITE("libtorch.autograd_boundary") {
  TEST_CASE("a boundary holds its graph until it is destroyed, and refuses a second VJP") {
    const std::int64_t live = libtorch_live_autograd_regions();
    const Tensor a = Tensor::from_values({2, 2}, DType::F64, {1, 2, 3, 4}).value();
    const Tensor b = Tensor::from_values({2, 2}, DType::F64, {5, 6, 7, 8}).value();
    const std::vector<Tensor> in{a, b};
    {
      auto region = libtorch_handler(Op::Mul).forward_autograd(in, {}, {true, true});
      REQUIRE(region.has_value());
      CHECK(libtorch_live_autograd_regions() == live + 1);
      CHECK(region->output.to_vector() == std::vector<double>{5, 12, 21, 32});
      const Tensor g = Tensor::full(region->output.shape(), DType::F64, 1.0).value();
      auto grads = region->boundary->vjp(g);
      REQUIRE(grads.has_value());
      CHECK((*grads)[0].to_vector() == b.to_vector());
      CHECK((*grads)[1].to_vector() == a.to_vector());
      auto again = region->boundary->vjp(g);
      REQUIRE_FALSE(again.has_value());
      CHECK(again.error().code == RuntimeCode::GradientUnavailable);
      CHECK(testing::has(again.error().message, "freed the recorded graph"));
    }
    CHECK(libtorch_live_autograd_regions() == live);
    {
      // Destroyed without a VJP (clear_tape): freed as well.
      auto region = libtorch_handler(Op::Exp).forward_autograd(std::vector<Tensor>{a}, {}, {true});
      REQUIRE(region.has_value());
      CHECK(libtorch_live_autograd_regions() == live + 1);
    }
    CHECK(libtorch_live_autograd_regions() == live);
  }

  TEST_CASE("only inputs the engine marks take a gradient, and the output is adopted without a copy") {
    const Tensor x = Tensor::from_values({3}, DType::F32, {1, -2, 3}).value();
    const Tensor c = Tensor::from_values({3}, DType::F32, {4, 5, 6}).value();
    const LibTorchBoundaryCopies mul_before = libtorch_boundary_copies_of(Op::Mul);
    auto region = libtorch_handler(Op::Mul).forward_autograd(std::vector<Tensor>{x, c}, {}, {true, false});
    REQUIRE(region.has_value());
    // ATen's fresh product is adopted, and reported as an adoption, not a copy.
    CHECK(libtorch_boundary_copies_of(Op::Mul).materialisations == mul_before.materialisations);
    CHECK(libtorch_boundary_copies_of(Op::Mul).adoptions == mul_before.adoptions + 1);
    const Tensor g = Tensor::full(region->output.shape(), DType::F32, 2.0).value();
    auto grads = region->boundary->vjp(g);
    REQUIRE(grads.has_value());
    REQUIRE(grads->size() == 2);
    CHECK((*grads)[0].to_vector() == std::vector<double>{8, 10, 12});
    CHECK_FALSE((*grads)[1].defined());  // the constant (as a mask would be) was never tracked

    // A gradient that is the output gradient itself (add passes it through) is copied, never
    // aliased, and reported with the boundary's other copies (what `capsule run` prints).
    const std::uint64_t add_copies = libtorch_boundary_copies_of(Op::Add).materialisations;
    auto sum = libtorch_handler(Op::Add).forward_autograd(std::vector<Tensor>{x, c}, {}, {true, true});
    REQUIRE(sum.has_value());
    auto sum_grads = sum->boundary->vjp(g);
    REQUIRE(sum_grads.has_value());
    CHECK_FALSE((*sum_grads)[0].shares_storage_with(g));
    CHECK((*sum_grads)[0].to_vector() == g.to_vector());
    CHECK(libtorch_boundary_copies_of(Op::Add).materialisations >= add_copies + 2);
  }

  TEST_CASE("a region that copies inside its graph reports the copy: reduce_sum of a rank-0 input") {
    const Tensor x = Tensor::scalar(DType::F32, 3.0).value();
    const std::uint64_t before = libtorch_boundary_copies_of(Op::ReduceSum).materialisations;
    auto region = libtorch_handler(Op::ReduceSum).forward_autograd(std::vector<Tensor>{x}, {}, {true});
    REQUIRE(region.has_value());
    CHECK(region->output.to_vector() == std::vector<double>{3});
    CHECK_FALSE(region->output.shares_storage_with(x));
    CHECK(libtorch_boundary_copies_of(Op::ReduceSum).materialisations == before + 1);
  }

  TEST_CASE("autograd regions reject what the plain handlers reject") {
    const Tensor a = Tensor::from_values({2, 3}, DType::F32, {1, 2, 3, 4, 5, 6}).value();
    const Tensor b = Tensor::from_values({3}, DType::F32, {1, 2, 3}).value();
    const auto add = libtorch_handler(Op::Add).forward_autograd(std::vector<Tensor>{a, b}, {}, {true, true});
    REQUIRE_FALSE(add.has_value());
    CHECK(add.error().code == RuntimeCode::ShapeMismatch);
    const auto flags = libtorch_handler(Op::Add).forward_autograd(std::vector<Tensor>{a, a}, {}, {true});
    REQUIRE_FALSE(flags.has_value());
    CHECK(flags.error().code == RuntimeCode::InvalidArgument);
    OpAttrs pool;
    pool.kernel = {2};
    pool.padding = {5};
    const Tensor x = Tensor::from_values({1, 1, 3}, DType::F32, {1, 2, 3}).value();
    const auto padded = libtorch_handler(Op::MaxPool).forward_autograd(std::vector<Tensor>{x}, pool, {true});
    REQUIRE_FALSE(padded.has_value());
    CHECK(testing::has(padded.error().message, "max_pool: x has shape [1, 1, 3] and the window"));
    CHECK_FALSE(testing::has(padded.error().message, "\n"));
    // The payload checks of the plain unary kernels hold in the regions too (the scale region
    // used to accept a non-finite alpha).
    OpAttrs bad_alpha;
    bad_alpha.alpha = std::numeric_limits<double>::infinity();
    OpAttrs unordered;
    unordered.lo = 1.0;
    unordered.hi = -1.0;
    OpAttrs negative_eps;
    negative_eps.eps = -1.0;
    for (const auto& [op, attrs] : std::vector<std::pair<Op, OpAttrs>>{
             {Op::Scale, bad_alpha}, {Op::Clamp, unordered}, {Op::SafeLog, negative_eps}}) {
      CAPTURE(to_string(op));
      const auto plain = libtorch_handler(op).forward(std::vector<Tensor>{b}, attrs);
      const auto region = libtorch_handler(op).forward_autograd(std::vector<Tensor>{b}, attrs, {true});
      REQUIRE_FALSE(plain.has_value());
      REQUIRE_FALSE(region.has_value());
      CHECK(region.error().code == RuntimeCode::InvalidArgument);
      CHECK(region.error().message == plain.error().message);
    }
    CHECK(libtorch_live_autograd_regions() == 0);
  }

  TEST_CASE("every LibTorch handler with a region names LibTorch autograd as its runtime") {
    std::size_t regions = 0;
    for (const RegisteredHandler* h : libtorch_handlers().all()) {
      CAPTURE(h->spec.name);
      if (h->spec.forward_autograd == nullptr) continue;
      ++regions;
      CHECK(h->spec.autograd_runtime == "LibTorch autograd");
    }
    CHECK(regions >= 32);
  }
}

}  // namespace capsule

#endif  // CAPSULE_HAVE_LIBTORCH
