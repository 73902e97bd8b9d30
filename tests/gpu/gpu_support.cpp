// SPDX-License-Identifier: Apache-2.0
#include "gpu_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <numeric>
#include <stdexcept>

#include "capsule/handlers/cuda.hpp"
#if defined(CAPSULE_HAVE_LIBTORCH_CUDA)
#include "capsule/handlers/libtorch.hpp"
#endif
#include "capsule/handlers/reference.hpp"
#include "capsule/text.hpp"
#include "suite_coverage.hpp"

namespace capsule::gpu_test {
namespace {

/// splitmix64: a fixed sequence per seed, the same on every machine.
std::uint64_t next(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double unit(std::uint64_t& state) { return static_cast<double>(next(state) >> 11) * 0x1.0p-53; }

Tensor from(const std::vector<std::int64_t>& dims, DType dtype, const std::vector<double>& values) {
  auto shape = Shape::make(dims);
  REQUIRE_MESSAGE(shape.has_value(), "bad test shape");
  auto t = Tensor::from_values(*shape, dtype, values);
  REQUIRE_MESSAGE(t.has_value(), (t ? std::string() : t.error().message));
  return std::move(*t);
}

std::int64_t count(const std::vector<std::int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), std::int64_t{1}, std::multiplies<>());
}

}  // namespace

std::filesystem::path source_root() {
  if (const char* root = std::getenv("CAPSULE_SOURCE_ROOT"); root != nullptr && *root != '\0') return root;
  return CAPSULE_SOURCE_DIR;
}

const HandlerRegistry& registry() {
  static const HandlerRegistry instance = [] {
    // Also reached outside test cases (coverage declarations), so failures throw rather than
    // assert; inside a test case doctest reports the exception.
    HandlerRegistry r;
    if (auto reference = register_reference_handlers(r); !reference) throw std::runtime_error(reference.error().message);
    if (auto cuda = register_cuda_handlers(r); !cuda) throw std::runtime_error(cuda.error().message);
#if defined(CAPSULE_HAVE_LIBTORCH_CUDA)
    set_libtorch_threads(1);  // ATen's CPU pool: the reference side of a case runs on the host
    if (auto libtorch = register_libtorch_cuda_handlers(r); !libtorch) {
      throw std::runtime_error(libtorch.error().message);
    }
#endif
    return r;
  }();
  return instance;
}

std::optional<std::string> device_missing() {
  static const std::string reason = cuda_probe();
  if (reason.empty()) return std::nullopt;
  return reason;
}

bool skip_without_device() {
  const std::optional<std::string> reason = device_missing();
  if (!reason) return false;
  std::cout << "capsule-skip: no usable CUDA device: " << *reason << "\n";
  return true;
}

const HandlerSpec* cuda_handler(Op op, Provider provider) {
  const RegisteredHandler* h = registry().find(op, provider, Device::Cuda);
  if (h == nullptr) return nullptr;
  testing::record_exercised(op, provider, Device::Cuda);
  return &h->spec;
}

const HandlerSpec& reference_handler(Op op) {
  const RegisteredHandler* h = registry().find(op, Provider::Reference, Device::Cpu);
  REQUIRE_MESSAGE(h != nullptr, "no reference handler for " << to_string(op));
  return h->spec;
}

Tensor random(const std::vector<std::int64_t>& dims, DType dtype, std::uint64_t seed, double lo, double hi) {
  std::uint64_t state = seed;
  std::vector<double> values(static_cast<std::size_t>(count(dims)));
  for (double& v : values) v = lo + (hi - lo) * unit(state);
  return from(dims, dtype, values);
}

Tensor distinct(const std::vector<std::int64_t>& dims, DType dtype, std::uint64_t seed) {
  const std::size_t n = static_cast<std::size_t>(count(dims));
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::uint64_t state = seed;
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[next(state) % i]);
  // k/n·2 - 1 for k < n <= 2^22 is exact in float32 when n is a power of two; for other n the
  // values are still distinct after rounding because they are 2/n >= 2^-21 apart in [-1, 1).
  std::vector<double> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = 2.0 * static_cast<double>(order[i]) / static_cast<double>(n) - 1.0;
  return from(dims, dtype, values);
}

Tensor as64(const Tensor& t) {
  if (!t.defined()) return t;
  return from(t.shape().to_vector(), DType::F64, t.to_vector());
}

Tensor abs64(const Tensor& t) {
  if (!t.defined()) return t;
  std::vector<double> values = t.to_vector();
  for (double& v : values) v = std::fabs(v);
  return from(t.shape().to_vector(), DType::F64, values);
}

double unit_roundoff(DType dtype) { return dtype == DType::F32 ? 0x1.0p-24 : 0x1.0p-53; }

Comparison compare(const Tensor& got, const Tensor& want, const Tensor& magnitude, double factor) {
  Comparison c;
  if (!got.defined() || !want.defined()) {
    c.ok = got.defined() == want.defined();
    if (!c.ok) c.detail = str("one result is undefined: CUDA ", got.defined() ? "defined" : "undefined", ", reference ",
                              want.defined() ? "defined" : "undefined");
    return c;
  }
  if (!(got.shape() == want.shape()) || got.dtype() != want.dtype() || !(magnitude.shape() == want.shape())) {
    c.ok = false;
    c.detail = str("CUDA gave ", to_string(got.dtype()), to_string(got.shape()), ", the reference ",
                   to_string(want.dtype()), to_string(want.shape()));
    return c;
  }
  const std::vector<double> g = got.to_vector();
  const std::vector<double> w = want.to_vector();
  const std::vector<double> m = magnitude.to_vector();
  double worst = 0.0;  // the largest |Δ| / bound, or infinity for a NaN or a nonzero Δ with a zero bound
  std::size_t at = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double delta = std::fabs(g[i] - w[i]);
    const double bound = factor * m[i];
    double ratio = 0.0;
    if (std::isnan(g[i]) != std::isnan(w[i]) || (!std::isnan(g[i]) && delta > bound)) {
      ratio = bound > 0.0 && std::isfinite(delta) ? delta / bound : INFINITY;
    }
    if (ratio > worst) {
      worst = ratio;
      at = i;
    }
  }
  if (worst > 1.0) {
    c.ok = false;
    c.detail = str("element ", at, ": CUDA ", g[at], ", reference ", w[at], ", |difference| ", std::fabs(g[at] - w[at]),
                   " exceeds the bound ", factor * m[at], " (", factor, " x magnitude ", m[at], ")");
  }
  return c;
}

Tensor upload(const Tensor& host) {
  if (!host.defined()) return host;
  auto t = to_device(host);
  REQUIRE_MESSAGE(t.has_value(), (t ? std::string() : t.error().message));
  return std::move(*t);
}

Tensor download(const Tensor& device) {
  if (!device.defined()) return device;
  REQUIRE_MESSAGE(device.device() == Device::Cuda, "expected a CUDA tensor, got one on " << to_string(device.device()));
  auto t = to_host(device);
  REQUIRE_MESSAGE(t.has_value(), (t ? std::string() : t.error().message));
  return std::move(*t);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype()) return false;
  const std::size_t bytes = static_cast<std::size_t>(a.numel()) * element_size(a.dtype());
  return bytes == 0 || std::memcmp(a.data<unsigned char>(), b.data<unsigned char>(), bytes) == 0;
}

}  // namespace capsule::gpu_test
