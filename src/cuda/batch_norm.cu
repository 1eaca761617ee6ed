// src/cuda/batch_norm.cu — batch normalisation on CUDA: the per-channel statistics, the
// backward's per-channel sums (ReLU's backward folded in through a gate), the per-channel
// arithmetic between them and the affine (Note [Batch norm's per-channel arithmetic in one
// kernel] in src/kernels/norm.hpp), and the channel-wise affine pass both directions use (with
// batch_norm_relu's residual and ReLU). The CPU's twin is src/cpu/norm.cpp; layer norm's and
// rms norm's kernels are in src/cuda/norm.cu.
//
// Shape letters (as src/cpu/norm.cpp): N batch, C channels, S = the product of the
// dims after C. Data is a contiguous [N, C, S]; per-channel operands are contiguous [C]. A
// channels_last tensor comes as [N·S, C, 1] (Note [Batch norm with the channels innermost]).
//
// The reductions give each part of a channel one block of kReduceThreads threads (Note [Batch
// norm's channels in parts]). A thread walks its part's elements as a flat index k = n·S + s
// with stride blockDim, so neighbouring threads read neighbouring addresses whenever S > 1;
// its partial sums are f64 and the block combines them with warp shuffles in a fixed order
// (deterministic). Statistics take two passes over the part (the second usually hits L2): the
// f64 mean, then the f64 sum of squared deviations — the accuracy of the CPU's merged two-pass
// variance, without E[x²] - E[x]² cancellation. The affine pass is elementwise.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "cuda/common.cuh"
#include "cuda/loops.cuh"
#include "cuda/norm_rows.cuh"
#include "ember/error.hpp"
#include "kernels/norm.hpp"

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

// A data element in f64 (T: the data's dtype; 16-bit ones through f32, exactly).
template <typename T>
__device__ inline double wide(T v) {
  return static_cast<double>(cast<Compute<T>>(v));
}

// Note [Batch norm's channels in parts]
// A block per channel leaves most of the device idle when the channels are few: the Fashion
// CNN's first batch norm (32 channels of 128 × 784 elements) ran 32 blocks on the H100's 132
// multiprocessors, its statistics 94.5 µs for 12.8 MB (135 GB/s) and its backward sums 106 µs
// (Profiler, 2026-12-06). So each channel is cut into `parts` contiguous ranges of its flat
// index, a block each (grid: channels × parts), enough for about kTargetBlocks blocks in all
// and at least kMinPartElements elements a part; the count depends on the shape alone, never
// on the device, so results are the same on every GPU. With one part the block writes the
// channel's figures; with more it writes its part's (the statistics: the part's f64 mean and
// sum of squared deviations about it; the backward: its Σg and Σg·(x - mean)) and a merge
// kernel, a thread per channel, combines the parts in order: the backward's by adding, the
// statistics' by Chan's pairwise formula (the deviations' sums shifted to the common mean, in
// f64), deterministic and as accurate as one two-pass walk.
constexpr int64_t kTargetBlocks = 256, kMinPartElements = 4096, kMaxParts = 64;

// The parts a channel of `count` elements is cut into when there are `c` channels.
int64_t channel_parts(int64_t c, int64_t count) {
  const int64_t want = (kTargetBlocks + c - 1) / c;
  return std::clamp<int64_t>(std::min(want, count / kMinPartElements), 1, kMaxParts);
}

// The flat range [k0, k1) of part p of `parts` over a channel of `count` elements.
struct PartRange {
  uint32_t k0, k1;
};
__device__ inline PartRange part_range(uint32_t count, uint32_t parts, uint32_t p) {
  const uint32_t per = (count + parts - 1) / parts;
  const uint32_t k0 = min(count, p * per);
  return {k0, min(count, k0 + per)};
}

// Block (c, p)'s two figures: channel c's outputs when the channel is one part, else
// partial[c][p] (f64, for the merge).
template <typename P>
__device__ inline void store_figures(P* out0, P* out1, double* partial, uint32_t c, uint32_t parts,
                                     uint32_t p, double v0, double v1) {
  if (parts == 1) {
    out0[c] = static_cast<P>(v0);
    out1[c] = static_cast<P>(v1);
  } else {
    partial[(static_cast<uint64_t>(c) * parts + p) * 2] = v0;
    partial[(static_cast<uint64_t>(c) * parts + p) * 2 + 1] = v1;
  }
}

// T: the data's dtype; P: the per-channel values' (f32 for f16/bf16 data, Note [16-bit batch
// norm] in src/ops/norm.cpp; else T). Block (c, p): part p of channel c; one part writes mean
// and var, more write partial[c][p] = {part mean, part Σ(x - part mean)²}.
template <typename T, typename P>
__global__ void __launch_bounds__(kReduceThreads)
    stats_kernel(P* __restrict mean, P* __restrict var, double* __restrict partial,
                 const T* __restrict in, ChannelWalk w, uint32_t count) {
  __shared__ double shared[kWarps + 1];
  const uint32_t c = blockIdx.x, parts = gridDim.y, p = blockIdx.y;
  const PartRange r = part_range(count, parts, p);
  const uint32_t n = r.k1 - r.k0;
  double sum = 0.0;
  for (uint32_t k = r.k0 + threadIdx.x; k < r.k1; k += blockDim.x) sum += wide(in[w.offset(k, c)]);
  const double mu = n > 0 ? block_sum(sum, shared) / static_cast<double>(n) : 0.0;
  double m2 = 0.0;
  for (uint32_t k = r.k0 + threadIdx.x; k < r.k1; k += blockDim.x) {
    const double d = wide(in[w.offset(k, c)]) - mu;
    m2 += d * d;
  }
  m2 = block_sum(m2, shared);
  if (threadIdx.x != 0) return;
  const double whole_var = count > 0 ? m2 / static_cast<double>(count) : 0.0;
  store_figures(mean, var, partial, c, parts, p, mu, parts == 1 ? whole_var : m2);
}

// A thread per channel: the parts' means and squared-deviation sums combined in order (Chan
// et al.'s pairwise update), then the mean and the biased variance.
template <typename P>
__global__ void stats_merge_kernel(P* __restrict mean, P* __restrict var,
                                   const double* __restrict partial, uint32_t c_count,
                                   uint32_t parts, uint32_t count) {
  const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= c_count) return;
  double n_all = 0.0, mu = 0.0, m2 = 0.0;
  for (uint32_t p = 0; p < parts; ++p) {
    const PartRange r = part_range(count, parts, p);
    const double n = static_cast<double>(r.k1 - r.k0);
    if (n == 0.0) continue;
    const double mu_p = partial[(static_cast<uint64_t>(c) * parts + p) * 2];
    const double m2_p = partial[(static_cast<uint64_t>(c) * parts + p) * 2 + 1];
    const double total = n_all + n, delta = mu_p - mu;
    mu += delta * (n / total);
    m2 += m2_p + delta * delta * (n_all * n / total);
    n_all = total;
  }
  mean[c] = static_cast<P>(mu);
  var[c] = static_cast<P>(count > 0 ? m2 / static_cast<double>(count) : 0.0);
}

// Block (c, p) as stats_kernel's: one part writes Σg and Σg·(x - mean) of channel c, more write
// partial[c][p] = the part's two sums.
template <typename T, typename P>
__global__ void __launch_bounds__(kReduceThreads)
    backward_reduce_kernel(P* __restrict sum_g, P* __restrict sum_gx, double* __restrict partial,
                           const T* __restrict g, const T* __restrict x, const P* __restrict mean,
                           const T* __restrict gate, ChannelWalk w, uint32_t count) {
  __shared__ double shared[kWarps + 1];
  const uint32_t c = blockIdx.x, parts = gridDim.y, p = blockIdx.y;
  const PartRange r = part_range(count, parts, p);
  const double mu = static_cast<double>(mean[c]);
  double sg = 0.0, sgx = 0.0;
  for (uint32_t k = r.k0 + threadIdx.x; k < r.k1; k += blockDim.x) {
    const uint64_t at = w.offset(k, c);
    const double gi = gate ? kernels::gated(wide(g[at]), wide(gate[at])) : wide(g[at]);
    sg += gi;
    sgx += gi * (wide(x[at]) - mu);
  }
  sg = block_sum(sg, shared);
  sgx = block_sum(sgx, shared);
  if (threadIdx.x == 0) store_figures(sum_g, sum_gx, partial, c, parts, p, sg, sgx);
}

// A thread per channel: the parts' two sums added in order.
template <typename P>
__global__ void sums_merge_kernel(P* __restrict sum_g, P* __restrict sum_gx,
                                  const double* __restrict partial, uint32_t c_count,
                                  uint32_t parts) {
  const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= c_count) return;
  double sg = 0.0, sgx = 0.0;
  for (uint32_t p = 0; p < parts; ++p) {
    sg += partial[(static_cast<uint64_t>(c) * parts + p) * 2];
    sgx += partial[(static_cast<uint64_t>(c) * parts + p) * 2 + 1];
  }
  sum_g[c] = static_cast<P>(sg);
  sum_gx[c] = static_cast<P>(sgx);
}

// The element operands of channel_affine (backend::ChannelAffine) as kernel arguments; a null
// pointer is an absent operand.
template <typename T, typename P>
struct AffineOperands {
  T* __restrict out;
  const T* __restrict a;
  const P* __restrict sa;
  const T* __restrict gate;
  const T* __restrict b;
  const P* __restrict sb;
  const P* __restrict shift;
  const T* __restrict res;
  bool relu;
};

// One element: kernels::channel_affine_element in P (16-bit data widened exactly), rounded to
// T; av, gv, bv, rv are the element's a, gate, b and residual (read only where the operand is
// present), sa, sb, sh its channel's scale_a, scale_b and shift (sb and sh 0 where absent).
template <typename T, typename P>
__device__ inline T affine_element(const AffineOperands<T, P>& f, T av, T gv, T bv, T rv, P sa,
                                   P sb, P sh) {
  P a = cast<P>(av);
  if (f.gate) a = kernels::gated(a, cast<P>(gv));
  return kernels::channel_affine_element<T, P>(a, sa, f.b != nullptr, f.b ? cast<P>(bv) : P(0), sb,
                                               sh, f.res != nullptr, f.res ? cast<P>(rv) : P(0),
                                               f.relu, [](P v) { return cast<T>(v); });
}

// Channel ch's scale_a, scale_b and shift (0 where absent).
template <typename T, typename P>
__device__ inline void channel_values(const AffineOperands<T, P>& f, uint32_t ch, P& sa, P& sb,
                                      P& sh) {
  sa = f.sa[ch];
  sb = f.b ? f.sb[ch] : P(0);
  sh = f.shift ? f.shift[ch] : P(0);
}

template <typename T, typename P>
__global__ void affine_kernel(AffineOperands<T, P> f, int64_t total, int64_t s, int64_t c) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    P sa, sb, sh;
    channel_values(f, static_cast<uint32_t>((e / s) % c), sa, sb, sh);
    const T av = f.a[e];
    f.out[e] = affine_element<T, P>(f, av, f.gate ? f.gate[e] : av, f.b ? f.b[e] : av,
                                    f.res ? f.res[e] : av, sa, sb, sh);
  }
}

// ---- channels innermost: S = 1 ----
// Note [Batch norm with the channels innermost]
// A channels_last tensor reaches the batch-norm slots as [N·H·W, C, 1] (BatchNorm1d's [N, C]
// is the same walk): a channel's elements lie C apart, so a block per channel would read one
// element per 32-byte sector. Instead a block of kColX × kColY threads takes kColX adjacent
// channels (coalesced rows) of one part of the rows, each thread summing in f64 every kColY-th
// row of its part (kColUnroll rows in flight); the block adds its thread rows, and a merge
// kernel adds the parts (32 thread rows per column, then in order: deterministic, no atomics). The
// statistics come from Σx and Σx² in f64 (one pass: the f64 sums keep E[x²] - E[x]² accurate far
// beyond f32 data's precision); the backward's sums are Σg and Σg·(x - mean), as the [N, C, S]
// kernels'. Where C allows, a thread takes a 16-byte pack of channels (Note [Column sums in
// packs]).
constexpr int kColX = 32, kColY = 16, kColUnroll = 4, kMergeY = 32;

enum class ColumnSums { stats, backward };

// The terms of one element, added in f64: (x, x²) for the statistics, (g, g·(x - mean)) for
// the backward; av the summed operand, xv the backward's x, gv the gate (read when gated).
template <typename T, ColumnSums kKind>
__device__ inline void column_terms(double& s0, double& s1, T av, T xv, T gv, bool gated,
                                    double mu) {
  const double v = gated ? kernels::gated(wide(av), wide(gv)) : wide(av);
  s0 += v;
  if constexpr (kKind == ColumnSums::stats)
    s1 += v * v;
  else
    s1 += v * (wide(xv) - mu);
}

// column_terms of element `at` of the operands (x only for the backward, gate when non-null).
template <typename T, ColumnSums kKind>
__device__ inline void element_terms(double& s0, double& s1, const T* a, const T* x, const T* gate,
                                     int64_t at, double mu) {
  const T av = a[at];
  column_terms<T, kKind>(s0, s1, av, kKind == ColumnSums::backward ? x[at] : av,
                         gate ? gate[at] : av, gate != nullptr, mu);
}

// Rows of a part are dealt to the kColY thread rows kColUnroll at a time (independent loads in
// flight); the block adds its thread rows in order into partial[p][2][c].
template <typename T, typename P, ColumnSums kKind>
__global__ void __launch_bounds__(kColX* kColY)
    columns_kernel(double* __restrict partial, const T* __restrict a, const T* __restrict x,
                   const P* __restrict mean, const T* __restrict gate, int64_t rows, int64_t c,
                   int64_t per_part) {
  __shared__ double sums[2][kColY][kColX];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColX + tx;
  const int64_t p = blockIdx.y, r0 = p * per_part, r1 = min(rows, r0 + per_part);
  double s0[kColUnroll] = {}, s1[kColUnroll] = {};
  if (j < c) {
    const double mu = kKind == ColumnSums::backward ? static_cast<double>(mean[j]) : 0.0;
    int64_t r = r0 + ty;
    for (; r + (kColUnroll - 1) * kColY < r1; r += kColUnroll * kColY) {
#pragma unroll
      for (int u = 0; u < kColUnroll; ++u)
        element_terms<T, kKind>(s0[u], s1[u], a, x, gate, (r + u * kColY) * c + j, mu);
    }
    for (; r < r1; r += kColY) element_terms<T, kKind>(s0[0], s1[0], a, x, gate, r * c + j, mu);
  }
  double t0 = 0.0, t1 = 0.0;
#pragma unroll
  for (int u = 0; u < kColUnroll; ++u) {
    t0 += s0[u];
    t1 += s1[u];
  }
  sums[0][ty][tx] = t0;
  sums[1][ty][tx] = t1;
  __syncthreads();
  if (ty != 0 || j >= c) return;
  for (int y = 1; y < kColY; ++y) {
    t0 += sums[0][y][tx];
    t1 += sums[1][y][tx];
  }
  partial[(p * 2) * c + j] = t0;
  partial[(p * 2 + 1) * c + j] = t1;
}

// The parts' sums per column, kMergeY thread rows taking every kMergeY-th part and thread row 0
// adding theirs in order; stats: out0 = mean, out1 = biased variance; backward: out0 = Σg,
// out1 = Σg·(x - mean).
template <typename P, ColumnSums kKind>
__global__ void __launch_bounds__(kColX* kMergeY)
    columns_merge_kernel(P* __restrict out0, P* __restrict out1, const double* __restrict partial,
                         int64_t parts, int64_t c, int64_t rows) {
  __shared__ double sums[2][kMergeY][kColX];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColX + tx;
  double s0 = 0.0, s1 = 0.0;
  if (j < c)
    for (int64_t p = ty; p < parts; p += kMergeY) {
      s0 += partial[(p * 2) * c + j];
      s1 += partial[(p * 2 + 1) * c + j];
    }
  sums[0][ty][tx] = s0;
  sums[1][ty][tx] = s1;
  __syncthreads();
  if (ty != 0 || j >= c) return;
  for (int y = 1; y < kMergeY; ++y) {
    s0 += sums[0][y][tx];
    s1 += sums[1][y][tx];
  }
  if constexpr (kKind == ColumnSums::stats) {
    const double n = static_cast<double>(rows), mu = rows > 0 ? s0 / n : 0.0;
    out0[j] = static_cast<P>(mu);
    out1[j] = static_cast<P>(rows > 0 ? fmax(s1 / n - mu * mu, 0.0) : 0.0);
  } else {
    out0[j] = static_cast<P>(s0);
    out1[j] = static_cast<P>(s1);
  }
}

// Note [Column sums in packs]
// With 2-byte elements a thread of columns_kernel reads 2 bytes a load: on an H100 ResNet-50's
// bf16 batch norms ran their statistics at 1.0-1.6 TB/s and their backward sums at 0.9-1.5
// (a micro benchmark over its nine shapes, 2026-12-07: 495 and 1,442 µs for one of each). When
// C is a multiple of a 16-byte pack of T (V elements) and the data is 16-byte aligned, a thread
// takes V adjacent channels instead: 16-byte loads, kPackUnroll rows of every operand loaded
// before any is added, each term still in f64 (the terms computed in f32 measured no faster).
// A block of kPackThreads threads is bx = min(32, C/V) packs wide and by = kPackThreads/bx rows
// tall, and about kPackBlocks blocks share the rows (a fixed count, so the grouping of the sums
// depends on the shape alone, never on the device): with 4 or 8 times as many blocks each
// channel's parts took longer to merge than they saved, and the sums ran 10-40 % slower.
// Thread rows are added in order through shared memory, the parts by columns_merge_kernel:
// deterministic. The same benchmark: 293 and 749 µs (on the largest shapes 2.6-2.7 TB/s for the
// statistics and 2.8-2.9 for the backward sums, 0.7-2.5 on the small ones), the f64 results
// within 1e-15 of the element kernel's; ResNet-50's step 30.1 -> 25.2 ms (both notes).
constexpr int kPackThreads = 256, kPackUnroll = 4, kPackBlocks = 256;

// Pack `idx` of V elements of T at p (a 64-bit index).
template <typename T, int V>
__device__ __forceinline__ Pack<T, V> pack_at(const T* p, int64_t idx) {
  return reinterpret_cast<const Pack<T, V>*>(p)[idx];
}

template <typename T, typename P, ColumnSums kKind, int V>
__global__ void __launch_bounds__(kPackThreads)
    columns_pack_kernel(double* __restrict partial, const T* __restrict a, const T* __restrict x,
                        const P* __restrict mean, const T* __restrict gate, int64_t rows, int64_t c,
                        int64_t per_part) {
  __shared__ double sums[kPackThreads * V];
  const int bx = blockDim.x, by = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
  const int64_t cp = c / V, jp = static_cast<int64_t>(blockIdx.x) * bx + tx;
  const int64_t p = blockIdx.y, r0 = p * per_part, r1 = min(rows, r0 + per_part);
  double s0[V], s1[V];
#pragma unroll
  for (int k = 0; k < V; ++k) s0[k] = s1[k] = 0.0;
  if (jp < cp) {
    P mu[V];
#pragma unroll
    for (int k = 0; k < V; ++k) mu[k] = kKind == ColumnSums::backward ? mean[jp * V + k] : P(0);
    const auto add = [&](const Pack<T, V>& pa, const Pack<T, V>& px, const Pack<T, V>& pg) {
#pragma unroll
      for (int k = 0; k < V; ++k)
        column_terms<T, kKind>(s0[k], s1[k], pa.v[k], px.v[k], pg.v[k], gate != nullptr,
                               static_cast<double>(mu[k]));
    };
    int64_t r = r0 + ty;
    for (; r + (kPackUnroll - 1) * by < r1; r += kPackUnroll * by) {
      Pack<T, V> pa[kPackUnroll], px[kPackUnroll], pg[kPackUnroll];
#pragma unroll
      for (int u = 0; u < kPackUnroll; ++u) {
        const int64_t idx = (r + u * by) * cp + jp;
        pa[u] = pack_at<T, V>(a, idx);
        px[u] = kKind == ColumnSums::backward ? pack_at<T, V>(x, idx) : pa[u];
        pg[u] = gate ? pack_at<T, V>(gate, idx) : pa[u];
      }
#pragma unroll
      for (int u = 0; u < kPackUnroll; ++u) add(pa[u], px[u], pg[u]);
    }
    for (; r < r1; r += by) {
      const int64_t idx = r * cp + jp;
      const Pack<T, V> pa = pack_at<T, V>(a, idx);
      add(pa, kKind == ColumnSums::backward ? pack_at<T, V>(x, idx) : pa,
          gate ? pack_at<T, V>(gate, idx) : pa);
    }
  }
  // The block's thread rows in order, one sum at a time: a thread a column of bx·V.
  const int w = bx * V, t = ty * bx + tx;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * w + t;
  for (int which = 0; which < 2; ++which) {
#pragma unroll
    for (int k = 0; k < V; ++k) sums[ty * w + tx * V + k] = which == 0 ? s0[k] : s1[k];
    __syncthreads();
    if (t < w && j < c) {
      double total = 0.0;
      for (int y = 0; y < by; ++y) total += sums[y * w + t];
      partial[(p * 2 + which) * c + j] = total;
    }
    __syncthreads();
  }
}

// The column sums over [rows, c] (row-major) into out0, out1 [c]: in packs where Note [Column
// sums in packs] applies, else columns_kernel with enough blocks to fill the device several
// times over (at most 2048 in all), at least kColY·kColUnroll rows each; then the merge.
template <typename T, typename P, ColumnSums kKind>
void column_sums(int device, P* out0, P* out1, const T* a, const T* x, const P* mean, const T* gate,
                 int64_t rows, int64_t c) {
  const cudaStream_t st = stream(device);
  constexpr int kV = static_cast<int>(16 / sizeof(T));
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  const bool packs = c % kV == 0 && aligned(a) && aligned(x) && aligned(gate);
  const int bx = packs ? static_cast<int>(std::min<int64_t>(32, c / kV)) : kColX;
  const int by = packs ? kPackThreads / bx : kColY;
  const int64_t col_blocks = packs ? (c / kV + bx - 1) / bx : (c + kColX - 1) / kColX;
  const int64_t parts =
      packs ? std::clamp<int64_t>(kPackBlocks / col_blocks, 1, std::max<int64_t>(1, rows / by))
            : std::clamp<int64_t>(rows / (kColY * kColUnroll), 1,
                                  std::max<int64_t>(1, 2048 / col_blocks));
  const int64_t per_part = (rows + parts - 1) / parts;
  Scratch partial(device, static_cast<size_t>(parts * 2 * c) * sizeof(double));
  auto* part = static_cast<double*>(partial.get());
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(parts));
  if (packs)
    columns_pack_kernel<T, P, kKind, kV>
        <<<grid, dim3(bx, by), 0, st>>>(part, a, x, mean, gate, rows, c, per_part);
  else
    columns_kernel<T, P, kKind>
        <<<grid, dim3(kColX, kColY), 0, st>>>(part, a, x, mean, gate, rows, c, per_part);
  EMBER_CUDA_LAUNCH_CHECK();
  columns_merge_kernel<P, kKind>
      <<<static_cast<unsigned>((c + kColX - 1) / kColX), dim3(kColX, kMergeY), 0, st>>>(
          out0, out1, part, parts, c, rows);
  EMBER_CUDA_LAUNCH_CHECK();
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

// The blocks of the [N, C, S] reductions and their f64 partials, none for channels of one part
// (Note [Batch norm's channels in parts]).
struct ChannelParts {
  int64_t parts;
  dim3 grid, merge_grid;  // (channel, part); a thread per channel, 128 a block
  std::optional<Scratch> scratch;
  double* partial = nullptr;
  ChannelParts(int device, Nc3 d)
      : parts(channel_parts(d.c, d.n * d.s)),
        grid(static_cast<unsigned>(d.c), static_cast<unsigned>(parts)),
        merge_grid(static_cast<unsigned>((d.c + 127) / 128)) {
    if (parts == 1) return;
    scratch.emplace(device, static_cast<size_t>(d.c * parts * 2) * sizeof(double));
    partial = static_cast<double*>(scratch->get());
  }
};

}  // namespace

// T: the data's dtype, P: the per-channel views' (Note [16-bit batch norm] in
// src/ops/norm.cpp: f32 for f16/bf16 data, else T).
template <typename F>
void dispatch_norm(DType data, const View& per_channel, const char* op, F&& f) {
  dispatch_any_float(data, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using P = Compute<T>;
    EMBER_CHECK(per_channel.dtype == dtype_of<P>(), op, ": per-channel values of dtype ",
                dtype_name(per_channel.dtype), " for ", dtype_name(data), " data (expected ",
                dtype_name(dtype_of<P>()), ")");
    f(T{}, P{});
  });
}

void batch_norm_stats(const View& mean, const View& var, const View& in) {
  const Nc3 d = dims_of(in);
  if (d.c == 0) return;
  const cudaStream_t st = stream(mean.device);
  dispatch_norm(in.dtype, mean, "batch_norm_stats", [&](auto t, auto p) {
    using T = decltype(t);
    using P = decltype(p);
    if (d.s == 1 && d.c > 1) {  // Note [Batch norm with the channels innermost]
      column_sums<T, P, ColumnSums::stats>(
          mean.device, static_cast<P*>(mean.data), static_cast<P*>(var.data),
          static_cast<const T*>(in.data), nullptr, nullptr, nullptr, d.n, d.c);
      return;
    }
    const ChannelWalk w = walk_of(d, "batch_norm_stats");
    const ChannelParts parts(mean.device, d);
    stats_kernel<T, P><<<parts.grid, kReduceThreads, 0, st>>>(
        static_cast<P*>(mean.data), static_cast<P*>(var.data), parts.partial,
        static_cast<const T*>(in.data), w, static_cast<uint32_t>(d.n * d.s));
    EMBER_CUDA_LAUNCH_CHECK();
    if (parts.parts == 1) return;
    stats_merge_kernel<P><<<parts.merge_grid, 128, 0, st>>>(
        static_cast<P*>(mean.data), static_cast<P*>(var.data), parts.partial,
        static_cast<uint32_t>(d.c), static_cast<uint32_t>(parts.parts),
        static_cast<uint32_t>(d.n * d.s));
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void batch_norm_backward_reduce(const View& sum_g, const View& sum_gx, const View& grad_out,
                                const View& in, const View& mean, const View& gate) {
  const Nc3 d = dims_of(in);
  if (d.c == 0) return;
  const cudaStream_t st = stream(sum_g.device);
  dispatch_norm(in.dtype, mean, "batch_norm_backward_reduce", [&](auto t, auto p) {
    using T = decltype(t);
    using P = decltype(p);
    if (d.s == 1 && d.c > 1) {  // Note [Batch norm with the channels innermost]
      column_sums<T, P, ColumnSums::backward>(
          sum_g.device, static_cast<P*>(sum_g.data), static_cast<P*>(sum_gx.data),
          static_cast<const T*>(grad_out.data), static_cast<const T*>(in.data),
          static_cast<const P*>(mean.data), static_cast<const T*>(gate.data), d.n, d.c);
      return;
    }
    const ChannelWalk w = walk_of(d, "batch_norm_backward_reduce");
    const ChannelParts parts(sum_g.device, d);
    backward_reduce_kernel<T, P><<<parts.grid, kReduceThreads, 0, st>>>(
        static_cast<P*>(sum_g.data), static_cast<P*>(sum_gx.data), parts.partial,
        static_cast<const T*>(grad_out.data), static_cast<const T*>(in.data),
        static_cast<const P*>(mean.data), static_cast<const T*>(gate.data), w,
        static_cast<uint32_t>(d.n * d.s));
    EMBER_CUDA_LAUNCH_CHECK();
    if (parts.parts == 1) return;
    sums_merge_kernel<P><<<parts.merge_grid, 128, 0, st>>>(
        static_cast<P*>(sum_g.data), static_cast<P*>(sum_gx.data), parts.partial,
        static_cast<uint32_t>(d.c), static_cast<uint32_t>(parts.parts));
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

// Note [Channel affine in packs]
// The affine of batch norm's forward and backward reads and writes every activation once, so it
// runs at memory speed only with wide accesses and no per-element 64-bit division: 16 bytes of
// T at a time (V elements), when each pack lies in one channel (S a multiple of V: NCHW) or
// spans V consecutive channels (S = 1, C a multiple of V: channels innermost), every data
// pointer is 16-byte aligned and the packs fit 32-bit indices; the channel comes from one
// 32-bit division per pack. Otherwise the element kernel above runs. Both compute each element
// alike (same operations, same rounding), so the two give the same bits. ResNet-50's step
// (bf16, channels_last, batch 128) spent 13.1 ms of its 45.7 on the element kernel on an H100.
// Channels innermost, a pack's V channels also take their scale and shift as packs of P (two
// 16-byte loads for f32 values of 16-bit data, when those are aligned to a whole pack) instead
// of 3·V scalar loads: ResNet-50's affines went from 1.9-2.9 TB/s to 2.7-3.1 on an H100 (the
// micro benchmark of Note [Column sums in packs]; wider C gained most).
template <typename T, typename P, int V, bool kInner>
__global__ void __launch_bounds__(kBlock)
    affine_pack_kernel(AffineOperands<T, P> f, uint32_t packs, uint32_t per, uint32_t c) {
  // kInner: per = C / V (packs in a row of channels), the pack's V channels' values loaded as
  // packs of P too; else per = S / V (packs in a plane), one channel a pack.
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += gridDim.x * blockDim.x) {
    const Pack<T, V> ra = load_pack<T, V>(f.a, static_cast<int>(i));
    Pack<T, V> rg = ra, rb = ra, rr = ra;
    if (f.gate) rg = load_pack<T, V>(f.gate, static_cast<int>(i));
    if (f.b) rb = load_pack<T, V>(f.b, static_cast<int>(i));
    if (f.res) rr = load_pack<T, V>(f.res, static_cast<int>(i));
    Pack<T, V> o;
    if constexpr (kInner) {
      const int at = static_cast<int>(i % per);
      const Pack<P, V> sa = load_pack<P, V>(f.sa, at);
      const Pack<P, V> sb = f.b ? load_pack<P, V>(f.sb, at) : filled<P, V>(P(0));
      const Pack<P, V> sh = f.shift ? load_pack<P, V>(f.shift, at) : filled<P, V>(P(0));
#pragma unroll
      for (int k = 0; k < V; ++k)
        o.v[k] =
            affine_element<T, P>(f, ra.v[k], rg.v[k], rb.v[k], rr.v[k], sa.v[k], sb.v[k], sh.v[k]);
    } else {
      P sa, sb, sh;
      channel_values(f, (i / per) % c, sa, sb, sh);
#pragma unroll
      for (int k = 0; k < V; ++k)
        o.v[k] = affine_element<T, P>(f, ra.v[k], rg.v[k], rb.v[k], rr.v[k], sa, sb, sh);
    }
    store_pack<T, V>(f.out, static_cast<int>(i), o);
  }
}

void channel_affine(const backend::ChannelAffine& args) {
  const Nc3 d = dims_of(args.out);
  const int64_t total = d.n * d.c * d.s;
  if (total == 0) return;
  const cudaStream_t st = stream(args.out.device);
  dispatch_norm(args.out.dtype, args.scale_a, "channel_affine", [&](auto t, auto p) {
    using T = decltype(t);
    using P = decltype(p);
    const auto data = [](const View& v) { return static_cast<const T*>(v.data); };
    const auto chan = [](const View& v) { return static_cast<const P*>(v.data); };
    const AffineOperands<T, P> f{static_cast<T*>(args.out.data),
                                 data(args.a),
                                 chan(args.scale_a),
                                 data(args.gate),
                                 data(args.b),
                                 chan(args.scale_b),
                                 chan(args.shift),
                                 data(args.residual),
                                 args.relu};
    constexpr int kV = static_cast<int>(16 / sizeof(T));
    const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
    // the channels-innermost packs load V per-channel values of P at a time too
    const auto channel_aligned = [](const void* q) {
      return reinterpret_cast<uintptr_t>(q) % (sizeof(P) * kV) == 0;
    };
    const bool inner = d.s == 1 && d.c % kV == 0 && channel_aligned(f.sa) &&
                       channel_aligned(f.sb) && channel_aligned(f.shift);
    const bool planes = d.s % kV == 0;
    const int64_t packs = total / kV;
    if ((inner || planes) && packs <= std::numeric_limits<int32_t>::max() && aligned(f.out) &&
        aligned(f.a) && aligned(f.gate) && aligned(f.b) && aligned(f.res)) {
      const auto run = [&](auto kernel, int64_t per) {
        kernel<<<grid_for(packs), kBlock, 0, st>>>(f, static_cast<uint32_t>(packs),
                                                   static_cast<uint32_t>(per),
                                                   static_cast<uint32_t>(d.c));
        EMBER_CUDA_LAUNCH_CHECK();
      };
      if (inner)
        run(affine_pack_kernel<T, P, kV, true>, d.c / kV);
      else
        run(affine_pack_kernel<T, P, kV, false>, d.s / kV);
      return;
    }
    affine_kernel<T, P><<<grid_for(total), kBlock, 0, st>>>(f, total, d.s, d.c);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

// ---- batch norm's per-channel arithmetic (Note [Batch norm's per-channel arithmetic in one
// kernel] in src/kernels/norm.hpp): a thread per channel ----
template <typename P>
struct PreparePointers {
  P *invstd, *scale, *shift, *running_mean, *running_var;
  const P *mean, *var, *weight, *bias;
  double eps, momentum, unbias;
};

template <typename P>
__global__ void prepare_kernel(PreparePointers<P> p, int64_t c) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= c) return;
  const kernels::BatchNormChannel<P> r = kernels::batch_norm_channel<P>(
      p.mean[j], p.var[j], p.weight ? p.weight + j : nullptr, p.bias ? p.bias + j : nullptr,
      p.running_mean ? p.running_mean + j : nullptr, p.running_var ? p.running_var + j : nullptr,
      p.eps, p.momentum, p.unbias);
  p.invstd[j] = r.invstd;
  p.scale[j] = r.scale;
  p.shift[j] = r.shift;
}

template <typename P>
struct BackwardPreparePointers {
  P *scale_g, *scale_x, *shift, *grad_weight, *grad_bias;
  const P *sum_g, *sum_gx, *mean, *invstd, *weight;
  double inv_m;
  bool training;
};

template <typename P>
__global__ void backward_prepare_kernel(BackwardPreparePointers<P> p, int64_t c) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= c) return;
  const P sg = p.sum_g[j], sgx = p.sum_gx[j], r = p.invstd[j];
  const kernels::BatchNormBackwardChannel<P> k = kernels::batch_norm_backward_channel<P>(
      sg, sgx, p.mean[j], r, p.weight ? p.weight + j : nullptr, p.inv_m, p.training);
  if (p.scale_g) p.scale_g[j] = k.scale_g;
  if (p.scale_x) p.scale_x[j] = k.scale_x;
  if (p.shift) p.shift[j] = k.shift;
  if (p.grad_weight) p.grad_weight[j] = kernels::bn_mul(sgx, r);
  if (p.grad_bias) p.grad_bias[j] = sg;
}

void batch_norm_prepare(const backend::BatchNormPrepare& p) {
  const int64_t c = p.mean.shape[0];
  if (c == 0) return;
  dispatch_float(p.mean.dtype, "batch_norm_prepare", [&](auto tag) {
    using P = typename decltype(tag)::type;
    const auto io = [](const View& v) { return static_cast<P*>(v.data); };
    const bool update = p.training && p.running_mean.data && p.running_var.data;
    const PreparePointers<P> k{io(p.invstd),
                               io(p.scale),
                               io(p.shift),
                               update ? io(p.running_mean) : nullptr,
                               update ? io(p.running_var) : nullptr,
                               io(p.mean),
                               io(p.var),
                               io(p.weight),
                               io(p.bias),
                               p.eps,
                               p.momentum,
                               p.unbias};
    prepare_kernel<P>
        <<<static_cast<unsigned>((c + kBlock - 1) / kBlock), kBlock, 0, stream(p.mean.device)>>>(k,
                                                                                                 c);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void batch_norm_backward_prepare(const backend::BatchNormBackwardPrepare& p) {
  const int64_t c = p.mean.shape[0];
  if (c == 0) return;
  dispatch_float(p.mean.dtype, "batch_norm_backward_prepare", [&](auto tag) {
    using P = typename decltype(tag)::type;
    const auto io = [](const View& v) { return static_cast<P*>(v.data); };
    const BackwardPreparePointers<P> k{
        io(p.scale_g), io(p.scale_x), io(p.shift),  io(p.grad_weight), io(p.grad_bias), io(p.sum_g),
        io(p.sum_gx),  io(p.mean),    io(p.invstd), io(p.weight),      p.inv_m,         p.training};
    backward_prepare_kernel<P>
        <<<static_cast<unsigned>((c + kBlock - 1) / kBlock), kBlock, 0, stream(p.mean.device)>>>(k,
                                                                                                 c);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace ember::cuda
