// src/cpu/conv.cpp — CPU kernels of convolution (im2col, col2im) and 2-D pooling.
//
// Shape letters (Window2d): N batch, C channels, H×W input plane, oh×ow output plane,
// L = oh·ow, K = kh·kw, NL = N·L. Every operand is contiguous.
//   im2col   in[N, C, H, W]          -> columns[C·K, NL]   (row r = (c, i, j), column n·L + p)
//   col2im   columns[C·K, NL]        -> grad_in[N, C, H, W] (sums overlapping patches)
//   pools    in[N, C, H, W]          -> out[N, C, oh, ow]
// The columns layout puts a whole batch side by side, so a convolution is one GEMM
// W[O, C·K] · columns[C·K, NL] (per group: a block of rows), which OpenBLAS threads well.
//
// Threading: im2col splits over (row, image) pairs, each writing one contiguous run of L;
// col2im and the pools split over (n, c) planes, so every task writes memory no other task
// touches (no atomics, deterministic sums). No BLAS is called here.
//
// Note [Valid output range]
// For kernel offset `off` = j·dilation - pad along a row, output column ox reads input column
// ox·stride + off, which is inside [0, W) exactly for ox in [lo, hi) below; everything outside
// is padding (zero for im2col, skipped by col2im). With stride 1 the inside run is a copy.
#include <cmath>
#include <limits>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"

namespace ember::cpu {

using backend::Window2d;

namespace {

struct Range {
  int64_t lo, hi;
};

// Note [Valid output range]: output positions o in [0, out) with 0 <= o·stride + off < size.
inline Range valid_range(int64_t off, int64_t stride, int64_t size, int64_t out) {
  int64_t lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  int64_t hi = size - 1 - off < 0 ? 0 : (size - 1 - off) / stride + 1;
  lo = std::min(lo, out);
  hi = std::min(hi, out);
  if (hi < lo) hi = lo;
  return {lo, hi};
}

// Grain in tasks for a parallel_for whose tasks each touch `work` elements.
inline int64_t grain_for(int64_t work) {
  return std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(work, 1));
}

// One (row, image) task of im2col: the L = oh·ow entries of patch row r = (c, ki, kj) for
// image n, output row by output row: zeros, the input run inside [lo, hi) (Note [Valid output
// range]), zeros. Output rows of small feature maps are short (7 to 28 elements), so these
// are plain loops: GCC would otherwise turn each into a memcpy / memset call that costs more
// than the copy itself (hence the attribute, which keeps the loops inline and vectorised).
template <typename T>
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void im2col_task(
    const Window2d& w, T* __restrict dst, const T* __restrict src, int64_t ki, int64_t kj) {
  const int64_t x_off = kj * w.dilation_w - w.pad_w, ow = w.out_w;
  const Range xs = valid_range(x_off, w.stride_w, w.width, ow);
  for (int64_t oy = 0; oy < w.out_h; ++oy) {
    T* __restrict d = dst + oy * ow;
    const int64_t iy = oy * w.stride_h - w.pad_h + ki * w.dilation_h;
    if (iy < 0 || iy >= w.height) {
      for (int64_t i = 0; i < ow; ++i) d[i] = T(0);
      continue;
    }
    const T* __restrict s = src + iy * w.width + x_off;
    for (int64_t i = 0; i < xs.lo; ++i) d[i] = T(0);
    if (w.stride_w == 1) {
      for (int64_t i = xs.lo; i < xs.hi; ++i) d[i] = s[i];
    } else {
      for (int64_t i = xs.lo; i < xs.hi; ++i) d[i] = s[i * w.stride_w];
    }
    for (int64_t i = xs.hi; i < ow; ++i) d[i] = T(0);
  }
}

template <typename T>
void im2col_typed(const Window2d& w, T* __restrict col, const T* __restrict in) {
  const int64_t L = w.out_h * w.out_w, NL = w.batch * L, K = w.kernel_h * w.kernel_w;
  const int64_t rows = w.channels * K, plane = w.height * w.width;
  parallel_for(rows * w.batch, grain_for(L), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r = t / w.batch, n = t % w.batch;
      const int64_t c = r / K, ki = (r % K) / w.kernel_w, kj = r % w.kernel_w;
      im2col_task(w, col + r * NL + n * L, in + (n * w.channels + c) * plane, ki, kj);
    }
  });
}

template <typename T>
EMBER_VECTORIZE void add_run(T* __restrict dst, const T* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

template <typename T>
void col2im_typed(const Window2d& w, T* __restrict grad_in, const T* __restrict col) {
  const int64_t L = w.out_h * w.out_w, NL = w.batch * L, K = w.kernel_h * w.kernel_w;
  const int64_t plane = w.height * w.width;
  parallel_for(w.batch * w.channels, grain_for(plane * K), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t n = p / w.channels, c = p % w.channels;
      T* dst = grad_in + p * plane;
      std::fill(dst, dst + plane, T(0));
      for (int64_t ki = 0; ki < w.kernel_h; ++ki) {
        for (int64_t kj = 0; kj < w.kernel_w; ++kj) {
          const T* src = col + (c * K + ki * w.kernel_w + kj) * NL + n * L;
          const int64_t x_off = kj * w.dilation_w - w.pad_w;
          const Range xs = valid_range(x_off, w.stride_w, w.width, w.out_w);
          const Range ys = valid_range(ki * w.dilation_h - w.pad_h, w.stride_h, w.height, w.out_h);
          for (int64_t oy = ys.lo; oy < ys.hi; ++oy) {
            const int64_t iy = oy * w.stride_h - w.pad_h + ki * w.dilation_h;
            T* drow = dst + iy * w.width + x_off;
            const T* srow = src + oy * w.out_w;
            if (w.stride_w == 1) {
              add_run(drow + xs.lo, srow + xs.lo, xs.hi - xs.lo);
            } else {
              for (int64_t ox = xs.lo; ox < xs.hi; ++ox) drow[ox * w.stride_w] += srow[ox];
            }
          }
        }
      }
    }
  });
}

// ---- max pooling ----

// PyTorch's rule for one candidate v at position `idx`: a larger value or a NaN takes the place.
// Bitwise | and selects, not || and branches: this form vectorises.
template <typename T>
inline __attribute__((always_inline)) void take_max(T v, T& best, int64_t& at, int64_t idx) {
  const bool take = (v > best) | (v != v);
  best = take ? v : best;
  at = take ? idx : at;
}

// The common 2×2, stride 2, no padding, no dilation window (every CNN's MaxPool2d(2)).
// Branch-free, so random data costs no mispredictions and the loop vectorises; the scan
// order and rule are PyTorch's (a larger value or a NaN takes the place).
template <typename T>
EMBER_VECTORIZE void max_pool_2x2_row(const T* __restrict r0, const T* __restrict r1,
                                      T* __restrict out, int64_t* __restrict idx, int64_t ow,
                                      int64_t base, int64_t width) {
  for (int64_t ox = 0; ox < ow; ++ox) {
    T best = r0[2 * ox];
    int64_t off = 0;  // of the winner from r0[2·ox]
    take_max(r0[2 * ox + 1], best, off, 1);
    take_max(r1[2 * ox], best, off, width);
    take_max(r1[2 * ox + 1], best, off, width + 1);
    out[ox] = best;
    idx[ox] = base + 2 * ox + off;
  }
}

template <typename T>
void max_pool_2x2(const Window2d& w, const T* src, T* out, int64_t* idx) {
  for (int64_t oy = 0; oy < w.out_h; ++oy) {
    const T* r0 = src + 2 * oy * w.width;
    max_pool_2x2_row(r0, r0 + w.width, out + oy * w.out_w, idx + oy * w.out_w, w.out_w,
                     2 * oy * w.width, w.width);
  }
}

// One window tap (ki, kj) over an output row: every output ox whose tap lies in the input
// compares src_row[ox·stride + x_off] with its best so far (the 2×2 kernel's selects).
template <typename T>
EMBER_VECTORIZE void max_pool_tap_row(const T* __restrict src_row, T* __restrict best,
                                      int64_t* __restrict at, int64_t lo, int64_t hi,
                                      int64_t stride, int64_t x_off, int64_t row_base) {
  for (int64_t ox = lo; ox < hi; ++ox) {
    const int64_t x = ox * stride + x_off;
    const T v = src_row[x];
    const bool take = (v > best[ox]) | (v != v);  // take_max's rule, written out: through
    best[ox] = take ? v : best[ox];               // references this loop stayed scalar
    at[ox] = take ? row_base + x : at[ox];
  }
}

// Any window. Each output row takes its taps in PyTorch's scan order (window rows, then
// columns), all outputs of the row at once, so every output sees its candidates in the order
// the one-output-at-a-time scan gives them and keeps the same value and index (the first
// largest, or the last NaN); an output no candidate beats keeps -inf at its window's first
// input cell. A row at a time, branch-free: ResNet's 3×3/2 pool ran at ~100 cycles an output
// one window at a time.
template <typename T>
void max_pool_plane(const Window2d& w, const T* src, T* out, int64_t* idx) {
  for (int64_t oy = 0; oy < w.out_h; ++oy) {
    T* best = out + oy * w.out_w;
    int64_t* at = idx + oy * w.out_w;
    int64_t h0 = oy * w.stride_h - w.pad_h;
    const int64_t h1 = std::min(h0 + (w.kernel_h - 1) * w.dilation_h + 1, w.height);
    while (h0 < 0) h0 += w.dilation_h;
    for (int64_t ox = 0; ox < w.out_w; ++ox) {
      int64_t w0 = ox * w.stride_w - w.pad_w;
      while (w0 < 0) w0 += w.dilation_w;
      best[ox] = -std::numeric_limits<T>::infinity();
      at[ox] = h0 * w.width + w0;
    }
    for (int64_t y = h0; y < h1; y += w.dilation_h) {
      for (int64_t kj = 0; kj < w.kernel_w; ++kj) {
        const int64_t x_off = kj * w.dilation_w - w.pad_w;
        const Range xs = valid_range(x_off, w.stride_w, w.width, w.out_w);
        max_pool_tap_row(src + y * w.width, best, at, xs.lo, xs.hi, w.stride_w, x_off, y * w.width);
      }
    }
  }
}

// ---- pools over NHWC (Window2d::channels_last) ----
// The same windows, ties and summation orders as the plane kernels, visited a pixel at a time
// with the channels innermost, so the results are the NCHW kernels' bit for bit.

// Calls fn(n, oy, ox, o) for every output pixel of an NHWC pool, o its first element's offset
// ((n·out_h + oy)·out_w + ox)·C; the (n, oy) rows are spread over the pool's threads.
template <typename Fn>
void for_each_output_pixel(const Window2d& w, Fn&& fn) {
  parallel_for(w.batch * w.out_h, grain_for(w.out_w * w.channels * w.kernel_h * w.kernel_w),
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r) {
                   const int64_t n = r / w.out_h, oy = r % w.out_h;
                   for (int64_t ox = 0; ox < w.out_w; ++ox)
                     fn(n, oy, ox, ((n * w.out_h + oy) * w.out_w + ox) * w.channels);
                 }
               });
}

// One window tap over a pixel's c channels: each channel compares src[j] with its best so far
// and takes the tap's cell `here` with it (take_max); apart and vectorised,
// as the plane kernel's rows are (in the pixel loop's lambda the compiler kept it scalar: the
// 3×3/2 pool of ResNet-18's channels_last stem took 13.8 ms a step against 4.6 for NCHW).
template <typename T>
EMBER_VECTORIZE void max_pool_tap_channels(const T* __restrict src, T* __restrict best,
                                           int64_t* __restrict at, int64_t c, int64_t here) {
  for (int64_t j = 0; j < c; ++j) take_max(src[j], best[j], at[j], here);
}

template <typename T>
void max_pool2d_nhwc(const Window2d& w, T* out, int64_t* indices, const T* in) {
  const int64_t c = w.channels;
  for_each_output_pixel(w, [&](int64_t n, int64_t oy, int64_t ox, int64_t o) {
    T* best = out + o;
    int64_t* at = indices + o;
    int64_t h0 = oy * w.stride_h - w.pad_h;
    const int64_t h1 = std::min(h0 + (w.kernel_h - 1) * w.dilation_h + 1, w.height);
    while (h0 < 0) h0 += w.dilation_h;
    int64_t w0 = ox * w.stride_w - w.pad_w;
    const int64_t w1 = std::min(w0 + (w.kernel_w - 1) * w.dilation_w + 1, w.width);
    while (w0 < 0) w0 += w.dilation_w;
    for (int64_t j = 0; j < c; ++j) {
      best[j] = -std::numeric_limits<T>::infinity();
      at[j] = h0 * w.width + w0;
    }
    for (int64_t y = h0; y < h1; y += w.dilation_h)
      for (int64_t x = w0; x < w1; x += w.dilation_w)
        max_pool_tap_channels(in + ((n * w.height + y) * w.width + x) * c, best, at, c,
                              y * w.width + x);
  });
}

template <typename T>
void max_pool2d_backward_nhwc(const Window2d& w, T* grad_in, const T* grad_out,
                              const int64_t* indices) {
  const int64_t c = w.channels, plane = w.height * w.width, out_plane = w.out_h * w.out_w;
  parallel_for(w.batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      T* dst = grad_in + n * plane * c;
      std::fill(dst, dst + plane * c, T(0));
      for (int64_t o = 0; o < out_plane; ++o) {
        const T* g = grad_out + (n * out_plane + o) * c;
        const int64_t* idx = indices + (n * out_plane + o) * c;
        for (int64_t j = 0; j < c; ++j)
          if (idx[j] >= 0 && idx[j] < plane) dst[idx[j] * c + j] += g[j];
      }
    }
  });
}

template <typename T>
void max_pool2d_typed(const Window2d& w, T* out, int64_t* indices, const T* in) {
  if (w.channels_last) return max_pool2d_nhwc(w, out, indices, in);
  const int64_t plane = w.height * w.width, out_plane = w.out_h * w.out_w;
  const bool is_2x2 = w.kernel_h == 2 && w.kernel_w == 2 && w.stride_h == 2 && w.stride_w == 2 &&
                      w.pad_h == 0 && w.pad_w == 0 && w.dilation_h == 1 && w.dilation_w == 1 &&
                      2 * w.out_h <= w.height && 2 * w.out_w <= w.width;
  parallel_for(w.batch * w.channels, grain_for(plane), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      if (is_2x2) {
        max_pool_2x2(w, in + p * plane, out + p * out_plane, indices + p * out_plane);
      } else {
        max_pool_plane(w, in + p * plane, out + p * out_plane, indices + p * out_plane);
      }
    }
  });
}

template <typename T>
void max_pool2d_backward_typed(const Window2d& w, T* grad_in, const T* grad_out,
                               const int64_t* indices) {
  if (w.channels_last) return max_pool2d_backward_nhwc(w, grad_in, grad_out, indices);
  const int64_t plane = w.height * w.width, out_plane = w.out_h * w.out_w;
  parallel_for(w.batch * w.channels, grain_for(plane), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      T* dst = grad_in + p * plane;
      std::fill(dst, dst + plane, T(0));
      const T* g = grad_out + p * out_plane;
      const int64_t* idx = indices + p * out_plane;
      for (int64_t o = 0; o < out_plane; ++o) {
        const int64_t at = idx[o];
        if (at >= 0 && at < plane) dst[at] += g[o];  // a window with no input cell has no argmax
      }
    }
  });
}

// ---- average pooling ----

// The window of output (oy, ox) clipped to the input, and its divisor (PyTorch's rules).
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  int64_t divisor;  // 0: the window has no input cell (output 0)
};

inline AvgWindow avg_window(const Window2d& w, int64_t oy, int64_t ox, bool count_include_pad) {
  int64_t h0 = oy * w.stride_h - w.pad_h, w0 = ox * w.stride_w - w.pad_w;
  int64_t h1 = std::min(h0 + w.kernel_h, w.height + w.pad_h);
  int64_t w1 = std::min(w0 + w.kernel_w, w.width + w.pad_w);
  const int64_t padded_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, w.height);
  w1 = std::min(w1, w.width);
  if (h0 >= h1 || w0 >= w1) return {h0, h1, w0, w1, 0};
  return {h0, h1, w0, w1, count_include_pad ? padded_size : (h1 - h0) * (w1 - w0)};
}

template <typename T>
void avg_pool2d_nhwc(const Window2d& w, T* out, const T* in, bool count_include_pad) {
  const int64_t c = w.channels;
  for_each_output_pixel(w, [&](int64_t n, int64_t oy, int64_t ox, int64_t o) {
    T* dst = out + o;
    std::fill(dst, dst + c, T(0));
    const AvgWindow a = avg_window(w, oy, ox, count_include_pad);
    if (a.divisor == 0) return;
    for (int64_t y = a.h0; y < a.h1; ++y)
      for (int64_t x = a.w0; x < a.w1; ++x) {
        const T* src = in + ((n * w.height + y) * w.width + x) * c;
        for (int64_t j = 0; j < c; ++j) dst[j] += src[j];
      }
    for (int64_t j = 0; j < c; ++j) dst[j] = dst[j] / static_cast<T>(a.divisor);
  });
}

template <typename T>
void avg_pool2d_backward_nhwc(const Window2d& w, T* grad_in, const T* grad_out,
                              bool count_include_pad) {
  const int64_t c = w.channels, plane = w.height * w.width;
  parallel_for(w.batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> share(static_cast<size_t>(c));
    for (int64_t n = begin; n < end; ++n) {
      T* dst = grad_in + n * plane * c;
      std::fill(dst, dst + plane * c, T(0));
      for (int64_t oy = 0; oy < w.out_h; ++oy)
        for (int64_t ox = 0; ox < w.out_w; ++ox) {
          const AvgWindow a = avg_window(w, oy, ox, count_include_pad);
          if (a.divisor == 0) continue;
          const T* g = grad_out + ((n * w.out_h + oy) * w.out_w + ox) * c;
          for (int64_t j = 0; j < c; ++j) share[j] = g[j] / static_cast<T>(a.divisor);
          for (int64_t y = a.h0; y < a.h1; ++y)
            for (int64_t x = a.w0; x < a.w1; ++x) {
              T* d = dst + (y * w.width + x) * c;
              for (int64_t j = 0; j < c; ++j) d[j] += share[j];
            }
        }
    }
  });
}

template <typename T>
void avg_pool2d_typed(const Window2d& w, T* out, const T* in, bool count_include_pad) {
  if (w.channels_last) return avg_pool2d_nhwc(w, out, in, count_include_pad);
  const int64_t plane = w.height * w.width, out_plane = w.out_h * w.out_w;
  parallel_for(w.batch * w.channels, grain_for(plane), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const T* src = in + p * plane;
      T* dst = out + p * out_plane;
      for (int64_t oy = 0; oy < w.out_h; ++oy) {
        for (int64_t ox = 0; ox < w.out_w; ++ox) {
          const AvgWindow a = avg_window(w, oy, ox, count_include_pad);
          if (a.divisor == 0) {
            dst[oy * w.out_w + ox] = T(0);
            continue;
          }
          T sum = T(0);
          for (int64_t y = a.h0; y < a.h1; ++y)
            for (int64_t x = a.w0; x < a.w1; ++x) sum += src[y * w.width + x];
          dst[oy * w.out_w + ox] = sum / static_cast<T>(a.divisor);
        }
      }
    }
  });
}

template <typename T>
void avg_pool2d_backward_typed(const Window2d& w, T* grad_in, const T* grad_out,
                               bool count_include_pad) {
  if (w.channels_last) return avg_pool2d_backward_nhwc(w, grad_in, grad_out, count_include_pad);
  const int64_t plane = w.height * w.width, out_plane = w.out_h * w.out_w;
  parallel_for(w.batch * w.channels, grain_for(plane), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      T* dst = grad_in + p * plane;
      std::fill(dst, dst + plane, T(0));
      const T* g = grad_out + p * out_plane;
      for (int64_t oy = 0; oy < w.out_h; ++oy) {
        for (int64_t ox = 0; ox < w.out_w; ++ox) {
          const AvgWindow a = avg_window(w, oy, ox, count_include_pad);
          if (a.divisor == 0) continue;
          const T share = g[oy * w.out_w + ox] / static_cast<T>(a.divisor);
          for (int64_t y = a.h0; y < a.h1; ++y)
            for (int64_t x = a.w0; x < a.w1; ++x) dst[y * w.width + x] += share;
        }
      }
    }
  });
}

int64_t in_numel(const Window2d& w) { return w.batch * w.channels * w.height * w.width; }
int64_t out_numel(const Window2d& w) { return w.batch * w.channels * w.out_h * w.out_w; }

}  // namespace

// f16/bf16 run the f32 kernels on f32 copies (with_compute_type: Note [16-bit floats on the
// CPU]), so sums over windows accumulate in f32 and are rounded once.
void im2col(const Window2d& w, const View& columns, const View& in) {
  dispatch_any_float(in.dtype, "im2col", [&](auto tag) {
    with_compute_type<typename decltype(tag)::type>(
        columns.data, columns.numel(), in.data, in_numel(w),
        [&](auto* col, const auto* x) { im2col_typed(w, col, x); });
  });
}

void col2im(const Window2d& w, const View& grad_in, const View& columns) {
  dispatch_any_float(grad_in.dtype, "col2im", [&](auto tag) {
    with_compute_type<typename decltype(tag)::type>(
        grad_in.data, in_numel(w), columns.data, columns.numel(),
        [&](auto* gi, const auto* col) { col2im_typed(w, gi, col); });
  });
}

void max_pool2d(const Window2d& w, const View& out, const View& indices, const View& in) {
  dispatch_any_float(in.dtype, "max_pool2d", [&](auto tag) {
    with_compute_type<typename decltype(tag)::type>(
        out.data, out_numel(w), in.data, in_numel(w), [&](auto* o, const auto* x) {
          max_pool2d_typed(w, o, static_cast<int64_t*>(indices.data), x);
        });
  });
}

void max_pool2d_backward(const Window2d& w, const View& grad_in, const View& grad_out,
                         const View& indices) {
  dispatch_any_float(grad_in.dtype, "max_pool2d_backward", [&](auto tag) {
    with_compute_type<typename decltype(tag)::type>(
        grad_in.data, in_numel(w), grad_out.data, out_numel(w), [&](auto* gi, const auto* g) {
          max_pool2d_backward_typed(w, gi, g, static_cast<const int64_t*>(indices.data));
        });
  });
}

void avg_pool2d(const Window2d& w, const View& out, const View& in, bool count_include_pad) {
  dispatch_any_float(in.dtype, "avg_pool2d", [&](auto tag) {
    with_compute_type<typename decltype(tag)::type>(
        out.data, out_numel(w), in.data, in_numel(w),
        [&](auto* o, const auto* x) { avg_pool2d_typed(w, o, x, count_include_pad); });
  });
}

void avg_pool2d_backward(const Window2d& w, const View& grad_in, const View& grad_out,
                         bool count_include_pad) {
  dispatch_any_float(grad_in.dtype, "avg_pool2d_backward", [&](auto tag) {
    with_compute_type<typename decltype(tag)::type>(
        grad_in.data, in_numel(w), grad_out.data, out_numel(w),
        [&](auto* gi, const auto* g) { avg_pool2d_backward_typed(w, gi, g, count_include_pad); });
  });
}

}  // namespace ember::cpu
