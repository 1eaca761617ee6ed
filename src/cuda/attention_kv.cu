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
#include "cuda/launch.cuh"
#include "cuda/loops.cuh"
#include "kernels/attention.hpp"
#include "kernels/rotary.hpp"

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

// Query n of a launch: its position in the batch, its key head and its row's cached length.
struct Query {
  int64_t i, h, b, hk, past;
};

// Query n's coordinates, and the new rows into the caches by the first block of each key
// head's group (i = 0, split 0); false when the row's cache length is out of range (reported
// once: Note [Deferred device errors]).
template <typename T>
__device__ bool start_query(const KvCacheAttentionArgs& a, int64_t n, int64_t split,
                            DeviceError* error, Query& q) {
  q.i = n % a.len_q;
  q.h = n / a.len_q % a.heads;
  q.b = n / (a.len_q * a.heads);
  const int64_t group = a.heads / a.kv_heads;
  q.hk = q.h / group;
  q.past = a.seqlens[q.b];
  if (q.past < 0 || q.past + a.len_q > a.capacity) {
    if (threadIdx.x == 0 && q.h == 0 && q.i == 0 && split == 0)
      report_device_error(error, kKvCacheLength, 2, q.past, q.b, a.capacity - a.len_q + 1);
    return false;
  }
  if (q.i == 0 && q.h % group == 0 && split == 0) {  // this key head's new rows into the caches
    const T* k = static_cast<const T*>(a.k);
    const T* v = static_cast<const T*>(a.v);
    T* kd = static_cast<T*>(a.k_cache);
    T* vd = static_cast<T*>(a.v_cache);
    for (int64_t t = 0; t < a.len_q; ++t) {
      T* krow = kd + kernels::kv_offset(a.k_cache_strides, q.b, q.hk, q.past + t);
      const T* knew = k + kernels::kv_offset(a.k_strides, q.b, q.hk, t);
      if (a.rotary_cos) {  // Note [Rotary embedding in the attention kernel]
        using C = Compute<T>;
        const int64_t half = a.head_dim / 2,
                      r = q.b * a.rotary_strides[0] + t * a.rotary_strides[1];
        const T* cos = static_cast<const T*>(a.rotary_cos) + r;
        const T* sin = static_cast<const T*>(a.rotary_sin) + r;
        for (int64_t e = threadIdx.x; e < half; e += blockDim.x) {
          C ra, rb;
          kernels::rotary_pair(ra, rb, cast<C>(knew[e * a.k_strides[3]]),
                               cast<C>(knew[(e + half) * a.k_strides[3]]), cast<C>(cos[e]),
                               cast<C>(cos[e + half]), cast<C>(sin[e]), cast<C>(sin[e + half]));
          krow[e * a.k_cache_strides[3]] = cast<T>(ra);
          krow[(e + half) * a.k_cache_strides[3]] = cast<T>(rb);
        }
      } else {
        for (int64_t e = threadIdx.x; e < a.head_dim; e += blockDim.x)
          krow[e * a.k_cache_strides[3]] = knew[e * a.k_strides[3]];
      }
      for (int64_t e = threadIdx.x; e < a.head_dim_v; e += blockDim.x)
        vd[kernels::kv_offset(a.v_cache_strides, q.b, q.hk, q.past + t) +
           e * a.v_cache_strides[3]] =
            v[kernels::kv_offset(a.v_strides, q.b, q.hk, t) + e * a.v_strides[3]];
    }
  }
  return true;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    kv_split_kernel(KvCacheAttentionArgs a, void* partials, int* counters, DeviceError* error) {
  using A = Compute<T>;
  const int64_t n = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  Query qu;
  if (!start_query<T>(a, n, split, error, qu)) return;
  const int64_t i = qu.i, h = qu.h, b = qu.b, hk = qu.hk, past = qu.past;
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
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

// Note [Decode attention with its loads up front]
// kv_split_kernel's block waits on global memory several times in a row (q, then the keys,
// then, after the softmax's reductions, the values), each a round trip to DRAM or L2: at
// decode, a few keys a block, those waits are the kernel's time. For 16-bit rows that are
// contiguous and 16-byte aligned with a head dim D of 32, 64, 96 or 128 (GPT-2's and Llama's),
// kv_rows_kernel issues every load of its block at once: the kLanesPerKey threads of key j
// each hold D/4 dims of q, of key j and of value j (16-byte chunks c ≡ part mod 4, as
// partial_dot assigns them, so the scores are summed in kv_split_kernel's order). Each warp then
// takes its 8 keys' softmax alone (maximum, weights and sums by shuffles) and its weighted
// value sums, and the warps' states are merged once through shared memory (OnlineSoftmax::
// merge, warp order) into the split's partial state or, with one split, the output. One
// __syncthreads instead of six; the partials and their merge are kv_split_kernel's.
// Note [Rotary embedding in the attention kernel]
// A Llama layer's decode step rotated q and the new key with two rotary_embedding launches
// between its q/k/v product and the attention: with KVCacheAttentionOptions::rotary_cos / sin
// (flash-attn's flash_attn_with_kvcache takes the same) kv_rows_kernel rotates them as it loads
// them. rotate_half pairs element e with e + D/2: for D = 64 and 128 a thread's chunks c and
// c + kChunks/2 (dims 8·(part + 4c) and D/2 further) hold both halves of its pairs, so each
// pair is rotated in registers with the table rows of its position, by kernels::rotary_pair
// in f32 and rounded to T as the rotary kernel rounds it (then used as the rotated tensor would
// be: bit for bit the two launches' result). The block that writes the new keys into the cache
// (start_query) writes them rotated. Other head dims and dtypes take the composite
// (kv_cache_rotary_fits false: the op rotates first).
template <typename T, int kChunks>
__device__ __forceinline__ void rotate_chunks(uint4 (&v)[kChunks], const KvCacheAttentionArgs& a,
                                              int64_t b, int64_t t, int part) {
  constexpr int kHalf = kChunks / 2;  // chunks between a pair's two elements, in a thread's list
  const int64_t r = b * a.rotary_strides[0] + t * a.rotary_strides[1];
  const uint4* cos4 = reinterpret_cast<const uint4*>(static_cast<const T*>(a.rotary_cos) + r);
  const uint4* sin4 = reinterpret_cast<const uint4*>(static_cast<const T*>(a.rotary_sin) + r);
#pragma unroll
  for (int c = 0; c < kHalf; ++c) {
    const int lo = part + c * kLanesPerKey, hi = part + (c + kHalf) * kLanesPerKey;
    const uint4 cl = __ldg(cos4 + lo), ch = __ldg(cos4 + hi), sl = __ldg(sin4 + lo),
                sh = __ldg(sin4 + hi);
    T* x = reinterpret_cast<T*>(&v[c]);
    T* y = reinterpret_cast<T*>(&v[c + kHalf]);
    const T* cla = reinterpret_cast<const T*>(&cl);
    const T* cha = reinterpret_cast<const T*>(&ch);
    const T* sla = reinterpret_cast<const T*>(&sl);
    const T* sha = reinterpret_cast<const T*>(&sh);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      float ra, rb;
      kernels::rotary_pair(ra, rb, cast<float>(x[u]), cast<float>(y[u]), cast<float>(cla[u]),
                           cast<float>(cha[u]), cast<float>(sla[u]), cast<float>(sha[u]));
      x[u] = cast<T>(ra);
      y[u] = cast<T>(rb);
    }
  }
}

template <typename T, int D, bool kRotary>
__global__ void __launch_bounds__(kThreads)
    kv_rows_kernel(KvCacheAttentionArgs a, void* partials, int* counters, DeviceError* error) {
  constexpr int kChunks = D / 8 / kLanesPerKey;  // 16-byte chunks of a row a thread holds
  chain_enter();  // launched chained (Note [Chained launches] in launch.cuh)
  const int64_t n = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  Query qu;
  if (!start_query<T>(a, n, split, error, qu)) return;
  const int64_t last = qu.past + qu.i, first_key = split * kSplit;
  if (first_key > last) return;  // the merge reads no such split
  const int local = threadIdx.x / kLanesPerKey, part = threadIdx.x % kLanesPerKey;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t j = first_key + local;
  const bool* mask_row = a.key_mask ? a.key_mask + qu.b * a.key_mask_len : nullptr;
  const bool allowed =
      j <= last && kernels::kv_key_allowed(j, qu.i, qu.past, mask_row, a.key_mask_len);
  // Every load of the block first: q's, the key's and the value's chunks of this part.
  const uint4* q4 = reinterpret_cast<const uint4*>(
      static_cast<const T*>(a.q) + kernels::kv_offset(a.q_strides, qu.b, qu.h, qu.i));
  uint4 qv[kChunks], kv[kChunks], vv[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) qv[c] = __ldg(q4 + part + c * kLanesPerKey);
  if (allowed) {
    const uint4* k4 = reinterpret_cast<const uint4*>(
        kernels::kv_row(static_cast<const T*>(a.k_cache), a.k_cache_strides,
                        static_cast<const T*>(a.k), a.k_strides, qu.b, qu.hk, j, qu.past));
    const uint4* v4 = reinterpret_cast<const uint4*>(
        kernels::kv_row(static_cast<const T*>(a.v_cache), a.v_cache_strides,
                        static_cast<const T*>(a.v), a.v_strides, qu.b, qu.hk, j, qu.past));
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      kv[c] = k4[part + c * kLanesPerKey];
      vv[c] = v4[part + c * kLanesPerKey];
    }
  }
  if constexpr (kRotary) {  // Note [Rotary embedding in the attention kernel]
    rotate_chunks<T, kChunks>(qv, a, qu.b, qu.i, part);
    if (allowed && j >= qu.past) rotate_chunks<T, kChunks>(kv, a, qu.b, j - qu.past, part);
  }
  const float scale = static_cast<float>(a.scale);
  float s = 0.f;
  if (allowed) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const T* qh = reinterpret_cast<const T*>(&qv[c]);
      const T* kh = reinterpret_cast<const T*>(&kv[c]);
#pragma unroll
      for (int t = 0; t < 8; ++t) s += cast<float>(qh[t]) * scale * cast<float>(kh[t]);
    }
  }
#pragma unroll
  for (int o = 1; o < kLanesPerKey; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  // The warp's keys: maximum, weights, their sum and the weighted value sums (each dim summed
  // over the warp's keys by the lanes of the same part).
  const float neg_inf = -INFINITY;
  float m = allowed ? s : neg_inf;
  for (int o = kLanesPerKey; o < 32; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const float p = allowed ? expf(s - m) : 0.f;
  float l = p;
  for (int o = kLanesPerKey; o < 32; o <<= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
  float acc[kChunks * 8];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const T* vh = reinterpret_cast<const T*>(&vv[c]);
#pragma unroll
    for (int t = 0; t < 8; ++t) acc[c * 8 + t] = allowed ? p * cast<float>(vh[t]) : 0.f;
  }
#pragma unroll
  for (int d = 0; d < kChunks * 8; ++d)
    for (int o = kLanesPerKey; o < 32; o <<= 1) acc[d] += __shfl_xor_sync(0xffffffffu, acc[d], o);
  __shared__ float s_m[kWarps], s_l[kWarps];
  __shared__ float s_acc[kWarps][D];
  if (lane < kLanesPerKey) {  // lane == part: this warp's sums of the part's dims
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
#pragma unroll
      for (int t = 0; t < 8; ++t) s_acc[warp][8 * (part + c * kLanesPerKey) + t] = acc[c * 8 + t];
    if (lane == 0) {
      s_m[warp] = m;
      s_l[warp] = l;
    }
  }
  __syncthreads();
  // The warps' states merged in warp order; thread e < D takes dim e.
  const int used = static_cast<int>(last / kSplit + 1);  // the splits holding keys <= the last
  const DeviceExp exp_fn;
  kernels::OnlineSoftmax<float> total;
  float out = 0.f;
  for (int w = 0; w < kWarps; ++w) {
    kernels::OnlineSoftmax<float> piece;
    piece.max = s_m[w];
    piece.sum = s_l[w];
    piece.any = s_l[w] > 0.f;
    const auto step = total.merge(piece, exp_fn);
    if (piece.any && threadIdx.x < D)
      out = out * step.rescale + step.weight * s_acc[w][threadIdx.x];
  }
  if (splits == 1) {
    if (threadIdx.x < D)
      static_cast<T*>(a.out)[((qu.b * a.heads + qu.h) * a.len_q + qu.i) * D + threadIdx.x] =
          cast<T>(out / total.sum);
    return;
  }
  float* state = partial_of<float>(partials, n, split, splits, D);
  if (threadIdx.x == 0) {
    state[0] = total.any ? total.max : neg_inf;
    state[1] = total.any ? total.sum : 0.f;
  }
  if (threadIdx.x < D) state[2 + threadIdx.x] = total.any ? out : 0.f;
  arrive<T>(a, partials, counters, n, splits, used);
}

// What kv_rows_kernel takes (Note [Decode attention with its loads up front]).
bool rows_kernel_fits(const KvCacheAttentionArgs& a) {
  auto rows_16 = [](const void* p, const int64_t* st) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0 && st[3] == 1 && st[0] % 8 == 0 &&
           st[1] % 8 == 0 && st[2] % 8 == 0;
  };
  return (a.dtype == DType::bf16 || a.dtype == DType::f16) && a.head_dim == a.head_dim_v &&
         (a.head_dim == 32 || a.head_dim == 64 || a.head_dim == 96 || a.head_dim == 128) &&
         rows_16(a.q, a.q_strides) && rows_16(a.k, a.k_strides) && rows_16(a.v, a.v_strides) &&
         rows_16(a.k_cache, a.k_cache_strides) && rows_16(a.v_cache, a.v_cache_strides);
}

// Where kv_rows_kernel rotates q and the new keys itself (Note [Rotary embedding in the
// attention kernel]): head dims 64 and 128, the tables' rows 16-byte aligned.
bool rotary_fits(const KvCacheAttentionArgs& a) {
  return rows_kernel_fits(a) && (a.head_dim == 64 || a.head_dim == 128) &&
         reinterpret_cast<uintptr_t>(a.rotary_cos) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.rotary_sin) % 16 == 0 && a.rotary_strides[0] % 8 == 0 &&
         a.rotary_strides[1] % 8 == 0;
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

bool kv_cache_rotary_fits(const KvCacheAttentionArgs& a) { return rotary_fits(a); }

bool kv_cache_attention(const KvCacheAttentionArgs& a) {
  EMBER_ASSERT(a.rotary_cos == nullptr || rotary_fits(a),
               "attention_with_kv_cache: rotary tables for operands kv_rows_kernel does not take");
  EMBER_ASSERT(a.head_dim <= kMaxDim && a.head_dim_v <= kMaxDim,
               "attention_with_kv_cache: head dims above ", kMaxDim);
  const int64_t rows = a.batch * a.heads * a.len_q;
  if (rows == 0) return true;
  const int64_t splits = (a.capacity + kSplit - 1) / kSplit;
  DeviceError* error = device_error_record(a.device);
  const cudaStream_t s = stream(a.device);
  const bool rows_kernel = rows_kernel_fits(a);
  dispatch_any_float(a.dtype, "attention_with_kv_cache", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Compute<T>;
    const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(splits));
    // The kernel for this launch: kv_rows_kernel where it fits (Note [Decode attention with its
    // loads up front]), else kv_split_kernel.
    auto launch = [&](void* partials, int* counters) {
      if constexpr (sizeof(T) == 2) {
        if (rows_kernel) {
          auto go = [&](auto dim) {
            constexpr int D = decltype(dim)::value;
            if constexpr (D == 64 || D == 128) {
              if (a.rotary_cos) {
                launch_chained<kv_rows_kernel<T, D, true>>(grid, kThreads, s, a, partials, counters,
                                                           error);
                return;
              }
            }
            launch_chained<kv_rows_kernel<T, D, false>>(grid, kThreads, s, a, partials, counters,
                                                        error);
          };
          switch (a.head_dim) {
            case 32: go(std::integral_constant<int, 32>{}); break;
            case 64: go(std::integral_constant<int, 64>{}); break;
            case 96: go(std::integral_constant<int, 96>{}); break;
            default: go(std::integral_constant<int, 128>{}); break;
          }
          return;  // launch_chained checks its launch
        }
      }
      kv_split_kernel<T><<<grid, kThreads, 0, s>>>(a, partials, counters, error);
      EMBER_CUDA_LAUNCH_CHECK();
    };
    if (splits == 1) {
      launch(nullptr, nullptr);
      return;
    }
    const Scratch partials(a.device,
                           static_cast<size_t>(rows * splits * (a.head_dim_v + 2)) * sizeof(A));
    int* counters = rows <= kMaxCounters ? arrival_counters(a.device, s) : nullptr;
    launch(partials.get(), counters);
    if (counters == nullptr) {
      kv_merge_kernel<T><<<static_cast<unsigned>(rows), 64, 0, s>>>(a, partials.get(), splits);
      EMBER_CUDA_LAUNCH_CHECK();
    }
  });
  return true;
}

}  // namespace ember::cuda
