// SPDX-License-Identifier: Apache-2.0
// The spatial payload and shape rules shared by the reference and cuDNN conv and pool handlers
// (capsule/runtime/spatial_args.hpp).
#include "capsule/runtime/spatial_args.hpp"

#include <cmath>

#include "capsule/text.hpp"

namespace capsule {

std::string join_ints(const std::vector<std::int64_t>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

RuntimeResult<SpatialPair> spatial_param(std::string_view op, std::string_view name,
                                         const std::vector<std::int64_t>& values, std::size_t spatial,
                                         std::int64_t fallback, std::int64_t min, std::int64_t trivial) {
  SpatialPair out = {trivial, fallback};
  if (spatial == 2) out[0] = fallback;
  if (values.empty()) return out;
  if (values.size() != spatial) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, ": ", name, " ", join_ints(values), " has ", values.size(), " entries; expected ",
                             spatial, " (one per spatial dim) or none"));
  }
  for (std::int64_t v : values) {
    if (v < min) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(op, ": ", name, " ", join_ints(values), " has an entry below ", min,
                               "; expected entries >= ", min));
    }
  }
  if (spatial == 1) {
    out[1] = values[0];
  } else {
    out = {values[0], values[1]};
  }
  return out;
}

RuntimeResult<std::size_t> spatial_rank(std::string_view op, const Tensor& x) {
  if (x.rank() == 3 || x.rank() == 4) return x.rank() - 2;
  return runtime_error(RuntimeCode::ShapeMismatch, str(op, ": input has shape ", to_string(x.shape()),
                                                       "; expected [n, c, l] or [n, c, h, w]"));
}

RuntimeResult<std::int64_t> window_count(std::string_view op, std::int64_t in, std::int64_t k, std::int64_t stride,
                                         std::int64_t pad, std::int64_t dil) {
  CAPSULE_TRY(std::int64_t span, checked_mul(str(op, " window extent"), dil, k - 1));
  CAPSULE_TRY(span, checked_add(str(op, " window extent"), span, 1));
  CAPSULE_TRY(std::int64_t twice, checked_mul(str(op, " padding"), pad, 2));
  CAPSULE_TRY(std::int64_t padded, checked_add(str(op, " padded size"), in, twice));
  if (padded < span) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": input size ", in, " with padding ", pad, " is ", padded,
                             ", smaller than the window extent ", span, " (kernel ", k, ", dilation ", dil,
                             "); expected padded input >= window extent"));
  }
  return (padded - span) / stride + 1;
}

std::vector<std::int64_t> spatial_shape(const Tensor& x, std::int64_t channels, std::int64_t h, std::int64_t w) {
  if (x.rank() == 4) return {x.dim(0), channels, h, w};
  return {x.dim(0), channels, w};
}

RuntimeResult<PoolWindow> pool_window(std::string_view op, const Tensor& x, const OpAttrs& attrs, bool smooth) {
  CAPSULE_TRY(std::size_t spatial, spatial_rank(op, x));
  if (attrs.kernel.size() != spatial) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, ": kernel ", join_ints(attrs.kernel), " has ", attrs.kernel.size(),
                             " entries for input ", to_string(x.shape()), "; expected ", spatial,
                             " (one per spatial dim)"));
  }
  for (std::int64_t d : attrs.dilation) {
    if (d != 1) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(op, ": dilation ", join_ints(attrs.dilation), " given; pools take no dilation"));
    }
  }
  if (smooth && !(std::isfinite(attrs.temperature) && attrs.temperature > 0)) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, ": temperature is ", attrs.temperature, "; expected a finite value > 0"));
  }
  PoolWindow window;
  CAPSULE_TRY(window.kernel, spatial_param(op, "kernel", attrs.kernel, spatial, 1, 1, 1));
  const std::vector<std::int64_t>& stride_values = attrs.stride.empty() ? attrs.kernel : attrs.stride;
  CAPSULE_TRY(window.stride, spatial_param(op, "stride", stride_values, spatial, 1, 1, 1));
  CAPSULE_TRY(window.pad, spatial_param(op, "padding", attrs.padding, spatial, 0, 0, 0));
  const SpatialPair in_size = spatial == 2 ? SpatialPair{x.dim(2), x.dim(3)} : SpatialPair{1, x.dim(2)};
  for (std::size_t a = 0; a < 2; ++a) {
    // Padding of at most half the window keeps at least one real element in every window.
    if (window.pad[a] > window.kernel[a] / 2) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(op, ": padding ", join_ints(attrs.padding), " exceeds half of kernel ",
                               join_ints(attrs.kernel), "; expected padding <= kernel / 2"));
    }
    CAPSULE_TRY(window.out_size[a],
                window_count(op, in_size[a], window.kernel[a], window.stride[a], window.pad[a], 1));
  }
  window.out_shape = spatial_shape(x, x.dim(1), window.out_size[0], window.out_size[1]);
  return window;
}

}  // namespace capsule
