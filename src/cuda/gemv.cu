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
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

// Output column blockIdx.x · (kWarpsPerBlock / kParts) + warp / kParts of C for the M rows of x
// (shared memory when kShared, else global memory read through the read-only cache); warp part
// p = warp % kParts sums the chunks p·32 + lane, + 32·kParts, ..., loading kBatch of them at
// a time, and part 0 adds the others' sums in part order (Note [Products of a few rows]).
// `prologue` runs after the first batch's loads are issued and before x is read (the norm
// kernel normalises its rows there); every thread of the block calls it.
template <typename T, int M, bool kShared, int kParts, int kBatch, typename Prologue>
__device__ __forceinline__ void few_rows_column(T* __restrict c, int64_t ldc, const T* __restrict x,
                                                int64_t ldx, const T* __restrict w, int64_t ldw,
                                                const T* __restrict bias,
                                                const T* __restrict residual, int64_t n, int64_t k,
                                                backend::GemmEpilogue act, Prologue prologue) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, part = warp % kParts;
  constexpr int kColumns = kWarpsPerBlock / kParts;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kColumns;
  const int64_t j = j0 + warp / kParts;
  // Note [Chained launches] in launch.cuh: the block's weight rows into L2 before the wait.
  chain_release();
  if (threadIdx.x < kColumns && j0 + threadIdx.x < n)
    prefetch_l2(w + (j0 + threadIdx.x) * ldw, static_cast<uint32_t>(k * sizeof(T)));
  chain_wait();
  const bool live = j < n;
  const uint4* wrow = reinterpret_cast<const uint4*>(w + (live ? j : 0) * ldw);
  const int64_t chunks = live ? k / 8 : 0;
  constexpr int64_t kStep = 32 * kParts;
  const int64_t first = part * 32 + lane;
  uint4 wv[kBatch];
  auto load = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t ch = base + u * kStep;
      if (ch < chunks) wv[u] = __ldg(wrow + ch);
    }
  };
  load(first);
  prologue();
  float acc[M];
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = 0.f;
  for (int64_t base = first; base < chunks; base += kStep * kBatch) {
    uint4 cur[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) cur[u] = wv[u];
    if (base + kStep * kBatch < chunks) load(base + kStep * kBatch);
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t ch = base + u * kStep;
      if (ch >= chunks) break;
      const T* wh = reinterpret_cast<const T*>(&cur[u]);
      float wf[8];
#pragma unroll
      for (int t = 0; t < 8; ++t) wf[t] = cast<float>(wh[t]);
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
        for (int t = 0; t < 8; ++t) acc[r] += wf[t] * cast<float>(xh[t]);
      }
    }
  }
  if (live) {
#pragma unroll
    for (int r = 0; r < M; ++r)
      for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
  }
  if constexpr (kParts > 1) {
    __shared__ float sums[kWarpsPerBlock][M];
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < M; ++r) sums[warp][r] = acc[r];
    }
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int r = 0; r < M; ++r)
      for (int q = 1; q < kParts; ++q) acc[r] += sums[warp + q][r];
  }
  if (!live || lane != 0) return;
  const float b = bias ? cast<float>(bias[j]) : 0.f;
#pragma unroll
  for (int r = 0; r < M; ++r) {
    float y = acc[r] + b;
    if (act == backend::GemmEpilogue::relu)
      y = y > 0.f ? y : 0.f;
    else if (act == backend::GemmEpilogue::gelu_tanh)
      y = 0.5f * y * (1.f + tanhf(kernels::gelu_tanh_inner(y)));
    if (residual) y += cast<float>(residual[r * ldc + j]);
    c[r * ldc + j] = cast<T>(y);
  }
}

// Weight loads a lane keeps in flight: four 16-byte chunks for one or two rows of x, two for
// more (the loads of x for each chunk grow with the rows).
constexpr int batch_for(int m) { return m <= 2 ? 4 : 2; }

template <typename T, int M, int kParts>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    few_rows_kernel(T* __restrict c, int64_t ldc, const T* __restrict x, int64_t ldx,
                    const T* __restrict w, int64_t ldw, const T* __restrict bias,
                    const T* __restrict residual, int64_t n, int64_t k, backend::GemmEpilogue act) {
  few_rows_column<T, M, false, kParts, batch_for(M)>(c, ldc, x, ldx, w, ldw, bias, residual, n, k,
                                                     act, [] {});
}

// Note [A norm in front of a few rows]
// A pre-norm block feeds each linear a normalised copy of its input: at decode a layer_norm (or
// rms_norm) kernel of a few rows, then the few-rows product reading what it wrote. Here the
// product's block normalises the M rows itself (warp r takes row r, in shared memory), with
// its first weight loads already issued, before its warps compute their columns from there:
// one launch instead of two, and the normalised rows never reach global memory. Every block
// repeats the norm of the M rows (a few KB read from L2 against the weight rows it streams).
// The rows are normalised by normalize_row_by_warp (src/cuda/norm_rows.cuh) in the order the
// norm's register-row kernel uses and rounded to T as it rounds them, and the product then
// runs as few_rows_kernel's: where the norm kernel takes a row in registers (n up to 1024 for
// 16-bit types) the result is that of the two kernels, bit for bit. Taken for what
// few_rows_gemm takes, with the norm's parameters in x's dtype and the M rows fitting
// kNormSharedBytes of shared memory.
constexpr int64_t kNormSharedBytes = 48 << 10;

template <typename T, int M, kernels::NormKind kKind, int kParts>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    norm_rows_kernel(T* __restrict c, int64_t ldc, const T* __restrict x, int64_t ldx,
                     const T* __restrict norm_w, const T* __restrict norm_b, double eps,
                     const T* __restrict w, int64_t ldw, const T* __restrict bias,
                     const T* __restrict residual, int64_t n, int64_t k,
                     backend::GemmEpilogue act) {
  extern __shared__ uint4 normed_rows[];  // [M, k] of T
  T* xs = reinterpret_cast<T*>(normed_rows);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  few_rows_column<T, M, true, kParts, batch_for(M)>(
      c, ldc, xs, k, w, ldw, bias, residual, n, k, act, [&] {
        for (int r = warp; r < M; r += kWarpsPerBlock)
          normalize_row_by_warp<kKind, T, T, kPackElems<T>>(xs + r * k, x + r * ldx, norm_w, norm_b,
                                                            static_cast<int>(k), eps, lane);
        __syncthreads();
      });
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

// Calls fn with std::integral_constant<int, M> for M = g.m (1..4) and with
// std::integral_constant<int, kParts> for g.k.
template <typename Fn>
void with_rows_and_parts(const GemmArgs& g, Fn&& fn) {
  auto parts = [&](auto rows) {
    if (parts_for(g.k) == 4)
      fn(rows, std::integral_constant<int, 4>{});
    else
      fn(rows, std::integral_constant<int, 1>{});
  };
  switch (g.m) {
    case 1: return parts(std::integral_constant<int, 1>{});
    case 2: return parts(std::integral_constant<int, 2>{});
    case 3: return parts(std::integral_constant<int, 3>{});
    default: return parts(std::integral_constant<int, 4>{});
  }
}

unsigned blocks_for(const GemmArgs& g, int parts) {
  const int64_t columns = kWarpsPerBlock / parts;
  return static_cast<unsigned>((g.n + columns - 1) / columns);
}

template <typename T>
void launch_few_rows(const GemmArgs& g) {
  with_rows_and_parts(g, [&](auto rows, auto parts) {
    constexpr int M = decltype(rows)::value, kParts = decltype(parts)::value;
    launch_chained<few_rows_kernel<T, M, kParts>>(
        dim3(blocks_for(g, kParts)), kWarpsPerBlock * 32, stream(g.device), static_cast<T*>(g.c),
        g.ldc, static_cast<const T*>(g.a), g.lda, static_cast<const T*>(g.b), g.ldb,
        static_cast<const T*>(g.bias), static_cast<const T*>(g.residual), g.n, g.k, g.epilogue);
  });
}

template <typename T, kernels::NormKind kKind>
void launch_norm_rows(const GemmArgs& g, const backend::RowNorm& norm, unsigned shared) {
  with_rows_and_parts(g, [&](auto rows, auto parts) {
    constexpr int M = decltype(rows)::value, kParts = decltype(parts)::value;
    launch_chained_shared<norm_rows_kernel<T, M, kKind, kParts>>(
        dim3(blocks_for(g, kParts)), kWarpsPerBlock * 32, shared, stream(g.device),
        static_cast<T*>(g.c), g.ldc, static_cast<const T*>(g.a), g.lda,
        static_cast<const T*>(norm.weight), static_cast<const T*>(norm.bias), norm.eps,
        static_cast<const T*>(g.b), g.ldb, static_cast<const T*>(g.bias),
        static_cast<const T*>(g.residual), g.n, g.k, g.epilogue);
  });
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

bool norm_linear(const GemmArgs& g, const backend::RowNorm& norm) {
  const int64_t shared = g.m * g.k * static_cast<int64_t>(element_size(g.dtype));
  if (!few_rows_fits(g) || g.lda != g.k || shared > kNormSharedBytes || g.k > INT32_MAX ||
      (norm.weight && !aligned16(norm.weight)) || (norm.bias && !aligned16(norm.bias)) ||
      (norm.rms && norm.bias))
    return false;
  const auto bytes = static_cast<unsigned>(shared);
  using K = kernels::NormKind;
  if (g.dtype == DType::bf16) {
    if (norm.rms)
      launch_norm_rows<__nv_bfloat16, K::rms>(g, norm, bytes);
    else
      launch_norm_rows<__nv_bfloat16, K::layer>(g, norm, bytes);
  } else {
    if (norm.rms)
      launch_norm_rows<__half, K::rms>(g, norm, bytes);
    else
      launch_norm_rows<__half, K::layer>(g, norm, bytes);
  }
  return true;
}

}  // namespace ember::cuda
