// SPDX-License-Identifier: Apache-2.0
// Dense tensors: contiguous row-major storage of float32 or float64, a shape of at most kMaxRank
// dimensions, and a device tag. Shapes live inline (no allocation), so a 1-element tensor costs
// one storage allocation. Storage is shared between tensors that view the same elements (reshape
// shares; every other op writes a new tensor), and an op never mutates its inputs. Only the CPU
// allocates here; CUDA storage is a declared device whose allocator a CUDA provider supplies.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/runtime/error.hpp"
#include "capsule/vocab.hpp"

namespace capsule {

enum class DType : std::uint8_t { F32, F64 };

std::string_view to_string(DType dtype);
constexpr std::size_t element_size(DType dtype) { return dtype == DType::F32 ? 4 : 8; }

/// Dimensions of a tensor, stored inline. Rank 0 is a scalar with one element.
class Shape {
 public:
  static constexpr std::size_t kMaxRank = 8;

  Shape() = default;
  /// Checks rank, non-negative sizes and that the element count fits in int64.
  static RuntimeResult<Shape> make(std::span<const std::int64_t> dims);
  static RuntimeResult<Shape> make(std::initializer_list<std::int64_t> dims) {
    return make(std::span<const std::int64_t>(dims.begin(), dims.size()));
  }

  std::size_t rank() const { return rank_; }
  std::int64_t operator[](std::size_t axis) const { return dims_[axis]; }
  std::int64_t numel() const { return numel_; }
  std::span<const std::int64_t> dims() const { return {dims_.data(), rank_}; }
  std::vector<std::int64_t> to_vector() const { return {dims_.begin(), dims_.begin() + static_cast<std::ptrdiff_t>(rank_)}; }
  /// Row-major strides in elements.
  std::array<std::int64_t, kMaxRank> strides() const;

  friend bool operator==(const Shape& a, const Shape& b);

 private:
  std::array<std::int64_t, kMaxRank> dims_{};
  std::size_t rank_ = 0;
  std::int64_t numel_ = 1;
};

/// `[2, 3]`; a scalar prints as `[]`.
std::string to_string(const Shape& shape);

/// A provider's own handle over a storage's bytes (LibTorch's `at::Tensor` view of them, say),
/// cached on the storage so that a tensor read by many foreign calls is wrapped once, as a
/// foreign runtime's own tensor would be, instead of once per call. Opaque to the engine:
/// `provider` is the address of a tag the attaching provider owns, so a provider recognises its
/// own handle and ignores another's; `release` frees `handle`. The handle never owns the bytes:
/// the storage releases it before its own deleter frees them.
struct ForeignView {
  const void* provider = nullptr;
  void* handle = nullptr;
  void (*release)(void* handle) noexcept = nullptr;
};

/// Owns the bytes of one or more tensors. CPU storage is allocated here; a provider wraps a buffer
/// it allocated (another device's memory, or a foreign runtime's CPU tensor) with `adopt`, a
/// deleter and a context, so the engine never includes a device or provider header.
class Storage {
  struct Private {};

 public:
  /// Releases an adopted buffer. Called exactly once, when the last tensor over the storage dies,
  /// with the buffer (null for a zero-byte one) and the context given to `adopt`; the context lets
  /// a provider keep its own owner alive (for example a reference to the foreign tensor).
  using Deleter = void (*)(void* data, void* context) noexcept;
  /// Buffers up to this size live inside the Storage object itself, so a small tensor costs one
  /// heap allocation (object, control block and elements together).
  static constexpr std::size_t kInlineBytes = 64;

  static RuntimeResult<std::shared_ptr<Storage>> allocate_cpu(std::size_t bytes);
  /// Wraps `bytes` at `data` without copying. Adopted bytes are as immutable as ours: the provider
  /// must not write them afterwards. `deleter` may be null (nothing to release).
  static std::shared_ptr<Storage> adopt(void* data, std::size_t bytes, Device device, Deleter deleter,
                                        void* context);

  /// Use allocate_cpu or adopt; public only so make_shared can build it.
  Storage(Private, void* data, std::size_t bytes, Device device, Deleter deleter, void* context)
      : data_(data == nullptr ? inline_ : data), bytes_(bytes), device_(device), deleter_(deleter), context_(context) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  /// The attached foreign view, or null. Safe from any thread.
  const ForeignView* foreign_view() const {
    return foreign_state_.load(std::memory_order_acquire) == kForeignAttached ? &foreign_ : nullptr;
  }
  /// Attaches `view` unless a view is attached already (one slot: the first provider to attach
  /// keeps it), and returns the view now attached (null while another thread is still filling
  /// the slot). The storage owns `view.handle` either way: a view that loses is released at once,
  /// so a caller keeps its own reference. Logically const: the bytes do not change.
  const ForeignView* attach_foreign_view(ForeignView view) const;

 private:
  /// A new shared Storage record (docs: engine/src/runtime/storage_records.hpp).
  static std::shared_ptr<Storage> make_record(void* data, std::size_t bytes, Device device, Deleter deleter,
                                              void* context);

  void* data_;
  std::size_t bytes_;
  Device device_;
  Deleter deleter_;
  void* context_;
  // The foreign view lives inline (attaching allocates nothing): empty → writing (one thread won
  // the slot and fills it) → attached (published; never changes again until destruction).
  static constexpr std::uint8_t kForeignEmpty = 0, kForeignWriting = 1, kForeignAttached = 2;
  mutable std::atomic<std::uint8_t> foreign_state_{kForeignEmpty};
  mutable ForeignView foreign_;
  // 16-byte alignment is what the default allocator gives; larger buffers are 64-byte aligned.
  alignas(16) std::byte inline_[kInlineBytes];
};

class Tensor {
 public:
  /// An undefined tensor (no storage); used for "no gradient".
  Tensor() = default;

  /// Uninitialised contiguous storage. Only `Device::Cpu` allocates in this build; other devices
  /// fail with device-unavailable naming the device.
  static RuntimeResult<Tensor> empty(const Shape& shape, DType dtype, Device device = Device::Cpu);
  static RuntimeResult<Tensor> zeros(const Shape& shape, DType dtype);
  static RuntimeResult<Tensor> full(const Shape& shape, DType dtype, double value);
  /// Copies `values` (converted to `dtype`); their count must equal the shape's element count.
  static RuntimeResult<Tensor> from_values(const Shape& shape, DType dtype, std::span<const double> values);
  static RuntimeResult<Tensor> from_values(std::initializer_list<std::int64_t> dims, DType dtype,
                                           std::initializer_list<double> values);
  /// A scalar (rank 0).
  static RuntimeResult<Tensor> scalar(DType dtype, double value);
  /// A tensor over adopted storage (Storage::adopt), no copy. Fails with size-overflow unless the
  /// storage holds at least the shape's bytes, and with invalid-argument when it is null.
  static RuntimeResult<Tensor> over(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  std::size_t rank() const { return shape_.rank(); }
  std::int64_t dim(std::size_t axis) const { return shape_[axis]; }
  std::int64_t numel() const { return shape_.numel(); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::Cpu; }
  /// Every tensor is contiguous and row-major; strides are derived from the shape.
  std::array<std::int64_t, Shape::kMaxRank> strides() const { return shape_.strides(); }

  /// Typed element access. T must match dtype() (asserted); CPU storage only.
  template <class T>
  const T* data() const { return static_cast<const T*>(raw()); }
  /// Writable elements. Ops never write their inputs; this is for kernels filling a fresh output
  /// (and tests that build inputs element by element).
  template <class T>
  T* mutable_data() { return static_cast<T*>(raw()); }

  /// The address of element 0 on the tensor's own device: a device pointer for a CUDA tensor,
  /// which a device provider passes to its libraries and the host never dereferences. Null for an
  /// undefined tensor.
  const void* device_address() const { return storage_ ? storage_->data() : nullptr; }
  /// The same, for a provider filling a fresh output on its device.
  void* mutable_device_address() { return storage_ ? storage_->data() : nullptr; }

  /// Element `i` of the flat row-major order, converted to double.
  double at(std::int64_t flat_index) const;
  std::vector<double> to_vector() const;

  /// Same elements under another shape of equal element count (shares storage).
  RuntimeResult<Tensor> reshaped(const Shape& shape) const;
  /// A new tensor with its own copy of the elements.
  RuntimeResult<Tensor> clone() const;
  /// The storage's foreign view (Storage::foreign_view), or null for an undefined tensor. A
  /// provider must check that the view's shape and dtype are this tensor's: tensors of other
  /// shapes (reshape) share the storage.
  const ForeignView* foreign_view() const { return storage_ ? storage_->foreign_view() : nullptr; }
  /// Storage::attach_foreign_view; an undefined tensor releases `view` and returns null.
  const ForeignView* attach_foreign_view(ForeignView view) const;
  /// True when both tensors share storage (for tests of aliasing).
  bool shares_storage_with(const Tensor& other) const { return storage_ && storage_ == other.storage_; }

 private:
  Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype)
      : storage_(std::move(storage)), shape_(shape), dtype_(dtype) {}
  void* raw() const;

  std::shared_ptr<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::F32;
};

/// Fails with shape-mismatch unless `a` and `b` have equal shapes; names `op` and both shapes.
RuntimeStatus expect_same_shape(std::string_view op, const Tensor& a, const Tensor& b);
/// Fails with dtype-mismatch unless all tensors share one dtype.
RuntimeStatus expect_same_dtype(std::string_view op, std::span<const Tensor> tensors);
/// Fails with shape-mismatch unless `t` has the given rank.
RuntimeStatus expect_rank(std::string_view op, std::string_view operand, const Tensor& t, std::size_t rank);
/// Normalises a possibly negative axis against `rank`; invalid-argument when out of range.
RuntimeResult<std::size_t> normalize_axis(std::string_view op, std::int64_t axis, std::size_t rank);
/// a * b for element and byte counts; size-overflow naming `what` when it does not fit.
RuntimeResult<std::int64_t> checked_mul(std::string_view what, std::int64_t a, std::int64_t b);
/// a + b for sizes; size-overflow naming `what` when it does not fit.
RuntimeResult<std::int64_t> checked_add(std::string_view what, std::int64_t a, std::int64_t b);

}  // namespace capsule
