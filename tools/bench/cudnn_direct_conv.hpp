// SPDX-License-Identifier: Apache-2.0
// The peer of capsule_gpu_bench's conv comparison: cuDNN 9's convolution forward called directly
// through its graph (backend) API, at its best. Its own handle and stream, the plan, the output,
// the workspace and the variant pack are all made once, so a call is one cudnnBackendExecute.
//
// It computes what the cudnn.conv capsule declares, so the ratio measures the session's overhead
// and not a different computation: float32 cross-correlation with a float32 compute type, and the
// first engine of cuDNN's heuristics (mode A, then the fallback list) whose numerical notes allow
// none of TF32 tensor cores, down-converted inputs, reduced-precision reduction, FFT or Winograd,
// a deterministic one first. It does not use our provider's code (handlers/cuda/src), on purpose: the peer must not
// share a bug or a cost with the side it is measured against.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <string>

namespace capsule::bench {

/// A cuDNN convolution forward y = conv(x, w), x [n, c, h, w], w [k, c, r, s], packed NCHW,
/// stride 1, dilation 1, padding `pad` on every side, over the caller's x and w (device memory).
class DirectCudnnConv {
 public:
  /// Builds everything once; dies with cuDNN's message when it cannot.
  DirectCudnnConv(const std::array<std::int64_t, 4>& x_dims, const std::array<std::int64_t, 4>& w_dims,
                  std::int64_t pad, const void* x, const void* w);
  ~DirectCudnnConv();
  DirectCudnnConv(const DirectCudnnConv&) = delete;
  DirectCudnnConv& operator=(const DirectCudnnConv&) = delete;

  /// Queues one convolution on this side's stream.
  void run();
  /// Waits for this side's stream.
  void sync();

  /// cuDNN's global index of the engine chosen, and a line saying what was chosen and why.
  std::int64_t engine() const { return engine_; }
  const std::string& description() const { return description_; }

 private:
  struct Handles;
  Handles* handles_ = nullptr;
  std::int64_t engine_ = -1;
  std::string description_;
};

}  // namespace capsule::bench
