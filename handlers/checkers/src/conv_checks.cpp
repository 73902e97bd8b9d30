// SPDX-License-Identifier: Apache-2.0
// conv's checksums (docs/checkers.md, "Conv"). A convolution is linear in its weight and in its
// input, so for random signs r over the output channels of a group g,
//   Σ_{o∈g} r_o·Y[n, o] = conv(X[n, g's channels], Σ_{o∈g} r_o·W[o]) + Σ_{o∈g} r_o·b_o,
// and for random signs s over the batch,
//   Σ_n s_n·Y[n, o] = conv(Σ_n s_n·X[n], W[o]) + (Σ_n s_n)·b_o,
// with exactly the op's stride, padding, dilation and groups. Each side is one convolution with a
// single filter per group (or a single image), so the checks cost about 2g/O and 2/N of the op.
// The tolerance is the provider's worst-case rounding, γ_K·(conv(|X|, Σ|W|) + Σ|b|), computed by the
// same loops on absolute values, plus the check's own float64 rounding.
#include <cmath>
#include <limits>
#include <vector>

#include "capsule/checkers/standard.hpp"
#include "check_support.hpp"

namespace capsule::checkers {
namespace {

constexpr const char* kChannel = "output-channel checksum residual of the output element at index";
constexpr const char* kBatch = "batch checksum residual of the output element (batch 0) at index";

struct ConvDims {
  std::int64_t n = 0, c = 0, h = 1, w = 1;  // input
  std::int64_t o = 0, kh = 1, kw = 1;       // weight [o, c/groups, kh, kw]
  std::int64_t oh = 1, ow = 1;              // output
  std::int64_t groups = 1;
  std::int64_t stride[2] = {1, 1}, pad[2] = {0, 0}, dil[2] = {1, 1};
  bool has_bias = false;
  std::vector<std::int64_t> out_shape;
  std::int64_t cg() const { return c / groups; }
  std::int64_t og() const { return o / groups; }
};

RuntimeResult<ConvDims> conv_dims(const CheckCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  const OpAttrs& attrs = *call.attrs;
  ConvDims d;
  d.has_bias = call.inputs.size() > 2 && call.inputs[2].defined();
  const std::size_t r = x.rank();
  if ((r != 3 && r != 4) || w.rank() != r || attrs.groups < 1 || x.dim(1) % attrs.groups != 0 ||
      w.dim(0) % attrs.groups != 0 || w.dim(1) != x.dim(1) / attrs.groups ||  // no product: groups is hostile
      (d.has_bias && (call.inputs[2].rank() != 1 || call.inputs[2].dim(0) != w.dim(0)))) {
    return runtime_error(RuntimeCode::ShapeMismatch,
                         str("conv check: x ", to_string(x.shape()), ", w ", to_string(w.shape()), ", groups ",
                             attrs.groups, "; expected x [n, c, ..], w [o, c/groups, k..] of the same rank 3 or 4, "
                             "o divisible by groups, bias [o]"));
  }
  const std::size_t spatial = r - 2;
  d.groups = attrs.groups;
  d.n = x.dim(0);
  d.c = x.dim(1);
  d.o = w.dim(0);
  const std::size_t first = spatial == 1 ? 1 : 0;  // a 1-D conv runs as 2-D with height 1
  for (std::size_t s = 0; s < spatial; ++s) {
    auto pick = [&](const std::vector<std::int64_t>& v, std::int64_t fallback) -> RuntimeResult<std::int64_t> {
      if (v.empty()) return fallback;
      if (v.size() != spatial) {
        return runtime_error(RuntimeCode::InvalidArgument,
                             str("conv check: ", v.size(), " geometry entries for ", spatial, " spatial dims"));
      }
      return v[s];
    };
    CAPSULE_TRY(d.stride[first + s], pick(attrs.stride, 1));
    CAPSULE_TRY(d.pad[first + s], pick(attrs.padding, 0));
    CAPSULE_TRY(d.dil[first + s], pick(attrs.dilation, 1));
    if (d.stride[first + s] < 1 || d.pad[first + s] < 0 || d.dil[first + s] < 1) {
      return runtime_error(RuntimeCode::InvalidArgument, "conv check: stride and dilation must be >= 1, padding >= 0");
    }
  }
  if (spatial == 1) {
    d.w = x.dim(2);
    d.kw = w.dim(2);
  } else {
    d.h = x.dim(2), d.w = x.dim(3);
    d.kh = w.dim(2), d.kw = w.dim(3);
  }
  // Padding and dilation come from the call's attributes (hostile): checked arithmetic.
  auto out_len = [](std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                    std::int64_t dl) -> RuntimeResult<std::int64_t> {
    CAPSULE_TRY(const std::int64_t pad2, checked_mul("conv check: padding", p, 2));
    CAPSULE_TRY(const std::int64_t padded, checked_add("conv check: padded input", in, pad2));
    CAPSULE_TRY(const std::int64_t reach, checked_mul("conv check: dilated kernel", dl, k - 1));
    // reach >= -dl > INT64_MIN (k may be 0), so -reach is representable.
    CAPSULE_TRY(const std::int64_t extent, checked_add("conv check: output span", padded, -reach));
    const std::int64_t span = extent - 1;  // extent >= -INT64_MAX
    return span < 0 ? std::int64_t{0} : span / s + 1;
  };
  CAPSULE_TRY(d.oh, out_len(d.h, d.kh, d.stride[0], d.pad[0], d.dil[0]));
  CAPSULE_TRY(d.ow, out_len(d.w, d.kw, d.stride[1], d.pad[1], d.dil[1]));
  d.out_shape = {d.n, d.o};
  if (spatial == 2) d.out_shape.push_back(d.oh);
  d.out_shape.push_back(d.ow);
  return d;
}

/// One output position of a single-filter convolution over `channels` input planes: Σ over the
/// filter's (channel, ky, kx) of in·f, and the same over |in|·f_abs, in float64.
template <class X>
void conv_point(const X* in, const double* f, const double* f_abs, std::int64_t channels, const ConvDims& d,
                std::int64_t y, std::int64_t x, double& value, double& magnitude) {
  double sum = 0.0, mag = 0.0;
  for (std::int64_t ci = 0; ci < channels; ++ci) {
    const X* plane = in + ci * d.h * d.w;
    for (std::int64_t ky = 0; ky < d.kh; ++ky) {
      const std::int64_t iy = y * d.stride[0] - d.pad[0] + ky * d.dil[0];
      if (iy < 0 || iy >= d.h) continue;
      for (std::int64_t kx = 0; kx < d.kw; ++kx) {
        const std::int64_t ix = x * d.stride[1] - d.pad[1] + kx * d.dil[1];
        if (ix < 0 || ix >= d.w) continue;
        const double v = static_cast<double>(plane[iy * d.w + ix]);
        const std::int64_t fi = (ci * d.kh + ky) * d.kw + kx;
        sum += v * f[fi];
        mag += std::fabs(v) * f_abs[fi];
      }
    }
  }
  value = sum;
  magnitude = mag;
}

template <class T>
void channel_checksum(const ConvDims& d, const T* x, const T* w, const T* bias, const T* y, CheckerRng& rng,
                      WorstResidual& worst) {
  const std::int64_t cg = d.cg(), og = d.og(), ksize = cg * d.kh * d.kw;
  const double u = unit_roundoff<T>();
  const double terms = static_cast<double>(ksize) + (bias != nullptr ? 1.0 : 0.0);
  const double provider = gamma(terms, u);
  const double check_mag = gamma(terms + static_cast<double>(og) + 2.0, kU64);
  const double check_out = gamma(static_cast<double>(og + 1), kU64);
  const double underflow = (terms + 2.0) * static_cast<double>(og) * static_cast<double>(std::numeric_limits<T>::denorm_min());
  std::vector<double> sign(static_cast<std::size_t>(d.o));
  for (double& s : sign) s = rng.sign();
  std::vector<double> f(static_cast<std::size_t>(ksize)), f_abs(static_cast<std::size_t>(ksize));
  const std::int64_t plane = d.oh * d.ow;
  for (std::int64_t g = 0; g < d.groups; ++g) {
    std::fill(f.begin(), f.end(), 0.0);
    std::fill(f_abs.begin(), f_abs.end(), 0.0);
    double bias_signed = 0.0, bias_abs = 0.0;
    for (std::int64_t o = g * og; o < (g + 1) * og; ++o) {
      const T* wo = w + o * ksize;
      for (std::int64_t i = 0; i < ksize; ++i) {
        f[static_cast<std::size_t>(i)] += sign[static_cast<std::size_t>(o)] * static_cast<double>(wo[i]);
        f_abs[static_cast<std::size_t>(i)] += std::fabs(static_cast<double>(wo[i]));
      }
      if (bias != nullptr) {
        bias_signed += sign[static_cast<std::size_t>(o)] * static_cast<double>(bias[o]);
        bias_abs += std::fabs(static_cast<double>(bias[o]));
      }
    }
    for (std::int64_t n = 0; n < d.n; ++n) {
      const T* xg = x + (n * d.c + g * cg) * d.h * d.w;
      for (std::int64_t oy = 0; oy < d.oh; ++oy) {
        for (std::int64_t ox = 0; ox < d.ow; ++ox) {
          double value = 0.0, mag = 0.0;
          conv_point(xg, f.data(), f_abs.data(), cg, d, oy, ox, value, mag);
          double lhs = 0.0, out_abs = 0.0;
          const std::int64_t first = (n * d.o + g * og) * plane + oy * d.ow + ox;
          for (std::int64_t o = 0; o < og; ++o) {
            const double yv = static_cast<double>(y[first + o * plane]);
            lhs += sign[static_cast<std::size_t>(g * og + o)] * yv;
            out_abs += std::fabs(yv);
          }
          const double total = mag + bias_abs;
          const double bound = provider * total * (1.0 + check_mag) + check_mag * total + check_out * out_abs + underflow;
          worst.observe(std::fabs(lhs - (value + bias_signed)), bound, first, kChannel);
        }
      }
    }
  }
}

template <class T>
void batch_checksum(const ConvDims& d, const T* x, const T* w, const T* bias, const T* y, CheckerRng& rng,
                    WorstResidual& worst) {
  const std::int64_t cg = d.cg(), og = d.og(), ksize = cg * d.kh * d.kw, image = d.c * d.h * d.w;
  const double u = unit_roundoff<T>();
  const double terms = static_cast<double>(ksize) + (bias != nullptr ? 1.0 : 0.0);
  const double provider = gamma(terms, u);
  const double check_mag = gamma(terms + static_cast<double>(d.n) + 2.0, kU64);
  const double check_out = gamma(static_cast<double>(d.n + 1), kU64);
  const double underflow = (terms + 2.0) * static_cast<double>(d.n) * static_cast<double>(std::numeric_limits<T>::denorm_min());
  std::vector<double> sign(static_cast<std::size_t>(d.n));
  double sign_sum = 0.0;
  for (double& s : sign) sign_sum += (s = rng.sign());
  std::vector<double> xs(static_cast<std::size_t>(image), 0.0), x_abs(static_cast<std::size_t>(image), 0.0);
  for (std::int64_t n = 0; n < d.n; ++n) {
    const T* xn = x + n * image;
    for (std::int64_t i = 0; i < image; ++i) {
      xs[static_cast<std::size_t>(i)] += sign[static_cast<std::size_t>(n)] * static_cast<double>(xn[i]);
      x_abs[static_cast<std::size_t>(i)] += std::fabs(static_cast<double>(xn[i]));
    }
  }
  std::vector<double> f(static_cast<std::size_t>(ksize)), f_abs(static_cast<std::size_t>(ksize));
  const std::int64_t plane = d.oh * d.ow;
  for (std::int64_t o = 0; o < d.o; ++o) {
    const T* wo = w + o * ksize;
    for (std::int64_t i = 0; i < ksize; ++i) {
      f[static_cast<std::size_t>(i)] = static_cast<double>(wo[i]);
      f_abs[static_cast<std::size_t>(i)] = std::fabs(static_cast<double>(wo[i]));
    }
    const std::int64_t c0 = (o / og) * cg;
    const double b = bias != nullptr ? static_cast<double>(bias[o]) : 0.0;
    for (std::int64_t oy = 0; oy < d.oh; ++oy) {
      for (std::int64_t ox = 0; ox < d.ow; ++ox) {
        // conv of the signed sum for the value; of Σ|X_n| with |W| for the magnitude.
        double value = 0.0, unused = 0.0, mag = 0.0;
        conv_point(xs.data() + c0 * d.h * d.w, f.data(), f_abs.data(), cg, d, oy, ox, value, unused);
        conv_point(x_abs.data() + c0 * d.h * d.w, f_abs.data(), f_abs.data(), cg, d, oy, ox, mag, unused);
        double lhs = 0.0, out_abs = 0.0;
        const std::int64_t first = o * plane + oy * d.ow + ox;
        for (std::int64_t n = 0; n < d.n; ++n) {
          const double yv = static_cast<double>(y[n * d.o * plane + first]);
          lhs += sign[static_cast<std::size_t>(n)] * yv;
          out_abs += std::fabs(yv);
        }
        const double total = mag + static_cast<double>(d.n) * std::fabs(b);
        const double bound = provider * total * (1.0 + check_mag) + check_mag * total + check_out * out_abs + underflow;
        worst.observe(std::fabs(lhs - (value + sign_sum * b)), bound, first, kBatch);
      }
    }
  }
}

template <class T>
RuntimeResult<CheckVerdict> check_conv_typed(const CheckCall& call, CheckerRng& rng, int rounds) {
  CAPSULE_TRY(const ConvDims d, conv_dims(call));
  if (auto bad = wrong_output_shape("conv", *call.output, d.out_shape)) return *bad;
  WorstResidual worst;
  if (call.output->numel() == 0) return worst.verdict();
  const T* x = call.inputs[0].data<T>();
  const T* w = call.inputs[1].data<T>();
  const T* bias = d.has_bias ? call.inputs[2].data<T>() : nullptr;
  const T* y = call.output->data<T>();
  for (int round = 0; round < rounds; ++round) {
    channel_checksum(d, x, w, bias, y, rng, worst);
    // With one image the batch checksum is the convolution itself: no cheaper, and the channel
    // checksum already sees every element.
    if (d.n > 1) batch_checksum(d, x, w, bias, y, rng, worst);
  }
  return worst.verdict();
}

}  // namespace
}  // namespace capsule::checkers

namespace capsule {

RuntimeResult<CheckVerdict> check_conv(const CheckCall& call, CheckerRng& rng, int rounds) {
  using namespace checkers;
  if (call.op != Op::Conv) return runtime_error(RuntimeCode::InvalidArgument, str("the conv check does not check ", to_string(call.op)));
  if (rounds < 1) return runtime_error(RuntimeCode::InvalidArgument, str("the conv check needs at least 1 round, got ", rounds));
  CAPSULE_CHECK(expect_operands(call, 2, 3));
  return dispatch_dtype(*call.output, [&]<class T>() { return check_conv_typed<T>(call, rng, rounds); });
}

}  // namespace capsule
