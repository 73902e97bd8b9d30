// SPDX-License-Identifier: Apache-2.0
#include "gradcheck.hpp"

#include <algorithm>
#include <sstream>

namespace capsule::test {
namespace {

std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double unit(std::uint64_t& state) { return static_cast<double>(splitmix(state) >> 11) * 0x1.0p-53; }

double objective(const Tensor& out, const std::vector<double>& weights) {
  double total = 0.0;
  for (std::int64_t i = 0; i < out.numel(); ++i) total += out.at(i) * weights[static_cast<std::size_t>(i)];
  return total;
}

}  // namespace

Tensor random_tensor(std::initializer_list<std::int64_t> dims, std::uint64_t seed, double lo, double hi) {
  std::uint64_t state = seed * 7919 + 17;
  auto shape = Shape::make(dims).value();
  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  for (double& v : values) v = lo + (hi - lo) * unit(state);
  return Tensor::from_values(shape, DType::F64, values).value();
}

GradcheckReport gradcheck_kernel(ForwardKernel forward, BackwardKernel backward, std::vector<Tensor> inputs,
                                 const OpAttrs& attrs, const std::vector<std::size_t>& differentiable, double step,
                                 double tolerance) {
  GradcheckReport report;
  auto out = forward(inputs, attrs);
  if (!out) {
    report.ok = false;
    report.detail = "forward failed: " + out.error().message;
    return report;
  }
  std::uint64_t state = 99;
  std::vector<double> weights(static_cast<std::size_t>(out->numel()));
  for (double& w : weights) w = 0.5 + unit(state);
  auto grad_out = Tensor::from_values(out->shape(), DType::F64, weights).value();
  auto grads = backward(inputs, *out, grad_out, attrs);
  if (!grads) {
    report.ok = false;
    report.detail = "backward failed: " + grads.error().message;
    return report;
  }
  for (std::size_t which : differentiable) {
    const Tensor& analytic = (*grads)[which];
    if (!analytic.defined() || analytic.shape() != inputs[which].shape()) {
      report.ok = false;
      report.detail = "input " + std::to_string(which) + ": gradient missing or of the wrong shape";
      return report;
    }
    for (std::int64_t i = 0; i < inputs[which].numel(); ++i) {
      Tensor original = inputs[which];
      auto evaluate = [&](double delta) {
        Tensor probe = original.clone().value();
        probe.mutable_data<double>()[i] += delta;
        inputs[which] = probe;
        double value = objective(forward(inputs, attrs).value(), weights);
        inputs[which] = original;
        return value;
      };
      const double numeric = (evaluate(step) - evaluate(-step)) / (2 * step);
      const double error = std::abs(analytic.at(i) - numeric) / std::max(1.0, std::abs(numeric));
      report.worst_error = std::max(report.worst_error, error);
      if (error > tolerance && report.ok) {
        report.ok = false;
        std::ostringstream detail;
        detail << "input " << which << " element " << i << ": analytic " << analytic.at(i) << ", numeric " << numeric;
        report.detail = detail.str();
      }
    }
  }
  return report;
}

}  // namespace capsule::test
