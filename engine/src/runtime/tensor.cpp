// SPDX-License-Identifier: Apache-2.0
#include "capsule/runtime/tensor.hpp"

#include <cassert>
#include <cstring>
#include <limits>
#include <new>

#include "capsule/assert.hpp"
#include "capsule/escape.hpp"
#include "capsule/text.hpp"
#include "storage_records.hpp"

namespace capsule {

std::string_view to_string(RuntimeCode code) {
  switch (code) {
    case RuntimeCode::ShapeMismatch: return "shape-mismatch";
    case RuntimeCode::InvalidArgument: return "invalid-argument";
    case RuntimeCode::DTypeMismatch: return "dtype-mismatch";
    case RuntimeCode::SizeOverflow: return "size-overflow";
    case RuntimeCode::DeviceUnavailable: return "device-unavailable";
    case RuntimeCode::UnknownProfile: return "unknown-profile";
    case RuntimeCode::ProfileInvalid: return "profile-invalid";
    case RuntimeCode::PlanningFailed: return "planning-failed";
    case RuntimeCode::GateRejected: return "gate-rejected";
    case RuntimeCode::NoHandler: return "no-handler";
    case RuntimeCode::BindingRejected: return "binding-rejected";
    case RuntimeCode::DuplicateHandler: return "duplicate-handler";
    case RuntimeCode::GradientUnavailable: return "gradient-unavailable";
    case RuntimeCode::UnknownExample: return "unknown-example";
    case RuntimeCode::CheckFailed: return "check-failed";
    case RuntimeCode::DeviceMismatch: return "device-mismatch";
    case RuntimeCode::DeviceError: return "device-error";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& out, const RuntimeError& error) {
  // A message may span lines (a planning failure lists its candidates); each line is escaped on
  // its own so input it quotes shows its controls and bidi characters visibly.
  out << "error[" << to_string(error.code) << "]: ";
  std::string_view rest = error.message;
  for (std::size_t end = rest.find('\n'); end != std::string_view::npos; end = rest.find('\n')) {
    out << text_escape(rest.substr(0, end)) << '\n';
    rest.remove_prefix(end + 1);
  }
  return out << text_escape(rest);
}

std::string_view to_string(DType dtype) { return dtype == DType::F32 ? "float32" : "float64"; }

namespace {

/// The size-overflow error of a * b, naming `what`.
Failure<RuntimeError> mul_overflow(std::string_view what, std::int64_t a, std::int64_t b) {
  return runtime_error(RuntimeCode::SizeOverflow,
                       str(what, ": ", a, " * ", b, " does not fit in 64 bits; expected a size below 2^63"));
}

}  // namespace

RuntimeResult<std::int64_t> checked_mul(std::string_view what, std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return mul_overflow(what, a, b);
  return product;
}

RuntimeResult<std::int64_t> checked_add(std::string_view what, std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) {
    return runtime_error(RuntimeCode::SizeOverflow,
                         str(what, ": ", a, " + ", b, " does not fit in 64 bits; expected a size below 2^63"));
  }
  return sum;
}

RuntimeResult<Shape> Shape::make(std::span<const std::int64_t> dims) {
  if (dims.size() > kMaxRank) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("shape of rank ", dims.size(), " exceeds the maximum rank ", kMaxRank));
  }
  Shape shape;
  shape.rank_ = dims.size();
  // The product of the nonzero sizes must fit too: strides and index arithmetic multiply sizes
  // even when another dimension is 0, so [0, 2^62, 2^62] is rejected rather than overflowing.
  std::int64_t extent = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str("shape dimension ", i, " is ", dims[i], "; expected a size >= 0"));
    }
    shape.dims_[i] = dims[i];
    // The overflow tests inline, without a RuntimeResult per multiplication: every op's output
    // shape comes through here.
    std::int64_t product = 0;
    if (__builtin_mul_overflow(shape.numel_, dims[i], &product)) {
      return mul_overflow("tensor element count", shape.numel_, dims[i]);
    }
    shape.numel_ = product;
    if (dims[i] != 0) {
      if (__builtin_mul_overflow(extent, dims[i], &product)) {
        return mul_overflow("tensor extent (product of the nonzero sizes)", extent, dims[i]);
      }
      extent = product;
    }
  }
  return shape;
}

std::array<std::int64_t, Shape::kMaxRank> Shape::strides() const {
  std::array<std::int64_t, kMaxRank> out{};
  std::int64_t stride = 1;
  for (std::size_t i = rank_; i-- > 0;) {
    out[i] = stride;
    stride *= dims_[i];
  }
  return out;
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (std::size_t i = 0; i < a.rank_; ++i) {
    if (a.dims_[i] != b.dims_[i]) return false;
  }
  return true;
}

std::string to_string(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.rank(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

namespace {
void free_cpu(void* data, void* /*context*/) noexcept { ::operator delete(data, std::align_val_t{64}); }
}  // namespace

std::shared_ptr<Storage> Storage::make_record(void* data, std::size_t bytes, Device device, Deleter deleter,
                                             void* context) {
  // One allocation holds the shared count and the Storage, from this thread's cache of freed
  // records (storage_records.hpp).
  return std::allocate_shared<Storage>(storage_records::Allocator<Storage>(), Private{}, data, bytes, device,
                                       deleter, context);
}

RuntimeResult<std::shared_ptr<Storage>> Storage::allocate_cpu(std::size_t bytes) {
  if (bytes <= kInlineBytes) return make_record(nullptr, bytes, Device::Cpu, nullptr, nullptr);
  // 64-byte alignment lets kernels use aligned vector loads on every row start of a fresh tensor.
  void* data = ::operator new(bytes, std::align_val_t{64}, std::nothrow);
  if (data == nullptr) {
    return runtime_error(RuntimeCode::SizeOverflow, str("cannot allocate ", bytes, " bytes of CPU tensor storage"));
  }
  return make_record(data, bytes, Device::Cpu, &free_cpu, nullptr);
}

std::shared_ptr<Storage> Storage::adopt(void* data, std::size_t bytes, Device device, Deleter deleter,
                                        void* context) {
  return make_record(data, bytes, device, deleter, context);
}

const ForeignView* Storage::attach_foreign_view(ForeignView view) const {
  std::uint8_t expected = kForeignEmpty;
  if (foreign_state_.compare_exchange_strong(expected, kForeignWriting, std::memory_order_acquire)) {
    foreign_ = view;
    foreign_state_.store(kForeignAttached, std::memory_order_release);
    return &foreign_;
  }
  // Another view holds (or is filling) the slot: this one is not kept. A caller racing the
  // writer sees null and simply uses its own, uncached, view.
  if (view.release != nullptr) view.release(view.handle);
  return foreign_view();
}

const ForeignView* Tensor::attach_foreign_view(ForeignView view) const {
  if (storage_ == nullptr) {
    if (view.release != nullptr) view.release(view.handle);
    return nullptr;
  }
  return storage_->attach_foreign_view(view);
}

Storage::~Storage() {
  // The foreign view first: it points into the bytes the deleter is about to free.
  if (const ForeignView* view = foreign_view(); view != nullptr && view->release != nullptr) view->release(view->handle);
  // An adopted zero-byte buffer may come with a null pointer (data_ is then the inline area): its
  // deleter still runs, to release the context.
  if (deleter_ != nullptr) deleter_(data_ == inline_ ? nullptr : data_, context_);
}

RuntimeResult<Tensor> Tensor::empty(const Shape& shape, DType dtype, Device device) {
  if (device != Device::Cpu) {
    return runtime_error(RuntimeCode::DeviceUnavailable,
                         str("cannot allocate a ", to_string(shape), " tensor on device `", to_string(device),
                             "`: Tensor::empty allocates host memory only; a device tensor comes from its "
                             "provider (capsule/handlers/cuda.hpp: empty_on_device, to_device)"));
  }
  CAPSULE_TRY(std::int64_t bytes, checked_mul("tensor byte size", shape.numel(),
                                              static_cast<std::int64_t>(element_size(dtype))));
  CAPSULE_TRY(auto storage, Storage::allocate_cpu(static_cast<std::size_t>(bytes)));
  return Tensor(std::move(storage), shape, dtype);
}

RuntimeResult<Tensor> Tensor::full(const Shape& shape, DType dtype, double value) {
  CAPSULE_TRY(Tensor out, empty(shape, dtype));
  const auto n = static_cast<std::size_t>(out.numel());
  if (dtype == DType::F32) {
    float* p = out.mutable_data<float>();
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<float>(value);
  } else {
    double* p = out.mutable_data<double>();
    for (std::size_t i = 0; i < n; ++i) p[i] = value;
  }
  return out;
}

RuntimeResult<Tensor> Tensor::zeros(const Shape& shape, DType dtype) { return full(shape, dtype, 0.0); }

RuntimeResult<Tensor> Tensor::from_values(const Shape& shape, DType dtype, std::span<const double> values) {
  if (static_cast<std::int64_t>(values.size()) != shape.numel()) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str("tensor of shape ", to_string(shape), " needs ", shape.numel(), " values, got ",
                             values.size()));
  }
  CAPSULE_TRY(Tensor out, empty(shape, dtype));
  if (dtype == DType::F32) {
    float* p = out.mutable_data<float>();
    for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<float>(values[i]);
  } else if (!values.empty()) {
    std::memcpy(out.mutable_data<double>(), values.data(), values.size() * sizeof(double));
  }
  return out;
}

RuntimeResult<Tensor> Tensor::from_values(std::initializer_list<std::int64_t> dims, DType dtype,
                                          std::initializer_list<double> values) {
  CAPSULE_TRY(Shape shape, Shape::make(dims));
  return from_values(shape, dtype, std::span<const double>(values.begin(), values.size()));
}

RuntimeResult<Tensor> Tensor::scalar(DType dtype, double value) { return full(Shape{}, dtype, value); }

RuntimeResult<Tensor> Tensor::over(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype) {
  if (storage == nullptr) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str("cannot view a ", to_string(shape), " tensor over null storage; expected adopted storage"));
  }
  CAPSULE_TRY(std::int64_t bytes, checked_mul("tensor byte size", shape.numel(),
                                              static_cast<std::int64_t>(element_size(dtype))));
  if (static_cast<std::uint64_t>(bytes) > storage->bytes()) {
    return runtime_error(RuntimeCode::SizeOverflow,
                         str("a ", to_string(shape), " ", to_string(dtype), " tensor needs ", bytes,
                             " bytes; the adopted storage holds ", storage->bytes()));
  }
  return Tensor(std::move(storage), shape, dtype);
}

void* Tensor::raw() const {
  // Always on, not assert(): a device tensor's address read on the host would be a wild read, and
  // device tensors exist in CUDA builds (device_address() is their accessor).
  CAPSULE_ASSERT(storage_ != nullptr && storage_->device() == Device::Cpu,
                 "host access (data, at, to_vector) to a tensor that is not on the CPU");
  return storage_->data();
}

double Tensor::at(std::int64_t flat_index) const {
  assert(flat_index >= 0 && flat_index < numel());
  const auto i = static_cast<std::size_t>(flat_index);
  return dtype_ == DType::F32 ? static_cast<double>(data<float>()[i]) : data<double>()[i];
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> out(static_cast<std::size_t>(numel()));
  for (std::int64_t i = 0; i < numel(); ++i) out[static_cast<std::size_t>(i)] = at(i);
  return out;
}

RuntimeResult<Tensor> Tensor::reshaped(const Shape& shape) const {
  if (shape.numel() != numel()) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str("reshape: cannot view ", to_string(shape_), " (", numel(), " elements) as ",
                             to_string(shape), " (", shape.numel(), " elements); expected equal element counts"));
  }
  return Tensor(storage_, shape, dtype_);
}

RuntimeResult<Tensor> Tensor::clone() const {
  CAPSULE_TRY(Tensor out, empty(shape_, dtype_, device()));
  std::memcpy(out.raw(), raw(), static_cast<std::size_t>(numel()) * element_size(dtype_));
  return out;
}

RuntimeStatus expect_same_shape(std::string_view op, const Tensor& a, const Tensor& b) {
  if (a.shape() == b.shape()) return std::monostate{};
  return runtime_error(RuntimeCode::ShapeMismatch, str(op, ": operand shapes ", to_string(a.shape()), " and ",
                                                       to_string(b.shape()), " differ; expected equal shapes"));
}

RuntimeStatus expect_same_dtype(std::string_view op, std::span<const Tensor> tensors) {
  for (const Tensor& t : tensors) {
    if (t.defined() && t.dtype() != tensors.front().dtype()) {
      return runtime_error(RuntimeCode::DTypeMismatch,
                           str(op, ": operands mix ", to_string(tensors.front().dtype()), " and ", to_string(t.dtype()),
                               "; expected one element type"));
    }
  }
  return std::monostate{};
}

RuntimeStatus expect_rank(std::string_view op, std::string_view operand, const Tensor& t, std::size_t rank) {
  if (t.rank() == rank) return std::monostate{};
  return runtime_error(RuntimeCode::ShapeMismatch, str(op, ": ", operand, " has shape ", to_string(t.shape()),
                                                       " (rank ", t.rank(), "); expected rank ", rank));
}

RuntimeResult<std::size_t> normalize_axis(std::string_view op, std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  const std::int64_t normalized = axis < 0 ? axis + r : axis;
  if (rank == 0) {  // "-0..-1" would read as a range; say what is true instead
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, ": axis ", axis,
                             " is out of range for rank 0; expected no axis (a rank-0 tensor has none)"));
  }
  if (normalized < 0 || normalized >= r) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, ": axis ", axis, " is out of range for rank ", rank, "; expected -", rank, "..",
                             r - 1));
  }
  return static_cast<std::size_t>(normalized);
}

}  // namespace capsule
