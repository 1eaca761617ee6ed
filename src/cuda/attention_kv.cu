// src/cuda/attention_kv.cu — attention_with_kv_cache on CUDA (Note [Attention over a KV cache]
// in src/kernels/attention.hpp).
//
// One block of kWarps warps per query (b, h, i). The warps take the allowed keys in turn: for
// each key the 32 lanes hold the head dims e = lane + 32·r of q (r < kMaxPerLane, so head dims
// up to 256), multiply them with the key's, sum across the warp with shuffles and update the
// warp's running softmax and weighted values (OnlineSoftmax, in f32, f64 for f64). At the end
// the warps' states are merged through shared memory and rounded once into out. The first
// query head of each key head's group (i = 0) also writes the T new keys and values into the
// caches: no block reads those rows (keys at or after seqlens[b] come from k and v), so
// nothing orders the writes against the reads. seqlens is read on the device only, so the
// kernel can sit in a captured graph and be replayed at a new position each step. A row whose
// seqlens[b] + T does not fit the cache writes nothing and reports a deferred device error
// (Note [Deferred device errors]).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/device_error.cuh"
#include "cuda/loops.cuh"
#include "kernels/attention.hpp"

namespace ember::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 8;  // head dims up to 32 · 8 = 256

struct DeviceExp {
  __device__ float operator()(float x) const { return expf(x); }
  __device__ double operator()(double x) const { return exp(x); }
};

template <typename A>
__device__ inline A warp_sum(A x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32)
    kv_attention_kernel(KvCacheAttentionArgs a, DeviceError* error) {
  using A = Compute<T>;
  const int64_t n = blockIdx.x;
  const int64_t i = n % a.len_q, h = n / a.len_q % a.heads, b = n / (a.len_q * a.heads);
  const int64_t group = a.heads / a.kv_heads, hk = h / group;
  const int64_t past = a.seqlens[b];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (past < 0 || past + a.len_q > a.capacity) {
    if (threadIdx.x == 0 && h == 0 && i == 0)
      report_device_error(error, kKvCacheLength, 2, past, b, a.capacity - a.len_q + 1);
    return;
  }
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  if (i == 0 && h % group == 0) {  // this key head's new rows into the caches
    T* kd = static_cast<T*>(a.k_cache);
    T* vd = static_cast<T*>(a.v_cache);
    for (int64_t t = 0; t < a.len_q; ++t) {
      for (int64_t e = threadIdx.x; e < a.head_dim; e += blockDim.x)
        kd[kernels::kv_offset(a.k_cache_strides, b, hk, past + t) + e * a.k_cache_strides[3]] =
            k[kernels::kv_offset(a.k_strides, b, hk, t) + e * a.k_strides[3]];
      for (int64_t e = threadIdx.x; e < a.head_dim_v; e += blockDim.x)
        vd[kernels::kv_offset(a.v_cache_strides, b, hk, past + t) + e * a.v_cache_strides[3]] =
            v[kernels::kv_offset(a.v_strides, b, hk, t) + e * a.v_strides[3]];
    }
  }
  const T* qrow = static_cast<const T*>(a.q) + kernels::kv_offset(a.q_strides, b, h, i);
  A qv[kMaxPerLane], acc[kMaxPerLane];
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int64_t e = lane + 32 * r;
    qv[r] = e < a.head_dim ? cast<A>(qrow[e * a.q_strides[3]]) * static_cast<A>(a.scale) : A(0);
    acc[r] = A(0);
  }
  const bool* mask_row = a.key_mask ? a.key_mask + b * a.key_mask_len : nullptr;
  kernels::OnlineSoftmax<A> sm;
  const DeviceExp exp_fn;
  for (int64_t j = warp; j <= past + i; j += kWarps) {
    if (!kernels::kv_key_allowed(j, i, past, mask_row, a.key_mask_len)) continue;
    const T* krow = kernels::kv_row(kc, a.k_cache_strides, k, a.k_strides, b, hk, j, past);
    const int64_t ks = j < past ? a.k_cache_strides[3] : a.k_strides[3];
    A s = 0;
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
      const int64_t e = lane + 32 * r;
      if (e < a.head_dim) s += qv[r] * cast<A>(krow[e * ks]);
    }
    s = warp_sum(s);
    const auto step = sm.add(s, exp_fn);
    const T* vrow = kernels::kv_row(vc, a.v_cache_strides, v, a.v_strides, b, hk, j, past);
    const int64_t vs = j < past ? a.v_cache_strides[3] : a.v_strides[3];
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
      const int64_t e = lane + 32 * r;
      if (e < a.head_dim_v) acc[r] = acc[r] * step.rescale + step.weight * cast<A>(vrow[e * vs]);
    }
  }
  // Merge the warps: each publishes its state, warp 0 folds them in order.
  __shared__ A s_max[kWarps], s_sum[kWarps];
  __shared__ bool s_any[kWarps];
  __shared__ A s_acc[kWarps][32 * kMaxPerLane];
  if (lane == 0) {
    s_max[warp] = sm.max;
    s_sum[warp] = sm.sum;
    s_any[warp] = sm.any;
  }
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) s_acc[warp][lane + 32 * r] = acc[r];
  __syncthreads();
  if (warp != 0) return;
  kernels::OnlineSoftmax<A> total;
  A out_acc[kMaxPerLane];
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) out_acc[r] = A(0);
  for (int w = 0; w < kWarps; ++w) {
    kernels::OnlineSoftmax<A> part;
    part.max = s_max[w];
    part.sum = s_sum[w];
    part.any = s_any[w];
    const auto step = total.merge(part, exp_fn);
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r)
      out_acc[r] = out_acc[r] * step.rescale + step.weight * s_acc[w][lane + 32 * r];
  }
  T* orow = static_cast<T*>(a.out) + ((b * a.heads + h) * a.len_q + i) * a.head_dim_v;
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int64_t e = lane + 32 * r;
    if (e < a.head_dim_v) orow[e] = cast<T>(out_acc[r] / total.sum);
  }
}

}  // namespace

bool kv_cache_attention(const KvCacheAttentionArgs& a) {
  EMBER_ASSERT(a.head_dim <= 32 * kMaxPerLane && a.head_dim_v <= 32 * kMaxPerLane,
               "attention_with_kv_cache: head dims above ", 32 * kMaxPerLane);
  const int64_t blocks = a.batch * a.heads * a.len_q;
  if (blocks == 0) return true;
  DeviceError* error = device_error_record(a.device);
  const cudaStream_t s = stream(a.device);
  dispatch_any_float(a.dtype, "attention_with_kv_cache", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kv_attention_kernel<T><<<static_cast<unsigned>(blocks), kWarps * 32, 0, s>>>(a, error);
    EMBER_CUDA_LAUNCH_CHECK();
  });
  return true;
}

}  // namespace ember::cuda
