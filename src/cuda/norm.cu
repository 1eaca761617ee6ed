// src/cuda/norm.cu — batch-normalisation kernels on CUDA: per-channel statistics, the
// backward's per-channel sums, and the channel-wise affine pass both directions use.
//
// Shape letters (as src/cpu/norm.cpp): N batch, C channels, S = the product of the
// dims after C. Data is a contiguous [N, C, S]; per-channel operands are contiguous [C].
//
// The reductions give each channel one block (kReduceThreads threads). A thread walks the
// channel's N·S elements as a flat index k = n·S + s with stride blockDim, so neighbouring
// threads read neighbouring addresses whenever S > 1; its partial sums are f64 and the block
// combines them with warp shuffles in a fixed order (deterministic). Statistics take two
// passes over the channel (the second usually hits L2): the f64 mean, then the f64 sum of
// squared deviations — the accuracy of the CPU's merged two-pass variance, without
// E[x²] - E[x]² cancellation. The affine pass is elementwise.
#include <algorithm>
#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/loops.cuh"
#include "ember/error.hpp"

namespace ember::cuda {
namespace {

constexpr int kReduceThreads = 512;
constexpr int kWarps = kReduceThreads / 32;

// Sum of `v` over the block, returned to every thread. `shared` holds kWarps + 1 doubles.
__device__ double block_sum(double v, double* shared) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double t = lane < kWarps ? shared[lane] : 0.0;
    for (int off = 16; off > 0; off /= 2) t += __shfl_down_sync(0xffffffffu, t, off);
    if (lane == 0) shared[kWarps] = t;
  }
  __syncthreads();
  const double total = shared[kWarps];
  __syncthreads();  // `shared` may be reused by the next call
  return total;
}

// Flat index k = n·S + s of channel c to the element's offset in [N, C, S].
struct ChannelWalk {
  uint32_t s;    // S
  uint64_t row;  // C·S: distance between consecutive n
  __device__ uint64_t offset(uint32_t k, uint32_t c) const {
    const uint32_t n = k / s, i = k % s;
    return n * row + static_cast<uint64_t>(c) * s + i;
  }
};

template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    stats_kernel(T* __restrict mean, T* __restrict var, const T* __restrict in, ChannelWalk w,
                 uint32_t count) {
  __shared__ double shared[kWarps + 1];
  const uint32_t c = blockIdx.x;
  double sum = 0.0;
  for (uint32_t k = threadIdx.x; k < count; k += blockDim.x)
    sum += static_cast<double>(in[w.offset(k, c)]);
  const double mu = block_sum(sum, shared) / static_cast<double>(count);
  double m2 = 0.0;
  for (uint32_t k = threadIdx.x; k < count; k += blockDim.x) {
    const double d = static_cast<double>(in[w.offset(k, c)]) - mu;
    m2 += d * d;
  }
  m2 = block_sum(m2, shared);
  if (threadIdx.x == 0) {
    mean[c] = static_cast<T>(mu);
    var[c] = static_cast<T>(count > 0 ? m2 / static_cast<double>(count) : 0.0);
  }
}

template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    backward_reduce_kernel(T* __restrict sum_g, T* __restrict sum_gx, const T* __restrict g,
                           const T* __restrict x, const T* __restrict mean, ChannelWalk w,
                           uint32_t count) {
  __shared__ double shared[kWarps + 1];
  const uint32_t c = blockIdx.x;
  const double mu = static_cast<double>(mean[c]);
  double sg = 0.0, sgx = 0.0;
  for (uint32_t k = threadIdx.x; k < count; k += blockDim.x) {
    const uint64_t at = w.offset(k, c);
    const double gi = static_cast<double>(g[at]);
    sg += gi;
    sgx += gi * (static_cast<double>(x[at]) - mu);
  }
  sg = block_sum(sg, shared);
  sgx = block_sum(sgx, shared);
  if (threadIdx.x == 0) {
    sum_g[c] = static_cast<T>(sg);
    sum_gx[c] = static_cast<T>(sgx);
  }
}

// out = a·sa[c] + (b·sb[c]) + shift[c], c = (e / S) % C. Separate multiplies and adds, no
// contraction, as the CPU kernel rounds them.
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }

template <typename T>
__global__ void affine_kernel(T* __restrict out, const T* __restrict a, const T* __restrict sa,
                              const T* __restrict b, const T* __restrict sb,
                              const T* __restrict shift, int64_t total, int64_t s, int64_t c) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ch = (e / s) % c;
    const T t = shift ? shift[ch] : T(0);
    T v = mul_rn(a[e], sa[ch]);
    if (b) v = add_rn(v, mul_rn(b[e], sb[ch]));
    out[e] = add_rn(v, t);
  }
}

struct Nc3 {
  int64_t n, c, s;
};

Nc3 dims_of(const View& v) { return {v.shape[0], v.shape[1], v.shape[2]}; }

// The per-channel walk; the flat count n·s is 32-bit (the op's tensors stay far below).
ChannelWalk walk_of(Nc3 d, const char* op) {
  EMBER_CHECK(d.n * d.s < (int64_t(1) << 31), op, ": a channel holds ", d.n * d.s,
              " elements (expected fewer than 2^31)");
  return {static_cast<uint32_t>(d.s), static_cast<uint64_t>(d.c * d.s)};
}

// ---- layer norm: a team of kTeam threads per row (a warp up to kWarpRow elements, else a
// block), sums in f64 combined in a fixed order; the formulas are the CPU's (src/cpu/norm.cpp).
constexpr int64_t kWarpRow = 1024;

struct SumF64 {
  __device__ double operator()(double a, double b) const { return a + b; }
};

template <typename T, int kTeam>
__global__ void layer_norm_forward_kernel(T* y, T* mean, T* rstd, const T* x, const T* w,
                                          const T* b, int64_t rows, int64_t n, double eps) {
  constexpr int kTeamsPerBlock = kBlock / kTeam;
  const int team = threadIdx.x / kTeam, t = threadIdx.x % kTeam;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTeamsPerBlock; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kTeamsPerBlock) {
    const int64_t row = base + team;
    const bool active = row < rows;  // inactive threads still join the block's barriers
    const T* xr = x + (active ? row : 0) * n;
    double s = 0;
    if (active)
      for (int64_t i = t; i < n; i += kTeam) s += static_cast<double>(xr[i]);
    const double m = team_reduce<kTeam>(s, SumF64{}) / static_cast<double>(n);
    double v = 0;
    if (active)
      for (int64_t i = t; i < n; i += kTeam) {
        const double d = static_cast<double>(xr[i]) - m;
        v += d * d;
      }
    v = team_reduce<kTeam>(v, SumF64{});
    if (!active) continue;
    const T mt = static_cast<T>(m);
    const T rt = static_cast<T>(1.0 / sqrt(v / static_cast<double>(n) + eps));
    if (t == 0) {
      mean[row] = mt;
      rstd[row] = rt;
    }
    T* yr = y + row * n;
    for (int64_t i = t; i < n; i += kTeam) {
      const T h = (xr[i] - mt) * rt;
      yr[i] = (w ? h * w[i] : h) + (b ? b[i] : T(0));
    }
  }
}

template <typename T, int kTeam>
__global__ void layer_norm_backward_kernel(T* gx, T* gy_xhat, const T* g, const T* x, const T* mean,
                                           const T* rstd, const T* w, int64_t rows, int64_t n) {
  constexpr int kTeamsPerBlock = kBlock / kTeam;
  const int team = threadIdx.x / kTeam, t = threadIdx.x % kTeam;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTeamsPerBlock; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kTeamsPerBlock) {
    const int64_t row = base + team;
    const bool active = row < rows;
    const int64_t off = (active ? row : 0) * n;
    const T mt = mean[active ? row : 0], rt = rstd[active ? row : 0];
    double s1 = 0, s2 = 0;
    if (active)
      for (int64_t i = t; i < n; i += kTeam) {
        const T h = (x[off + i] - mt) * rt;
        const T gw = w ? g[off + i] * w[i] : g[off + i];
        s1 += static_cast<double>(gw);
        s2 += static_cast<double>(gw) * static_cast<double>(h);
      }
    s1 = team_reduce<kTeam>(s1, SumF64{});
    s2 = team_reduce<kTeam>(s2, SumF64{});
    if (!active) continue;
    const T a = static_cast<T>(s1 / static_cast<double>(n));
    const T c = static_cast<T>(s2 / static_cast<double>(n));
    for (int64_t i = t; i < n; i += kTeam) {
      const T h = (x[off + i] - mt) * rt;
      const T gw = w ? g[off + i] * w[i] : g[off + i];
      gx[off + i] = rt * (gw - a - h * c);
      if (gy_xhat) gy_xhat[off + i] = g[off + i] * h;
    }
  }
}

}  // namespace

void batch_norm_stats(const View& mean, const View& var, const View& in) {
  const Nc3 d = dims_of(in);
  if (d.c == 0) return;
  const cudaStream_t st = stream(mean.device);
  const ChannelWalk w = walk_of(d, "batch_norm_stats");
  dispatch_float(in.dtype, "batch_norm_stats", [&](auto tag) {
    using T = typename decltype(tag)::type;
    stats_kernel<T><<<static_cast<unsigned>(d.c), kReduceThreads, 0, st>>>(
        static_cast<T*>(mean.data), static_cast<T*>(var.data), static_cast<const T*>(in.data), w,
        static_cast<uint32_t>(d.n * d.s));
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void batch_norm_backward_reduce(const View& sum_g, const View& sum_gx, const View& grad_out,
                                const View& in, const View& mean) {
  const Nc3 d = dims_of(in);
  if (d.c == 0) return;
  const cudaStream_t st = stream(sum_g.device);
  const ChannelWalk w = walk_of(d, "batch_norm_backward_reduce");
  dispatch_float(in.dtype, "batch_norm_backward_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_reduce_kernel<T><<<static_cast<unsigned>(d.c), kReduceThreads, 0, st>>>(
        static_cast<T*>(sum_g.data), static_cast<T*>(sum_gx.data),
        static_cast<const T*>(grad_out.data), static_cast<const T*>(in.data),
        static_cast<const T*>(mean.data), w, static_cast<uint32_t>(d.n * d.s));
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void channel_affine(const View& out, const View& a, const View& scale_a, const View& b,
                    const View& scale_b, const View& shift) {
  const Nc3 d = dims_of(out);
  const int64_t total = d.n * d.c * d.s;
  if (total == 0) return;
  const cudaStream_t st = stream(out.device);
  dispatch_float(out.dtype, "channel_affine", [&](auto tag) {
    using T = typename decltype(tag)::type;
    affine_kernel<T><<<grid_for(total), kBlock, 0, st>>>(
        static_cast<T*>(out.data), static_cast<const T*>(a.data),
        static_cast<const T*>(scale_a.data), static_cast<const T*>(b.data),
        static_cast<const T*>(scale_b.data), static_cast<const T*>(shift.data), total, d.s, d.c);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void layer_norm_forward(const View& y, const View& mean, const View& rstd, const View& x,
                        const View& weight, const View& bias, double eps) {
  const int64_t rows = x.shape[0], n = x.shape[1];
  if (rows == 0) return;
  const cudaStream_t st = stream(x.device);
  dispatch_float(x.dtype, "layer_norm_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* yp = static_cast<T*>(y.data);
    T* mp = static_cast<T*>(mean.data);
    T* rp = static_cast<T*>(rstd.data);
    const T* xp = static_cast<const T*>(x.data);
    const T* wp = static_cast<const T*>(weight.data);
    const T* bp = static_cast<const T*>(bias.data);
    if (n <= kWarpRow)
      layer_norm_forward_kernel<T, kWarp>
          <<<team_grid(rows, kWarp), kBlock, 0, st>>>(yp, mp, rp, xp, wp, bp, rows, n, eps);
    else
      layer_norm_forward_kernel<T, kBlock>
          <<<team_grid(rows, kBlock), kBlock, 0, st>>>(yp, mp, rp, xp, wp, bp, rows, n, eps);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void layer_norm_backward(const View& grad_x, const View& gy_xhat, const View& grad_y, const View& x,
                         const View& mean, const View& rstd, const View& weight) {
  const int64_t rows = x.shape[0], n = x.shape[1];
  if (rows == 0) return;
  const cudaStream_t st = stream(x.device);
  dispatch_float(x.dtype, "layer_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* gx = static_cast<T*>(grad_x.data);
    T* gh = static_cast<T*>(gy_xhat.data);
    const T* g = static_cast<const T*>(grad_y.data);
    const T* xp = static_cast<const T*>(x.data);
    const T* mp = static_cast<const T*>(mean.data);
    const T* rp = static_cast<const T*>(rstd.data);
    const T* wp = static_cast<const T*>(weight.data);
    if (n <= kWarpRow)
      layer_norm_backward_kernel<T, kWarp>
          <<<team_grid(rows, kWarp), kBlock, 0, st>>>(gx, gh, g, xp, mp, rp, wp, rows, n);
    else
      layer_norm_backward_kernel<T, kBlock>
          <<<team_grid(rows, kBlock), kBlock, 0, st>>>(gx, gh, g, xp, mp, rp, wp, rows, n);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace ember::cuda
