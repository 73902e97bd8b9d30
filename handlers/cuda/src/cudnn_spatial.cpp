// SPDX-License-Identifier: Apache-2.0
// Spatial payload and shape rules of the cuDNN handlers (cudnn_spatial.hpp).
#include "cudnn_spatial.hpp"

#include "capsule/text.hpp"

namespace capsule::cuda {

std::string join_ints(const std::vector<std::int64_t>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

RuntimeResult<Pair> spatial_param(std::string_view op, std::string_view name, const std::vector<std::int64_t>& values,
                                  std::size_t spatial, std::int64_t fallback, std::int64_t min, std::int64_t trivial) {
  Pair out = {trivial, fallback};
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

std::array<std::int64_t, 4> dims4(const Tensor& t) {
  if (t.rank() == 4) return {t.dim(0), t.dim(1), t.dim(2), t.dim(3)};
  return {t.dim(0), t.dim(1), 1, t.dim(2)};
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

}  // namespace capsule::cuda
