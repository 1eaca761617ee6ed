// src/cuda/attention_kv.cu — attention_with_kv_cache on CUDA (Note [Attention over a KV cache]
// in src/kernels/attention.hpp).
//
// Note [Decode attention in key splits]
// At decode (one query per row) a block per query head leaves a 132-SM GPU nearly idle and
// walks the keys in dependent rounds of global loads: 14 µs at 16 cached positions, 21 µs at
// 200. Instead each query (b, h, i) gets one block per kSplit keys of the cache's capacity
// (the grid is fixed by shapes, never by the positions held, which only the device reads, so
// the launch can sit in a captured graph replayed at a new position each step); a block whose
// keys all lie past the query's last key returns at once. A block issues its loads together:
// q into shared memory (f32, scaled), then every key row of its split (kLanesPerKey threads a
// key, 16-byte loads when rows are contiguous), the scores and their maximum and sum in shared
// memory, then the value rows (warp w takes keys w, w + kWarps, ...; lane e's dims e + 32·r)
// summed across warps. With one split (a capacity of at most kSplit) the block writes the
// output; otherwise it writes its partial state (maximum, sum, Ev sums; f32, or f64 for f64)
// and the splits up to the query's last key are merged (OnlineSoftmax::merge) and rounded once
// into out by the last of them to finish: each adds one to the query's arrival counter (a
// per-device array that every launch leaves at zero) after a fence, and the block that brings
// it to the number of splits holding keys merges and sets it back to 0, so a decode layer's
// attention is one kernel (a merge kernel was 12 more launches a GPT-2 token; it stays for
// launches of more than kMaxCounters queries, and when the counters would first be made inside
// a capture). The first block of each key head's group (i = 0, split 0) also writes
// the T new keys and values into the caches: no block reads those rows (keys at or after
// seqlens[b] come from k and v), so nothing orders the writes against the reads. A row whose
// seqlens[b] + T does not fit the cache writes nothing and reports a deferred device error
// (Note [Deferred device errors]).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <mutex>

#include "cuda/common.cuh"
#include "cuda/device_error.cuh"
#include "cuda/loops.cuh"
#include "kernels/attention.hpp"

namespace ember::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kSplit = 64;                       // keys per block
constexpr int kLanesPerKey = kThreads / kSplit;  // threads forming one key's score
constexpr int kMaxDim = 256;                     // head dims up to 256
constexpr int kMaxPerLane = kMaxDim / 32;        // value dims a lane sums
constexpr int kMaxCounters = 1 << 16;            // queries a launch merges without a kernel
constexpr int kMaxDevices = 64;

struct DeviceExp {
  __device__ float operator()(float x) const { return expf(x); }
  __device__ double operator()(double x) const { return exp(x); }
};

template <typename A>
__device__ inline A block_reduce(A x, A* scratch, bool is_max) {
  for (int o = 16; o > 0; o >>= 1) {
    const A y = __shfl_xor_sync(0xffffffffu, x, o);
    x = is_max ? (y > x ? y : x) : x + y;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) scratch[warp] = x;  // each reduction of a block has a scratch of its own
  __syncthreads();
  A r = scratch[0];
  for (int w = 1; w < kWarps; ++w) r = is_max ? (scratch[w] > r ? scratch[w] : r) : r + scratch[w];
  return r;
}

// This thread's share of q·k: dims in chunks of 8 (16-byte loads when the row is contiguous
// and aligned), chunk c to part c % kLanesPerKey; else single dims e ≡ part.
template <typename T, typename A>
__device__ inline A partial_dot(const A* q, const T* k, int64_t E, int64_t stride, int part) {
  A s = 0;
  if (stride == 1 && sizeof(T) == 2 && E % 8 == 0 && reinterpret_cast<uintptr_t>(k) % 16 == 0) {
    const uint4* k4 = reinterpret_cast<const uint4*>(k);
    for (int64_t c = part; c < E / 8; c += kLanesPerKey) {
      const uint4 w = k4[c];
      const T* h = reinterpret_cast<const T*>(&w);
#pragma unroll
      for (int t = 0; t < 8; ++t) s += q[8 * c + t] * cast<A>(h[t]);
    }
  } else {
    for (int64_t e = part; e < E; e += kLanesPerKey) s += q[e] * cast<A>(k[e * stride]);
  }
  return s;
}

// Partial state of one (query, split): the maximum, the sum, then Ev weighted sums.
template <typename A>
__device__ inline A* partial_of(void* scratch, int64_t n, int64_t split, int64_t splits,
                                int64_t ev) {
  return static_cast<A*>(scratch) + (n * splits + split) * (ev + 2);
}

template <typename T>
__device__ void merge_splits(const KvCacheAttentionArgs& a, const void* partials, int64_t splits,
                             int64_t n);

// After a block's partial is written: with arrival counters, the last of query n's `used`
// splits to arrive merges them all and sets the counter back to 0 for the next launch.
template <typename T>
__device__ void arrive(const KvCacheAttentionArgs& a, void* partials, int* counters, int64_t n,
                       int64_t splits, int64_t used) {
  if (counters == nullptr) return;
  __shared__ bool s_last;
  __syncthreads();  // every thread's share of the partial is written
  if (threadIdx.x == 0) {
    __threadfence();  // ... and visible before the arrival is
    const int arrived = atomicAdd(counters + n, 1) + 1;
    s_last = arrived == (used < splits ? used : splits);
    if (s_last) counters[n] = 0;
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();  // the other splits' partials, seen through their fences
  merge_splits<T>(a, partials, splits, n);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    kv_split_kernel(KvCacheAttentionArgs a, void* partials, int* counters, DeviceError* error) {
  using A = Compute<T>;
  const int64_t n = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  const int64_t i = n % a.len_q, h = n / a.len_q % a.heads, b = n / (a.len_q * a.heads);
  const int64_t group = a.heads / a.kv_heads, hk = h / group;
  const int64_t past = a.seqlens[b];
  if (past < 0 || past + a.len_q > a.capacity) {
    if (threadIdx.x == 0 && h == 0 && i == 0 && split == 0)
      report_device_error(error, kKvCacheLength, 2, past, b, a.capacity - a.len_q + 1);
    return;
  }
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  if (i == 0 && h % group == 0 && split == 0) {  // this key head's new rows into the caches
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
  const int64_t last = past + i, first_key = split * kSplit;  // keys first_key .. + kSplit - 1
  if (first_key > last) return;                               // the merge reads no such split
  const int64_t keys = last - first_key + 1 < kSplit ? last - first_key + 1 : kSplit;
  __shared__ A s_q[kMaxDim];
  __shared__ A s_p[kSplit];  // scores
  __shared__ A s_w[kSplit];  // their weights exp(score - max)
  __shared__ A s_max[kWarps], s_sum[kWarps];
  __shared__ A s_acc[kWarps][kMaxDim];
  const T* qrow = static_cast<const T*>(a.q) + kernels::kv_offset(a.q_strides, b, h, i);
  for (int64_t e = threadIdx.x; e < a.head_dim; e += blockDim.x)
    s_q[e] = cast<A>(qrow[e * a.q_strides[3]]) * static_cast<A>(a.scale);
  __syncthreads();
  const bool* mask_row = a.key_mask ? a.key_mask + b * a.key_mask_len : nullptr;
  const A neg_inf = -INFINITY;
  // Scores: kLanesPerKey neighbouring threads per key.
  {
    const int local = threadIdx.x / kLanesPerKey, part = threadIdx.x % kLanesPerKey;
    const int64_t j = first_key + local;
    const bool allowed =
        local < keys && kernels::kv_key_allowed(j, i, past, mask_row, a.key_mask_len);
    A s = 0;
    if (allowed) {
      const T* krow = kernels::kv_row(kc, a.k_cache_strides, k, a.k_strides, b, hk, j, past);
      s = partial_dot<T, A>(s_q, krow, a.head_dim, j < past ? a.k_cache_strides[3] : a.k_strides[3],
                            part);
    }
#pragma unroll
    for (int o = 1; o < kLanesPerKey; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (part == 0) s_p[local] = allowed ? s : neg_inf;
  }
  __syncthreads();
  const DeviceExp exp_fn;
  const A mine = threadIdx.x < kSplit ? s_p[threadIdx.x] : neg_inf;
  const A m = block_reduce(mine, s_max, true);
  const int64_t used = last / kSplit + 1;  // the splits holding keys <= the last
  if (m == neg_inf) {                      // no key of this split is seen: an empty partial
    if (threadIdx.x == 0 && splits > 1) {
      A* part = partial_of<A>(partials, n, split, splits, a.head_dim_v);
      part[0] = neg_inf;
      part[1] = 0;
    }
    if (splits > 1) arrive<T>(a, partials, counters, n, splits, used);
    return;
  }
  const A p = threadIdx.x < kSplit && mine != neg_inf ? exp_fn(mine - m) : A(0);
  const A sum = block_reduce(p, s_sum, false);
  if (threadIdx.x < kSplit) s_w[threadIdx.x] = p;
  __syncthreads();
  // Values: warp w sums keys w, w + kWarps, ...; lane dims lane + 32·r.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  A acc[kMaxPerLane];
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) acc[r] = A(0);
#pragma unroll 4
  for (int64_t local = warp; local < keys; local += kWarps) {
    const A pj = s_w[local];
    if (pj == A(0)) continue;  // uniform over the warp
    const int64_t j = first_key + local;
    const T* vrow = kernels::kv_row(vc, a.v_cache_strides, v, a.v_strides, b, hk, j, past);
    const int64_t vs = j < past ? a.v_cache_strides[3] : a.v_strides[3];
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
      const int64_t e = lane + 32 * r;
      if (e < a.head_dim_v) acc[r] += pj * cast<A>(vrow[e * vs]);
    }
  }
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) s_acc[warp][lane + 32 * r] = acc[r];
  __syncthreads();
  if (splits == 1) {
    T* orow = static_cast<T*>(a.out) + ((b * a.heads + h) * a.len_q + i) * a.head_dim_v;
    for (int64_t e = threadIdx.x; e < a.head_dim_v; e += blockDim.x) {
      A total = 0;
      for (int w = 0; w < kWarps; ++w) total += s_acc[w][e];
      orow[e] = cast<T>(total / sum);
    }
    return;
  }
  A* part = partial_of<A>(partials, n, split, splits, a.head_dim_v);
  if (threadIdx.x == 0) {
    part[0] = m;
    part[1] = sum;
  }
  for (int64_t e = threadIdx.x; e < a.head_dim_v; e += blockDim.x) {
    A total = 0;
    for (int w = 0; w < kWarps; ++w) total += s_acc[w][e];
    part[2 + e] = total;
  }
  arrive<T>(a, partials, counters, n, splits, used);
}

// Query n's splits up to its last key, merged in order and rounded once into out, by the
// block's threads (dims e = threadIdx.x, + blockDim.x, ...).
template <typename T>
__device__ void merge_splits(const KvCacheAttentionArgs& a, const void* partials, int64_t splits,
                             int64_t n) {
  using A = Compute<T>;
  const int64_t i = n % a.len_q, h = n / a.len_q % a.heads, b = n / (a.len_q * a.heads);
  const int64_t past = a.seqlens[b];
  const int64_t used = (past + i) / kSplit + 1;  // splits holding keys <= the last
  const DeviceExp exp_fn;
  kernels::OnlineSoftmax<A> total;
  T* orow = static_cast<T*>(a.out) + ((b * a.heads + h) * a.len_q + i) * a.head_dim_v;
  for (int64_t e = threadIdx.x; e < a.head_dim_v; e += blockDim.x) {
    total = {};
    A out = 0;
    for (int64_t sp = 0; sp < used && sp < splits; ++sp) {
      const A* part = partial_of<A>(const_cast<void*>(partials), n, sp, splits, a.head_dim_v);
      kernels::OnlineSoftmax<A> piece;
      piece.max = __ldcg(part);  // written by other blocks: read past L1
      piece.sum = __ldcg(part + 1);
      piece.any = piece.sum > A(0);
      const auto step = total.merge(piece, exp_fn);
      if (piece.any) out = out * step.rescale + step.weight * __ldcg(part + 2 + e);
    }
    orow[e] = cast<T>(out / total.sum);
  }
}

// One block per query (without arrival counters: more queries than kMaxCounters).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    kv_merge_kernel(KvCacheAttentionArgs a, const void* partials, int64_t splits) {
  const int64_t n = blockIdx.x;
  const int64_t past = a.seqlens[n / (a.len_q * a.heads)];
  if (past < 0 || past + a.len_q > a.capacity) return;  // reported by the split kernel
  merge_splits<T>(a, partials, splits, n);
}

// The per-device arrival counters (Note [Decode attention in key splits]): kMaxCounters ints,
// zero between launches, made (and zeroed in stream order) on first use outside a capture.
int* arrival_counters(int device, cudaStream_t s) {
  static std::mutex mutex;
  static int* counters[kMaxDevices] = {};
  EMBER_ASSERT(device >= 0 && device < kMaxDevices, "attention_with_kv_cache: device ", device,
               " out of range");
  std::lock_guard<std::mutex> lock(mutex);
  if (counters[device] == nullptr) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    EMBER_CUDA_CHECK(cudaStreamIsCapturing(s, &capturing));
    if (capturing != cudaStreamCaptureStatusNone) return nullptr;  // the merge kernel instead
    int* c = nullptr;
    EMBER_CUDA_CHECK(cudaMalloc(&c, kMaxCounters * sizeof(int)));
    EMBER_CUDA_CHECK(cudaMemsetAsync(c, 0, kMaxCounters * sizeof(int), s));
    counters[device] = c;  // never freed (256 KB a device)
  }
  return counters[device];
}

}  // namespace

bool kv_cache_attention(const KvCacheAttentionArgs& a) {
  EMBER_ASSERT(a.head_dim <= kMaxDim && a.head_dim_v <= kMaxDim,
               "attention_with_kv_cache: head dims above ", kMaxDim);
  const int64_t rows = a.batch * a.heads * a.len_q;
  if (rows == 0) return true;
  const int64_t splits = (a.capacity + kSplit - 1) / kSplit;
  DeviceError* error = device_error_record(a.device);
  const cudaStream_t s = stream(a.device);
  dispatch_any_float(a.dtype, "attention_with_kv_cache", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Compute<T>;
    const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(splits));
    if (splits == 1) {
      kv_split_kernel<T><<<grid, kThreads, 0, s>>>(a, nullptr, nullptr, error);
      EMBER_CUDA_LAUNCH_CHECK();
      return;
    }
    const Scratch partials(a.device,
                           static_cast<size_t>(rows * splits * (a.head_dim_v + 2)) * sizeof(A));
    int* counters = rows <= kMaxCounters ? arrival_counters(a.device, s) : nullptr;
    kv_split_kernel<T><<<grid, kThreads, 0, s>>>(a, partials.get(), counters, error);
    EMBER_CUDA_LAUNCH_CHECK();
    if (counters == nullptr) {
      kv_merge_kernel<T><<<static_cast<unsigned>(rows), 64, 0, s>>>(a, partials.get(), splits);
      EMBER_CUDA_LAUNCH_CHECK();
    }
  });
  return true;
}

}  // namespace ember::cuda
