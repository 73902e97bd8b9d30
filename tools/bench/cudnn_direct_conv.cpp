// SPDX-License-Identifier: Apache-2.0
#include "cudnn_direct_conv.hpp"

// As in the provider: a legacy (deprecated) cuDNN call here would be a warning, and so an error.
#ifndef CUDNN_WARN_DEPRECATED
#define CUDNN_WARN_DEPRECATED 1
#endif
#include <cudnn.h>

#include <utility>
#include <vector>

#include "capsule/text.hpp"
#include "gpu_bench_support.hpp"

namespace capsule::bench {
namespace {

// cuDNN 9 deprecates the handle attributes of the graph and the plan in favour of device-property
// descriptors, which serve plans built ahead of time without a device. This side builds its plan
// on the device that runs it, as the provider does, so it names them once, silenced here only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
constexpr cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

void check(cudnnStatus_t status, const std::string& what) {
  if (status != CUDNN_STATUS_SUCCESS) die(str("direct cuDNN conv: ", what, ": ", cudnnGetErrorString(status)));
}
void check(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) die(str("direct cuDNN conv: ", what, ": ", cudaGetErrorName(status)));
}

/// Every backend descriptor this side made, destroyed together, newest first.
class Descriptors {
 public:
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() { destroy_all(); }

  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type, const std::string& what) {
    cudnnBackendDescriptor_t d = nullptr;
    check(cudnnBackendCreateDescriptor(type, &d), str("creating the ", what, " descriptor"));
    made_.push_back(d);
    return d;
  }
  void destroy_all() {
    while (!made_.empty()) {
      (void)cudnnBackendDestroyDescriptor(made_.back());
      made_.pop_back();
    }
  }

 private:
  std::vector<cudnnBackendDescriptor_t> made_;
};

void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
         std::int64_t count, const void* values, const std::string& what) {
  check(cudnnBackendSetAttribute(d, name, type, count, values),
        str("setting attribute ", static_cast<int>(name), " of the ", what));
}

void set_descriptor(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t value,
                    const std::string& what) {
  set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, what);
}

void finalize(cudnnBackendDescriptor_t d, const std::string& what) {
  check(cudnnBackendFinalize(d), str("finalizing the ", what));
}

/// Finalizes a heuristics query or a plan: false when cuDNN's status is a verdict on the graph
/// (not supported, bad parameter: skip this mode or engine, as the provider does); any other
/// failure (an allocation, an internal error) ends the run, so that a transient one never makes
/// this side pick another engine than ours would.
bool finalize_unless_refused(cudnnBackendDescriptor_t d, const std::string& what) {
  const cudnnStatus_t status = cudnnBackendFinalize(d);
  if (status == CUDNN_STATUS_SUCCESS) return true;
  const int category = CUDNN_STATUS_CATEGORY(static_cast<int>(status));
  if (category == CUDNN_STATUS_NOT_SUPPORTED || category == CUDNN_STATUS_BAD_PARAM) return false;
  check(status, str("finalizing the ", what));
  return false;
}

using Dims = std::array<std::int64_t, 4>;

/// A packed NCHW float32 tensor descriptor of `dims`, 16-byte aligned.
cudnnBackendDescriptor_t packed_tensor(Descriptors& made, const std::string& what, std::int64_t uid, const Dims& dims) {
  const Dims strides{dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const std::int64_t alignment = 16;
  cudnnBackendDescriptor_t t = made.make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
  set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, what);
  set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), what);
  set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), what);
  set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what);
  set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, what);
  finalize(t, what);
  return t;
}

/// Whether an engine's numerical note computes something other than the capsule declares: float32
/// rounded below float32 (TF32 tensor cores, down-converted inputs, reduced-precision
/// reduction), or the FFT and Winograd transforms. The provider's note_excludes lists the same
/// notes; the list is written again here on purpose (see the file comment of the header).
bool note_changes_the_computation(cudnnBackendNumericalNote_t note) {
  switch (note) {
    case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
    case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
    case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
    case CUDNN_NUMERICAL_NOTE_FFT:
    case CUDNN_NUMERICAL_NOTE_WINOGRAD:
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
    case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13:
      return true;
    default:
      return false;
  }
}

/// One engine configuration the heuristics proposed, and what its engine's notes say.
struct Proposal {
  cudnnBackendDescriptor_t config = nullptr;
  std::int64_t engine = -1;
  bool changes_computation = false;
  bool nondeterministic = false;
};

Proposal inspect(Descriptors& made, cudnnBackendDescriptor_t config) {
  Proposal p;
  p.config = config;
  cudnnBackendDescriptor_t engine = made.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
  std::int64_t count = 0;
  check(cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine),
        "reading an engine configuration's engine");
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  std::int64_t note_count = 0;
  check(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                 static_cast<std::int64_t>(notes.size()), &note_count, notes.data()),
        "reading an engine's numerical notes");
  for (std::int64_t i = 0; i < note_count && i < static_cast<std::int64_t>(notes.size()); ++i) {
    const cudnnBackendNumericalNote_t note = notes[static_cast<std::size_t>(i)];
    p.changes_computation = p.changes_computation || note_changes_the_computation(note);
    p.nondeterministic = p.nondeterministic || note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
  }
  check(cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &p.engine),
        "reading an engine's global index");
  return p;
}

/// The configurations heuristics `mode` proposes for `graph`, best first (none when the mode
/// cannot serve the graph).
std::vector<Proposal> proposals(Descriptors& made, cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode) {
  cudnnBackendDescriptor_t heur = made.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
  set_descriptor(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "heuristics");
  set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics");
  if (!finalize_unless_refused(heur, "heuristics")) return {};
  std::int64_t available = 0;
  check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available,
                                 nullptr),
        "counting the heuristics' results");
  std::vector<cudnnBackendDescriptor_t> configs;
  for (std::int64_t i = 0; i < available; ++i) {
    configs.push_back(made.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine configuration"));
  }
  std::int64_t returned = 0;
  if (available > 0) {
    check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, available,
                                   &returned, configs.data()),
          "reading the heuristics' results");
  }
  std::vector<Proposal> result;
  for (std::int64_t i = 0; i < returned && i < available; ++i) {
    result.push_back(inspect(made, configs[static_cast<std::size_t>(i)]));
  }
  return result;
}

}  // namespace

struct DirectCudnnConv::Handles {
  cudnnHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  Descriptors made;
  cudnnBackendDescriptor_t plan = nullptr;
  cudnnBackendDescriptor_t pack = nullptr;
  void* y = nullptr;
  void* workspace = nullptr;

  Handles() = default;
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
  ~Handles() {
    if (stream != nullptr) (void)cudaStreamSynchronize(stream);
    made.destroy_all();  // before the handle the graph and the plan name
    if (y != nullptr) (void)cudaFree(y);
    if (workspace != nullptr) (void)cudaFree(workspace);
    if (handle != nullptr) (void)cudnnDestroy(handle);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
};

DirectCudnnConv::DirectCudnnConv(const Dims& x_dims, const Dims& w_dims, std::int64_t pad, const void* x,
                                 const void* w)
    : handles_(new Handles()) {
  Handles& h = *handles_;
  for (const void* p : {x, w}) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) die("direct cuDNN conv: an input is not 16-byte aligned");
  }
  check(cudaStreamCreateWithFlags(&h.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check(cudnnCreate(&h.handle), "cudnnCreate");
  check(cudnnSetStream(h.handle, h.stream), "cudnnSetStream");

  const Dims y_dims{x_dims[0], w_dims[0], x_dims[2] + 2 * pad - w_dims[2] + 1, x_dims[3] + 2 * pad - w_dims[3] + 1};
  cudnnBackendDescriptor_t xt = packed_tensor(h.made, "x tensor", 1, x_dims);
  cudnnBackendDescriptor_t wt = packed_tensor(h.made, "w tensor", 2, w_dims);
  cudnnBackendDescriptor_t yt = packed_tensor(h.made, "y tensor", 3, y_dims);

  const std::string conv_what = "convolution";
  cudnnBackendDescriptor_t conv = h.made.make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, conv_what);
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const std::int64_t spatial = 2;
  const std::array<std::int64_t, 2> ones{1, 1};
  const std::array<std::int64_t, 2> pads{pad, pad};
  set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute, conv_what);
  set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, conv_what);
  set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial, conv_what);
  set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, ones.data(), conv_what);
  set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, ones.data(), conv_what);
  set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads.data(), conv_what);
  set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads.data(), conv_what);
  finalize(conv, conv_what);

  const std::string op_what = "convolution forward operation";
  cudnnBackendDescriptor_t op = h.made.make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, op_what);
  const float one = 1.0f, zero = 0.0f;
  set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, xt, op_what);
  set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, wt, op_what);
  set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, yt, op_what);
  set_descriptor(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv, op_what);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one, op_what);
  set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero, op_what);
  finalize(op, op_what);

  const std::string graph_what = "operation graph";
  cudnnBackendDescriptor_t graph = h.made.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph_what);
  set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op, graph_what);
  set(graph, kGraphHandle, CUDNN_TYPE_HANDLE, 1, &h.handle, graph_what);
  finalize(graph, graph_what);

  std::vector<Proposal> candidates = proposals(h.made, graph, CUDNN_HEUR_MODE_A);
  for (Proposal& p : proposals(h.made, graph, CUDNN_HEUR_MODE_FALLBACK)) candidates.push_back(p);
  std::size_t excluded = 0;
  for (const Proposal& p : candidates) excluded += p.changes_computation ? 1 : 0;
  const Proposal* chosen = nullptr;
  for (bool allow_nondeterministic : {false, true}) {
    for (const Proposal& p : candidates) {
      if (chosen != nullptr || p.changes_computation || p.nondeterministic != allow_nondeterministic) continue;
      cudnnBackendDescriptor_t plan = h.made.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
      set_descriptor(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, p.config, "execution plan");
      set(plan, kPlanHandle, CUDNN_TYPE_HANDLE, 1, &h.handle, "execution plan");
      if (!finalize_unless_refused(plan, "execution plan")) continue;  // this engine refuses the graph
      h.plan = plan;
      chosen = &p;
    }
  }
  if (chosen == nullptr) {
    die(str("direct cuDNN conv: none of the ", candidates.size(), " proposed engine configurations (", excluded,
            " excluded by their numerical notes) accepts the graph"));
  }
  engine_ = chosen->engine;

  std::int64_t count = 0, workspace_bytes = 0;
  check(cudnnBackendGetAttribute(h.plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                                 &workspace_bytes),
        "reading the plan's workspace size");
  const std::int64_t y_bytes = y_dims[0] * y_dims[1] * y_dims[2] * y_dims[3] * static_cast<std::int64_t>(sizeof(float));
  check(cudaMalloc(&h.y, static_cast<std::size_t>(y_bytes)), "cudaMalloc (output)");
  if (workspace_bytes > 0) {
    check(cudaMalloc(&h.workspace, static_cast<std::size_t>(workspace_bytes)), "cudaMalloc (workspace)");
  }
  const std::string pack_what = "variant pack";
  h.pack = h.made.make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, pack_what);
  const std::array<std::int64_t, 3> uids{1, 2, 3};
  std::array<void*, 3> pointers{const_cast<void*>(x), const_cast<void*>(w), h.y};  // cuDNN takes void*; x, w are only read
  set(h.pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data(), pack_what);
  set(h.pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, pointers.data(), pack_what);
  set(h.pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &h.workspace, pack_what);
  finalize(h.pack, pack_what);
  description_ = str("engine ", engine_, chosen->nondeterministic ? " (nondeterministic)" : " (deterministic)",
                     ", workspace ", workspace_bytes, " bytes; ", candidates.size(), " configurations proposed, ",
                     excluded, " excluded by their numerical notes");
}

DirectCudnnConv::~DirectCudnnConv() { delete handles_; }

void DirectCudnnConv::run() {
  check(cudnnBackendExecute(handles_->handle, handles_->plan, handles_->pack), "cudnnBackendExecute");
}

void DirectCudnnConv::sync() { check(cudaStreamSynchronize(handles_->stream), "cudaStreamSynchronize"); }

}  // namespace capsule::bench
