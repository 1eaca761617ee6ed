// src/cuda/attention_kv.cu — attention_with_kv_cache on CUDA (Note [Attention over a KV cache]
// in src/kernels/attention.hpp).
//
// One block of kWarps warps per query (b, h, i); q sits in shared memory in f32 (scaled). The
// keys are taken 32 at a time per warp, one key per lane: each lane forms its key's full dot
// product (vector loads when the rows are contiguous), so a warp scores 32 keys at once and the
// loads of many rows are in flight together. The warp then updates its running maximum and sum
// (over the 32 scores) and adds the 32 weighted value rows, its lanes holding the value dims
// e = lane + 32·r (r < kMaxPerLane: head dims up to 256), each row read by the warp in one
// coalesced pass. The warps' states are merged through shared memory at the end (OnlineSoftmax)
// and rounded once into out. The first query head of each key head's group (i = 0) also writes
// the T new keys and values into the caches: no block reads those rows (keys at or after
// seqlens[b] come from k and v), so nothing orders the writes against the reads. seqlens is
// read on the device only, so the kernel can sit in a captured graph and be replayed at a new
// position each step. A row whose seqlens[b] + T does not fit the cache writes nothing and
// reports a deferred device error (Note [Deferred device errors]).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/device_error.cuh"
#include "cuda/loops.cuh"
#include "kernels/attention.hpp"

namespace ember::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxPerLane = 8;  // head dims up to 32 · 8 = 256
constexpr int kChunk = 8;       // value rows loaded together

struct DeviceExp {
  __device__ float operator()(float x) const { return expf(x); }
  __device__ double operator()(double x) const { return exp(x); }
};

template <typename A>
__device__ inline A warp_sum(A x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <typename A>
__device__ inline A warp_max(A x) {
  for (int o = 16; o > 0; o >>= 1) {
    const A y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y > x ? y : x;
  }
  return x;
}

// q·k over E dims: k a row of stride-1 elements (contiguous) or strided.
template <typename T, typename A>
__device__ inline A dot_row(const A* q, const T* k, int64_t E, int64_t stride) {
  A s = 0;
  if (stride == 1 && sizeof(T) == 2 && E % 8 == 0 && reinterpret_cast<uintptr_t>(k) % 16 == 0) {
    const uint4* k4 = reinterpret_cast<const uint4*>(k);
#pragma unroll 4
    for (int64_t c = 0; c < E / 8; ++c) {
      const uint4 w = k4[c];
      const T* h = reinterpret_cast<const T*>(&w);
#pragma unroll
      for (int t = 0; t < 8; ++t) s += q[8 * c + t] * cast<A>(h[t]);
    }
  } else {
    for (int64_t e = 0; e < E; ++e) s += q[e] * cast<A>(k[e * stride]);
  }
  return s;
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
  __shared__ A s_q[32 * kMaxPerLane];
  const T* qrow = static_cast<const T*>(a.q) + kernels::kv_offset(a.q_strides, b, h, i);
  for (int64_t e = threadIdx.x; e < a.head_dim; e += blockDim.x)
    s_q[e] = cast<A>(qrow[e * a.q_strides[3]]) * static_cast<A>(a.scale);
  __syncthreads();
  A acc[kMaxPerLane];
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) acc[r] = A(0);
  const bool* mask_row = a.key_mask ? a.key_mask + b * a.key_mask_len : nullptr;
  kernels::OnlineSoftmax<A> sm;  // the warp's (every lane holds the same state)
  const DeviceExp exp_fn;
  const int64_t last = past + i;  // the last key this query sees
  for (int64_t base = warp * 32; base <= last; base += kWarps * 32) {
    const int64_t j = base + lane;
    const bool allowed = j <= last && kernels::kv_key_allowed(j, i, past, mask_row, a.key_mask_len);
    A s = 0;
    if (allowed) {
      const T* krow = kernels::kv_row(kc, a.k_cache_strides, k, a.k_strides, b, hk, j, past);
      s = dot_row<T, A>(s_q, krow, a.head_dim, j < past ? a.k_cache_strides[3] : a.k_strides[3]);
    }
    const A neg_inf = -INFINITY;
    const A tile_max = warp_max(allowed ? s : neg_inf);
    if (tile_max == neg_inf) continue;  // no key of this tile is seen (uniform over the warp)
    // Fold the tile into the warp's state: the tile's maximum as one score of weight 0 first
    // (it rescales what came before), then each key's weight relative to the new maximum.
    const A m = sm.any && sm.max > tile_max ? sm.max : tile_max;
    const A rescale = sm.any ? exp_fn(sm.max - m) : A(0);
    const A p = allowed ? exp_fn(s - m) : A(0);
    sm.sum = (sm.any ? sm.sum * rescale : A(0)) + warp_sum(p);
    sm.max = m;
    sm.any = true;
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) acc[r] *= rescale;
    // The tile's value rows, kChunk keys at a time: the loads of a chunk are issued together
    // (a key past `last`, or of weight 0, loads nothing and adds 0).
    const int count = static_cast<int>(last - base + 1 < 32 ? last - base + 1 : 32);
    for (int j0 = 0; j0 < count; j0 += kChunk) {
      A pj[kChunk], val[kChunk][kMaxPerLane];
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        pj[c] = __shfl_sync(0xffffffffu, p, (j0 + c) & 31);
        const bool live = j0 + c < count && pj[c] != A(0);
        const int64_t key = base + j0 + c;
        const T* vrow =
            live ? kernels::kv_row(vc, a.v_cache_strides, v, a.v_strides, b, hk, key, past)
                 : nullptr;
        const int64_t vs = key < past ? a.v_cache_strides[3] : a.v_strides[3];
#pragma unroll
        for (int r = 0; r < kMaxPerLane; ++r) {
          const int64_t e = lane + 32 * r;
          val[c][r] = live && e < a.head_dim_v ? cast<A>(vrow[e * vs]) : A(0);
        }
        if (!live) pj[c] = A(0);
      }
#pragma unroll
      for (int c = 0; c < kChunk; ++c)
#pragma unroll
        for (int r = 0; r < kMaxPerLane; ++r) acc[r] += pj[c] * val[c][r];
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
