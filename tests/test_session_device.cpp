// SPDX-License-Identifier: Apache-2.0
// A session on a device other than the CPU, run here without one: a stand-in `cuda` runtime whose
// tensors are host memory labelled `cuda`, and a stand-in cuBLAS matmul handler that binds to the
// shipped `cublas.matmul` capsule of profile `vendor_cuda`. What the session itself must do on a
// device is checked here on every machine (the GPU parity suites call handlers directly): refuse a
// host input with device-mismatch before any kernel runs, make the backward seed and every
// gradient it creates through the runtime's fill, and refuse a backward when the runtime has none.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "capsule/runtime/session.hpp"
#include "test_support.hpp"

namespace capsule {
namespace {

using testing::shipped;

int fills = 0;         // calls of the stand-in runtime's fill
int kernel_calls = 0;  // calls of the stand-in handler's forward and backward kernels

void release(void* data, void* /*context*/) noexcept { delete[] static_cast<double*>(data); }

/// A float64 tensor of `shape` in "device" memory: host memory the tensor says is on `cuda`.
RuntimeResult<Tensor> device_tensor(const Shape& shape) {
  auto* data = new double[static_cast<std::size_t>(shape.numel() > 0 ? shape.numel() : 1)]();
  return Tensor::over(Storage::adopt(data, static_cast<std::size_t>(shape.numel()) * sizeof(double), Device::Cuda,
                                     &release, nullptr),
                      shape, DType::F64);
}

const double* read(const Tensor& t) { return static_cast<const double*>(t.device_address()); }
double* write(Tensor& t) { return static_cast<double*>(t.mutable_device_address()); }

Tensor on_device(std::initializer_list<std::int64_t> dims, std::initializer_list<double> values) {
  Tensor t = device_tensor(Shape::make(std::vector<std::int64_t>(dims)).value()).value();
  std::copy(values.begin(), values.end(), write(t));
  return t;
}

std::string usable() { return {}; }

RuntimeResult<Tensor> fill(const Shape& shape, DType dtype, double value) {
  ++fills;
  REQUIRE(dtype == DType::F64);
  CAPSULE_TRY(Tensor t, device_tensor(shape));
  for (std::int64_t i = 0; i < shape.numel(); ++i) write(t)[i] = value;
  return t;
}

/// c[m, n] = a[m, k]·b[k, n] on "device" tensors (2-D float64 only: all this test needs).
RuntimeResult<Tensor> product(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  const std::int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const std::int64_t n = tb ? b.dim(0) : b.dim(1);
  CAPSULE_TRY(Shape shape, Shape::make({m, n}));
  CAPSULE_TRY(Tensor c, device_tensor(shape));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        sum += read(a)[ta ? p * m + i : i * k + p] * read(b)[tb ? j * k + p : p * n + j];
      }
      write(c)[i * n + j] = sum;
    }
  }
  return c;
}

RuntimeResult<Tensor> matmul_forward(std::span<const Tensor> inputs, const OpAttrs& /*attrs*/) {
  ++kernel_calls;
  for (const Tensor& t : inputs) REQUIRE(t.device() == Device::Cuda);
  return product(inputs[0], false, inputs[1], false);
}

RuntimeResult<std::vector<Tensor>> matmul_backward(std::span<const Tensor> inputs, const Tensor& /*output*/,
                                                   const Tensor& grad, const OpAttrs& /*attrs*/) {
  ++kernel_calls;
  REQUIRE(grad.device() == Device::Cuda);
  CAPSULE_TRY(Tensor da, product(grad, false, inputs[1], true));
  CAPSULE_TRY(Tensor db, product(inputs[0], true, grad, false));
  return std::vector<Tensor>{da, db};
}

/// The registry a CUDA build would have, with stand-ins: cuBLAS's matmul spec (its guards and
/// layout, so it binds to the shipped capsule) and a `cuda` runtime, with or without a fill.
HandlerRegistry stand_in_cuda(bool with_fill) {
  HandlerRegistry registry;
  HandlerSpec spec;
  spec.name = "stand-in cuBLAS CUDA matmul";
  spec.op = Op::Matmul;
  spec.provider = Provider::Cublas;
  spec.device = Device::Cuda;
  spec.layouts = {Layout::FlatRowMajor};
  spec.guards = {"CUDA vendor operand shape checks", "contiguous CUDA device buffer checks"};
  spec.forward = matmul_forward;
  spec.backward = matmul_backward;
  spec.backend_vjp = true;
  REQUIRE(registry.add(spec));
  registry.add_device_runtime(Device::Cuda, "stand-in cuda", usable, with_fill ? fill : nullptr);
  return registry;
}

Session open_vendor_cuda(const HandlerRegistry& registry) {
  SessionOptions options;
  options.profile = "vendor_cuda";
  options.preselect = {Op::Matmul};
  auto session = Session::open(shipped(), registry, options);
  REQUIRE_MESSAGE(session, (session ? std::string() : session.error().message));
  return std::move(session).value();
}

}  // namespace

TEST_SUITE("runtime.device") {
  TEST_CASE("a device session refuses a host input with device-mismatch before any kernel runs") {
    const HandlerRegistry registry = stand_in_cuda(true);
    Session session = open_vendor_cuda(registry);
    kernel_calls = 0;
    const Var a = session.constant(on_device({2, 2}, {1, 2, 3, 4}));
    const Var host = session.constant(Tensor::from_values({2, 2}, DType::F64, {1, 0, 0, 1}).value());
    const std::vector<Var> inputs{a, host};
    auto result = session.call(Op::Matmul, inputs);
    REQUIRE_FALSE(result);
    CHECK(result.error().code == RuntimeCode::DeviceMismatch);
    CHECK(result.error().message.find("input 1 is on `cpu`") != std::string::npos);
    CHECK(result.error().message.find("vendor_cuda") != std::string::npos);
    CHECK(kernel_calls == 0);
  }

  TEST_CASE("a device session makes the backward seed through the runtime's fill, and its gradients stay there") {
    const HandlerRegistry registry = stand_in_cuda(true);
    Session session = open_vendor_cuda(registry);
    fills = 0;
    kernel_calls = 0;
    const Var a = session.parameter(on_device({2, 2}, {1, 2, 3, 4}));
    const Var b = session.parameter(on_device({2, 2}, {5, 6, 7, 8}));
    const std::vector<Var> inputs{a, b};
    auto c = session.call(Op::Matmul, inputs);
    REQUIRE_MESSAGE(c, (c ? std::string() : c.error().message));
    CHECK(c->value().device() == Device::Cuda);
    auto grads = session.backward(*c);
    REQUIRE_MESSAGE(grads, (grads ? std::string() : grads.error().message));
    CHECK(fills >= 1);  // the seed: ones of c's shape, on the device
    CHECK(kernel_calls == 2);
    const Tensor ga = grads->of(a);
    const Tensor gb = grads->of(b);
    REQUIRE(ga.defined());
    REQUIRE(gb.defined());
    CHECK(ga.device() == Device::Cuda);
    CHECK(gb.device() == Device::Cuda);
    // With a seed of ones: dA = 1·bᵀ (row sums of b), dB = aᵀ·1 (column sums of a).
    const std::vector<double> want_ga{11, 15, 11, 15}, want_gb{4, 4, 6, 6};
    for (std::size_t i = 0; i < 4; ++i) {
      CHECK(read(ga)[i] == want_ga[i]);
      CHECK(read(gb)[i] == want_gb[i]);
    }
  }

  TEST_CASE("a device session whose runtime cannot make tensors refuses the backward with device-unavailable") {
    const HandlerRegistry registry = stand_in_cuda(false);
    Session session = open_vendor_cuda(registry);
    const Var a = session.parameter(on_device({1, 1}, {2}));
    const Var b = session.parameter(on_device({1, 1}, {3}));
    const std::vector<Var> inputs{a, b};
    auto c = session.call(Op::Matmul, inputs);
    REQUIRE_MESSAGE(c, (c ? std::string() : c.error().message));
    auto grads = session.backward(*c);
    REQUIRE_FALSE(grads);
    CHECK(grads.error().code == RuntimeCode::DeviceUnavailable);
    CHECK(grads.error().message.find("cannot make tensors") != std::string::npos);
  }
}

}  // namespace capsule
