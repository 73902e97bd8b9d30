// SPDX-License-Identifier: Apache-2.0
// The cuDNN handlers of conv and conv_transpose (provider cudnn, device cuda), forward and local
// VJP (backend-vjp), with the semantics of capsule/runtime/op_args.hpp and the reference's checks.
//
// Every cuDNN call is a one-operation graph over packed NCHW tensors, CUDNN_CROSS_CORRELATION
// (what the reference computes), compute type = the tensors' type, alpha 1 and beta 0:
//   conv forward            CONVOLUTION_FORWARD        X = x,  W = w,  Y = y
//   conv backward           BACKWARD_DATA              DX = dx, W = w, DY = g
//                           BACKWARD_FILTER            X = x, DW = dw, DY = g
//   conv_transpose forward  BACKWARD_DATA              DX = y, W = w, DY = x
//   conv_transpose backward CONVOLUTION_FORWARD        X = g, W = w, Y = dx
//                           BACKWARD_FILTER            X = g, DW = dw, DY = x
// Groups are implied by the dims (cuDNN reads groups = X channels / W dim 1), as in our weight
// layouts. The bias is our own kernel (added once after the sum, as the reference does), and its
// gradient a deterministic per-channel sum (small_kernels.cu). A 1-D call [n, c, l] runs as the
// 2-D [n, c, 1, l].
#include <array>
#include <vector>

#include "cudnn_graph.hpp"
#include "cudnn_handlers.hpp"
#include "handler_spec.hpp"
#include "cudnn_spatial.hpp"
#include "small_kernels.hpp"

namespace capsule::cuda {
namespace {

using Grads = RuntimeResult<std::vector<Tensor>>;
using Dims4 = std::array<std::int64_t, 4>;

struct ConvGeometry {
  Pair stride{1, 1}, pad{0, 0}, dil{1, 1};
};

/// A validated conv (transposed = false) or conv_transpose call.
struct ConvPlan {
  ConvGeometry geo;
  Dims4 in{}, weight{}, out{};
  std::vector<std::int64_t> out_shape;
  bool has_bias = false;
};

RuntimeResult<ConvPlan> plan_conv(std::string_view op, Inputs inputs, const OpAttrs& attrs, bool transposed) {
  CAPSULE_CHECK(expect_device_inputs(op, inputs, 2, 3));
  const Tensor& x = inputs[0];
  const Tensor& w = inputs[1];
  CAPSULE_TRY(std::size_t spatial, spatial_rank(op, x));
  const char* layout = transposed ? "[c, o/groups, k..]" : "[o, c/groups, k..]";
  if (w.rank() != x.rank()) {
    return shape_error(op, str("weight has shape ", to_string(w.shape()), " for input ", to_string(x.shape()),
                               "; expected a weight ", layout, " of rank ", x.rank()));
  }
  const std::int64_t g = attrs.groups;
  if (g < 1) return runtime_error(RuntimeCode::InvalidArgument, str(op, ": groups is ", g, "; expected >= 1"));
  ConvPlan plan;
  CAPSULE_TRY(plan.geo.stride, spatial_param(op, "stride", attrs.stride, spatial, 1, 1, 1));
  CAPSULE_TRY(plan.geo.pad, spatial_param(op, "padding", attrs.padding, spatial, 0, 0, 0));
  CAPSULE_TRY(plan.geo.dil, spatial_param(op, "dilation", attrs.dilation, spatial, 1, 1, 1));
  plan.in = dims4(x);
  plan.weight = dims4(w);
  const std::int64_t c = plan.in[1];
  std::int64_t out_channels = 0;
  if (!transposed) {
    if (c % g != 0 || plan.weight[0] % g != 0 || plan.weight[1] * g != c) {
      return shape_error(op, str("input ", to_string(x.shape()), " and weight ", to_string(w.shape()), " with groups ",
                                 g, " disagree; expected c and o divisible by groups and weight ", layout,
                                 " with c/groups = ", c % g == 0 ? c / g : c, " input channels"));
    }
    out_channels = plan.weight[0];
  } else {
    if (c % g != 0 || plan.weight[0] != c) {
      return shape_error(op, str("input ", to_string(x.shape()), " and weight ", to_string(w.shape()), " with groups ",
                                 g, " disagree; expected c divisible by groups and a weight ", layout,
                                 " whose first dim is c = ", c));
    }
    CAPSULE_TRY(out_channels, checked_mul(str(op, " output channels"), plan.weight[1], g));
  }
  if (plan.weight[2] < 1 || plan.weight[3] < 1) {
    return shape_error(op, str("weight ", to_string(w.shape()), " has an empty kernel; expected kernel sizes >= 1"));
  }
  Pair out_size{};
  if (!transposed) {
    for (std::size_t a = 0; a < 2; ++a) {
      CAPSULE_TRY(out_size[a], window_count(op, plan.in[2 + a], plan.weight[2 + a], plan.geo.stride[a],
                                            plan.geo.pad[a], plan.geo.dil[a]));
    }
  } else {
    CAPSULE_TRY(Pair out_pad, spatial_param(op, "output_padding", attrs.output_padding, spatial, 0, 0, 0));
    for (std::size_t a = 0; a < 2; ++a) {
      if (out_pad[a] >= plan.geo.stride[a] && out_pad[a] >= plan.geo.dil[a]) {
        return runtime_error(RuntimeCode::InvalidArgument,
                             str(op, ": output_padding ", join_ints(attrs.output_padding), " is not below stride ",
                                 join_ints(attrs.stride), " or dilation ", join_ints(attrs.dilation),
                                 "; expected output_padding < max(stride, dilation)"));
      }
      // cuDNN derives the transposed size from the forward convolution's, which cannot express
      // an output_padding of a whole stride or more (the reference allows it below dilation).
      if (out_pad[a] >= plan.geo.stride[a]) {
        return runtime_error(RuntimeCode::InvalidArgument,
                             str(op, ": output_padding ", join_ints(attrs.output_padding), " is not below stride ",
                                 join_ints(attrs.stride), "; the cuDNN handler needs output_padding < stride "
                                 "(cuDNN's backward-data sizes cannot express more)"));
      }
      if (plan.in[2 + a] < 1) {
        return shape_error(op, str("input ", to_string(x.shape()), " has an empty spatial dim; expected sizes >= 1"));
      }
      // (in − 1)·stride − 2·pad + dil·(k − 1) + output_padding + 1
      CAPSULE_TRY(std::int64_t size, checked_mul(str(op, " output size"), plan.in[2 + a] - 1, plan.geo.stride[a]));
      CAPSULE_TRY(std::int64_t span, checked_mul(str(op, " output size"), plan.geo.dil[a], plan.weight[2 + a] - 1));
      CAPSULE_TRY(size, checked_add(str(op, " output size"), size, span));
      CAPSULE_TRY(size, checked_add(str(op, " output size"), size, out_pad[a] + 1));
      CAPSULE_TRY(std::int64_t twice, checked_mul(str(op, " padding"), plan.geo.pad[a], 2));
      size = size - twice;
      if (size < 1) {
        return shape_error(op, str("input ", to_string(x.shape()), " with weight ", to_string(w.shape()),
                                   " and padding ", join_ints(attrs.padding), " gives output size ", size,
                                   "; expected a positive size"));
      }
      out_size[a] = size;
    }
  }
  plan.out = {plan.in[0], out_channels, out_size[0], out_size[1]};
  plan.out_shape = spatial_shape(x, out_channels, out_size[0], out_size[1]);
  plan.has_bias = inputs.size() > 2 && inputs[2].defined();
  if (plan.has_bias && (inputs[2].rank() != 1 || inputs[2].dim(0) != out_channels)) {
    return shape_error(op, str("bias has shape ", to_string(inputs[2].shape()), "; expected [", out_channels,
                               "] (the output channels of weight ", to_string(w.shape()), ")"));
  }
  return plan;
}

/// Which operation of a convolution X → Y under W a graph computes; X, W and Y keep their uids
/// whichever of them is the output.
enum class ConvKind : std::int64_t { Forward = 1, BackwardData = 2, BackwardFilter = 3 };
constexpr std::int64_t kUidX = 1, kUidW = 2, kUidY = 3;

RuntimeResult<PlanPtr> build_conv_plan(std::string_view op, const StartedDevice& device, ConvKind kind, DType dtype,
                                       std::int64_t align, const Dims4& x, const Dims4& w, const Dims4& y,
                                       const ConvGeometry& geo) {
  CAPSULE_TRY(Descriptor xt, make_tensor(op, "x", kUidX, x, dtype, align));
  CAPSULE_TRY(Descriptor wt, make_tensor(op, "w", kUidW, w, dtype, align));
  CAPSULE_TRY(Descriptor yt, make_tensor(op, "y", kUidY, y, dtype, align));
  DescriptorBuilder conv(op, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "the convolution");
  conv.set_value(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, cudnn_dtype(dtype));
  conv.set_value(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, CUDNN_CROSS_CORRELATION);
  conv.set_int64(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, 2);
  conv.set_int64s(CUDNN_ATTR_CONVOLUTION_DILATIONS, geo.dil);
  conv.set_int64s(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, geo.stride);
  conv.set_int64s(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, geo.pad);
  conv.set_int64s(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, geo.pad);
  CAPSULE_TRY(Descriptor conv_desc, conv.finalize());

  cudnnBackendDescriptorType_t type = CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR;
  std::array<cudnnBackendAttributeName_t, 6> names{  // x, w, y, conv, alpha, beta
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA};
  std::string_view graph = "convolution forward";
  if (kind == ConvKind::BackwardData) {
    type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR;
    names = {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
             CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,        CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
             CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA};
    graph = "convolution backward-data";
  } else if (kind == ConvKind::BackwardFilter) {
    type = CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR;
    names = {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
             CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
             CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,   CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
    graph = "convolution backward-filter";
  }
  DescriptorBuilder operation(op, type, str("the ", graph, " operation"));
  operation.set_descriptor(names[0], xt).set_descriptor(names[1], wt).set_descriptor(names[2], yt);
  operation.set_descriptor(names[3], conv_desc);
  if (dtype == DType::F32) {
    operation.set_value(names[4], CUDNN_TYPE_FLOAT, 1.0f).set_value(names[5], CUDNN_TYPE_FLOAT, 0.0f);
  } else {
    operation.set_value(names[4], CUDNN_TYPE_DOUBLE, 1.0).set_value(names[5], CUDNN_TYPE_DOUBLE, 0.0);
  }
  CAPSULE_TRY(Descriptor operation_desc, operation.finalize());
  std::vector<Descriptor> operations;
  operations.push_back(std::move(operation_desc));
  std::vector<Descriptor> parts;
  for (Descriptor* d : {&xt, &wt, &yt, &conv_desc}) parts.push_back(std::move(*d));
  CAPSULE_TRY(PlanPtr plan, build_plan(op, device, std::move(operations), std::move(parts), dtype, graph));
  return plan;
}

/// Runs one convolution graph of `kind` on device buffers (its plan cached per kind, dtype,
/// alignment, dims and geometry).
RuntimeStatus run_conv(std::string_view op, const StartedDevice& device, ConvKind kind, DType dtype, const Dims4& x,
                       const void* x_data, const Dims4& w, const void* w_data, const Dims4& y, const void* y_data,
                       const ConvGeometry& geo) {
  const std::int64_t align = common_alignment({x_data, w_data, y_data});
  std::vector<std::int64_t> key{static_cast<std::int64_t>(PlanFamily::Conv), static_cast<std::int64_t>(kind),
                                static_cast<std::int64_t>(dtype), align};
  for (const Dims4* d : {&x, &w, &y}) key.insert(key.end(), d->begin(), d->end());
  for (const Pair* p : {&geo.stride, &geo.pad, &geo.dil}) key.insert(key.end(), p->begin(), p->end());
  CAPSULE_TRY(PlanPtr plan, cached_plan(op, device, key, dtype, [&] {
                return build_conv_plan(op, device, kind, dtype, align, x, w, y, geo);
              }));
  const std::array<Binding, 3> bindings{Binding{kUidX, x_data}, Binding{kUidW, w_data}, Binding{kUidY, y_data}};
  return execute_plan(op, device, *plan, bindings);
}

std::int64_t plane(const Dims4& d) { return d[2] * d[3]; }

RuntimeResult<Tensor> conv_forward_impl(std::string_view op, Inputs inputs, const OpAttrs& attrs, bool transposed) {
  CAPSULE_TRY(ConvPlan plan, plan_conv(op, inputs, attrs, transposed));
  CAPSULE_TRY(const StartedDevice* device, started(op));
  CAPSULE_TRY(Tensor out, new_device_tensor(op, plan.out_shape, inputs[0].dtype()));
  if (out.numel() == 0) return out;
  const Tensor& x = inputs[0];
  const Tensor& w = inputs[1];
  const DType dtype = x.dtype();
  if (x.numel() == 0 || w.numel() == 0) {
    CAPSULE_CHECK(zero_on_stream(op, *device, out));  // a sum over no input channel
  } else if (!transposed) {
    CAPSULE_CHECK(run_conv(op, *device, ConvKind::Forward, dtype, plan.in, x.device_address(), plan.weight,
                           w.device_address(), plan.out, out.device_address(), plan.geo));
  } else {
    CAPSULE_CHECK(run_conv(op, *device, ConvKind::BackwardData, dtype, plan.out, out.device_address(), plan.weight,
                           w.device_address(), plan.in, x.device_address(), plan.geo));
  }
  if (plan.has_bias) {
    const cudaError_t launched =
        dtype == DType::F32
            ? launch_add_channel_bias(mutable_device_ptr<float>(out), device_ptr<float>(inputs[2]), plan.out[0],
                                      plan.out[1], plane(plan.out), device->stream)
            : launch_add_channel_bias(mutable_device_ptr<double>(out), device_ptr<double>(inputs[2]), plan.out[0],
                                      plan.out[1], plane(plan.out), device->stream);
    CAPSULE_CHECK(check_cuda(op, "the bias kernel", launched));
    CAPSULE_CHECK(after_launch(op, *device));
  }
  return out;
}

Grads conv_backward_impl(std::string_view op, Inputs inputs, const Tensor& output, const Tensor& grad,
                         const OpAttrs& attrs, bool transposed) {
  CAPSULE_TRY(ConvPlan plan, plan_conv(op, inputs, attrs, transposed));
  CAPSULE_CHECK(expect_device_grad(op, inputs, output, grad));
  CAPSULE_TRY(Shape expected, Shape::make(plan.out_shape));
  if (!(grad.shape() == expected)) {
    return shape_error(op, str("the output gradient has shape ", to_string(grad.shape()), "; expected ",
                               join_ints(plan.out_shape)));
  }
  CAPSULE_TRY(const StartedDevice* device, started(op));
  const Tensor& x = inputs[0];
  const Tensor& w = inputs[1];
  const DType dtype = x.dtype();
  std::vector<Tensor> grads(inputs.size());
  CAPSULE_TRY(grads[0], new_device_tensor(op, x.shape().dims(), dtype));
  CAPSULE_TRY(grads[1], new_device_tensor(op, w.shape().dims(), dtype));
  if (plan.has_bias) {
    CAPSULE_TRY(grads[2], new_device_tensor(op, inputs[2].shape().dims(), dtype));
  }
  if (grad.numel() == 0 || x.numel() == 0 || w.numel() == 0) {
    // Some factor of every product is empty: both adjoints are sums over nothing.
    CAPSULE_CHECK(zero_on_stream(op, *device, grads[0]));
    CAPSULE_CHECK(zero_on_stream(op, *device, grads[1]));
  } else if (!transposed) {
    CAPSULE_CHECK(run_conv(op, *device, ConvKind::BackwardData, dtype, plan.in, grads[0].device_address(), plan.weight,
                           w.device_address(), plan.out, grad.device_address(), plan.geo));
    CAPSULE_CHECK(run_conv(op, *device, ConvKind::BackwardFilter, dtype, plan.in, x.device_address(), plan.weight,
                           grads[1].device_address(), plan.out, grad.device_address(), plan.geo));
  } else {
    CAPSULE_CHECK(run_conv(op, *device, ConvKind::Forward, dtype, plan.out, grad.device_address(), plan.weight,
                           w.device_address(), plan.in, grads[0].device_address(), plan.geo));
    CAPSULE_CHECK(run_conv(op, *device, ConvKind::BackwardFilter, dtype, plan.out, grad.device_address(), plan.weight,
                           grads[1].device_address(), plan.in, x.device_address(), plan.geo));
  }
  if (plan.has_bias) {
    const cudaError_t launched =
        dtype == DType::F32
            ? launch_channel_sum(device_ptr<float>(grad), mutable_device_ptr<float>(grads[2]), plan.out[0],
                                 plan.out[1], plane(plan.out), device->stream)
            : launch_channel_sum(device_ptr<double>(grad), mutable_device_ptr<double>(grads[2]), plan.out[0],
                                 plan.out[1], plane(plan.out), device->stream);
    CAPSULE_CHECK(check_cuda(op, "the bias-gradient kernel", launched));
    CAPSULE_CHECK(after_launch(op, *device));
  }
  return grads;
}

RuntimeResult<Tensor> conv_forward(Inputs inputs, const OpAttrs& attrs) {
  return conv_forward_impl("conv", inputs, attrs, false);
}
Grads conv_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  return conv_backward_impl("conv", inputs, output, grad, attrs, false);
}
RuntimeResult<Tensor> conv_transpose_forward(Inputs inputs, const OpAttrs& attrs) {
  return conv_forward_impl("conv_transpose", inputs, attrs, true);
}
Grads conv_transpose_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  return conv_backward_impl("conv_transpose", inputs, output, grad, attrs, true);
}

}  // namespace

RuntimeStatus register_cudnn_conv_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(registry.add(vendor_cuda_spec(Op::Conv, Provider::Cudnn, conv_forward, conv_backward)));
  CAPSULE_CHECK(registry.add(
      vendor_cuda_spec(Op::ConvTranspose, Provider::Cudnn, conv_transpose_forward, conv_transpose_backward)));
  return std::monostate{};
}

}  // namespace capsule::cuda
