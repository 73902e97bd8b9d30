// SPDX-License-Identifier: Apache-2.0
// LibTorch kernels of the products, losses, windows (conv, max_pool) and shape ops, forward and
// local adjoint, with the conventions of capsule/runtime/op_args.hpp. View results of ATen
// (permute, expand, transpose) never leave a handler: they are copied into our contiguous
// outputs. Operand ranks and payload lists are checked here; ATen checks the rest and its
// message is reported as the handler's error.
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/avg_pool2d_backward.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/div.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/max_pool2d_with_indices.h>
#include <ATen/ops/max_pool2d_with_indices_backward.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/mse_loss_backward.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>

#include <ATen/core/Reduction.h>

#include <array>
#include <memory>
#include <numeric>
#include <span>

#include "boundary.hpp"
#include "windows.hpp"

namespace capsule::libtorch {
namespace {

// ---------------------------------------------------------------------------------------------
// matmul (a [.., m, k], b [.., k, n]) with equal leading dims.

RuntimeStatus expect_matmul(Inputs inputs) {
  CAPSULE_CHECK(expect_inputs("matmul", inputs, 2, 2));
  const Tensor& a = inputs[0];
  const Tensor& b = inputs[1];
  if (a.rank() < 2 || a.rank() != b.rank()) {
    return shape_error(Op::Matmul, str("operands have shapes ", to_string(a.shape()), " and ", to_string(b.shape()),
                                       "; expected equal ranks >= 2"));
  }
  bool same_batch = true;
  for (std::size_t d = 0; d + 2 < a.rank(); ++d) same_batch = same_batch && a.dim(d) == b.dim(d);
  if (!same_batch || a.dim(a.rank() - 1) != b.dim(b.rank() - 2)) {
    return shape_error(Op::Matmul, str("operands have shapes ", to_string(a.shape()), " and ", to_string(b.shape()),
                                       "; expected [.., m, k] and [.., k, n] with equal leading dims"));
  }
  return std::monostate{};
}

RuntimeResult<Tensor> matmul_forward(Inputs inputs, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_matmul(inputs));
  std::vector<std::int64_t> dims = inputs[0].shape().to_vector();
  dims.back() = inputs[1].dim(inputs[1].rank() - 1);
  return guarded("matmul", [&] {
    return write_new("matmul", dims, inputs[0].dtype(), [&](at::Tensor& out) {
      at::matmul_out(out, view_input(inputs[0]), view_input(inputs[1]));
    });
  });
}

Grads matmul_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_matmul(inputs));
  CAPSULE_CHECK(expect_grad("matmul", inputs, output, grad));
  return guarded("matmul", [&]() -> Grads {
    const at::Tensor a = view_input(inputs[0]);
    const at::Tensor b = view_input(inputs[1]);
    const at::Tensor g = view_input(grad);
    CAPSULE_TRY(Tensor ga, write_like("matmul", inputs[0], [&](at::Tensor& out) {
      at::matmul_out(out, g, last_two_swapped(b));
    }));
    CAPSULE_TRY(Tensor gb, write_like("matmul", inputs[1], [&](at::Tensor& out) {
      at::matmul_out(out, last_two_swapped(a), g);
    }));
    return std::vector<Tensor>{ga, gb};
  });
}

// ---------------------------------------------------------------------------------------------
// linear (x [.., in], w [out, in], b [out]?): x·wᵀ + b, computed on x viewed as [rows, in].

RuntimeStatus expect_linear(Inputs inputs) {
  CAPSULE_CHECK(expect_inputs("linear", inputs, 2, 3));
  const Tensor& x = inputs[0];
  const Tensor& w = inputs[1];
  if (x.rank() < 1 || w.rank() != 2 || x.dim(x.rank() - 1) != w.dim(1)) {
    return shape_error(Op::Linear, str("x has shape ", to_string(x.shape()), " and w ", to_string(w.shape()),
                                       "; expected x [.., in] and w [out, in]"));
  }
  if (has_input(inputs, 2) && (inputs[2].rank() != 1 || inputs[2].dim(0) != w.dim(0))) {
    return shape_error(Op::Linear, str("bias has shape ", to_string(inputs[2].shape()), "; expected [", w.dim(0), "]"));
  }
  return std::monostate{};
}

RuntimeResult<Tensor> linear_forward(Inputs inputs, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_linear(inputs));
  const Tensor& x = inputs[0];
  std::vector<std::int64_t> dims = x.shape().to_vector();
  dims.back() = inputs[1].dim(0);
  // rows of x: the product of its leading dims (computed from the dims, so in = 0 works).
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < x.rank(); ++d) rows *= x.dim(d);
  return guarded("linear", [&]() -> RuntimeResult<Tensor> {
    CAPSULE_TRY(Tensor out, new_tensor(dims, x.dtype()));
    at::Tensor out2 = view_output(out).view({rows, inputs[1].dim(0)});
    const at::Tensor x2 = view_input(x).view({rows, x.dim(x.rank() - 1)});
    const at::Tensor wt = view_input(inputs[1]).t();
    if (has_input(inputs, 2)) at::addmm_out(out2, view_input(inputs[2]), x2, wt);
    else at::mm_out(out2, x2, wt);
    CAPSULE_CHECK(expect_written("linear", out2.view(dims), out));
    return out;
  });
}

Grads linear_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_linear(inputs));
  CAPSULE_CHECK(expect_grad("linear", inputs, output, grad));
  const Tensor& x = inputs[0];
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < x.rank(); ++d) rows *= x.dim(d);
  const std::int64_t in = x.dim(x.rank() - 1);
  const std::int64_t outs = inputs[1].dim(0);
  return guarded("linear", [&]() -> Grads {
    const at::Tensor x2 = view_input(x).view({rows, in});
    const at::Tensor w = view_input(inputs[1]);
    const at::Tensor g2 = view_input(grad).view({rows, outs});
    CAPSULE_TRY(Tensor gx, write_like("linear", x, [&](at::Tensor& out) {
      at::Tensor out2 = out.view({rows, in});
      at::mm_out(out2, g2, w);
    }));
    CAPSULE_TRY(Tensor gw, write_like("linear", inputs[1], [&](at::Tensor& out) { at::mm_out(out, g2.t(), x2); }));
    std::vector<Tensor> grads{gx, gw};
    if (has_input(inputs, 2)) {
      CAPSULE_TRY(Tensor gb, write_like("linear", inputs[2], [&](at::Tensor& out) {
        at::sum_out(out, g2, {0}, false);
      }));
      grads.push_back(gb);
    } else if (inputs.size() == 3) {
      grads.emplace_back();
    }
    return grads;
  });
}

// ---------------------------------------------------------------------------------------------
// Losses: mse_loss (pred, target) and cross_entropy (logits [n, c], target [n, c]), both means;
// empty inputs are rejected (no 0/0), as the reference does.

RuntimeStatus expect_loss(Op op, Inputs inputs) {
  CAPSULE_CHECK(expect_inputs(to_string(op), inputs, 2, 2));
  CAPSULE_CHECK(expect_same_shape(to_string(op), inputs[0], inputs[1]));
  if (op == Op::CrossEntropy && inputs[0].rank() != 2) {
    return shape_error(op, str("logits have shape ", to_string(inputs[0].shape()), "; expected [n, c]"));
  }
  if (inputs[0].numel() == 0) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(to_string(op), ": inputs of shape ", to_string(inputs[0].shape()),
                             " are empty; the mean of no terms is undefined"));
  }
  return std::monostate{};
}

RuntimeResult<Tensor> mse_loss_forward(Inputs inputs, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_loss(Op::MseLoss, inputs));
  return guarded("mse_loss", [&] {
    // LibTorch 1.13's mse_loss_out resizes a reduced output to the input's shape first (and so
    // fails on our fixed buffer): the scalar is computed by ATen and copied into ours.
    return write_new("mse_loss", std::span<const std::int64_t>{}, inputs[0].dtype(), [&](at::Tensor& out) {
      copy_into(Op::MseLoss, out, at::mse_loss(view_input(inputs[0]), view_input(inputs[1]), at::Reduction::Mean));
    });
  });
}

Grads mse_loss_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_loss(Op::MseLoss, inputs));
  CAPSULE_CHECK(expect_grad("mse_loss", inputs, output, grad));
  return guarded("mse_loss", [&]() -> Grads {
    const at::Tensor p = view_input(inputs[0]);
    const at::Tensor t = view_input(inputs[1]);
    CAPSULE_TRY(Tensor gp, write_like("mse_loss", inputs[0], [&](at::Tensor& out) {
      at::mse_loss_backward_out(out, view_input(grad), p, t, at::Reduction::Mean);
    }));
    CAPSULE_TRY(Tensor gt, write_like("mse_loss", inputs[1], [&](at::Tensor& out) { at::neg_out(out, view_input(gp)); }));
    return std::vector<Tensor>{gp, gt};
  });
}

RuntimeResult<Tensor> cross_entropy_forward(Inputs inputs, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_loss(Op::CrossEntropy, inputs));
  const auto rows = static_cast<double>(inputs[0].dim(0));
  return guarded("cross_entropy", [&] {
    return write_new("cross_entropy", std::span<const std::int64_t>{}, inputs[0].dtype(), [&](at::Tensor& out) {
      // −Σ target·log_softmax(logits) / n (soft targets, as LibTorch's probability-target form)
      const at::Tensor terms = at::mul(view_input(inputs[1]), at::log_softmax(view_input(inputs[0]), 1));
      at::div_out(out, at::neg(at::sum(terms)), rows);
    });
  });
}

Grads cross_entropy_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_loss(Op::CrossEntropy, inputs));
  CAPSULE_CHECK(expect_grad("cross_entropy", inputs, output, grad));
  const auto rows = static_cast<double>(inputs[0].dim(0));
  return guarded("cross_entropy", [&]() -> Grads {
    const at::Tensor z = view_input(inputs[0]);
    const at::Tensor t = view_input(inputs[1]);
    const at::Tensor scale = at::div(view_input(grad), rows);
    // d/dz = (softmax(z)·Σ_j t_j − t)·g/n; d/dt = −log_softmax(z)·g/n
    CAPSULE_TRY(Tensor gz, write_like("cross_entropy", inputs[0], [&](at::Tensor& out) {
      const at::Tensor mass = at::sum(t, {1}, true);
      at::mul_out(out, at::sub(at::mul(at::softmax(z, 1), mass), t), scale);
    }));
    CAPSULE_TRY(Tensor gt, write_like("cross_entropy", inputs[1], [&](at::Tensor& out) {
      at::mul_out(out, at::neg(at::log_softmax(z, 1)), scale);
    }));
    return std::vector<Tensor>{gz, gt};
  });
}

// ---------------------------------------------------------------------------------------------
// Windows: conv, conv_transpose and the pools (their window contract is in windows.hpp).

/// conv (kOp = Conv) and conv_transpose (kOp = ConvTranspose): one ATen convolution call with
/// `transposed` and output_padding, as ATen's own conv_transpose2d.
template <Op kOp>
RuntimeResult<Tensor> conv_forward(Inputs inputs, const OpAttrs& attrs) {
  constexpr bool kTransposed = kOp == Op::ConvTranspose;
  constexpr std::string_view op = to_string(kOp);
  Window win;
  CAPSULE_CHECK(conv_window(win, kOp, inputs, attrs));
  return guarded(op, [&] {
    // The 2-D views ATen runs on share the inputs' storage, so they serve adopt_out's alias check
    // as well as the inputs themselves.
    const std::array<at::Tensor, 3> read{as_2d(view_input(inputs[0]), win.one_d),
                                         as_2d(view_input(inputs[1]), win.one_d),
                                         has_input(inputs, 2) ? view_input(inputs[2]) : at::Tensor()};
    // ATen's CPU convolution has no kernel that writes a caller's buffer: the output ATen
    // allocated is adopted as ours, without a copy (docs/libtorch.md, "Copies at the boundary").
    return adopt_out(kOp,
                     from_2d(at::convolution(read[0], read[1], read[2], win.stride, win.padding, win.dilation,
                                             kTransposed, win.output_padding, attrs.groups),
                             win.one_d),
                     inputs[0].dtype(), read);
  });
}

template <Op kOp>
Grads conv_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  constexpr bool kTransposed = kOp == Op::ConvTranspose;
  constexpr std::string_view op = to_string(kOp);
  Window win;
  CAPSULE_CHECK(conv_window(win, kOp, inputs, attrs));
  CAPSULE_CHECK(expect_grad(op, inputs, output, grad));
  const bool with_bias = has_input(inputs, 2);
  return guarded(op, [&]() -> Grads {
    const std::array<at::Tensor, 3> read{view_input(grad), view_input(inputs[0]), view_input(inputs[1])};
    std::vector<std::int64_t> bias_sizes{kTransposed ? inputs[1].dim(1) * attrs.groups : inputs[1].dim(0)};
    auto [gx, gw, gb] = at::convolution_backward(as_2d(read[0], win.one_d), as_2d(read[1], win.one_d),
                                                 as_2d(read[2], win.one_d),
                                                 with_bias ? at::OptionalIntArrayRef(bias_sizes) : c10::nullopt,
                                                 win.stride, win.padding, win.dilation, kTransposed,
                                                 win.output_padding, attrs.groups, {true, true, with_bias});
    // As the forward: ATen allocates the gradients, which are adopted.
    CAPSULE_TRY(Tensor dx, adopt_out(kOp, from_2d(gx, win.one_d), grad.dtype(), read));
    CAPSULE_TRY(Tensor dw, adopt_out(kOp, from_2d(gw, win.one_d), grad.dtype(), read));
    std::vector<Tensor> grads{dx, dw};
    if (with_bias) {
      CAPSULE_TRY(Tensor db, adopt_out(kOp, gb, grad.dtype(), read));
      grads.push_back(db);
    } else if (inputs.size() == 3) {
      grads.emplace_back();
    }
    return grads;
  });
}

/// max_pool's forward keeps ATen's argmax indices (kLong, ATen's own) for the adjoint.
struct PoolState final : SavedState {
  at::Tensor indices;
};

RuntimeResult<SavingForwardResult> max_pool_forward_saving(Inputs inputs, const OpAttrs& attrs) {
  Window win;
  CAPSULE_CHECK(pool_window(win, Op::MaxPool, inputs, attrs));
  return guarded("max_pool", [&]() -> RuntimeResult<SavingForwardResult> {
    const at::Tensor x = view_input(inputs[0]);
    auto [y, indices] = at::max_pool2d_with_indices(as_2d(x, win.one_d), win.kernel, win.stride, win.padding,
                                                    win.dilation, false);
    // No CPU out kernel writes both results into a caller's buffers: ATen's output is adopted.
    CAPSULE_TRY(Tensor out, adopt_out(Op::MaxPool, from_2d(y, win.one_d), inputs[0].dtype(), std::span(&x, 1)));
    auto state = std::make_unique<PoolState>();
    state->indices = indices;
    return SavingForwardResult{out, std::move(state)};
  });
}

RuntimeResult<Tensor> max_pool_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(SavingForwardResult result, max_pool_forward_saving(inputs, attrs));
  return result.output;
}

/// The adjoint routes each output gradient to the argmax the forward chose (its saved indices);
/// a call without them (untaped, or the plain `backward`) recomputes them with the same forward.
Grads max_pool_backward_saved(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs,
                              const SavedState* saved) {
  Window win;
  CAPSULE_CHECK(pool_window(win, Op::MaxPool, inputs, attrs));
  CAPSULE_CHECK(expect_grad("max_pool", inputs, output, grad));
  return guarded("max_pool", [&]() -> Grads {
    const at::Tensor x = as_2d(view_input(inputs[0]), win.one_d);
    const auto* state = dynamic_cast<const PoolState*>(saved);
    at::Tensor indices;
    if (state != nullptr) {
      indices = state->indices;
    } else {
      indices = std::get<1>(at::max_pool2d_with_indices(x, win.kernel, win.stride, win.padding, win.dilation, false));
    }
    CAPSULE_TRY(Tensor gx, write_like("max_pool", inputs[0], [&](at::Tensor& out) {
      at::Tensor out2 = as_2d(out, win.one_d);
      at::max_pool2d_with_indices_backward_out(out2, as_2d(view_input(grad), win.one_d), x,
                                               win.kernel, win.stride, win.padding, win.dilation, false, indices);
    }));
    return std::vector<Tensor>{gx};
  });
}

Grads max_pool_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  return max_pool_backward_saved(inputs, output, grad, attrs, nullptr);
}

/// avg_pool: the window sum over the full window (padding counts as zeros: count_include_pad),
/// floor mode, no divisor override: the reference's definition.
RuntimeResult<Tensor> avg_pool_forward(Inputs inputs, const OpAttrs& attrs) {
  Window win;
  CAPSULE_CHECK(pool_window(win, Op::AvgPool, inputs, attrs));
  const Tensor& x = inputs[0];
  return guarded("avg_pool", [&] {
    return write_new("avg_pool", win.out_dims, x.dtype(), [&](at::Tensor& out) {
      at::Tensor out2 = as_2d(out, win.one_d);
      at::avg_pool2d_out(out2, as_2d(view_input(x), win.one_d), win.kernel, win.stride, win.padding,
                         /*ceil_mode=*/false, /*count_include_pad=*/true, c10::nullopt);
    });
  });
}

Grads avg_pool_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  Window win;
  CAPSULE_CHECK(pool_window(win, Op::AvgPool, inputs, attrs));
  CAPSULE_CHECK(expect_grad("avg_pool", inputs, output, grad));
  return guarded("avg_pool", [&]() -> Grads {
    const at::Tensor x = as_2d(view_input(inputs[0]), win.one_d);
    CAPSULE_TRY(Tensor gx, write_like("avg_pool", inputs[0], [&](at::Tensor& out) {
      at::Tensor out2 = as_2d(out, win.one_d);
      at::avg_pool2d_backward_out(out2, as_2d(view_input(grad), win.one_d), x, win.kernel, win.stride, win.padding,
                                  /*ceil_mode=*/false, /*count_include_pad=*/true, c10::nullopt);
    }));
    return std::vector<Tensor>{gx};
  });
}

/// smooth_max_pool, composed from ATen ops (windows.hpp): y = m + T·log s, s = Σ exp((x − m)/T),
/// written into our output by add_out.
RuntimeResult<Tensor> smooth_max_pool_forward(Inputs inputs, const OpAttrs& attrs) {
  Window win;
  CAPSULE_CHECK(pool_window(win, Op::SmoothMaxPool, inputs, attrs));
  const Tensor& x = inputs[0];
  return guarded("smooth_max_pool", [&] {
    return write_new("smooth_max_pool", win.out_dims, x.dtype(), [&](at::Tensor& out) {
      const at::Tensor windows = smooth_windows(as_2d(view_input(x), win.one_d), win);
      const at::Tensor shift = smooth_shift(windows);
      const at::Tensor sums = at::sum(smooth_terms(windows, shift, attrs.temperature), {4, 5});
      at::Tensor out2 = as_2d(out, win.one_d);
      at::add_out(out2, shift.squeeze(5).squeeze(4), at::log(sums), attrs.temperature);
    });
  });
}

/// dx = Σ over the windows holding x of g·exp((x − m)/T)/s: the weighted window gradients are
/// folded back onto the input by col2im, whose padding drops the padded entries.
Grads smooth_max_pool_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  Window win;
  CAPSULE_CHECK(pool_window(win, Op::SmoothMaxPool, inputs, attrs));
  CAPSULE_CHECK(expect_grad("smooth_max_pool", inputs, output, grad));
  return guarded("smooth_max_pool", [&]() -> Grads {
    const at::Tensor x = as_2d(view_input(inputs[0]), win.one_d);
    const at::Tensor windows = smooth_windows(x, win);
    const at::Tensor terms = smooth_terms(windows, smooth_shift(windows), attrs.temperature);
    const at::Tensor sums = at::sum(terms, {4, 5}, /*keepdim=*/true);
    const at::Tensor g = as_2d(view_input(grad), win.one_d).unsqueeze(4).unsqueeze(5);
    const at::Tensor weighted = at::mul(g, at::div(terms, sums));  // [n, c, oh, ow, kh, kw]
    const std::int64_t n = x.size(0);
    const std::int64_t c = x.size(1);
    const at::Tensor columns =
        weighted.permute({0, 1, 4, 5, 2, 3}).reshape({n, c * win.kernel[0] * win.kernel[1], -1});
    CAPSULE_TRY(Tensor gx, write_like("smooth_max_pool", inputs[0], [&](at::Tensor& out) {
      at::Tensor out2 = as_2d(out, win.one_d);
      at::col2im_out(out2, columns, {x.size(2), x.size(3)}, win.kernel, win.dilation, win.padding, win.stride);
    }));
    return std::vector<Tensor>{gx};
  });
}

// ---------------------------------------------------------------------------------------------
// Shape ops: reshape, permute, broadcast. Their results are ATen views; each is copied into a
// fresh contiguous output of ours (the reference's reshape shares storage instead; the values
// are the same).

RuntimeResult<std::vector<std::int64_t>> reshape_dims(const Tensor& x, const OpAttrs& attrs) {
  std::vector<std::int64_t> dims = attrs.shape;
  std::int64_t known = 1;
  std::size_t wildcard = dims.size();
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == -1 && wildcard == dims.size()) wildcard = d;
    else if (dims[d] < 0) return shape_error(Op::Reshape, str("target dim ", dims[d], " is negative"));
    else {
      CAPSULE_TRY(known, checked_mul("reshape target", known, dims[d]));
    }
  }
  if (wildcard < dims.size()) {
    if (known == 0 || x.numel() % known != 0) {
      return shape_error(Op::Reshape, str("cannot infer -1 for ", x.numel(), " elements from shape ", quoted_dims(dims)));
    }
    dims[wildcard] = x.numel() / known;
  } else if (known != x.numel()) {
    return shape_error(Op::Reshape, str("target has ", known, " elements; the input has ", x.numel()));
  }
  return dims;
}

RuntimeResult<Tensor> reshape_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs("reshape", inputs, 1, 1));
  CAPSULE_TRY(std::vector<std::int64_t> dims, reshape_dims(inputs[0], attrs));
  return guarded("reshape", [&] { return copy_out(Op::Reshape, view_input(inputs[0]).reshape(dims), inputs[0].dtype()); });
}

Grads reshape_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_inputs("reshape", inputs, 1, 1));
  CAPSULE_CHECK(expect_grad("reshape", inputs, output, grad));
  const std::vector<std::int64_t> dims = inputs[0].shape().to_vector();
  return guarded("reshape", [&]() -> Grads {
    CAPSULE_TRY(Tensor gx, copy_out(Op::Reshape, view_input(grad).reshape(dims), grad.dtype()));
    return std::vector<Tensor>{gx};
  });
}

RuntimeStatus expect_permutation(const Tensor& x, const OpAttrs& attrs) {
  std::vector<bool> seen(x.rank(), false);
  if (attrs.axes.size() != x.rank()) {
    return runtime_error(RuntimeCode::InvalidArgument, str("permute: axes has ", attrs.axes.size(),
                                                           " entries; expected ", x.rank()));
  }
  for (const std::int64_t a : attrs.axes) {
    CAPSULE_TRY(std::size_t axis, normalize_axis("permute", a, x.rank()));
    if (seen[axis]) return runtime_error(RuntimeCode::InvalidArgument, str("permute: axis ", a, " is repeated"));
    seen[axis] = true;
  }
  return std::monostate{};
}

RuntimeResult<Tensor> permute_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs("permute", inputs, 1, 1));
  CAPSULE_CHECK(expect_permutation(inputs[0], attrs));
  return guarded("permute", [&] { return copy_out(Op::Permute, view_input(inputs[0]).permute(attrs.axes), inputs[0].dtype()); });
}

Grads permute_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs("permute", inputs, 1, 1));
  CAPSULE_CHECK(expect_permutation(inputs[0], attrs));
  CAPSULE_CHECK(expect_grad("permute", inputs, output, grad));
  const std::size_t rank = inputs[0].rank();
  std::vector<std::int64_t> inverse(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    const std::int64_t a = attrs.axes[d] < 0 ? attrs.axes[d] + static_cast<std::int64_t>(rank) : attrs.axes[d];
    inverse[static_cast<std::size_t>(a)] = static_cast<std::int64_t>(d);
  }
  return guarded("permute", [&]() -> Grads {
    CAPSULE_TRY(Tensor gx, copy_out(Op::Permute, view_input(grad).permute(inverse), grad.dtype()));
    return std::vector<Tensor>{gx};
  });
}

/// numpy rules, x aligned right: each dim of x is 1 or equal to the target's.
RuntimeStatus expect_broadcast(const Tensor& x, const OpAttrs& attrs) {
  bool fits = x.rank() <= attrs.shape.size();
  for (std::size_t d = 0; fits && d < x.rank(); ++d) {
    const std::int64_t target = attrs.shape[attrs.shape.size() - x.rank() + d];
    fits = x.dim(d) == 1 || x.dim(d) == target;
  }
  for (const std::int64_t t : attrs.shape) fits = fits && t >= 0;
  if (!fits) {
    return shape_error(Op::Broadcast, str("cannot broadcast ", to_string(x.shape()), " to ", quoted_dims(attrs.shape)));
  }
  return std::monostate{};
}

RuntimeResult<Tensor> broadcast_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs("broadcast", inputs, 1, 1));
  CAPSULE_CHECK(expect_broadcast(inputs[0], attrs));
  return guarded("broadcast", [&] {
    return write_new("broadcast", attrs.shape, inputs[0].dtype(), [&](at::Tensor& out) {
      copy_into(Op::Broadcast, out, view_input(inputs[0]).expand(attrs.shape));
    });
  });
}

Grads broadcast_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs("broadcast", inputs, 1, 1));
  CAPSULE_CHECK(expect_broadcast(inputs[0], attrs));
  CAPSULE_CHECK(expect_grad("broadcast", inputs, output, grad));
  const Tensor& x = inputs[0];
  const std::size_t lead = attrs.shape.size() - x.rank();
  std::vector<std::int64_t> summed;
  for (std::size_t d = 0; d < attrs.shape.size(); ++d) {
    if (d < lead || (x.dim(d - lead) == 1 && attrs.shape[d] != 1)) summed.push_back(static_cast<std::int64_t>(d));
  }
  return guarded("broadcast", [&]() -> Grads {
    const at::Tensor g = view_input(grad);
    const at::Tensor reduced = summed.empty() ? g : at::sum(g, summed, true);
    CAPSULE_TRY(Tensor gx, write_like("broadcast", x, [&](at::Tensor& out) {
      copy_into(Op::Broadcast, out, reduced.reshape(out.sizes()));
    }));
    return std::vector<Tensor>{gx};
  });
}

}  // namespace

RuntimeStatus register_nn_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(registry.add(spec_for(Op::Matmul, matmul_forward, matmul_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Linear, linear_forward, linear_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::MseLoss, mse_loss_forward, mse_loss_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::CrossEntropy, cross_entropy_forward, cross_entropy_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Conv, conv_forward<Op::Conv>, conv_backward<Op::Conv>)));
  CAPSULE_CHECK(registry.add(
      spec_for(Op::ConvTranspose, conv_forward<Op::ConvTranspose>, conv_backward<Op::ConvTranspose>)));
  CAPSULE_CHECK(registry.add(spec_for(Op::AvgPool, avg_pool_forward, avg_pool_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::SmoothMaxPool, smooth_max_pool_forward, smooth_max_pool_backward)));
  HandlerSpec max_pool = spec_for(Op::MaxPool, max_pool_forward, max_pool_backward);
  max_pool.forward_saving = max_pool_forward_saving;
  max_pool.backward_saved = max_pool_backward_saved;
  CAPSULE_CHECK(registry.add(std::move(max_pool)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Reshape, reshape_forward, reshape_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Permute, permute_forward, permute_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Broadcast, broadcast_forward, broadcast_backward)));
  return std::monostate{};
}

}  // namespace capsule::libtorch
