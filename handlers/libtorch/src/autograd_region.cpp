// SPDX-License-Identifier: Apache-2.0
// External autograd for the LibTorch CPU handlers: the `forward_autograd` of every op that has a
// region formula below, and the boundary that owns its backward (docs/libtorch.md, "External
// autograd"). The region is the one op of the call (the engine's boundary is per call). Inputs are
// from_blob views of our storage; those the engine says need a gradient (never a mask or index:
// input_takes_gradient) are marked requires_grad; the op runs under grad mode ON through ATen's
// functional ops (the `*_out` variants the plain forwards use are not differentiable), with the
// same semantics fixes as the plain forward, built from ATen ops so their gradient is right too.
// The result's storage is adopted without a copy (Storage::adopt; the context keeps a detached
// ATen tensor alive, so our tensor never keeps the graph alive). The boundary keeps the graph
// until its one VJP (torch::autograd::grad, allow_unused) or its destruction at clear_tape.
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/div.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/le.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/max_pool2d_with_indices.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/threshold.h>
#include <ATen/ops/where.h>

#include <ATen/core/Reduction.h>
// The lightest header that declares torch::autograd::grad (it includes only autograd/variable.h);
// never <torch/torch.h>.
#include <torch/csrc/autograd/autograd.h>

#include <array>
#include <atomic>
#include <memory>

#include "autograd_formulas_norm_index.hpp"
#include "autograd_formulas_attention.hpp"
#include "boundary.hpp"
#include "pointwise_semantics.hpp"
#include "windows.hpp"

namespace capsule::libtorch {
namespace {

std::atomic<std::int64_t>& live_regions() {
  static std::atomic<std::int64_t> count{0};
  return count;
}

template <class Body>
auto aten_call(Op op, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const c10::Error& e) {
    return aten_failure(to_string(op), e.what_without_backtrace());
  } catch (const std::exception& e) {
    return aten_failure(to_string(op), e.what());
  }
}

// ---------------------------------------------------------------------------------------------
// The boundary: one recorded region and its single VJP.

class Region final : public AutogradBoundary {
 public:
  Region(Op op, DType dtype, at::Tensor output, std::vector<at::Tensor> tracked, std::vector<std::size_t> positions,
         std::size_t inputs)
      : op_(op), dtype_(dtype), device_(call_device()), output_(std::move(output)), tracked_(std::move(tracked)),
        positions_(std::move(positions)), inputs_(inputs) {
    live_regions().fetch_add(1);
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region() override { live_regions().fetch_sub(1); }

  RuntimeResult<std::vector<Tensor>> vjp(const Tensor& grad_output) override {
    if (!output_.defined()) {
      return runtime_error(RuntimeCode::GradientUnavailable,
                           str("LibTorch autograd region of `", to_string(op_),
                               "`: its VJP already ran and freed the recorded graph; run the forward again"));
    }
    // Taken out first: the graph is freed when this returns, whether or not the VJP succeeds.
    at::Tensor output = std::move(output_);
    output_ = at::Tensor();
    std::vector<at::Tensor> tracked = std::move(tracked_);
    tracked_.clear();
    const std::vector<std::int64_t> want = output.sizes().vec();
    if (!grad_output.defined() || grad_output.device() != device_ || grad_output.dtype() != dtype_ ||
        grad_output.shape().to_vector() != want) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str("LibTorch autograd region of `", to_string(op_), "`: the output gradient must be a ",
                               to_string(dtype_), " tensor on device `", to_string(device_),
                               "` of the output's shape"));
    }
    std::vector<Tensor> grads(inputs_);
    // No tracked input reached the output (for example an empty broadcast): nothing flows back,
    // and the engine gives each tracked input a zero gradient.
    if (!output.requires_grad()) return grads;
    return aten_call(op_, [&]() -> RuntimeResult<std::vector<Tensor>> {
      const at::Tensor g = fresh_view_input(grad_output);
      const std::vector<at::Tensor> computed =
          torch::autograd::grad({output}, tracked, {g}, /*retain_graph=*/false, /*create_graph=*/false,
                                /*allow_unused=*/true);
      std::vector<at::Tensor> borrowed = tracked;
      borrowed.push_back(g);
      for (std::size_t k = 0; k < computed.size() && k < positions_.size(); ++k) {
        // Undefined: the region did not use that input; the engine turns it into zeros.
        if (!computed[k].defined()) continue;
        CAPSULE_TRY(grads[positions_[k]], adopt_out(op_, computed[k], dtype_, borrowed));
      }
      return grads;
    });
  }

 private:
  Op op_;
  DType dtype_;
  Device device_;  ///< the forward's device: the VJP runs there too (libtorch_cuda.cpp sets its scope)
  at::Tensor output_;                 ///< carries the recorded graph (grad_fn) until the VJP
  std::vector<at::Tensor> tracked_;   ///< the leaves that require grad
  std::vector<std::size_t> positions_;  ///< input index of each tracked leaf
  std::size_t inputs_;
};

// ---------------------------------------------------------------------------------------------
// Checks before the call: the same contracts as the plain forwards (equal shapes instead of
// ATen's implicit broadcasting, ranks, payload lists, empty losses). ATen checks the rest.

/// The reduced dims (empty axes = all), distinct.
RuntimeResult<std::vector<std::int64_t>> reduced_dims(Op op, const OpAttrs& attrs, std::size_t rank) {
  std::vector<bool> reduced(rank, attrs.axes.empty());
  for (const std::int64_t a : attrs.axes) {
    CAPSULE_TRY(std::size_t axis, normalize_axis(to_string(op), a, rank));
    if (reduced[axis]) {
      return runtime_error(RuntimeCode::InvalidArgument, str(to_string(op), ": axis ", a, " is listed twice"));
    }
    reduced[axis] = true;
  }
  std::vector<std::int64_t> dims;
  for (std::size_t d = 0; d < rank; ++d) {
    if (reduced[d]) dims.push_back(static_cast<std::int64_t>(d));
  }
  return dims;
}

RuntimeStatus check_region(Op op, Inputs inputs, const OpAttrs& attrs) {
  if (has_norm_index_formula(op)) return check_norm_index_region(op, inputs, attrs);
  const std::string name(to_string(op));
  switch (op) {
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Max:
    case Op::Min:
      CAPSULE_CHECK(expect_inputs(name, inputs, 2, 2));
      return expect_same_shape(name, inputs[0], inputs[1]);
    case Op::Matmul: {
      CAPSULE_CHECK(expect_inputs(name, inputs, 2, 2));
      const Tensor& a = inputs[0];
      const Tensor& b = inputs[1];
      bool fits = a.rank() >= 2 && a.rank() == b.rank() && a.dim(a.rank() - 1) == b.dim(b.rank() - 2);
      for (std::size_t d = 0; fits && d + 2 < a.rank(); ++d) fits = a.dim(d) == b.dim(d);
      if (!fits) {
        return shape_error(op, str("operands have shapes ", to_string(a.shape()), " and ", to_string(b.shape()),
                                   "; expected [.., m, k] and [.., k, n] with equal leading dims"));
      }
      return std::monostate{};
    }
    case Op::Linear: {
      CAPSULE_CHECK(expect_inputs(name, inputs, 2, 3));
      const Tensor& x = inputs[0];
      const Tensor& w = inputs[1];
      if (x.rank() < 1 || w.rank() != 2 || x.dim(x.rank() - 1) != w.dim(1)) {
        return shape_error(op, str("x has shape ", to_string(x.shape()), " and w ", to_string(w.shape()),
                                   "; expected x [.., in] and w [out, in]"));
      }
      if (has_input(inputs, 2) && (inputs[2].rank() != 1 || inputs[2].dim(0) != w.dim(0))) {
        return shape_error(op, str("bias has shape ", to_string(inputs[2].shape()), "; expected [", w.dim(0), "]"));
      }
      return std::monostate{};
    }
    case Op::MseLoss:
    case Op::CrossEntropy:
      CAPSULE_CHECK(expect_inputs(name, inputs, 2, 2));
      CAPSULE_CHECK(expect_same_shape(name, inputs[0], inputs[1]));
      if (op == Op::CrossEntropy && inputs[0].rank() != 2) {
        return shape_error(op, str("logits have shape ", to_string(inputs[0].shape()), "; expected [n, c]"));
      }
      if (inputs[0].numel() == 0) {
        return runtime_error(RuntimeCode::InvalidArgument, str(name, ": inputs of shape ", to_string(inputs[0].shape()),
                                                               " are empty; the mean of no terms is undefined"));
      }
      return std::monostate{};
    case Op::Conv:
    case Op::ConvTranspose: {
      Window win;
      CAPSULE_CHECK(conv_window(win, op, inputs, attrs));
      return std::monostate{};
    }
    case Op::MaxPool:
    case Op::AvgPool:
    case Op::SmoothMaxPool: {
      Window win;
      CAPSULE_CHECK(pool_window(win, op, inputs, attrs));
      return std::monostate{};
    }
    case Op::Softmax:
    case Op::LogSoftmax: {
      CAPSULE_CHECK(expect_inputs(name, inputs, 1, 1));
      CAPSULE_TRY(std::size_t axis, normalize_axis(name, attrs.axis, inputs[0].rank()));
      (void)axis;
      return std::monostate{};
    }
    case Op::ReduceSum:
    case Op::ReduceMean: {
      CAPSULE_CHECK(expect_inputs(name, inputs, 1, 1));
      CAPSULE_TRY(std::vector<std::int64_t> dims, reduced_dims(op, attrs, inputs[0].rank()));
      (void)dims;
      return std::monostate{};
    }
    case Op::Reshape: {
      CAPSULE_CHECK(expect_inputs(name, inputs, 1, 1));
      std::size_t wildcards = 0;
      for (const std::int64_t d : attrs.shape) {
        if (d < -1) return shape_error(op, str("target dim ", d, " is negative"));
        wildcards += d == -1 ? 1 : 0;
      }
      if (wildcards > 1) return shape_error(op, str("target ", quoted_dims(attrs.shape), " has more than one -1"));
      return std::monostate{};  // ATen's reshape checks the element count
    }
    case Op::Permute: {
      CAPSULE_CHECK(expect_inputs(name, inputs, 1, 1));
      std::vector<bool> seen(inputs[0].rank(), false);
      if (attrs.axes.size() != inputs[0].rank()) {
        return runtime_error(RuntimeCode::InvalidArgument,
                             str("permute: axes has ", attrs.axes.size(), " entries; expected ", inputs[0].rank()));
      }
      for (const std::int64_t a : attrs.axes) {
        CAPSULE_TRY(std::size_t axis, normalize_axis(name, a, inputs[0].rank()));
        if (seen[axis]) return runtime_error(RuntimeCode::InvalidArgument, str("permute: axis ", a, " is repeated"));
        seen[axis] = true;
      }
      return std::monostate{};
    }
    case Op::Broadcast: {
      CAPSULE_CHECK(expect_inputs(name, inputs, 1, 1));
      const Tensor& x = inputs[0];
      bool fits = x.rank() <= attrs.shape.size();
      for (std::size_t d = 0; fits && d < x.rank(); ++d) {
        const std::int64_t target = attrs.shape[attrs.shape.size() - x.rank() + d];
        fits = x.dim(d) == 1 || x.dim(d) == target;
      }
      for (const std::int64_t t : attrs.shape) fits = fits && t >= 0;
      if (!fits) return shape_error(op, str("cannot broadcast ", to_string(x.shape()), " to ", quoted_dims(attrs.shape)));
      return std::monostate{};
    }
    case Op::HardMaskedSoftmax:
    case Op::SoftmaxMatmul:
    case Op::ScaledDotProductAttention: return check_attention_region(op, inputs, attrs);
    default:
      CAPSULE_CHECK(expect_inputs(name, inputs, 1, 1));  // the unary elementwise ops
      return check_unary_payload(op, attrs);  // scale's alpha, clamp's bounds, safe_log's eps
  }
}

// ---------------------------------------------------------------------------------------------
// The region formulas: ATen's functional ops, with the plain forwards' semantics fixes.

/// max/min select `a` when a is NaN or a >= b (a <= b for min); the gradient routes by the mask.
at::Tensor selects_a(Op op, const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ordered = op == Op::Max ? at::ge(a, b) : at::le(a, b);
  return at::logical_or(at::isnan(a), ordered);
}

/// abs: |x|, with the reference's abs′(±0) = +0 whatever g holds: `where` sends exactly 0 there,
/// where autograd's g·sgn(0) would be NaN for an infinite or NaN g. At NaN autograd's
/// g·sgn(NaN) = g·(+0) stays (a documented difference).
at::Tensor abs_region(const at::Tensor& x) {
  return at::where(at::eq(x.detach(), 0), at::scalar_tensor(0.0, x.options()), at::abs(x));
}

/// `x` with the reference's "slope at NaN is NaN": the same value (x·1, and NaN where x is NaN),
/// while autograd's gradient through it is g·1 = g, and g·NaN = NaN where x is NaN. The factor is
/// a detached constant, finite wherever x is not NaN (so an infinite x keeps its slope). Used where
/// a selection's chain would pass g (clamp) at NaN.
at::Tensor with_nan_slope(const at::Tensor& x) {
  const at::Tensor detached = x.detach();
  return at::mul(x, at::where(at::isnan(detached), detached, at::scalar_tensor(1.0, detached.options())));
}

/// clamp: min(max(x, lo), hi) selected explicitly as the plain forward (ties keep x, NaN stays
/// NaN). `where` routes g to x on lo <= x <= hi (both bounds pass, as the reference) and exactly 0
/// elsewhere, whatever g holds; with_nan_slope makes the slope at NaN NaN.
at::Tensor clamp_region(const at::Tensor& input, const OpAttrs& attrs) {
  const at::Tensor x = with_nan_slope(input);
  const at::Tensor lo = at::scalar_tensor(payload_scalar(attrs.lo, x), x.options());
  const at::Tensor hi = at::scalar_tensor(payload_scalar(attrs.hi, x), x.options());
  const at::Tensor low = at::where(at::lt(x, lo), lo, x);
  return at::where(at::lt(hi, low), hi, low);
}

/// safe_log: log(x < eps ? eps : x). `where` sends exactly 0 to x below eps; at x = eps and above
/// log's gradient g/x (the right-hand derivative at eps); NaN selects x, so its slope g/NaN = NaN.
at::Tensor safe_log_region(const at::Tensor& x, const OpAttrs& attrs) {
  const at::Tensor eps = at::scalar_tensor(safe_log_eps(attrs, x), x.options());
  return at::log(at::where(at::lt(x, eps), eps, x));
}

/// The tensor autograd differentiates in place of the formula's output, for the ops whose adjoint
/// multiplies g once by a derivative made of several terms: gelu (Φ + x·φ), silu
/// (σ·(1 + x·(1 − σ))), softplus (σ) and cross_entropy (softmax(z)·Σt − t, and −log_softmax(z)).
/// Autograd's chain rule through the formula multiplies g into each term and then sums, so an
/// infinite g gives inf − inf = NaN wherever the terms have opposite signs (gelu, silu at x < 0;
/// softplus's x + log1p(e^−x); cross_entropy's log_softmax backward −t·g − p·Σ(−t·g)) and inf·0 =
/// NaN where a factor is 0 (x = 0, an underflowed e^−|x|, a zero target), while the reference's
/// single product is ±inf. The root is each input times its derivative factor, detached and
/// formed as the adjoint kernel forms it (pointwise_semantics.hpp, kernels_nn.cpp), so autograd's
/// gradient is that one product: the adjoint kernel's bits. The output is the formula's value, on
/// detached inputs. Undefined for every other op: autograd differentiates the output itself.
at::Tensor linearised_root(Op op, const std::vector<at::Tensor>& in, Inputs ours) {
  switch (op) {
    case Op::Gelu: return at::mul(in[0], gelu_slope(in[0].detach()));
    case Op::Silu: return at::mul(in[0], silu_slope(in[0].detach()));
    case Op::Softplus: return at::mul(in[0], stable_sigmoid(in[0].detach()));
    case Op::CrossEntropy: {
      // d/dz = (softmax(z)·Σ_j t_j − t)·g/n, d/dt = −log_softmax(z)·g/n: the division by n is the
      // root's, so autograd forms g/n first, as the adjoint kernel does.
      const at::Tensor z = in[0].detach();
      const at::Tensor t = in[1].detach();
      const at::Tensor dz = at::sub(at::mul(at::_softmax(z, 1, false), at::sum(t, {1}, true)), t);
      const at::Tensor dt = at::neg(at::log_softmax(z, 1));
      const auto rows = static_cast<double>(ours[0].dim(0));
      return at::div(at::add(at::sum(at::mul(in[0], dz)), at::sum(at::mul(in[1], dt))), rows);
    }
    default: return {};
  }
}

/// The op on ATen tensors (inputs already checked). Views (reshape, permute, expand) are returned
/// as they are; adopt_out copies them into storage of their own.
RuntimeResult<at::Tensor> region_formula(Op op, const std::vector<at::Tensor>& in, Inputs ours, const OpAttrs& attrs) {
  if (has_norm_index_formula(op)) return norm_index_formula(op, in, ours, attrs);  // autograd_formulas_norm_index.cpp
  switch (op) {
    case Op::Add: return at::add(in[0], in[1]);
    case Op::Sub: return at::sub(in[0], in[1]);
    case Op::Mul: return at::mul(in[0], in[1]);
    case Op::Div: return at::div(in[0], in[1]);
    case Op::Max:
    case Op::Min: return at::where(selects_a(op, in[0], in[1]), in[0], in[1]);
    case Op::Neg: return at::neg(in[0]);
    case Op::Abs: return abs_region(in[0]);
    case Op::Sqrt: return at::sqrt(in[0]);
    case Op::Relu: return at::threshold(in[0], 0, 0);  // x <= 0 gives +0, NaN kept
    case Op::Gelu: return at::mul(in[0], normal_cdf(in[0]));  // differentiated by linearised_root
    case Op::Sigmoid: return at::sigmoid(in[0]);
    case Op::Tanh: return at::tanh(in[0]);
    case Op::Exp: return at::exp(in[0]);
    case Op::Log: return at::log(in[0]);
    case Op::Sin: return at::sin(in[0]);
    case Op::Cos: return at::cos(in[0]);
    case Op::Inv: return at::reciprocal(in[0]);
    case Op::Scale: return at::mul(in[0], attrs.alpha);
    case Op::Clamp: return clamp_region(in[0], attrs);
    case Op::SafeLog: return safe_log_region(in[0], attrs);
    // The plain forwards' compositions; linearised_root gives their gradients.
    case Op::Softplus: return at::add(at::clamp_min(in[0], 0), at::log1p(at::exp(at::neg(at::abs(in[0])))));
    case Op::Silu: return at::mul(in[0], stable_sigmoid(in[0]));
    case Op::HardMaskedSoftmax:
    case Op::SoftmaxMatmul:
    case Op::ScaledDotProductAttention: return attention_region_formula(op, in, ours, attrs);
    case Op::Softmax:
    case Op::LogSoftmax: {
      CAPSULE_TRY(std::size_t axis, normalize_axis(to_string(op), attrs.axis, ours[0].rank()));
      const auto dim = static_cast<std::int64_t>(axis);
      return op == Op::Softmax ? at::_softmax(in[0], dim, false) : at::_log_softmax(in[0], dim, false);
    }
    case Op::ReduceSum:
    case Op::ReduceMean: {
      CAPSULE_TRY(std::vector<std::int64_t> dims, reduced_dims(op, attrs, ours[0].rank()));
      if (dims.empty()) {  // a rank-0 input: nothing to reduce; the copy lies inside the graph
        count_materialisation(op);
        return in[0].clone();
      }
      return op == Op::ReduceSum ? at::sum(in[0], dims, attrs.keepdim) : at::mean(in[0], dims, attrs.keepdim);
    }
    case Op::Matmul: return at::matmul(in[0], in[1]);
    case Op::Linear: {
      const Tensor& x = ours[0];
      std::vector<std::int64_t> dims = x.shape().to_vector();
      dims.back() = ours[1].dim(0);
      std::int64_t rows = 1;
      for (std::size_t d = 0; d + 1 < x.rank(); ++d) rows *= x.dim(d);
      const at::Tensor x2 = in[0].reshape({rows, x.dim(x.rank() - 1)});
      const at::Tensor y2 = has_input(ours, 2) ? at::addmm(in[2], x2, in[1].t()) : at::mm(x2, in[1].t());
      return y2.reshape(dims);
    }
    case Op::MseLoss: return at::mse_loss(in[0], in[1], at::Reduction::Mean);
    case Op::CrossEntropy: {
      // −Σ target·log_softmax(logits) / n, as the plain forward
      const auto rows = static_cast<double>(ours[0].dim(0));
      return at::div(at::neg(at::sum(at::mul(in[1], at::log_softmax(in[0], 1)))), rows);
    }
    case Op::Conv:
    case Op::ConvTranspose: {
      Window win;
      CAPSULE_CHECK(conv_window(win, op, ours, attrs));
      const at::Tensor bias = has_input(ours, 2) ? in[2] : at::Tensor();
      const at::Tensor y = at::convolution(as_2d(in[0], win.one_d), as_2d(in[1], win.one_d), bias, win.stride,
                                           win.padding, win.dilation, op == Op::ConvTranspose, win.output_padding,
                                           attrs.groups);
      return from_2d(y, win.one_d);
    }
    case Op::AvgPool: {
      // The reference's definition: floor mode, padding counted in the full-window divisor.
      Window win;
      CAPSULE_CHECK(pool_window(win, op, ours, attrs));
      return from_2d(at::avg_pool2d(as_2d(in[0], win.one_d), win.kernel, win.stride, win.padding, /*ceil_mode=*/false,
                                    /*count_include_pad=*/true, c10::nullopt),
                     win.one_d);
    }
    case Op::SmoothMaxPool: {
      // The shift is a constant of the formula (detached), so autograd's gradient is
      // g·exp((x − m)/T)/s, the reference's, and never flows through the window maximum.
      Window win;
      CAPSULE_CHECK(pool_window(win, op, ours, attrs));
      const at::Tensor windows = smooth_windows(as_2d(in[0], win.one_d), win);
      const at::Tensor shift = smooth_shift(windows).detach();
      const at::Tensor sums = at::sum(smooth_terms(windows, shift, attrs.temperature), {4, 5});
      return from_2d(at::add(shift.squeeze(5).squeeze(4), at::log(sums), attrs.temperature), win.one_d);
    }
    case Op::MaxPool: {
      Window win;
      CAPSULE_CHECK(pool_window(win, op, ours, attrs));
      auto [y, indices] = at::max_pool2d_with_indices(as_2d(in[0], win.one_d), win.kernel, win.stride, win.padding,
                                                      win.dilation, false);
      return from_2d(y, win.one_d);
    }
    case Op::Reshape: return in[0].reshape(attrs.shape);
    case Op::Permute: return in[0].permute(attrs.axes);
    case Op::Broadcast: return in[0].expand(attrs.shape);
    default:
      return runtime_error(RuntimeCode::InvalidArgument,
                           str("LibTorch ", to_string(op), ": no autograd region formula for this op"));
  }
}

/// The generic autograd forward; one instantiation per op so it fits AutogradForwardKernel.
template <Op kOp>
RuntimeResult<AutogradForwardResult> region_forward(Inputs inputs, const OpAttrs& attrs,
                                                    const std::vector<bool>& requires_grad) {
  CAPSULE_CHECK(check_region(kOp, inputs, attrs));
  if (requires_grad.size() != inputs.size()) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("LibTorch ", to_string(kOp), ": got ", requires_grad.size(), " requires_grad flags for ",
                             inputs.size(), " inputs; expected one per input"));
  }
  const DType dtype = inputs[0].dtype();
  return aten_call(kOp, [&]() -> RuntimeResult<AutogradForwardResult> {
    c10::AutoGradMode grad_mode(true);  // the region is recorded; plain forwards run with grad off
    std::vector<at::Tensor> in;
    std::vector<at::Tensor> tracked;
    std::vector<std::size_t> positions;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].defined()) {
        in.emplace_back();
        continue;
      }
      at::Tensor t = fresh_view_input(inputs[i]);  // its own: a leaf is marked requires_grad
      // Exactly the engine's flags, and never an input the op does not differentiate (a mask).
      if (requires_grad[i] && input_takes_gradient(kOp, i)) {
        t.requires_grad_(true);
        tracked.push_back(t);
        positions.push_back(i);
      }
      in.push_back(std::move(t));
    }
    // With a linearised root the value is computed off the graph, and the root is what autograd
    // differentiates; otherwise the output itself carries the graph.
    at::Tensor root = linearised_root(kOp, in, inputs);
    std::vector<at::Tensor> value_in = in;
    if (root.defined()) {
      for (at::Tensor& t : value_in) t = t.defined() ? t.detach() : t;
    }
    CAPSULE_TRY(at::Tensor output, region_formula(kOp, value_in, inputs, attrs));
    // Adopted (a view of borrowed memory copied once, counted): the graph below keeps `output` but
    // only reads what it saved, so nothing writes the adopted elements afterwards.
    CAPSULE_TRY(Tensor ours, adopt_out(kOp, output, dtype, in));
    AutogradForwardResult result;
    result.output = std::move(ours);
    result.boundary = std::make_unique<Region>(kOp, dtype, root.defined() ? std::move(root) : std::move(output),
                                               std::move(tracked), std::move(positions), inputs.size());
    return result;
  });
}

}  // namespace

AutogradForwardKernel autograd_forward_for(Op op) {
  switch (op) {
#define CAPSULE_LIBTORCH_REGION(OP) \
  case OP: return &region_forward<OP>;
    CAPSULE_LIBTORCH_REGION(Op::Add)
    CAPSULE_LIBTORCH_REGION(Op::Sub)
    CAPSULE_LIBTORCH_REGION(Op::Mul)
    CAPSULE_LIBTORCH_REGION(Op::Div)
    CAPSULE_LIBTORCH_REGION(Op::Max)
    CAPSULE_LIBTORCH_REGION(Op::Min)
    CAPSULE_LIBTORCH_REGION(Op::Neg)
    CAPSULE_LIBTORCH_REGION(Op::Abs)
    CAPSULE_LIBTORCH_REGION(Op::Sqrt)
    CAPSULE_LIBTORCH_REGION(Op::Relu)
    CAPSULE_LIBTORCH_REGION(Op::Gelu)
    CAPSULE_LIBTORCH_REGION(Op::Sigmoid)
    CAPSULE_LIBTORCH_REGION(Op::Tanh)
    CAPSULE_LIBTORCH_REGION(Op::Exp)
    CAPSULE_LIBTORCH_REGION(Op::Log)
    CAPSULE_LIBTORCH_REGION(Op::Sin)
    CAPSULE_LIBTORCH_REGION(Op::Cos)
    CAPSULE_LIBTORCH_REGION(Op::Inv)
    CAPSULE_LIBTORCH_REGION(Op::Scale)
    CAPSULE_LIBTORCH_REGION(Op::Softmax)
    CAPSULE_LIBTORCH_REGION(Op::LogSoftmax)
    CAPSULE_LIBTORCH_REGION(Op::ReduceSum)
    CAPSULE_LIBTORCH_REGION(Op::ReduceMean)
    CAPSULE_LIBTORCH_REGION(Op::Matmul)
    CAPSULE_LIBTORCH_REGION(Op::Linear)
    CAPSULE_LIBTORCH_REGION(Op::MseLoss)
    CAPSULE_LIBTORCH_REGION(Op::CrossEntropy)
    CAPSULE_LIBTORCH_REGION(Op::Conv)
    CAPSULE_LIBTORCH_REGION(Op::MaxPool)
    CAPSULE_LIBTORCH_REGION(Op::ConvTranspose)
    CAPSULE_LIBTORCH_REGION(Op::AvgPool)
    CAPSULE_LIBTORCH_REGION(Op::SmoothMaxPool)
    CAPSULE_LIBTORCH_REGION(Op::Reshape)
    CAPSULE_LIBTORCH_REGION(Op::Permute)
    CAPSULE_LIBTORCH_REGION(Op::Broadcast)
    CAPSULE_LIBTORCH_REGION(Op::LayerNorm)
    CAPSULE_LIBTORCH_REGION(Op::BatchNorm)
    CAPSULE_LIBTORCH_REGION(Op::Gather)
    CAPSULE_LIBTORCH_REGION(Op::ScatterAdd)
    CAPSULE_LIBTORCH_REGION(Op::Concat)
    CAPSULE_LIBTORCH_REGION(Op::Slice)
    CAPSULE_LIBTORCH_REGION(Op::ScaledMatmul)
    CAPSULE_LIBTORCH_REGION(Op::Clamp)
    CAPSULE_LIBTORCH_REGION(Op::SafeLog)
    CAPSULE_LIBTORCH_REGION(Op::Softplus)
    CAPSULE_LIBTORCH_REGION(Op::Silu)
    CAPSULE_LIBTORCH_REGION(Op::HardMaskedSoftmax)
    CAPSULE_LIBTORCH_REGION(Op::SoftmaxMatmul)
    CAPSULE_LIBTORCH_REGION(Op::ScaledDotProductAttention)
#undef CAPSULE_LIBTORCH_REGION
    default: return nullptr;
  }
}

}  // namespace capsule::libtorch

namespace capsule {

std::int64_t libtorch_live_autograd_regions() { return libtorch::live_regions().load(); }

}  // namespace capsule
