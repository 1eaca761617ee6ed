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
#include "kernels/elementwise.hpp"

namespace ember::cuda {
namespace {

constexpr int kMaxRows = 8;
constexpr int kWarpsPerBlock = 8;

template <typename T, int M>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    few_rows_kernel(T* __restrict c, int64_t ldc, const T* __restrict x, int64_t ldx,
                    const T* __restrict w, int64_t ldw, const T* __restrict bias,
                    const T* __restrict residual, int64_t n, int64_t k, backend::GemmEpilogue act) {
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
      const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x + r * ldx) + ch);
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

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

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
  const bool half = g.dtype == DType::bf16 || g.dtype == DType::f16;
  if (!half || g.c_f32 || g.batch != 1 || g.m < 1 || g.m > 4 || g.trans_a || !g.trans_b ||
      g.alpha != 1.0 || g.beta != 0.0 || g.bias_grad || g.relu_mask_out || g.relu_mask_in ||
      g.gelu_pre_out || g.gelu_pre_in || g.k % 8 != 0 || g.k == 0 || g.lda % 8 != 0 ||
      g.ldb % 8 != 0 || !aligned16(g.a) || !aligned16(g.b))
    return false;
  if (g.dtype == DType::bf16)
    launch_rows<__nv_bfloat16>(g);
  else
    launch_rows<__half>(g);
  return true;
}

}  // namespace ember::cuda
