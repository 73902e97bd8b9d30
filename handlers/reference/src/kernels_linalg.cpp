// SPDX-License-Identifier: Apache-2.0
// Reference kernels of the matrix ops and losses: matmul, scaled_matmul, softmax_matmul, linear,
// mse_loss, cross_entropy and distill, with the fast fixed-left matrix product they share.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common.hpp"
#include "matmul_gemm.hpp"
#include "kernel_support.hpp"
#include "rowwise.hpp"

namespace capsule::reference {

// ---------------------------------------------------------------------------------------------
// The fixed-left matrix product.
//
// A register tile of MR rows × NV vectors of W columns lives in vector accumulators; k runs
// innermost over the tile, and each step does `acc = acc + a[i,k] * b_vec` as a separate multiply
// and add (the library is compiled with -ffp-contract=off, so nothing fuses them). Every lane of
// every accumulator therefore performs exactly the scalar recurrence of the naive loop, in the same
// k order, whatever W is. B is packed per column panel (K×NR contiguous, zero-padded past n) so the
// inner loop streams one cache-friendly buffer; K is split into blocks whose partial sums are
// stored in C and reloaded, which is exact because the accumulator already has type T.
// ---------------------------------------------------------------------------------------------
namespace {

template <class T, int W>
struct Vec {
  typedef T type __attribute__((vector_size(W * sizeof(T))));
};

/// One MR×(NV·W) tile: c = (first ? 0 : c) + Σ_k a[r,k]·bp[k,:], k in order.
template <class T, int W, int MR, int NV>
[[gnu::always_inline]] inline void micro_tile(const T* a, std::int64_t lda, const T* bp, std::int64_t kc, T* c,
                                               std::int64_t ldc, std::int64_t cols, bool first) {
  using V = typename Vec<T, W>::type;
  constexpr int kNr = NV * W;
  V acc[static_cast<std::size_t>(MR)][static_cast<std::size_t>(NV)];
  T spill[static_cast<std::size_t>(kNr)];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    if (first) {
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = V{};
    } else if (cols == kNr) {
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) std::memcpy(&acc[r][v], c + r * ldc + v * W, sizeof(V));
    } else {
      for (int j = 0; j < kNr; ++j) spill[j] = j < cols ? c[r * ldc + j] : T(0);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) std::memcpy(&acc[r][v], spill + v * W, sizeof(V));
    }
  }
  for (std::int64_t kk = 0; kk < kc; ++kk) {
    V b[static_cast<std::size_t>(NV)];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) std::memcpy(&b[v], bp + kk * kNr + v * W, sizeof(V));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const T aik = a[r * lda + kk];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        const V product = aik * b[v];
        acc[r][v] = acc[r][v] + product;
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    if (cols == kNr) {
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) std::memcpy(c + r * ldc + v * W, &acc[r][v], sizeof(V));
    } else {
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) std::memcpy(spill + v * W, &acc[r][v], sizeof(V));
      for (int j = 0; j < cols; ++j) c[r * ldc + j] = spill[j];
    }
  }
}

/// Rows below MR at the bottom edge use a shorter tile of the same shape.
template <class T, int W, int MR, int NV>
[[gnu::always_inline]] inline void edge_tile(int rows, const T* a, std::int64_t lda, const T* bp, std::int64_t kc,
                                              T* c, std::int64_t ldc, std::int64_t cols, bool first) {
  if constexpr (MR > 1) {
    if (rows == MR) return micro_tile<T, W, MR, NV>(a, lda, bp, kc, c, ldc, cols, first);
    return edge_tile<T, W, MR - 1, NV>(rows, a, lda, bp, kc, c, ldc, cols, first);
  } else {
    (void)rows;
    micro_tile<T, W, 1, NV>(a, lda, bp, kc, c, ldc, cols, first);
  }
}

/// The whole product for one vector width; `panel` holds kKc×NR elements.
template <class T, int W, int MR, int NV>
[[gnu::always_inline]] inline void gemm_body(const T* a, const T* b, T* c, std::int64_t m, std::int64_t k,
                                              std::int64_t n, T* panel) {
  constexpr std::int64_t kNr = NV * W;
  constexpr std::int64_t kKc = 256;
  static_assert(static_cast<std::size_t>(kKc * kNr) * sizeof(T) <= 256 * 256, "panel exceeds its buffer");
  if (k == 0) {
    for (std::int64_t i = 0; i < m * n; ++i) c[i] = T(0);
    return;
  }
  for (std::int64_t k0 = 0; k0 < k; k0 += kKc) {
    const std::int64_t kc = std::min(kKc, k - k0);
    const bool first = k0 == 0;
    for (std::int64_t j0 = 0; j0 < n; j0 += kNr) {
      const std::int64_t cols = std::min(kNr, n - j0);
      for (std::int64_t kk = 0; kk < kc; ++kk) {
        const T* src = b + (k0 + kk) * n + j0;
        T* dst = panel + kk * kNr;
        for (std::int64_t j = 0; j < cols; ++j) dst[j] = src[j];
        for (std::int64_t j = cols; j < kNr; ++j) dst[j] = T(0);
      }
      std::int64_t i0 = 0;
      for (; i0 + MR <= m; i0 += MR) {
        micro_tile<T, W, MR, NV>(a + i0 * k + k0, k, panel, kc, c + i0 * n + j0, n, cols, first);
      }
      if (i0 < m) {
        edge_tile<T, W, MR - 1, NV>(static_cast<int>(m - i0), a + i0 * k + k0, k, panel, kc, c + i0 * n + j0, n,
                                    cols, first);
      }
    }
  }
}

/// Bytes of the packed B panel: kKc rows of at most 256 bytes (the widest tile below is 64 floats
/// or 32 doubles), 64 KiB on the stack.
constexpr std::size_t kPanelBytes = 256 * 256;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void gemm_avx512(const float* a, const float* b, float* c, std::int64_t m,
                                                    std::int64_t k, std::int64_t n, float* panel) {
  gemm_body<float, 16, 6, 4>(a, b, c, m, k, n, panel);
}
__attribute__((target("avx512f"))) void gemm_avx512(const double* a, const double* b, double* c, std::int64_t m,
                                                    std::int64_t k, std::int64_t n, double* panel) {
  gemm_body<double, 8, 6, 4>(a, b, c, m, k, n, panel);
}
__attribute__((target("avx2"))) void gemm_avx2(const float* a, const float* b, float* c, std::int64_t m,
                                               std::int64_t k, std::int64_t n, float* panel) {
  gemm_body<float, 8, 4, 3>(a, b, c, m, k, n, panel);
}
__attribute__((target("avx2"))) void gemm_avx2(const double* a, const double* b, double* c, std::int64_t m,
                                               std::int64_t k, std::int64_t n, double* panel) {
  gemm_body<double, 4, 4, 3>(a, b, c, m, k, n, panel);
}
#endif

template <class T>
void gemm_portable(const T* a, const T* b, T* c, std::int64_t m, std::int64_t k, std::int64_t n, T* panel) {
  gemm_body<T, 16 / static_cast<int>(sizeof(T)), 4, 2>(a, b, c, m, k, n, panel);
}

enum class Isa : std::uint8_t { Portable, Avx2, Avx512 };

Isa detect_isa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::Avx512;
  if (__builtin_cpu_supports("avx2")) return Isa::Avx2;
#endif
  return Isa::Portable;
}

template <class T>
void gemm_dispatch(const T* a, const T* b, T* c, std::int64_t m, std::int64_t k, std::int64_t n) {
  if (m == 0 || n == 0) return;
  static const Isa isa = detect_isa();
  alignas(64) T panel[kPanelBytes / sizeof(T)];
  switch (isa) {
#if defined(__x86_64__)
    case Isa::Avx512: return gemm_avx512(a, b, c, m, k, n, panel);
    case Isa::Avx2: return gemm_avx2(a, b, c, m, k, n, panel);
#else
    case Isa::Avx512:
    case Isa::Avx2:
#endif
    case Isa::Portable: return gemm_portable(a, b, c, m, k, n, panel);
  }
}

}  // namespace

void gemm_fixed_left(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k, std::int64_t n) {
  gemm_dispatch(a, b, c, m, k, n);
}
void gemm_fixed_left(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k, std::int64_t n) {
  gemm_dispatch(a, b, c, m, k, n);
}

namespace {

// ---------------------------------------------------------------------------------------------
// matmul, scaled_matmul, softmax_matmul
// ---------------------------------------------------------------------------------------------

/// The batch, m, k and n of a (batched) product a [.., m, k] · b [.., k, n].
struct MatmulDims {
  std::int64_t batch = 1, m = 0, k = 0, n = 0;
  std::vector<std::int64_t> out;
};

RuntimeResult<MatmulDims> matmul_dims(std::string_view op, const Tensor& a, const Tensor& b) {
  if (a.rank() < 2 || b.rank() < 2 || a.rank() != b.rank()) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": operands have shapes ", to_string(a.shape()), " and ", to_string(b.shape()),
                             "; expected a [.., m, k] and b [.., k, n] of one rank >= 2"));
  }
  const std::size_t r = a.rank();
  for (std::size_t i = 0; i + 2 < r; ++i) {
    if (a.dim(i) != b.dim(i)) {
      return runtime_error(RuntimeCode::ShapeMismatch,
                           str(op, ": batch dimension ", i, " differs between ", to_string(a.shape()), " and ",
                               to_string(b.shape()), "; expected equal leading dimensions"));
    }
  }
  if (a.dim(r - 1) != b.dim(r - 2)) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": inner dimensions of ", to_string(a.shape()), " and ", to_string(b.shape()),
                             " differ (", a.dim(r - 1), " vs ", b.dim(r - 2), "); expected a [.., m, k] and b [.., k, n]"));
  }
  MatmulDims d;
  d.m = a.dim(r - 2);
  d.k = a.dim(r - 1);
  d.n = b.dim(r - 1);
  d.out = a.shape().to_vector();
  d.out[r - 1] = d.n;
  CAPSULE_TRY(d.batch, dims_product(str(op, " batch size"), a.shape().dims(), 0, r - 2));
  return d;
}

/// out[i] = a[i]·b[i] for each batch entry i.
template <class T>
void batched_product(const T* a, const T* b, T* out, const MatmulDims& d) {
  for (std::int64_t i = 0; i < d.batch; ++i) {
    gemm_fixed_left(a + i * d.m * d.k, b + i * d.k * d.n, out + i * d.m * d.n, d.m, d.k, d.n);
  }
}

/// The two adjoints of out = a·b for one batch entry: da = g·bᵀ (sum over n) and db = aᵀ·g (sum
/// over m), each fixed-left through the shared product.
template <class T>
void product_adjoints(const T* a, const T* b, const T* g, T* da, T* db, std::int64_t m, std::int64_t k,
                      std::int64_t n, std::vector<T>& scratch) {
  scratch.resize(idx(std::max(k * n, m * k)));
  transpose_into(b, scratch.data(), k, n);  // bᵀ [n, k]
  gemm_fixed_left(g, scratch.data(), da, m, n, k);
  transpose_into(a, scratch.data(), m, k);  // aᵀ [k, m]
  gemm_fixed_left(scratch.data(), g, db, k, m, n);
}

RuntimeResult<Tensor> matmul_forward_impl(std::string_view op, std::span<const Tensor> inputs, double alpha,
                                          bool scaled) {
  CAPSULE_CHECK(expect_inputs(op, inputs, 2, 2));
  CAPSULE_TRY(MatmulDims d, matmul_dims(op, inputs[0], inputs[1]));
  CAPSULE_TRY(Tensor out, new_tensor(d.out, inputs[0].dtype()));
  with_dtype(out.dtype(), [&]<class T>() {
    T* o = out.mutable_data<T>();
    batched_product(inputs[0].data<T>(), inputs[1].data<T>(), o, d);
    if (scaled) {
      const T factor = static_cast<T>(alpha);
      for (std::int64_t i = 0; i < out.numel(); ++i) o[i] = factor * o[i];
    }
  });
  return out;
}

RuntimeResult<std::vector<Tensor>> matmul_backward_impl(std::string_view op, std::span<const Tensor> inputs,
                                                        const Tensor& output, const Tensor& grad_output,
                                                        double alpha, bool scaled) {
  CAPSULE_CHECK(expect_inputs(op, inputs, 2, 2));
  CAPSULE_CHECK(expect_grad(op, inputs, output, grad_output));
  CAPSULE_TRY(MatmulDims d, matmul_dims(op, inputs[0], inputs[1]));
  CAPSULE_TRY(Tensor da, Tensor::empty(inputs[0].shape(), inputs[0].dtype()));
  CAPSULE_TRY(Tensor db, Tensor::empty(inputs[1].shape(), inputs[1].dtype()));
  with_dtype(da.dtype(), [&]<class T>() {
    const T* g = grad_output.data<T>();
    // scaled_matmul scales the incoming gradient once, then runs matmul's adjoints on it.
    std::vector<T> scaled_g;
    if (scaled) {
      const T factor = static_cast<T>(alpha);
      scaled_g.resize(idx(grad_output.numel()));
      for (std::size_t i = 0; i < scaled_g.size(); ++i) scaled_g[i] = factor * g[i];
      g = scaled_g.data();
    }
    std::vector<T> scratch;
    for (std::int64_t i = 0; i < d.batch; ++i) {
      product_adjoints(inputs[0].data<T>() + i * d.m * d.k, inputs[1].data<T>() + i * d.k * d.n, g + i * d.m * d.n,
                       da.mutable_data<T>() + i * d.m * d.k, db.mutable_data<T>() + i * d.k * d.n, d.m, d.k, d.n,
                       scratch);
    }
  });
  return std::vector<Tensor>{da, db};
}

RuntimeResult<Tensor> matmul_forward(std::span<const Tensor> inputs, const OpAttrs& /*attrs*/) {
  return matmul_forward_impl("matmul", inputs, 1.0, false);
}
RuntimeResult<std::vector<Tensor>> matmul_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                   const Tensor& grad_output, const OpAttrs& /*attrs*/) {
  return matmul_backward_impl("matmul", inputs, output, grad_output, 1.0, false);
}

RuntimeStatus expect_finite_alpha(const OpAttrs& attrs) {
  if (std::isfinite(attrs.alpha)) return std::monostate{};
  return runtime_error(RuntimeCode::InvalidArgument,
                       str("scaled_matmul: alpha is ", attrs.alpha, "; expected a finite number"));
}

RuntimeResult<Tensor> scaled_matmul_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_finite_alpha(attrs));
  return matmul_forward_impl("scaled_matmul", inputs, attrs.alpha, true);
}
RuntimeResult<std::vector<Tensor>> scaled_matmul_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                          const Tensor& grad_output, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_finite_alpha(attrs));
  return matmul_backward_impl("scaled_matmul", inputs, output, grad_output, attrs.alpha, true);
}

/// softmax of every row of a [rows, k] into s.
template <class T>
void softmax_rows(const T* a, T* s, std::int64_t rows, std::int64_t k) {
  for (std::int64_t r = 0; r < rows; ++r) softmax_row(a + r * k, s + r * k, k);
}

RuntimeResult<Tensor> softmax_matmul_forward(std::span<const Tensor> inputs, const OpAttrs& /*attrs*/) {
  constexpr std::string_view op = "softmax_matmul";
  CAPSULE_CHECK(expect_inputs(op, inputs, 2, 2));
  CAPSULE_TRY(MatmulDims d, matmul_dims(op, inputs[0], inputs[1]));
  CAPSULE_TRY(Tensor out, new_tensor(d.out, inputs[0].dtype()));
  with_dtype(out.dtype(), [&]<class T>() {
    std::vector<T> s(idx(inputs[0].numel()));
    softmax_rows(inputs[0].data<T>(), s.data(), d.batch * d.m, d.k);
    batched_product(s.data(), inputs[1].data<T>(), out.mutable_data<T>(), d);
  });
  return out;
}

RuntimeResult<std::vector<Tensor>> softmax_matmul_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                           const Tensor& grad_output, const OpAttrs& /*attrs*/) {
  constexpr std::string_view op = "softmax_matmul";
  CAPSULE_CHECK(expect_inputs(op, inputs, 2, 2));
  CAPSULE_CHECK(expect_grad(op, inputs, output, grad_output));
  CAPSULE_TRY(MatmulDims d, matmul_dims(op, inputs[0], inputs[1]));
  CAPSULE_TRY(Tensor da, Tensor::empty(inputs[0].shape(), inputs[0].dtype()));
  CAPSULE_TRY(Tensor db, Tensor::empty(inputs[1].shape(), inputs[1].dtype()));
  with_dtype(da.dtype(), [&]<class T>() {
    std::vector<T> s(idx(inputs[0].numel()));
    softmax_rows(inputs[0].data<T>(), s.data(), d.batch * d.m, d.k);
    std::vector<T> scratch;
    T* ds = da.mutable_data<T>();  // first holds dS = g·bᵀ, then is turned into da in place
    for (std::int64_t i = 0; i < d.batch; ++i) {
      product_adjoints(s.data() + i * d.m * d.k, inputs[1].data<T>() + i * d.k * d.n,
                       grad_output.data<T>() + i * d.m * d.n, ds + i * d.m * d.k, db.mutable_data<T>() + i * d.k * d.n,
                       d.m, d.k, d.n, scratch);
    }
    // The softmax adjoint per row: da = s ⊙ (dS − Σ_j s_j·dS_j).
    for (std::int64_t r = 0; r < d.batch * d.m; ++r) {
      const T* sr = s.data() + r * d.k;
      T* row = ds + r * d.k;
      T dot = T(0);
      for (std::int64_t j = 0; j < d.k; ++j) dot = dot + sr[j] * row[j];
      for (std::int64_t j = 0; j < d.k; ++j) row[j] = sr[j] * (row[j] - dot);
    }
  });
  return std::vector<Tensor>{da, db};
}

// ---------------------------------------------------------------------------------------------
// linear
// ---------------------------------------------------------------------------------------------

struct LinearDims {
  std::int64_t rows = 0, in = 0, out = 0;
  std::vector<std::int64_t> out_shape;
};

RuntimeResult<LinearDims> linear_dims(std::span<const Tensor> inputs) {
  constexpr std::string_view op = "linear";
  CAPSULE_CHECK(expect_inputs(op, inputs, 2, 3));
  const Tensor& x = inputs[0];
  const Tensor& w = inputs[1];
  if (x.rank() < 1 || w.rank() != 2 || x.dim(x.rank() - 1) != w.dim(1)) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": x has shape ", to_string(x.shape()), " and w has shape ", to_string(w.shape()),
                             "; expected x [.., in] and w [out, in] with equal `in`"));
  }
  LinearDims d;
  d.in = w.dim(1);
  d.out = w.dim(0);
  CAPSULE_TRY(d.rows, dims_product("linear row count", x.shape().dims(), 0, x.rank() - 1));
  d.out_shape = x.shape().to_vector();
  d.out_shape.back() = d.out;
  if (has_input(inputs, 2) && (inputs[2].rank() != 1 || inputs[2].dim(0) != d.out)) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": bias has shape ", to_string(inputs[2].shape()), "; expected [", d.out,
                             "] to match w ", to_string(w.shape())));
  }
  return d;
}

RuntimeResult<Tensor> linear_forward(std::span<const Tensor> inputs, const OpAttrs& /*attrs*/) {
  CAPSULE_TRY(LinearDims d, linear_dims(inputs));
  CAPSULE_TRY(Tensor out, new_tensor(d.out_shape, inputs[0].dtype()));
  with_dtype(out.dtype(), [&]<class T>() {
    std::vector<T> wt(idx(d.in * d.out));
    transpose_into(inputs[1].data<T>(), wt.data(), d.out, d.in);
    T* y = out.mutable_data<T>();
    gemm_fixed_left(inputs[0].data<T>(), wt.data(), y, d.rows, d.in, d.out);
    // The bias joins after the fixed-left dot product, once per element.
    if (has_input(inputs, 2)) {
      const T* bias = inputs[2].data<T>();
      for (std::int64_t r = 0; r < d.rows; ++r) {
        for (std::int64_t o = 0; o < d.out; ++o) y[r * d.out + o] = y[r * d.out + o] + bias[o];
      }
    }
  });
  return out;
}

RuntimeResult<std::vector<Tensor>> linear_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                   const Tensor& grad_output, const OpAttrs& /*attrs*/) {
  CAPSULE_TRY(LinearDims d, linear_dims(inputs));
  CAPSULE_CHECK(expect_grad("linear", inputs, output, grad_output));
  std::vector<Tensor> grads(inputs.size());
  CAPSULE_TRY(grads[0], Tensor::empty(inputs[0].shape(), inputs[0].dtype()));
  CAPSULE_TRY(grads[1], Tensor::empty(inputs[1].shape(), inputs[1].dtype()));
  if (has_input(inputs, 2)) {
    CAPSULE_TRY(grads[2], Tensor::empty(inputs[2].shape(), inputs[2].dtype()));
  }
  with_dtype(output.dtype(), [&]<class T>() {
    const T* g = grad_output.data<T>();
    gemm_fixed_left(g, inputs[1].data<T>(), grads[0].mutable_data<T>(), d.rows, d.out, d.in);  // dx = g·w
    std::vector<T> gt(idx(d.rows * d.out));
    transpose_into(g, gt.data(), d.rows, d.out);
    gemm_fixed_left(gt.data(), inputs[0].data<T>(), grads[1].mutable_data<T>(), d.out, d.rows, d.in);  // dw = gᵀ·x
    if (has_input(inputs, 2)) {
      T* db = grads[2].mutable_data<T>();
      for (std::int64_t o = 0; o < d.out; ++o) {
        T acc = T(0);
        for (std::int64_t r = 0; r < d.rows; ++r) acc = acc + g[r * d.out + o];
        db[o] = acc;
      }
    }
  });
  return grads;
}

// ---------------------------------------------------------------------------------------------
// Losses
// ---------------------------------------------------------------------------------------------

RuntimeStatus expect_loss_pair(std::string_view op, std::span<const Tensor> inputs, std::string_view first,
                               std::string_view second, bool rows) {
  CAPSULE_CHECK(expect_inputs(op, inputs, 2, 2));
  const Tensor& a = inputs[0];
  const Tensor& b = inputs[1];
  if (rows && (a.rank() != 2 || a.shape() != b.shape())) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": ", first, " has shape ", to_string(a.shape()), " and ", second, " has shape ",
                             to_string(b.shape()), "; expected two [n, c] tensors of equal shape"));
  }
  if (!rows && a.shape() != b.shape()) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str(op, ": ", first, " has shape ", to_string(a.shape()), " and ", second, " has shape ",
                             to_string(b.shape()), "; expected equal shapes"));
  }
  if (a.numel() == 0 || (rows && a.dim(1) == 0)) {
    return runtime_error(RuntimeCode::InvalidArgument,
                         str(op, ": ", first, " of shape ", to_string(a.shape()),
                             " is empty; the mean needs at least one element"));
  }
  return std::monostate{};
}

RuntimeResult<Tensor> mse_loss_forward(std::span<const Tensor> inputs, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_loss_pair("mse_loss", inputs, "pred", "target", false));
  CAPSULE_TRY(Tensor out, Tensor::empty(Shape{}, inputs[0].dtype()));
  with_dtype(out.dtype(), [&]<class T>() {
    const T* p = inputs[0].data<T>();
    const T* t = inputs[1].data<T>();
    T acc = T(0);
    for (std::int64_t i = 0; i < inputs[0].numel(); ++i) {
      const T diff = p[i] - t[i];
      acc = acc + diff * diff;
    }
    out.mutable_data<T>()[0] = acc / static_cast<T>(inputs[0].numel());
  });
  return out;
}

RuntimeResult<std::vector<Tensor>> mse_loss_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                     const Tensor& grad_output, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_loss_pair("mse_loss", inputs, "pred", "target", false));
  CAPSULE_CHECK(expect_grad("mse_loss", inputs, output, grad_output));
  CAPSULE_TRY(Tensor dp, zeros_like(inputs[0]));
  CAPSULE_TRY(Tensor dt, zeros_like(inputs[1]));
  with_dtype(output.dtype(), [&]<class T>() {
    const T* p = inputs[0].data<T>();
    const T* t = inputs[1].data<T>();
    const T coef = grad_output.data<T>()[0] * (T(2) / static_cast<T>(inputs[0].numel()));
    for (std::int64_t i = 0; i < inputs[0].numel(); ++i) {
      const T g = coef * (p[i] - t[i]);
      dp.mutable_data<T>()[i] = g;
      dt.mutable_data<T>()[i] = -g;
    }
  });
  return std::vector<Tensor>{dp, dt};
}

RuntimeResult<Tensor> cross_entropy_forward(std::span<const Tensor> inputs, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_loss_pair("cross_entropy", inputs, "logits", "target", true));
  CAPSULE_TRY(Tensor out, Tensor::empty(Shape{}, inputs[0].dtype()));
  with_dtype(out.dtype(), [&]<class T>() {
    const std::int64_t n = inputs[0].dim(0);
    const std::int64_t c = inputs[0].dim(1);
    std::vector<T> ls(idx(c));
    T total = T(0);
    for (std::int64_t i = 0; i < n; ++i) {
      log_softmax_row(inputs[0].data<T>() + i * c, ls.data(), c);
      const T* t = inputs[1].data<T>() + i * c;
      T row = T(0);
      for (std::int64_t j = 0; j < c; ++j) row = row + t[j] * ls[idx(j)];
      total = total + (-row);
    }
    out.mutable_data<T>()[0] = total / static_cast<T>(n);
  });
  return out;
}

RuntimeResult<std::vector<Tensor>> cross_entropy_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                          const Tensor& grad_output, const OpAttrs& /*attrs*/) {
  CAPSULE_CHECK(expect_loss_pair("cross_entropy", inputs, "logits", "target", true));
  CAPSULE_CHECK(expect_grad("cross_entropy", inputs, output, grad_output));
  CAPSULE_TRY(Tensor dl, zeros_like(inputs[0]));
  CAPSULE_TRY(Tensor dt, zeros_like(inputs[1]));
  with_dtype(output.dtype(), [&]<class T>() {
    const std::int64_t n = inputs[0].dim(0);
    const std::int64_t c = inputs[0].dim(1);
    const T coef = grad_output.data<T>()[0] / static_cast<T>(n);
    std::vector<T> ls(idx(c));
    std::vector<T> sm(idx(c));
    for (std::int64_t i = 0; i < n; ++i) {
      const T* x = inputs[0].data<T>() + i * c;
      const T* t = inputs[1].data<T>() + i * c;
      log_softmax_row(x, ls.data(), c);
      softmax_row(x, sm.data(), c);
      T mass = T(0);  // Σ_j t_j: the softmax term's weight when the target is not a distribution
      for (std::int64_t j = 0; j < c; ++j) mass = mass + t[j];
      for (std::int64_t j = 0; j < c; ++j) {
        dl.mutable_data<T>()[i * c + j] = coef * (sm[idx(j)] * mass - t[j]);
        dt.mutable_data<T>()[i * c + j] = -(coef * ls[idx(j)]);
      }
    }
  });
  return std::vector<Tensor>{dl, dt};
}

RuntimeStatus expect_temperature(std::string_view op, const OpAttrs& attrs) {
  if (std::isfinite(attrs.temperature) && attrs.temperature > 0) return std::monostate{};
  return runtime_error(RuntimeCode::InvalidArgument,
                       str(op, ": temperature is ", attrs.temperature, "; expected a finite value > 0"));
}

/// Per row of distill: p = softmax(teacher/T), log p, log q = log_softmax(student/T), q.
template <class T>
struct DistillRow {
  std::vector<T> zs, zt, p, lp, q, lq;
  explicit DistillRow(std::int64_t c) : zs(idx(c)), zt(idx(c)), p(idx(c)), lp(idx(c)), q(idx(c)), lq(idx(c)) {}
  /// Fills the row and returns KL(p ‖ q) = Σ_j p_j·(log p_j − log q_j), fixed-left.
  T compute(const T* student, const T* teacher, T temperature, std::int64_t c) {
    for (std::int64_t j = 0; j < c; ++j) {
      zs[idx(j)] = student[j] / temperature;
      zt[idx(j)] = teacher[j] / temperature;
    }
    softmax_row(zt.data(), p.data(), c);
    log_softmax_row(zt.data(), lp.data(), c);
    softmax_row(zs.data(), q.data(), c);
    log_softmax_row(zs.data(), lq.data(), c);
    T kl = T(0);
    for (std::size_t j = 0; j < idx(c); ++j) kl = kl + p[j] * (lp[j] - lq[j]);
    return kl;
  }
};

RuntimeResult<Tensor> distill_forward(std::span<const Tensor> inputs, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_loss_pair("distill", inputs, "student", "teacher", true));
  CAPSULE_CHECK(expect_temperature("distill", attrs));
  CAPSULE_TRY(Tensor out, Tensor::empty(Shape{}, inputs[0].dtype()));
  with_dtype(out.dtype(), [&]<class T>() {
    const std::int64_t n = inputs[0].dim(0);
    const std::int64_t c = inputs[0].dim(1);
    const T temperature = static_cast<T>(attrs.temperature);
    DistillRow<T> row(c);
    T total = T(0);
    for (std::int64_t i = 0; i < n; ++i) {
      total = total + row.compute(inputs[0].data<T>() + i * c, inputs[1].data<T>() + i * c, temperature, c);
    }
    out.mutable_data<T>()[0] = (temperature * temperature) * (total / static_cast<T>(n));
  });
  return out;
}

RuntimeResult<std::vector<Tensor>> distill_backward(std::span<const Tensor> inputs, const Tensor& output,
                                                    const Tensor& grad_output, const OpAttrs& attrs) {
  CAPSULE_CHECK(expect_loss_pair("distill", inputs, "student", "teacher", true));
  CAPSULE_CHECK(expect_temperature("distill", attrs));
  CAPSULE_CHECK(expect_grad("distill", inputs, output, grad_output));
  CAPSULE_TRY(Tensor ds, zeros_like(inputs[0]));
  CAPSULE_TRY(Tensor dt, zeros_like(inputs[1]));
  with_dtype(output.dtype(), [&]<class T>() {
    const std::int64_t n = inputs[0].dim(0);
    const std::int64_t c = inputs[0].dim(1);
    const T temperature = static_cast<T>(attrs.temperature);
    // d/dz of T²·KL/n with z = x/T carries T²/n · 1/T = T/n.
    const T coef = grad_output.data<T>()[0] * (temperature / static_cast<T>(n));
    DistillRow<T> row(c);
    for (std::int64_t i = 0; i < n; ++i) {
      const T kl = row.compute(inputs[0].data<T>() + i * c, inputs[1].data<T>() + i * c, temperature, c);
      for (std::int64_t j = 0; j < c; ++j) {
        const std::size_t u = idx(j);
        ds.mutable_data<T>()[i * c + j] = coef * (row.q[u] - row.p[u]);
        dt.mutable_data<T>()[i * c + j] = coef * (row.p[u] * ((row.lp[u] - row.lq[u]) - kl));
      }
    }
  });
  return std::vector<Tensor>{ds, dt};
}

}  // namespace

RuntimeStatus register_linalg_handlers(HandlerRegistry& registry) {
  CAPSULE_CHECK(registry.add(spec_for(Op::Matmul, matmul_forward, matmul_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::ScaledMatmul, scaled_matmul_forward, scaled_matmul_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::SoftmaxMatmul, softmax_matmul_forward, softmax_matmul_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Linear, linear_forward, linear_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::MseLoss, mse_loss_forward, mse_loss_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::CrossEntropy, cross_entropy_forward, cross_entropy_backward)));
  CAPSULE_CHECK(registry.add(spec_for(Op::Distill, distill_forward, distill_backward)));
  return std::monostate{};
}

}  // namespace capsule::reference
