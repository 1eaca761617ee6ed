// src/cuda/softmax.cu — softmax / log_softmax and their backward on CUDA.
//
// Softmax works on a contiguous [O, D, I] tensor (D: the softmax dim). I == 1: a warp (D up
// to kWarpRow) or a 256-thread block per row; I > 1: one thread per (o, i) column. Sums in
// f64; the formulas and roundings are the CPU kernel's (src/cpu/softmax.cpp).
#include <algorithm>
#include <cmath>

#include "cuda/loops.cuh"
#include "kernels/reduce.hpp"

namespace ember::cuda {
namespace {

using kernels::max_nan;

constexpr int64_t kWarpRow = 1024;  // softmax rows up to this many elements: a warp each

// ---- softmax ----
struct Layout {
  int64_t outer = 1, size = 1, inner = 1;
};

Layout layout_of(const View& v, int dim, const char* op) {
  EMBER_ASSERT(dim >= 0 && dim < v.shape.size(), op, ": dim ", dim, " out of range");
  int64_t expected = 1;
  for (int d = v.shape.size() - 1; d >= 0; --d) {
    if (v.shape[d] == 1) continue;
    EMBER_ASSERT(v.strides[d] == expected, op, ": the CUDA kernel needs contiguous tensors");
    expected *= v.shape[d];
  }
  Layout l;
  for (int d = 0; d < dim; ++d) l.outer *= v.shape[d];
  l.size = v.shape[dim];
  for (int d = dim + 1; d < v.shape.size(); ++d) l.inner *= v.shape[d];
  return l;
}

template <typename T>
struct MaxNan {
  __device__ T operator()(T a, T b) const { return max_nan(a, b); }
};
struct Plus {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// A team of kTeam threads per row of length n (rows contiguous).
template <typename T, int kTeam>
__global__ void softmax_rows_kernel(T* out, const T* in, int64_t rows, int64_t n, bool log) {
  constexpr int kTeamsPerBlock = kBlock / kTeam;
  const int team = threadIdx.x / kTeam, t = threadIdx.x % kTeam;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTeamsPerBlock; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kTeamsPerBlock) {
    const int64_t row = base + team;
    const bool active = row < rows;  // inactive threads still join the block's barriers
    const T* x = in + (active ? row : 0) * n;
    T* o = out + (active ? row : 0) * n;
    T m = -static_cast<T>(INFINITY);
    if (active)
      for (int64_t i = t; i < n; i += kTeam) m = max_nan(m, x[i]);
    m = team_reduce<kTeam>(m, MaxNan<T>{});
    double s = 0;
    if (active) {
      for (int64_t i = t; i < n; i += kTeam) {
        const T e = exp(x[i] - m);
        if (!log) o[i] = e;
        s += static_cast<double>(e);
      }
    }
    s = team_reduce<kTeam>(s, Plus{});
    if (!active) continue;
    if (log) {
      // (x - m) - log s: x - m is exact, so large inputs keep f32 precision (Note [log_softmax
      // rounding], src/cpu/softmax.cpp).
      const T log_s = static_cast<T>(::log(s));
      for (int64_t i = t; i < n; i += kTeam) o[i] = (x[i] - m) - log_s;
    } else {
      const T factor = static_cast<T>(1.0 / s);
      for (int64_t i = t; i < n; i += kTeam) o[i] *= factor;
    }
  }
}

// One thread per (outer, inner) column; element d of the column at d·inner.
template <typename T>
__global__ void softmax_columns_kernel(T* out, const T* in, Layout l, bool log) {
  EMBER_CUDA_KERNEL_LOOP(col, l.outer * l.inner) {
    const int64_t base = col / l.inner * l.size * l.inner + col % l.inner;
    const T* x = in + base;
    T* o = out + base;
    T m = -static_cast<T>(INFINITY);
    for (int64_t d = 0; d < l.size; ++d) m = max_nan(m, x[d * l.inner]);
    double s = 0;
    for (int64_t d = 0; d < l.size; ++d) {
      const T e = exp(x[d * l.inner] - m);
      if (!log) o[d * l.inner] = e;
      s += static_cast<double>(e);
    }
    if (log) {
      const T log_s = static_cast<T>(::log(s));  // Note [log_softmax rounding]
      for (int64_t d = 0; d < l.size; ++d) o[d * l.inner] = (x[d * l.inner] - m) - log_s;
    } else {
      const T factor = static_cast<T>(1.0 / s);
      for (int64_t d = 0; d < l.size; ++d) o[d * l.inner] *= factor;
    }
  }
}

template <typename T, int kTeam>
__global__ void softmax_grad_rows_kernel(T* gi, const T* g, const T* y, int64_t rows, int64_t n,
                                         bool log) {
  constexpr int kTeamsPerBlock = kBlock / kTeam;
  const int team = threadIdx.x / kTeam, t = threadIdx.x % kTeam;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTeamsPerBlock; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kTeamsPerBlock) {
    const int64_t row = base + team;
    const bool active = row < rows;
    const int64_t at = (active ? row : 0) * n;
    double s = 0;
    if (active)
      for (int64_t i = t; i < n; i += kTeam)
        s += log ? static_cast<double>(g[at + i])
                 : static_cast<double>(g[at + i]) * static_cast<double>(y[at + i]);
    s = team_reduce<kTeam>(s, Plus{});
    if (!active) continue;
    const T a = static_cast<T>(s);
    for (int64_t i = t; i < n; i += kTeam)
      gi[at + i] = log ? g[at + i] - exp(y[at + i]) * a : y[at + i] * (g[at + i] - a);
  }
}

template <typename T>
__global__ void softmax_grad_columns_kernel(T* gi, const T* g, const T* y, Layout l, bool log) {
  EMBER_CUDA_KERNEL_LOOP(col, l.outer * l.inner) {
    const int64_t base = col / l.inner * l.size * l.inner + col % l.inner;
    double s = 0;
    for (int64_t d = 0; d < l.size; ++d) {
      const int64_t at = base + d * l.inner;
      s += log ? static_cast<double>(g[at]) : static_cast<double>(g[at]) * y[at];
    }
    const T a = static_cast<T>(s);
    for (int64_t d = 0; d < l.size; ++d) {
      const int64_t at = base + d * l.inner;
      gi[at] = log ? g[at] - exp(y[at]) * a : y[at] * (g[at] - a);
    }
  }
}

}  // namespace

void softmax(const View& out, const View& in, int dim, bool log) {
  const Layout l = layout_of(in, dim, "softmax");
  layout_of(out, dim, "softmax");
  if (l.size == 0 || l.outer * l.inner == 0) return;
  cudaStream_t st = stream_for(out);
  dispatch_float(in.dtype, "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in.data);
    T* o = static_cast<T*>(out.data);
    if (l.inner == 1) {
      const int64_t rows = l.outer;
      if (l.size <= kWarpRow)
        softmax_rows_kernel<T, kWarp>
            <<<team_grid(rows, kWarp), kBlock, 0, st>>>(o, x, rows, l.size, log);
      else
        softmax_rows_kernel<T, kBlock>
            <<<team_grid(rows, kBlock), kBlock, 0, st>>>(o, x, rows, l.size, log);
    } else {
      softmax_columns_kernel<T><<<grid_for(l.outer * l.inner), kBlock, 0, st>>>(o, x, l, log);
    }
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void softmax_backward(const View& grad_in, const View& grad_out, const View& out, int dim,
                      bool log) {
  const Layout l = layout_of(out, dim, "softmax_backward");
  layout_of(grad_in, dim, "softmax_backward");
  layout_of(grad_out, dim, "softmax_backward");
  if (l.size == 0 || l.outer * l.inner == 0) return;
  cudaStream_t st = stream_for(grad_in);
  dispatch_float(out.dtype, "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* gi = static_cast<T*>(grad_in.data);
    const T* g = static_cast<const T*>(grad_out.data);
    const T* y = static_cast<const T*>(out.data);
    if (l.inner == 1) {
      const int64_t rows = l.outer;
      if (l.size <= kWarpRow)
        softmax_grad_rows_kernel<T, kWarp>
            <<<team_grid(rows, kWarp), kBlock, 0, st>>>(gi, g, y, rows, l.size, log);
      else
        softmax_grad_rows_kernel<T, kBlock>
            <<<team_grid(rows, kBlock), kBlock, 0, st>>>(gi, g, y, rows, l.size, log);
    } else {
      softmax_grad_columns_kernel<T>
          <<<grid_for(l.outer * l.inner), kBlock, 0, st>>>(gi, g, y, l, log);
    }
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace ember::cuda
