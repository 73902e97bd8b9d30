// SPDX-License-Identifier: Apache-2.0
#include "synthetic_catalog.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <string_view>

#include "capsule/text.hpp"
#include "rng.hpp"

namespace capsule::bench {
namespace {

/// One kind of implementation a real catalog holds: who provides it, where it runs, whether its
/// value is checked or trusted, and who owns the local VJP.
struct Flavour {
  Provider provider;
  Device device;
  Trust trust;
  VjpMode vjp;
  Layout layout;
  std::string_view boundary;  ///< words for summaries and evidence names
  unsigned weight;
};

// Weighted toward the common cases: portable CPU code and CUDA kernels.
constexpr std::array<Flavour, 14> kFlavours{{
    {Provider::Reference, Device::Cpu, Trust::Checked, VjpMode::TorchleanTape, Layout::CanonicalTensor,
     "portable reference", 6},
    {Provider::Torchlean, Device::Cpu, Trust::Checked, VjpMode::TorchleanTape, Layout::CanonicalTensor,
     "TorchLean composed", 3},
    {Provider::Aten, Device::Cpu, Trust::Checked, VjpMode::BackendVjp, Layout::FlatRowMajor, "ATen CPU", 1},
    {Provider::NativeCuda, Device::Cuda, Trust::Checked, VjpMode::BackendVjp, Layout::FlatRowMajor,
     "native CUDA", 5},
    {Provider::Cublas, Device::Cuda, Trust::Checked, VjpMode::BackendVjp, Layout::FlatRowMajor, "cuBLAS", 2},
    {Provider::Cudnn, Device::Cuda, Trust::Checked, VjpMode::BackendVjp, Layout::FlatRowMajor, "cuDNN", 2},
    {Provider::Libtorch, Device::Cuda, Trust::TrustedExternal, VjpMode::TorchleanTape, Layout::LibtorchCudaView,
     "LibTorch CUDA", 2},
    {Provider::Aten, Device::Rocm, Trust::Checked, VjpMode::BackendVjp, Layout::FlatRowMajor, "ATen ROCm", 1},
    {Provider::Mps, Device::Metal, Trust::Checked, VjpMode::BackendVjp, Layout::FlatRowMajor, "Metal MPS", 1},
    {Provider::Webgpu, Device::Wasm, Trust::Checked, VjpMode::TorchleanTape, Layout::FlatRowMajor, "WebGPU", 1},
    {Provider::Xla, Device::Tpu, Trust::Checked, VjpMode::BackendVjp, Layout::FlatRowMajor, "XLA TPU", 1},
    {Provider::Neuron, Device::Trainium, Trust::TrustedExternal, VjpMode::ExternalAutograd, Layout::FlatRowMajor,
     "AWS Neuron", 1},
    {Provider::CustomChip, Device::Custom, Trust::Checked, VjpMode::BackendVjp, Layout::FlatRowMajor,
     "custom accelerator", 1},
    {Provider::External, Device::External, Trust::TrustedExternal, VjpMode::ExternalAutograd, Layout::FlatRowMajor,
     "external runtime", 1},
}};

constexpr Flavour kCufft{Provider::Cufft, Device::Cuda, Trust::Checked, VjpMode::BackendVjp, Layout::FlatRowMajor,
                         "cuFFT", 0};

/// Ops whose kernels accumulate, so the reduction order is part of the numerical policy.
bool accumulates(Op op) {
  static constexpr std::array<Op, 21> kAccumulating{
      Op::ReduceSum, Op::ReduceMean, Op::Matmul, Op::ScaledMatmul, Op::SoftmaxMatmul, Op::Linear, Op::MseLoss,
      Op::CrossEntropy, Op::Distill, Op::LayerNorm, Op::BatchNorm, Op::Conv, Op::ConvTranspose, Op::AvgPool,
      Op::Softmax, Op::LogSoftmax, Op::HardMaskedSoftmax, Op::SmoothMaxPool, Op::FftFno, Op::SelectiveScan,
      Op::ScaledDotProductAttention};
  return std::find(kAccumulating.begin(), kAccumulating.end(), op) != kAccumulating.end();
}

class Writer {
 public:
  explicit Writer(std::size_t reserve) { out_.reserve(reserve); }
  Writer& operator<<(std::string_view text) {
    out_ += text;
    return *this;
  }
  Writer& operator<<(std::size_t value) {
    out_ += std::to_string(value);
    return *this;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

constexpr std::string_view kDefaults = R"([defaults]
provider = "reference"
device = "cpu"
trust = "checked"
forward = true
vjp = "torchlean-tape"
reduction = "n/a"
contracts.shape  = { claim = "shape-safety", summary = "Portable rank and size checks run before the kernel.", evidence = { kind = "runtime-guard", name = "portable runtime shape checks" } }
contracts.layout = { claim = "layout-compatibility", layout = "canonical-tensor", summary = "Inputs and outputs are canonical typed tensors.", evidence = { kind = "runtime-guard", name = "typed tensor layout" } }
contracts.value  = { claim = "value-refinement", summary = "Forward values are checked by the synthetic value tests.", evidence = { kind = "test-suite", name = "synthetic.values" } }
contracts.vjp    = { claim = "vjp-refinement", mode = "torchlean-tape", summary = "The TorchLean tape composes the local VJP, checked by the synthetic VJP tests.", evidence = { kind = "test-suite", name = "synthetic.vjps" } }
)";

void write_capsule(Writer& w, const std::string& module, std::size_t index, std::size_t width, Op op,
                   const Flavour& f, Rng& rng) {
  const std::string_view op_name = to_string(op);
  const std::string_view provider = to_string(f.provider);
  std::string number = std::to_string(index);
  if (number.size() < width) number.insert(0, width - number.size(), '0');
  const bool no_vjp = !requires_vjp(op);
  const VjpMode vjp = no_vjp ? VjpMode::None : f.vjp;

  w << "\n[[capsule]]\n";
  w << "name = \"" << module << "." << op_name << "." << provider << "." << number << "\"\n";
  w << "op = \"" << op_name << "\"\n";
  if (f.provider != Provider::Reference) w << "provider = \"" << provider << "\"\n";
  if (f.device != Device::Cpu) w << "device = \"" << to_string(f.device) << "\"\n";
  if (f.trust != Trust::Checked) w << "trust = \"" << to_string(f.trust) << "\"\n";
  if (vjp != VjpMode::TorchleanTape) w << "vjp = \"" << to_string(vjp) << "\"\n";
  if (accumulates(op)) {
    const bool fixed = f.provider == Provider::Reference || f.provider == Provider::Torchlean;
    w << "reduction = \"" << (fixed ? "fixed-left" : "implementation-defined") << "\"\n";
  }
  if (index % 3 == 0) w << "summary = \"" << f.boundary << " " << op_name << " kernel, variant " << number << ".\"\n";
  // A rare backward-only capsule: loads fine, never admissible.
  if (index % 97 == 41) w << "forward = false\n";
  if (f.trust == Trust::TrustedExternal) {
    w << "reason = \"" << f.boundary << " computes " << op_name << "; its value is taken on trust\"\n";
    w << "owner = \"synthetic maintainers\"\n";
    w << "expires = 2099-12-31\n";
  }

  // Contracts that differ from [defaults], each stated as a whole (the loader merges per
  // contract, not per key).
  // The vendor CUDA flavours name the guards their compiled handlers declare (handlers/cuda), so
  // the catalog lints clean in builds where those handlers exist.
  const bool vendor_cuda = f.provider == Provider::Cublas || f.provider == Provider::Cudnn;
  const std::string shape_guard = vendor_cuda ? "CUDA vendor operand shape checks" : str(f.boundary, " size checks");
  const std::string layout_guard = vendor_cuda ? "contiguous CUDA device buffer checks" : str(f.boundary, " layout checks");
  if (f.device != Device::Cpu) {
    w << "contracts.shape = { claim = \"shape-safety\", summary = \"Sizes and ranks are checked at the " << f.boundary
      << " boundary.\", evidence = { kind = \"runtime-guard\", name = \"" << shape_guard << "\" } }\n";
  }
  if (f.layout != Layout::CanonicalTensor) {
    w << "contracts.layout = { claim = \"layout-compatibility\", layout = \"" << to_string(f.layout)
      << "\", summary = \"Operands are " << to_string(f.layout) << " buffers.\", evidence = { kind = \"runtime-guard\", name = \""
      << layout_guard << "\" }";
    if (f.provider == Provider::Libtorch) {
      w << ", provenance = [{ path = \"handlers/synthetic/" << op_name << ".cpp\", symbol = \"synthetic_" << op_name
        << "_" << number << "\", build_target = \"capsule_handlers_synthetic\" }]";
    }
    w << " }\n";
  }
  if (f.trust == Trust::TrustedExternal) {
    w << "contracts.value = { claim = \"value-refinement\", summary = \"The forward value is trusted from " << f.boundary
      << ".\", evidence = { kind = \"trusted-boundary\", reason = \"" << f.boundary << " " << op_name
      << " implementation\", owner = \"synthetic maintainers\", expires = 2099-12-31 } }\n";
  } else {
    switch (rng.below(8)) {
      case 0:
        w << "contracts.value = { claim = \"value-refinement\", summary = \"Calls the shared " << op_name
          << " definition.\", evidence = { kind = \"shared-definition\", name = \"spec." << op_name << "\" } }\n";
        break;
      case 1:
        w << "contracts.value = { claim = \"value-refinement\", summary = \"Compared against the reference by a fuzz oracle.\", "
             "evidence = { kind = \"fuzz-oracle\", name = \"fuzz." << op_name << "\" } }\n";
        break;
      default:
        if (f.provider != Provider::Reference) {
          w << "contracts.value = { claim = \"value-refinement\", summary = \"Forward values are checked by the "
            << f.boundary << " value tests.\", evidence = { kind = \"test-suite\", name = \"" << provider
            << ".values\" } }\n";
        }
        break;
    }
  }
  if (no_vjp) {
    w << "contracts.vjp = { claim = \"vjp-unavailable\", summary = \"Forward-only: no VJP is supplied or required.\", "
         "evidence = { kind = \"not-applicable\" } }\n";
  } else if (vjp == VjpMode::ExternalAutograd) {
    w << "contracts.vjp = { claim = \"vjp-refinement\", mode = \"external-autograd\", summary = \"The local backward is trusted from "
      << f.boundary << " autograd.\", evidence = { kind = \"trusted-boundary\", reason = \"" << f.boundary
      << " autograd\", owner = \"synthetic maintainers\", expires = 2099-12-31 } }\n";
  } else if (vjp == VjpMode::BackendVjp) {
    w << "contracts.vjp = { claim = \"vjp-refinement\", mode = \"backend-vjp\", summary = \"A " << f.boundary
      << " routine computes the local VJP.\", evidence = { kind = \"test-suite\", name = \"" << provider << ".vjps\" } }\n";
  } else if (f.provider != Provider::Reference) {
    w << "contracts.vjp = { claim = \"vjp-refinement\", mode = \"torchlean-tape\", summary = \"The TorchLean tape owns the backward.\", "
         "evidence = { kind = \"runtime-guard\", name = \"profile requires vjp=torchlean-tape\" } }\n";
  }
}

}  // namespace

std::vector<Op> ops_except(const std::vector<Op>& excluded) {
  std::vector<Op> ops;
  for (const Op op : all_values<Op>()) {
    if (std::find(excluded.begin(), excluded.end(), op) == excluded.end()) ops.push_back(op);
  }
  return ops;
}

std::string synthetic_catalog(const SyntheticCatalogOptions& options) {
  std::vector<Op> ops = options.ops.empty() ? ops_except({}) : options.ops;
  Rng rng{options.seed};
  // A shuffled op order so neighbouring capsules are not alphabetical, but every op gets its share.
  for (std::size_t i = ops.size(); i > 1; --i) std::swap(ops[i - 1], ops[rng.below(i)]);

  std::vector<const Flavour*> weighted;
  for (const Flavour& f : kFlavours) {
    for (unsigned k = 0; k < f.weight; ++k) weighted.push_back(&f);
  }
  const std::size_t width = std::max<std::size_t>(6, std::to_string(options.capsules).size());

  Writer w(512 + options.capsules * 700);
  w << "# Capsule module \"" << options.module << "\": a synthetic catalog of " << options.capsules
    << " capsules,\n# generated by capsule_gen_catalog for benchmarks. Not a real implementation inventory.\n\n";
  w << "schema = 1\nmodule = \"" << options.module << "\"\n\n" << kDefaults;
  for (std::size_t i = 0; i < options.capsules; ++i) {
    const Op op = ops[i % ops.size()];
    const Flavour* flavour = weighted[rng.below(weighted.size())];
    if (op == Op::FftFno && rng.below(2) == 0) flavour = &kCufft;
    write_capsule(w, options.module, i, width, op, *flavour, rng);
  }
  return w.take();
}

}  // namespace capsule::bench
