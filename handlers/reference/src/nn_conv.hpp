// SPDX-License-Identifier: Apache-2.0
// The four loops behind conv and conv_transpose, forward and adjoint. 1-D tensors [n, c, l] run
// as 2-D ones with height 1 (kernel 1, stride 1, padding 0, dilation 1 along it), which visits
// the same terms in the same order. Every output element is a fixed-left sum that starts at +0
// and adds its terms in increasing index order; positions that fall in the padding, or between
// the strides of a transposed convolution, contribute no term at all.
#pragma once

#include <cstdint>

namespace capsule::reference {

/// Stride, padding and dilation per spatial axis (0 = height, 1 = width).
struct ConvGeometry {
  std::int64_t stride[2] = {1, 1};
  std::int64_t pad[2] = {0, 0};
  std::int64_t dil[2] = {1, 1};
};

/// A 4-D extent [n, c, h, w] of a contiguous tensor.
struct Extent4 {
  std::int64_t n = 0, c = 0, h = 1, w = 1;
  std::int64_t at(std::int64_t in, std::int64_t ic, std::int64_t ih, std::int64_t iw) const {
    return ((in * c + ic) * h + ih) * w + iw;
  }
};

/// Convolution (cross-correlation) with weight [out.c, in.c/groups, kh, kw]:
/// out[n,o,y,x] = Σ_{ci, ky, kx} in[n, g·Cg+ci, y·s−p+ky·d, x·s−p+kx·d] · w[o, ci, ky, kx],
/// terms in the weight's row-major order. The output extent is the caller's (the adjoint of a
/// transposed convolution asks for exactly its input's size).
template <class T>
void conv_core(const T* in, Extent4 ie, const T* w, std::int64_t kh, std::int64_t kw, T* out, Extent4 oe,
               std::int64_t groups, const ConvGeometry& g) {
  const std::int64_t cg = ie.c / groups;
  const std::int64_t og = oe.c / groups;
  for (std::int64_t n = 0; n < oe.n; ++n) {
    for (std::int64_t o = 0; o < oe.c; ++o) {
      const std::int64_t c0 = (o / og) * cg;
      const T* wo = w + o * cg * kh * kw;
      for (std::int64_t y = 0; y < oe.h; ++y) {
        for (std::int64_t x = 0; x < oe.w; ++x) {
          T acc = T(0);
          for (std::int64_t ci = 0; ci < cg; ++ci) {
            for (std::int64_t ky = 0; ky < kh; ++ky) {
              const std::int64_t iy = y * g.stride[0] - g.pad[0] + ky * g.dil[0];
              if (iy < 0 || iy >= ie.h) continue;
              for (std::int64_t kx = 0; kx < kw; ++kx) {
                const std::int64_t ix = x * g.stride[1] - g.pad[1] + kx * g.dil[1];
                if (ix < 0 || ix >= ie.w) continue;
                acc = acc + in[ie.at(n, c0 + ci, iy, ix)] * wo[(ci * kh + ky) * kw + kx];
              }
            }
          }
          out[oe.at(n, o, y, x)] = acc;
        }
      }
    }
  }
}

/// Transposed convolution with weight [in.c, out.c/groups, kh, kw], as a gather so every output
/// is its own fixed-left sum: out[n,o,y,x] = Σ_{ci, ky, kx} in[n, g·Cg+ci, iy, ix] · w[g·Cg+ci, o mod Og,
/// ky, kx] over the (iy, ix) with iy·s − p + ky·d = y (likewise x), terms in (ci, ky, kx) order.
template <class T>
void conv_transpose_core(const T* in, Extent4 ie, const T* w, std::int64_t kh, std::int64_t kw, T* out, Extent4 oe,
                         std::int64_t groups, const ConvGeometry& g) {
  const std::int64_t cg = ie.c / groups;
  const std::int64_t og = oe.c / groups;
  for (std::int64_t n = 0; n < oe.n; ++n) {
    for (std::int64_t o = 0; o < oe.c; ++o) {
      const std::int64_t c0 = (o / og) * cg;
      const std::int64_t ol = o % og;
      for (std::int64_t y = 0; y < oe.h; ++y) {
        for (std::int64_t x = 0; x < oe.w; ++x) {
          T acc = T(0);
          for (std::int64_t ci = 0; ci < cg; ++ci) {
            const T* wc = w + ((c0 + ci) * og + ol) * kh * kw;
            for (std::int64_t ky = 0; ky < kh; ++ky) {
              const std::int64_t ty = y + g.pad[0] - ky * g.dil[0];
              if (ty < 0 || ty % g.stride[0] != 0 || ty / g.stride[0] >= ie.h) continue;
              const std::int64_t iy = ty / g.stride[0];
              for (std::int64_t kx = 0; kx < kw; ++kx) {
                const std::int64_t tx = x + g.pad[1] - kx * g.dil[1];
                if (tx < 0 || tx % g.stride[1] != 0 || tx / g.stride[1] >= ie.w) continue;
                acc = acc + in[ie.at(n, c0 + ci, iy, tx / g.stride[1])] * wc[ky * kw + kx];
              }
            }
          }
          out[oe.at(n, o, y, x)] = acc;
        }
      }
    }
  }
}

/// The weight adjoint shared by both directions. `small` is the tensor on the strided side (conv's
/// output gradient, or conv_transpose's input) and `big` the other; the weight is [small.c,
/// big.c/groups, kh, kw]: dw[a, b, ky, kx] = Σ_{n, y, x} small[n,a,y,x] · big[n, g·Bg+b, y·s−p+ky·d,
/// x·s−p+kx·d], terms in (n, y, x) order.
template <class T>
void conv_weight_grad(const T* small, Extent4 se, const T* big, Extent4 be, T* dw, std::int64_t kh, std::int64_t kw,
                      std::int64_t groups, const ConvGeometry& g) {
  const std::int64_t ag = se.c / groups;
  const std::int64_t bg = be.c / groups;
  for (std::int64_t a = 0; a < se.c; ++a) {
    const std::int64_t b0 = (a / ag) * bg;
    for (std::int64_t b = 0; b < bg; ++b) {
      for (std::int64_t ky = 0; ky < kh; ++ky) {
        for (std::int64_t kx = 0; kx < kw; ++kx) {
          T acc = T(0);
          for (std::int64_t n = 0; n < se.n; ++n) {
            for (std::int64_t y = 0; y < se.h; ++y) {
              const std::int64_t iy = y * g.stride[0] - g.pad[0] + ky * g.dil[0];
              if (iy < 0 || iy >= be.h) continue;
              for (std::int64_t x = 0; x < se.w; ++x) {
                const std::int64_t ix = x * g.stride[1] - g.pad[1] + kx * g.dil[1];
                if (ix < 0 || ix >= be.w) continue;
                acc = acc + small[se.at(n, a, y, x)] * big[be.at(n, b0 + b, iy, ix)];
              }
            }
          }
          dw[((a * bg + b) * kh + ky) * kw + kx] = acc;
        }
      }
    }
  }
}

/// db[c] = Σ_{n, y, x} grad[n, c, y, x], in that order.
template <class T>
void channel_sum(const T* grad, Extent4 e, T* db) {
  for (std::int64_t c = 0; c < e.c; ++c) {
    T acc = T(0);
    for (std::int64_t n = 0; n < e.n; ++n) {
      const T* p = grad + e.at(n, c, 0, 0);
      for (std::int64_t s = 0; s < e.h * e.w; ++s) acc = acc + p[s];
    }
    db[c] = acc;
  }
}

}  // namespace capsule::reference
