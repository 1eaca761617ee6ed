// src/cuda/gemv.cu — the product of a few rows with a weight matrix (a decode step's linear
// layers) for f16/bf16, in place of cuBLASLt (Note [Products of a few rows]).
//
// Note [Products of a few rows]
// A decode step multiplies one row per sequence (m = the batch, often 1) by each weight
// matrix: the weights are read once and every byte is used m times, so the product is bound
// by memory bandwidth. cuBLASLt's kernels tile for large m; for m = 1 its heuristic picks
// tiles that read the weights at a fraction of the bandwidth, often with split-K and a
// reduction kernel after. Here one warp computes one output column j for every row: it
// streams W's row j (16-byte loads), multiplies it with each of the m input rows (read through
// the cache: they are small and every warp reads them), sums across the warp in f32, adds the
// bias and applies the activation in f32 (or adds GemmArgs::residual: Note [A residual in the
// product] in src/ops/linalg.cpp), and rounds once into C, as cuBLASLt's epilogues do.
// Taken for !trans_a, trans_b (a linear: C = x·Wᵀ), batch 1, m <= kMaxRows, alpha 1, beta 0,
// no masks, GELU pre-activations or bias gradients, 16-byte aligned rows of a multiple of 8
// elements. The sums run in another order than cuBLASLt's: results differ from it by f32
// rounding before the one rounding into C.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/loops.cuh"
#include "cuda/norm_rows.cuh"
#include "kernels/elementwise.hpp"

namespace ember::cuda {
namespace {

constexpr int kMaxRows = 8;
constexpr int kWarpsPerBlock = 8;

// Output column blockIdx.x · kWarpsPerBlock + warp of C for the M rows of x (shared memory when
// kShared, else global memory read through the read-only cache).
template <typename T, int M, bool kShared>
__device__ __forceinline__ void few_rows_column(T* __restrict c, int64_t ldc, const T* __restrict x,
                                                int64_t ldx, const T* __restrict w, int64_t ldw,
                                                const T* __restrict bias,
                                                const T* __restrict residual, int64_t n, int64_t k,
                                                backend::GemmEpilogue act) {
  const int lane = threadIdx.x % 32;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (j >= n) return;
  float acc[M];
#pragma unroll
  for (int r = 0; r < M; ++r) acc[r] = 0.f;
  const uint4* wrow = reinterpret_cast<const uint4*>(w + j * ldw);
  const int64_t chunks = k / 8;
  for (int64_t ch = lane; ch < chunks; ch += 32) {
    const uint4 wv = wrow[ch];
    const T* wh = reinterpret_cast<const T*>(&wv);
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
#pragma unroll
  for (int r = 0; r < M; ++r)
    for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
  if (lane != 0) return;
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

template <typename T, int M>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    few_rows_kernel(T* __restrict c, int64_t ldc, const T* __restrict x, int64_t ldx,
                    const T* __restrict w, int64_t ldw, const T* __restrict bias,
                    const T* __restrict residual, int64_t n, int64_t k, backend::GemmEpilogue act) {
  few_rows_column<T, M, false>(c, ldc, x, ldx, w, ldw, bias, residual, n, k, act);
}

// Note [A norm in front of a few rows]
// A pre-norm block feeds each linear a normalised copy of its input: at decode a layer_norm (or
// rms_norm) kernel of a few rows, then the few-rows product reading what it wrote. Here the
// product's block normalises the M rows itself (warp r takes row r, in shared memory) before
// its warps compute their columns from there: one launch instead of two, and the normalised
// rows never reach global memory. Every block repeats the norm of the M rows (a few KB read
// from L2 against the weight rows it streams). The rows are normalised by
// normalize_row_by_warp (src/cuda/norm_rows.cuh) in the order the norm's register-row kernel
// uses and rounded to T as it rounds them, and the product then runs as few_rows_kernel's:
// where the norm kernel takes a row in registers (n up to 1024 for 16-bit types) the result
// is that of the two kernels, bit for bit. Taken for what few_rows_gemm takes, with the norm's
// parameters in x's dtype and the M rows fitting kNormSharedBytes of shared memory.
constexpr int64_t kNormSharedBytes = 48 << 10;

template <typename T, int M, kernels::NormKind kKind>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    norm_rows_kernel(T* __restrict c, int64_t ldc, const T* __restrict x, int64_t ldx,
                     const T* __restrict norm_w, const T* __restrict norm_b, double eps,
                     const T* __restrict w, int64_t ldw, const T* __restrict bias,
                     const T* __restrict residual, int64_t n, int64_t k,
                     backend::GemmEpilogue act) {
  extern __shared__ uint4 normed_rows[];  // [M, k] of T
  T* xs = reinterpret_cast<T*>(normed_rows);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < M; r += kWarpsPerBlock)
    normalize_row_by_warp<kKind, T, T, kPackElems<T>>(xs + r * k, x + r * ldx, norm_w, norm_b,
                                                      static_cast<int>(k), eps, lane);
  __syncthreads();
  few_rows_column<T, M, true>(c, ldc, xs, k, w, ldw, bias, residual, n, k, act);
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

template <typename T, int M>
void launch(const GemmArgs& g) {
  const unsigned blocks = static_cast<unsigned>((g.n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  few_rows_kernel<T, M><<<blocks, kWarpsPerBlock * 32, 0, stream(g.device)>>>(
      static_cast<T*>(g.c), g.ldc, static_cast<const T*>(g.a), g.lda, static_cast<const T*>(g.b),
      g.ldb, static_cast<const T*>(g.bias), static_cast<const T*>(g.residual), g.n, g.k,
      g.epilogue);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <typename T>
void launch_rows(const GemmArgs& g) {
  switch (g.m) {
    case 1: return launch<T, 1>(g);
    case 2: return launch<T, 2>(g);
    case 3: return launch<T, 3>(g);
    case 4: return launch<T, 4>(g);
    default: return launch<T, kMaxRows>(g);  // 5..8 rows: the unused ones never read
  }
}

}  // namespace

bool few_rows_gemm(const GemmArgs& g) {
  if (!few_rows_fits(g)) return false;
  if (g.dtype == DType::bf16)
    launch_rows<__nv_bfloat16>(g);
  else
    launch_rows<__half>(g);
  return true;
}

bool norm_linear(const GemmArgs& g, const backend::RowNorm& norm) {
  const int64_t shared = g.m * g.k * static_cast<int64_t>(element_size(g.dtype));
  if (!few_rows_fits(g) || g.lda != g.k || shared > kNormSharedBytes || g.k > INT32_MAX ||
      (norm.weight && !aligned16(norm.weight)) || (norm.bias && !aligned16(norm.bias)) ||
      (norm.rms && norm.bias))
    return false;
  auto go = [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch_m = [&](auto rows) {
      constexpr int M = decltype(rows)::value;
      const unsigned blocks = static_cast<unsigned>((g.n + kWarpsPerBlock - 1) / kWarpsPerBlock);
      auto kernel = norm.rms ? norm_rows_kernel<T, M, kernels::NormKind::rms>
                             : norm_rows_kernel<T, M, kernels::NormKind::layer>;
      kernel<<<blocks, kWarpsPerBlock * 32, static_cast<size_t>(shared), stream(g.device)>>>(
          static_cast<T*>(g.c), g.ldc, static_cast<const T*>(g.a), g.lda,
          static_cast<const T*>(norm.weight), static_cast<const T*>(norm.bias), norm.eps,
          static_cast<const T*>(g.b), g.ldb, static_cast<const T*>(g.bias),
          static_cast<const T*>(g.residual), g.n, g.k, g.epilogue);
      EMBER_CUDA_LAUNCH_CHECK();
    };
    switch (g.m) {
      case 1: return launch_m(std::integral_constant<int, 1>{});
      case 2: return launch_m(std::integral_constant<int, 2>{});
      case 3: return launch_m(std::integral_constant<int, 3>{});
      default: return launch_m(std::integral_constant<int, 4>{});
    }
  };
  if (g.dtype == DType::bf16)
    go(Tag<__nv_bfloat16>{});
  else
    go(Tag<__half>{});
  return true;
}

}  // namespace ember::cuda
