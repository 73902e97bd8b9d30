// SPDX-License-Identifier: Apache-2.0
// The special-value cases of special_cases.hpp, moved from test_libtorch.cpp unchanged in their
// inputs and bounds, and the plain handler's check of one case.
#include "special_cases.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <utility>

#include "capsule/text.hpp"

namespace capsule::libtorch_parity {

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string case_label(Op op, const std::vector<Tensor>& inputs) {
  std::string label = str(to_string(op), " ", inputs.empty() ? "" : to_string(inputs[0].dtype()));
  for (const Tensor& t : inputs) label += " " + (t.defined() ? to_string(t.shape()) : std::string("none"));
  return label;
}

SpecialCase make_case(Op op, std::vector<Tensor> inputs, const OpAttrs& attrs, Tolerance fwd, Tolerance bwd,
                      std::int64_t n) {
  SpecialCase c;
  c.label = case_label(op, inputs);
  c.op = op;
  c.inputs = std::move(inputs);
  c.attrs = attrs;
  c.forward = fwd;
  c.backward = bwd;
  c.n = n;
  return c;
}

/// A case of the region families: g = 0.75, then the special-value classes in g.
SpecialCase region_case(Op op, std::vector<Tensor> inputs, const OpAttrs& attrs, Tolerance fwd, Tolerance bwd,
                        std::int64_t n) {
  SpecialCase c = make_case(op, std::move(inputs), attrs, fwd, bwd, n);
  c.special_g = true;
  return c;
}

/// reduce_sum and reduce_mean over lanes holding NaN, inf beside −inf (NaN), one infinity,
/// only −0.0, and finite values; over all axes, one axis and two kept axes.
void add_reduction_cases(std::vector<SpecialCase>& out) {
  for (const DType dtype : {DType::F32, DType::F64}) {
    const Tensor x = tensor_of({4, 3}, dtype, {1, kNan, 2, kInf, 1, -kInf, -0.0, -0.0, -0.0, 2.5, -kInf, 1});
    OpAttrs rows;
    rows.axes = {1};
    OpAttrs columns_kept;
    columns_kept.axes = {0};
    columns_kept.keepdim = true;
    for (const Op op : {Op::ReduceSum, Op::ReduceMean}) {
      out.push_back(region_case(op, {x}, {}, {Bound::Terms, 2}, kExact, 12));
      out.push_back(region_case(op, {x}, rows, {Bound::Terms, 2}, kExact, 3));
      out.push_back(region_case(op, {x}, columns_kept, {Bound::Terms, 2}, kExact, 4));
    }
  }
}

/// matmul and linear, operands holding NaN, ±inf and −0.0 (IEEE through the dot
/// products on both sides: 0·inf and inf − inf are NaN), bias included.
void add_product_cases(std::vector<SpecialCase>& out) {
  const Tolerance products{Bound::Terms, 2};
  for (const DType dtype : {DType::F32, DType::F64}) {
    const Tensor a = tensor_of({3, 2}, dtype, {1, kNan, kInf, 2, -0.0, 0.5});
    const Tensor b = tensor_of({2, 3}, dtype, {1, 0.0, -2, 3, 1, -0.0});
    out.push_back(region_case(Op::Matmul, {a, b}, {}, products, products, 3));
    const Tensor ba = tensor_of({2, 1, 3}, dtype, {-kInf, 1, 2, 0.5, -0.0, kNan});
    const Tensor bb = tensor_of({2, 3, 2}, dtype, {1, 2, kInf, 0, -1, 0.5, 2, -0.0, 1, 1, 0.25, -3});
    out.push_back(region_case(Op::Matmul, {ba, bb}, {}, products, products, 3));
    const Tensor x = tensor_of({3, 2}, dtype, {1, -0.0, kInf, 2, kNan, 0.5});
    const Tensor w = tensor_of({2, 2}, dtype, {0.5, -1, 0.0, 2});
    const Tensor bias = tensor_of({2}, dtype, {-kInf, 0.25});
    out.push_back(region_case(Op::Linear, {x, w, bias}, {}, products, products, 3));
    out.push_back(region_case(Op::Linear, {x, w}, {}, products, products, 3));
  }
}

/// conv and conv_transpose (2-d, and 1-d grouped and dilated) with NaN, ±inf and −0.0 in
/// the input, the weights and the bias (every term is an IEEE product on both sides).
void add_conv_cases(std::vector<SpecialCase>& out) {
  const Tolerance products{Bound::Terms, 2};
  OpAttrs padded;
  padded.padding = {1, 0};
  OpAttrs strided;
  strided.stride = {2, 1};
  strided.padding = {1, 0};
  strided.output_padding = {1, 0};
  for (const DType dtype : {DType::F32, DType::F64}) {
    const Tensor x = specials_of({1, 2, 3, 3}, dtype, 0);
    const Tensor w = tensor_of({2, 2, 2, 2}, dtype, {1, -0.5, 0, 2, -1, 0.25, 1, -0.0, 0.5, 1, -2, 1, 0, 1, 0.5, -1});
    const Tensor bias = tensor_of({2}, dtype, {0.5, -0.0});
    // n: forward 2·2·2 = 8 terms; dw sums n·out spatial ≤ 4·3 = 12; dx sums o·kh·kw = 8.
    out.push_back(region_case(Op::Conv, {x, w, bias}, padded, products, products, 12));
    const Tensor finite_x =
        tensor_of({1, 2, 3, 3}, dtype, {1, 2, -1, 0.5, 0, 3, -2, 1, 1, 0.25, -0.0, 2, 1, -1, 0, 3, 2, 1});
    const Tensor special_w = specials_of({2, 2, 2, 2}, dtype, 1);
    // Unpadded: a padded position meeting a non-finite weight is ATen's 0·w, a difference the CPU
    // suites pin apart (test_libtorch.cpp, check_conv_padding_meets_non_finite_weight).
    out.push_back(region_case(Op::Conv, {finite_x, special_w}, {}, products, products, 8));
    // conv_transpose's weight is [c, o/groups, kh, kw]; n: forward c·kh·kw = 8, dw sums over the
    // input positions (9), dx over o·kh·kw = 8.
    out.push_back(region_case(Op::ConvTranspose, {x, w, bias}, strided, products, products, 9));
    out.push_back(region_case(Op::ConvTranspose, {finite_x, special_w}, {}, products, products, 9));
    // 1-d, two groups, dilated (run as 2-d of height 1): n: forward (c/groups)·k = 4, dw sums the
    // 5 (conv) or 6 (conv_transpose) positions, dx (o/groups)·k = 4.
    OpAttrs grouped;
    grouped.groups = 2;
    grouped.dilation = {2};
    const Tensor x1 = specials_of({1, 4, 6}, dtype, 3);
    const Tensor w1 = tensor_of({2, 2, 2}, dtype, {1, -0.0, 0.5, -2, 0, 1, -1, 0.25});
    out.push_back(region_case(Op::Conv, {x1, w1}, grouped, products, products, 6));
    const Tensor wt1 = tensor_of({4, 1, 2}, dtype, {1, -0.0, 0.5, -2, 0, 1, -1, 0.25});
    out.push_back(region_case(Op::ConvTranspose, {x1, wt1}, grouped, products, products, 6));
  }
}

/// max_pool and avg_pool, windows holding NaN (one per window: see the pinned difference below),
/// inf beside −inf, only −inf, a ±0 tie and finite values, 2-d and 1-d with padding.
void add_pool_cases(std::vector<SpecialCase>& out) {
  OpAttrs pool2;
  pool2.kernel = {2, 2};
  OpAttrs pool1;
  pool1.kernel = {3};
  pool1.stride = {2};
  pool1.padding = {1};
  for (const DType dtype : {DType::F32, DType::F64}) {
    // Windows (2×2): {1, NaN, 2, 3}, {inf, −inf, 0.5, −1}, {−inf ×4}, {−0.0, 0.0, −0.0, 0.0}.
    const Tensor x = tensor_of({1, 1, 4, 4}, dtype,
                               {1, kNan, kInf, -kInf, 2, 3, 0.5, -1, -kInf, -kInf, -0.0, 0.0, -kInf, -kInf, -0.0, 0.0});
    const Tensor x1 = tensor_of({1, 2, 6}, dtype, {-kInf, -kInf, kNan, 1, kInf, 2, -0.0, 0.0, -kInf, 4, -kInf, -kInf});
    out.push_back(region_case(Op::MaxPool, {x}, pool2, kExact, kExact, 1));
    out.push_back(region_case(Op::MaxPool, {x1}, pool1, kExact, kExact, 1));
    out.push_back(region_case(Op::AvgPool, {x}, pool2, {Bound::Terms, 2}, {Bound::Terms, 2}, 4));
    out.push_back(region_case(Op::AvgPool, {x1}, pool1, {Bound::Terms, 2}, {Bound::Terms, 2}, 3));
  }
}

/// mse_loss and cross_entropy: a NaN, an infinity, inf − inf and a −inf logit under a
/// zero target (0·(−inf) = NaN on both sides), the loss gradient finite and non-finite.
void add_loss_cases(std::vector<SpecialCase>& out) {
  for (const DType dtype : {DType::F32, DType::F64}) {
    const Tensor x = tensor_of({2, 3}, dtype, {1, -0.0, 2.5, 0.5, -1, 3});
    const Tensor finite_t = tensor_of({2, 3}, dtype, {0.5, 0.0, 2, 1, -1, -0.0});
    for (const Tensor& t : {finite_t, tensor_of({2, 3}, dtype, {0.5, kNan, 2, 1, -1, 0}),
                            tensor_of({2, 3}, dtype, {0.5, 1, kInf, 1, -1, 0}),
                            tensor_of({2, 3}, dtype, {0.5, 1, kInf, 1, -kInf, 0})}) {
      out.push_back(region_case(Op::MseLoss, {x, t}, {}, {Bound::Lane, 4}, {Bound::Lane, 4}, 6));
      out.push_back(region_case(Op::MseLoss, {t, x}, {}, {Bound::Lane, 4}, {Bound::Lane, 4}, 6));
    }
    const Tensor target = tensor_of({2, 3}, dtype, {0.25, 0.75, 0, 0, 1, 0});
    for (const Tensor& z : {tensor_of({2, 3}, dtype, {1, -kInf, 2, 0.5, -0.0, -kInf}),
                            tensor_of({2, 3}, dtype, {1, kNan, 2, 0.5, -0.0, 1}),
                            tensor_of({2, 3}, dtype, {kInf, 1, 2, 0.5, -0.0, 1})}) {
      out.push_back(region_case(Op::CrossEntropy, {z, target}, {}, {Bound::Lane, 8}, {Bound::Lane, 8}, 6));
    }
    out.push_back(region_case(Op::CrossEntropy, {x, tensor_of({2, 3}, dtype, {kNan, 1, 0, -kInf, 1, 0})}, {},
                           {Bound::Lane, 8}, {Bound::Lane, 8}, 6));
  }
}

/// reshape, permute and broadcast move NaN, ±inf and −0.0 bit for bit; broadcast's
/// gradient sums the broadcast copies (inf + −inf = NaN).
void add_shape_cases(std::vector<SpecialCase>& out) {
  OpAttrs reshape;
  reshape.shape = {3, -1};
  OpAttrs permute;
  permute.axes = {2, 0, 1};
  OpAttrs bcast;
  bcast.shape = {2, 3, 4};
  for (const DType dtype : {DType::F32, DType::F64}) {
    out.push_back(region_case(Op::Reshape, {specials_of({2, 3, 2}, dtype, 0)}, reshape, kExact, kExact, 1));
    out.push_back(region_case(Op::Permute, {specials_of({2, 3, 4}, dtype, 1)}, permute, kExact, kExact, 1));
    out.push_back(region_case(Op::Broadcast, {specials_of({3, 1}, dtype, 2)}, bcast, kExact, {Bound::Terms, 2}, 8));
  }
}

}  // namespace

Tensor tensor_of(const std::vector<std::int64_t>& dims, DType dtype, const std::vector<double>& values) {
  return Tensor::from_values(Shape::make(dims).value(), dtype, values).value();
}

Tensor specials_of(const std::vector<std::int64_t>& dims, DType dtype, std::size_t offset) {
  const std::vector<double> classes{-0.0, 1, kNan, 2, kInf, -3, -kInf, 0.5, 0.0};
  const Shape shape = Shape::make(dims).value();
  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = classes[(i + offset) % classes.size()];
  return Tensor::from_values(shape, dtype, values).value();
}

std::vector<Tensor> special_case_gradients(const SpecialCase& c, const Shape& shape, DType dtype) {
  std::vector<Tensor> grads{Tensor::full(shape, dtype, c.constant_g).value()};
  if (c.special_g) {
    grads.push_back(specials_of(shape.to_vector(), dtype, 2));
    grads.push_back(specials_of(shape.to_vector(), dtype, 4));
  }
  if (!c.explicit_g.empty()) grads.push_back(Tensor::from_values(shape, dtype, c.explicit_g).value());
  return grads;
}

std::vector<SpecialCase> softmax_special_cases(bool non_finite_g) {
  std::vector<SpecialCase> out;
  for (const DType dtype : {DType::F32, DType::F64}) {
    const Tensor x = tensor_of({4, 3}, dtype, {1, kNan, 2, -kInf, 0, 1, kInf, 1, 2, -kInf, -kInf, -kInf});
    for (const Op op : {Op::Softmax, Op::LogSoftmax}) {
      SpecialCase c = make_case(op, {x}, with_axis(-1), {Bound::Lane, 4}, {Bound::Lane, 8}, 3);
      c.constant_g = 0.5;
      if (non_finite_g) c.explicit_g = {0.5, 1, -2, kNan, 1, 0.5, 1, kInf, -1, 0.5, -kInf, 2};
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<SpecialCase> smooth_pool_special_cases(bool non_finite_g) {
  OpAttrs attrs;
  attrs.kernel = {2};
  attrs.stride = {2};
  attrs.padding = {1};
  attrs.temperature = 0.5;
  std::vector<SpecialCase> out;
  for (const DType dtype : {DType::F32, DType::F64}) {
    const Tensor x = tensor_of({1, 1, 8}, dtype, {-kInf, kNan, 1, kInf, 2, -kInf, -kInf, 3});
    SpecialCase c = make_case(Op::SmoothMaxPool, {x}, attrs, {Bound::Lane, 8}, {Bound::Lane, 8}, 2);
    c.constant_g = 0.5;
    if (non_finite_g) c.explicit_g = {kNan, 0.5, kInf, 1, -kInf};  // the output's 5 windows
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<SpecialCase> norm_special_cases() {
  std::vector<SpecialCase> out;
  for (const DType dtype : {DType::F32, DType::F64}) {
    const Tensor x = tensor_of({4, 3}, dtype, {1, kNan, 2, kInf, 0, 1, 3, 3, 3, -kInf, 1, kInf});
    for (const Op op : {Op::LayerNorm, Op::BatchNorm}) {
      SpecialCase c = make_case(op, {x}, {}, {Bound::Lane, 4}, {Bound::Lane, 8}, 12);
      c.constant_g = 0.5;
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<SpecialCase> clamp_tie_special_cases() {
  OpAttrs zero;
  zero.lo = 0.0;
  zero.hi = 0.0;
  std::vector<SpecialCase> out;
  for (const DType dtype : {DType::F32, DType::F64}) {
    SpecialCase c = make_case(Op::Clamp, {tensor_of({5}, dtype, {-0.0, 0.0, kNan, -1.0, 1.0})}, zero, kExact, kExact, 1);
    c.forward_only = true;
    out.push_back(std::move(c));
  }
  return out;
}

const std::vector<std::string>& region_special_families() {
  static const std::vector<std::string> families{"reduction", "product", "conv", "pool", "loss", "shape"};
  return families;
}

std::vector<SpecialCase> region_special_cases(const std::string& family) {
  std::vector<SpecialCase> out;
  if (family == "reduction") add_reduction_cases(out);
  else if (family == "product") add_product_cases(out);
  else if (family == "conv") add_conv_cases(out);
  else if (family == "pool") add_pool_cases(out);
  else if (family == "loss") add_loss_cases(out);
  else if (family == "shape") add_shape_cases(out);
  else FAIL("no special-value family `" << family << "`");
  return out;
}

std::vector<SpecialCase> every_special_case(bool non_finite_g) {
  std::vector<SpecialCase> cases = softmax_special_cases(non_finite_g);
  const auto append = [&](std::vector<SpecialCase> more) {
    for (SpecialCase& c : more) cases.push_back(std::move(c));
  };
  append(smooth_pool_special_cases(non_finite_g));
  append(norm_special_cases());
  append(clamp_tie_special_cases());
  for (const std::string& family : region_special_families()) append(region_special_cases(family));
  return cases;
}

void check_special_case_plain(const HandlerSpec& handler, const HandlerSpec& oracle, const SpecialCase& c, bool vjps,
                              const Placement& placement) {
  CAPTURE(c.label);
  const Tensor ref = oracle.forward(c.inputs, c.attrs).value();
  const std::vector<Tensor> placed = placement.handler_copies(c.inputs);
  RuntimeResult<Tensor> lib = handler.forward(placed, c.attrs);
  REQUIRE_MESSAGE(lib.has_value(), lib.error().message);
  Tensor terms;
  if (c.forward.bound == Bound::Terms) terms = oracle.forward(absolute_all(c.inputs).value(), c.attrs).value();
  const std::string miss = compare(placement.to_host(*lib), ref, c.forward, &terms, c.n);
  CHECK_MESSAGE(miss.empty(), "forward: " << miss);
  if (!vjps || c.forward_only) return;
  const Tensor placed_ref = placement.to_handler(ref);
  for (const Tensor& grad : special_case_gradients(c, ref.shape(), ref.dtype())) {
    CAPTURE(grad.to_vector());
    const std::vector<Tensor> want = oracle.backward(c.inputs, ref, grad, c.attrs).value();
    auto lib_grads = handler.backward(placed, placed_ref, placement.to_handler(grad), c.attrs);
    REQUIRE_MESSAGE(lib_grads.has_value(), lib_grads.error().message);
    REQUIRE(lib_grads->size() == want.size());
    const std::vector<Tensor> got = placement.host_copies(*lib_grads);
    std::vector<Tensor> grad_terms(want.size());
    if (c.backward.bound == Bound::Terms) {
      grad_terms =
          oracle.backward(absolute_all(c.inputs).value(), absolute(ref).value(), absolute(grad).value(), c.attrs).value();
    }
    for (std::size_t i = 0; i < want.size(); ++i) {
      const std::string gmiss = compare(got[i], want[i], c.backward, &grad_terms[i], c.n);
      CHECK_MESSAGE(gmiss.empty(), "gradient " << i << ": " << gmiss);
    }
  }
}

}  // namespace capsule::libtorch_parity
