// src/cuda/softmax.cu — softmax / log_softmax and their backward on CUDA.
//
// Softmax works on a contiguous [O, D, I] tensor (D: the softmax dim; src/kernels/softmax.hpp
// holds the layout and the formulas). I == 1: a warp (D up to kWarpRow) or a 256-thread block
// per row; I > 1: one thread per (o, i) column. Sums in f64; the formulas and roundings are the
// CPU kernel's (src/cpu/softmax.cpp). Each kernel computes in C = Compute<T>: f16/bf16 are
// loaded to f32 with cast<C> and rounded once on store (Note [16-bit softmax]); the forward
// writes its output once (exp is recomputed in the scaling pass rather than stored unscaled and
// read back, which would round a 16-bit output twice).
#include <algorithm>
#include <cmath>

#include "cuda/loops.cuh"
#include "kernels/reduce.hpp"
#include "kernels/softmax.hpp"

namespace ember::cuda {
namespace {

using kernels::max_nan;

constexpr int64_t kWarpRow = 1024;  // softmax rows up to this many elements: a warp each

// ---- softmax ----
using Layout = kernels::SoftmaxLayout;

Layout layout_of(const View& v, int dim, const char* op) {
  EMBER_ASSERT(dim >= 0 && dim < v.shape.size(), op, ": dim ", dim, " out of range");
  int64_t expected = 1;
  for (int d = v.shape.size() - 1; d >= 0; --d) {
    if (v.shape[d] == 1) continue;
    EMBER_ASSERT(v.strides[d] == expected, op, ": the CUDA kernel needs contiguous tensors");
    expected *= v.shape[d];
  }
  return kernels::layout_of(v.shape, dim);
}

template <typename C>
struct MaxNan {
  __device__ C operator()(C a, C b) const { return max_nan(a, b); }
};
struct Plus {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// A team of kTeam threads per row of length n (rows contiguous).
template <typename T, int kTeam>
__global__ void softmax_rows_kernel(T* out, const T* in, int64_t rows, int64_t n, bool log) {
  using C = Compute<T>;
  constexpr int kTeamsPerBlock = kBlock / kTeam;
  const int team = threadIdx.x / kTeam, t = threadIdx.x % kTeam;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTeamsPerBlock; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kTeamsPerBlock) {
    const int64_t row = base + team;
    const bool active = row < rows;  // inactive threads still join the block's barriers
    const T* x = in + (active ? row : 0) * n;
    T* o = out + (active ? row : 0) * n;
    C m = -static_cast<C>(INFINITY);
    if (active)
      for (int64_t i = t; i < n; i += kTeam) m = max_nan(m, cast<C>(x[i]));
    m = team_reduce<kTeam>(m, MaxNan<C>{});
    double s = 0;
    if (active)
      for (int64_t i = t; i < n; i += kTeam) s += static_cast<double>(exp(cast<C>(x[i]) - m));
    s = team_reduce<kTeam>(s, Plus{});
    if (!active) continue;
    if (log) {
      // x - m is exact, so large inputs keep f32 precision (Note [log_softmax rounding]).
      const C log_s = static_cast<C>(::log(s));
      for (int64_t i = t; i < n; i += kTeam)
        o[i] = cast<T>(kernels::log_softmax_value(cast<C>(x[i]), m, log_s));
    } else {
      const C factor = static_cast<C>(1.0 / s);
      for (int64_t i = t; i < n; i += kTeam) o[i] = cast<T>(exp(cast<C>(x[i]) - m) * factor);
    }
  }
}

// One thread per (outer, inner) column; element d of the column at d·inner.
template <typename T>
__global__ void softmax_columns_kernel(T* out, const T* in, Layout l, bool log) {
  using C = Compute<T>;
  EMBER_CUDA_KERNEL_LOOP(col, l.outer * l.inner) {
    const int64_t base = col / l.inner * l.size * l.inner + col % l.inner;
    const T* x = in + base;
    T* o = out + base;
    C m = -static_cast<C>(INFINITY);
    for (int64_t d = 0; d < l.size; ++d) m = max_nan(m, cast<C>(x[d * l.inner]));
    double s = 0;
    for (int64_t d = 0; d < l.size; ++d) s += static_cast<double>(exp(cast<C>(x[d * l.inner]) - m));
    if (log) {
      const C log_s = static_cast<C>(::log(s));  // Note [log_softmax rounding]
      for (int64_t d = 0; d < l.size; ++d)
        o[d * l.inner] = cast<T>(kernels::log_softmax_value(cast<C>(x[d * l.inner]), m, log_s));
    } else {
      const C factor = static_cast<C>(1.0 / s);
      for (int64_t d = 0; d < l.size; ++d)
        o[d * l.inner] = cast<T>(exp(cast<C>(x[d * l.inner]) - m) * factor);
    }
  }
}

// The input gradient of one element from its grad g, output y and the slice's sum a.
template <typename T, typename C = Compute<T>>
__device__ __forceinline__ T softmax_grad_at(T g, T y, C a, bool log) {
  const C gc = cast<C>(g), yc = cast<C>(y);
  return cast<T>(log ? kernels::log_softmax_grad_value(gc, exp(yc), a)
                     : kernels::softmax_grad_value(gc, yc, a));
}

// Σ g (log) or Σ g·y of one element, in f64.
template <typename T>
__device__ __forceinline__ double softmax_grad_term(T g, T y, bool log) {
  const double gd = static_cast<double>(cast<Compute<T>>(g));
  return log ? gd : gd * static_cast<double>(cast<Compute<T>>(y));
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
      for (int64_t i = t; i < n; i += kTeam) s += softmax_grad_term(g[at + i], y[at + i], log);
    s = team_reduce<kTeam>(s, Plus{});
    if (!active) continue;
    const Compute<T> a = static_cast<Compute<T>>(s);
    for (int64_t i = t; i < n; i += kTeam)
      gi[at + i] = softmax_grad_at(g[at + i], y[at + i], a, log);
  }
}

template <typename T>
__global__ void softmax_grad_columns_kernel(T* gi, const T* g, const T* y, Layout l, bool log) {
  EMBER_CUDA_KERNEL_LOOP(col, l.outer * l.inner) {
    const int64_t base = col / l.inner * l.size * l.inner + col % l.inner;
    double s = 0;
    for (int64_t d = 0; d < l.size; ++d) {
      const int64_t at = base + d * l.inner;
      s += softmax_grad_term(g[at], y[at], log);
    }
    const Compute<T> a = static_cast<Compute<T>>(s);
    for (int64_t d = 0; d < l.size; ++d) {
      const int64_t at = base + d * l.inner;
      gi[at] = softmax_grad_at(g[at], y[at], a, log);
    }
  }
}

}  // namespace

void softmax(const View& out, const View& in, int dim, bool log) {
  const Layout l = layout_of(in, dim, "softmax");
  layout_of(out, dim, "softmax");
  if (l.size == 0 || l.outer * l.inner == 0) return;
  cudaStream_t st = stream_for(out);
  dispatch_any_float(in.dtype, "softmax", [&](auto tag) {
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
  dispatch_any_float(out.dtype, "softmax_backward", [&](auto tag) {
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
