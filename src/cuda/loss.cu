// src/cuda/loss.cu — fused softmax cross-entropy with class-index targets on CUDA,
// forward and backward (the contract is beside the slots in src/backend/slots.def; the
// formulas are the CPU kernel's, src/cpu/loss.cpp).
//
// Shape letters: logits [N, C] contiguous f32/f64/f16/bf16, target [N] contiguous i64/i32.
// forward:  a group of G threads per row (Note [Cross-entropy in one pass]) reads the row once
//           in chunks of 8 classes, keeping a running max m, Σ exp(x - m) rescaled whenever m
//           grows, and Σ x when label smoothing needs it; the group merges its threads' sums in a
//           fixed order and writes lse[i] and loss_rows[i]. A label outside [0, C) that is not
//           ignore_index is recorded in the deferred error record (Note [Deferred device
//           errors] in device_error.cuh) and its row's loss is NaN. When a reduced loss is
//           asked for, one 256-thread block then sums the rows and counts the non-ignored
//           ones in a fixed order (deterministic) and writes total (and count): two launches,
//           no host sync.
// backward: the same groups write gi_c = s·(exp(x_c - lse) - ε/C) - [c == t]·s·(1-ε), with s
//           read on the device (grad_loss[i], or grad_loss[] / count[]), reading each logits row
//           once and writing each gradient row once.
//
// Note [Cross-entropy in one pass]
// GPT-2's logits are [16384, 50304] bf16, 1.65 GB: the forward is bound by reading them once
// (~0.45 ms on the H200), the backward by reading them and writing the gradient once (~0.9 ms).
// The earlier kernels (a warp per row, a max pass then a sum pass, 2-byte loads) took 1.11 ms
// and 0.95 ms.
// - One pass: each thread keeps (m, s = Σ exp(x - m)); a chunk whose max exceeds m first
//   rescales s by exp(m_old - m_new) (rare after a thread's first chunks). Threads merge their
//   (m, s) pairs the same way.
// - Width: G = 256 (a block per row) when C >= 2048: 50304 classes give each thread 25 chunks,
//   and 16384 short blocks keep the SMs evenly busy to the end, where a warp per row leaves
//   ~2.6 waves of long rows. G = 32 for C in (64, 2048), G = 8 for C <= 64.
// - Thread j of a row's group takes chunks j, j + G, j + 2G, ... of 8 classes (two chunks'
//   loads in flight), loaded as 16-byte packs where the row is 16-byte aligned (f32: two packs,
//   f64: four) and element by element otherwise (odd C, an offset view, the row's last partial
//   chunk). A chunk is summed in A (Compute<T>), then added to the thread's f64 sums; the group
//   merges by a fixed butterfly, then (G = 256) warp by warp in order. The mapping and every
//   rounding depend on C alone, not on T or on alignment: 16-bit logits give bitwise what their
//   f32 cast gives (Note [Cross-entropy of 16-bit logits] in src/ops/loss.cpp), and the
//   element-by-element fallback bitwise what the packed loads give. Runs are deterministic.
// - Precision: the exps are expf (__expf, tried first, put lse up to ~2e-6 off to save 0.03 ms
//   of GPT-2's 0.64 ms forward on the H200: it is bound by reading the logits); lse is within a
//   few ulp of the f64-summed two-pass form the CPU computes (tests/test_cross_entropy_fast.cpp
//   holds the loss to 2e-6 relative plus 2e-6 of the largest loss).
// - NaN and infinities as the two-pass form: the running max skips NaN (fmax) but a NaN logit's
//   exp makes s, lse and the row's loss NaN; +inf gives exp(inf - inf) = NaN; a row of -inf
//   only gets NaN (the two-pass form's exp(-inf - -inf)); -inf beside finite logits adds 0.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/device_error.cuh"
#include "cuda/loops.cuh"
#include "ember/error.hpp"

namespace ember::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kChunk = 8;        // classes a thread takes at once: 16 bytes of bf16/f16
constexpr int kNarrowGroup = 8;  // threads per row when C <= kNarrowGroup * kChunk
constexpr int64_t kWideRow = kBlock * kChunk;  // from this C on, a block per row

// A chunk of T as 32-bit words, moved in 16-byte loads and stores (bf16/f16: one, f32: two,
// f64: four).
template <typename T>
constexpr int kWords = static_cast<int>(sizeof(T)) * kChunk / 4;

__device__ __forceinline__ bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// max in which NaN loses (fmax): a NaN reaches the sum of exponentials instead.
template <typename A>
__device__ __forceinline__ A max_skip_nan(A a, A b) {
  if constexpr (std::is_same_v<A, float>)
    return fmaxf(a, b);
  else
    return fmax(a, b);
}

// The forward's exp (Note [Cross-entropy in one pass]): expf for f32, exp for f64.
template <typename A>
__device__ __forceinline__ A sum_exp(A x) {
  if constexpr (std::is_same_v<A, float>)
    return expf(x);
  else
    return exp(x);
}

// The chunk's words (16-byte aligned) and back, as values in A: bitwise cast<A>(T) and cast<T>(A).
template <typename T>
__device__ __forceinline__ void load_words(uint32_t (&w)[kWords<T>], const T* p) {
  const uint4* q = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < kWords<T> / 4; ++i) {
    const uint4 u = q[i];
    w[4 * i] = u.x;
    w[4 * i + 1] = u.y;
    w[4 * i + 2] = u.z;
    w[4 * i + 3] = u.w;
  }
}

template <typename T>
__device__ __forceinline__ void store_words(T* p, const uint32_t (&w)[kWords<T>]) {
  uint4* q = reinterpret_cast<uint4*>(p);
#pragma unroll
  for (int i = 0; i < kWords<T> / 4; ++i)
    q[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
}

template <typename T, typename A>
__device__ __forceinline__ void unpack(A (&v)[kChunk], const uint32_t (&w)[kWords<T>]) {
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      v[i] = __uint_as_float(i % 2 == 0 ? w[i / 2] << 16 : w[i / 2] & 0xffff0000u);
    else if constexpr (std::is_same_v<T, __half>)
      v[i] =
          __half2float(__ushort_as_half(static_cast<unsigned short>(w[i / 2] >> (16 * (i % 2)))));
    else if constexpr (std::is_same_v<T, float>)
      v[i] = __uint_as_float(w[i]);
    else
      v[i] = __hiloint2double(static_cast<int>(w[2 * i + 1]), static_cast<int>(w[2 * i]));
  }
}

template <typename T, typename A>
__device__ __forceinline__ void pack(uint32_t (&w)[kWords<T>], const A (&v)[kChunk]) {
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    if constexpr (std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>) {
      const T h = cast<T>(v[i]);
      uint32_t b;
      if constexpr (std::is_same_v<T, __nv_bfloat16>)
        b = __bfloat16_as_ushort(h);
      else
        b = __half_as_ushort(h);
      w[i / 2] = i % 2 == 0 ? b : w[i / 2] | b << 16;
    } else if constexpr (std::is_same_v<T, float>) {
      w[i] = __float_as_uint(v[i]);
    } else {
      const int64_t b = __double_as_longlong(v[i]);
      w[2 * i] = static_cast<uint32_t>(b);
      w[2 * i + 1] = static_cast<uint32_t>(static_cast<uint64_t>(b) >> 32);
    }
  }
}

// Classes [8k, 8k + 8) of `row` (C = c classes) in A; those past the row's end are -inf (they
// add nothing to a max or to Σ exp). `packed`: the row is 16-byte aligned.
template <typename T, typename A>
__device__ __forceinline__ void load_chunk(A (&v)[kChunk], const T* __restrict row, int64_t k,
                                           int64_t c, bool packed) {
  const int64_t j0 = k * kChunk;
  if (packed && j0 + kChunk <= c) {
    uint32_t w[kWords<T>];
    load_words(w, row + j0);
    unpack<T>(v, w);
  } else {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) v[i] = j0 + i < c ? cast<A>(row[j0 + i]) : A(-INFINITY);
  }
}

// Writes v to classes [8k, 8k + 8) of `row` (those before c), rounded to T.
template <typename T, typename A>
__device__ __forceinline__ void store_chunk(T* __restrict row, int64_t k, int64_t c, bool packed,
                                            const A (&v)[kChunk]) {
  const int64_t j0 = k * kChunk;
  if (packed && j0 + kChunk <= c) {
    uint32_t w[kWords<T>];
    pack<T>(w, v);
    store_words(row + j0, w);
  } else {
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      if (j0 + i < c) row[j0 + i] = cast<T>(v[i]);
  }
}

// One thread's (or a merged group's) part of a row's log-sum-exp.
template <typename A>
struct RowSums {
  A m;        // the largest logit seen (NaN skipped), -inf before any
  double s;   // Σ exp(x - m) over the logits seen; 0 while m is -inf
  double sx;  // Σ x over the logits seen (kept only under label smoothing)
};

// Adds one chunk; `left` is the number of classes from the chunk's first to the row's end.
template <typename A>
__device__ __forceinline__ void add_chunk(RowSums<A>& st, const A (&v)[kChunk], int64_t left,
                                          bool smoothing) {
  A top = v[0];
#pragma unroll
  for (int i = 1; i < kChunk; ++i) top = max_skip_nan(top, v[i]);
  if (top > st.m) {  // a new max: rescale what was summed (exp(-inf) = 0 when m was -inf)
    st.s *= static_cast<double>(exp(static_cast<A>(st.m - top)));
    st.m = top;
  }
  const A ref = st.m == A(-INFINITY) ? A(0) : st.m;  // all -inf so far: each exp(-inf) is 0
  A e = A(0);
#pragma unroll
  for (int i = 0; i < kChunk; ++i) e += sum_exp(static_cast<A>(v[i] - ref));
  st.s += static_cast<double>(e);
  if (smoothing) {
    A sx = A(0);
#pragma unroll
    for (int i = 0; i < kChunk; ++i) sx += i < left ? v[i] : A(0);
    st.sx += static_cast<double>(sx);
  }
}

// s, summed relative to `from`, relative to `to` >= from.
template <typename A>
__device__ __forceinline__ double rescaled(double s, A from, A to) {
  return from == to ? s : s * static_cast<double>(exp(static_cast<A>(from - to)));
}

template <typename A>
__device__ __forceinline__ RowSums<A> merge(const RowSums<A>& a, const RowSums<A>& b) {
  const A m = max_skip_nan(a.m, b.m);
  return {m, rescaled(a.s, a.m, m) + rescaled(b.s, b.m, m), a.sx + b.sx};
}

// The sums of chunks first, first + stride, ... of a row of c classes (c = 0: none).
template <typename T, typename A>
__device__ RowSums<A> thread_sums(const T* __restrict row, int64_t c, int64_t first, int64_t stride,
                                  bool smoothing) {
  const bool packed = aligned16(row);
  const int64_t chunks = (c + kChunk - 1) / kChunk;
  RowSums<A> st{A(-INFINITY), 0.0, 0.0};
  int64_t k = first;
  for (; k + stride < chunks; k += 2 * stride) {  // two chunks' loads in flight
    A a[kChunk], b[kChunk];
    load_chunk(a, row, k, c, packed);
    load_chunk(b, row, k + stride, c, packed);
    add_chunk(st, a, c - k * kChunk, smoothing);
    add_chunk(st, b, c - (k + stride) * kChunk, smoothing);
  }
  if (k < chunks) {
    A a[kChunk];
    load_chunk(a, row, k, c, packed);
    add_chunk(st, a, c - k * kChunk, smoothing);
  }
  return st;
}

// Merges the sums of a row's kGroup threads (consecutive lanes; kGroup = kBlock: the whole
// block) in a fixed order. The result is complete in the group's first thread.
template <int kGroup, typename A>
__device__ RowSums<A> reduce_group(RowSums<A> st) {
  constexpr int kLanes = kGroup < kWarp ? kGroup : kWarp;
#pragma unroll
  for (int o = kLanes / 2; o > 0; o /= 2) {
    const RowSums<A> other{__shfl_xor_sync(kFull, st.m, o), __shfl_xor_sync(kFull, st.s, o),
                           __shfl_xor_sync(kFull, st.sx, o)};
    st = merge(st, other);
  }
  if constexpr (kGroup > kWarp) {
    static_assert(kGroup == kBlock, "a group wider than a warp is the whole block");
    __shared__ RowSums<A> warps[kGroup / kWarp];
    if (threadIdx.x % kWarp == 0) warps[threadIdx.x / kWarp] = st;
    __syncthreads();
    if (threadIdx.x == 0)
      for (int w = 1; w < kGroup / kWarp; ++w) st = merge(st, warps[w]);
  }
  return st;
}

// T is the logits' dtype, A = Compute<T> the dtype of the losses, lse and every step of the
// math (f32 for f16/bf16 logits: Note [Cross-entropy of 16-bit logits] in src/ops/loss.cpp).
template <int kGroup, typename T, typename I, typename A = Compute<T>>
__global__ void __launch_bounds__(kBlock)
    forward_kernel(A* __restrict loss, A* __restrict lse_out, const T* __restrict x,
                   const I* __restrict target, int64_t n, int64_t c, int64_t ignore_index,
                   double eps, DeviceError* error) {
  constexpr int kRows = kBlock / kGroup;
  const int64_t r = blockIdx.x * int64_t{kRows} + threadIdx.x / kGroup;
  const bool live = r < n;  // no early return: the group reduces together
  const T* row = x + (live ? r : 0) * c;
  RowSums<A> st = reduce_group<kGroup>(
      thread_sums<T, A>(row, live ? c : 0, threadIdx.x % kGroup, kGroup, eps > 0.0));
  if (!live || threadIdx.x % kGroup != 0) return;
  // A row of -inf (or NaN) only: the two-pass form's exp(-inf - -inf) makes its sum NaN.
  const double s = c > 0 && st.m == A(-INFINITY) ? static_cast<double>(NAN) : st.s;
  const double l = static_cast<double>(st.m) + log(s);
  lse_out[r] = static_cast<A>(l);
  const int64_t label = static_cast<int64_t>(target[r]);
  if (label == ignore_index) {
    loss[r] = A(0);
    return;
  }
  if (label < 0 || label >= c) {
    report_device_error(error, kCrossEntropyLabel, 1, label, r, c);
    loss[r] = A(NAN);
    return;
  }
  const double nll = l - static_cast<double>(cast<A>(row[label]));
  const double smooth = eps / static_cast<double>(c);
  loss[r] = static_cast<A>(
      eps > 0.0 ? (1.0 - eps) * nll + smooth * (static_cast<double>(c) * l - st.sx) : nll);
}

// One block: total = Σ loss (÷ count when count is wanted), count = rows not ignored.
template <typename T, typename I>
__global__ void total_kernel(T* total, T* count, const T* __restrict loss,
                             const I* __restrict target, int64_t n, int64_t ignore_index) {
  __shared__ double sums[kBlock], valid[kBlock];
  double s = 0.0, v = 0.0;
  for (int64_t r = threadIdx.x; r < n; r += kBlock) {
    s += static_cast<double>(loss[r]);
    v += static_cast<int64_t>(target[r]) != ignore_index ? 1.0 : 0.0;
  }
  sums[threadIdx.x] = s;
  valid[threadIdx.x] = v;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sums[threadIdx.x] += sums[threadIdx.x + half];
      valid[threadIdx.x] += valid[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (count) *count = static_cast<T>(valid[0]);
  if (total) *total = static_cast<T>(count ? sums[0] / valid[0] : sums[0]);
}

// Turns a chunk of logits (classes j0, j0 + 1, ...) into their gradient, in place.
template <typename A>
__device__ __forceinline__ void grad_chunk(A (&v)[kChunk], int64_t j0, int64_t label, A s, A l,
                                           A smooth, A hit) {
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    A g = s * (exp(static_cast<A>(v[i] - l)) - smooth);
    if (j0 + i == label) g -= s * hit;
    v[i] = g;
  }
}

// The gradient in the logits' dtype T, computed in A and rounded once (as the cast back of
// the f32 gradient would round it).
template <int kGroup, typename T, typename I, typename A = Compute<T>>
__global__ void __launch_bounds__(kBlock)
    backward_kernel(T* __restrict gi, const A* __restrict g, bool per_row,
                    const A* __restrict count, const T* __restrict x, const I* __restrict target,
                    const A* __restrict lse, int64_t n, int64_t c, int64_t ignore_index, A smooth,
                    A hit) {
  constexpr int kRows = kBlock / kGroup;
  const int64_t r = blockIdx.x * int64_t{kRows} + threadIdx.x / kGroup;
  if (r >= n) return;  // nothing collective below
  const int64_t first = threadIdx.x % kGroup, chunks = (c + kChunk - 1) / kChunk;
  T* out = gi + r * c;
  const T* row = x + r * c;
  const bool packed_out = aligned16(out), packed_in = aligned16(row);
  const int64_t label = static_cast<int64_t>(target[r]);
  if (label == ignore_index) {
    A zero[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) zero[i] = A(0);
    for (int64_t k = first; k < chunks; k += kGroup) store_chunk(out, k, c, packed_out, zero);
    return;
  }
  const A s = per_row ? g[r] : (count ? g[0] / *count : g[0]);
  const A l = lse[r];
  int64_t k = first;
  for (; k + kGroup < chunks; k += 2 * kGroup) {  // two chunks' loads in flight
    A a[kChunk], b[kChunk];
    load_chunk(a, row, k, c, packed_in);
    load_chunk(b, row, k + kGroup, c, packed_in);
    grad_chunk(a, k * kChunk, label, s, l, smooth, hit);
    store_chunk(out, k, c, packed_out, a);
    grad_chunk(b, (k + kGroup) * kChunk, label, s, l, smooth, hit);
    store_chunk(out, k + kGroup, c, packed_out, b);
  }
  if (k < chunks) {
    A a[kChunk];
    load_chunk(a, row, k, c, packed_in);
    grad_chunk(a, k * kChunk, label, s, l, smooth, hit);
    store_chunk(out, k, c, packed_out, a);
  }
}

// Calls f(std::integral_constant<int, G>{}) with G the threads per row for C = c classes
// (Note [Cross-entropy in one pass]).
template <typename F>
void with_row_group(int64_t c, F&& f) {
  if (c <= int64_t{kNarrowGroup} * kChunk)
    f(std::integral_constant<int, kNarrowGroup>{});
  else if (c < kWideRow)
    f(std::integral_constant<int, kWarp>{});
  else
    f(std::integral_constant<int, kBlock>{});
}

unsigned row_grid(int64_t n, int group) {
  const int64_t rows = kBlock / group;
  const int64_t blocks = std::max<int64_t>(1, (n + rows - 1) / rows);
  EMBER_CHECK(blocks <= INT_MAX, "cross_entropy: ", n, " rows are more than one launch takes (",
              int64_t{INT_MAX} * rows, " at most)");
  return static_cast<unsigned>(blocks);
}

}  // namespace

void cross_entropy_forward(const View& loss_rows, const View& lse, const View& total,
                           const View& count, const View& logits, const View& target,
                           int64_t ignore_index, double label_smoothing) {
  EMBER_ASSERT(logits.shape.size() == 2, "cross_entropy: logits must be [N, C]");
  const int64_t n = logits.shape[0], c = logits.shape[1];
  const int device = logits.device;
  cudaStream_t st = stream(device);
  DeviceError* error = device_error_record(device);
  kernels::dispatch_index(target.dtype, "cross_entropy", "target", [&](auto label_tag) {
    using I = typename decltype(label_tag)::type;
    dispatch_any_float(logits.dtype, "cross_entropy", [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = Compute<T>;
      const I* t = static_cast<const I*>(target.data);
      if (n > 0) {
        with_row_group(c, [&](auto group) {
          constexpr int kGroup = decltype(group)::value;
          forward_kernel<kGroup, T, I><<<row_grid(n, kGroup), kBlock, 0, st>>>(
              static_cast<A*>(loss_rows.data), static_cast<A*>(lse.data),
              static_cast<const T*>(logits.data), t, n, c, ignore_index, label_smoothing, error);
          EMBER_CUDA_LAUNCH_CHECK();
        });
      }
      if (total.data || count.data) {
        total_kernel<A, I>
            <<<1, kBlock, 0, st>>>(static_cast<A*>(total.data), static_cast<A*>(count.data),
                                   static_cast<const A*>(loss_rows.data), t, n, ignore_index);
        EMBER_CUDA_LAUNCH_CHECK();
      }
    });
  });
}

void cross_entropy_backward(const View& grad_logits, const View& grad_loss, const View& count,
                            const View& logits, const View& target, const View& lse,
                            int64_t ignore_index, double label_smoothing) {
  const int64_t n = logits.shape[0], c = logits.shape[1];
  if (n == 0 || c == 0) return;
  const int device = logits.device;
  cudaStream_t st = stream(device);
  const bool per_row = grad_loss.shape.size() == 1;
  kernels::dispatch_index(target.dtype, "cross_entropy", "target", [&](auto label_tag) {
    using I = typename decltype(label_tag)::type;
    dispatch_any_float(logits.dtype, "cross_entropy", [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = Compute<T>;
      with_row_group(c, [&](auto group) {
        constexpr int kGroup = decltype(group)::value;
        backward_kernel<kGroup, T, I><<<row_grid(n, kGroup), kBlock, 0, st>>>(
            static_cast<T*>(grad_logits.data), static_cast<const A*>(grad_loss.data), per_row,
            static_cast<const A*>(count.data), static_cast<const T*>(logits.data),
            static_cast<const I*>(target.data), static_cast<const A*>(lse.data), n, c, ignore_index,
            static_cast<A>(label_smoothing / static_cast<double>(c)),
            static_cast<A>(1.0 - label_smoothing));
        EMBER_CUDA_LAUNCH_CHECK();
      });
    });
  });
}

}  // namespace ember::cuda
