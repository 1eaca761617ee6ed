// src/cpu/conv_small_plane.cpp — convolutions onto planes of a few output positions as GEMMs,
// taken by the CPU library slots (conv_onednn.cpp) before oneDNN's primitives.
//
// Note [Weight gradients of small output planes]
// oneDNN 2.6's jit backward-weights kernel ran ResNet-18's last stage (3×3, 512 → 512 onto 2×2
// planes, batch 32 of 64×64) at ~50 GFLOP/s on this AVX-512 CPU, 12.2 ms a call at 1 thread
// against 5.1 ms for the same convolution's forward: with 4 output positions an image each of
// its passes has little to sum. With so few positions the whole batch's rows are small, so the
// weight's gradient is GEMMs over every position at once: first (2026-12-07, tenth session) one
// GEMM over the batch's patches, dW[O, C·K] = G[P, O]ᵀ · patches[P, C·K], 7.2 ms at 1 thread;
// now one GEMM a tap over the rows where the tap is valid (Note [Convolutions onto small
// planes]), 3.3 ms. At 4×4 (256 → 256) the GEMMs a tap made the ResNet-18 step 5 ms faster at 1
// thread but 3-11 ms slower at 2 (OpenBLAS's threads against oneDNN's kernel), so planes above
// kSmallPlane positions stay with oneDNN.
//
// Note [Convolutions onto small planes]
// On such planes most of a window is padding: a 3×3 window over a 2×2 input with padding 1
// covers 4 input pixels and 5 zeros, so a GEMM over the patches spends 5/9 of its work on
// zeros, and oneDNN's forward and backward data each first reorder the weight into a blocked
// layout (1.6-1.7 ms for a 512 × 512 × 3 × 3 weight at 1 thread, once for each pass). In
// channels_last (x [N, H, W, C], weight [O, kh, kw, C], out [N, oh, ow, O]) a run of horizontally
// neighbouring valid taps of one window row is contiguous both in x (the pixels (iy, ix..),
// all channels) and in the weight (the taps (i, j..), all channels), and every image's run sits
// at the same offset. So each pass is a few GEMMs straight on the user's buffers, one per
// (output position p, window row i, run of taps): the forward
//   out[:, p, :] (+)= x[:, iy, ix.., :] · W[:, i, j.., :]ᵀ    (M = N, K = taps · C, N = O),
// the input's gradient, accumulated into a zeroed grad_x,
//   grad_x[:, iy, ix.., :] += G[:, p, :] · W[:, i, j.., :]     (M = N, K = O, N = taps · C),
// and the weight's gradient one GEMM a tap over the rows (n, p) where the tap is valid,
// gathered (a few MB), dW[:, i, j, :] = G_tapᵀ · X_tap. No weight reorder, no padded product.
// The bias joins the first product of each position and its gradient is G's column sums.
// Dilation above 1 along a row splits the runs into single taps (their pixels are not
// neighbours). An NCHW convolution runs the same products between transposes: its activations
// (a few hundred KB here) and its weight ([O, C, K] → [O, K, C], one pass over it where oneDNN
// made one reorder a pass), and the weight's gradient back. ResNet-18's 2×2 stage, 1 thread
// (GEMMs alone, this machine): forward 4.6 ms against oneDNN's 4.9 + 1.6 of reorder, weight
// gradient 3.3 against 6.5 over the patches; the input's gradient no faster than oneDNN's
// 4.8 + 1.7 at 1 thread, 2.3 against 2.4 + 1.0 at 2. The whole step (bench_resnet --device cpu,
// alternating runs, 2026-12-07): channels_last 256.7 → 235.5 ms at 1 thread; NCHW 279 → 264
// (against oneDNN's passes and the patches' GEMM).
#include "cpu/conv_small_plane.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/parallel.hpp"
#include "cpu/pass_buffer.hpp"

namespace ember::cpu {

using backend::ConvBackwardArgs;
using backend::ConvForwardArgs;
using backend::ConvGeometry;
using backend::GemmArgs;

namespace {

constexpr int64_t kSmallPlane = 4;

// A Pass-pool buffer of `count` floats for one call.
struct FloatScratch {
  explicit FloatScratch(int64_t count) : buffer(static_cast<size_t>(count) * sizeof(float)) {}
  float* get() const { return buffer.as<float>(); }
  PassBuffer buffer;
};

// One GEMM of Note [Convolutions onto small planes]: output position `p`, the input pixel `in`
// (iy·W + ix) under the run's first tap `tap` (i·kw + j), and `taps` neighbouring taps.
struct Run {
  int64_t p = 0, in = 0, tap = 0, taps = 0;
};

// Every run of valid taps, by output position, then window row, then column.
std::vector<Run> runs_of(const ConvGeometry& g) {
  std::vector<Run> runs;
  const int64_t h = g.input[0], w = g.input[1], kh = g.kernel[0], kw = g.kernel[1];
  for (int64_t oy = 0; oy < g.output[0]; ++oy)
    for (int64_t ox = 0; ox < g.output[1]; ++ox)
      for (int64_t i = 0; i < kh; ++i) {
        const int64_t iy = oy * g.stride[0] - g.padding[0] + i * g.dilation[0];
        if (iy < 0 || iy >= h) continue;
        Run r;
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t ix = ox * g.stride[1] - g.padding[1] + j * g.dilation[1];
          const bool inside = ix >= 0 && ix < w;
          if (inside && r.taps > 0 && g.dilation[1] == 1) {
            ++r.taps;
            continue;
          }
          if (r.taps > 0) runs.push_back(r);
          r = Run{};
          if (inside) r = Run{oy * g.output[1] + ox, iy * w + ix, i * kw + j, 1};
        }
        if (r.taps > 0) runs.push_back(r);
      }
  return runs;
}

// The sizes the passes read: output positions, channels out and in, input pixels, and the
// weight's row length kh·kw·C.
struct Sizes {
  explicit Sizes(const ConvGeometry& g)
      : plane(g.output[0] * g.output[1]),
        o(g.out_channels),
        c(g.in_channels),
        hw(g.input[0] * g.input[1]),
        ld(g.kernel[0] * g.kernel[1] * g.in_channels) {}
  int64_t plane, o, c, hw, ld;
};

// A product of run `r` with the weight's taps under it, W[:, i, j.., :], as its B.
GemmArgs weight_product(const Sizes& s, const Run& r, const void* weight) {
  GemmArgs m;
  m.dtype = DType::f32;
  m.b = static_cast<const float*>(weight) + r.tap * s.c;
  m.ldb = s.ld;
  return m;
}

// grad_bias[o] = Σ over the rows of G[rows, o].
void column_sums(const float* __restrict grad, int64_t rows, int64_t o, float* __restrict out) {
  parallel_for(o, 64, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) out[c] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float* __restrict row = grad + r * o;
      for (int64_t c = b; c < e; ++c) out[c] += row[c];
    }
  });
}

// Note [Convolutions onto small planes]: one GEMM a tap over the rows where it is valid.
void nhwc_weight_grad(const ConvBackwardArgs& a) {
  const ConvGeometry& g = a.geo;
  const int64_t h = g.input[0], w = g.input[1], kh = g.kernel[0], kw = g.kernel[1];
  const int64_t plane = g.output[0] * g.output[1], o = g.out_channels, c = g.in_channels;
  const int64_t batch = g.batch, ld = kh * kw * c;
  const float* grad = static_cast<const float*>(a.grad_out);
  const float* x = static_cast<const float*>(a.x);
  float* dw = static_cast<float*>(a.grad_weight);
  const FloatScratch ga(batch * plane * o), xa(batch * plane * c);
  std::vector<int64_t> at, in;  // the tap's valid output positions and their input pixels
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) {
      at.clear();
      in.clear();
      for (int64_t p = 0; p < plane; ++p) {
        const int64_t oy = p / g.output[1], ox = p % g.output[1];
        const int64_t iy = oy * g.stride[0] - g.padding[0] + i * g.dilation[0];
        const int64_t ix = ox * g.stride[1] - g.padding[1] + j * g.dilation[1];
        if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
        at.push_back(p);
        in.push_back(iy * w + ix);
      }
      float* slice = dw + (i * kw + j) * c;
      const int64_t count = static_cast<int64_t>(at.size());
      if (count == 0) {  // the tap reads padding only
        for (int64_t r = 0; r < o; ++r) std::fill(slice + r * ld, slice + r * ld + c, 0.0f);
        continue;
      }
      const bool every = count == plane;  // G's rows in order: no gather
      parallel_for(batch * count, std::max<int64_t>(1, 16384 / (o + c)), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const int64_t n = r / count, q = r % count;
          if (!every)
            std::memcpy(ga.get() + r * o, grad + (n * plane + at[q]) * o, o * sizeof(float));
          std::memcpy(xa.get() + r * c, x + (n * h * w + in[q]) * c, c * sizeof(float));
        }
      });
      GemmArgs m;
      m.dtype = DType::f32;
      m.trans_a = true;
      m.m = o;
      m.n = c;
      m.k = batch * count;
      m.a = every ? grad : ga.get();
      m.lda = o;
      m.b = xa.get();
      m.ldb = c;
      m.c = slice;
      m.ldc = ld;
      gemm(m);
    }
  if (a.grad_bias) column_sums(grad, batch * plane, o, static_cast<float*>(a.grad_bias));
}

}  // namespace

bool small_plane(const ConvGeometry& g) {
  const int64_t plane = g.output[0] * g.output[1];
  return g.dtype == DType::f32 && g.spatial == 2 && g.groups == 1 && plane >= 1 &&
         plane <= kSmallPlane && g.batch >= 1;
}

namespace {

void nhwc_forward(const ConvForwardArgs& a) {
  const ConvGeometry& g = a.geo;
  const Sizes s(g);
  const int64_t plane = s.plane, o = s.o, c = s.c;
  const float* x = static_cast<const float*>(a.x);
  const float* bias = static_cast<const float*>(a.bias);
  float* out = static_cast<float*>(a.out);
  std::vector<char> written(static_cast<size_t>(plane), 0);
  for (const Run& r : runs_of(g)) {
    GemmArgs m = weight_product(s, r, a.weight);
    m.trans_b = true;
    m.m = g.batch;
    m.n = o;
    m.k = r.taps * c;
    m.a = x + r.in * c;
    m.lda = s.hw * c;
    m.c = out + r.p * o;
    m.ldc = plane * o;
    if (!written[r.p]) {
      m.bias = bias;
      written[r.p] = 1;
    } else {
      m.beta = 1.0;
    }
    gemm(m);
  }
  for (int64_t p = 0; p < plane; ++p) {  // a window over padding only: the bias, or zeros
    if (written[p]) continue;
    for (int64_t n = 0; n < g.batch; ++n) {
      float* row = out + (n * plane + p) * o;
      if (bias)
        std::memcpy(row, bias, o * sizeof(float));
      else
        std::fill(row, row + o, 0.0f);
    }
  }
  if (a.relu) {
    const int64_t total = g.batch * plane * o;
    parallel_for(total, 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = std::max(out[i], 0.0f);
    });
  }
}

void nhwc_backward_data(const ConvBackwardArgs& a) {
  const ConvGeometry& g = a.geo;
  const Sizes s(g);
  const float* grad = static_cast<const float*>(a.grad_out);
  float* gx = static_cast<float*>(a.grad_input);
  const int64_t total = g.batch * s.hw * s.c;
  parallel_for(total, 65536, [&](int64_t b, int64_t e) { std::fill(gx + b, gx + e, 0.0f); });
  for (const Run& r : runs_of(g)) {
    GemmArgs m = weight_product(s, r, a.weight);
    m.m = g.batch;
    m.n = r.taps * s.c;
    m.k = s.o;
    m.a = grad + r.p * s.o;
    m.lda = s.plane * s.o;
    m.c = gx + r.in * s.c;
    m.ldc = s.hw * s.c;
    m.beta = 1.0;
    gemm(m);
  }
}

// dst[i][y][x] = src[i][x][y] for src [n, a, b]: NCHW ↔ NHWC activations (a, b = C and the
// plane, or the plane and C) and the weight's [O, C, K] ↔ [O, K, C].
void swap_last_two(float* __restrict dst, const float* __restrict src, int64_t n, int64_t a,
                   int64_t b) {
  parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, a * b)),
               [&](int64_t i0, int64_t i1) {
                 for (int64_t i = i0; i < i1; ++i) {
                   const float* __restrict s = src + i * a * b;
                   float* __restrict d = dst + i * a * b;
                   for (int64_t y = 0; y < b; ++y)
                     for (int64_t x = 0; x < a; ++x) d[y * a + x] = s[x * b + y];
                 }
               });
}

// An NCHW operand in NHWC order: [n, a, b] → [n, b, a] in a Pass-pool buffer.
struct Transposed {
  Transposed(const void* src, int64_t n, int64_t a, int64_t b) : buffer(n * a * b) {
    swap_last_two(buffer.get(), static_cast<const float*>(src), n, a, b);
  }
  explicit Transposed(int64_t count) : buffer(count) {}
  float* get() const { return buffer.get(); }
  FloatScratch buffer;
};

// An NCHW convolution's operands in the NHWC order its products read (Note [Convolutions onto
// small planes]): each [n, a, b] block transposed to [n, b, a], and back for the results.
struct Nhwc {
  explicit Nhwc(const ConvGeometry& g) : geo(g), s(g) { geo.channels_last = true; }
  Transposed x(const void* p) const { return Transposed(p, geo.batch, s.c, s.hw); }
  Transposed grad_out(const void* p) const { return Transposed(p, geo.batch, s.o, s.plane); }
  Transposed weight(const void* p) const { return Transposed(p, s.o, s.c, s.ld / s.c); }
  void out_back(void* out, const Transposed& t) const {
    swap_last_two(static_cast<float*>(out), t.get(), geo.batch, s.plane, s.o);
  }
  void grad_input_back(void* gx, const Transposed& t) const {
    swap_last_two(static_cast<float*>(gx), t.get(), geo.batch, s.hw, s.c);
  }
  void grad_weight_back(void* dw, const Transposed& t) const {
    swap_last_two(static_cast<float*>(dw), t.get(), s.o, s.ld / s.c, s.c);
  }
  ConvGeometry geo;  // the geometry, channels_last
  Sizes s;
};

}  // namespace

// An NCHW geometry runs the NHWC products between transposes of its operands; the weight's
// costs one pass over it, as oneDNN's reorder did.
void small_plane_forward(const ConvForwardArgs& a) {
  if (a.geo.channels_last) return nhwc_forward(a);
  const Nhwc n(a.geo);
  const Transposed x = n.x(a.x), w = n.weight(a.weight), out(a.geo.batch * n.s.plane * n.s.o);
  ConvForwardArgs h = a;
  h.geo = n.geo;
  h.x = x.get();
  h.weight = w.get();
  h.out = out.get();
  nhwc_forward(h);
  n.out_back(a.out, out);
}

void small_plane_backward_data(const ConvBackwardArgs& a) {
  if (a.geo.channels_last) return nhwc_backward_data(a);
  const Nhwc n(a.geo);
  const Transposed grad = n.grad_out(a.grad_out), w = n.weight(a.weight);
  const Transposed gx(a.geo.batch * n.s.hw * n.s.c);
  ConvBackwardArgs h = a;
  h.geo = n.geo;
  h.grad_out = grad.get();
  h.weight = w.get();
  h.grad_input = gx.get();
  nhwc_backward_data(h);
  n.grad_input_back(a.grad_input, gx);
}

void small_plane_weight_grad(const ConvBackwardArgs& a) {
  if (a.geo.channels_last) return nhwc_weight_grad(a);
  const Nhwc n(a.geo);
  const Transposed x = n.x(a.x), grad = n.grad_out(a.grad_out), dw(n.s.o * n.s.ld);
  ConvBackwardArgs h = a;
  h.geo = n.geo;
  h.x = x.get();
  h.grad_out = grad.get();
  h.grad_weight = dw.get();
  nhwc_weight_grad(h);
  n.grad_weight_back(a.grad_weight, dw);
}

}  // namespace ember::cpu
