// src/cpu/conv_small_plane.cpp — convolutions onto planes of a few output positions as GEMMs,
// taken by the CPU library slots (conv_onednn.cpp) before oneDNN's primitives.
//
// Note [Weight gradients of small output planes]
// oneDNN 2.6's jit backward-weights kernel ran ResNet-18's last stage (3×3, 512 → 512 onto 2×2
// planes, batch 32 of 64×64) at ~50 GFLOP/s on this AVX-512 CPU, 12.2 ms a call at 1 thread
// against 5.1 ms for the same convolution's forward: with 4 output positions an image each of
// its passes has little to sum. With so few positions the whole batch's patches are small
// (P = N·oh·ow rows of C·kh·kw: 2.4 MB there), so the weight's gradient is one GEMM over every
// position at once, dW[O, C·K] = G[P, O]ᵀ · patches[P, C·K], with the bias's gradient (G's
// column sums) beside it (GemmArgs::bias_grad). A patch row is in the weight's own element
// order — (c, i, j) for NCHW — so dW lands in the user's layout with no reorder. There the GEMM
// (oneDNN's matmul) takes 7.2 ms at 1 thread, 4.1 at 2, and the step's weight gradients 88-90 ms
// against 98-106 (three steps under the Profiler, 2026-12-07). Taken for f32 2-D convolutions
// with one group and at most kSmallPlane output positions an image; at 4×4 (256 → 256, P = 512)
// one GEMM of the same shape class timed no faster than oneDNN's kernel (6.1 ms each). NHWC
// geometries take the products of the Note below instead.
//
// Note [Convolutions onto small planes]
// On such planes most of a window is padding: a 3×3 window over a 2×2 input with padding 1
// covers 4 input pixels and 5 zeros, so the patches' GEMM above spends 5/9 of its work on
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
// neighbours). ResNet-18's 2×2 stage, 1 thread (GEMMs alone, this machine): forward 4.6 ms
// against oneDNN's 4.9 + 1.6 of reorder, weight gradient 3.3 against 6.5 (one GEMM over the
// patches); the input's gradient no faster than oneDNN's 4.8 + 1.7 at 1 thread, 2.3 against
// 2.4 + 1.0 at 2. The whole channels_last step went from 256.7 to 235.5 ms at 1 thread
// (bench_resnet --device cpu, alternating runs, 2026-12-07). The weight gradient's GEMMs a tap
// on 4×4 planes too (256 → 256) made that step 5 ms faster at 1 thread but 3-11 ms slower at 2
// (OpenBLAS's threads against oneDNN's kernel), so planes above kSmallPlane stay with oneDNN.
#include "cpu/conv_small_plane.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
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

// patches[P, C·kh·kw] of an NCHW x for the positions p = (n, oy, ox): row p holds the window
// under output position p in the weight's element order (c, i, j), zeros where it leaves the
// input.
void nchw_patches(const ConvGeometry& g, float* __restrict patches, const float* __restrict x) {
  const int64_t c_in = g.in_channels, h = g.input[0], w = g.input[1];
  const int64_t kh = g.kernel[0], kw = g.kernel[1], k = kh * kw, rows = c_in * k;
  const int64_t oh = g.output[0], ow = g.output[1], plane = oh * ow;
  parallel_for(g.batch * plane, std::max<int64_t>(1, 32768 / rows), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const int64_t n = p / plane, oy = p % plane / ow, ox = p % ow;
      float* __restrict row = patches + p * rows;
      for (int64_t i = 0; i < kh; ++i) {
        const int64_t iy = oy * g.stride[0] - g.padding[0] + i * g.dilation[0];
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t ix = ox * g.stride[1] - g.padding[1] + j * g.dilation[1];
          float* __restrict d = row + i * kw + j;
          if (iy < 0 || iy >= h || ix < 0 || ix >= w) {
            for (int64_t c = 0; c < c_in; ++c) d[c * k] = 0.0f;
            continue;
          }
          const float* __restrict s = x + (n * c_in * h + iy) * w + ix;
          for (int64_t c = 0; c < c_in; ++c) d[c * k] = s[c * h * w];
        }
      }
    }
  });
}

// Note [Weight gradients of small output planes], for NCHW.
void nchw_weight_grad(const ConvBackwardArgs& a) {
  const ConvGeometry& g = a.geo;
  const int64_t plane = g.output[0] * g.output[1], positions = g.batch * plane;
  const int64_t o = g.out_channels, rows = g.in_channels * g.kernel[0] * g.kernel[1];
  const FloatScratch patches(positions * rows);
  nchw_patches(g, patches.get(), static_cast<const float*>(a.x));
  // G[P, O], gathered from [N, O, plane].
  const float* grad = static_cast<const float*>(a.grad_out);
  const FloatScratch gathered(positions * o);
  float* __restrict gt = gathered.get();
  parallel_for(g.batch, std::max<int64_t>(1, 32768 / (o * plane)), [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n)
      for (int64_t c = 0; c < o; ++c)
        for (int64_t l = 0; l < plane; ++l)
          gt[(n * plane + l) * o + c] = grad[(n * o + c) * plane + l];
  });
  GemmArgs m;
  m.dtype = DType::f32;
  m.trans_a = true;
  m.m = o;
  m.n = rows;
  m.k = positions;
  m.a = gt;
  m.lda = o;
  m.b = patches.get();
  m.ldb = rows;
  m.c = a.grad_weight;
  m.ldc = rows;
  m.bias_grad = a.grad_bias;
  gemm(m);
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

bool small_plane_products(const ConvGeometry& g) { return small_plane(g) && g.channels_last; }

void small_plane_forward(const ConvForwardArgs& a) {
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

void small_plane_backward_data(const ConvBackwardArgs& a) {
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

void small_plane_weight_grad(const ConvBackwardArgs& a) {
  if (a.geo.channels_last)
    nhwc_weight_grad(a);
  else
    nchw_weight_grad(a);
}

}  // namespace ember::cpu
