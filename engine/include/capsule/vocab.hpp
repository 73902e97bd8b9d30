// SPDX-License-Identifier: Apache-2.0
// The closed vocabulary (docs/format.md#vocabulary): devices, providers, the 56 ops, trust, VJP modes, layouts,
// reductions, claims, evidence kinds and obligations. Each enum has exactly one name table; a
// static_assert proves the table is dense and in declaration order, so `to_string` is an index
// and no second list can drift. The spellings are a file-format contract.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "capsule/result.hpp"

namespace capsule {

/// Where a capsule runs.
enum class Device : std::uint8_t { Cpu, Cuda, Rocm, Metal, Wasm, Tpu, Trainium, Custom, External };

/// Who supplies the implementation (a name only: nothing is linked by naming it).
enum class Provider : std::uint8_t {
  Reference, Torchlean, NativeCuda, Libtorch, Aten, Mps, Webgpu, Cublas, Cudnn, Cufft, Xla, Neuron,
  CustomChip, External
};

/// Semantic operation families (TorchLean's BackendOp, B4 order). Rank, axes, padding and
/// indices stay in the graph payload, not in the op.
enum class Op : std::uint8_t {
  RandUniform,
  BernoulliMask,
  Add,
  Sub,
  Mul,
  Div,
  Neg,
  Scale,
  Abs,
  Sqrt,
  Clamp,
  Max,
  Min,
  Relu,
  Gelu,
  Sigmoid,
  Silu,
  Tanh,
  Softplus,
  Exp,
  Log,
  Sin,
  Cos,
  Inv,
  SafeLog,
  LogSoftmax,
  Softmax,
  HardMaskedSoftmax,
  TopKMask,
  ReduceSum,
  ReduceMean,
  Reshape,
  Permute,
  Broadcast,
  Concat,
  Slice,
  Gather,
  ScatterAdd,
  Matmul,
  ScaledMatmul,
  SoftmaxMatmul,
  Linear,
  MseLoss,
  CrossEntropy,
  Distill,
  LayerNorm,
  BatchNorm,
  Conv,
  ConvTranspose,
  MaxPool,
  SmoothMaxPool,
  AvgPool,
  FftFno,
  SelectiveScan,
  ScaledDotProductAttention,
  Custom
};

/// The capsule's trust label; the contract check still reads each obligation's evidence.
enum class Trust : std::uint8_t { Checked, TrustedExternal };

/// Who owns the local reverse rule (§1.5; external-autograd from seed 003).
enum class VjpMode : std::uint8_t { None, TorchleanTape, BackendVjp, ExternalAutograd };

/// Which stored elements a capsule reads as each logical element.
enum class Layout : std::uint8_t { CanonicalTensor, FlatRowMajor, LibtorchCudaView };

/// The order in which a capsule adds partial results (its numerical policy).
enum class Reduction : std::uint8_t { FixedLeft, FixedLeftOrExact, ImplementationDefined, NotApplicable };

/// What a contract claims; each obligation has exactly one matching kind (vjp has two).
enum class ClaimKind : std::uint8_t {
  ShapeSafety, LayoutCompatibility, ValueRefinement, VjpRefinement, VjpUnavailable
};

/// What stands behind a claim. `trusted-boundary` names code whose correctness is assumed;
/// `checker` names an executable checker that checks each call's result (issue 11); `missing`
/// says outright that nothing stands behind the claim (TorchLean's notProvided). The two newest
/// kinds come last so that every existing index, set and listing keeps its order.
enum class EvidenceKind : std::uint8_t {
  RuntimeGuard, TestSuite, SharedDefinition, FuzzOracle, TrustedBoundary, NotApplicable, Checker, Missing
};

/// How much of a claim a checker checks (docs/acceptance-presets.md): `full` checks a property
/// from which the claim follows on every checked call; `partial` checks only a necessary
/// condition (row sums of one, a masked row being zero); `sampled` recomputes the op
/// independently on a sampled fraction of calls.
enum class CheckerCoverage : std::uint8_t { Full, Partial, Sampled };

/// TorchLean's evidence dispositions (§9.3, with A′'s not-applicable): what a piece of evidence
/// amounts to for the acceptance gate. `evidence_disposition` (capsule.hpp) is the one mapping.
enum class Disposition : std::uint8_t { Proved, Checked, Guarded, Tested, Fuzzed, Trusted, Missing, NotApplicable };

/// The four obligations of every capsule, in the order used everywhere (§2.1).
enum class Obligation : std::uint8_t { Shape, Layout, Value, Vjp };

/// How a graph plan groups node kernels for audit (§5.3, A's LoweringMode).
enum class Lowering : std::uint8_t { Coalesced, Singleton };

/// Name tables. One per enum; the order must equal declaration order.
template <class E>
struct VocabTable;

#define CAPSULE_VOCAB_TABLE(E, KIND, N, ...)                                   \
  template <>                                                                  \
  struct VocabTable<E> {                                                       \
    static constexpr std::string_view kind = KIND;                             \
    static constexpr std::array<std::pair<E, std::string_view>, N> entries{{__VA_ARGS__}}; \
  };

CAPSULE_VOCAB_TABLE(Device, "device", 9,
    {Device::Cpu, "cpu"}, {Device::Cuda, "cuda"}, {Device::Rocm, "rocm"}, {Device::Metal, "metal"},
    {Device::Wasm, "wasm"}, {Device::Tpu, "tpu"}, {Device::Trainium, "trainium"},
    {Device::Custom, "custom"}, {Device::External, "external"})

CAPSULE_VOCAB_TABLE(Provider, "provider", 14,
    {Provider::Reference, "reference"}, {Provider::Torchlean, "torchlean"},
    {Provider::NativeCuda, "native-cuda"}, {Provider::Libtorch, "libtorch"},
    {Provider::Aten, "aten"}, {Provider::Mps, "mps"}, {Provider::Webgpu, "webgpu"},
    {Provider::Cublas, "cublas"}, {Provider::Cudnn, "cudnn"}, {Provider::Cufft, "cufft"},
    {Provider::Xla, "xla"}, {Provider::Neuron, "neuron"}, {Provider::CustomChip, "custom-chip"},
    {Provider::External, "external"})

CAPSULE_VOCAB_TABLE(Op, "op", 56,
    {Op::RandUniform, "rand_uniform"},
    {Op::BernoulliMask, "bernoulli_mask"},
    {Op::Add, "add"},
    {Op::Sub, "sub"},
    {Op::Mul, "mul"},
    {Op::Div, "div"},
    {Op::Neg, "neg"},
    {Op::Scale, "scale"},
    {Op::Abs, "abs"},
    {Op::Sqrt, "sqrt"},
    {Op::Clamp, "clamp"},
    {Op::Max, "max"},
    {Op::Min, "min"},
    {Op::Relu, "relu"},
    {Op::Gelu, "gelu"},
    {Op::Sigmoid, "sigmoid"},
    {Op::Silu, "silu"},
    {Op::Tanh, "tanh"},
    {Op::Softplus, "softplus"},
    {Op::Exp, "exp"},
    {Op::Log, "log"},
    {Op::Sin, "sin"},
    {Op::Cos, "cos"},
    {Op::Inv, "inv"},
    {Op::SafeLog, "safe_log"},
    {Op::LogSoftmax, "log_softmax"},
    {Op::Softmax, "softmax"},
    {Op::HardMaskedSoftmax, "hard_masked_softmax"},
    {Op::TopKMask, "top_k_mask"},
    {Op::ReduceSum, "reduce_sum"},
    {Op::ReduceMean, "reduce_mean"},
    {Op::Reshape, "reshape"},
    {Op::Permute, "permute"},
    {Op::Broadcast, "broadcast"},
    {Op::Concat, "concat"},
    {Op::Slice, "slice"},
    {Op::Gather, "gather"},
    {Op::ScatterAdd, "scatter_add"},
    {Op::Matmul, "matmul"},
    {Op::ScaledMatmul, "scaled_matmul"},
    {Op::SoftmaxMatmul, "softmax_matmul"},
    {Op::Linear, "linear"},
    {Op::MseLoss, "mse_loss"},
    {Op::CrossEntropy, "cross_entropy"},
    {Op::Distill, "distill"},
    {Op::LayerNorm, "layer_norm"},
    {Op::BatchNorm, "batch_norm"},
    {Op::Conv, "conv"},
    {Op::ConvTranspose, "conv_transpose"},
    {Op::MaxPool, "max_pool"},
    {Op::SmoothMaxPool, "smooth_max_pool"},
    {Op::AvgPool, "avg_pool"},
    {Op::FftFno, "fft_fno"},
    {Op::SelectiveScan, "selective_scan"},
    {Op::ScaledDotProductAttention, "scaled_dot_product_attention"},
    {Op::Custom, "custom"}
)

CAPSULE_VOCAB_TABLE(Trust, "trust level", 2,
    {Trust::Checked, "checked"}, {Trust::TrustedExternal, "trusted-external"})

CAPSULE_VOCAB_TABLE(VjpMode, "vjp mode", 4,
    {VjpMode::None, "none"}, {VjpMode::TorchleanTape, "torchlean-tape"},
    {VjpMode::BackendVjp, "backend-vjp"}, {VjpMode::ExternalAutograd, "external-autograd"})

CAPSULE_VOCAB_TABLE(Layout, "layout", 3,
    {Layout::CanonicalTensor, "canonical-tensor"}, {Layout::FlatRowMajor, "flat-row-major"},
    {Layout::LibtorchCudaView, "libtorch-cuda-view"})

CAPSULE_VOCAB_TABLE(Reduction, "reduction", 4,
    {Reduction::FixedLeft, "fixed-left"}, {Reduction::FixedLeftOrExact, "fixed-left-or-exact"},
    {Reduction::ImplementationDefined, "implementation-defined"}, {Reduction::NotApplicable, "n/a"})

CAPSULE_VOCAB_TABLE(ClaimKind, "claim", 5,
    {ClaimKind::ShapeSafety, "shape-safety"}, {ClaimKind::LayoutCompatibility, "layout-compatibility"},
    {ClaimKind::ValueRefinement, "value-refinement"}, {ClaimKind::VjpRefinement, "vjp-refinement"},
    {ClaimKind::VjpUnavailable, "vjp-unavailable"})

CAPSULE_VOCAB_TABLE(EvidenceKind, "evidence kind", 8,
    {EvidenceKind::RuntimeGuard, "runtime-guard"}, {EvidenceKind::TestSuite, "test-suite"},
    {EvidenceKind::SharedDefinition, "shared-definition"}, {EvidenceKind::FuzzOracle, "fuzz-oracle"},
    {EvidenceKind::TrustedBoundary, "trusted-boundary"}, {EvidenceKind::NotApplicable, "not-applicable"},
    {EvidenceKind::Checker, "checker"}, {EvidenceKind::Missing, "missing"})

CAPSULE_VOCAB_TABLE(CheckerCoverage, "checker coverage", 3,
    {CheckerCoverage::Full, "full"}, {CheckerCoverage::Partial, "partial"}, {CheckerCoverage::Sampled, "sampled"})

CAPSULE_VOCAB_TABLE(Disposition, "evidence disposition", 8,
    {Disposition::Proved, "proved"}, {Disposition::Checked, "checked"}, {Disposition::Guarded, "guarded"},
    {Disposition::Tested, "tested"}, {Disposition::Fuzzed, "fuzzed"}, {Disposition::Trusted, "trusted"},
    {Disposition::Missing, "missing"}, {Disposition::NotApplicable, "not-applicable"})

CAPSULE_VOCAB_TABLE(Obligation, "obligation", 4,
    {Obligation::Shape, "shape"}, {Obligation::Layout, "layout"}, {Obligation::Value, "value"},
    {Obligation::Vjp, "vjp"})

CAPSULE_VOCAB_TABLE(Lowering, "lowering", 2,
    {Lowering::Coalesced, "coalesced"}, {Lowering::Singleton, "singleton"})

#undef CAPSULE_VOCAB_TABLE

namespace detail {
/// True when entry i holds enumerator i, for every i: the compile-time proof that a table is
/// complete and ordered.
template <class E, std::size_t N>
constexpr bool table_is_dense(const std::array<std::pair<E, std::string_view>, N>& table) {
  for (std::size_t i = 0; i < N; ++i) {
    if (static_cast<std::size_t>(table[i].first) != i || table[i].second.empty()) return false;
  }
  return true;
}
}  // namespace detail

static_assert(detail::table_is_dense(VocabTable<Device>::entries));
static_assert(detail::table_is_dense(VocabTable<Provider>::entries));
static_assert(detail::table_is_dense(VocabTable<Op>::entries));
static_assert(static_cast<std::size_t>(Op::Custom) + 1 == 56, "docs/format.md#ops lists 56 ops");
static_assert(detail::table_is_dense(VocabTable<Trust>::entries));
static_assert(detail::table_is_dense(VocabTable<VjpMode>::entries));
static_assert(detail::table_is_dense(VocabTable<Layout>::entries));
static_assert(detail::table_is_dense(VocabTable<Reduction>::entries));
static_assert(detail::table_is_dense(VocabTable<ClaimKind>::entries));
static_assert(detail::table_is_dense(VocabTable<EvidenceKind>::entries));
static_assert(detail::table_is_dense(VocabTable<CheckerCoverage>::entries));
static_assert(detail::table_is_dense(VocabTable<Disposition>::entries));
static_assert(detail::table_is_dense(VocabTable<Obligation>::entries));
static_assert(detail::table_is_dense(VocabTable<Lowering>::entries));

template <class E>
inline constexpr std::size_t kCount = VocabTable<E>::entries.size();

inline constexpr std::size_t kOpCount = kCount<Op>;

/// The file-format spelling of a vocabulary value.
template <class E>
constexpr std::string_view to_string(E value) {
  return VocabTable<E>::entries[static_cast<std::size_t>(value)].second;
}

/// Every value of an enum, in declaration order.
template <class E>
constexpr std::array<E, kCount<E>> all_values() {
  std::array<E, kCount<E>> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = VocabTable<E>::entries[i].first;
  return out;
}

/// Why a spelling was not accepted: the message lists the valid names, `nearest` is the closest.
struct VocabError {
  std::string message;
  std::string nearest;  ///< empty when nothing is close

  std::string help() const { return nearest.empty() ? std::string() : "did you mean `" + nearest + "`?"; }
};

namespace detail {
VocabError unknown_spelling(std::string_view kind, std::string_view value,
                            const std::vector<std::string_view>& names);
}

/// Parses a file-format spelling. Device also accepts the alias `gpu` (→ cuda).
template <class E>
Result<E, VocabError> parse(std::string_view text) {
  for (const auto& [value, name] : VocabTable<E>::entries) {
    if (name == text) return value;
  }
  if constexpr (std::is_same_v<E, Device>) {
    if (text == "gpu") return Device::Cuda;
  }
  std::vector<std::string_view> names;
  for (const auto& entry : VocabTable<E>::entries) names.push_back(entry.second);
  return fail(detail::unknown_spelling(VocabTable<E>::kind, text, names));
}

/// §1.3: random sources and the top-k mask are constant almost everywhere and need no VJP.
constexpr bool requires_vjp(Op op) {
  return op != Op::RandUniform && op != Op::BernoulliMask && op != Op::TopKMask;
}

/// Small dense set of enum values (devices, providers, evidence kinds) as a bit mask.
template <class E>
class EnumSet {
  static_assert(kCount<E> <= 32);

 public:
  constexpr EnumSet() = default;
  constexpr EnumSet(std::initializer_list<E> values) {
    for (E value : values) insert(value);
  }
  constexpr void insert(E value) { bits_ |= bit(value); }
  constexpr void erase(E value) { bits_ &= ~bit(value); }
  constexpr bool contains(E value) const { return (bits_ & bit(value)) != 0; }
  constexpr bool empty() const { return bits_ == 0; }
  std::vector<E> values() const {
    std::vector<E> out;
    for (E value : all_values<E>()) {
      if (contains(value)) out.push_back(value);
    }
    return out;
  }
  friend constexpr bool operator==(EnumSet, EnumSet) = default;

 private:
  static constexpr std::uint32_t bit(E value) { return std::uint32_t{1} << static_cast<unsigned>(value); }
  std::uint32_t bits_ = 0;
};

}  // namespace capsule
