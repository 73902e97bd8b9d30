// SPDX-License-Identifier: Apache-2.0
// The cuBLAS handlers (provider cublas, device cuda): matmul and its batches, scaled_matmul and
// linear, forward and local VJP (backend-vjp: every adjoint is another cuBLAS product), with the
// semantics of capsule/runtime/op_args.hpp.
//
// Math mode is set explicitly: CUBLAS_DEFAULT_MATH, which for float32 and float64 is IEEE
// arithmetic with no TF32 tensor-op rounding and no BF16x9 or fixed-point emulation (those are
// opt-in math modes, never set here). The summation order inside a product is cuBLAS's own
// (`implementation-defined` in the catalog); the products are deterministic for one build,
// device and shape (cuBLAS's documented reproducibility on one stream, without atomics modes).
//
// cuBLAS is column-major and our tensors are row-major: a row-major C[m, n] is the column-major
// Cᵀ[n, m], so C = A·B is computed as Cᵀ = Bᵀ·Aᵀ with the operands swapped and no data moved
// (`row_major_gemm`).
#include <cublas_v2.h>

#include <climits>
#include <cmath>
#include <type_traits>
#include <mutex>
#include <vector>

#include "cublas_handlers.hpp"
#include "handler_spec.hpp"
#include "device.hpp"
#include "small_kernels.hpp"

namespace capsule::cuda {
namespace {

using Grads = RuntimeResult<std::vector<Tensor>>;

struct CublasState {
  std::once_flag once;
  cublasHandle_t handle = nullptr;
  std::string failure;  ///< why the handle could not be made, or empty
};

std::string describe(cublasStatus_t status) {
  return str(cublasGetStatusName(status), " (", cublasGetStatusString(status), ")");
}

Failure<RuntimeError> cublas_failure(std::string_view op, std::string_view call, cublasStatus_t status) {
  return runtime_error(RuntimeCode::DeviceError, str(op, ": ", call, " failed: ", describe(status)));
}

/// The process's cuBLAS handle, bound to our stream with the math mode set; made on first use.
RuntimeResult<cublasHandle_t> cublas_handle(std::string_view op, const StartedDevice& device) {
  static CublasState* const state = new CublasState();  // never destroyed, like the device runtime
  std::call_once(state->once, [&] {
    if (cublasStatus_t status = cublasCreate(&state->handle); status != CUBLAS_STATUS_SUCCESS) {
      state->failure = str("cublasCreate failed: ", describe(status));
      return;
    }
    if (cublasStatus_t status = cublasSetStream(state->handle, device.stream); status != CUBLAS_STATUS_SUCCESS) {
      state->failure = str("cublasSetStream failed: ", describe(status));
      return;
    }
    if (cublasStatus_t status = cublasSetMathMode(state->handle, CUBLAS_DEFAULT_MATH); status != CUBLAS_STATUS_SUCCESS) {
      state->failure = str("cublasSetMathMode(CUBLAS_DEFAULT_MATH) failed: ", describe(status));
      return;
    }
    // Host-side alpha and beta (the values live on our stack, read at the call).
    if (cublasStatus_t status = cublasSetPointerMode(state->handle, CUBLAS_POINTER_MODE_HOST);
        status != CUBLAS_STATUS_SUCCESS) {
      state->failure = str("cublasSetPointerMode failed: ", describe(status));
    }
  });
  if (!state->failure.empty()) return runtime_error(RuntimeCode::DeviceError, str(op, ": ", state->failure));
  return state->handle;
}

/// One row-major product, possibly batched: C[b] = alpha · opA(A[b]) · opB(B[b]) + beta · C[b],
/// where opA(A) is [m, k] (A is stored [m, k], or [k, m] when `transpose_a`) and opB(B) is [k, n]
/// (B stored [k, n], or [n, k] when `transpose_b`). Strides are between batch entries, in elements
/// (0 reuses one matrix for every entry).
struct RowMajorGemm {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  bool transpose_a = false, transpose_b = false;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

RuntimeStatus expect_int_dims(std::string_view op, const RowMajorGemm& g) {
  for (std::int64_t value : {g.m, g.n, g.k, g.batch}) {
    if (value > INT_MAX) {
      return runtime_error(RuntimeCode::InvalidArgument,
                           str(op, ": a product dimension of ", value,
                               " exceeds the 32-bit sizes this cuBLAS handler passes (at most ", INT_MAX, ")"));
    }
  }
  return std::monostate{};
}

template <class T>
cublasStatus_t gemm_call(cublasHandle_t handle, cublasOperation_t op_b, cublasOperation_t op_a, int n, int m, int k,
                         const T* alpha, const T* b, int ldb, long long stride_b, const T* a, int lda,
                         long long stride_a, const T* beta, T* c, int ldc, long long stride_c, int batch) {
  if constexpr (std::is_same_v<T, float>) {
    if (batch == 1) return cublasSgemm(handle, op_b, op_a, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
    return cublasSgemmStridedBatched(handle, op_b, op_a, n, m, k, alpha, b, ldb, stride_b, a, lda, stride_a, beta, c,
                                     ldc, stride_c, batch);
  } else {
    if (batch == 1) return cublasDgemm(handle, op_b, op_a, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
    return cublasDgemmStridedBatched(handle, op_b, op_a, n, m, k, alpha, b, ldb, stride_b, a, lda, stride_a, beta, c,
                                     ldc, stride_c, batch);
  }
}

/// Runs `g` on device buffers of element type T. Nothing runs when the result is empty; a k of
/// zero leaves C as beta·C, which the callers make explicit (zeros or the broadcast bias) first.
template <class T>
RuntimeStatus row_major_gemm(std::string_view op, const StartedDevice& device, const RowMajorGemm& g, double alpha,
                             const T* a, const T* b, double beta, T* c) {
  if (g.m == 0 || g.n == 0 || g.batch == 0 || g.k == 0) return std::monostate{};
  CAPSULE_CHECK(expect_int_dims(op, g));
  CAPSULE_TRY(cublasHandle_t handle, cublas_handle(op, device));
  const T alpha_t = static_cast<T>(alpha);
  const T beta_t = static_cast<T>(beta);
  // Column-major view: Cᵀ[n, m] = opB(B)ᵀ · opA(A)ᵀ. A row-major X[r, c] is the column-major Xᵀ
  // with leading dimension c, so an untransposed operand passes as N and a transposed one as T.
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const cublasOperation_t op_b = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = g.transpose_b ? k : n;
  const int lda = g.transpose_a ? m : k;
  const cublasStatus_t status = gemm_call<T>(handle, op_b, op_a, n, m, k, &alpha_t, b, ldb, g.stride_b, a, lda,
                                             g.stride_a, &beta_t, c, n, g.stride_c, static_cast<int>(g.batch));
  if (status != CUBLAS_STATUS_SUCCESS) {
    CAPSULE_CHECK(after_library_failure(op, device));
    return cublas_failure(op, std::is_same_v<T, float> ? "cublasSgemm" : "cublasDgemm", status);
  }
  return after_launch(op, device);
}

/// Dispatches on the dtype of `like`.
template <class Fn>
RuntimeStatus with_dtype(const Tensor& like, Fn&& fn) {
  if (like.dtype() == DType::F32) return fn.template operator()<float>();
  return fn.template operator()<double>();
}

/// Zeroes `t` on the stream (a product over an empty inner dimension).
RuntimeStatus zero(std::string_view op, const StartedDevice& device, Tensor& t) {
  const std::size_t bytes = static_cast<std::size_t>(t.numel()) * element_size(t.dtype());
  if (bytes == 0) return std::monostate{};
  CAPSULE_CHECK(check_cuda(op, "cudaMemsetAsync", cudaMemsetAsync(t.mutable_device_address(), 0, bytes, device.stream)));
  return after_launch(op, device);
}

// ---------------------------------------------------------------------------------------------
// matmul and scaled_matmul: a [.., m, k] · b [.., k, n] with equal leading (batch) dims.

struct ProductDims {
  std::int64_t batch = 1, m = 0, k = 0, n = 0;
  std::vector<std::int64_t> out;
};

RuntimeResult<ProductDims> product_dims(std::string_view op, const Tensor& a, const Tensor& b) {
  if (a.rank() < 2 || a.rank() != b.rank()) {
    return shape_error(op, str("operands have shapes ", to_string(a.shape()), " and ", to_string(b.shape()),
                               "; expected a [.., m, k] and b [.., k, n] of one rank >= 2"));
  }
  const std::size_t r = a.rank();
  ProductDims d;
  for (std::size_t i = 0; i + 2 < r; ++i) {
    if (a.dim(i) != b.dim(i)) {
      return shape_error(op, str("batch dimension ", i, " differs between ", to_string(a.shape()), " and ",
                                 to_string(b.shape()), "; expected equal leading dimensions"));
    }
    d.batch *= a.dim(i);  // fits: a's element count does (Shape::make checked it)
  }
  if (a.dim(r - 1) != b.dim(r - 2)) {
    return shape_error(op, str("inner dimensions of ", to_string(a.shape()), " and ", to_string(b.shape()), " differ (",
                               a.dim(r - 1), " vs ", b.dim(r - 2), "); expected a [.., m, k] and b [.., k, n]"));
  }
  d.m = a.dim(r - 2);
  d.k = a.dim(r - 1);
  d.n = b.dim(r - 1);
  d.out = a.shape().to_vector();
  d.out[r - 1] = d.n;
  return d;
}

RuntimeStatus expect_finite_alpha(std::string_view op, double alpha) {
  if (std::isfinite(alpha)) return std::monostate{};
  return runtime_error(RuntimeCode::InvalidArgument, str(op, ": alpha is ", alpha, "; expected a finite number"));
}

RuntimeResult<Tensor> product_forward(std::string_view op, Inputs inputs, double alpha) {
  CAPSULE_CHECK(expect_device_inputs(op, inputs, 2, 2));
  CAPSULE_TRY(ProductDims d, product_dims(op, inputs[0], inputs[1]));
  CAPSULE_TRY(const StartedDevice* device, started(op));
  CAPSULE_TRY(Tensor out, new_device_tensor(op, d.out, inputs[0].dtype()));
  if (d.k == 0) {
    CAPSULE_CHECK(zero(op, *device, out));
    return out;
  }
  const RowMajorGemm g{d.m, d.n, d.k, d.batch, false, false, d.m * d.k, d.k * d.n, d.m * d.n};
  const RuntimeStatus written = with_dtype(out, [&]<class T>() {
    return row_major_gemm<T>(op, *device, g, alpha, device_ptr<T>(inputs[0]), device_ptr<T>(inputs[1]), 0.0,
                             mutable_device_ptr<T>(out));
  });
  CAPSULE_CHECK(written);
  return out;
}

/// da = alpha · g·bᵀ and db = alpha · aᵀ·g, per batch entry (the reference scales g first; the
/// two differ by one rounding, within the parity tolerance).
Grads product_backward(std::string_view op, Inputs inputs, const Tensor& output, const Tensor& grad, double alpha) {
  CAPSULE_CHECK(expect_device_inputs(op, inputs, 2, 2));
  CAPSULE_CHECK(expect_device_grad(op, inputs, output, grad));
  CAPSULE_TRY(ProductDims d, product_dims(op, inputs[0], inputs[1]));
  CAPSULE_TRY(const StartedDevice* device, started(op));
  CAPSULE_TRY(Tensor da, new_device_tensor(op, inputs[0].shape().dims(), inputs[0].dtype()));
  CAPSULE_TRY(Tensor db, new_device_tensor(op, inputs[1].shape().dims(), inputs[1].dtype()));
  if (d.n == 0) {
    CAPSULE_CHECK(zero(op, *device, da));
    CAPSULE_CHECK(zero(op, *device, db));
    return std::vector<Tensor>{da, db};
  }
  if (d.m == 0) CAPSULE_CHECK(zero(op, *device, db));
  // da[m, k] = g[m, n] · bᵀ (b stored [k, n]).
  const RowMajorGemm for_a{d.m, d.k, d.n, d.batch, false, true, d.m * d.n, d.k * d.n, d.m * d.k};
  // db[k, n] = aᵀ · g (a stored [m, k]).
  const RowMajorGemm for_b{d.k, d.n, d.m, d.batch, true, false, d.m * d.k, d.m * d.n, d.k * d.n};
  const RuntimeStatus written = with_dtype(grad, [&]<class T>() -> RuntimeStatus {
    CAPSULE_CHECK(row_major_gemm<T>(op, *device, for_a, alpha, device_ptr<T>(grad), device_ptr<T>(inputs[1]), 0.0,
                                    mutable_device_ptr<T>(da)));
    return row_major_gemm<T>(op, *device, for_b, alpha, device_ptr<T>(inputs[0]), device_ptr<T>(grad), 0.0,
                             mutable_device_ptr<T>(db));
  });
  CAPSULE_CHECK(written);
  return std::vector<Tensor>{da, db};
}

RuntimeResult<Tensor> matmul_forward(Inputs inputs, const OpAttrs& /*attrs*/) {
  return product_forward("matmul", inputs, 1.0);
}
Grads matmul_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& /*attrs*/) {
  return product_backward("matmul", inputs, output, grad, 1.0);
}
RuntimeResult<Tensor> scaled_matmul_forward(Inputs inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_finite_alpha("scaled_matmul", attrs.alpha));
  return product_forward("scaled_matmul", inputs, attrs.alpha);
}
Grads scaled_matmul_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_finite_alpha("scaled_matmul", attrs.alpha));
  return product_backward("scaled_matmul", inputs, output, grad, attrs.alpha);
}

// ---------------------------------------------------------------------------------------------
// linear (x [.., in], w [out, in], b [out]?): x·wᵀ + b on x viewed as [rows, in].

constexpr std::string_view kLinear = "linear";

struct LinearDims {
  std::int64_t rows = 1, in = 0, out = 0;
  std::vector<std::int64_t> out_dims;
};

RuntimeResult<LinearDims> linear_dims(Inputs inputs) {
  CAPSULE_CHECK(expect_device_inputs(kLinear, inputs, 2, 3));
  const Tensor& x = inputs[0];
  const Tensor& w = inputs[1];
  if (x.rank() < 1 || w.rank() != 2 || x.dim(x.rank() - 1) != w.dim(1)) {
    return shape_error(kLinear, str("x has shape ", to_string(x.shape()), " and w ", to_string(w.shape()),
                                    "; expected x [.., in] and w [out, in]"));
  }
  const bool has_bias = inputs.size() > 2 && inputs[2].defined();
  if (has_bias && (inputs[2].rank() != 1 || inputs[2].dim(0) != w.dim(0))) {
    return shape_error(kLinear, str("bias has shape ", to_string(inputs[2].shape()), "; expected [", w.dim(0), "]"));
  }
  LinearDims d;
  for (std::size_t i = 0; i + 1 < x.rank(); ++i) d.rows *= x.dim(i);
  d.in = w.dim(1);
  d.out = w.dim(0);
  d.out_dims = x.shape().to_vector();
  d.out_dims.back() = d.out;
  return d;
}

RuntimeResult<Tensor> linear_forward(Inputs inputs, const OpAttrs& /*attrs*/) {
  CAPSULE_TRY(LinearDims d, linear_dims(inputs));
  CAPSULE_TRY(const StartedDevice* device, started(kLinear));
  CAPSULE_TRY(Tensor y, new_device_tensor(kLinear, d.out_dims, inputs[0].dtype()));
  const bool has_bias = inputs.size() > 2 && inputs[2].defined();
  const RuntimeStatus written = with_dtype(y, [&]<class T>() -> RuntimeStatus {
    // The bias first, then the product added onto it (beta = 1): one call, and no bias pass after.
    if (has_bias) {
      CAPSULE_CHECK(check_cuda(kLinear, "the bias broadcast",
                               launch_broadcast_rows(mutable_device_ptr<T>(y), device_ptr<T>(inputs[2]), d.rows, d.out,
                                                     device->stream)));
      CAPSULE_CHECK(after_launch(kLinear, *device));
    } else if (d.in == 0) {
      CAPSULE_CHECK(zero(kLinear, *device, y));
    }
    // y[rows, out] = x[rows, in] · wᵀ (w stored [out, in]).
    const RowMajorGemm g{d.rows, d.out, d.in, 1, false, true, 0, 0, 0};
    return row_major_gemm<T>(kLinear, *device, g, 1.0, device_ptr<T>(inputs[0]), device_ptr<T>(inputs[1]),
                             has_bias ? 1.0 : 0.0, mutable_device_ptr<T>(y));
  });
  CAPSULE_CHECK(written);
  return y;
}

Grads linear_backward(Inputs inputs, const Tensor& output, const Tensor& grad, const OpAttrs& /*attrs*/) {
  CAPSULE_TRY(LinearDims d, linear_dims(inputs));
  CAPSULE_CHECK(expect_device_grad(kLinear, inputs, output, grad));
  CAPSULE_TRY(const StartedDevice* device, started(kLinear));
  const bool has_bias = inputs.size() > 2 && inputs[2].defined();
  CAPSULE_TRY(Tensor gx, new_device_tensor(kLinear, inputs[0].shape().dims(), inputs[0].dtype()));
  CAPSULE_TRY(Tensor gw, new_device_tensor(kLinear, inputs[1].shape().dims(), inputs[1].dtype()));
  Tensor gb;
  if (has_bias) {
    CAPSULE_TRY(gb, new_device_tensor(kLinear, inputs[2].shape().dims(), inputs[2].dtype()));
  }
  // A sum over an empty dimension is zero: products over it write nothing, so zero first.
  if (d.out == 0) CAPSULE_CHECK(zero(kLinear, *device, gx));
  if (d.rows == 0) {
    CAPSULE_CHECK(zero(kLinear, *device, gw));
    if (has_bias) CAPSULE_CHECK(zero(kLinear, *device, gb));
  }
  const RuntimeStatus written = with_dtype(grad, [&]<class T>() -> RuntimeStatus {
    // gx[rows, in] = g[rows, out] · w[out, in].
    CAPSULE_CHECK(row_major_gemm<T>(kLinear, *device, RowMajorGemm{d.rows, d.in, d.out, 1, false, false, 0, 0, 0}, 1.0,
                                    device_ptr<T>(grad), device_ptr<T>(inputs[1]), 0.0, mutable_device_ptr<T>(gx)));
    // gw[out, in] = gᵀ · x (g stored [rows, out], x [rows, in]).
    CAPSULE_CHECK(row_major_gemm<T>(kLinear, *device, RowMajorGemm{d.out, d.in, d.rows, 1, true, false, 0, 0, 0}, 1.0,
                                    device_ptr<T>(grad), device_ptr<T>(inputs[0]), 0.0, mutable_device_ptr<T>(gw)));
    if (!has_bias || d.rows == 0 || d.out == 0) return std::monostate{};
    // gb[1, out] = ones[1, rows] · g[rows, out]: the column sums as one more product.
    CAPSULE_TRY(Tensor ones, new_device_tensor(kLinear, std::vector<std::int64_t>{d.rows}, grad.dtype()));
    CAPSULE_CHECK(check_cuda(kLinear, "filling ones",
                             launch_fill(mutable_device_ptr<T>(ones), T(1), d.rows, device->stream)));
    CAPSULE_CHECK(after_launch(kLinear, *device));
    return row_major_gemm<T>(kLinear, *device, RowMajorGemm{1, d.out, d.rows, 1, false, false, 0, 0, 0}, 1.0,
                             device_ptr<T>(ones), device_ptr<T>(grad), 0.0, mutable_device_ptr<T>(gb));
  });
  CAPSULE_CHECK(written);
  std::vector<Tensor> grads{gx, gw};
  if (inputs.size() > 2) grads.push_back(gb);  // undefined when the optional bias was not passed
  return grads;
}

}  // namespace

RuntimeStatus register_cublas_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(registry.add(vendor_cuda_spec(Op::Matmul, Provider::Cublas, matmul_forward, matmul_backward)));
  CAPSULE_CHECK(registry.add(
      vendor_cuda_spec(Op::ScaledMatmul, Provider::Cublas, scaled_matmul_forward, scaled_matmul_backward)));
  CAPSULE_CHECK(registry.add(vendor_cuda_spec(Op::Linear, Provider::Cublas, linear_forward, linear_backward)));
  return std::monostate{};
}

}  // namespace capsule::cuda
