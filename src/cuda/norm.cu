// src/cuda/norm.cu — layer norm's and rms norm's forward and backward on CUDA (Note [Layer norm
// on CUDA], below; the formulas and the 16-bit rules in src/kernels/norm.hpp, Note [16-bit layer
// norm] and Note [RMS norm is layer norm without the mean]: one set of kernels, templated on the
// kind). Batch norm's kernels are in src/cuda/batch_norm.cu.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/launch.cuh"
#include "cuda/loops.cuh"
#include "cuda/norm_rows.cuh"
#include "ember/error.hpp"
#include "kernels/norm.hpp"

namespace ember::cuda {
namespace {

using kernels::NormKind;

// ---- layer norm ----
// Note [Layer norm on CUDA]
// Register rows (the fast path): a warp per row, rows dealt to the warps grid-stride over a
// grid of the blocks that fit on the device at once. Lane l holds packs l, l + 32, ... of the
// row (kChunks of them, V elements each: V = 4 for f32 and the 16-bit types — 16-byte loads,
// 8-byte for the 16-bit types, which so take their rows in the f32 kernel's order (Note
// [16-bit layer norm]) — and 2 for f64; or V = 1 when n is not a multiple of that or a pointer
// is unaligned), so a row is read from DRAM once: the f64 mean, the f64 sum of squared
// deviations (two passes over registers, no E[x²] - E[x]² cancellation), the output and the
// backward's f64 row sums all come from registers; the weight and bias are re-read from L1.
// Rows of up to 32·8·V elements (1024 f32 or 16-bit, 512 f64, 256 unvectorised) take it.
// Longer rows take the general path: a team (a warp up to kWarpRow elements, else a block)
// walks the row twice with scalar loads, the second time from cache.
// The weight's and bias's gradients are column sums over the rows, deterministic (no atomics):
//   register rows: a lane owns the same columns in every row it takes, so it adds grad·x̂ and
//     grad into its warp's own [2][n] accumulator in shared memory (in the compute type C: f32
//     for f32 and the 16-bit types; held in registers they would halve the warps a
//     multiprocessor holds); at the end the block adds its warps' accumulators in warp order
//     and writes one partial [2][n];
//   general path: a column kernel forms the same partials over chunks of rows (a second read
//     of grad and x), launched before the grad_x kernel so that grad_x may be grad's buffer;
// then a small kernel sums the partials per column in order, in f64, and rounds them to C and
// then to the parameters' dtype P. The number of partials depends on the shape and the
// device's SM count only: the same bits every run. Kernels are templated on the input's type T
// (computing in C = Compute<T>) and the parameters' type P (T, or f32 for a 16-bit T).
constexpr int64_t kWarpRow = 1024;
constexpr int kRowTeams = kBlock / kWarp;  // warps (rows at a time) in a register-rows block
constexpr int kMaxChunks = 8;

// y_low (may be null; an f32 T only): y rounded to L as well (Note [A lower-precision copy
// beside a tensor] in src/ops/autocast.cpp).
template <NormKind kKind, typename T, typename P, int V, int kChunks, typename L = __nv_bfloat16>
__global__ void __launch_bounds__(kBlock)
    layer_norm_forward_rows_kernel(T* __restrict y, L* __restrict y_low,
                                   Compute<T>* __restrict mean, Compute<T>* __restrict rstd,
                                   const T* __restrict x, const P* __restrict w,
                                   const P* __restrict b, int64_t rows, int n, double eps) {
  using C = Compute<T>;
  const int lane = threadIdx.x % kWarp, team = threadIdx.x / kWarp, nv = n / V;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kRowTeams + team; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kRowTeams) {
    const T* xr = x + row * n;
    Pack<C, V> xv[kChunks];
    double s = 0;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int idx = c * kWarp + lane;
      if (idx >= nv) continue;
      xv[c] = load_pack_as<C, T, V>(xr, idx);
      if constexpr (kKind == NormKind::layer) {
#pragma unroll
        for (int k = 0; k < V; ++k) s += static_cast<double>(xv[c].v[k]);
      }
    }
    double m = 0;  // rms: no mean
    if constexpr (kKind == NormKind::layer)
      m = team_reduce<kWarp>(s, SumF64{}) / static_cast<double>(n);
    double q = 0;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      if (c * kWarp + lane >= nv) continue;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const double d = static_cast<double>(xv[c].v[k]) - m;
        q += d * d;
      }
    }
    q = team_reduce<kWarp>(q, SumF64{});
    const C mt = static_cast<C>(m);
    const C rt = static_cast<C>(kernels::layer_norm_rstd(q, n, eps));
    if (lane == 0) {
      if constexpr (kKind == NormKind::layer) mean[row] = mt;
      rstd[row] = rt;
    }
    T* yr = y + row * n;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int idx = c * kWarp + lane;
      if (idx >= nv) continue;
      // The weight and bias (8 KB or less) are read from L1, not held in registers.
      const Pack<C, V> wv = param_pack<C, P, V>(w, idx, C(1));
      const Pack<C, V> bv = param_pack<C, P, V>(b, idx, C(0));
      Pack<T, V> o;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const C h = kernels::layer_norm_normalized(xv[c].v[k], mt, rt);
        if constexpr (kKind == NormKind::layer)
          o.v[k] = cast<T>(kernels::layer_norm_affine(h, wv.v[k], bv.v[k]));
        else
          o.v[k] = cast<T>(kernels::rms_norm_scale(h, wv.v[k]));
      }
      store_pack<T, V>(yr, idx, o);
      if (y_low) {
        Pack<L, V> lo;
#pragma unroll
        for (int k = 0; k < V; ++k) lo.v[k] = cast<L>(cast<C>(o.v[k]));
        store_pack<L, V>(y_low + row * n, idx, lo);
      }
    }
  }
}

// grad_x (null: not wanted) and, when `partial` is set, the block's column sums of grad·x̂ and
// grad into partial[blockIdx.x] ([2][n], in C). With `partial`, the dynamic shared memory holds
// a [2][n] accumulator of C per warp (kRowTeams·2·n elements).
template <NormKind kKind, typename T, typename P, int V, int kChunks, typename L = __nv_bfloat16>
__global__ void __launch_bounds__(kBlock)
    layer_norm_backward_rows_kernel(T* gx, L* __restrict gx_low, Compute<T>* __restrict partial,
                                    const T* g, const T* __restrict x,
                                    const Compute<T>* __restrict mean,
                                    const Compute<T>* __restrict rstd, const P* __restrict w,
                                    int64_t rows, int n, bool accumulate) {
  using C = Compute<T>;
  extern __shared__ __align__(16) unsigned char rows_shared[];
  const int lane = threadIdx.x % kWarp, team = threadIdx.x / kWarp, nv = n / V;
  // This warp's Σ grad·x̂ (acc[0, n)) and Σ grad (acc[n, 2n)); a lane only ever touches its
  // own columns, so no barrier is needed until the warps are combined.
  C* acc = reinterpret_cast<C*>(rows_shared) + static_cast<int64_t>(team) * 2 * n;
  if (partial)
    for (int j = lane; j < 2 * n; j += kWarp) acc[j] = C(0);
  __syncwarp();
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kRowTeams + team; row < rows;
       row += static_cast<int64_t>(gridDim.x) * kRowTeams) {
    const int64_t off = row * n;
    const C mt = kKind == NormKind::layer ? mean[row] : C(0), rt = rstd[row];
    Pack<C, V> xv[kChunks], gv[kChunks];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int idx = c * kWarp + lane;
      if (idx >= nv) continue;
      xv[c] = load_pack_as<C, T, V>(x + off, idx);
      gv[c] = load_pack_as<C, T, V>(g + off, idx);
    }
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {  // x̂ in place of x
      if (c * kWarp + lane >= nv) continue;
#pragma unroll
      for (int k = 0; k < V; ++k) xv[c].v[k] = kernels::layer_norm_normalized(xv[c].v[k], mt, rt);
    }
    double s1 = 0, s2 = 0;
    if (gx) {
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int idx = c * kWarp + lane;
        if (idx >= nv) continue;
        const Pack<C, V> wv = param_pack<C, P, V>(w, idx, C(1));  // from L1
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const C h = xv[c].v[k];
          const C gw = w ? gv[c].v[k] * wv.v[k] : gv[c].v[k];
          if constexpr (kKind == NormKind::layer) s1 += static_cast<double>(gw);
          s2 += static_cast<double>(gw) * static_cast<double>(h);
        }
      }
      if constexpr (kKind == NormKind::layer) s1 = team_reduce<kWarp>(s1, SumF64{});
      s2 = team_reduce<kWarp>(s2, SumF64{});
    }
    const C a = static_cast<C>(s1 / static_cast<double>(n));
    const C cc = static_cast<C>(s2 / static_cast<double>(n));
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int idx = c * kWarp + lane;
      if (idx >= nv) continue;
      if (partial) {
        Pack<C, V> pw = load_pack<C, V>(acc, idx), pb = load_pack<C, V>(acc + n, idx);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          pw.v[k] += gv[c].v[k] * xv[c].v[k];
          pb.v[k] += gv[c].v[k];
        }
        store_pack<C, V>(acc, idx, pw);
        store_pack<C, V>(acc + n, idx, pb);
      }
      if (!gx) continue;
      const Pack<C, V> wv = param_pack<C, P, V>(w, idx, C(1));
      Pack<T, V> o;
      if (accumulate) o = load_pack<T, V>(gx + off, idx);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const C gi = gv[c].v[k];
        const C d = kernels::layer_norm_grad_x(w ? gi * wv.v[k] : gi, a, xv[c].v[k], cc, rt);
        o.v[k] = cast<T>(accumulate ? cast<C>(o.v[k]) + d : d);
      }
      store_pack<T, V>(gx + off, idx, o);
      if (gx_low) {  // Note [A lower-precision copy beside a tensor]
        Pack<L, V> lo;
#pragma unroll
        for (int k = 0; k < V; ++k) lo.v[k] = cast<L>(cast<C>(o.v[k]));
        store_pack<L, V>(gx_low + off, idx, lo);
      }
    }
  }
  if (!partial) return;
  __syncthreads();
  // The block's partial: the warps' accumulators added in warp order, a thread per column.
  const C* all = reinterpret_cast<const C*>(rows_shared);
  C* out = partial + static_cast<int64_t>(blockIdx.x) * 2 * n;
  for (int j = threadIdx.x; j < 2 * n; j += kBlock) {
    C sum = all[j];
    for (int t = 1; t < kRowTeams; ++t) sum += all[static_cast<int64_t>(t) * 2 * n + j];
    out[j] = sum;
  }
}

template <NormKind kKind, typename T, typename P, int kTeam>
__global__ void layer_norm_forward_kernel(T* y, Compute<T>* mean, Compute<T>* rstd, const T* x,
                                          const P* w, const P* b, int64_t rows, int64_t n,
                                          double eps) {
  using C = Compute<T>;
  constexpr int kTeamsPerBlock = kBlock / kTeam;
  const int team = threadIdx.x / kTeam, t = threadIdx.x % kTeam;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTeamsPerBlock; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kTeamsPerBlock) {
    const int64_t row = base + team;
    const bool active = row < rows;  // inactive threads still join the block's barriers
    const T* xr = x + (active ? row : 0) * n;
    double m = 0;  // rms: no mean
    if constexpr (kKind == NormKind::layer) {
      double s = 0;
      if (active)
        for (int64_t i = t; i < n; i += kTeam) s += static_cast<double>(cast<C>(xr[i]));
      m = team_reduce<kTeam>(s, SumF64{}) / static_cast<double>(n);
    }
    double v = 0;
    if (active)
      for (int64_t i = t; i < n; i += kTeam) {
        const double d = static_cast<double>(cast<C>(xr[i])) - m;
        v += d * d;
      }
    v = team_reduce<kTeam>(v, SumF64{});
    if (!active) continue;
    const C mt = static_cast<C>(m);
    const C rt = static_cast<C>(kernels::layer_norm_rstd(v, n, eps));
    if (t == 0) {
      if constexpr (kKind == NormKind::layer) mean[row] = mt;
      rstd[row] = rt;
    }
    T* yr = y + row * n;
    for (int64_t i = t; i < n; i += kTeam) {
      const C h = kernels::layer_norm_normalized(cast<C>(xr[i]), mt, rt);
      const C wi = w ? cast<C>(w[i]) : C(1);
      if constexpr (kKind == NormKind::layer)
        yr[i] = cast<T>(kernels::layer_norm_affine(h, wi, b ? cast<C>(b[i]) : C(0)));
      else
        yr[i] = cast<T>(kernels::rms_norm_scale(h, wi));
    }
  }
}

// The general path's grad_x: each element's grad and x are read before its grad_x is written.
template <NormKind kKind, typename T, typename P, int kTeam>
__global__ void layer_norm_backward_kernel(T* gx, const T* g, const T* x, const Compute<T>* mean,
                                           const Compute<T>* rstd, const P* w, int64_t rows,
                                           int64_t n, bool accumulate) {
  using C = Compute<T>;
  constexpr int kTeamsPerBlock = kBlock / kTeam;
  const int team = threadIdx.x / kTeam, t = threadIdx.x % kTeam;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTeamsPerBlock; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kTeamsPerBlock) {
    const int64_t row = base + team;
    const bool active = row < rows;
    const int64_t off = (active ? row : 0) * n;
    const C mt = kKind == NormKind::layer ? mean[active ? row : 0] : C(0);
    const C rt = rstd[active ? row : 0];
    // grad·w of element i of the row.
    auto gw_at = [&](int64_t i) {
      const C gi = cast<C>(g[off + i]);
      return w ? gi * cast<C>(w[i]) : gi;
    };
    double s1 = 0, s2 = 0;
    if (active)
      for (int64_t i = t; i < n; i += kTeam) {
        const C h = kernels::layer_norm_normalized(cast<C>(x[off + i]), mt, rt);
        const C gw = gw_at(i);
        if constexpr (kKind == NormKind::layer) s1 += static_cast<double>(gw);
        s2 += static_cast<double>(gw) * static_cast<double>(h);
      }
    if constexpr (kKind == NormKind::layer) s1 = team_reduce<kTeam>(s1, SumF64{});
    s2 = team_reduce<kTeam>(s2, SumF64{});
    if (!active) continue;
    const C a = static_cast<C>(s1 / static_cast<double>(n));
    const C c = static_cast<C>(s2 / static_cast<double>(n));
    for (int64_t i = t; i < n; i += kTeam) {
      const C h = kernels::layer_norm_normalized(cast<C>(x[off + i]), mt, rt);
      const C d = kernels::layer_norm_grad_x(gw_at(i), a, h, c, rt);
      gx[off + i] = cast<T>(accumulate ? cast<C>(gx[off + i]) + d : d);
    }
  }
}

// The general path's partials: partial[p] ([2][n], in C) = Σ grad·x̂ and Σ grad over rows
// [p·per_part, (p + 1)·per_part), a thread per column (coalesced), f64 within a part (mean
// null: rms_norm's rows, centred on 0).
template <typename T>
__global__ void layer_norm_columns_kernel(Compute<T>* __restrict partial, const T* __restrict g,
                                          const T* __restrict x, const Compute<T>* __restrict mean,
                                          const Compute<T>* __restrict rstd, int64_t rows,
                                          int64_t n, int64_t per_part) {
  using C = Compute<T>;
  const int64_t p = blockIdx.y, r0 = p * per_part, r1 = min(rows, r0 + per_part);
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * kBlock) {
    double sw = 0, sb = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const C gi = cast<C>(g[r * n + j]);
      const C h =
          kernels::layer_norm_normalized(cast<C>(x[r * n + j]), mean ? mean[r] : C(0), rstd[r]);
      sw += static_cast<double>(gi * h);
      sb += static_cast<double>(gi);
    }
    partial[p * 2 * n + j] = static_cast<C>(sw);
    partial[p * 2 * n + n + j] = static_cast<C>(sb);
  }
}

// grad_weight[j] = Σ_p partial[p][0][j], grad_bias[j] = Σ_p partial[p][1][j] (either null: not
// wanted), in f64, rounded to C and then to P. A block takes 32 columns; its kMergeRows thread
// rows take every kMergeRows-th partial, then thread row 0 adds the thread rows' sums in order.
constexpr int kMergeRows = 32;

template <typename C, typename P>
__global__ void __launch_bounds__(kWarp* kMergeRows)
    layer_norm_merge_kernel(P* __restrict gw, P* __restrict gb, const C* __restrict partial,
                            int64_t parts, int64_t n) {
  __shared__ double sums[2][kMergeRows][kWarp];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kWarp + tx;
  double sw = 0, sb = 0;
  if (j < n)
    for (int64_t p = ty; p < parts; p += kMergeRows) {
      if (gw) sw += static_cast<double>(partial[p * 2 * n + j]);
      if (gb) sb += static_cast<double>(partial[p * 2 * n + n + j]);
    }
  sums[0][ty][tx] = sw;
  sums[1][ty][tx] = sb;
  __syncthreads();
  if (ty != 0 || j >= n) return;
  for (int r = 1; r < kMergeRows; ++r) {
    sw += sums[0][r][tx];
    sb += sums[1][r][tx];
  }
  if (gw) gw[j] = cast<P>(static_cast<C>(sw));
  if (gb) gb[j] = cast<P>(static_cast<C>(sb));
}

}  // namespace

namespace {

// kPackElems<T> when n is a multiple of it and every pointer is aligned to its pack (data of
// T: `data`; parameters of P: `params`), else 1.
template <typename T, typename P>
int pack_width(int64_t n, std::initializer_list<const void*> data,
               std::initializer_list<const void*> params) {
  constexpr int kV = kPackElems<T>;
  if (n % kV != 0) return 1;
  for (const void* p : data)
    if (reinterpret_cast<uintptr_t>(p) % (sizeof(T) * kV) != 0) return 1;
  for (const void* p : params)
    if (reinterpret_cast<uintptr_t>(p) % (sizeof(P) * kV) != 0) return 1;
  return kV;
}

// Calls f(V, kChunks) (integral constants) for the register-rows kernels that take rows of n
// elements in packs of v; false when a row is too long for them (the general path).
template <typename T, typename F>
bool with_register_rows(int64_t n, int v, F&& f) {
  const int64_t need = (n / v + kWarp - 1) / kWarp;  // packs per lane
  auto by_chunks = [&](auto vc) {
    using Vc = decltype(vc);
    if (need <= 1) return f(Vc{}, std::integral_constant<int, 1>{}), true;
    if (need <= 2) return f(Vc{}, std::integral_constant<int, 2>{}), true;
    if (need <= 4) return f(Vc{}, std::integral_constant<int, 4>{}), true;
    if (need <= 6) return f(Vc{}, std::integral_constant<int, 6>{}), true;
    if (need <= kMaxChunks) return f(Vc{}, std::integral_constant<int, kMaxChunks>{}), true;
    return false;
  };
  if (v == 1) return by_chunks(std::integral_constant<int, 1>{});
  return by_chunks(std::integral_constant<int, kPackElems<T>>{});
}

// Enough blocks of kRowTeams warps to fill the device, no more than the rows need: as many as
// kSizing (by default the kernel launched, kKernel) holds resident. A 16-bit backward is sized
// by its f32 twin, so that its column-sum partials group the rows as the f32 kernel's do (Note
// [16-bit layer norm]); blocks beyond its own occupancy just wait for a slot.
template <auto kKernel, auto kSizing = kKernel>
unsigned rows_grid(int64_t rows, int device, size_t smem = 0) {
  if (smem > 48 * 1024) {  // per device context, so asked every time (a cheap host call)
    auto allow = [&](auto kernel) {
      EMBER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(smem)));
    };
    allow(kKernel);
    allow(kSizing);
  }
  return static_cast<unsigned>(
      std::min<int64_t>({(rows + kRowTeams - 1) / kRowTeams,
                         resident_blocks<kSizing, kBlock>(device, smem), 65535 * 16}));
}

}  // namespace

// Calls f(Tag<T>{}, Tag<P>{}) for the input's and the parameters' device types (Note [16-bit
// layer norm]); `params` are the slot's parameter views, the first with data deciding P.
template <typename F>
void dispatch_layer_norm(DType x, std::initializer_list<const View*> params, F&& f) {
  const DType compute = kernels::layer_norm_compute_dtype(x);
  DType p = compute;
  for (const View* v : params)
    if (v->data) {
      p = v->dtype;
      break;
    }
  dispatch_any_float(x, "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::dispatch_layer_norm_param<T, Compute<T>>(p, x,
                                                      [&](auto param_tag) { f(tag, param_tag); });
  });
}

namespace {

// layer_norm's and rms_norm's slots (mean and bias: views with no data for rms).
template <NormKind kKind>
void norm_forward(const View& y, const View& y_low, const View& mean, const View& rstd,
                  const View& x, const View& weight, const View& bias, double eps) {
  const int64_t rows = x.shape[0], n = x.shape[1];
  if (rows == 0) return;
  EMBER_ASSERT(!y_low.data || (x.dtype == DType::f32 &&
                               (y_low.dtype == DType::bf16 || y_low.dtype == DType::f16)),
               "layer_norm_forward: a low copy is bf16 or f16 of an f32 output");
  const cudaStream_t st = stream(x.device);
  dispatch_layer_norm(x.dtype, {&weight, &bias}, [&](auto tag, auto param_tag) {
    using T = typename decltype(tag)::type;
    using P = typename decltype(param_tag)::type;
    using C = Compute<T>;
    T* yp = static_cast<T*>(y.data);
    C* mp = static_cast<C*>(mean.data);
    C* rp = static_cast<C*>(rstd.data);
    const T* xp = static_cast<const T*>(x.data);
    const P* wp = static_cast<const P*>(weight.data);
    const P* bp = static_cast<const P*>(bias.data);
    // The low copy's pack: its own alignment must allow the width too.
    const int v = pack_width<T, P>(n, {yp, xp}, {wp, bp});
    const bool low_aligned =
        !y_low.data ||
        reinterpret_cast<uintptr_t>(y_low.data) % (2 * static_cast<uintptr_t>(v)) == 0;
    const bool fast = low_aligned && with_register_rows<T>(n, v, [&](auto vc, auto cc) {
                        auto launch = [&](auto* low) {
                          using L = std::remove_pointer_t<decltype(low)>;
                          constexpr auto kKernel =
                              layer_norm_forward_rows_kernel<kKind, T, P, decltype(vc)::value,
                                                             decltype(cc)::value, L>;
                          kKernel<<<rows_grid<kKernel>(rows, x.device), kBlock, 0, st>>>(
                              yp, low, mp, rp, xp, wp, bp, rows, static_cast<int>(n), eps);
                        };
                        if (y_low.data && y_low.dtype == DType::f16)
                          launch(static_cast<__half*>(y_low.data));
                        else
                          launch(static_cast<__nv_bfloat16*>(y_low.data));
                      });
    if (!fast && n <= kWarpRow)
      layer_norm_forward_kernel<kKind, T, P, kWarp>
          <<<team_grid(rows, kWarp), kBlock, 0, st>>>(yp, mp, rp, xp, wp, bp, rows, n, eps);
    else if (!fast)
      layer_norm_forward_kernel<kKind, T, P, kBlock>
          <<<team_grid(rows, kBlock), kBlock, 0, st>>>(yp, mp, rp, xp, wp, bp, rows, n, eps);
    EMBER_CUDA_LAUNCH_CHECK();
    if (!fast && y_low.data) copy(y_low, y);  // the general path: the cast as a pass of its own
  });
}

template <NormKind kKind>
void norm_backward(const View& grad_x, const View& grad_x_low, const View& grad_weight,
                   const View& grad_bias, const View& grad_y, const View& x, const View& mean,
                   const View& rstd, const View& weight, bool accumulate) {
  const int64_t rows = x.shape[0], n = x.shape[1];
  EMBER_ASSERT(!grad_x_low.data || (x.dtype == DType::f32 && (grad_x_low.dtype == DType::bf16 ||
                                                              grad_x_low.dtype == DType::f16)),
               "layer_norm_backward: a low copy is bf16 or f16 of an f32 gradient");
  const cudaStream_t st = stream(x.device);
  dispatch_layer_norm(x.dtype, {&grad_weight, &grad_bias, &weight}, [&](auto tag, auto param_tag) {
    using T = typename decltype(tag)::type;
    using P = typename decltype(param_tag)::type;
    using C = Compute<T>;
    T* gx = static_cast<T*>(grad_x.data);
    P* gw = static_cast<P*>(grad_weight.data);
    P* gb = static_cast<P*>(grad_bias.data);
    const T* g = static_cast<const T*>(grad_y.data);
    const T* xp = static_cast<const T*>(x.data);
    const C* mp = static_cast<const C*>(mean.data);
    const C* rp = static_cast<const C*>(rstd.data);
    const P* wp = static_cast<const P*>(weight.data);
    const bool params = gw || gb;
    if (rows == 0) {  // empty sums
      if (gw) EMBER_CUDA_CHECK(cudaMemsetAsync(gw, 0, n * sizeof(P), st));
      if (gb) EMBER_CUDA_CHECK(cudaMemsetAsync(gb, 0, n * sizeof(P), st));
      return;
    }
    if (!gx && !params) return;
    // Partials of the column sums: [parts][2][n] of C (Note [Layer norm on CUDA]).
    std::optional<Scratch> scratch;
    int64_t parts = 0;
    auto partials = [&](int64_t count) {
      parts = count;
      scratch.emplace(x.device, static_cast<size_t>(count * 2 * n) * sizeof(C));
      return static_cast<C*>(scratch->get());
    };
    const int v = pack_width<T, P>(n, {gx, g, xp}, {wp});
    // The low copy's pack: its own alignment must allow the width too.
    const bool low_aligned =
        !grad_x_low.data ||
        reinterpret_cast<uintptr_t>(grad_x_low.data) % (2 * static_cast<uintptr_t>(v)) == 0;
    const bool fast =
        low_aligned && with_register_rows<T>(n, v, [&](auto vc, auto cc) {
          auto launch = [&](auto* low) {
            using L = std::remove_pointer_t<decltype(low)>;
            constexpr auto kKernel =
                layer_norm_backward_rows_kernel<kKind, T, P, decltype(vc)::value,
                                                decltype(cc)::value, L>;
            // With the column sums: a [2][n] accumulator per warp in shared memory (64 KB or less).
            const size_t smem = params ? static_cast<size_t>(kRowTeams * 2 * n) * sizeof(C) : 0;
            constexpr auto kF32Twin =
                layer_norm_backward_rows_kernel<kKind, C, C, decltype(vc)::value,
                                                decltype(cc)::value, L>;
            const unsigned grid = rows_grid<kKernel, kF32Twin>(rows, x.device, smem);
            C* partial = params ? partials(grid) : nullptr;
            kKernel<<<grid, kBlock, smem, st>>>(gx, low, partial, g, xp, mp, rp, wp, rows,
                                                static_cast<int>(n), accumulate);
            EMBER_CUDA_LAUNCH_CHECK();
          };
          if (grad_x_low.data && grad_x_low.dtype == DType::f16)
            launch(static_cast<__half*>(grad_x_low.data));
          else
            launch(static_cast<__nv_bfloat16*>(grad_x_low.data));
        });
    if (!fast && params) {  // before grad_x: grad_x may be grad_y's buffer
      // Parts of per_part rows: about 4 waves of blocks over the device (of the f32 twin's
      // blocks, so a 16-bit input's parts are the f32 kernel's: Note [16-bit layer norm]).
      const int64_t col_blocks = std::min<int64_t>((n + kBlock - 1) / kBlock, 65535);
      const int64_t want = std::clamp<int64_t>(
          4 * resident_blocks<layer_norm_columns_kernel<C>, kBlock>(x.device) / col_blocks, 1,
          std::min<int64_t>(rows, 65535));
      const int64_t per_part = (rows + want - 1) / want;
      C* partial = partials((rows + per_part - 1) / per_part);
      layer_norm_columns_kernel<T>
          <<<dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(parts)), kBlock, 0,
             st>>>(partial, g, xp, mp, rp, rows, n, per_part);
      EMBER_CUDA_LAUNCH_CHECK();
    }
    if (!fast && gx) {
      if (n <= kWarpRow)
        layer_norm_backward_kernel<kKind, T, P, kWarp>
            <<<team_grid(rows, kWarp), kBlock, 0, st>>>(gx, g, xp, mp, rp, wp, rows, n, accumulate);
      else
        layer_norm_backward_kernel<kKind, T, P, kBlock><<<team_grid(rows, kBlock), kBlock, 0, st>>>(
            gx, g, xp, mp, rp, wp, rows, n, accumulate);
      EMBER_CUDA_LAUNCH_CHECK();
      if (grad_x_low.data) copy(grad_x_low, grad_x);  // the general path: a pass of its own
    }
    if (params) {
      layer_norm_merge_kernel<C, P>
          <<<static_cast<unsigned>((n + kWarp - 1) / kWarp), dim3(kWarp, kMergeRows), 0, st>>>(
              gw, gb, static_cast<const C*>(scratch->get()), parts, n);
      EMBER_CUDA_LAUNCH_CHECK();
    }
  });
}

}  // namespace

#include "kernels/norm_slots.inc"

}  // namespace ember::cuda
