// SPDX-License-Identifier: Apache-2.0
// Reference kernels of the shape ops (reshape, permute, broadcast, concat, slice, gather,
// scatter_add), forward and local adjoint, with the conventions of capsule/runtime/op_args.hpp.
// Every adjoint that adds several gradient terms into one element does so fixed-left: from 0 (or
// from the base, for scatter_add) in increasing index order.
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <span>
#include <vector>

#include "common.hpp"
#include "kernel_support.hpp"

namespace capsule::reference {
namespace {

using Inputs = std::span<const Tensor>;
using Grads = RuntimeResult<std::vector<Tensor>>;

/// Copies `count` elements from `src` at `from` to `dst` at `to` (both of one dtype).
void copy_elements(const Tensor& src, std::int64_t from, Tensor& dst, std::int64_t to, std::int64_t count) {
  with_dtype(src.dtype(), [&]<class T>() { std::copy_n(src.data<T>() + from, count, dst.mutable_data<T>() + to); });
}

// ---------------------------------------------------------------------------------------------
// reshape: a view of the same storage (tensor.hpp: reshape shares).

/// The target shape with its one optional -1 entry inferred from x's element count.
RuntimeResult<Shape> reshape_target(const Tensor& x, const OpAttrs& attrs) {
  std::vector<std::int64_t> dims = attrs.shape;
  std::int64_t known = 1;
  std::size_t inferred = dims.size();
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (inferred != dims.size()) {
        return runtime_error(RuntimeCode::InvalidArgument,
                             str("reshape: target shape has -1 at entries ", inferred, " and ", i,
                                 "; expected at most one -1 entry"));
      }
      inferred = i;
    } else if (dims[i] < 0) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str("reshape: target entry ", i, " is ", dims[i], "; expected a size >= 0 or -1"));
    } else {
      CAPSULE_TRY(known, checked_mul("reshape: target element count", known, dims[i]));
    }
  }
  if (inferred != dims.size()) {
    if (known == 0 || x.numel() % known != 0) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str("reshape: cannot infer the -1 entry of the target shape: the other entries hold ",
                               known, " elements per step and x of shape ", to_string(x.shape()), " has ",
                               x.numel(), "; expected them to divide it"));
    }
    dims[inferred] = x.numel() / known;
  }
  CAPSULE_TRY(Shape shape, Shape::make(dims));
  if (shape.numel() != x.numel()) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str("reshape: x of shape ", to_string(x.shape()), " has ", x.numel(),
                             " elements but the target shape ", to_string(shape), " holds ", shape.numel(),
                             "; expected equal element counts"));
  }
  return shape;
}

RuntimeResult<Tensor> reshape_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::Reshape, inputs, 1));
  CAPSULE_TRY(Shape shape, reshape_target(inputs[0], attrs));
  return inputs[0].reshaped(shape);
}

Grads reshape_backward(Inputs inputs, const Tensor& /*output*/, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::Reshape, inputs, 1));
  CAPSULE_TRY(Shape shape, reshape_target(inputs[0], attrs));
  CAPSULE_CHECK(expect_like_output(Op::Reshape, "gradient", grad, shape, inputs[0].dtype()));
  CAPSULE_TRY(Tensor dx, grad.reshaped(inputs[0].shape()));
  return std::vector<Tensor>{dx};
}

// ---------------------------------------------------------------------------------------------
// permute

/// attrs.axes as a permutation of 0..rank-1 (negative entries count from the end).
RuntimeResult<std::vector<std::size_t>> permutation_of(const Tensor& x, const OpAttrs& attrs) {
  if (attrs.axes.size() != x.rank()) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("permute: ", attrs.axes.size(), " axes for x of shape ", to_string(x.shape()),
                             "; expected a permutation of its ", x.rank(), " axes"));
  }
  std::vector<std::size_t> perm;
  std::array<bool, Shape::kMaxRank> seen{};
  for (const std::int64_t axis : attrs.axes) {
    CAPSULE_TRY(std::size_t d, normalize_axis("permute", axis, x.rank()));
    if (seen[d]) {
      return runtime_error(RuntimeCode::InvalidArgument, str("permute: axis ", axis, " (dimension ", d,
                                                             ") appears twice; expected a permutation"));
    }
    seen[d] = true;
    perm.push_back(d);
  }
  return perm;
}

/// out[i0, .., ik] = x[j] where dimension d of out is dimension perm[d] of x: walk out in
/// row-major order with x's strides taken in perm order.
RuntimeResult<Tensor> apply_permutation(const Tensor& x, const std::vector<std::size_t>& perm) {
  std::vector<std::int64_t> dims;
  std::array<std::int64_t, Shape::kMaxRank> strides{};
  const auto x_strides = x.strides();
  for (std::size_t d = 0; d < perm.size(); ++d) {
    dims.push_back(x.dim(perm[d]));
    strides[d] = x_strides[perm[d]];
  }
  CAPSULE_TRY(Shape shape, Shape::make(dims));
  CAPSULE_TRY(Tensor out, Tensor::empty(shape, x.dtype()));
  with_dtype(x.dtype(), [&]<class T>() {
    const T* src = x.data<T>();
    T* dst = out.mutable_data<T>();
    StridedWalk walk(shape.dims(), strides);
    for (std::int64_t i = 0; i < out.numel(); ++i, walk.next()) dst[i] = src[walk.offset()];
  });
  return out;
}

RuntimeResult<Tensor> permute_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::Permute, inputs, 1));
  CAPSULE_TRY(auto perm, permutation_of(inputs[0], attrs));
  return apply_permutation(inputs[0], perm);
}

/// The adjoint of a permutation is its inverse applied to the gradient.
Grads permute_backward(Inputs inputs, const Tensor& /*output*/, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::Permute, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(auto perm, permutation_of(x, attrs));
  std::vector<std::int64_t> out_dims;
  std::vector<std::size_t> inverse(perm.size());
  for (std::size_t d = 0; d < perm.size(); ++d) {
    out_dims.push_back(x.dim(perm[d]));
    inverse[perm[d]] = d;
  }
  CAPSULE_TRY(Shape out_shape, Shape::make(out_dims));
  CAPSULE_CHECK(expect_like_output(Op::Permute, "gradient", grad, out_shape, x.dtype()));
  CAPSULE_TRY(Tensor dx, apply_permutation(grad, inverse));
  return std::vector<Tensor>{dx};
}

// ---------------------------------------------------------------------------------------------
// broadcast: numpy rules with x aligned to the right of attrs.shape.

struct BroadcastPlan {
  Shape out_shape;
  std::array<std::int64_t, Shape::kMaxRank> x_strides{};  ///< per output dim; 0 where x repeats
};

RuntimeResult<BroadcastPlan> plan_broadcast(const Tensor& x, const OpAttrs& attrs) {
  BroadcastPlan plan;
  CAPSULE_TRY(plan.out_shape, Shape::make(attrs.shape));
  const std::size_t rank = plan.out_shape.rank();
  if (x.rank() > rank) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str("broadcast: x of shape ", to_string(x.shape()), " has more dimensions than the target ",
                             to_string(plan.out_shape), "; expected rank <= ", rank));
  }
  const std::size_t lead = rank - x.rank();
  const auto strides = x.strides();
  for (std::size_t d = lead; d < rank; ++d) {
    const std::int64_t have = x.dim(d - lead);
    const std::int64_t want = plan.out_shape[d];
    if (have != want && have != 1) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str("broadcast: cannot broadcast x of shape ", to_string(x.shape()), " to ",
                               to_string(plan.out_shape), ": dimension ", d - lead, " of x is ", have,
                               " against ", want, "; expected 1 or ", want));
    }
    plan.x_strides[d] = have == 1 ? 0 : strides[d - lead];
  }
  return plan;
}

RuntimeResult<Tensor> broadcast_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::Broadcast, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(BroadcastPlan plan, plan_broadcast(x, attrs));
  CAPSULE_TRY(Tensor out, Tensor::empty(plan.out_shape, x.dtype()));
  with_dtype(x.dtype(), [&]<class T>() {
    const T* src = x.data<T>();
    T* dst = out.mutable_data<T>();
    StridedWalk walk(plan.out_shape.dims(), plan.x_strides);
    for (std::int64_t i = 0; i < out.numel(); ++i, walk.next()) dst[i] = src[walk.offset()];
  });
  return out;
}

/// Sums the gradient over the broadcast dims: each x element starts at 0 and adds the gradient
/// entries it was copied to, in increasing output index (fixed-left).
Grads broadcast_backward(Inputs inputs, const Tensor& /*output*/, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::Broadcast, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(BroadcastPlan plan, plan_broadcast(x, attrs));
  CAPSULE_CHECK(expect_like_output(Op::Broadcast, "gradient", grad, plan.out_shape, x.dtype()));
  CAPSULE_TRY(Tensor dx, Tensor::zeros(x.shape(), x.dtype()));
  with_dtype(x.dtype(), [&]<class T>() {
    const T* g = grad.data<T>();
    T* d = dx.mutable_data<T>();
    StridedWalk walk(plan.out_shape.dims(), plan.x_strides);
    for (std::int64_t i = 0; i < grad.numel(); ++i, walk.next()) d[walk.offset()] = d[walk.offset()] + g[i];
  });
  return std::vector<Tensor>{dx};
}

// ---------------------------------------------------------------------------------------------
// concat and slice

/// Checks the concat operands and returns the axis and output shape.
RuntimeResult<std::pair<std::size_t, Shape>> plan_concat(Inputs inputs, const OpAttrs& attrs) {
  if (inputs.empty()) {
    return runtime_error(RuntimeCode::InvalidArgument, "concat: got 0 inputs; expected at least 1");
  }
  CAPSULE_CHECK(expect_operands(Op::Concat, inputs));
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
  CAPSULE_TRY(Shape shape, Shape::make(dims));
  return std::pair{axis, shape};
}

RuntimeResult<Tensor> concat_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(auto plan, plan_concat(inputs, attrs));
  const auto& [axis, shape] = plan;
  CAPSULE_TRY(Tensor out, Tensor::empty(shape, inputs[0].dtype()));
  const Lanes lanes = lanes_around(shape, axis);
  std::int64_t written = 0;
  for (std::int64_t o = 0; o < lanes.outer; ++o) {
    for (const Tensor& t : inputs) {
      const std::int64_t block = t.dim(axis) * lanes.inner;
      copy_elements(t, o * block, out, written, block);
      written += block;
    }
  }
  return out;
}

/// Each input's gradient is its slice of the output gradient.
Grads concat_backward(Inputs inputs, const Tensor& /*output*/, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_TRY(auto plan, plan_concat(inputs, attrs));
  const auto& [axis, shape] = plan;
  CAPSULE_CHECK(expect_like_output(Op::Concat, "gradient", grad, shape, inputs[0].dtype()));
  std::vector<Tensor> grads;
  for (const Tensor& t : inputs) {
    CAPSULE_TRY(Tensor dx, Tensor::empty(t.shape(), t.dtype()));
    grads.push_back(dx);
  }
  const Lanes lanes = lanes_around(shape, axis);
  std::int64_t read = 0;
  for (std::int64_t o = 0; o < lanes.outer; ++o) {
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const std::int64_t block = inputs[k].dim(axis) * lanes.inner;
      copy_elements(grad, read, grads[k], o * block, block);
      read += block;
    }
  }
  return grads;
}

/// Checks slice's payload (0 <= start <= end <= size of the axis) and returns the axis.
RuntimeResult<std::size_t> check_slice(const Tensor& x, const OpAttrs& attrs) {
  CAPSULE_TRY(std::size_t axis, normalize_axis("slice", attrs.axis, x.rank()));
  const std::int64_t size = x.dim(axis);
  if (attrs.start < 0 || attrs.start > attrs.end || attrs.end > size) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("slice: range [", attrs.start, ", ", attrs.end, ") along axis ", axis, " of x of shape ",
                             to_string(x.shape()), "; expected 0 <= start <= end <= ", size));
  }
  return axis;
}

RuntimeResult<Tensor> slice_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::Slice, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(std::size_t axis, check_slice(x, attrs));
  std::vector<std::int64_t> dims = x.shape().to_vector();
  dims[axis] = attrs.end - attrs.start;
  CAPSULE_TRY(Shape shape, Shape::make(dims));
  CAPSULE_TRY(Tensor out, Tensor::empty(shape, x.dtype()));
  const Lanes lanes = lanes_around(x.shape(), axis);
  const std::int64_t block = dims[axis] * lanes.inner;
  for (std::int64_t o = 0; o < lanes.outer; ++o) {
    copy_elements(x, (o * lanes.n + attrs.start) * lanes.inner, out, o * block, block);
  }
  return out;
}

/// The gradient of x is zero outside the slice and the output gradient inside it.
Grads slice_backward(Inputs inputs, const Tensor& /*output*/, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::Slice, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(std::size_t axis, check_slice(x, attrs));
  std::vector<std::int64_t> dims = x.shape().to_vector();
  dims[axis] = attrs.end - attrs.start;
  CAPSULE_TRY(Shape shape, Shape::make(dims));
  CAPSULE_CHECK(expect_like_output(Op::Slice, "gradient", grad, shape, x.dtype()));
  CAPSULE_TRY(Tensor dx, Tensor::zeros(x.shape(), x.dtype()));
  const Lanes lanes = lanes_around(x.shape(), axis);
  const std::int64_t block = dims[axis] * lanes.inner;
  for (std::int64_t o = 0; o < lanes.outer; ++o) {
    copy_elements(grad, o * block, dx, (o * lanes.n + attrs.start) * lanes.inner, block);
  }
  return std::vector<Tensor>{dx};
}

// ---------------------------------------------------------------------------------------------
// gather and scatter_add along attrs.axis at attrs.indices.

/// Checks every index against the size of the indexed axis.
RuntimeStatus check_indices(Op op, const OpAttrs& attrs, std::size_t axis, const Tensor& indexed) {
  const std::int64_t size = indexed.dim(axis);
  for (std::size_t i = 0; i < attrs.indices.size(); ++i) {
    const std::int64_t index = attrs.indices[i];
    if (index < 0 || index >= size) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(to_string(op), ": index ", index, " at position ", i, " is out of range for axis ",
                               axis, " of size ", size, " in shape ", to_string(indexed.shape()),
                               "; expected 0 <= index < ", size));
    }
  }
  return std::monostate{};
}

/// `indexed`'s shape with the axis resized to the number of indices.
RuntimeResult<Shape> indexed_shape(const Tensor& indexed, std::size_t axis, const OpAttrs& attrs) {
  std::vector<std::int64_t> dims = indexed.shape().to_vector();
  dims[axis] = static_cast<std::int64_t>(attrs.indices.size());
  return Shape::make(dims);
}

/// dst[.., indices[i], ..] += src[.., i, ..] for increasing i: each dst element adds its terms in
/// increasing i after whatever dst already holds (fixed-left). `dst` has `indexed`'s shape.
void scatter_add_into(const Tensor& src, Tensor& dst, std::size_t axis, const std::vector<std::int64_t>& indices) {
  const Lanes lanes = lanes_around(dst.shape(), axis);
  const auto m = static_cast<std::int64_t>(indices.size());
  with_dtype(dst.dtype(), [&]<class T>() {
    const T* s = src.data<T>();
    T* d = dst.mutable_data<T>();
    for (std::int64_t o = 0; o < lanes.outer; ++o) {
      for (std::int64_t i = 0; i < m; ++i) {
        T* row = d + (o * lanes.n + indices[static_cast<std::size_t>(i)]) * lanes.inner;
        const T* from = s + (o * m + i) * lanes.inner;
        for (std::int64_t e = 0; e < lanes.inner; ++e) row[e] = row[e] + from[e];
      }
    }
  });
}

/// out[.., i, ..] = x[.., indices[i], ..].
RuntimeResult<Tensor> gather_rows(const Tensor& x, std::size_t axis, const OpAttrs& attrs) {
  CAPSULE_TRY(Shape shape, indexed_shape(x, axis, attrs));
  CAPSULE_TRY(Tensor out, Tensor::empty(shape, x.dtype()));
  const Lanes lanes = lanes_around(x.shape(), axis);
  const auto m = static_cast<std::int64_t>(attrs.indices.size());
  // When x is empty (outer = 0) so is the output: m > 0 needs a non-empty axis (every index is
  // below its size), and the other dims are shared.
  for (std::int64_t o = 0; o < lanes.outer; ++o) {
    for (std::int64_t i = 0; i < m; ++i) {
      copy_elements(x, (o * lanes.n + attrs.indices[static_cast<std::size_t>(i)]) * lanes.inner, out,
                    (o * m + i) * lanes.inner, lanes.inner);
    }
  }
  return out;
}

RuntimeResult<Tensor> gather_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::Gather, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(std::size_t axis, normalize_axis("gather", attrs.axis, x.rank()));
  CAPSULE_CHECK(check_indices(Op::Gather, attrs, axis, x));
  return gather_rows(x, axis, attrs);
}

/// The gradient of x scatters the output gradient back into zeros; repeated indices add up
/// fixed-left in increasing position.
Grads gather_backward(Inputs inputs, const Tensor& /*output*/, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::Gather, inputs, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(std::size_t axis, normalize_axis("gather", attrs.axis, x.rank()));
  CAPSULE_CHECK(check_indices(Op::Gather, attrs, axis, x));
  CAPSULE_TRY(Shape shape, indexed_shape(x, axis, attrs));
  CAPSULE_CHECK(expect_like_output(Op::Gather, "gradient", grad, shape, x.dtype()));
  CAPSULE_TRY(Tensor dx, Tensor::zeros(x.shape(), x.dtype()));
  scatter_add_into(grad, dx, axis, attrs.indices);
  return std::vector<Tensor>{dx};
}

/// Checks (base, src) of scatter_add and returns the axis.
RuntimeResult<std::size_t> check_scatter(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_inputs(Op::ScatterAdd, inputs, 2));
  const Tensor& base = inputs[0];
  const Tensor& src = inputs[1];
  CAPSULE_TRY(std::size_t axis, normalize_axis("scatter_add", attrs.axis, base.rank()));
  CAPSULE_CHECK(check_indices(Op::ScatterAdd, attrs, axis, base));
  CAPSULE_TRY(Shape want, indexed_shape(base, axis, attrs));
  if (src.shape() != want) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str("scatter_add: src has shape ", to_string(src.shape()), " but base ",
                             to_string(base.shape()), " with ", attrs.indices.size(), " indices along axis ", axis,
                             " needs ", to_string(want), "; expected src of shape ", to_string(want)));
  }
  return axis;
}

RuntimeResult<Tensor> scatter_add_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(std::size_t axis, check_scatter(inputs, attrs));
  CAPSULE_TRY(Tensor out, inputs[0].clone());
  scatter_add_into(inputs[1], out, axis, attrs.indices);
  return out;
}

/// grad base = g (a copy, so no gradient aliases another); grad src = gather(g).
Grads scatter_add_backward(Inputs inputs, const Tensor& /*output*/, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_TRY(std::size_t axis, check_scatter(inputs, attrs));
  CAPSULE_CHECK(expect_like_output(Op::ScatterAdd, "gradient", grad, inputs[0].shape(), inputs[0].dtype()));
  CAPSULE_TRY(Tensor grad_base, grad.clone());
  CAPSULE_TRY(Tensor grad_src, gather_rows(grad, axis, attrs));
  return std::vector<Tensor>{grad_base, grad_src};
}

}  // namespace

RuntimeStatus register_shape_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(registry.add(spec_for(Op::Reshape, reshape_forward, reshape_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Permute, permute_forward, permute_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Broadcast, broadcast_forward, broadcast_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Concat, concat_forward, concat_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Slice, slice_forward, slice_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Gather, gather_forward, gather_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::ScatterAdd, scatter_add_forward, scatter_add_backward)));
  return std::monostate{};
}

}  // namespace capsule::reference
