// SPDX-License-Identifier: Apache-2.0
// TorchLean's LibTorch SDPA parity fixture (semantics §10.16), on CUDA: LibTorch's attention on
// our device tensors against the reference's composed attention, forward and VJP (the adjoint
// kernel the tape calls, and the external-autograd region's VJP), within 2e-2, with and without
// the mask whose last row is fully blocked; and a wrong-size Q refused. Built only where LibTorch
// has CUDA (tests/gpu/CMakeLists.txt), like the libtorch.cuda suites it belongs to.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "capsule/text.hpp"
#include "gpu_support.hpp"

namespace capsule::gpu_test {
namespace {

constexpr double kFixtureBound = 2e-2;  // §10.16: "within 2e-2"

Tensor fixture_tensor(const std::vector<double>& values) {
  return Tensor::from_values(Shape::make({2, 2, 2}).value(), DType::F32, values).value();
}

struct Fixture {
  Tensor q = fixture_tensor({0.10, -0.20, 0.30, 0.05, -0.15, 0.25, 0.40, -0.10});
  Tensor k = fixture_tensor({0.05, 0.20, -0.10, 0.30, 0.15, -0.25, 0.35, 0.10});
  Tensor v = fixture_tensor({0.20, -0.05, 0.10, 0.30, -0.20, 0.15, 0.05, -0.10});
  Tensor d_out = fixture_tensor({1.00, 0.50, -0.25, 0.75, 0.30, 1.20, -0.60, 0.40});
  Tensor mask = fixture_tensor({1, 0, 1, 1, 1, 0, 0, 0});  // batch 1's second row: fully blocked
  OpAttrs attrs = [] {
    OpAttrs a;
    a.scale = 1.0 / std::sqrt(2.0);
    return a;
  }();

  std::vector<Tensor> inputs(bool masked) const {
    std::vector<Tensor> in{q, k, v};
    if (masked) in.push_back(mask);
    return in;
  }
};

std::vector<Tensor> uploaded(const std::vector<Tensor>& host) {
  std::vector<Tensor> device;
  for (const Tensor& t : host) device.push_back(upload(t));
  return device;
}

/// Every element of `got` within the fixture's bound of `want` (absolute), one check per tensor.
void check_close(const Tensor& got, const Tensor& want, const std::string& what) {
  REQUIRE_MESSAGE(got.defined() == want.defined(), what << ": one side has no tensor");
  if (!want.defined()) return;
  REQUIRE_MESSAGE(got.shape() == want.shape(), what << ": shape " << to_string(got.shape()));
  const std::vector<double> g = got.to_vector();
  const std::vector<double> w = want.to_vector();
  std::string first;
  for (std::size_t i = 0; i < w.size() && first.empty(); ++i) {
    if (!(std::abs(g[i] - w[i]) <= kFixtureBound)) first = str("element ", i, ": ", g[i], " vs reference ", w[i]);
  }
  CHECK_MESSAGE(first.empty(), what << ": " << first);
}

const HandlerSpec* sdpa_or_skip() {
  if (skip_without_device()) return nullptr;
  const HandlerSpec* h = cuda_handler(Op::ScaledDotProductAttention, Provider::Libtorch);
  REQUIRE_MESSAGE(h != nullptr, "this build registers no LibTorch CUDA handler for scaled_dot_product_attention");
  return h;
}

}  // namespace

TEST_SUITE("libtorch.cuda.values") {
  TEST_CASE("parity: libtorch sdpa fixture of semantics 10.16 forward") {
    const HandlerSpec* h = sdpa_or_skip();
    if (h == nullptr) return;
    const Fixture f;
    for (const bool masked : {false, true}) {
      CAPTURE(masked);
      const auto want = reference_handler(Op::ScaledDotProductAttention).forward(f.inputs(masked), f.attrs);
      REQUIRE(want.has_value());
      const auto got = h->forward(uploaded(f.inputs(masked)), f.attrs);
      REQUIRE_MESSAGE(got.has_value(), (got ? std::string() : got.error().message));
      CHECK(got.value().device() == Device::Cuda);
      check_close(download(got.value()), want.value(), masked ? "masked output" : "output");
    }
    // A Q whose head size is not K's is refused before ATen runs, on the device as on the CPU.
    const Tensor wrong_q = Tensor::from_values(Shape::make({2, 2, 3}).value(), DType::F32,
                                               std::vector<double>(12, 0.1))
                               .value();
    const auto refused = h->forward(uploaded({wrong_q, f.k, f.v}), f.attrs);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().code == RuntimeCode::ShapeMismatch);
  }
}

TEST_SUITE("libtorch.cuda.vjps") {
  TEST_CASE("parity: libtorch sdpa fixture of semantics 10.16 vjp") {
    const HandlerSpec* h = sdpa_or_skip();
    if (h == nullptr) return;
    const Fixture f;
    const HandlerSpec& ref = reference_handler(Op::ScaledDotProductAttention);
    for (const bool masked : {false, true}) {
      CAPTURE(masked);
      const std::vector<Tensor> host = f.inputs(masked);
      const Tensor y = ref.forward(host, f.attrs).value();
      const auto want = ref.backward(host, y, f.d_out, f.attrs);
      REQUIRE(want.has_value());
      const std::vector<Tensor> device = uploaded(host);
      const Tensor g = upload(f.d_out);
      // The adjoint kernel (the tape's VJP under libtorch_forward_cuda).
      if (h->backward != nullptr) {
        const auto y_device = h->forward(device, f.attrs);
        REQUIRE(y_device.has_value());
        const auto got = h->backward(device, y_device.value(), g, f.attrs);
        REQUIRE_MESSAGE(got.has_value(), (got ? std::string() : got.error().message));
        for (std::size_t i = 0; i < 3; ++i) check_close(download(got.value()[i]), want.value()[i], str("adjoint d", i));
      }
      // The external-autograd region (libtorch.sdpa_autograd): its VJP runs on the device too.
      REQUIRE((h->forward_autograd != nullptr));
      std::vector<bool> needs{true, true, true};
      if (masked) needs.push_back(false);
      auto region = h->forward_autograd(device, f.attrs, needs);
      REQUIRE_MESSAGE(region.has_value(), (region ? std::string() : region.error().message));
      check_close(download(region.value().output), y, "region output");
      REQUIRE(region.value().boundary != nullptr);
      const auto got = region.value().boundary->vjp(g);
      REQUIRE_MESSAGE(got.has_value(), (got ? std::string() : got.error().message));
      for (std::size_t i = 0; i < 3; ++i) check_close(download(got.value()[i]), want.value()[i], str("region d", i));
    }
  }
}

}  // namespace capsule::gpu_test
