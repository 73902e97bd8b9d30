// SPDX-License-Identifier: Apache-2.0
// LibTorch kernels of the normalisations (layer_norm, batch_norm) and the index and block ops
// (gather, scatter_add, concat, slice), forward and local adjoint, with the conventions of
// capsule/runtime/op_args.hpp.
//
// The normalisations keep ATen's forward statistics for their adjoint (forward_saving /
// backward_saved): layer_norm's mean and rstd, batch_norm's batch mean and invstd, which ATen's
// backward functions take as they are. The plain `backward` (an untaped or state-less call)
// recomputes them with the same ATen forward, so both paths give the same bits.
//
// gather and scatter_add are index_select and index_add along one axis. Their indices are payload
// (OpAttrs::indices, already int64), so ATen reads them through from_blob as kLong: no dtype
// conversion and no copy (docs/libtorch.md).
#include <ATen/ops/all.h>
#include <ATen/ops/any.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/native_layer_norm_backward.h>
#include <ATen/ops/slice_backward.h>

#include <array>
#include <cmath>
#include <memory>

#include "autograd_formulas_norm_index.hpp"
#include "boundary.hpp"

namespace capsule::libtorch {
namespace {

c10::optional<at::Tensor> optional_input(Inputs inputs, std::size_t i) {
  if (!has_input(inputs, i)) return c10::nullopt;
  return view_input(inputs[i]);
}

// ---------------------------------------------------------------------------------------------
// layer_norm (x, gamma?, beta?) over the last axis; batch_norm (x [n, c, ..], gamma [c]?,
// beta [c]?) with the batch's statistics and biased variance (training mode without running
// statistics: the reference has none, so neither does this handler).

}  // namespace

RuntimeResult<NormPlan> norm_plan(Op op, Inputs inputs, const OpAttrs& attrs) {
  const std::string name(to_string(op));
  CAPSULE_CHECK(expect_inputs(name, inputs, 1, 3));
  NormPlan plan;
  plan.per_channel = op == Op::BatchNorm;
  const Tensor& x = inputs[0];
  if (!plan.per_channel && x.rank() < 1) {
    return runtime_error(RuntimeCode::ShapeMismatch, str(name, ": input has shape ", to_string(x.shape()),
                                                         "; expected rank >= 1"));
  }
  if (plan.per_channel && x.rank() < 2) {
    return runtime_error(RuntimeCode::ShapeMismatch, str(name, ": input has shape ", to_string(x.shape()),
                                                         "; expected [n, c, ..] of rank >= 2"));
  }
  plan.features = plan.per_channel ? x.dim(1) : x.dim(x.rank() - 1);
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    if (has_input(inputs, i) && (inputs[i].rank() != 1 || inputs[i].dim(0) != plan.features)) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str(name, ": ", i == 1 ? "gamma" : "beta", " has shape ", to_string(inputs[i].shape()),
                               "; expected [", plan.features, "] (", plan.per_channel ? "the channels" : "the last axis",
                               " of input ", to_string(x.shape()), ")"));
    }
  }
  if (attrs.eps != 0.0) {
    if (!std::isfinite(attrs.eps) || attrs.eps < 0) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(name, ": eps is ", attrs.eps, "; expected a finite value >= 0 (0 = default 1e-5)"));
    }
    plan.eps = attrs.eps;
  }
  return plan;
}

namespace {

/// What the forward keeps for the adjoint: ATen's statistics, as its backward wants them.
struct NormState final : SavedState {
  at::Tensor mean;
  at::Tensor rstd;  ///< layer_norm's rstd, batch_norm's invstd
};

/// The statistics' groups as [groups, elements]: layer_norm's rows, batch_norm's channels.
at::Tensor grouped(const at::Tensor& x, bool per_channel) {
  if (!per_channel) return x.reshape({-1, x.size(-1)});
  return x.transpose(0, 1).reshape({x.size(1), -1});
}

}  // namespace

/// ATen accumulates a group's squared deviations in the element type (layer_norm in float32;
/// batch_norm in double, which a float64 group can still overflow). A finite group whose sum
/// overflows gets an rstd of 0 or NaN and would normalise to zeros or NaN; the reference scales
/// such a group by a power of two first and normalises it. That difference is refused, never
/// returned. (A finite group's true rstd is positive, or +inf for a constant group with eps 0.)
RuntimeStatus expect_finite_variance(Op op, const at::Tensor& x, const at::Tensor& rstd, bool per_channel) {
  const at::Tensor finite_group = at::all(at::isfinite(grouped(x, per_channel)), 1);
  const at::Tensor overflowed = at::logical_and(at::logical_not(at::gt(rstd.reshape({-1}), 0)), finite_group);
  if (at::any(overflowed).item<bool>()) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("LibTorch ", to_string(op), ": the variance of a finite ",
                             per_channel ? "channel" : "row", " of input ", to_string(Shape::make(x.sizes().vec()).value()),
                             " overflows in ATen's accumulation (rstd is 0 or NaN); the reference normalises it, this "
                             "handler refuses it (docs/libtorch.md)"));
  }
  return std::monostate{};
}

namespace {

/// Runs ATen's forward into `out` and returns its statistics.
RuntimeResult<std::unique_ptr<NormState>> norm_into(Op op, Inputs inputs, const NormPlan& plan, at::Tensor& out) {
  const at::Tensor x = view_input(inputs[0]);
  auto state = std::make_unique<NormState>();
  state->mean = at::empty({0}, x.options());
  state->rstd = at::empty({0}, x.options());
  if (plan.per_channel) {
    // LibTorch 1.13 registers native_batch_norm's out variant for CUDA only: the CPU result is
    // computed by ATen and copied once into ours (a counted boundary copy).
    auto [y, mean, invstd] = at::native_batch_norm(x, optional_input(inputs, 1), optional_input(inputs, 2),
                                                   c10::nullopt, c10::nullopt, /*training=*/true, /*momentum=*/0.0,
                                                   plan.eps);
    copy_into(Op::BatchNorm, out, y);
    state->mean = mean;
    state->rstd = invstd;
  } else {
    const std::int64_t last = x.size(-1);
    at::native_layer_norm_out(out, state->mean, state->rstd, x, {last}, optional_input(inputs, 1),
                              optional_input(inputs, 2), plan.eps);
  }
  CAPSULE_CHECK(expect_finite_variance(op, x, state->rstd, plan.per_channel));
  return state;
}

template <Op kOp>
RuntimeResult<SavingForwardResult> norm_forward_saving(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(NormPlan plan, norm_plan(kOp, inputs, attrs));
  constexpr std::string_view op = to_string(kOp);
  return guarded(op, [&]() -> RuntimeResult<SavingForwardResult> {
    CAPSULE_TRY(Tensor out, new_like(inputs[0]));
    // Nothing to normalise (ATen would take the mean of no elements); no state to keep.
    if (out.numel() == 0) return SavingForwardResult{out, nullptr};
    at::Tensor view = view_output(out);
    CAPSULE_TRY(std::unique_ptr<NormState> state, norm_into(kOp, inputs, plan, view));
    CAPSULE_CHECK(expect_written(op, view, out));
    return SavingForwardResult{out, std::move(state)};
  });
}

template <Op kOp>
RuntimeResult<Tensor> norm_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(SavingForwardResult result, norm_forward_saving<kOp>(inputs, attrs));
  return result.output;
}

template <Op kOp>
Grads norm_backward_saved(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs,
                          const SavedState* saved) {
  CAPSULE_TRY(NormPlan plan, norm_plan(kOp, inputs, attrs));
  constexpr std::string_view op = to_string(kOp);
  CAPSULE_CHECK(expect_grad(op, inputs, output, grad));
  return guarded(op, [&]() -> Grads {
    std::vector<Tensor> grads(inputs.size());
    const bool with_gamma = has_input(inputs, 1);
    const bool with_beta = has_input(inputs, 2);
    if (inputs[0].numel() == 0) {
      // No element: every gradient is zero (the affine ones too), as the reference's.
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        if (!inputs[i].defined()) continue;
        CAPSULE_TRY(grads[i], write_like(op, inputs[i], [](at::Tensor& out) { out.zero_(); }));
      }
      return grads;
    }
    // The forward's statistics; a call without them (untaped, or the plain `backward`) reruns
    // ATen's forward to get the same ones.
    const auto* state = dynamic_cast<const NormState*>(saved);
    std::unique_ptr<NormState> recomputed;
    if (state == nullptr) {
      at::Tensor scratch = at::empty(view_input(inputs[0]).sizes(), view_input(inputs[0]).options());
      CAPSULE_TRY(recomputed, norm_into(kOp, inputs, plan, scratch));
      state = recomputed.get();
    }
    const at::Tensor x = view_input(inputs[0]);
    const at::Tensor g = view_input(grad);
    const c10::optional<at::Tensor> gamma = optional_input(inputs, 1);
    const std::array<bool, 3> wanted{true, with_gamma, with_beta};
    // ATen's backward functions have no out kernel of their own on the CPU (their *_out
    // wrappers compute and copy, and fail on a gradient the mask leaves undefined): each wanted
    // result is copied once into ours.
    auto [dx, dgamma, dbeta] =
        plan.per_channel
            ? at::native_batch_norm_backward(g, x, gamma, c10::nullopt, c10::nullopt, state->mean, state->rstd,
                                             /*train=*/true, plan.eps, wanted)
            : at::native_layer_norm_backward(g, x, {x.size(-1)}, state->mean, state->rstd, gamma,
                                             optional_input(inputs, 2), wanted);
    CAPSULE_TRY(grads[0], write_like(op, inputs[0], [&](at::Tensor& out) { copy_into(kOp, out, dx); }));
    if (with_gamma) {
      CAPSULE_TRY(grads[1], write_like(op, inputs[1], [&](at::Tensor& out) { copy_into(kOp, out, dgamma); }));
    }
    if (with_beta) {
      CAPSULE_TRY(grads[2], write_like(op, inputs[2], [&](at::Tensor& out) { copy_into(kOp, out, dbeta); }));
    }
    return grads;
  });
}

template <Op kOp>
Grads norm_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  return norm_backward_saved<kOp>(inputs, output, grad, attrs, nullptr);
}

// ---------------------------------------------------------------------------------------------
// gather (x) and scatter_add (base, src) along attrs.axis at attrs.indices.

}  // namespace

/// The payload indices as an ATen kLong tensor: over their own host storage on a CPU call (no
/// copy); copied to the device, and counted as a conversion of `op`, on a device call.
at::Tensor index_tensor(Op op, const OpAttrs& attrs) {
  auto* data = const_cast<std::int64_t*>(attrs.indices.data());
  at::Tensor host = at::from_blob(data, {static_cast<std::int64_t>(attrs.indices.size())},
                                  at::TensorOptions().dtype(at::kLong).device(at::kCPU));
  const DeviceBoundary* boundary = device_boundary();
  if (boundary == nullptr) return host;
  count_conversion(op);
  return host.to(aten_device(boundary->device));
}

/// Every index in [0, size of the axis): ATen would raise on some and wrap none, but the error
/// names the position and the expected range, as the reference's does.
RuntimeResult<std::size_t> index_axis(Op op, const Tensor& indexed, const OpAttrs& attrs) {
  CAPSULE_TRY(std::size_t axis, normalize_axis(to_string(op), attrs.axis, indexed.rank()));
  const std::int64_t size = indexed.dim(axis);
  for (std::size_t i = 0; i < attrs.indices.size(); ++i) {
    const std::int64_t index = attrs.indices[i];
    if (index < 0 || index >= size) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(to_string(op), ": index ", index, " at position ", i, " is out of range for axis ", axis,
                               " of size ", size, " in shape ", to_string(indexed.shape()), "; expected 0 <= index < ",
                               size));
    }
  }
  return axis;
}

namespace {

std::vector<std::int64_t> indexed_dims(const Tensor& indexed, std::size_t axis, const OpAttrs& attrs) {
  std::vector<std::int64_t> dims = indexed.shape().to_vector();
  dims[axis] = static_cast<std::int64_t>(attrs.indices.size());
  return dims;
}

RuntimeResult<Tensor> gather_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs("gather", inputs, 1, 1));
  CAPSULE_TRY(std::size_t axis, index_axis(Op::Gather, inputs[0], attrs));
  return guarded("gather", [&] {
    return write_new("gather", indexed_dims(inputs[0], axis, attrs), inputs[0].dtype(), [&](at::Tensor& out) {
      at::index_select_out(out, view_input(inputs[0]), static_cast<std::int64_t>(axis),
                           index_tensor(Op::Gather, attrs));
    });
  });
}

/// dx = zeros, then index_add of the output gradient: repeated indices add up in increasing
/// position, as the reference's fixed-left sum.
Grads gather_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs("gather", inputs, 1, 1));
  CAPSULE_TRY(std::size_t axis, index_axis(Op::Gather, inputs[0], attrs));
  CAPSULE_CHECK(expect_grad("gather", inputs, output, grad));
  return guarded("gather", [&]() -> Grads {
    CAPSULE_TRY(Tensor dx, write_like("gather", inputs[0], [&](at::Tensor& out) {
      out.zero_();
      out.index_add_(static_cast<std::int64_t>(axis), index_tensor(Op::Gather, attrs), view_input(grad));
    }));
    return std::vector<Tensor>{dx};
  });
}

}  // namespace

RuntimeResult<std::size_t> scatter_axis(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs("scatter_add", inputs, 2, 2));
  CAPSULE_TRY(std::size_t axis, index_axis(Op::ScatterAdd, inputs[0], attrs));
  const std::vector<std::int64_t> want = indexed_dims(inputs[0], axis, attrs);
  if (inputs[1].shape().to_vector() != want) {
    const std::string wanted = to_string(Shape::make(want).value());
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str("scatter_add: src has shape ", to_string(inputs[1].shape()), " but base ",
                             to_string(inputs[0].shape()), " with ", attrs.indices.size(), " indices along axis ",
                             axis, " needs ", wanted, "; expected src of shape ", wanted));
  }
  return axis;
}

namespace {

RuntimeResult<Tensor> scatter_add_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(std::size_t axis, scatter_axis(inputs, attrs));
  return guarded("scatter_add", [&] {
    return write_like("scatter_add", inputs[0], [&](at::Tensor& out) {
      at::index_add_out(out, view_input(inputs[0]), static_cast<std::int64_t>(axis), index_tensor(Op::ScatterAdd, attrs),
                        view_input(inputs[1]));
    });
  });
}

/// grad base = g (a copy of ours); grad src = index_select(g).
Grads scatter_add_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_TRY(std::size_t axis, scatter_axis(inputs, attrs));
  CAPSULE_CHECK(expect_grad("scatter_add", inputs, output, grad));
  return guarded("scatter_add", [&]() -> Grads {
    const at::Tensor g = view_input(grad);
    CAPSULE_TRY(Tensor gbase, write_like("scatter_add", inputs[0], [&](at::Tensor& out) { copy_into(Op::ScatterAdd, out, g); }));
    CAPSULE_TRY(Tensor gsrc, write_like("scatter_add", inputs[1], [&](at::Tensor& out) {
      at::index_select_out(out, g, static_cast<std::int64_t>(axis), index_tensor(Op::ScatterAdd, attrs));
    }));
    return std::vector<Tensor>{gbase, gsrc};
  });
}

// ---------------------------------------------------------------------------------------------
// concat (x0, x1, ..) along attrs.axis and slice (x) [start, end) along attrs.axis.

}  // namespace

/// Equal ranks and equal dims off the axis (ATen would also accept a legacy 1-D empty operand of
/// any other shape; the contract does not). Returns the axis and the output dims.
RuntimeResult<std::pair<std::size_t, std::vector<std::int64_t>>> concat_plan(Inputs inputs, const OpAttrs& attrs) {
  if (inputs.empty()) return runtime_error(RuntimeCode::InvalidArgument, "concat: got 0 inputs; expected at least 1");
  CAPSULE_CHECK(expect_inputs("concat", inputs, inputs.size(), inputs.size()));
  const Tensor& first = inputs[0];
  CAPSULE_TRY(std::size_t axis, normalize_axis("concat", attrs.axis, first.rank()));
  std::vector<std::int64_t> dims = first.shape().to_vector();
  dims[axis] = 0;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    bool fits = t.rank() == first.rank();
    for (std::size_t d = 0; fits && d < first.rank(); ++d) fits = d == axis || t.dim(d) == first.dim(d);
    if (!fits) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str("concat: input ", k, " has shape ", to_string(t.shape()), " and input 0 has ",
                               to_string(first.shape()), "; expected equal shapes except along axis ", axis));
    }
    if (__builtin_add_overflow(dims[axis], t.dim(axis), &dims[axis])) {
      return runtime_error(RuntimeCode::SizeOverflow,
                           str("concat: the sizes along axis ", axis, " add up past 2^63; expected a smaller total"));
    }
  }
  return std::pair{axis, dims};
}

namespace {

RuntimeResult<Tensor> concat_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(auto plan, concat_plan(inputs, attrs));
  return guarded("concat", [&] {
    std::vector<at::Tensor> parts;
    parts.reserve(inputs.size());
    for (const Tensor& t : inputs) parts.push_back(view_input(t));
    return write_new("concat", plan.second, inputs[0].dtype(), [&](at::Tensor& out) {
      at::cat_out(out, parts, static_cast<std::int64_t>(plan.first));
    });
  });
}

/// Each input's gradient is its block of the output gradient: a narrowed view of g, copied into
/// a contiguous output of ours.
Grads concat_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_TRY(auto plan, concat_plan(inputs, attrs));
  CAPSULE_CHECK(expect_grad("concat", inputs, output, grad));
  const auto axis = static_cast<std::int64_t>(plan.first);
  return guarded("concat", [&]() -> Grads {
    const at::Tensor g = view_input(grad);
    std::vector<Tensor> grads;
    std::int64_t start = 0;
    for (const Tensor& t : inputs) {
      const std::int64_t length = t.dim(plan.first);
      CAPSULE_TRY(Tensor dx, write_like("concat", t, [&](at::Tensor& out) {
        copy_into(Op::Concat, out, g.narrow(axis, start, length));
      }));
      grads.push_back(dx);
      start += length;
    }
    return grads;
  });
}

}  // namespace

RuntimeResult<std::size_t> slice_axis(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs("slice", inputs, 1, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(std::size_t axis, normalize_axis("slice", attrs.axis, x.rank()));
  // ATen's slice clamps a range that leaves the axis; the contract rejects it.
  const std::int64_t size = x.dim(axis);
  if (attrs.start < 0 || attrs.start > attrs.end || attrs.end > size) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("slice: range [", attrs.start, ", ", attrs.end, ") along axis ", axis, " of x of shape ",
                             to_string(x.shape()), "; expected 0 <= start <= end <= ", size));
  }
  return axis;
}

namespace {

/// ATen's slice is a view of x; it is copied into a contiguous output of ours.
RuntimeResult<Tensor> slice_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(std::size_t axis, slice_axis(inputs, attrs));
  return guarded("slice", [&] {
    const at::Tensor view = view_input(inputs[0]).slice(static_cast<std::int64_t>(axis), attrs.start, attrs.end);
    return copy_out(Op::Slice, view, inputs[0].dtype());
  });
}

/// ATen's slice_backward: zeros outside the range, the output gradient inside it.
Grads slice_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_TRY(std::size_t axis, slice_axis(inputs, attrs));
  CAPSULE_CHECK(expect_grad("slice", inputs, output, grad));
  const std::vector<std::int64_t> dims = inputs[0].shape().to_vector();
  return guarded("slice", [&]() -> Grads {
    CAPSULE_TRY(Tensor dx, write_like("slice", inputs[0], [&](at::Tensor& out) {
      at::slice_backward_out(out, view_input(grad), dims, static_cast<std::int64_t>(axis), attrs.start, attrs.end, 1);
    }));
    return std::vector<Tensor>{dx};
  });
}

template <Op kOp>
HandlerSpec saving_norm_spec() {
  HandlerSpec spec = spec_for(kOp, norm_forward<kOp>, norm_backward<kOp>);
  spec.forward_saving = norm_forward_saving<kOp>;
  spec.backward_saved = norm_backward_saved<kOp>;
  return spec;
}

}  // namespace

RuntimeStatus register_norm_index_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(registry.add(saving_norm_spec<Op::LayerNorm>()));
  CAPSULE_CHECK(registry.add(saving_norm_spec<Op::BatchNorm>()));
  CAPSULE_CHECK(registry.add(spec_for(Op::Gather, gather_forward, gather_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::ScatterAdd, scatter_add_forward, scatter_add_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Concat, concat_forward, concat_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Slice, slice_forward, slice_backward)));
  return std::monostate{};
}

}  // namespace capsule::libtorch
