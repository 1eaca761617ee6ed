// src/cuda/conv.cu — convolution's im2col / col2im and 2-D max / average pooling on CUDA.
//
// Shape letters (Window2d, as src/cpu/conv.cpp): N batch, C channels, H×W input
// plane, oh×ow output plane, L = oh·ow, K = kh·kw, NL = N·L. Every operand is contiguous.
//   im2col   in[N, C, H, W]     -> columns[C·K, NL]    (row r = (c, i, j), column n·L + p)
//   col2im   columns[C·K, NL]   -> grad_in[N, C, H, W] (sums overlapping patches, overwrites)
//   pools    in[N, C, H, W]     -> out[N, C, oh, ow]; their backward writes grad_in (overwrites)
// One thread per output element (im2col: per channel and column, writing the column's K
// rows); consecutive threads take consecutive output elements, so writes are coalesced. Indices are
// 32-bit when every buffer fits (the usual case) and 64-bit otherwise.
//
// Note [Gather-form backward]
// col2im and both pooling backwards are written as gathers: each grad_in element sums the
// contributions of the windows that cover it, in the order the CPU kernel adds them (kernel
// row, kernel column; or output row, output column). No atomics, results are deterministic
// and match the CPU's sums bit for bit (the same additions in the same order).
#include <algorithm>
#include <cstdint>
#include <limits>

#include "cuda/common.cuh"
#include "cuda/loops.cuh"
#include "ember/error.hpp"

namespace ember::cuda {
namespace {

template <typename T>
__device__ inline T minus_infinity() {
  return -std::numeric_limits<T>::infinity();
}

// Smallest o with o·stride >= x (x may be negative).
template <typename Idx>
__device__ inline Idx ceil_div_signed(Idx x, Idx stride) {
  return x >= 0 ? (x + stride - 1) / stride : -((-x) / stride);
}
// Largest o with o·stride <= x (x may be negative).
template <typename Idx>
__device__ inline Idx floor_div_signed(Idx x, Idx stride) {
  return x >= 0 ? x / stride : -((-x + stride - 1) / stride);
}

// Window2d in the kernel's index type.
template <typename Idx>
struct Geom {
  Idx batch, channels, height, width, out_h, out_w, kernel_h, kernel_w;
  Idx stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  bool channels_last;  // the pools' tensors NHWC (Window2d::channels_last)
};

// The pools' layouts: element e of an [N, C, h, w] tensor is pixel (y, x) of plane (n, c);
// NCHW e = ((n·C + c)·h + y)·w + x, NHWC e = ((n·h + y)·w + x)·C + c. A plane's pixel (y, x)
// lies at base + (y·w + x)·step.
template <typename Idx>
struct Pixel {
  Idx n, c, y, x;
};
template <typename Idx>
__device__ inline Pixel<Idx> pixel_of(const Geom<Idx>& g, Idx e, Idx h, Idx w) {
  if (g.channels_last) {
    const Idx c = e % g.channels, p = e / g.channels;
    return {p / (w * h), c, (p / w) % h, p % w};
  }
  const Idx nc = e / (w * h);
  return {nc / g.channels, nc % g.channels, (e / w) % h, e % w};
}
template <typename Idx>
__device__ inline Idx plane_base(const Geom<Idx>& g, Idx n, Idx c, Idx h, Idx w) {
  return g.channels_last ? n * h * w * g.channels + c : (n * g.channels + c) * h * w;
}
template <typename Idx>
__device__ inline Idx pixel_step(const Geom<Idx>& g) {
  return g.channels_last ? g.channels : Idx(1);
}

template <typename Idx>
Geom<Idx> geom_of(const Window2d& w) {
  return {
      static_cast<Idx>(w.batch),      static_cast<Idx>(w.channels),   static_cast<Idx>(w.height),
      static_cast<Idx>(w.width),      static_cast<Idx>(w.out_h),      static_cast<Idx>(w.out_w),
      static_cast<Idx>(w.kernel_h),   static_cast<Idx>(w.kernel_w),   static_cast<Idx>(w.stride_h),
      static_cast<Idx>(w.stride_w),   static_cast<Idx>(w.pad_h),      static_cast<Idx>(w.pad_w),
      static_cast<Idx>(w.dilation_h), static_cast<Idx>(w.dilation_w), w.channels_last};
}

#define EMBER_GRID_LOOP(e, total)                                                    \
  for (Idx e = static_cast<Idx>(blockIdx.x) * blockDim.x + threadIdx.x; e < (total); \
       e += static_cast<Idx>(gridDim.x) * blockDim.x)

// ---- im2col / col2im ----

// A thread per (channel, column): it decodes its column once and writes that column's K rows
// of the channel (consecutive threads write consecutive columns: coalesced). Per element that
// is a ninth of the index arithmetic of a thread per element, which bound the kernel (a
// 576 × 65536 columns matrix took 356 µs on the H200, a quarter of its bandwidth).
template <typename T, typename Idx>
__global__ void im2col_kernel(Geom<Idx> g, T* __restrict col, const T* __restrict in) {
  const Idx L = g.out_h * g.out_w, NL = g.batch * L, K = g.kernel_h * g.kernel_w;
  const Idx total = g.channels * NL;
  EMBER_GRID_LOOP(e, total) {
    const Idx column = e % NL, c = e / NL;
    const Idx n = column / L, p = column % L;
    const Idx oy = p / g.out_w, ox = p % g.out_w;
    const T* plane = in + (n * g.channels + c) * g.height * g.width;
    T* dst = col + c * K * NL + column;
    for (Idx ki = 0; ki < g.kernel_h; ++ki) {
      const Idx iy = oy * g.stride_h - g.pad_h + ki * g.dilation_h;
      const bool row_in = iy >= 0 && iy < g.height;
      for (Idx kj = 0; kj < g.kernel_w; ++kj) {
        const Idx ix = ox * g.stride_w - g.pad_w + kj * g.dilation_w;
        dst[(ki * g.kernel_w + kj) * NL] =
            row_in && ix >= 0 && ix < g.width ? plane[iy * g.width + ix] : cast<T>(0.0f);
      }
    }
  }
}

// Note [Gather-form backward]: grad_in[n, c, y, x] = Σ over (ki, kj) of the column entry whose
// patch reads (y, x).
// Unit: both strides are 1 (the usual case), so no division by the stride is needed.
template <typename T, typename Idx, bool Unit>
__global__ void col2im_kernel(Geom<Idx> g, T* __restrict grad_in, const T* __restrict col) {
  const Idx L = g.out_h * g.out_w, NL = g.batch * L, K = g.kernel_h * g.kernel_w;
  const Idx total = g.batch * g.channels * g.height * g.width;
  EMBER_GRID_LOOP(e, total) {
    const Idx x = e % g.width, y = (e / g.width) % g.height;
    const Idx nc = e / (g.width * g.height);
    const Idx c = nc % g.channels, n = nc / g.channels;
    const T* src = col + c * K * NL + n * L;
    Compute<T> sum = 0;
    for (Idx ki = 0; ki < g.kernel_h; ++ki) {
      const Idx ty = y + g.pad_h - ki * g.dilation_h;  // = oy·stride_h
      if (ty < 0 || (!Unit && ty % g.stride_h != 0)) continue;
      const Idx oy = Unit ? ty : ty / g.stride_h;
      if (oy >= g.out_h) continue;
      for (Idx kj = 0; kj < g.kernel_w; ++kj) {
        const Idx tx = x + g.pad_w - kj * g.dilation_w;
        if (tx < 0 || (!Unit && tx % g.stride_w != 0)) continue;
        const Idx ox = Unit ? tx : tx / g.stride_w;
        if (ox >= g.out_w) continue;
        sum += cast<Compute<T>>(src[(ki * g.kernel_w + kj) * NL + oy * g.out_w + ox]);
      }
    }
    grad_in[e] = cast<T>(sum);
  }
}

// ---- max pooling (padding is -inf; a larger value or a NaN takes the place, as PyTorch) ----

template <typename T, typename Idx>
__global__ void max_pool_kernel(Geom<Idx> g, T* __restrict out, int64_t* __restrict indices,
                                const T* __restrict in) {
  const Idx total = g.batch * g.channels * g.out_h * g.out_w;
  EMBER_GRID_LOOP(e, total) {
    const Pixel<Idx> px = pixel_of(g, e, g.out_h, g.out_w);
    const Idx ox = px.x, oy = px.y, step = pixel_step(g);
    const T* src = in + plane_base(g, px.n, px.c, g.height, g.width);
    Idx h0 = oy * g.stride_h - g.pad_h;
    const Idx h1 = min(h0 + (g.kernel_h - 1) * g.dilation_h + 1, g.height);
    while (h0 < 0) h0 += g.dilation_h;
    Idx w0 = ox * g.stride_w - g.pad_w;
    const Idx w1 = min(w0 + (g.kernel_w - 1) * g.dilation_w + 1, g.width);
    while (w0 < 0) w0 += g.dilation_w;
    using C = Compute<T>;
    C best = minus_infinity<C>();
    Idx at = h0 * g.width + w0;
    for (Idx y = h0; y < h1; y += g.dilation_h) {
      for (Idx x = w0; x < w1; x += g.dilation_w) {
        const C v = cast<C>(src[(y * g.width + x) * step]);
        if (v > best || v != v) {
          best = v;
          at = y * g.width + x;
        }
      }
    }
    out[e] = cast<T>(best);
    indices[e] = static_cast<int64_t>(at);
  }
}

// The output windows oy0..oy1 × ox0..ox1 whose (dilated) kernel covers input pixel (y, x):
// oy·stride - pad <= y <= oy·stride - pad + (kh-1)·dilation, and the same along x.
template <typename Idx>
struct Windows {
  Idx oy0, oy1, ox0, ox1;
};
template <typename Idx>
__device__ inline Windows<Idx> windows_over(const Geom<Idx>& g, Idx y, Idx x) {
  return {
      max(Idx(0), ceil_div_signed<Idx>(y + g.pad_h - (g.kernel_h - 1) * g.dilation_h, g.stride_h)),
      min(g.out_h - 1, floor_div_signed<Idx>(y + g.pad_h, g.stride_h)),
      max(Idx(0), ceil_div_signed<Idx>(x + g.pad_w - (g.kernel_w - 1) * g.dilation_w, g.stride_w)),
      min(g.out_w - 1, floor_div_signed<Idx>(x + g.pad_w, g.stride_w))};
}

// Note [Gather-form backward]: grad_in[y, x] = Σ of grad_out over the windows covering (y, x)
// whose recorded argmax is (y, x), in output order (the CPU's order).
template <typename T, typename Idx>
__global__ void max_pool_backward_kernel(Geom<Idx> g, T* __restrict grad_in,
                                         const T* __restrict grad_out,
                                         const int64_t* __restrict indices) {
  const Idx total = g.batch * g.channels * g.height * g.width;
  EMBER_GRID_LOOP(e, total) {
    const Pixel<Idx> px = pixel_of(g, e, g.height, g.width);
    const Idx x = px.x, y = px.y, step = pixel_step(g);
    const int64_t here = static_cast<int64_t>(y) * g.width + x;
    const Windows<Idx> win = windows_over(g, y, x);
    const Idx oy0 = win.oy0, oy1 = win.oy1, ox0 = win.ox0, ox1 = win.ox1;
    const Idx base = plane_base(g, px.n, px.c, g.out_h, g.out_w);
    Compute<T> sum = 0;
    for (Idx oy = oy0; oy <= oy1; ++oy)
      for (Idx ox = ox0; ox <= ox1; ++ox) {
        const Idx o = base + (oy * g.out_w + ox) * step;
        if (indices[o] == here) sum += cast<Compute<T>>(grad_out[o]);
      }
    grad_in[e] = cast<T>(sum);
  }
}

// Note [Max pooling's backward over tiling windows]
// When the windows tile the input (NCHW, kernel = stride, no padding or dilation, H and W whole
// multiples of the window: MaxPool2d(2) on even planes), every input element lies in exactly one
// window. A thread per output element then writes its whole window: the recorded argmax gets
// the gradient, the others zero. Its pixel is decoded once for kh·kw elements and grad_out and
// the indices are read once, where max_pool_backward_kernel decodes every input element and
// reads its window's index. The value is 0 + g, as the gather's sum gives it: the same bits.
template <typename T, typename Idx>
__global__ void max_pool_backward_tiles_kernel(Geom<Idx> g, T* __restrict grad_in,
                                               const T* __restrict grad_out,
                                               const int64_t* __restrict indices) {
  const Idx total = g.batch * g.channels * g.out_h * g.out_w;
  EMBER_GRID_LOOP(o, total) {
    const Idx ox = o % g.out_w, oy = (o / g.out_w) % g.out_h, plane = o / (g.out_w * g.out_h);
    const int64_t at = indices[o];
    const T v = cast<T>(Compute<T>(0) + cast<Compute<T>>(grad_out[o]));
    T* base = grad_in + plane * g.height * g.width;
    for (Idx dy = 0; dy < g.kernel_h; ++dy) {
      const Idx y = oy * g.kernel_h + dy;
      for (Idx dx = 0; dx < g.kernel_w; ++dx) {
        const Idx x = ox * g.kernel_w + dx;
        const Idx here = y * g.width + x;
        base[here] = static_cast<int64_t>(here) == at ? v : T(0);
      }
    }
  }
}

// Whether max_pool_backward_tiles_kernel applies (Note [Max pooling's backward over tiling
// windows]).
bool windows_tile(const Window2d& w) {
  return !w.channels_last && w.kernel_h == w.stride_h && w.kernel_w == w.stride_w && w.pad_h == 0 &&
         w.pad_w == 0 && w.dilation_h == 1 && w.dilation_w == 1 &&
         w.height == w.out_h * w.kernel_h && w.width == w.out_w * w.kernel_w;
}

// Note [Max pooling's backward in channel packs]
// Channels innermost (NHWC), max_pool_backward_kernel spends its time on index arithmetic (a
// thread decodes its pixel and its window range for one element): ResNet-50's stem pool took
// 1.45 ms of a 31 ms bf16 step on an H100, for ~0.3 GB of traffic. When C is a multiple of V
// (16 bytes of grad_in) and the pointers are aligned, a thread takes V adjacent channels of one
// pixel: the decoding is shared by V elements, grad_out and grad_in move 16 bytes a load and
// the indices 8·V. Each element adds the same windows in the same order: the same bits.
template <typename T, typename Idx, int V>
__global__ void max_pool_backward_pack_kernel(Geom<Idx> g, T* __restrict grad_in,
                                              const T* __restrict grad_out,
                                              const int64_t* __restrict indices) {
  const Idx cp = g.channels / V;
  const Idx total = g.batch * g.height * g.width * cp;
  EMBER_GRID_LOOP(q, total) {
    const Idx c0 = (q % cp) * V, pix = q / cp;
    const Idx x = pix % g.width, y = (pix / g.width) % g.height, n = pix / (g.width * g.height);
    const int64_t here = static_cast<int64_t>(y) * g.width + x;
    const Windows<Idx> win = windows_over(g, y, x);
    const Idx oy0 = win.oy0, oy1 = win.oy1, ox0 = win.ox0, ox1 = win.ox1;
    Compute<T> sum[V];
#pragma unroll
    for (int k = 0; k < V; ++k) sum[k] = 0;
    for (Idx oy = oy0; oy <= oy1; ++oy)
      for (Idx ox = ox0; ox <= ox1; ++ox) {
        const Idx o = ((n * g.out_h + oy) * g.out_w + ox) * g.channels + c0;
        struct alignas(16) Go {
          T v[V];
        };
        const Go go = *reinterpret_cast<const Go*>(grad_out + o);
#pragma unroll
        for (int k = 0; k < V; ++k)
          if (indices[o + k] == here) sum[k] += cast<Compute<T>>(go.v[k]);
      }
    struct alignas(16) Gi {
      T v[V];
    };
    Gi out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = cast<T>(sum[k]);
    *reinterpret_cast<Gi*>(grad_in + pix * g.channels + c0) = out;
  }
}

// ---- average pooling ----

// The window of output (oy, ox) clipped to the input, and its divisor (PyTorch's rules).
template <typename Idx>
struct AvgWindow {
  Idx h0, h1, w0, w1;
  Idx divisor;  // 0: the window has no input cell (output 0)
};

template <typename Idx>
__device__ inline AvgWindow<Idx> avg_window(const Geom<Idx>& g, Idx oy, Idx ox,
                                            bool count_include_pad) {
  Idx h0 = oy * g.stride_h - g.pad_h, w0 = ox * g.stride_w - g.pad_w;
  Idx h1 = min(h0 + g.kernel_h, g.height + g.pad_h);
  Idx w1 = min(w0 + g.kernel_w, g.width + g.pad_w);
  const Idx padded_size = (h1 - h0) * (w1 - w0);
  h0 = max(h0, Idx(0));
  w0 = max(w0, Idx(0));
  h1 = min(h1, g.height);
  w1 = min(w1, g.width);
  if (h0 >= h1 || w0 >= w1) return {h0, h1, w0, w1, 0};
  return {h0, h1, w0, w1, count_include_pad ? padded_size : (h1 - h0) * (w1 - w0)};
}

template <typename T, typename Idx>
__global__ void avg_pool_kernel(Geom<Idx> g, T* __restrict out, const T* __restrict in,
                                bool count_include_pad) {
  const Idx total = g.batch * g.channels * g.out_h * g.out_w;
  EMBER_GRID_LOOP(e, total) {
    const Pixel<Idx> px = pixel_of(g, e, g.out_h, g.out_w);
    const Idx ox = px.x, oy = px.y, step = pixel_step(g);
    const T* src = in + plane_base(g, px.n, px.c, g.height, g.width);
    const AvgWindow<Idx> a = avg_window(g, oy, ox, count_include_pad);
    using C = Compute<T>;
    if (a.divisor == 0) {
      out[e] = cast<T>(C(0));
      continue;
    }
    C sum = 0;
    for (Idx y = a.h0; y < a.h1; ++y)
      for (Idx x = a.w0; x < a.w1; ++x) sum += cast<C>(src[(y * g.width + x) * step]);
    out[e] = cast<T>(sum / static_cast<C>(a.divisor));
  }
}

// Note [Gather-form backward]: grad_in[y, x] = Σ grad_out[o] / divisor(o) over the windows o
// that contain (y, x), in output order.
template <typename T, typename Idx>
__global__ void avg_pool_backward_kernel(Geom<Idx> g, T* __restrict grad_in,
                                         const T* __restrict grad_out, bool count_include_pad) {
  const Idx total = g.batch * g.channels * g.height * g.width;
  EMBER_GRID_LOOP(e, total) {
    const Pixel<Idx> px = pixel_of(g, e, g.height, g.width);
    const Idx x = px.x, y = px.y, step = pixel_step(g);
    // Unclipped windows start at o·stride - pad and span kernel cells.
    const Idx oy0 = max(Idx(0), ceil_div_signed<Idx>(y + g.pad_h - g.kernel_h + 1, g.stride_h));
    const Idx oy1 = min(g.out_h - 1, floor_div_signed<Idx>(y + g.pad_h, g.stride_h));
    const Idx ox0 = max(Idx(0), ceil_div_signed<Idx>(x + g.pad_w - g.kernel_w + 1, g.stride_w));
    const Idx ox1 = min(g.out_w - 1, floor_div_signed<Idx>(x + g.pad_w, g.stride_w));
    using C = Compute<T>;
    const T* go = grad_out + plane_base(g, px.n, px.c, g.out_h, g.out_w);
    C sum = 0;
    for (Idx oy = oy0; oy <= oy1; ++oy)
      for (Idx ox = ox0; ox <= ox1; ++ox) {
        const AvgWindow<Idx> a = avg_window(g, oy, ox, count_include_pad);
        if (a.divisor == 0 || y < a.h0 || y >= a.h1 || x < a.w0 || x >= a.w1) continue;
        sum += cast<C>(go[(oy * g.out_w + ox) * step]) / static_cast<C>(a.divisor);
      }
    grad_in[e] = cast<T>(sum);
  }
}

#undef EMBER_GRID_LOOP

// ---- launch helpers ----

// Calls f(Idx{}) with int32_t when every index below `largest` fits, else int64_t. The
// margin covers the padded coordinates the kernels form (pad + dilated kernel extent).
template <typename F>
void dispatch_index_width(const Window2d& w, int64_t largest, F&& f) {
  const int64_t margin = 4 * (w.pad_h + w.pad_w + w.kernel_h * w.dilation_h +
                              w.kernel_w * w.dilation_w + w.stride_h + w.stride_w);
  if (largest + margin < std::numeric_limits<int32_t>::max() / 2)
    f(int32_t{});
  else
    f(int64_t{});
}

int64_t in_numel(const Window2d& w) { return w.batch * w.channels * w.height * w.width; }
int64_t out_numel(const Window2d& w) { return w.batch * w.channels * w.out_h * w.out_w; }

}  // namespace

void im2col(const Window2d& w, const View& columns, const View& in) {
  const int64_t total = columns.numel();
  if (total == 0) return;
  const int64_t threads = w.channels * w.batch * w.out_h * w.out_w;  // one per (c, column)
  const cudaStream_t s = stream(columns.device);
  dispatch_any_float(in.dtype, "im2col", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index_width(w, std::max(total, in_numel(w)), [&](auto idx_tag) {
      using Idx = decltype(idx_tag);
      im2col_kernel<T, Idx><<<grid_for(threads), kBlock, 0, s>>>(
          geom_of<Idx>(w), static_cast<T*>(columns.data), static_cast<const T*>(in.data));
      EMBER_CUDA_LAUNCH_CHECK();
    });
  });
}

void col2im(const Window2d& w, const View& grad_in, const View& columns) {
  const int64_t total = in_numel(w);
  if (total == 0) return;
  const cudaStream_t s = stream(grad_in.device);
  dispatch_any_float(grad_in.dtype, "col2im", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index_width(w, std::max(total, columns.numel()), [&](auto idx_tag) {
      using Idx = decltype(idx_tag);
      auto* out = static_cast<T*>(grad_in.data);
      const auto* col = static_cast<const T*>(columns.data);
      if (w.stride_h == 1 && w.stride_w == 1)
        col2im_kernel<T, Idx, true><<<grid_for(total), kBlock, 0, s>>>(geom_of<Idx>(w), out, col);
      else
        col2im_kernel<T, Idx, false><<<grid_for(total), kBlock, 0, s>>>(geom_of<Idx>(w), out, col);
      EMBER_CUDA_LAUNCH_CHECK();
    });
  });
}

void max_pool2d(const Window2d& w, const View& out, const View& indices, const View& in) {
  const int64_t total = out_numel(w);
  if (total == 0) return;
  const cudaStream_t s = stream(out.device);
  dispatch_any_float(in.dtype, "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index_width(w, std::max(total, in_numel(w)), [&](auto idx_tag) {
      using Idx = decltype(idx_tag);
      max_pool_kernel<T, Idx><<<grid_for(total), kBlock, 0, s>>>(
          geom_of<Idx>(w), static_cast<T*>(out.data), static_cast<int64_t*>(indices.data),
          static_cast<const T*>(in.data));
      EMBER_CUDA_LAUNCH_CHECK();
    });
  });
}

void max_pool2d_backward(const Window2d& w, const View& grad_in, const View& grad_out,
                         const View& indices) {
  const int64_t total = in_numel(w);
  if (total == 0) return;
  const cudaStream_t s = stream(grad_in.device);
  dispatch_any_float(grad_in.dtype, "max_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index_width(w, std::max(total, out_numel(w)), [&](auto idx_tag) {
      using Idx = decltype(idx_tag);
      // Note [Max pooling's backward in channel packs]
      constexpr int kV = static_cast<int>(16 / sizeof(T));
      const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
      if (w.channels_last && w.channels % kV == 0 && aligned(grad_in.data) &&
          aligned(grad_out.data) && aligned(indices.data)) {
        max_pool_backward_pack_kernel<T, Idx, kV><<<grid_for(total / kV), kBlock, 0, s>>>(
            geom_of<Idx>(w), static_cast<T*>(grad_in.data), static_cast<const T*>(grad_out.data),
            static_cast<const int64_t*>(indices.data));
        EMBER_CUDA_LAUNCH_CHECK();
        return;
      }
      if (windows_tile(w)) {  // Note [Max pooling's backward over tiling windows]
        max_pool_backward_tiles_kernel<T, Idx><<<grid_for(out_numel(w)), kBlock, 0, s>>>(
            geom_of<Idx>(w), static_cast<T*>(grad_in.data), static_cast<const T*>(grad_out.data),
            static_cast<const int64_t*>(indices.data));
        EMBER_CUDA_LAUNCH_CHECK();
        return;
      }
      max_pool_backward_kernel<T, Idx><<<grid_for(total), kBlock, 0, s>>>(
          geom_of<Idx>(w), static_cast<T*>(grad_in.data), static_cast<const T*>(grad_out.data),
          static_cast<const int64_t*>(indices.data));
      EMBER_CUDA_LAUNCH_CHECK();
    });
  });
}

void avg_pool2d(const Window2d& w, const View& out, const View& in, bool count_include_pad) {
  const int64_t total = out_numel(w);
  if (total == 0) return;
  const cudaStream_t s = stream(out.device);
  dispatch_any_float(in.dtype, "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index_width(w, std::max(total, in_numel(w)), [&](auto idx_tag) {
      using Idx = decltype(idx_tag);
      avg_pool_kernel<T, Idx>
          <<<grid_for(total), kBlock, 0, s>>>(geom_of<Idx>(w), static_cast<T*>(out.data),
                                              static_cast<const T*>(in.data), count_include_pad);
      EMBER_CUDA_LAUNCH_CHECK();
    });
  });
}

void avg_pool2d_backward(const Window2d& w, const View& grad_in, const View& grad_out,
                         bool count_include_pad) {
  const int64_t total = in_numel(w);
  if (total == 0) return;
  const cudaStream_t s = stream(grad_in.device);
  dispatch_any_float(grad_in.dtype, "avg_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index_width(w, std::max(total, out_numel(w)), [&](auto idx_tag) {
      using Idx = decltype(idx_tag);
      avg_pool_backward_kernel<T, Idx><<<grid_for(total), kBlock, 0, s>>>(
          geom_of<Idx>(w), static_cast<T*>(grad_in.data), static_cast<const T*>(grad_out.data),
          count_include_pad);
      EMBER_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace ember::cuda
