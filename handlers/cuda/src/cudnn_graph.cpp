// SPDX-License-Identifier: Apache-2.0
// The cuDNN graph-API layer of cudnn_graph.hpp: handle, descriptors, engine choice, plan cache,
// execution.
#include "cudnn_graph.hpp"
#include "small_kernels.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <utility>

namespace capsule::cuda {
namespace {

/// The status of this thread's latest cuDNN failure (set by cudnn_failure). Read right after a
/// failed heuristics query, engine plan or whole plan build, to tell cuDNN's verdict on a graph
/// (not supported, bad parameter: the same every time) from a transient failure (an allocation,
/// an internal error), which must never be remembered as "no engine".
thread_local cudnnStatus_t last_failure = CUDNN_STATUS_SUCCESS;

bool is_graph_verdict(cudnnStatus_t status) {
  const int category = CUDNN_STATUS_CATEGORY(static_cast<int>(status));
  return category == CUDNN_STATUS_NOT_SUPPORTED || category == CUDNN_STATUS_BAD_PARAM;
}

// cuDNN 9 marks the handle attributes of the operation graph and the execution plan deprecated
// in favour of device-property descriptors (made for ahead-of-time plans built without a
// device). We build plans on the device that runs them, and the handle attributes are the path
// every cuDNN 9 release accepts, so they are named here, once, with the warning silenced for
// these two enumerators only (every other deprecated use stays an error).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
constexpr cudnnBackendAttributeName_t kGraphHandle = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
constexpr cudnnBackendAttributeName_t kPlanHandle = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

struct CudnnState {
  std::once_flag once;
  cudnnHandle_t handle = nullptr;
  std::string failure;  ///< why the handle could not be made, or empty
};

std::string describe(cudnnStatus_t status) {
  std::array<char, 512> last{};
  cudnnGetLastErrorString(last.data(), last.size());
  last.back() = '\0';
  std::string text = str(cudnnGetErrorString(status), " (status ", static_cast<int>(status), ")");
  if (last[0] != '\0') text += str(": ", last.data());
  return text;
}

/// Numerical notes that rule an engine out: anything that rounds inputs or partial sums below
/// the tensor's own precision (TF32 tensor cores for float32, down-converted inputs, reduced-
/// precision reductions), and the FFT and Winograd transforms, whose rounding differs from a
/// direct sum by far more than the parity bounds allow. For float64, tensor-core (DMMA) engines
/// are IEEE double FMA and stay allowed.
bool note_excludes(cudnnBackendNumericalNote_t note, DType dtype) {
  switch (note) {
    case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
      return dtype == DType::F32;
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

/// One engine configuration the heuristics proposed, with what its engine's notes say.
struct Candidate {
  Descriptor config;
  std::int64_t engine = -1;
  bool excluded = false;
  bool nondeterministic = false;
};

RuntimeResult<Candidate> inspect(std::string_view op, Descriptor config, DType dtype) {
  Candidate c;
  c.config = std::move(config);
  CAPSULE_TRY(Descriptor engine, create_descriptor(op, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine"));
  cudnnBackendDescriptor_t raw = engine.get();
  std::int64_t count = 0;
  if (cudnnStatus_t s = cudnnBackendGetAttribute(c.config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &raw);
      s != CUDNN_STATUS_SUCCESS) {
    return cudnn_failure(op, "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINECFG_ENGINE)", s);
  }
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  std::int64_t note_count = 0;
  if (cudnnStatus_t s = cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                                 CUDNN_TYPE_NUMERICAL_NOTE, static_cast<std::int64_t>(notes.size()),
                                                 &note_count, notes.data());
      s != CUDNN_STATUS_SUCCESS) {
    return cudnn_failure(op, "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE)", s);
  }
  for (std::int64_t i = 0; i < note_count && i < static_cast<std::int64_t>(notes.size()); ++i) {
    const cudnnBackendNumericalNote_t note = notes[static_cast<std::size_t>(i)];
    if (note_excludes(note, dtype)) c.excluded = true;
    if (note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) c.nondeterministic = true;
  }
  if (cudnnStatus_t s = cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                                                 &count, &c.engine);
      s != CUDNN_STATUS_SUCCESS) {
    return cudnn_failure(op, "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINE_GLOBAL_INDEX)", s);
  }
  return c;
}

/// The engine configurations heuristics `mode` proposes for `graph`, best first. A mode that
/// cannot serve the graph proposes none (its error is kept in `why`).
RuntimeResult<std::vector<Descriptor>> proposals(std::string_view op, const Descriptor& graph,
                                                 cudnnBackendHeurMode_t mode, std::string& why) {
  DescriptorBuilder heur(op, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
  heur.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heur.set_value(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, mode);
  RuntimeResult<Descriptor> finalized = heur.finalize();
  if (!finalized) {
    // A verdict on the graph means this mode proposes nothing; any other failure is reported,
    // so that a transient one never becomes a cached "no engine".
    if (!is_graph_verdict(last_failure)) return fail(std::move(finalized).error());
    why = finalized.error().message;
    return std::vector<Descriptor>{};
  }
  std::int64_t available = 0;
  if (cudnnStatus_t s = cudnnBackendGetAttribute(finalized->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available, nullptr);
      s != CUDNN_STATUS_SUCCESS) {
    return cudnn_failure(op, "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS count)", s);
  }
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < available; ++i) {
    CAPSULE_TRY(Descriptor d, create_descriptor(op, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine configuration"));
    raw.push_back(d.get());
    configs.push_back(std::move(d));
  }
  if (available == 0) return configs;
  std::int64_t returned = 0;
  if (cudnnStatus_t s = cudnnBackendGetAttribute(finalized->get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, available, &returned, raw.data());
      s != CUDNN_STATUS_SUCCESS) {
    return cudnn_failure(op, "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)", s);
  }
  if (returned < available) configs.resize(static_cast<std::size_t>(returned));
  return configs;
}

}  // namespace

/// cuDNN forbids using one handle from two threads at once: every call that passes the process's
/// handle (building a plan, executing one) holds this lock. Sessions on several threads share the
/// one stream anyway, so the lock serialises only what the stream would.
std::mutex& cudnn_handle_mutex() {
  static std::mutex* const mutex = new std::mutex();
  return *mutex;
}

RuntimeResult<cudnnHandle_t> cudnn_handle(std::string_view op, const StartedDevice& device) {
  static CudnnState* const state = new CudnnState();  // never destroyed, like the device runtime
  std::call_once(state->once, [&] {
    if (cudnnStatus_t s = cudnnCreate(&state->handle); s != CUDNN_STATUS_SUCCESS) {
      state->failure = str("cudnnCreate failed: ", describe(s));
      return;
    }
    if (cudnnStatus_t s = cudnnSetStream(state->handle, device.stream); s != CUDNN_STATUS_SUCCESS) {
      state->failure = str("cudnnSetStream failed: ", describe(s));
    }
  });
  if (!state->failure.empty()) return runtime_error(RuntimeCode::DeviceError, str(op, ": ", state->failure));
  return state->handle;
}

Failure<RuntimeError> cudnn_failure(std::string_view op, std::string_view call, cudnnStatus_t status) {
  last_failure = status;
  return runtime_error(RuntimeCode::DeviceError, str(op, ": ", call, " failed: ", describe(status)));
}

Descriptor::~Descriptor() {
  if (raw_ != nullptr) (void)cudnnBackendDestroyDescriptor(raw_);
}

Descriptor& Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    if (raw_ != nullptr) (void)cudnnBackendDestroyDescriptor(raw_);
    raw_ = std::exchange(other.raw_, nullptr);
  }
  return *this;
}

RuntimeResult<Descriptor> create_descriptor(std::string_view op, cudnnBackendDescriptorType_t type,
                                            std::string_view what) {
  cudnnBackendDescriptor_t raw = nullptr;
  if (cudnnStatus_t s = cudnnBackendCreateDescriptor(type, &raw); s != CUDNN_STATUS_SUCCESS) {
    return cudnn_failure(op, str("cudnnBackendCreateDescriptor(", what, ")"), s);
  }
  return Descriptor(raw);
}

DescriptorBuilder::DescriptorBuilder(std::string_view op, cudnnBackendDescriptorType_t type, std::string what)
    : op_(op), what_(std::move(what)) {
  RuntimeResult<Descriptor> made = create_descriptor(op, type, what_);
  if (made) {
    desc_ = std::move(made).value();
  } else {
    status_ = fail(std::move(made).error());
  }
}

DescriptorBuilder& DescriptorBuilder::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                                          std::int64_t count, const void* values) {
  if (!status_) return *this;
  if (cudnnStatus_t s = cudnnBackendSetAttribute(desc_.get(), name, type, count, values); s != CUDNN_STATUS_SUCCESS) {
    status_ = cudnn_failure(op_, str("cudnnBackendSetAttribute(", what_, ", attribute ", static_cast<int>(name), ")"),
                            s);
  }
  return *this;
}

RuntimeResult<Descriptor> DescriptorBuilder::finalize() {
  if (!status_) return fail(std::move(status_).error());
  if (cudnnStatus_t s = cudnnBackendFinalize(desc_.get()); s != CUDNN_STATUS_SUCCESS) {
    return cudnn_failure(op_, str("cudnnBackendFinalize(", what_, ")"), s);
  }
  return std::move(desc_);
}

cudnnDataType_t cudnn_dtype(DType dtype) { return dtype == DType::F32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE; }

std::int64_t common_alignment(std::initializer_list<const void*> addresses) {
  std::uintptr_t bits = 16;
  for (const void* p : addresses) bits |= reinterpret_cast<std::uintptr_t>(p);
  return static_cast<std::int64_t>(bits & (~bits + 1));  // the lowest set bit, at most 16
}

RuntimeResult<Descriptor> make_tensor(std::string_view op, std::string_view what, std::int64_t uid,
                                      std::span<const std::int64_t> dims, DType dtype, std::int64_t alignment,
                                      bool by_value, MemoryLayout layout) {
  std::vector<std::int64_t> strides(dims.size(), 1);
  if (layout == MemoryLayout::Nhwc && dims.size() == 4) {
    strides = {dims[1] * dims[2] * dims[3], 1, dims[3] * dims[1], dims[1]};
  } else {
    for (std::size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  }
  DescriptorBuilder t(op, CUDNN_BACKEND_TENSOR_DESCRIPTOR, str("the ", what, " tensor"));
  t.set_value(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, cudnn_dtype(dtype));
  t.set_int64s(CUDNN_ATTR_TENSOR_DIMENSIONS, dims);
  t.set_int64s(CUDNN_ATTR_TENSOR_STRIDES, strides);
  t.set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid);
  t.set_int64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, alignment);
  if (by_value) t.set_value(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, true);
  return t.finalize();
}

RuntimeResult<PlanPtr> build_plan(std::string_view op, const StartedDevice& device, std::vector<Descriptor> operations,
                                  std::vector<Descriptor> parts, DType dtype, std::string_view graph_name) {
  CAPSULE_TRY(cudnnHandle_t handle, cudnn_handle(op, device));
  std::vector<cudnnBackendDescriptor_t> raw_ops;
  for (const Descriptor& d : operations) raw_ops.push_back(d.get());
  DescriptorBuilder graph_builder(op, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, str("the ", graph_name, " graph"));
  graph_builder.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                    static_cast<std::int64_t>(raw_ops.size()), raw_ops.data());
  graph_builder.set_value(kGraphHandle, CUDNN_TYPE_HANDLE, handle);
  CAPSULE_TRY(Descriptor graph, graph_builder.finalize());

  std::vector<Candidate> candidates;
  std::string why_none;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    CAPSULE_TRY(std::vector<Descriptor> configs, proposals(op, graph, mode, why_none));
    for (Descriptor& config : configs) {
      CAPSULE_TRY(Candidate c, inspect(op, std::move(config), dtype));
      candidates.push_back(std::move(c));
    }
  }
  std::size_t proposed = candidates.size(), excluded = 0;
  for (const Candidate& c : candidates) excluded += c.excluded ? 1 : 0;
  // Deterministic engines first; a nondeterministic one only when no deterministic one fits.
  for (bool allow_nondeterministic : {false, true}) {
    for (Candidate& c : candidates) {
      if (c.excluded || c.config.get() == nullptr || c.nondeterministic != allow_nondeterministic) continue;
      DescriptorBuilder plan_builder(op, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, str("the ", graph_name, " plan"));
      plan_builder.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, c.config);
      plan_builder.set_value(kPlanHandle, CUDNN_TYPE_HANDLE, handle);
      RuntimeResult<Descriptor> plan = plan_builder.finalize();
      if (!plan) {
        // This engine refuses the graph: try the next. Any other failure is reported, never
        // folded into a cached "no engine".
        if (!is_graph_verdict(last_failure)) return fail(std::move(plan).error());
        why_none = plan.error().message;
        continue;
      }
      auto built = std::make_shared<GraphPlan>();
      std::int64_t count = 0;
      if (cudnnStatus_t s = cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                     CUDNN_TYPE_INT64, 1, &count, &built->workspace_bytes);
          s != CUDNN_STATUS_SUCCESS) {
        return cudnn_failure(op, "cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)", s);
      }
      built->plan = std::move(plan).value();
      built->engine = c.engine;
      built->nondeterministic = c.nondeterministic;
      built->dtype = dtype;
      built->description = str(op, ": ", graph_name, " ", to_string(dtype), ", engine ", c.engine,
                               c.nondeterministic ? " (nondeterministic)" : " (deterministic)", ", workspace ",
                               built->workspace_bytes, " bytes");
      built->keep.push_back(std::move(graph));
      built->keep.push_back(std::move(c.config));
      for (Descriptor& d : operations) built->keep.push_back(std::move(d));
      for (Descriptor& d : parts) built->keep.push_back(std::move(d));
      return PlanPtr(std::move(built));
    }
  }
  // No engine: an unusable plan that says why, cached like a built one so that the next call
  // with this key does not ask cuDNN again.
  auto refused = std::make_shared<GraphPlan>();
  refused->dtype = dtype;
  refused->description = str(op, ": ", graph_name, " ", to_string(dtype), ", no engine");
  refused->refusal = str("cuDNN proposed ", proposed, " engine configurations for the ", graph_name, " graph, ",
                         excluded, " excluded by their numerical notes (TF32/down-conversion, FFT, Winograd)",
                         why_none.empty() ? std::string() : str("; last refusal: ", why_none));
  return PlanPtr(std::move(refused));
}

Failure<RuntimeError> no_engine_error(std::string_view op, DType dtype, std::string_view detail) {
  if (dtype == DType::F64) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, ": cuDNN ", cudnnGetVersion(), " has no engine for this float64 graph (", detail,
                             "); this handler refuses float64 here, use float32"));
  }
  return runtime_error(RuntimeCode::DeviceError, str(op, ": no usable cuDNN engine (", detail, ")"));
}

namespace {

using PlanMap = std::map<std::vector<std::int64_t>, PlanPtr>;

/// The process's plan cache (never destroyed, like the device runtime) and its mutex.
struct PlanCache {
  std::mutex mutex;
  PlanMap plans;
};

PlanCache& plan_cache() {
  static PlanCache* const cache = new PlanCache();
  return *cache;
}

}  // namespace

RuntimeResult<PlanPtr> cached_plan(std::string_view op, const StartedDevice& device,
                                   const std::vector<std::int64_t>& key, DType dtype,
                                   const std::function<RuntimeResult<PlanPtr>()>& build) {
  // A handful of shapes per model; the cap only bounds a pathological caller. Plans in use are
  // shared, so clearing never frees one under a running call.
  constexpr std::size_t kMaxPlans = 1024;
  std::mutex* const mutex = &plan_cache().mutex;
  PlanMap* const plans = &plan_cache().plans;
  {
    std::lock_guard<std::mutex> lock(*mutex);
    if (auto it = plans->find(key); it != plans->end()) return it->second;
  }
  // A handle that cannot be made is the device's failure, never a graph's refusal.
  CAPSULE_TRY(cudnnHandle_t handle, cudnn_handle(op, device));
  (void)handle;
  last_failure = CUDNN_STATUS_SUCCESS;
  RuntimeResult<PlanPtr> result = [&] {
    std::lock_guard<std::mutex> handle_lock(cudnn_handle_mutex());
    return build();
  }();
  if (!result && result.error().code != RuntimeCode::DeviceError) return fail(std::move(result).error());
  PlanPtr built;
  if (result) {
    built = std::move(result).value();
  } else {
    // cuDNN refused to describe or finalize the graph itself (an operation or tensor it does not
    // support in this layout or type): no engine for it. Remembered like build_plan's own "no
    // engine fits" only when cuDNN's status is a verdict on the graph; a transient failure
    // (an allocation inside cuDNN, say) is refused now and asked again next time.
    auto refused = std::make_shared<GraphPlan>();
    refused->dtype = dtype;
    refused->description = str(result.error().message, " (no plan)");
    refused->refusal = result.error().message;
    if (!is_graph_verdict(last_failure)) return PlanPtr(std::move(refused));
    built = std::move(refused);
  }
  std::lock_guard<std::mutex> lock(*mutex);
  if (plans->size() >= kMaxPlans) plans->clear();
  return plans->emplace(key, std::move(built)).first->second;
}

std::vector<std::string> plan_report() {
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  std::vector<std::string> lines;
  for (const auto& [key, plan] : cache.plans) {
    std::string text = "[";
    for (std::size_t i = 0; i < key.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(key[i]);
    lines.push_back(str(plan->description, "; key ", text, "]"));
  }
  return lines;
}

RuntimeStatus execute_plan(std::string_view op, const StartedDevice& device, const GraphPlan& plan,
                           std::span<const Binding> bindings) {
  if (!plan.usable()) return no_engine_error(op, plan.dtype, plan.refusal);
  CAPSULE_TRY(cudnnHandle_t handle, cudnn_handle(op, device));
  std::vector<std::int64_t> uids;
  std::vector<void*> pointers;
  for (const Binding& b : bindings) {
    uids.push_back(b.uid);
    pointers.push_back(const_cast<void*>(b.data));  // cuDNN's variant pack takes void*; inputs are only read
  }
  void* workspace = nullptr;
  if (plan.workspace_bytes > 0) {
    CAPSULE_CHECK(check_cuda(op, str("allocating the cuDNN workspace of ", plan.workspace_bytes, " bytes"),
                             cudaMallocFromPoolAsync(&workspace, static_cast<std::size_t>(plan.workspace_bytes),
                                                     device.pool, device.stream)));
  }
  DescriptorBuilder pack(op, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
  pack.set_int64s(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids);
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<std::int64_t>(pointers.size()),
           pointers.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  RuntimeResult<Descriptor> finalized = pack.finalize();
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  if (finalized) {
    std::lock_guard<std::mutex> handle_lock(cudnn_handle_mutex());
    status = cudnnBackendExecute(handle, plan.plan.get(), finalized->get());
  }
  // Stream-ordered: the workspace returns to the pool once the launch that uses it has run.
  if (workspace != nullptr) {
    CAPSULE_CHECK(check_cuda(op, "freeing the cuDNN workspace", cudaFreeAsync(workspace, device.stream)));
  }
  if (!finalized) return fail(std::move(finalized).error());
  if (status != CUDNN_STATUS_SUCCESS) {
    CAPSULE_CHECK(after_library_failure(op, device));
    return cudnn_failure(op, "cudnnBackendExecute", status);
  }
  return after_launch(op, device);
}

namespace {

std::int64_t operands_alignment(std::span<const Operand> operands, std::span<const Tensor> copies) {
  std::int64_t align = 16;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    if (!operands[i].tensor.defined()) continue;
    const Tensor& t = copies.empty() || !copies[i].defined() ? operands[i].tensor : copies[i];
    align = std::min(align, common_alignment({t.device_address()}));
  }
  return align;
}

std::vector<Binding> operand_bindings(std::span<const Operand> operands, std::span<const Tensor> copies) {
  std::vector<Binding> bindings;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Operand& o = operands[i];
    if (!o.tensor.defined()) {
      bindings.push_back(Binding{o.uid, o.host});
    } else {
      const Tensor& t = copies.empty() || !copies[i].defined() ? o.tensor : copies[i];
      bindings.push_back(Binding{o.uid, t.device_address()});
    }
  }
  return bindings;
}

/// Our transpose kernel for `in`'s dtype (launch_transpose_padded): the NCHW <-> NHWC copies,
/// channel-padded or not.
RuntimeStatus transpose_padded_into(std::string_view op, const StartedDevice& device, const Tensor& in, Tensor& out,
                                    std::int64_t batch, std::int64_t rows, std::int64_t cols, std::int64_t in_stride,
                                    std::int64_t out_stride) {
  const cudaError_t launched =
      in.dtype() == DType::F32
          ? launch_transpose_padded(device_ptr<float>(in), mutable_device_ptr<float>(out), batch, rows, cols,
                                    in_stride, out_stride, device.stream)
          : launch_transpose_padded(device_ptr<double>(in), mutable_device_ptr<double>(out), batch, rows, cols,
                                    in_stride, out_stride, device.stream);
  CAPSULE_CHECK(check_cuda(op, "the layout transpose kernel", launched));
  return after_launch(op, device);
}

/// Copies the first `count` elements of `from` into `to` on our stream.
RuntimeStatus copy_prefix(std::string_view op, const StartedDevice& device, const Tensor& from, Tensor& to,
                          std::int64_t count) {
  const std::size_t bytes = static_cast<std::size_t>(count) * element_size(from.dtype());
  if (bytes == 0) return std::monostate{};
  return check_cuda(op, "copying a per-channel operand",
                    cudaMemcpyAsync(to.mutable_device_address(), from.device_address(), bytes,
                                    cudaMemcpyDeviceToDevice, device.stream));
}

/// Runs `plan_for`'s channels-last plan for `padded` >= c channels, if cuDNN has one, on
/// channels-last copies of the activations ([n, c, plane] -> [n, plane, padded], the added lanes
/// zero) and, when padded > c, on zero-padded copies of the per-channel operands; then copies the
/// written ones' real channels back. Returns the plan, usable or not. The copies are allocated
/// first (the plan's key holds their alignment) but filled only for a usable plan: a refused
/// layout, which batch norm at 2 or 3 channels meets on every call, costs no kernel.
RuntimeResult<PlanPtr> run_channels_last(std::string_view op, const StartedDevice& device, std::int64_t n,
                                         std::int64_t c, std::int64_t padded, std::span<const Operand> operands,
                                         const PlanForLayout& plan_for) {
  std::vector<Tensor> copies(operands.size());
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Operand& o = operands[i];
    if (o.plane > 0) {
      const std::array<std::int64_t, 3> dims{n, o.plane, padded};
      CAPSULE_TRY(copies[i], new_device_tensor(op, dims, o.tensor.dtype()));
    } else if (o.per_channel && padded > c) {
      if (o.tensor.numel() != c) {
        return runtime_error(RuntimeCode::ShapeMismatch, str(op, ": a per-channel operand has ", o.tensor.numel(),
                                                             " elements; expected ", c));
      }
      const std::array<std::int64_t, 1> dims{padded};
      CAPSULE_TRY(copies[i], new_device_tensor(op, dims, o.tensor.dtype()));
    }
  }
  CAPSULE_TRY(PlanPtr plan, plan_for(MemoryLayout::Nhwc, operands_alignment(operands, copies), padded));
  if (!plan->usable()) return plan;
  // The inputs' copies; written ones need no zeroing: the graph writes every lane of its outputs.
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Operand& o = operands[i];
    if (!copies[i].defined() || o.written) continue;
    if (o.plane > 0) {
      CAPSULE_CHECK(transpose_padded_into(op, device, o.tensor, copies[i], n, c, o.plane, o.plane, padded));
    } else {
      CAPSULE_CHECK(zero_on_stream(op, device, copies[i]));
      CAPSULE_CHECK(copy_prefix(op, device, o.tensor, copies[i], c));
    }
  }
  CAPSULE_CHECK(execute_plan(op, device, *plan, operand_bindings(operands, copies)));
  for (std::size_t i = 0; i < operands.size(); ++i) {
    if (!copies[i].defined() || !operands[i].written) continue;
    Tensor out = operands[i].tensor;  // shares the caller's storage
    if (operands[i].plane > 0) {
      const std::int64_t plane = operands[i].plane;
      CAPSULE_CHECK(transpose_padded_into(op, device, copies[i], out, n, plane, c, padded, plane));
    } else {
      CAPSULE_CHECK(copy_prefix(op, device, copies[i], out, c));
    }
  }
  return plan;
}

}  // namespace

RuntimeStatus run_any_layout(std::string_view op, const StartedDevice& device, std::int64_t n, std::int64_t c,
                             std::span<const Operand> operands, const PlanForLayout& plan_for,
                             std::span<const std::int64_t> pad_channels_to) {
  CAPSULE_TRY(PlanPtr nchw, plan_for(MemoryLayout::Nchw, operands_alignment(operands, {}), c));
  if (nchw->usable()) return execute_plan(op, device, *nchw, operand_bindings(operands, {}));
  CAPSULE_TRY(PlanPtr nhwc, run_channels_last(op, device, n, c, c, operands, plan_for));
  if (nhwc->usable()) return std::monostate{};
  // In the order tried, each named, so the error reads as the attempts were made.
  std::string refusals = str("packed NCHW: ", nchw->refusal, "; channels-last: ", nhwc->refusal);
  std::int64_t tried = c;
  for (const std::int64_t multiple : pad_channels_to) {
    const std::int64_t padded = multiple > 1 ? (c + multiple - 1) / multiple * multiple : c;
    if (padded <= tried) continue;  // the same graph as one refused already
    tried = padded;
    CAPSULE_TRY(PlanPtr padded_plan, run_channels_last(op, device, n, c, padded, operands, plan_for));
    if (padded_plan->usable()) return std::monostate{};
    refusals += str("; channels-last with ", c, " channels padded to ", padded, ": ", padded_plan->refusal);
  }
  return no_engine_error(op, nhwc->dtype, refusals);
}

RuntimeStatus zero_on_stream(std::string_view op, const StartedDevice& device, Tensor& t) {
  const std::size_t bytes = static_cast<std::size_t>(t.numel()) * element_size(t.dtype());
  if (bytes == 0) return std::monostate{};
  CAPSULE_CHECK(
      check_cuda(op, "cudaMemsetAsync", cudaMemsetAsync(t.mutable_device_address(), 0, bytes, device.stream)));
  return after_launch(op, device);
}

}  // namespace capsule::cuda
