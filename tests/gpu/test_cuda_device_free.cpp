// SPDX-License-Identifier: Apache-2.0
// What the CUDA providers do on a machine without a usable device, and how the catalogs, the
// handlers and the parity suites fit together: these run everywhere (CI included) and are not
// labelled `gpu`. On a machine with a device, the cases about its absence skip, saying so.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <iostream>

#include "capsule/handlers/cuda.hpp"
#include "capsule/load.hpp"
#include "capsule/runtime/session.hpp"
#include "capsule/text.hpp"
#include "gpu_support.hpp"
#include "libtorch_cuda_table.hpp"
#include "parity.hpp"
#include "parity_suites.hpp"
#include "parity_table.hpp"
#include "transpose_index.hpp"

namespace {

using namespace capsule;
using namespace capsule::gpu_test;

bool has(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

/// On a machine with a usable device the absence cannot be observed: say so and skip.
bool skip_with_device() {
  if (device_missing()) return false;
  std::cout << "capsule-skip: a CUDA device is usable here; this case checks the behaviour without one\n";
  return true;
}

const Workspace& shipped() {
  static const Workspace workspace = load_workspace({source_root() / "catalogs"}, {source_root() / "profiles"});
  return workspace;
}

Tensor cpu_tensor() {
  auto t = Tensor::from_values({2, 2}, DType::F32, {1.0, 2.0, 3.0, 4.0});
  REQUIRE(t.has_value());
  return std::move(*t);
}

/// The padded transpose kernel's effect, on the host, through the kernel's own index function:
/// out [batch, cols, out_stride] from in [batch, rows, in_stride].
std::vector<double> host_transpose_padded(const std::vector<double>& in, std::int64_t batch, std::int64_t rows,
                                          std::int64_t cols, std::int64_t in_stride, std::int64_t out_stride) {
  std::vector<double> out(static_cast<std::size_t>(batch * cols * out_stride));
  for (std::int64_t o = 0; o < static_cast<std::int64_t>(out.size()); ++o) {
    const std::int64_t source = cuda::padded_transpose_source(o, rows, cols, in_stride, out_stride);
    REQUIRE(source < static_cast<std::int64_t>(in.size()));
    out[static_cast<std::size_t>(o)] = source >= 0 ? in[static_cast<std::size_t>(source)] : 0.0;
  }
  return out;
}

}  // namespace

// Test case names start with "device-free:" (tests/gpu/CMakeLists.txt discovers them apart from
// the `gpu` parity cases).
TEST_SUITE("cuda.device_free") {
  TEST_CASE("device-free: register_cuda_handlers registers the runtime and the cuBLAS handlers") {
    HandlerRegistry r;
    auto status = register_cuda_handlers(r);
    REQUIRE_MESSAGE(status.has_value(), (status ? std::string() : status.error().message));
    const std::string* runtime = r.device_runtime(Device::Cuda);
    REQUIRE(runtime != nullptr);
    CHECK(*runtime == kCudaRuntimeName);
    for (const Op op : parity_ops(Provider::Cublas)) {
      const RegisteredHandler* h = r.find(op, Provider::Cublas, Device::Cuda);
      REQUIRE_MESSAGE(h != nullptr, "no cuBLAS handler for " << to_string(op));
      CHECK(h->spec.backend_vjp);
      CHECK(h->spec.has_backward());
      CHECK(h->spec.guards == std::vector<std::string>{std::string(kCudaShapeGuard), std::string(kCudaLayoutGuard)});
    }
    // Nothing else registers under the CUDA vendor providers than the parity tables cover.
    for (const RegisteredHandler* h : r.all()) {
      const std::vector<Op>& covered = parity_ops(h->spec.provider);
      CHECK_MESSAGE(std::find(covered.begin(), covered.end(), h->spec.op) != covered.end(),
                    h->spec.name << " has no parity cases (tests/gpu/parity.cpp)");
    }
  }

  TEST_CASE("device-free: every cuBLAS and cuDNN capsule is covered by the parity suites") {
    REQUIRE_MESSAGE(shipped().failed_modules.empty(), "a shipped catalog does not load");
    REQUIRE_MESSAGE(shipped().find_module("cublas") != nullptr, "no shipped module cublas");
    std::size_t capsules = 0;
    for (const ModulePtr& module : shipped().modules) {
      for (const Capsule& c : module->capsules) {
        if (c.provider != Provider::Cublas && c.provider != Provider::Cudnn) continue;
        ++capsules;
        CHECK(c.device == Device::Cuda);
        const std::vector<Op> ops = registered_parity_ops(c.provider);
        CHECK_MESSAGE(std::find(ops.begin(), ops.end(), c.op) != ops.end(),
                      c.name << ": no registered handler with parity cases for " << to_string(c.op));
        const std::string provider(to_string(c.provider));
        const Evidence& value = c.contract(Obligation::Value).evidence;
        const Evidence& vjp = c.contract(Obligation::Vjp).evidence;
        CHECK_MESSAGE((value.kind == EvidenceKind::TestSuite && value.name == provider + ".values"),
                      c.name << ": value evidence is not the GPU parity suite " << provider << ".values");
        CHECK_MESSAGE((vjp.kind == EvidenceKind::TestSuite && vjp.name == provider + ".vjps"),
                      c.name << ": vjp evidence is not the GPU parity suite " << provider << ".vjps");
      }
    }
    CHECK(capsules >= parity_ops(Provider::Cublas).size());
  }

  TEST_CASE("device-free: every LibTorch CUDA capsule with suite evidence is covered by the libtorch.cuda suites") {
    REQUIRE_MESSAGE(shipped().failed_modules.empty(), "a shipped catalog does not load");
    const std::vector<Op> table_ops = libtorch_table_ops();
    const std::vector<Op>& own_ops = parity_ops(Provider::Libtorch);
    const auto covers = [](const std::vector<Op>& ops, Op op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
    // The table's ops and the vendor-class ops with their own GPU cases are disjoint.
    for (const Op op : table_ops) CHECK_MESSAGE(!covers(own_ops, op), to_string(op) << " is in both GPU tables");
    std::vector<Op> model_ops;
    std::size_t capsules = 0;
    for (const ModulePtr& module : shipped().modules) {
      for (const Capsule& c : module->capsules) {
        if (c.provider != Provider::Libtorch || c.device != Device::Cuda) continue;
        const Evidence& value = c.contract(Obligation::Value).evidence;
        if (module->name == "libtorch-cuda-model") model_ops.push_back(c.op);
        // TorchLean's SDPA pair keeps its value on a trusted boundary (catalogs/libtorch.toml).
        if (value.kind != EvidenceKind::TestSuite) continue;
        ++capsules;
        CHECK_MESSAGE(value.name == "libtorch.cuda.values", c.name << ": value evidence " << value.name);
        CHECK_MESSAGE(c.contract(Obligation::Vjp).evidence.name == "libtorch.cuda.vjps", c.name << ": vjp evidence");
        CHECK_MESSAGE((covers(own_ops, c.op) || covers(table_ops, c.op)),
                      c.name << ": no GPU parity cases for " << to_string(c.op));
      }
    }
    CHECK(capsules == own_ops.size() + table_ops.size());
    // catalogs/libtorch-cuda-model.toml declares exactly the table's ops, in the table's order.
    CHECK(model_ops == table_ops);
  }

  TEST_CASE("device-free: the CUDA twins' table is the CPU twins' with only repeated-index sums and sigmoid loosened") {
    using libtorch_parity::AtenBackend;
    using libtorch_parity::Bound;
    const auto cpu = libtorch_parity::parity_cases(AtenBackend::Cpu);
    const auto cuda = libtorch_parity::parity_cases(AtenBackend::Cuda);
    REQUIRE(cpu.size() == cuda.size());
    std::size_t indexed = 0;
    std::size_t sigmoid = 0;
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      CAPTURE(cpu[i].name);
      CHECK(cpu[i].name == cuda[i].name);
      CHECK(cpu[i].op == cuda[i].op);
      for (const auto& [on_cpu, on_cuda] : {std::pair{cpu[i].forward, cuda[i].forward},
                                            std::pair{cpu[i].backward, cuda[i].backward}}) {
        if (on_cpu.bound == on_cuda.bound && on_cpu.k == on_cuda.k) continue;
        if (cpu[i].op == Op::Sigmoid) {
          ++sigmoid;
          CHECK((on_cpu.bound == Bound::Ulps && on_cpu.k == 4 && on_cuda.bound == Bound::Ulps && on_cuda.k == 6));
          continue;
        }
        ++indexed;
        CHECK((cpu[i].op == Op::Gather || cpu[i].op == Op::ScatterAdd));
        CHECK(on_cpu.bound == Bound::Exact);
        CHECK((on_cuda.bound == Bound::Terms && on_cuda.k == 2));
        CHECK(cpu[i].terms >= 2);  // a repeated index sums at least two terms
      }
    }
    CHECK(indexed == 5);  // gather's adjoint in three cases, scatter_add's forward in two
    CHECK(sigmoid == 4);  // sigmoid's forward in its four shapes
  }

  TEST_CASE("device-free: the probe names why there is no usable device") {
    if (skip_with_device()) return;
    const std::string reason = cuda_probe();
    CHECK_FALSE(reason.empty());
    CHECK_MESSAGE((has(reason, "no CUDA driver") || has(reason, "no CUDA device") || has(reason, "driver")),
                  "the probe's reason names neither the driver nor the device: " << reason);
    CHECK(reason.find('\n') == std::string::npos);
  }

  TEST_CASE("device-free: the CUDA fingerprint names the device by the ledger's keys") {
    // Ledger verdicts and capsule_gpu_tests --probe read device.cuda, device.cuda.driver and
    // device.cuda.compute_capability; without a device the first two say "none".
    const EnvironmentFingerprint cuda = cuda_fingerprint();
    CHECK_FALSE(cuda.get("device.cuda").empty());
    CHECK_FALSE(cuda.get("device.cuda.driver").empty());
    CHECK(cuda.get("provider.cuda.device").empty());
    CHECK(cuda.get("provider.cuda.driver").empty());
    if (device_missing()) {
      CHECK(cuda.get("device.cuda") == "none");
    } else {
      CHECK_FALSE(cuda.get("device.cuda.compute_capability").empty());
    }
  }

  TEST_CASE("device-free: a vendor_cuda session does not open without a device and nothing falls back") {
    if (skip_with_device()) return;
    REQUIRE_MESSAGE(shipped().find_profile("vendor_cuda") != nullptr, "no shipped profile vendor_cuda");
    SessionOptions options;
    options.profile = "vendor_cuda";
    auto session = Session::open(shipped(), registry(), options);
    REQUIRE_FALSE(session.has_value());
    CHECK(session.error().code == RuntimeCode::DeviceUnavailable);
    CHECK(to_string(session.error().code) == "device-unavailable");
    const std::string& message = session.error().message;
    CHECK_MESSAGE(has(message, cuda_probe()), message);
    CHECK_MESSAGE(has(message, "vendor_cuda"), message);
    CHECK_MESSAGE(has(message, "nothing falls back to the CPU"), message);
  }

  TEST_CASE("device-free: every shipped CUDA profile stops at session open naming the cause, and nothing falls back") {
    if (skip_with_device()) return;
    std::size_t cuda_profiles = 0;
    for (const auto& profile : shipped().profiles) {
      if (profile->policy.device != Device::Cuda) continue;
      ++cuda_profiles;
      CAPTURE(profile->name);
      SessionOptions options;
      options.profile = profile->name;
      auto session = Session::open(shipped(), registry(), options);
      REQUIRE_FALSE(session.has_value());
      CHECK(session.error().code == RuntimeCode::DeviceUnavailable);
      const std::string& message = session.error().message;
      CHECK_MESSAGE(has(message, cuda_probe()), message);
      CHECK_MESSAGE(has(message, str("profile `", profile->name, "`")), message);
      CHECK_MESSAGE(has(message, "nothing falls back to the CPU"), message);
    }
    // checked_cuda, libtorch_forward_cuda, libtorch_forward_strict, libtorch_autograd_cuda,
    // vendor_cuda, libtorch_cuda
    CHECK(cuda_profiles >= 6);
  }

  TEST_CASE("device-free: copies to the device fail with the probe's reason") {
    if (skip_with_device()) return;
    auto copied = to_device(cpu_tensor());
    REQUIRE_FALSE(copied.has_value());
    CHECK(copied.error().code == RuntimeCode::DeviceUnavailable);
    CHECK_MESSAGE(has(copied.error().message, "to_device: no usable CUDA device: " + cuda_probe()), copied.error().message);
    auto shape = Shape::make({3});
    REQUIRE(shape.has_value());
    auto empty = empty_on_device(*shape, DType::F64);
    REQUIRE_FALSE(empty.has_value());
    CHECK(empty.error().code == RuntimeCode::DeviceUnavailable);
    // A CPU tensor is not a device tensor: to_host says which device it is on.
    auto back = to_host(cpu_tensor());
    REQUIRE_FALSE(back.has_value());
    CHECK(back.error().code == RuntimeCode::DeviceMismatch);
    CHECK_MESSAGE(has(back.error().message, "`cpu`"), back.error().message);
  }

  TEST_CASE("device-free: a CUDA handler refuses CPU tensors with device-mismatch") {
    // Runs with and without a device: the handlers check where their inputs live before they
    // touch the device.
    std::size_t handlers = 0;
    for (const Provider provider : {Provider::Cublas, Provider::Cudnn}) {
      for (const Op op : registered_parity_ops(provider)) {
        const HandlerSpec& h = registry().find(op, provider, Device::Cuda)->spec;
        ++handlers;
        const ParityCase c = parity_cases(op).front();  // CPU tensors
        REQUIRE((h.forward != nullptr));
        auto out = h.forward(c.inputs, c.attrs);
        REQUIRE_FALSE_MESSAGE(out.has_value(), h.name << " accepted CPU inputs");
        CHECK_MESSAGE(out.error().code == RuntimeCode::DeviceMismatch, h.name << ": " << out.error().message);
        CHECK_MESSAGE(has(out.error().message, "`cpu`"), out.error().message);
        if (h.backward != nullptr) {
          auto ref = reference_handler(op).forward(c.inputs, c.attrs);
          REQUIRE(ref.has_value());
          auto grads = h.backward(c.inputs, *ref, *ref, c.attrs);
          REQUIRE_FALSE_MESSAGE(grads.has_value(), h.name << " backward accepted CPU inputs");
          CHECK_MESSAGE(grads.error().code == RuntimeCode::DeviceMismatch, h.name << ": " << grads.error().message);
        }
      }
    }
    CHECK(handlers >= parity_ops(Provider::Cublas).size());
  }
}

// The parity harness itself, without a device: the reference stands in for the handler under
// test (host_transfer), so every case the GPU suites run is known to be valid input for the
// reference, and the bounds are known to separate an error just above them from one below.
TEST_SUITE("cuda.device_free") {
  TEST_CASE("device-free: the parity harness passes the reference against itself on every case") {
    std::size_t cases = 0;
    for (const Provider provider : {Provider::Cublas, Provider::Cudnn}) {
      for (const Op op : parity_ops(provider)) {
        const HandlerSpec& ref = reference_handler(op);
        for (const ParityCase& c : parity_cases(op)) {
          CAPTURE(c.label);
          check_forward(ref, c, host_transfer());
          check_vjp(ref, c, host_transfer());
          ++cases;
        }
      }
    }
    CHECK(cases > 80);
  }

  TEST_CASE("device-free: the parity bounds reject an error above them and accept one below") {
    for (const Op op : {Op::Matmul, Op::ScaledMatmul, Op::Linear, Op::Conv, Op::ConvTranspose, Op::AvgPool, Op::BatchNorm,
                        Op::MaxPool}) {
      for (const ParityCase& c : parity_cases(op)) {
        CAPTURE(c.label);
        const ForwardBound bound = forward_bound(c);
        auto want = reference_handler(op).forward(c.inputs, c.attrs);
        REQUIRE(want.has_value());
        if (want->numel() == 0) continue;
        const std::vector<double> values = want->to_vector();
        const std::vector<double> magnitude = bound.magnitude.to_vector();
        // The element with the largest bound: perturb it by 3x and by 0.4x its bound (rounded
        // to the dtype, so check the perturbation that was really stored).
        const std::size_t at = static_cast<std::size_t>(
            std::max_element(magnitude.begin(), magnitude.end()) - magnitude.begin());
        const double limit = bound.factor * magnitude[at];
        for (const double scale : {3.0, 0.4}) {
          std::vector<double> moved = values;
          // max_pool's bound is 0: any change at all must be rejected.
          moved[at] += limit > 0.0 ? scale * limit : (std::fabs(values[at]) + 1.0) * 1e-3;
          auto perturbed = Tensor::from_values(want->shape(), want->dtype(), moved);
          REQUIRE(perturbed.has_value());
          const double stored = std::fabs(perturbed->at(static_cast<std::int64_t>(at)) - values[at]);
          const Comparison cmp = compare(*perturbed, *want, bound.magnitude, bound.factor);
          if (stored > limit) {
            CHECK_MESSAGE(!cmp.ok, "an error of " << stored << " above the bound " << limit << " passed");
            CHECK(has(cmp.detail, "exceeds the bound"));
          } else {
            CHECK_MESSAGE(cmp.ok, "an error of " << stored << " within the bound " << limit << " failed: " << cmp.detail);
          }
        }
      }
    }
  }

  TEST_CASE("device-free: the padded transpose's index pads channels-last with zeros and unpads back exactly") {
    // Batch norm's channel-padded layout (cudnn_graph.cpp, run_channels_last): x [n, c, S] to
    // [n, S, padded] and back; with no padding it is the plain NCHW <-> NHWC transpose.
    struct Shape3 {
      std::int64_t n, c, s, padded;
    };
    for (const Shape3 d : {Shape3{4, 3, 5, 8}, Shape3{2, 35, 7, 64}, Shape3{1, 1, 1, 8}, Shape3{3, 8, 2, 8},
                           Shape3{3, 8, 2, 32}, Shape3{2, 3, 4, 3}}) {
      CAPTURE(d.n);
      CAPTURE(d.c);
      CAPTURE(d.s);
      CAPTURE(d.padded);
      std::vector<double> x(static_cast<std::size_t>(d.n * d.c * d.s));
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1.0 + static_cast<double>(i);  // no zeros
      const std::vector<double> padded = host_transpose_padded(x, d.n, d.c, d.s, d.s, d.padded);
      std::size_t mismatches = 0;
      for (std::int64_t b = 0; b < d.n; ++b) {
        for (std::int64_t s = 0; s < d.s; ++s) {
          for (std::int64_t ch = 0; ch < d.padded; ++ch) {
            const double got = padded[static_cast<std::size_t>((b * d.s + s) * d.padded + ch)];
            const double want = ch < d.c ? x[static_cast<std::size_t>((b * d.c + ch) * d.s + s)] : 0.0;
            mismatches += got == want ? 0 : 1;
          }
        }
      }
      CHECK(mismatches == 0);
      CHECK(host_transpose_padded(padded, d.n, d.s, d.c, d.padded, d.s) == x);
    }
  }

  TEST_CASE("device-free: the matmul bound is 2(K+2)u times |A||B|") {
    const ParityCase c = parity_cases(Op::Matmul).front();  // float32 [3,4] x [4,5]
    REQUIRE(c.inputs[0].dtype() == DType::F32);
    const ForwardBound bound = forward_bound(c);
    CHECK(bound.factor == doctest::Approx(2.0 * (5 + 2) * 0x1.0p-24));  // K = max(k 4, m 3, n 5)
    const std::vector<double> a = c.inputs[0].to_vector(), b = c.inputs[1].to_vector();
    for (std::int64_t i = 0; i < 3; ++i) {
      for (std::int64_t j = 0; j < 5; ++j) {
        double sum = 0.0;
        for (std::int64_t k = 0; k < 4; ++k) {
          sum += std::fabs(a[static_cast<std::size_t>(i * 4 + k)]) * std::fabs(b[static_cast<std::size_t>(k * 5 + j)]);
        }
        CHECK(bound.magnitude.at(i * 5 + j) == doctest::Approx(sum).epsilon(1e-12));
      }
    }
  }
}
