// SPDX-License-Identifier: Apache-2.0
// The parity check and its tolerances.
//
// Why these bounds. Both sides compute the same exact function f on the same rounded inputs,
// each with its own summation order (cuBLAS and cuDNN pick theirs; the reference sums left to
// right). For a sum of products s = Σ_{t≤K} Π_j x_{j,t}, any order of K terms with fused or
// unfused multiply-adds gives |ŝ - s| ≤ γ_{K+1}·Σ|Π x| with γ_n = n·u/(1 - n·u) (Higham,
// "Accuracy and Stability of Numerical Algorithms", §3.1), u the unit roundoff (2^-24 float32,
// 2^-53 float64). Each side's error is within that bound of the exact value, so their
// difference is within twice it, and for (K+2)·u ≤ 0.01 twice γ_{K+1} is below
// 2·(K+2)·u: the tolerance is
//     |cuda - reference|ᵢ ≤ c·(K+2)·u·|f|(|x|)ᵢ,   c = 2,
// where |f|(|x|) is f evaluated on the absolute values of the inputs (the reference handler in
// float64 computes it: for matmul that is (|A|·|B|)ᵢⱼ, for conv (|X| * |W|) + |b|, for the VJPs
// the same products with |g|), and K is the most terms any element of the output or of any
// gradient sums. The extra +2 covers a scale (scaled_matmul's alpha, avg_pool's division) and
// the final rounding to the output dtype. The bound is componentwise, so an output element that
// is small by cancellation is still held to its terms' magnitudes, not to its own.
//   - max_pool: the forward selects an element, so it is exact (inputs are distinct, no ties);
//     the gradient of an input element sums g over the ≤ K = prod(kernel) windows that selected
//     it, bounded as above with |f| = max_pool's backward applied to |g|.
//   - batch_norm: statistics over R = n·spatial elements per channel. The mean carries an error
//     ≤ γ_R·mean|x| and the biased variance a relative error ≤ γ_{R+2}·κ with κ = max(1,
//     mean(x²)/(var+eps)) the variance's condition number, so x̂ = (x - mean)·invstd is within
//     (R+2)·u·κ·(1 + |x̂|) to first order, and y = γ·x̂ + β within (R+2)·u·κ·(|γ|·(1 + |x̂|) + |β|).
//     The gradients sum R such terms: dβ = Σg, dγ = Σ g·x̂ and dx = γ·invstd·(g - mean(g) -
//     x̂·mean(g·x̂)), bounded the same way term by term. c = 4 for batch norm: the factor 2 of two
//     implementations, and 2 for the dropped second-order terms.
#include "parity.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>

#include "capsule/text.hpp"
#include "gpu_support.hpp"

namespace capsule::gpu_test {
namespace {

constexpr double kMultilinearC = 2.0;
constexpr double kBatchNormC = 4.0;

struct Ran {
  Tensor output;
  std::unique_ptr<SavedState> saved;
  std::string refusal;  ///< set instead of output when the handler refused as its capsule documents
};

/// The one refusal the cuDNN capsules document (catalogs/cudnn.toml, docs/cuda.md): float64 where
/// cuDNN has no engine for the graph, refused with invalid-argument saying so. Any other failure
/// of a handler fails its case.
bool documented_refusal(const HandlerSpec& h, const std::vector<Tensor>& inputs, const RuntimeError& e) {
  return h.provider == Provider::Cudnn && !inputs.empty() && inputs[0].dtype() == DType::F64 &&
         e.code == RuntimeCode::InvalidArgument &&
         e.message.find("has no engine for this float64 graph") != std::string::npos;
}

/// Reports a documented refusal on its own line (tools/gpu-check.sh keeps the log), so a run
/// shows which cases cuDNN did not cover, and returns true.
bool report_refusal(const std::string& label, std::string_view phase, const std::string& refusal) {
  std::cout << "capsule-refused-as-documented: " << label << ": " << phase << ": " << refusal << "\n";
  MESSAGE(label << ": " << phase << " refused as documented: " << refusal);
  return true;
}

bool saves(const HandlerSpec& h) { return h.forward_saving != nullptr && h.backward_saved != nullptr; }

/// Runs the forward, keeping the handler's saved state when its adjoint needs it.
Ran run_forward(const HandlerSpec& h, const std::vector<Tensor>& inputs, const OpAttrs& attrs, bool for_backward,
                const std::string& who) {
  Ran ran;
  if (for_backward && saves(h)) {
    auto result = h.forward_saving(inputs, attrs);
    if (!result && documented_refusal(h, inputs, result.error())) {
      ran.refusal = result.error().message;
      return ran;
    }
    REQUIRE_MESSAGE(result.has_value(), who << " forward_saving failed: " << (result ? std::string() : result.error().message));
    ran.output = std::move(result->output);
    ran.saved = std::move(result->saved);
  } else {
    REQUIRE_MESSAGE((h.forward != nullptr), who << " has no forward kernel");
    auto result = h.forward(inputs, attrs);
    if (!result && documented_refusal(h, inputs, result.error())) {
      ran.refusal = result.error().message;
      return ran;
    }
    REQUIRE_MESSAGE(result.has_value(), who << " forward failed: " << (result ? std::string() : result.error().message));
    ran.output = std::move(*result);
  }
  return ran;
}

std::vector<Tensor> run_backward(const HandlerSpec& h, const std::vector<Tensor>& inputs, const Ran& forward,
                                 const Tensor& grad, const OpAttrs& attrs, const std::string& who,
                                 std::string* refusal = nullptr) {
  REQUIRE_MESSAGE(h.has_backward(), who << " has no adjoint kernel");
  auto result = saves(h) ? h.backward_saved(inputs, forward.output, grad, attrs, forward.saved.get())
                         : h.backward(inputs, forward.output, grad, attrs);
  if (!result && refusal != nullptr && documented_refusal(h, inputs, result.error())) {
    *refusal = result.error().message;
    return {};
  }
  REQUIRE_MESSAGE(result.has_value(), who << " backward failed: " << (result ? std::string() : result.error().message));
  REQUIRE_MESSAGE(result->size() == inputs.size(), who << " returned " << result->size() << " gradients for "
                                                       << inputs.size() << " inputs");
  return std::move(*result);
}

std::vector<Tensor> map(const std::vector<Tensor>& in, Tensor (*fn)(const Tensor&)) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(fn(t));
  return out;
}

Tensor zeros_like64(const Tensor& t) {
  auto z = Tensor::zeros(t.shape(), DType::F64);
  REQUIRE(z.has_value());
  return std::move(*z);
}

Tensor from64(const Shape& shape, const std::vector<double>& values) {
  auto t = Tensor::from_values(shape, DType::F64, values);
  REQUIRE(t.has_value());
  return std::move(*t);
}

/// Batch norm's magnitudes (the derivation above): for y, and for dx, dγ, dβ given g.
struct BatchNormBounds {
  Tensor y, dx, dgamma, dbeta;
};

BatchNormBounds batch_norm_bounds(const ParityCase& c, const Tensor& grad) {
  const Tensor& x = c.inputs[0];
  const std::int64_t n = x.dim(0), channels = x.dim(1);
  const std::int64_t spatial = channels == 0 || n == 0 ? 0 : x.numel() / (n * channels);
  const double eps = c.attrs.eps == 0.0 ? 1e-5 : c.attrs.eps;
  const std::vector<double> xv = x.to_vector();
  const std::vector<double> gv = grad.defined() ? grad.to_vector() : std::vector<double>(xv.size(), 0.0);
  const bool has_gamma = c.inputs.size() > 1 && c.inputs[1].defined();
  const bool has_beta = c.inputs.size() > 2 && c.inputs[2].defined();
  const std::vector<double> gammas = has_gamma ? c.inputs[1].to_vector() : std::vector<double>(static_cast<std::size_t>(channels), 1.0);
  const std::vector<double> betas = has_beta ? c.inputs[2].to_vector() : std::vector<double>(static_cast<std::size_t>(channels), 0.0);
  std::vector<double> y(xv.size()), dx(xv.size()), dgamma(static_cast<std::size_t>(channels)), dbeta(dgamma.size());
  const double r = static_cast<double>(n * spatial);
  for (std::int64_t ch = 0; ch < channels; ++ch) {
    const auto at_index = [&](std::int64_t b, std::int64_t s) { return static_cast<std::size_t>((b * channels + ch) * spatial + s); };
    double sum = 0, sum_sq = 0;
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t s = 0; s < spatial; ++s) {
        sum += xv[at_index(b, s)];
        sum_sq += xv[at_index(b, s)] * xv[at_index(b, s)];
      }
    }
    const double mean = sum / r;
    const double var = std::max(0.0, sum_sq / r - mean * mean);
    const double invstd = 1.0 / std::sqrt(var + eps);
    const double kappa = std::max(1.0, (sum_sq / r) / (var + eps));
    const std::size_t cu = static_cast<std::size_t>(ch);
    const double g_abs = std::fabs(gammas[cu]);
    double mean_g = 0, mean_gxhat = 0;
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t s = 0; s < spatial; ++s) {
        const std::size_t i = at_index(b, s);
        const double xhat = std::fabs((xv[i] - mean) * invstd);
        mean_g += std::fabs(gv[i]) / r;
        mean_gxhat += std::fabs(gv[i]) * (1.0 + xhat) / r;
      }
    }
    for (std::int64_t b = 0; b < n; ++b) {
      for (std::int64_t s = 0; s < spatial; ++s) {
        const std::size_t i = at_index(b, s);
        const double xhat = std::fabs((xv[i] - mean) * invstd);
        y[i] = kappa * (g_abs * (1.0 + xhat) + std::fabs(betas[cu]));
        dx[i] = kappa * g_abs * invstd * (std::fabs(gv[i]) + mean_g + (1.0 + xhat) * mean_gxhat);
      }
    }
    dgamma[cu] = kappa * mean_gxhat * r;
    dbeta[cu] = mean_g * r;
  }
  BatchNormBounds bounds;
  bounds.y = from64(x.shape(), y);
  bounds.dx = from64(x.shape(), dx);
  auto channel_shape = Shape::make({channels});
  REQUIRE(channel_shape.has_value());
  bounds.dgamma = from64(*channel_shape, dgamma);
  bounds.dbeta = from64(*channel_shape, dbeta);
  return bounds;
}

double factor(const ParityCase& c) {
  const double u = unit_roundoff(c.inputs[0].dtype());
  return (c.bound == Bound::BatchNorm ? kBatchNormC : kMultilinearC) * (c.terms + 2.0) * u;
}

/// The host "transfer": a fresh copy each way, so a handler under test that wrote into its
/// inputs is caught as it would be on the device.
Tensor host_copy(const Tensor& t) {
  if (!t.defined()) return t;
  auto copy = t.clone();
  REQUIRE_MESSAGE(copy.has_value(), (copy ? std::string() : copy.error().message));
  return std::move(*copy);
}

std::vector<Tensor> upload_all(const std::vector<Tensor>& host, const Transfer& transfer) {
  std::vector<Tensor> out;
  for (const Tensor& t : host) out.push_back(transfer.upload(t));
  return out;
}

/// The copies the handler read still hold the host inputs' bytes.
void check_unchanged(const ParityCase& c, const std::vector<Tensor>& host, const std::vector<Tensor>& device,
                     const Transfer& transfer, const char* after) {
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (!host[i].defined()) continue;
    const bool unchanged = same_bytes(transfer.download(device[i]), host[i]);
    CHECK_MESSAGE(unchanged, c.label << ": input " << i << " changed on the device after the " << after);
  }
}

std::string who(const HandlerSpec& h) { return str("`", h.name, "`"); }

}  // namespace

Transfer cuda_transfer() { return Transfer{&upload, &download, Device::Cuda}; }
Transfer host_transfer() { return Transfer{&host_copy, &host_copy, Device::Cpu}; }

ForwardBound forward_bound(const ParityCase& c) {
  const HandlerSpec& ref = reference_handler(c.op);
  if (c.bound == Bound::MaxPool) {
    const Ran want = run_forward(ref, c.inputs, c.attrs, false, "the reference");
    return {zeros_like64(want.output), 0.0};  // exact
  }
  if (c.bound == Bound::BatchNorm) return {batch_norm_bounds(c, Tensor()).y, factor(c)};
  return {abs64(run_forward(ref, map(c.inputs, abs64), c.attrs, false, "the reference on |inputs|").output), factor(c)};
}

void check_forward(const HandlerSpec& handler, const ParityCase& c, const Transfer& transfer) {
  const HandlerSpec& ref = reference_handler(c.op);
  const Ran want = run_forward(ref, c.inputs, c.attrs, false, "the reference");
  const std::vector<Tensor> device_inputs = upload_all(c.inputs, transfer);
  const Ran got_device = run_forward(handler, device_inputs, c.attrs, false, who(handler));
  if (!got_device.refusal.empty() && report_refusal(c.label, "forward", got_device.refusal)) return;
  CHECK_MESSAGE(got_device.output.device() == transfer.device, c.label << ": the output is not on the handler's device");
  const Tensor got = transfer.download(got_device.output);
  const ForwardBound bound = forward_bound(c);
  const Comparison cmp = compare(got, want.output, bound.magnitude, bound.factor);
  CHECK_MESSAGE(cmp.ok, c.label << ": forward: " << cmp.detail);
  check_unchanged(c, c.inputs, device_inputs, transfer, "forward");
}

void check_vjp(const HandlerSpec& handler, const ParityCase& c, const Transfer& transfer) {
  const HandlerSpec& ref = reference_handler(c.op);
  const Ran ref_forward = run_forward(ref, c.inputs, c.attrs, true, "the reference");
  const Tensor grad = random(ref_forward.output.shape().to_vector(), ref_forward.output.dtype(), 0xC0FFEE + c.label.size());
  const std::vector<Tensor> want = run_backward(ref, c.inputs, ref_forward, grad, c.attrs, "the reference");

  const std::vector<Tensor> device_inputs = upload_all(c.inputs, transfer);
  const Tensor device_grad = transfer.upload(grad);
  const Ran forward = run_forward(handler, device_inputs, c.attrs, true, who(handler));
  if (!forward.refusal.empty() && report_refusal(c.label, "forward", forward.refusal)) return;
  std::string refusal;
  const std::vector<Tensor> got =
      run_backward(handler, device_inputs, forward, device_grad, c.attrs, who(handler), &refusal);
  if (!refusal.empty() && report_refusal(c.label, "backward", refusal)) return;

  std::vector<Tensor> magnitudes;
  if (c.bound == Bound::BatchNorm) {
    const BatchNormBounds b = batch_norm_bounds(c, grad);
    magnitudes = {b.dx, b.dgamma, b.dbeta};
    magnitudes.resize(c.inputs.size());
  } else {
    // max_pool routes |g| through the same argmax (same x); the multilinear ops take |x| too.
    const std::vector<Tensor> x = c.bound == Bound::MaxPool ? map(c.inputs, as64) : map(c.inputs, abs64);
    const Ran at = run_forward(ref, x, c.attrs, true, "the reference on |inputs|");
    magnitudes = map(run_backward(ref, x, at, abs64(grad), c.attrs, "the reference on |inputs|"), abs64);
  }
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor host = got[i].defined() ? transfer.download(got[i]) : Tensor();
    const Tensor& magnitude = magnitudes[i];
    const Comparison cmp = host.defined() && want[i].defined() && magnitude.defined()
                               ? compare(host, want[i], magnitude, factor(c))
                               : compare(host, want[i], Tensor(), 0.0);  // only when one is undefined
    CHECK_MESSAGE(cmp.ok, c.label << ": gradient of input " << i << ": " << cmp.detail);
  }
  check_unchanged(c, c.inputs, device_inputs, transfer, "backward");
  CHECK_MESSAGE(same_bytes(transfer.download(device_grad), grad), c.label << ": the output gradient changed on the device");
}

// ---------------------------------------------------------------------------------------------
// The cases.

namespace {

using Dims = std::vector<std::int64_t>;

std::int64_t product(const Dims& d) { return std::accumulate(d.begin(), d.end(), std::int64_t{1}, std::multiplies<>()); }

std::string dims_text(const Dims& d) {
  std::string out = "[";
  for (std::size_t i = 0; i < d.size(); ++i) out += str(i == 0 ? "" : ",", d[i]);
  return out + "]";
}

std::string label(Op op, DType dtype, const std::vector<Dims>& shapes, const std::string& extra = "") {
  std::string out = str(to_string(op), " ", to_string(dtype));
  for (const Dims& d : shapes) out += " " + dims_text(d);
  return extra.empty() ? out : out + " " + extra;
}

/// Spatial output size of a convolution or pool along one dim.
std::int64_t conv_out(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

std::int64_t at_or(const Dims& v, std::size_t i, std::int64_t fallback) { return i < v.size() ? v[i] : fallback; }

void add_products(std::vector<ParityCase>& out, Op op, DType dtype, double alpha) {
  // {a dims, b dims}: plain, 1x1, batched, batched rank 4, k = 0, an empty batch, m = 0, larger.
  const std::vector<std::pair<Dims, Dims>> shapes = {
      {{3, 4}, {4, 5}},          {{1, 1}, {1, 1}},   {{2, 3, 4}, {2, 4, 5}}, {{2, 2, 17, 33}, {2, 2, 33, 9}},
      {{4, 0}, {0, 3}},          {{0, 3, 4}, {0, 4, 5}}, {{0, 4}, {4, 3}},    {{64, 130}, {130, 70}}};
  std::uint64_t seed = 1;
  for (const auto& [a, b] : shapes) {
    ParityCase c;
    c.op = op;
    c.label = label(op, dtype, {a, b}, op == Op::ScaledMatmul ? str("alpha ", alpha) : "");
    c.inputs = {random(a, dtype, seed++), random(b, dtype, seed++)};
    c.attrs.alpha = alpha;
    const std::int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
    c.terms = static_cast<double>(std::max({k, m, n}));  // out sums k; da sums n; db sums m
    out.push_back(std::move(c));
  }
}

void add_linear(std::vector<ParityCase>& out, DType dtype) {
  struct Shape3 {
    Dims x, w;
    bool bias;
  };
  const std::vector<Shape3> shapes = {{{5, 7}, {3, 7}, true},    {{2, 3, 7}, {4, 7}, true}, {{6, 7}, {3, 7}, false},
                                      {{4, 0}, {3, 0}, true},    {{0, 7}, {3, 7}, true},    {{2, 0, 7}, {3, 7}, true},
                                      {{33, 65}, {17, 65}, true}};
  std::uint64_t seed = 100;
  for (const Shape3& s : shapes) {
    ParityCase c;
    c.op = Op::Linear;
    const Dims b{s.w[0]};
    c.label = label(Op::Linear, dtype, s.bias ? std::vector<Dims>{s.x, s.w, b} : std::vector<Dims>{s.x, s.w},
                    s.bias ? "" : "no bias");
    c.inputs = {random(s.x, dtype, seed++), random(s.w, dtype, seed++)};
    if (s.bias) c.inputs.push_back(random(b, dtype, seed++));
    const std::int64_t in = s.w[1], outs = s.w[0], rows = product(Dims(s.x.begin(), s.x.end() - 1));
    // y sums in products and the bias; dx sums out; dw and db sum rows.
    c.terms = static_cast<double>(std::max({in + 1, outs, rows}));
    out.push_back(std::move(c));
  }
}

struct ConvShape {
  Dims x, w;
  bool bias;
  Dims stride, padding, dilation, output_padding;
  std::int64_t groups = 1;
};

void add_convs(std::vector<ParityCase>& out, Op op, DType dtype) {
  const bool transpose = op == Op::ConvTranspose;
  std::vector<ConvShape> shapes;
  if (!transpose) {
    shapes = {{{2, 3, 9}, {4, 3, 3}, true, {2}, {1}, {}, {}, 1},
              {{2, 4, 7, 6}, {6, 2, 3, 3}, true, {1, 1}, {1, 1}, {2, 1}, {}, 2},
              {{1, 3, 5, 5}, {2, 3, 1, 1}, false, {}, {}, {}, {}, 1},
              {{0, 3, 5, 5}, {2, 3, 3, 3}, true, {}, {}, {}, {}, 1}};
  } else {
    shapes = {{{2, 4, 5, 5}, {4, 3, 3, 3}, true, {2, 2}, {1, 1}, {}, {1, 1}, 1},
              {{1, 4, 6}, {4, 2, 3}, true, {1}, {}, {}, {}, 2},
              {{0, 2, 4, 4}, {2, 3, 2, 2}, false, {}, {}, {}, {}, 1}};
  }
  std::uint64_t seed = transpose ? 300 : 200;
  for (const ConvShape& s : shapes) {
    ParityCase c;
    c.op = op;
    const std::size_t spatial = s.x.size() - 2;
    const std::int64_t n = s.x[0], channels = s.x[1];
    const Dims kernel(s.w.begin() + 2, s.w.end());
    const std::int64_t outs = transpose ? s.w[1] * s.groups : s.w[0];
    Dims in_spatial(s.x.begin() + 2, s.x.end()), out_spatial;
    for (std::size_t i = 0; i < spatial; ++i) {
      const std::int64_t st = at_or(s.stride, i, 1), p = at_or(s.padding, i, 0), d = at_or(s.dilation, i, 1);
      out_spatial.push_back(transpose ? (in_spatial[i] - 1) * st - 2 * p + d * (kernel[i] - 1) + at_or(s.output_padding, i, 0) + 1
                                      : conv_out(in_spatial[i], kernel[i], st, p, d));
    }
    const Dims b{outs};
    c.label = label(op, dtype, s.bias ? std::vector<Dims>{s.x, s.w, b} : std::vector<Dims>{s.x, s.w},
                    str("stride ", dims_text(s.stride), " padding ", dims_text(s.padding), " dilation ",
                        dims_text(s.dilation), transpose ? str(" output_padding ", dims_text(s.output_padding)) : "",
                        " groups ", s.groups));
    c.inputs = {random(s.x, dtype, seed++), random(s.w, dtype, seed++)};
    if (s.bias) c.inputs.push_back(random(b, dtype, seed++));
    c.attrs.stride = s.stride;
    c.attrs.padding = s.padding;
    c.attrs.dilation = s.dilation;
    c.attrs.output_padding = s.output_padding;
    c.attrs.groups = s.groups;
    const std::int64_t k = product(kernel);
    // conv: y sums (c/groups)·k products and the bias; dx sums (o/groups)·k; dw and db sum
    // n·prod(out spatial). conv_transpose: y sums (c/groups)·k and the bias; dx sums
    // (o/groups)·k; dw sums n·prod(in spatial); db n·prod(out spatial).
    c.terms = static_cast<double>(std::max({channels / s.groups * k + 1, outs / s.groups * k,
                                            n * product(out_spatial), n * product(in_spatial)}));
    out.push_back(std::move(c));
  }
}

void add_pools(std::vector<ParityCase>& out, Op op, DType dtype) {
  struct PoolShape {
    Dims x, kernel, stride, padding;
  };
  const std::vector<PoolShape> shapes = {{{2, 3, 7, 8}, {3, 2}, {2, 2}, {1, 0}},
                                         {{2, 2, 9}, {3}, {1}, {}},
                                         {{1, 2, 6, 6}, {2, 2}, {}, {}},
                                         {{0, 3, 4, 4}, {2, 2}, {}, {}}};
  std::uint64_t seed = op == Op::MaxPool ? 400 : 500;
  for (const PoolShape& s : shapes) {
    ParityCase c;
    c.op = op;
    c.label = label(op, dtype, {s.x}, str("kernel ", dims_text(s.kernel), " stride ", dims_text(s.stride), " padding ",
                                           dims_text(s.padding)));
    c.inputs = {op == Op::MaxPool ? distinct(s.x, dtype, seed++) : random(s.x, dtype, seed++)};
    c.attrs.kernel = s.kernel;
    c.attrs.stride = s.stride;
    c.attrs.padding = s.padding;
    c.bound = op == Op::MaxPool ? Bound::MaxPool : Bound::Multilinear;
    // max_pool: an input element is selected by at most prod(kernel) windows; avg_pool sums
    // prod(kernel) elements, then divides (one more rounding), and its gradient likewise.
    c.terms = static_cast<double>(product(s.kernel) + (op == Op::AvgPool ? 1 : 0));
    out.push_back(std::move(c));
  }
}

void add_batch_norms(std::vector<ParityCase>& out, DType dtype) {
  struct NormShape {
    Dims x;
    bool affine;
  };
  const std::vector<NormShape> shapes = {{{4, 3, 5}, true}, {{2, 3, 4, 4}, true}, {{8, 2}, true}, {{3, 2, 6}, false}};
  std::uint64_t seed = 600;
  for (const NormShape& s : shapes) {
    ParityCase c;
    c.op = Op::BatchNorm;
    const Dims channel{s.x[1]};
    c.label = label(Op::BatchNorm, dtype, s.affine ? std::vector<Dims>{s.x, channel, channel} : std::vector<Dims>{s.x},
                    s.affine ? "" : "no gamma or beta");
    c.inputs = {random(s.x, dtype, seed++)};
    if (s.affine) {
      c.inputs.push_back(random(channel, dtype, seed++, 0.5, 1.5));
      c.inputs.push_back(random(channel, dtype, seed++));
    }
    c.bound = Bound::BatchNorm;
    c.terms = static_cast<double>(product(s.x) / s.x[1]);  // n·spatial per channel
    out.push_back(std::move(c));
  }
}

}  // namespace

std::vector<ParityCase> parity_cases(Op op) {
  std::vector<ParityCase> out;
  for (const DType dtype : {DType::F32, DType::F64}) {
    switch (op) {
      case Op::Matmul: add_products(out, op, dtype, 1.0); break;
      case Op::ScaledMatmul:
        add_products(out, op, dtype, -1.75);
        add_products(out, op, dtype, 0.3);
        break;
      case Op::Linear: add_linear(out, dtype); break;
      case Op::Conv:
      case Op::ConvTranspose: add_convs(out, op, dtype); break;
      case Op::MaxPool:
      case Op::AvgPool: add_pools(out, op, dtype); break;
      case Op::BatchNorm: add_batch_norms(out, dtype); break;
      default: FAIL("no parity cases for " << to_string(op));
    }
  }
  return out;
}

}  // namespace capsule::gpu_test
