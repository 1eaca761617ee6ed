// src/cuda/gemv.cu — the product of a few rows with a weight matrix (a decode step's linear
// layers) for f16/bf16, in place of cuBLASLt (Note [Products of a few rows]).
//
// Note [Products of a few rows]
// A decode step multiplies one row per sequence (m = the batch, often 1) by each weight
// matrix: the weights are read once and every byte is used m times, so the product is bound
// by memory bandwidth — and, with a GPT-2 layer's 1-5 MB matrices, by how soon the weights'
// DRAM reads start and how many are in flight. cuBLASLt's kernels tile for large m; for m = 1
// its heuristic picks tiles that read the weights at a fraction of the bandwidth, often with
// split-K and a reduction kernel after. Here one warp computes one output column j for every
// row (four warps for rows of kSplitChunks 16-byte chunks or more: 2048 16-bit elements, each
// a quarter of the row, their sums added in the block in part order). Each lane issues its
// loads of W's row j kBatch at a time (16-byte loads; the next batch's before this one's
// sums), so a row of 768 elements (3 chunks a lane) is one DRAM round trip, not three in a
// row; it multiplies them with each of the m input rows (read through the cache: they are
// small and every warp reads them), sums across the warp in f32, adds the bias and applies
// the activation in f32 (or adds GemmArgs::residual: Note [A residual in the product] in
// src/ops/linalg.cpp), and rounds once into C, as cuBLASLt's epilogues do.
// The kernels are launched chained (Note [Chained launches] in launch.cuh): before waiting
// for the kernel ahead, each block asks L2 for its weight rows (prefetch_l2), so the weights'
// DRAM reads overlap the kernel before them (the attention, the previous product).
// Measured on an H100 (docs/benchmarks.md): GPT-2's captured decode at batch 1 from 2,061 to
// 2,550 tokens/s with the attention kernel of Note [Decode attention with its loads up
// front], 2,345 without the loads in batches, the split columns and the prefetch.
// Taken for !trans_a, trans_b (a linear: C = x·Wᵀ), batch 1, m <= 4, alpha 1, beta 0, no
// masks, GELU pre-activations or bias gradients, 16-byte aligned rows of a multiple of 8
// elements. The sums run in another order than cuBLASLt's: results differ from it by f32
// rounding before the one rounding into C.
//
// Note [Weights loaded before the wait]
// A chained kernel may read nothing before chain_wait() that the kernels ahead of it may still
// write (Note [Chained launches]); so the products asked L2 for their weights there and loaded
// them after. Weights a ReadOnlyGuard holds (GemmArgs::b_read_only; models::generate holds the
// model's parameters) are written by nothing queued since the guard's start, and the guard's
// first kernel waits for everything before it (the order_next_launch runtime slot): such a
// product issues its first batch of weight loads before the wait, and waits only before it
// reads x, the bias, the residual or writes C. Blocks resident while the kernel ahead finishes
// (its last wave leaves SMs free) have their weights in registers when it does. Results are
// the same bits. Measured on an H100 (docs/benchmarks.md, seventh session): GPT-2's captured
// decode at batch 1 2,490 → 2,719 tokens/s, the Llama 3.2-1B shape's 731 → 755; capping the
// products at 2-4 blocks an SM so that the next kernel's blocks fit beside them was slower at
// every cap (586-742).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <span>

#include "cuda/device_math.cuh"
#include "cuda/launch.cuh"
#include "cuda/loops.cuh"
#include "cuda/norm_rows.cuh"
#include "kernels/elementwise.hpp"

namespace ember::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// Long rows are summed by kParts warps a column (Note [Products of a few rows]): from
// kSplitChunks 16-byte chunks on (k >= 2048 in 16-bit types), four warps take a column, each a
// quarter of its chunks, so the rows' loads spread over four times the blocks.
constexpr int64_t kSplitChunks = 256;
int parts_for(int64_t k) { return k / 8 >= kSplitChunks ? 4 : 1; }

// The sums of output column j of each of the kW matrices W (j >= n: none) for the M rows of x
// (shared memory when kShared, else global memory read through the read-only cache): warp part
// p = warp % kParts sums the chunks p·32 + lane, + 32·kParts, ..., loading kBatch of them of
// each matrix at a time, and part 0 adds the others' sums in part order (Note [Products of a
// few rows]). `prologue` runs after the first batch's loads are issued and before x is read
// (the norm kernel normalises its rows there); every thread of the block calls it, and reaches
// the block barrier of kParts > 1. True in the one thread that holds the column's sums in acc
// (lane 0 of part 0, j < n).
template <typename T, int M, int kW, bool kShared, int kParts, int kBatch, typename Prologue>
__device__ __forceinline__ bool column_sums(float (&acc)[kW][M], const T* __restrict x, int64_t ldx,
                                            const T* const (&w)[kW], int64_t ldw, int64_t j,
                                            int64_t n, int64_t k, Prologue prologue) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, part = warp % kParts;
  const bool live = j < n;
  const uint4* wrow[kW];
#pragma unroll
  for (int q = 0; q < kW; ++q)
    wrow[q] = reinterpret_cast<const uint4*>(w[q] + (live ? j : 0) * ldw);
  const int64_t chunks = live ? k / 8 : 0;
  constexpr int64_t kStep = 32 * kParts;
  const int64_t first = part * 32 + lane;
  uint4 wv[kW][kBatch];
  auto load = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t ch = base + u * kStep;
#pragma unroll
      for (int q = 0; q < kW; ++q)
        if (ch < chunks) wv[q][u] = __ldg(wrow[q] + ch);
    }
  };
  load(first);
  prologue();
#pragma unroll
  for (int q = 0; q < kW; ++q)
#pragma unroll
    for (int r = 0; r < M; ++r) acc[q][r] = 0.f;
  for (int64_t base = first; base < chunks; base += kStep * kBatch) {
    uint4 cur[kW][kBatch];
#pragma unroll
    for (int q = 0; q < kW; ++q)
#pragma unroll
      for (int u = 0; u < kBatch; ++u) cur[q][u] = wv[q][u];
    if (base + kStep * kBatch < chunks) load(base + kStep * kBatch);
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t ch = base + u * kStep;
      if (ch >= chunks) break;
#pragma unroll
      for (int r = 0; r < M; ++r) {
        const uint4* xp = reinterpret_cast<const uint4*>(x + r * ldx) + ch;
        uint4 xv;
        if constexpr (kShared)
          xv = *xp;
        else
          xv = __ldg(xp);
        const T* xh = reinterpret_cast<const T*>(&xv);
#pragma unroll
        for (int q = 0; q < kW; ++q) {
          const T* wh = reinterpret_cast<const T*>(&cur[q][u]);
#pragma unroll
          for (int t = 0; t < 8; ++t) acc[q][r] += cast<float>(wh[t]) * cast<float>(xh[t]);
        }
      }
    }
  }
  if (live) {
#pragma unroll
    for (int q = 0; q < kW; ++q)
#pragma unroll
      for (int r = 0; r < M; ++r)
        for (int o = 16; o > 0; o >>= 1) acc[q][r] += __shfl_xor_sync(0xffffffffu, acc[q][r], o);
  }
  if constexpr (kParts > 1) {
    __shared__ float sums[kWarpsPerBlock][kW][M];
    if (lane == 0) {
#pragma unroll
      for (int q = 0; q < kW; ++q)
#pragma unroll
        for (int r = 0; r < M; ++r) sums[warp][q][r] = acc[q][r];
    }
    __syncthreads();
    if (part == 0) {
#pragma unroll
      for (int q = 0; q < kW; ++q)
#pragma unroll
        for (int r = 0; r < M; ++r)
          for (int o = 1; o < kParts; ++o) acc[q][r] += sums[warp + o][q][r];
    }
  }
  return live && lane == 0 && part == 0;
}

// One product of a launch: C [M, n] (leading dimension ldc) = act(x·Wᵀ + bias) (+ residual),
// W [n, k] with leading dimension ldw; bias and residual may be null.
template <typename T>
struct Product {
  T* c = nullptr;
  const T* w = nullptr;
  const T* bias = nullptr;
  const T* residual = nullptr;
  int64_t n = 0, ldc = 0, ldw = 0;
  backend::GemmEpilogue act = backend::GemmEpilogue::none;
};

// Column j's value act(acc + bias) (+ residual) of each row, rounded once into C.
template <typename T, int M>
__device__ __forceinline__ void store_column(const Product<T>& p, int64_t j,
                                             const float (&acc)[M]) {
  const float b = p.bias ? cast<float>(p.bias[j]) : 0.f;
#pragma unroll
  for (int r = 0; r < M; ++r) {
    float y = acc[r] + b;
    if (p.act == backend::GemmEpilogue::relu)
      y = y > 0.f ? y : 0.f;
    else if (p.act == backend::GemmEpilogue::gelu_tanh)
      y = 0.5f * y * (1.f + tanhf(kernels::gelu_tanh_inner(y)));
    if (p.residual) y += cast<float>(p.residual[r * p.ldc + j]);
    p.c[r * p.ldc + j] = cast<T>(y);
  }
}

// Weight loads a lane keeps in flight: four 16-byte chunks for one or two rows of x, two for
// more (the loads of x for each chunk grow with the rows).
constexpr int batch_for(int m) { return m <= 2 ? 4 : 2; }

// Output columns blockIdx.x · kColumns + warp / kParts (kColumns = kWarpsPerBlock / kParts).
// `early`: the weights are read-only (GemmArgs::b_read_only), their first batch loaded before
// the wait (Note [Weights loaded before the wait]).
template <typename T, int M, int kParts>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    few_rows_kernel(Product<T> p, const T* __restrict x, int64_t ldx, int64_t k, bool early) {
  constexpr int kColumns = kWarpsPerBlock / kParts;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kColumns;
  // Note [Chained launches] in launch.cuh: the block's weight rows into L2 before the wait.
  chain_release();
  if (threadIdx.x < kColumns && j0 + threadIdx.x < p.n)
    prefetch_l2(p.w + (j0 + threadIdx.x) * p.ldw, static_cast<uint32_t>(k * sizeof(T)));
  if (!early) chain_wait();
  const int64_t j = j0 + threadIdx.x / 32 / kParts;
  float acc[1][M];
  const T* const w[1] = {p.w};
  if (column_sums<T, M, 1, false, kParts, batch_for(M)>(acc, x, ldx, w, p.ldw, j, p.n, k, [&] {
        if (early) chain_wait();  // x, the bias and the residual only after it
      }))
    store_column<T, M>(p, j, acc[0]);
}

// Note [A norm in front of a few rows]
// A pre-norm block feeds each linear a normalised copy of its input: at decode a layer_norm (or
// rms_norm) kernel of a few rows, then the few-rows product reading what it wrote. Here the
// product's block normalises the M rows itself (warp r takes row r, in shared memory), with
// its first weight loads already issued, before its warps compute their columns from there:
// one launch instead of two, and the normalised rows never reach global memory.
// A launch takes up to three products of the same rows (a Llama layer's q, k and v: one launch
// and one norm for three weights, their column groups one list), or, gated, two (gate and up)
// whose values it combines as SwiGLU does, silu(x̂·Gᵀ)·(x̂·Uᵀ): each warp part loads its
// chunks of the gate's row j and of the up's row j together and keeps both sums, and the
// holder rounds each product (with its bias) to T, takes the silu of the gate's, rounds it,
// and rounds the product — what the composite's three kernels compute, in one.
// Each block normalises the rows once (a few KB read from L2) and then takes column groups
// blockIdx.x, + gridDim.x, ..., with no more blocks than the device holds at once
// (resident_blocks); while it computes a group it asks L2 for the next group's weight rows. Before,
// a Llama MLP's 8,192 gate columns were 4,096 blocks each repeating the norm before its loads
// (25.5 µs for 32 MB under Nsight Compute, 16.9 for the plain product of the same size).
// Measured on an H100 (docs/benchmarks.md, sixth session): the Llama 3.2-1B shape's captured
// decode 714 tokens/s against 495 for the earlier kernels in the same call (one norm-in-front
// launch per product, a block per column group); the gated launch 34 µs for the MLP's 64 MB
// (two separate gate and up launches with the silu and multiply after: 641 tokens/s), q, k and
// v 14 µs; one block per column group instead of the resident count, 673.
// The rows are normalised by normalize_row_by_warp (src/cuda/norm_rows.cuh) in the order the
// norm's register-row kernel uses and rounded to T as it rounds them, and the products then
// run as few_rows_kernel's: where the norm kernel takes a row in registers (n up to 1024 for
// 16-bit types) the result is that of the separate kernels, bit for bit. Taken for what
// few_rows_gemm takes, with the norm's parameters in x's dtype and the M rows fitting
// kNormSharedBytes of shared memory.
constexpr int64_t kNormSharedBytes = 48 << 10;
constexpr int kMaxProducts = 3;

// A launch's products and where each one's column groups start in the launch's list of groups.
template <typename T>
struct NormProducts {
  Product<T> p[kMaxProducts];
  int64_t first_group[kMaxProducts + 1] = {};  // first_group[count] = every group
  int count = 0;
};

// The product and column of warp slot `slot` (0 .. kColumns - 1) in column group `group`, in
// order through the products (gated: the column of both products, 0 returned).
template <typename T, int kColumns, bool kGated>
__device__ __forceinline__ int slot_column(const NormProducts<T>& ps, int64_t group, int slot,
                                           int64_t& j) {
  int p = 0;
  if constexpr (!kGated)
    while (p + 1 < ps.count && group >= ps.first_group[p + 1]) ++p;
  j = (group - ps.first_group[p]) * kColumns + slot;
  return p;
}

// Asks L2 for column group `group`'s weight rows, one row a thread (gated: both products').
template <typename T, int kColumns, bool kGated>
__device__ __forceinline__ void prefetch_group(const NormProducts<T>& ps, int64_t group,
                                               int64_t k) {
  constexpr int kRows = kGated ? 2 * kColumns : kColumns;
  if (threadIdx.x >= kRows || group >= ps.first_group[ps.count]) return;
  int64_t j = 0;
  const int which = slot_column<T, kColumns, kGated>(ps, group, threadIdx.x % kColumns, j);
  const Product<T>& p = ps.p[kGated ? threadIdx.x / kColumns : which];
  if (j < p.n) prefetch_l2(p.w + j * p.ldw, static_cast<uint32_t>(k * sizeof(T)));
}

// Gated, each warp part loads its chunks of both the gate's and the up's row j together (two
// products' sums in one pass, half the batch of each).
template <int M, bool kGated>
constexpr int norm_batch() {
  return kGated ? (batch_for(M) > 2 ? batch_for(M) / 2 : 1) : batch_for(M);
}

template <typename T, int M, kernels::NormKind kKind, int kParts, bool kGated>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    norm_rows_kernel(NormProducts<T> ps, const T* __restrict x, int64_t ldx,
                     const T* __restrict norm_w, const T* __restrict norm_b, double eps, int64_t k,
                     bool early) {
  extern __shared__ uint4 normed_rows[];  // [M, k] of T
  T* xs = reinterpret_cast<T*>(normed_rows);
  constexpr int kColumns = kWarpsPerBlock / kParts, kW = kGated ? 2 : 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, slot = warp / kParts;
  const int64_t groups = ps.first_group[ps.count];
  chain_release();
  prefetch_group<T, kColumns, kGated>(ps, blockIdx.x, k);
  if (!early) chain_wait();  // else in the first group's prologue, after its first loads
  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const bool first = group == blockIdx.x;
    prefetch_group<T, kColumns, kGated>(ps, group + gridDim.x, k);
    int64_t j = 0;
    const Product<T>& p = ps.p[slot_column<T, kColumns, kGated>(ps, group, slot, j)];
    const T* w[kW];
    w[0] = p.w;
    if constexpr (kGated) w[kW - 1] = ps.p[1].w;
    float acc[kW][M];
    const bool holder = column_sums<T, M, kW, true, kParts, norm_batch<M, kGated>()>(
        acc, xs, k, w, p.ldw, j, p.n, k, [&] {
          if (!first) return;  // the rows stay normalised in shared memory
          if (early) chain_wait();
          for (int r = warp; r < M; r += kWarpsPerBlock)
            normalize_row_by_warp<kKind, T, T, kPackElems<T>>(
                xs + r * k, x + r * ldx, norm_w, norm_b, static_cast<int>(k), eps, lane);
          __syncthreads();
        });
    if constexpr (kGated) {
      // Each product rounded to T with its bias, then silu and the multiply, as the composite.
      if (holder) {
        const Product<T>& up = ps.p[1];
        const float bg = p.bias ? cast<float>(p.bias[j]) : 0.f;
        const float bu = up.bias ? cast<float>(up.bias[j]) : 0.f;
#pragma unroll
        for (int r = 0; r < M; ++r) {
          const float g = cast<float>(cast<T>(acc[0][r] + bg));
          const float u = cast<float>(cast<T>(acc[kW - 1][r] + bu));
          const float s = cast<float>(cast<T>(
              kernels::unary_apply<DeviceMath, float, kernels::UnaryOp::silu>(g, 0.f, 0.f)));
          p.c[r * p.ldc + j] = cast<T>(s * u);
        }
      }
    } else if (holder) {
      store_column<T, M>(p, j, acc[0]);
    }
    if constexpr (kParts > 1) __syncthreads();  // the parts' sums read before the next group's
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// What few_rows_kernel computes (Note [Products of a few rows]).
bool few_rows_fits(const GemmArgs& g) {
  const bool half = g.dtype == DType::bf16 || g.dtype == DType::f16;
  return half && !g.c_f32 && g.batch == 1 && g.m >= 1 && g.m <= 4 && !g.trans_a && g.trans_b &&
         g.alpha == 1.0 && g.beta == 0.0 && !g.bias_grad && !g.relu_mask_out && !g.relu_mask_in &&
         !g.gelu_pre_out && !g.gelu_pre_in && g.k % 8 == 0 && g.k != 0 && g.lda % 8 == 0 &&
         g.ldb % 8 == 0 && aligned16(g.a) && aligned16(g.b);
}

// Calls fn with std::integral_constant<int, M> for M = m (1..4) and with
// std::integral_constant<int, kParts> for kParts = parts (1 or 4).
template <typename Fn>
void with_rows_and_parts(int64_t m, int parts_of_k, Fn&& fn) {
  auto parts = [&](auto rows) {
    if (parts_of_k == 4)
      fn(rows, std::integral_constant<int, 4>{});
    else
      fn(rows, std::integral_constant<int, 1>{});
  };
  switch (m) {
    case 1: return parts(std::integral_constant<int, 1>{});
    case 2: return parts(std::integral_constant<int, 2>{});
    case 3: return parts(std::integral_constant<int, 3>{});
    default: return parts(std::integral_constant<int, 4>{});
  }
}

template <typename T>
Product<T> product_of(const GemmArgs& g) {
  return {static_cast<T*>(g.c),
          static_cast<const T*>(g.b),
          static_cast<const T*>(g.bias),
          static_cast<const T*>(g.residual),
          g.n,
          g.ldc,
          g.ldb,
          g.epilogue};
}

template <typename T>
void launch_few_rows(const GemmArgs& g) {
  with_rows_and_parts(g.m, parts_for(g.k), [&](auto rows, auto parts) {
    constexpr int M = decltype(rows)::value, kParts = decltype(parts)::value;
    const int64_t columns = kWarpsPerBlock / kParts;
    launch_chained<few_rows_kernel<T, M, kParts>>(
        dim3(static_cast<unsigned>((g.n + columns - 1) / columns)), kWarpsPerBlock * 32,
        stream(g.device), product_of<T>(g), static_cast<const T*>(g.a), g.lda, g.k, g.b_read_only);
  });
}

template <typename T, kernels::NormKind kKind, bool kGated>
void launch_norm_rows(std::span<const GemmArgs> gs, const backend::RowNorm& norm, unsigned shared) {
  const GemmArgs& g = gs.front();
  with_rows_and_parts(g.m, parts_for(g.k), [&](auto rows, auto parts) {
    constexpr int M = decltype(rows)::value, kParts = decltype(parts)::value;
    constexpr int64_t kColumns = kWarpsPerBlock / kParts;
    NormProducts<T> ps;
    ps.count = kGated ? 2 : static_cast<int>(gs.size());
    for (int i = 0; i < ps.count; ++i) {
      ps.p[i] = product_of<T>(gs[static_cast<size_t>(i)]);
      const int64_t groups = kGated && i == 1 ? 0 : (ps.p[i].n + kColumns - 1) / kColumns;
      ps.first_group[i + 1] = ps.first_group[i] + groups;
    }
    constexpr auto kernel = norm_rows_kernel<T, M, kKind, kParts, kGated>;
    const int64_t groups = ps.first_group[ps.count];
    // Note [A norm in front of a few rows]: no more blocks than the device holds at once.
    const int64_t blocks =
        std::min(groups, resident_blocks<kernel, kWarpsPerBlock * 32>(g.device, shared));
    bool early = true;  // every weight of the launch read-only
    for (int i = 0; i < ps.count; ++i) early = early && gs[static_cast<size_t>(i)].b_read_only;
    launch_chained_shared<kernel>(dim3(static_cast<unsigned>(blocks)), kWarpsPerBlock * 32, shared,
                                  stream(g.device), ps, static_cast<const T*>(g.a), g.lda,
                                  static_cast<const T*>(norm.weight),
                                  static_cast<const T*>(norm.bias), norm.eps, g.k, early);
  });
}

template <typename T, kernels::NormKind kKind>
void launch_norm_rows(std::span<const GemmArgs> gs, const backend::RowNorm& norm, bool gated,
                      unsigned shared) {
  if (gated)
    launch_norm_rows<T, kKind, true>(gs, norm, shared);
  else
    launch_norm_rows<T, kKind, false>(gs, norm, shared);
}

}  // namespace

bool few_rows_gemm(const GemmArgs& g) {
  if (!few_rows_fits(g)) return false;
  if (g.dtype == DType::bf16)
    launch_few_rows<__nv_bfloat16>(g);
  else
    launch_few_rows<__half>(g);
  return true;
}

bool norm_linear(int, std::span<const GemmArgs> gs, const backend::RowNorm& norm, bool swiglu) {
  if (gs.empty() || gs.size() > static_cast<size_t>(kMaxProducts) || (swiglu && gs.size() != 2))
    return false;
  const GemmArgs& g = gs.front();
  for (const GemmArgs& o : gs) {
    const bool same_rows = o.dtype == g.dtype && o.device == g.device && o.m == g.m && o.k == g.k &&
                           o.a == g.a && o.lda == g.lda;
    const bool gated_ok =
        !swiglu || (o.n == g.n && o.epilogue == backend::GemmEpilogue::none && !o.residual);
    if (!few_rows_fits(o) || !same_rows || !gated_ok) return false;
  }
  const int64_t shared = g.m * g.k * static_cast<int64_t>(element_size(g.dtype));
  if (g.lda != g.k || shared > kNormSharedBytes || g.k > INT32_MAX ||
      (norm.weight && !aligned16(norm.weight)) || (norm.bias && !aligned16(norm.bias)) ||
      (norm.rms && norm.bias))
    return false;
  const auto bytes = static_cast<unsigned>(shared);
  using K = kernels::NormKind;
  if (g.dtype == DType::bf16) {
    if (norm.rms)
      launch_norm_rows<__nv_bfloat16, K::rms>(gs, norm, swiglu, bytes);
    else
      launch_norm_rows<__nv_bfloat16, K::layer>(gs, norm, swiglu, bytes);
  } else {
    if (norm.rms)
      launch_norm_rows<__half, K::rms>(gs, norm, swiglu, bytes);
    else
      launch_norm_rows<__half, K::layer>(gs, norm, swiglu, bytes);
  }
  return true;
}

}  // namespace ember::cuda
