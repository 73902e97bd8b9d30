// SPDX-License-Identifier: Apache-2.0
// A spatial tensor's dims as cuDNN's 4-D descriptors take them (cudnn_spatial.hpp).
#include "cudnn_spatial.hpp"

namespace capsule::cuda {

std::array<std::int64_t, 4> dims4(const Tensor& t) {
  if (t.rank() == 4) return {t.dim(0), t.dim(1), t.dim(2), t.dim(3)};
  return {t.dim(0), t.dim(1), 1, t.dim(2)};
}

}  // namespace capsule::cuda
