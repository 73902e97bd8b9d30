// SPDX-License-Identifier: Apache-2.0
// The cuDNN handlers of max_pool and avg_pool (provider cudnn, device cuda), forward and local VJP
// (backend-vjp), with the semantics of capsule/runtime/op_args.hpp and the reference's checks.
//
// Each call is a one-operation graph over packed NCHW tensors with one RESAMPLE descriptor
// (spatial dims 2; window, strides and pre/post paddings as integral fractions; compute type =
// the tensors' type):
//   max_pool  CUDNN_RESAMPLE_MAXPOOL, padding mode CUDNN_NEG_INF_PAD (padding never wins a window,
//             so it is ignored, as op_args.hpp says)
//   avg_pool  CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING, padding mode CUDNN_ZERO_PAD (the divisor is
//             the full window and padding adds zeros, as op_args.hpp says)
//   forward   RESAMPLE_FWD   X = x, Y = y
//   backward  RESAMPLE_BWD   DX = dx, DY = g, and for max_pool X = x and Y = the forward's y
//             (cuDNN finds each window's maximum again; no index tensor is kept)
// A 1-D call [n, c, l] runs as the 2-D [n, c, 1, l] with a window of height 1. When cuDNN has no
// engine for the packed NCHW graph, the same graph runs on channels-last (NHWC) copies of x, y,
// dx and dy made by our transpose kernel (run_any_layout); the values are the same.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "cudnn_graph.hpp"
#include "cudnn_handlers.hpp"
#include "handler_spec.hpp"
#include "cudnn_spatial.hpp"

namespace capsule::cuda {
namespace {

using Grads = RuntimeResult<std::vector<Tensor>>;
using Dims4 = std::array<std::int64_t, 4>;

enum class PoolKind : std::int64_t { Max = 1, Avg = 2 };

struct PoolPlan {
  Pair kernel{1, 1}, stride{1, 1}, pad{0, 0};
  Dims4 in{}, out{};
  std::vector<std::int64_t> out_shape;
};

RuntimeResult<PoolPlan> plan_pool(std::string_view op, Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_device_inputs(op, inputs, 1, 1));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(PoolWindow window, pool_window(op, x, attrs));
  PoolPlan plan;
  plan.kernel = window.kernel;
  plan.stride = window.stride;
  plan.pad = window.pad;
  plan.in = dims4(x);
  plan.out = {plan.in[0], plan.in[1], window.out_size[0], window.out_size[1]};
  plan.out_shape = std::move(window.out_shape);
  return plan;
}

constexpr std::int64_t kUidX = 1, kUidY = 2, kUidDx = 3, kUidDy = 4;

std::array<cudnnFraction_t, 2> fractions(const Pair& p) { return {cudnnFraction_t{p[0], 1}, cudnnFraction_t{p[1], 1}}; }

RuntimeResult<PlanPtr> build_pool_plan(std::string_view op, const StartedDevice& device, PoolKind kind,
                                       bool backward, DType dtype, std::int64_t align, const PoolPlan& plan,
                                       MemoryLayout layout) {
  const std::array<cudnnFraction_t, 2> window = fractions(plan.kernel);
  const std::array<cudnnFraction_t, 2> strides = fractions(plan.stride);
  const std::array<cudnnFraction_t, 2> pads = fractions(plan.pad);
  DescriptorBuilder resample(op, CUDNN_BACKEND_RESAMPLE_DESCRIPTOR, "the pooling window");
  resample.set_value(CUDNN_ATTR_RESAMPLE_MODE, CUDNN_TYPE_RESAMPLE_MODE,
                     kind == PoolKind::Max ? CUDNN_RESAMPLE_MAXPOOL : CUDNN_RESAMPLE_AVGPOOL_INCLUDE_PADDING);
  resample.set_value(CUDNN_ATTR_RESAMPLE_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, cudnn_dtype(dtype));
  resample.set_int64(CUDNN_ATTR_RESAMPLE_SPATIAL_DIMS, 2);
  resample.set(CUDNN_ATTR_RESAMPLE_WINDOW_DIMS, CUDNN_TYPE_FRACTION, 2, window.data());
  resample.set(CUDNN_ATTR_RESAMPLE_STRIDES, CUDNN_TYPE_FRACTION, 2, strides.data());
  resample.set(CUDNN_ATTR_RESAMPLE_PRE_PADDINGS, CUDNN_TYPE_FRACTION, 2, pads.data());
  resample.set(CUDNN_ATTR_RESAMPLE_POST_PADDINGS, CUDNN_TYPE_FRACTION, 2, pads.data());
  resample.set_value(CUDNN_ATTR_RESAMPLE_PADDING_MODE, CUDNN_TYPE_PADDING_MODE,
                     kind == PoolKind::Max ? CUDNN_NEG_INF_PAD : CUDNN_ZERO_PAD);
  CAPSULE_TRY(Descriptor resample_desc, resample.finalize());

  std::vector<Descriptor> operations;
  std::vector<Descriptor> parts;
  const std::string graph = str(backward ? "resample backward" : "resample forward",
                                layout == MemoryLayout::Nhwc ? " (channels-last copy)" : "");
  if (!backward) {
    CAPSULE_TRY(Descriptor xt, make_tensor(op, "x", kUidX, plan.in, dtype, align, false, layout));
    CAPSULE_TRY(Descriptor yt, make_tensor(op, "y", kUidY, plan.out, dtype, align, false, layout));
    DescriptorBuilder operation(op, CUDNN_BACKEND_OPERATION_RESAMPLE_FWD_DESCRIPTOR, "the resample forward operation");
    operation.set_descriptor(CUDNN_ATTR_OPERATION_RESAMPLE_FWD_XDESC, xt);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_RESAMPLE_FWD_YDESC, yt);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_RESAMPLE_FWD_DESC, resample_desc);
    CAPSULE_TRY(Descriptor d, operation.finalize());
    operations.push_back(std::move(d));
    parts.push_back(std::move(xt));
    parts.push_back(std::move(yt));
  } else {
    CAPSULE_TRY(Descriptor dxt, make_tensor(op, "dx", kUidDx, plan.in, dtype, align, false, layout));
    CAPSULE_TRY(Descriptor dyt, make_tensor(op, "dy", kUidDy, plan.out, dtype, align, false, layout));
    DescriptorBuilder operation(op, CUDNN_BACKEND_OPERATION_RESAMPLE_BWD_DESCRIPTOR, "the resample backward operation");
    operation.set_descriptor(CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DXDESC, dxt);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DYDESC, dyt);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_RESAMPLE_BWD_DESC, resample_desc);
    // x and y for both modes: max_pool's backward needs them to locate each window's maximum,
    // and cuDNN's backward resample graphs take them in the packed NCHW layout for either mode.
    CAPSULE_TRY(Descriptor xt, make_tensor(op, "x", kUidX, plan.in, dtype, align, false, layout));
    CAPSULE_TRY(Descriptor yt, make_tensor(op, "y", kUidY, plan.out, dtype, align, false, layout));
    operation.set_descriptor(CUDNN_ATTR_OPERATION_RESAMPLE_BWD_XDESC, xt);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_RESAMPLE_BWD_YDESC, yt);
    CAPSULE_TRY(Descriptor d, operation.finalize());
    operations.push_back(std::move(d));
    for (Descriptor* t : {&dxt, &dyt, &xt, &yt}) parts.push_back(std::move(*t));
  }
  parts.push_back(std::move(resample_desc));
  CAPSULE_TRY(PlanPtr built, build_plan(op, device, std::move(operations), std::move(parts), dtype, graph));
  return built;
}

/// Runs the pool's forward (x → y) or backward (g → dx, with x and y) graph on
/// `operands`, packed NCHW or else on channels-last copies (run_any_layout).
RuntimeStatus run_pool(std::string_view op, const StartedDevice& device, PoolKind kind, bool backward, DType dtype,
                       const PoolPlan& plan, std::span<const Operand> operands) {
  // Pools never pad channels (run_any_layout's last argument stays empty), so `channels` is the call's.
  auto plan_for = [&](MemoryLayout layout, std::int64_t align, std::int64_t /*channels*/) {
    std::vector<std::int64_t> key{static_cast<std::int64_t>(PlanFamily::Pool), static_cast<std::int64_t>(kind),
                                  backward ? 1 : 0, static_cast<std::int64_t>(dtype), align,
                                  static_cast<std::int64_t>(layout)};
    for (const Dims4* d : {&plan.in, &plan.out}) key.insert(key.end(), d->begin(), d->end());
    for (const Pair* p : {&plan.kernel, &plan.stride, &plan.pad}) key.insert(key.end(), p->begin(), p->end());
    return cached_plan(op, device, key, dtype,
                       [&] { return build_pool_plan(op, device, kind, backward, dtype, align, plan, layout); });
  };
  return run_any_layout(op, device, plan.in[0], plan.in[1], operands, plan_for);
}

std::int64_t plane(const Dims4& d) { return d[2] * d[3]; }

RuntimeResult<Tensor> pool_forward(std::string_view op, PoolKind kind, Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(PoolPlan plan, plan_pool(op, inputs, attrs));
  CAPSULE_TRY(const StartedDevice* device, started(op));
  CAPSULE_TRY(Tensor out, new_device_tensor(op, plan.out_shape, inputs[0].dtype()));
  if (out.numel() == 0) return out;  // no batch entry or no channel: nothing to pool
  const std::array<Operand, 2> operands{Operand{kUidX, inputs[0], nullptr, false, plane(plan.in)},
                                        Operand{kUidY, out, nullptr, true, plane(plan.out)}};
  CAPSULE_CHECK(run_pool(op, *device, kind, false, out.dtype(), plan, operands));
  return out;
}

Grads pool_backward(std::string_view op, PoolKind kind, Inputs inputs, const Tensor& output, const Tensor& grad,
                    const OpAttrs& attrs) {
  CAPSULE_TRY(PoolPlan plan, plan_pool(op, inputs, attrs));
  CAPSULE_CHECK(expect_device_grad(op, inputs, output, grad));
  CAPSULE_TRY(Shape expected, Shape::make(plan.out_shape));
  if (!(grad.shape() == expected)) {
    return shape_error(op, str("the output gradient has shape ", to_string(grad.shape()), "; expected ",
                               join_ints(plan.out_shape)));
  }
  CAPSULE_TRY(const StartedDevice* device, started(op));
  const Tensor& x = inputs[0];
  CAPSULE_TRY(Tensor dx, new_device_tensor(op, x.shape().dims(), x.dtype()));
  if (grad.numel() == 0) {
    CAPSULE_CHECK(zero_on_stream(op, *device, dx));
    return std::vector<Tensor>{dx};
  }
  std::vector<Operand> operands{Operand{kUidDx, dx, nullptr, true, plane(plan.in)},
                                Operand{kUidDy, grad, nullptr, false, plane(plan.out)}};
  // The forward's output: it locates each window's maximum for max_pool, and cuDNN's backward
  // graph reads it for avg_pool too. expect_device_grad matched its shape and dtype to the
  // gradient's and x's; it must also be on the device, or the call is refused: the handler never
  // recomputes a forward it was not given.
  const Tensor& y = output;
  if (y.device() != Device::Cuda) {
    return runtime_error(RuntimeCode::DeviceMismatch,
                         str(op, ": the forward output is on `", to_string(y.device()), "`, expected `cuda`"));
  }
  operands.push_back(Operand{kUidX, x, nullptr, false, plane(plan.in)});
  operands.push_back(Operand{kUidY, y, nullptr, false, plane(plan.out)});
  CAPSULE_CHECK(run_pool(op, *device, kind, true, x.dtype(), plan, operands));
  return std::vector<Tensor>{dx};
}

RuntimeResult<Tensor> max_pool_forward(Inputs inputs, const OpAttrs& attrs) {
  return pool_forward("max_pool", PoolKind::Max, inputs, attrs);
}
Grads max_pool_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  return pool_backward("max_pool", PoolKind::Max, inputs, output, grad, attrs);
}
RuntimeResult<Tensor> avg_pool_forward(Inputs inputs, const OpAttrs& attrs) {
  return pool_forward("avg_pool", PoolKind::Avg, inputs, attrs);
}
Grads avg_pool_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  return pool_backward("avg_pool", PoolKind::Avg, inputs, output, grad, attrs);
}

}  // namespace

RuntimeStatus register_cudnn_pool_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(registry.add(vendor_cuda_spec(Op::MaxPool, Provider::Cudnn, max_pool_forward, max_pool_backward)));
  CAPSULE_CHECK(registry.add(vendor_cuda_spec(Op::AvgPool, Provider::Cudnn, avg_pool_forward, avg_pool_backward)));
  return std::monostate{};
}

}  // namespace capsule::cuda
