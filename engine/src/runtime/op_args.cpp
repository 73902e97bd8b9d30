// SPDX-License-Identifier: Apache-2.0
#include "capsule/runtime/op_args.hpp"

#include <cmath>

#include "capsule/text.hpp"

namespace capsule {

RuntimeStatus check_unary_payload(Op op, const OpAttrs& attrs) {
  if (op == Op::Scale && !std::isfinite(attrs.alpha)) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("scale: alpha is ", attrs.alpha, "; expected a finite factor"));
  }
  if (op == Op::Clamp && !(attrs.lo <= attrs.hi)) {
    return runtime_error(RuntimeCode::InvalidArgument, str("clamp: bounds lo = ", attrs.lo, " and hi = ", attrs.hi,
                                                           " are not ordered; expected lo <= hi"));
  }
  if (op == Op::SafeLog && !(attrs.eps >= 0.0 && std::isfinite(attrs.eps))) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("safe_log: eps is ", attrs.eps, "; expected a finite eps > 0 (0 = default 1e-12)"));
  }
  return std::monostate{};
}

}  // namespace capsule
