// SPDX-License-Identifier: Apache-2.0
// A small RAII layer over cuDNN 9's graph (backend) API, shared by the cuDNN handlers: owned
// descriptors, a builder that sets attributes and finalizes (the first failure is the error),
// packed tensor descriptors, engine choice by numerical notes, a cache of built execution plans,
// and one bound execution on our stream with its workspace from our pool.
//
// Only the graph API is used. CUDNN_WARN_DEPRECATED is defined before cuDNN's headers, so a call
// of a legacy function (cudnnConvolutionForward, cudnnPoolingForward, ...) is a deprecation
// warning, which -Werror turns into a build failure.
#pragma once

#ifndef CUDNN_WARN_DEPRECATED
#define CUDNN_WARN_DEPRECATED 1
#endif
#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "device.hpp"

namespace capsule::cuda {

/// The process's cuDNN handle, bound to our stream; made on first use.
RuntimeResult<cudnnHandle_t> cudnn_handle(std::string_view op, const StartedDevice& device);

/// A device-error naming `op` and the failed `call`, with cuDNN's error string and its last
/// error message (which says which attribute or dimension it refused).
Failure<RuntimeError> cudnn_failure(std::string_view op, std::string_view call, cudnnStatus_t status);

/// Owns one backend descriptor (destroyed with it). Move-only.
class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(cudnnBackendDescriptor_t raw) : raw_(raw) {}
  ~Descriptor();
  Descriptor(Descriptor&& other) noexcept : raw_(other.raw_) { other.raw_ = nullptr; }
  Descriptor& operator=(Descriptor&& other) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return raw_; }

 private:
  cudnnBackendDescriptor_t raw_ = nullptr;
};

/// A fresh (unfinalized) descriptor of `type`; `what` names it in errors.
RuntimeResult<Descriptor> create_descriptor(std::string_view op, cudnnBackendDescriptorType_t type,
                                            std::string_view what);

/// Sets the attributes of one descriptor, then finalizes it. Every setter is a no-op after the
/// first failure, which finalize() returns (naming the op, the descriptor and the attribute).
class DescriptorBuilder {
 public:
  DescriptorBuilder(std::string_view op, cudnnBackendDescriptorType_t type, std::string what);

  DescriptorBuilder& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count,
                         const void* values);
  DescriptorBuilder& set_int64(cudnnBackendAttributeName_t name, std::int64_t value) {
    return set(name, CUDNN_TYPE_INT64, 1, &value);
  }
  DescriptorBuilder& set_int64s(cudnnBackendAttributeName_t name, std::span<const std::int64_t> values) {
    return set(name, CUDNN_TYPE_INT64, static_cast<std::int64_t>(values.size()), values.data());
  }
  DescriptorBuilder& set_descriptor(cudnnBackendAttributeName_t name, const Descriptor& value) {
    cudnnBackendDescriptor_t raw = value.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  template <class E>
  DescriptorBuilder& set_value(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, E value) {
    return set(name, type, 1, &value);
  }

  RuntimeResult<Descriptor> finalize();

 private:
  std::string op_;
  std::string what_;
  Descriptor desc_;
  RuntimeStatus status_ = std::monostate{};
};

/// cuDNN's data type for our dtype (also the compute type: float32 graphs compute in float32,
/// float64 graphs in float64).
cudnnDataType_t cudnn_dtype(DType dtype);

/// The largest power of two <= 16 dividing every address (cuDNN's byte alignment attribute; a
/// plan built for one alignment is only reused for buffers with at least that alignment).
std::int64_t common_alignment(std::initializer_list<const void*> addresses);

/// How a 4-D [n, c, h, w] operand lies in memory: packed NCHW (our row-major tensors as they
/// are), or packed NHWC (a channels-last copy, for graphs cuDNN runs only channels-last).
enum class MemoryLayout : std::int64_t { Nchw = 0, Nhwc = 1 };

/// A finalized tensor descriptor of `dims` (4-D when `layout` is Nhwc), packed in `layout`.
/// `by_value` tensors are host scalars passed in the variant pack (cuDNN's epsilon).
RuntimeResult<Descriptor> make_tensor(std::string_view op, std::string_view what, std::int64_t uid,
                                      std::span<const std::int64_t> dims, DType dtype, std::int64_t alignment,
                                      bool by_value = false, MemoryLayout layout = MemoryLayout::Nchw);

/// A built execution plan and what was chosen for it.
struct GraphPlan {
  std::vector<Descriptor> keep;  ///< every descriptor the plan was built from
  Descriptor plan;
  std::int64_t workspace_bytes = 0;
  std::int64_t engine = -1;       ///< cuDNN's global engine index
  bool nondeterministic = false;  ///< the engine carries CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
  std::string description;        ///< op, graph, dtype, engine, determinism, workspace
  DType dtype = DType::F32;
  std::string refusal;  ///< why no engine accepts the graph, when `plan` is empty

  /// False when cuDNN has no acceptable engine for the graph (see no_engine_error).
  bool usable() const { return plan.get() != nullptr; }
};
using PlanPtr = std::shared_ptr<const GraphPlan>;

/// Builds the operation graph of `operations` (finalized operation descriptors; `parts` are the
/// tensor and other descriptors they were made from, kept alive with the plan), asks cuDNN's
/// heuristics (mode A, then the fallback list) for engine configurations, drops every engine
/// whose numerical notes allow tensor-core down-conversion of float32 (TF32), reduced-precision
/// reduction, FFT or Winograd, and finalizes the first deterministic engine that accepts the
/// graph, or else the first nondeterministic one. No accepted engine gives a plan that is not
/// usable() and says why (callers may try another layout, then report no_engine_error).
RuntimeResult<PlanPtr> build_plan(std::string_view op, const StartedDevice& device, std::vector<Descriptor> operations,
                                  std::vector<Descriptor> parts, DType dtype, std::string_view graph_name);

/// The error when no graph had a usable plan (`detail`: each refusal, in the order tried): for
/// float64 an InvalidArgument saying cuDNN has no float64 engine for the graph, for float32 a
/// device error.
Failure<RuntimeError> no_engine_error(std::string_view op, DType dtype, std::string_view detail);

/// Leading entries of plan keys, one per handler file, so keys of different ops never meet.
enum class PlanFamily : std::int64_t { Conv = 1000, Pool = 2000, BatchNorm = 3000 };

/// The plan cached under `key` (its PlanFamily first, then the graph kind, dtype, alignment,
/// shapes and attributes), or the one `build` makes, cached for the next call. A build that fails
/// with a device error (cuDNN refusing a descriptor of the graph) is cached as an unusable plan of
/// `dtype` saying so. Guarded by a mutex; a build runs outside it (two threads may build the same
/// plan once each; one is kept).
RuntimeResult<PlanPtr> cached_plan(std::string_view op, const StartedDevice& device,
                                   const std::vector<std::int64_t>& key, DType dtype,
                                   const std::function<RuntimeResult<PlanPtr>()>& build);

/// The cached plans, one line each (cudnn_plan_report).
std::vector<std::string> plan_report();

/// One tensor of a variant pack: its uid and its address (device memory; host for by-value).
struct Binding {
  std::int64_t uid = 0;
  const void* data = nullptr;
};

/// Executes `plan` on our stream with `bindings`, its workspace allocated from our pool and freed
/// (stream-ordered) after the launch; then after_launch.
RuntimeStatus execute_plan(std::string_view op, const StartedDevice& device, const GraphPlan& plan,
                           std::span<const Binding> bindings);

/// One operand of a graph run with a layout fallback (run_any_layout).
struct Operand {
  std::int64_t uid = 0;
  Tensor tensor;               ///< a device tensor, or undefined for a host by-value scalar
  const void* host = nullptr;  ///< the by-value scalar
  bool written = false;        ///< the graph writes it
  std::int64_t plane = 0;      ///< > 0: an activation [n, c, plane] that a channels-last run copies
  bool per_channel = false;    ///< a [c] vector that a channel-padded run copies into [padded c]
};

/// A graph's cached plan for a memory layout, a byte alignment and a channel count (the call's,
/// or the rounded-up one of a channel-padded run).
using PlanForLayout =
    std::function<RuntimeResult<PlanPtr>(MemoryLayout layout, std::int64_t align, std::int64_t channels)>;

/// Runs a graph on our NCHW `operands` as they are when cuDNN has an engine for the packed NCHW
/// graph; otherwise on NHWC copies of the activations ([n, c, plane] → [n, plane, c] on our
/// stream, the written ones copied back after), when it has one for that; otherwise, for each
/// multiple in `pad_channels_to` in turn that rounds c up to a larger count than tried so far, on
/// zero-padded channels-last copies ([n, plane, c_padded], and [c_padded] for the per-channel
/// operands; the written ones' first c channels copied back), when it has one for that;
/// otherwise the no-engine error naming every refusal. Only ops whose channels are independent
/// (batch norm) may pad: a padded channel's zero inputs never reach a real channel's result.
RuntimeStatus run_any_layout(std::string_view op, const StartedDevice& device, std::int64_t n, std::int64_t c,
                             std::span<const Operand> operands, const PlanForLayout& plan_for,
                             std::span<const std::int64_t> pad_channels_to = {});

/// Zeroes `t` on our stream (a result the graphs cannot produce: an empty operand, a sum over
/// nothing).
RuntimeStatus zero_on_stream(std::string_view op, const StartedDevice& device, Tensor& t);

}  // namespace capsule::cuda
