// SPDX-License-Identifier: Apache-2.0
// The cuDNN handler of batch_norm (provider cudnn, device cuda), forward and local VJP
// (backend-vjp), with the semantics of capsule/runtime/op_args.hpp: x [n, c, ..], gamma [c]? and
// beta [c]?, batch statistics per channel over n and every spatial position, biased variance,
// payload eps (0 = 1e-5). Without gamma the scale is 1, without beta the shift is 0, and neither
// takes a gradient.
//
// x is viewed as the packed NCHW [n, c, S, 1] (S = the product of the spatial dims; the per-
// channel groups are the same for every rank), the statistics as [1, c, 1, 1]:
//   forward   NORM_FORWARD  mode CUDNN_BATCH_NORM, phase CUDNN_NORM_FWD_TRAINING; X, SCALE, BIAS,
//             EPSILON (a by-value host scalar) in; Y, MEAN, INV_VARIANCE (1/sqrt(var + eps)) out.
//             No running statistics (the op has none).
//   backward  NORM_BACKWARD mode CUDNN_BATCH_NORM; X, DY, SCALE and the forward's MEAN and
//             INV_VARIANCE in; DX, DSCALE, DBIAS out.
// When cuDNN has no engine for the packed NCHW graph, the same graph runs on channels-last copies
// of x, y, dy and dx ([n, S, c], our transpose kernel; run_any_layout), and failing that on
// channels-last copies with c rounded up to a multiple of 8, then of 32 (kPadChannelsTo).
// The forward's statistics are kept for the backward (forward_saving / backward_saved, as the
// LibTorch handler does); a backward without them (untaped, or the plain `backward`) reruns the
// forward graph to get the same ones.
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <vector>

#include "cudnn_graph.hpp"
#include "cudnn_handlers.hpp"
#include "handler_spec.hpp"
#include "small_kernels.hpp"

namespace capsule::cuda {
namespace {

using Grads = RuntimeResult<std::vector<Tensor>>;
using Dims4 = std::array<std::int64_t, 4>;
constexpr std::string_view kOp = "batch_norm";
/// The last layouts tried (run_any_layout): channels-last with the channel count rounded up to a
/// multiple of 8, then of 32. The added channels hold zeros; batch norm treats every channel on
/// its own, so they never touch a real channel's result, and they are dropped. cuDNN's batch-norm
/// engines block over channels and may refuse a count they cannot block (cudnn-frontend issue
/// 133: C = 35 refused). Our first GPU run failed on its first case, C = 3, before this path
/// existed (docs/gpu-runs/2026-12-04-h200); since then cuDNN 9.19 on an H200 has run 2 and 3
/// channels padded to 8 (docs/gpu-runs/2026-12-04-h200-1303).
constexpr std::array<std::int64_t, 2> kPadChannelsTo{8, 32};

struct NormPlan {
  Dims4 x{}, stats{};
  double eps = 1e-5;
  bool has_gamma = false, has_beta = false;
};

RuntimeResult<NormPlan> plan_norm(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_device_inputs(kOp, inputs, 1, 3));
  const Tensor& x = inputs[0];
  if (x.rank() < 2) {
    return shape_error(kOp, str("input has shape ", to_string(x.shape()), "; expected [n, c, ..] of rank >= 2"));
  }
  NormPlan plan;
  if (attrs.eps != 0.0) {
    if (!std::isfinite(attrs.eps) || attrs.eps < 0) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(kOp, ": eps is ", attrs.eps, "; expected a finite value >= 0 (0 = default 1e-5)"));
    }
    plan.eps = attrs.eps;
  }
  std::int64_t spatial = 1;
  for (std::size_t i = 2; i < x.rank(); ++i) spatial *= x.dim(i);  // fits: x's element count does
  const std::int64_t c = x.dim(1);
  plan.x = {x.dim(0), c, spatial, 1};
  plan.stats = {1, c, 1, 1};
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    if (inputs[i].rank() != 1 || inputs[i].dim(0) != c) {
      return shape_error(kOp, str(i == 1 ? "gamma" : "beta", " has shape ", to_string(inputs[i].shape()),
                                  "; expected [", c, "] (the channels of input ", to_string(x.shape()), ")"));
    }
  }
  plan.has_gamma = inputs.size() > 1 && inputs[1].defined();
  plan.has_beta = inputs.size() > 2 && inputs[2].defined();
  return plan;
}

/// What the forward keeps for the adjoint: cuDNN's saved mean and inverse standard deviation.
struct NormState final : SavedState {
  Tensor mean;
  Tensor inv_std;
};

constexpr std::int64_t kUidX = 1, kUidMean = 2, kUidInvStd = 3, kUidScale = 4, kUidBias = 5, kUidEps = 6, kUidY = 7,
                       kUidDy = 8, kUidDScale = 9, kUidDBias = 10, kUidDx = 11;

/// `plan` holds the graph's channel count; `call_channels` the call's (fewer in a channel-padded run).
RuntimeResult<PlanPtr> build_norm_plan(const StartedDevice& device, bool backward, DType dtype, std::int64_t align,
                                       const NormPlan& plan, MemoryLayout layout, std::int64_t call_channels) {
  const std::string suffix =
      layout != MemoryLayout::Nhwc ? std::string()
      : plan.x[1] == call_channels ? std::string(" (channels-last copy)")
                                   : str(" (channels-last copy, ", call_channels, " channels padded to ", plan.x[1], ")");
  // The per-channel tensors [1, c, 1, 1] take x's layout too: the same bytes either way, but
  // cuDNN reads a graph's layout from every tensor's strides, and its channels-last norm engines
  // expect [c, 1, c, c] beside a channels-last x.
  CAPSULE_TRY(Descriptor x, make_tensor(kOp, "x", kUidX, plan.x, dtype, align, false, layout));
  CAPSULE_TRY(Descriptor mean, make_tensor(kOp, "mean", kUidMean, plan.stats, dtype, align, false, layout));
  CAPSULE_TRY(Descriptor inv_std, make_tensor(kOp, "inverse std", kUidInvStd, plan.stats, dtype, align, false, layout));
  CAPSULE_TRY(Descriptor scale, make_tensor(kOp, "scale", kUidScale, plan.stats, dtype, align, false, layout));
  std::vector<Descriptor> operations;
  if (!backward) {
    CAPSULE_TRY(Descriptor bias, make_tensor(kOp, "bias", kUidBias, plan.stats, dtype, align, false, layout));
    const std::array<std::int64_t, 4> scalar{1, 1, 1, 1};
    CAPSULE_TRY(Descriptor eps, make_tensor(kOp, "epsilon", kUidEps, scalar, dtype,
                                            static_cast<std::int64_t>(element_size(dtype)), /*by_value=*/true));
    CAPSULE_TRY(Descriptor y, make_tensor(kOp, "y", kUidY, plan.x, dtype, align, false, layout));
    DescriptorBuilder operation(kOp, CUDNN_BACKEND_OPERATION_NORM_FORWARD_DESCRIPTOR, "the norm forward operation");
    operation.set_value(CUDNN_ATTR_OPERATION_NORM_FWD_MODE, CUDNN_TYPE_NORM_MODE, CUDNN_BATCH_NORM);
    operation.set_value(CUDNN_ATTR_OPERATION_NORM_FWD_PHASE, CUDNN_TYPE_NORM_FWD_PHASE, CUDNN_NORM_FWD_TRAINING);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_FWD_XDESC, x);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_FWD_MEAN_DESC, mean);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_FWD_INV_VARIANCE_DESC, inv_std);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_FWD_SCALE_DESC, scale);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_FWD_BIAS_DESC, bias);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_FWD_EPSILON_DESC, eps);
    operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_FWD_YDESC, y);
    CAPSULE_TRY(Descriptor d, operation.finalize());
    operations.push_back(std::move(d));
    std::vector<Descriptor> parts;
    for (Descriptor* t : {&x, &mean, &inv_std, &scale, &bias, &eps, &y}) parts.push_back(std::move(*t));
    return build_plan(kOp, device, std::move(operations), std::move(parts), dtype, str("batch norm forward", suffix));
  }
  CAPSULE_TRY(Descriptor dy, make_tensor(kOp, "dy", kUidDy, plan.x, dtype, align, false, layout));
  CAPSULE_TRY(Descriptor dscale, make_tensor(kOp, "dscale", kUidDScale, plan.stats, dtype, align, false, layout));
  CAPSULE_TRY(Descriptor dbias, make_tensor(kOp, "dbias", kUidDBias, plan.stats, dtype, align, false, layout));
  CAPSULE_TRY(Descriptor dx, make_tensor(kOp, "dx", kUidDx, plan.x, dtype, align, false, layout));
  DescriptorBuilder operation(kOp, CUDNN_BACKEND_OPERATION_NORM_BACKWARD_DESCRIPTOR, "the norm backward operation");
  operation.set_value(CUDNN_ATTR_OPERATION_NORM_BWD_MODE, CUDNN_TYPE_NORM_MODE, CUDNN_BATCH_NORM);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_BWD_XDESC, x);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_BWD_MEAN_DESC, mean);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_BWD_INV_VARIANCE_DESC, inv_std);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_BWD_DYDESC, dy);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_BWD_SCALE_DESC, scale);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_BWD_DSCALE_DESC, dscale);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_BWD_DBIAS_DESC, dbias);
  operation.set_descriptor(CUDNN_ATTR_OPERATION_NORM_BWD_DXDESC, dx);
  CAPSULE_TRY(Descriptor d, operation.finalize());
  operations.push_back(std::move(d));
  std::vector<Descriptor> parts;
  for (Descriptor* t : {&x, &mean, &inv_std, &scale, &dy, &dscale, &dbias, &dx}) parts.push_back(std::move(*t));
  return build_plan(kOp, device, std::move(operations), std::move(parts), dtype, str("batch norm backward", suffix));
}

/// Runs the forward (backward = false) or backward graph on `operands` (device buffers, and the
/// by-value epsilon on the host), packed NCHW or else on channels-last copies (run_any_layout).
RuntimeStatus run_norm(const StartedDevice& device, bool backward, DType dtype, const NormPlan& plan,
                       std::span<const Operand> operands) {
  auto plan_for = [&](MemoryLayout layout, std::int64_t align, std::int64_t channels) {
    NormPlan shaped = plan;  // the call's channels, or the padded count of a channel-padded run
    shaped.x[1] = channels;
    shaped.stats[1] = channels;
    // The call's channel count is in the key too: a padded 3 → 8 graph is the same graph as a
    // real 8-channel one, but its plan's description (plan_report) says it was padded.
    std::vector<std::int64_t> key{static_cast<std::int64_t>(PlanFamily::BatchNorm), backward ? 1 : 0,
                                  static_cast<std::int64_t>(dtype), align, static_cast<std::int64_t>(layout),
                                  plan.x[1]};
    key.insert(key.end(), shaped.x.begin(), shaped.x.end());
    return cached_plan(kOp, device, key, dtype,
                       [&] { return build_norm_plan(device, backward, dtype, align, shaped, layout, plan.x[1]); });
  };
  return run_any_layout(kOp, device, plan.x[0], plan.x[1], operands, plan_for, kPadChannelsTo);
}

/// gamma, or ones when the call has none (cuDNN's batch norm always scales).
RuntimeResult<Tensor> scale_of(const StartedDevice& device, Inputs inputs, const NormPlan& plan, DType dtype) {
  if (plan.has_gamma) return inputs[1];
  const std::array<std::int64_t, 1> dims{plan.x[1]};
  CAPSULE_TRY(Tensor ones, new_device_tensor(kOp, dims, dtype));
  const cudaError_t launched = dtype == DType::F32
                                   ? launch_fill(mutable_device_ptr<float>(ones), 1.0f, plan.x[1], device.stream)
                                   : launch_fill(mutable_device_ptr<double>(ones), 1.0, plan.x[1], device.stream);
  CAPSULE_CHECK(check_cuda(kOp, "filling the unit scale", launched));
  CAPSULE_CHECK(after_launch(kOp, device));
  return ones;
}

/// The forward graph into `y`; returns the statistics.
RuntimeResult<std::unique_ptr<NormState>> norm_into(const StartedDevice& device, Inputs inputs, const NormPlan& plan,
                                                    Tensor& y) {
  const DType dtype = inputs[0].dtype();
  const std::array<std::int64_t, 1> dims{plan.x[1]};
  auto state = std::make_unique<NormState>();
  CAPSULE_TRY(state->mean, new_device_tensor(kOp, dims, dtype));
  CAPSULE_TRY(state->inv_std, new_device_tensor(kOp, dims, dtype));
  CAPSULE_TRY(Tensor scale, scale_of(device, inputs, plan, dtype));
  Tensor bias;
  if (plan.has_beta) {
    bias = inputs[2];
  } else {
    CAPSULE_TRY(bias, new_device_tensor(kOp, dims, dtype));
    CAPSULE_CHECK(zero_on_stream(kOp, device, bias));
  }
  const float eps32 = static_cast<float>(plan.eps);
  const double eps64 = plan.eps;
  const void* eps = dtype == DType::F32 ? static_cast<const void*>(&eps32) : static_cast<const void*>(&eps64);
  const std::int64_t spatial = plan.x[2];
  const std::array<Operand, 7> operands{Operand{kUidX, inputs[0], nullptr, false, spatial},
                                        Operand{kUidMean, state->mean, nullptr, true, 0, true},
                                        Operand{kUidInvStd, state->inv_std, nullptr, true, 0, true},
                                        Operand{kUidScale, scale, nullptr, false, 0, true},
                                        Operand{kUidBias, bias, nullptr, false, 0, true},
                                        Operand{kUidEps, Tensor(), eps, false, 0},
                                        Operand{kUidY, y, nullptr, true, spatial}};
  CAPSULE_CHECK(run_norm(device, false, dtype, plan, operands));
  return state;
}

RuntimeResult<SavingForwardResult> batch_norm_forward_saving(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(NormPlan plan, plan_norm(inputs, attrs));
  CAPSULE_TRY(const StartedDevice* device, started(kOp));
  CAPSULE_TRY(Tensor y, new_device_tensor(kOp, inputs[0].shape().dims(), inputs[0].dtype()));
  // Nothing to normalise (no batch entry, position or channel); no state to keep.
  if (y.numel() == 0) return SavingForwardResult{y, nullptr};
  CAPSULE_TRY(std::unique_ptr<NormState> state, norm_into(*device, inputs, plan, y));
  return SavingForwardResult{y, std::move(state)};
}

RuntimeResult<Tensor> batch_norm_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_TRY(SavingForwardResult result, batch_norm_forward_saving(inputs, attrs));
  return result.output;
}

Grads batch_norm_backward_saved(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs,
                                const SavedState* saved) {
  CAPSULE_TRY(NormPlan plan, plan_norm(inputs, attrs));
  CAPSULE_CHECK(expect_device_grad(kOp, inputs, output, grad));
  if (!(grad.shape() == inputs[0].shape())) {
    return shape_error(kOp, str("the output gradient has shape ", to_string(grad.shape()), "; expected the input's ",
                                to_string(inputs[0].shape())));
  }
  CAPSULE_TRY(const StartedDevice* device, started(kOp));
  const DType dtype = inputs[0].dtype();
  const std::array<std::int64_t, 1> dims{plan.x[1]};
  std::vector<Tensor> grads(inputs.size());
  CAPSULE_TRY(grads[0], new_device_tensor(kOp, inputs[0].shape().dims(), dtype));
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].defined()) {
      CAPSULE_TRY(grads[i], new_device_tensor(kOp, dims, dtype));
    }
  }
  if (inputs[0].numel() == 0) {
    // No element: every gradient is zero (the affine ones too), as the reference's.
    for (Tensor& g : grads) {
      if (g.defined()) CAPSULE_CHECK(zero_on_stream(kOp, *device, g));
    }
    return grads;
  }
  const auto* state = dynamic_cast<const NormState*>(saved);
  std::unique_ptr<NormState> recomputed;
  if (state == nullptr) {
    CAPSULE_TRY(Tensor scratch, new_device_tensor(kOp, inputs[0].shape().dims(), dtype));
    CAPSULE_TRY(recomputed, norm_into(*device, inputs, plan, scratch));
    state = recomputed.get();
  }
  CAPSULE_TRY(Tensor scale, scale_of(*device, inputs, plan, dtype));
  // cuDNN always writes both affine gradients; a call without gamma or beta gets a scratch one.
  Tensor dscale = grads.size() > 1 ? grads[1] : Tensor();
  Tensor dbias = grads.size() > 2 ? grads[2] : Tensor();
  if (!dscale.defined()) {
    CAPSULE_TRY(dscale, new_device_tensor(kOp, dims, dtype));
  }
  if (!dbias.defined()) {
    CAPSULE_TRY(dbias, new_device_tensor(kOp, dims, dtype));
  }
  const std::int64_t spatial = plan.x[2];
  const std::array<Operand, 8> operands{Operand{kUidX, inputs[0], nullptr, false, spatial},
                                        Operand{kUidMean, state->mean, nullptr, false, 0, true},
                                        Operand{kUidInvStd, state->inv_std, nullptr, false, 0, true},
                                        Operand{kUidDy, grad, nullptr, false, spatial},
                                        Operand{kUidScale, scale, nullptr, false, 0, true},
                                        Operand{kUidDScale, dscale, nullptr, true, 0, true},
                                        Operand{kUidDBias, dbias, nullptr, true, 0, true},
                                        Operand{kUidDx, grads[0], nullptr, true, spatial}};
  CAPSULE_CHECK(run_norm(*device, true, dtype, plan, operands));
  return grads;
}

Grads batch_norm_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  return batch_norm_backward_saved(inputs, output, grad, attrs, nullptr);
}

}  // namespace

RuntimeStatus register_cudnn_norm_handlers(HandlerRegistry& registry) {
  HandlerSpec spec = vendor_cuda_spec(Op::BatchNorm, Provider::Cudnn, batch_norm_forward, batch_norm_backward);
  spec.forward_saving = batch_norm_forward_saving;
  spec.backward_saved = batch_norm_backward_saved;
  return registry.add(std::move(spec));
}

}  // namespace capsule::cuda
