// SPDX-License-Identifier: Apache-2.0
// The LibTorch CPU handlers (provider libtorch, device cpu): each op calls ATen on our storage,
// inputs through at::from_blob and outputs allocated by us and written by ATen's `*_out`
// variants, with the semantics of capsule/runtime/op_args.hpp and docs/special-values.md.
// This header includes no LibTorch header, so programs that register handlers stay free of ATen.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "capsule/fingerprint.hpp"
#include "capsule/runtime/handler.hpp"

namespace capsule {

/// The runtime guards every LibTorch handler enforces. These are the exact names the
/// `libtorch-cpu` catalog's runtime-guard evidence uses.
inline constexpr std::string_view kLibTorchShapeGuard = "libtorch operand shape checks";
inline constexpr std::string_view kLibTorchLayoutGuard = "libtorch from_blob and out-buffer checks";

/// The runtime guard every LibTorch CUDA handler adds: its inputs and outputs are contiguous
/// views over our device memory (the `libtorch` catalog's CUDA capsules name it).
inline constexpr std::string_view kLibTorchCudaLayoutGuard = "contiguous CUDA tensor views";

/// Registers every LibTorch CPU handler. Fails, naming both sites, if one is already registered.
RuntimeStatus register_libtorch_handlers(HandlerRegistry& registry);

#if defined(CAPSULE_HAVE_LIBTORCH_CUDA)
/// Only in a build whose LibTorch has CUDA and whose CUDA provider is on (the target then
/// defines CAPSULE_HAVE_LIBTORCH_CUDA for its users). Registers a CUDA twin of every LibTorch CPU
/// handler: the same device-generic kernel, run on our device tensors and our stream
/// (docs/libtorch.md, "LibTorch on CUDA"). Needs the CUDA device runtime registered first
/// (register_cuda_handlers); fails with the reason otherwise.
RuntimeStatus register_libtorch_cuda_handlers(HandlerRegistry& registry);

/// Which CUDA runtime, cuBLAS, cuDNN and libtorch_cuda objects this process has loaded (pip's
/// torch brings its own; one object per soname is mapped, so these are the copies every handler
/// calls), whether LibTorch sees a device, and the cuDNN version it reports:
/// `provider.libtorch.cuda.*`.
EnvironmentFingerprint libtorch_cuda_fingerprint();

/// libtorch_attention_route for device operands, asked inside the CUDA call scope the LibTorch
/// CUDA handlers run in (our stream, our device tensors).
RuntimeResult<std::string> libtorch_cuda_attention_route(std::span<const Tensor> inputs, const OpAttrs& attrs);
#endif

/// Which computation the LibTorch scaled_dot_product_attention handler's plain forward (an
/// untaped call; an external-autograd region composes ATen ops instead) runs for these CPU
/// operands and attributes, in words: one of its composed paths and why, or ATen's fused SDPA and
/// the backend ATen picks for them (`at::_fused_sdp_choice`, LibTorch 2.0 and later; 1.13 has no
/// choice to ask, and says so). For reports and benchmarks that must name the kernel that ran. It
/// converts the mask as a call does, and counts that conversion. Fails as the handler would on
/// operands it refuses.
RuntimeResult<std::string> libtorch_attention_route(std::span<const Tensor> inputs, const OpAttrs& attrs);

/// The name of one value of ATen's `_fused_sdp_choice` (`sdp::SDPBackend`: math,
/// flash_attention, efficient_attention, cudnn_attention, overrideable; -1 is "error"), as
/// libtorch_attention_route prints it; for a caller that asks ATen about its own operands.
std::string libtorch_sdp_backend_name(std::int64_t choice);

/// Pins ATen's intra-op thread pool (tests and CTest runs use 1, so `ctest -j2` does not
/// oversubscribe two cores).
void set_libtorch_threads(int threads);

/// The LibTorch version the handlers were compiled against, e.g. "1.13.0".
std::string libtorch_version();

/// This process's LibTorch configuration for the environment fingerprint (docs/fingerprint.md):
/// `provider.libtorch.loaded_version` (what the loaded library says), `.blas` (its BLAS_INFO),
/// `.blas.library` (the object that defines the `sgemm_` LibTorch calls), `.blas.core` (that
/// BLAS's OpenBLAS core, or why there is none), `.cpu_capability` (ATen's vector kernel level),
/// `.onednn` and `.threads` (at::get_num_threads() now). Programs that link the provider add it
/// to their fingerprint with add_entries.
EnvironmentFingerprint libtorch_fingerprint();

/// The copies one op's LibTorch handlers made at the boundary between our storage and ATen's.
struct LibTorchBoundaryCopies {
  std::string op;                       ///< the op's name, as the handler reports it
  std::uint64_t conversions = 0;        ///< one of our tensors converted to another dtype (kBool mask, kLong indices)
  std::uint64_t materialisations = 0;   ///< an ATen result (a view, or a buffer ATen allocated) copied into ours
  /// Not a copy: an output whose elements ATen allocated for the call (an op with no CPU out
  /// kernel, or an external-autograd region's result or gradient), adopted as ours without
  /// copying; counted so the boundary test can tell every output on an ATen buffer from an
  /// unreported one.
  std::uint64_t adoptions = 0;
  std::uint64_t total() const { return conversions + materialisations; }  ///< the copies
};

/// Every boundary copy (and adoption) the LibTorch handlers made in this process so far, one entry
/// per op that counted either, sorted by op name. Counted where the copy happens
/// (`count_conversion`, `copy_into`, `adopt_out` in handlers/libtorch/src/boundary.hpp) into one
/// slot per op, so nothing needs registering when a handler is added.
/// `capsule run` reports the copies of its run (docs/libtorch.md, "Copies at the boundary").
std::vector<LibTorchBoundaryCopies> libtorch_boundary_copies();

/// `op`'s entry of libtorch_boundary_copies(), all counts zero before its first.
LibTorchBoundaryCopies libtorch_boundary_copies_of(Op op);

/// External-autograd regions (one per taped call of an `external-autograd` LibTorch capsule) whose
/// boundary is alive, i.e. whose recorded graph is still held. Each is freed after its VJP or when
/// the tape is cleared.
std::int64_t libtorch_live_autograd_regions();

}  // namespace capsule
