// src/cuda/index.cu — index_select, index_add, gather, scatter_add on CUDA.
//
// Shapes as src/cpu/index.cpp: index tensors are i64 or i32 and contiguous. index_select /
// index_add see `in`/`out` as [O, S, I] around `dim` (O outer, S the size of dim, I inner) and
// the selected side as [O, L, I], L = index.numel(). gather / scatter_add walk index's shape
// (rank <= kMaxRank) with strided operands; the indexed operand's stride along `dim` is
// replaced by the index value times that stride.
//
// Note [Index range check on the device]
// A bad index must leave the output untouched, and must not cost a host sync on good calls.
// index_select, whose output is the op's own new tensor, checks in its one kernel: a thread
// whose row index is out of range reports it and writes nothing (the embedding lookup of a
// decode step is one kernel, not three). The other ops write into what they are given: a check
// kernel sets a flag (device memory, one per device, cleared by each call) when any
// index is out of range and records the first bad index in the device's deferred error
// record; the op kernel that follows on the same stream reads the flag and writes nothing if
// it is set. The call returns true without waiting: the error is reported by the next
// synchronisation of the device (item(), to_vector(), .to(cpu), synchronize), as CUDA's own
// device asserts are (Note [Deferred device errors] in device_error.cuh). This also works
// while the stream is captured into a CUDA graph. The flag is shared by the calls on one
// device (one stream), so concurrent index calls from several host threads on one device
// are not supported.
//
// Accumulation (index_add, scatter) uses atomics by default: duplicate indices combine in an
// unspecified order (f32/f64 sums may differ from the CPU's, and from run to run, in the last
// bits); scatter's prod/max/min are compare-and-swap loops, its assign keeps an unspecified
// one. In deterministic mode they sort instead (Note [Deterministic accumulation]), and
// index_add of f16/bf16 always does, to add in f32 and round once per destination (Note
// [16-bit index_add] in src/kernels/index.hpp).
//
// Note [Deterministic accumulation]
// With set_deterministic(true) (ember/runtime.hpp) index_add and scatter use no atomics. Each
// source gets a key, its destination (index_add: the row index[j]; scatter: the element's
// offset in out), and CUB's radix sort, which is stable, orders the (key, source position)
// pairs, so a destination's sources sit together in the order of their positions. The thread
// of the first pair of each run of equal keys (index_add: one per inner element) reads the
// destination, combines the sources in that order and writes it once. That is the order of
// the CPU's loops (which never split one destination's sources between threads:
// src/cpu/index.cpp), so the result is the CPU's (f16/bf16 to rounding) on every run; scatter's
// assign keeps the last source, as the CPU does. Cost: a sort (index_add: L keys; scatter: one
// per element) and a serial walk per destination, long when one destination has many sources.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <mutex>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/device_error.cuh"
#include "cuda/loops.cuh"
#include "ember/error.hpp"
#include "ember/runtime.hpp"
#include "kernels/index.hpp"

namespace ember::cuda {
namespace {

constexpr int kMaxDevices = 64;

using Layout = kernels::IndexLayout;  // [O, S, I] around the indexed dim
using kernels::layout_of;

// The per-device bad-index flag in device memory (Note [Index range check on the device]).
// Made once per device, never freed (4 bytes).
struct Flag {
  int* device = nullptr;
};

Flag flag_for(int device) {
  static std::mutex mutex;
  static Flag flags[kMaxDevices];
  EMBER_ASSERT(device >= 0 && device < kMaxDevices, "index: device ", device, " out of range");
  std::lock_guard<std::mutex> lock(mutex);
  Flag& f = flags[device];
  if (f.device == nullptr) {
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    EMBER_CUDA_CHECK(cudaMalloc(&f.device, sizeof(int)));
  }
  return f;
}

__global__ void clear_flag_kernel(int* flag) { *flag = 0; }

template <typename I>
__global__ void check_range_kernel(const I* __restrict index, int64_t n, int64_t size,
                                   int* __restrict bad, DeviceError* error, int32_t op,
                                   int32_t dim) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = static_cast<int64_t>(index[i]);
    if (v < 0 || v >= size) {
      *bad = 1;
      report_device_error(error, op, dim, v, i, size);
    }
  }
}

// Starts a checked index op: clears the flag and launches the range check of `index`.
struct RangeCheck {
  cudaStream_t stream;
  int* flag;  // device memory, read by the op kernels
};

template <typename I>
RangeCheck begin_check(const View& index, int64_t size, int device, DeviceErrorOp op, int dim) {
  const Flag f = flag_for(device);
  DeviceError* error = device_error_record(device);
  RangeCheck rc{stream(device), f.device};
  clear_flag_kernel<<<1, 1, 0, rc.stream>>>(rc.flag);
  EMBER_CUDA_LAUNCH_CHECK();
  const int64_t n = index.numel();
  if (n > 0) {
    check_range_kernel<I><<<grid_for(n), kBlock, 0, rc.stream>>>(static_cast<const I*>(index.data),
                                                                 n, size, rc.flag, error, op, dim);
    EMBER_CUDA_LAUNCH_CHECK();
  }
  return rc;
}

// Nothing to wait for: a bad index surfaces at the next synchronisation (Note [Index range
// check on the device]), so the slot reports success.
bool end_check(const RangeCheck&) { return true; }

__device__ inline void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ inline void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ inline void atomic_add(int32_t* p, int32_t v) { atomicAdd(p, v); }
__device__ inline void atomic_add(__half* p, __half v) { atomicAdd(p, v); }
__device__ inline void atomic_add(__nv_bfloat16* p, __nv_bfloat16 v) { atomicAdd(p, v); }
__device__ inline void atomic_add(int64_t* p, int64_t v) {
  // Two's-complement addition is the same operation on unsigned 64-bit words.
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

// ---- index_select: out[o, j, i] = in[o, index[j], i], moved in units of U ----

// The range check is the kernel's own (Note [Index range check on the device]): a thread whose
// row index is out of range reports it and writes nothing.
template <typename U, typename I>
__global__ void index_select_kernel(U* __restrict out, const U* __restrict in,
                                    const I* __restrict index, int64_t outer, int64_t count,
                                    int64_t size, int64_t inner_units, DeviceError* error,
                                    int32_t dim) {
  const int64_t total = outer * count * inner_units;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner_units, r = e / inner_units;
    const int64_t j = r % count, o = r / count;
    const int64_t row = static_cast<int64_t>(index[j]);
    if (row < 0 || row >= size) {
      if (i == 0 && o == 0) report_device_error(error, kIndexSelect, dim, row, j, size);
      continue;
    }
    out[e] = in[(o * size + row) * inner_units + i];
  }
}

// The widest unit (16, 8, 4, 2 or 1 bytes) dividing a row and aligning both buffers.
int unit_bytes(int64_t row_bytes, const void* a, const void* b) {
  const auto addr = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b);
  for (int u = 16; u > 1; u /= 2)
    if (row_bytes % u == 0 && addr % u == 0) return u;
  return 1;
}

template <typename F>
void dispatch_unit(int bytes, F&& f) {
  switch (bytes) {
    case 16: f(uint4{}); return;
    case 8: f(uint2{}); return;
    case 4: f(uint32_t{}); return;
    case 2: f(uint16_t{}); return;
    default: f(uint8_t{}); return;
  }
}

// ---- index_add: out[o, index[j], i] += src[o, j, i] ----

template <typename T, typename I>
__global__ void index_add_kernel(T* __restrict out, const T* __restrict src,
                                 const I* __restrict index, int64_t outer, int64_t count,
                                 int64_t size, int64_t inner, const int* __restrict bad) {
  if (*bad) return;
  const int64_t total = outer * count * inner;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner, r = e / inner;
    const int64_t j = r % count, o = r / count;
    atomic_add(out + (o * size + static_cast<int64_t>(index[j])) * inner + i, src[e]);
  }
}

// ---- gather / scatter_add: a strided walk over index's shape ----

struct Walk {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride_a[kMaxRank] = {};  // out (gather) / out with 0 along dim (scatter_add)
  int64_t stride_b[kMaxRank] = {};  // in with 0 along dim (gather) / src (scatter_add)
  int64_t stride_index[kMaxRank] = {};
  int64_t dim_stride = 0;  // the indexed operand's stride along dim
};

__device__ inline void walk_offsets(const Walk& w, int64_t e, int64_t* a, int64_t* b, int64_t* ix) {
  int64_t oa = 0, ob = 0, oi = 0;
  for (int d = w.rank - 1; d >= 0; --d) {
    const int64_t c = e % w.shape[d];
    e /= w.shape[d];
    oa += c * w.stride_a[d];
    ob += c * w.stride_b[d];
    oi += c * w.stride_index[d];
  }
  *a = oa;
  *b = ob;
  *ix = oi;
}

template <typename U, typename I>
__global__ void gather_kernel(U* __restrict out, const U* __restrict in, const I* __restrict index,
                              Walk w, int64_t total, const int* __restrict bad) {
  if (*bad) return;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t a, b, ix;
    walk_offsets(w, e, &a, &b, &ix);
    out[a] = in[b + static_cast<int64_t>(index[ix]) * w.dim_stride];
  }
}

// target = scatter_combine(op, target, v) atomically: a compare-and-swap loop on the
// element's bits (sum uses the hardware add; assign a plain store).
template <typename T>
__device__ inline void atomic_combine(ScatterOp op, T* p, T v) {
  if (op == ScatterOp::sum) return atomic_add(p, v);
  if (op == ScatterOp::assign) {
    *p = v;
    return;
  }
  using W = std::conditional_t<sizeof(T) == 8, unsigned long long, unsigned int>;
  W* word = reinterpret_cast<W*>(p);
  W seen = *word, expected;
  do {
    expected = seen;
    T current;
    memcpy(&current, &expected, sizeof(T));
    const T next = kernels::scatter_combine(op, current, v);
    W bits;
    memcpy(&bits, &next, sizeof(T));
    if (bits == expected) return;
    seen = atomicCAS(word, expected, bits);
  } while (seen != expected);
}

template <typename T, typename I>
__global__ void scatter_kernel(ScatterOp op, T* __restrict out, const T* __restrict src,
                               const I* __restrict index, Walk w, int64_t total,
                               const int* __restrict bad) {
  if (*bad) return;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t a, b, ix;
    walk_offsets(w, e, &a, &b, &ix);
    atomic_combine(op, out + a + static_cast<int64_t>(index[ix]) * w.dim_stride, src[b]);
  }
}

// ---- deterministic accumulation (Note [Deterministic accumulation]) ----

using SortKey = unsigned long long;           // CUB radix-sorts unsigned keys
constexpr int64_t kMaxSortedItems = INT_MAX;  // CUB counts the pairs it sorts in int

// The bits a key of at most `max_key` occupies (at least 1): the radix sort's end bit.
int key_bits(uint64_t max_key) {
  int bits = 1;
  while (bits < 64 && (max_key >> bits) != 0) ++bits;
  return bits;
}

// Refuses a call too large to sort, naming the op (`half`: a 16-bit index_add, which sorts
// whatever the deterministic setting).
void check_sortable(const char* op, int64_t items, bool half = false) {
  EMBER_CHECK(
      items <= kMaxSortedItems, op,
      half ? ": an f16/bf16 index_add sorts its indices on CUDA, at most "
           : ": deterministic mode (set_deterministic) sorts at most ",
      kMaxSortedItems, " indices on CUDA (got ", items,
      half ? "); split the call" : "); split the call, or turn deterministic mode off for it");
}

// n (key, position) pairs: 2n keys and 2n positions (the sort's input, then its output).
class SortBuffers {
 public:
  SortBuffers(int device, int64_t n)
      : n_(n),
        keys_(device, static_cast<size_t>(2 * n) * sizeof(SortKey)),
        positions_(device, static_cast<size_t>(2 * n) * sizeof(int)) {}
  SortKey* keys_in() const { return static_cast<SortKey*>(keys_.get()); }
  int* positions_in() const { return static_cast<int*>(positions_.get()); }
  const SortKey* keys() const { return keys_in() + n_; }  // sorted
  const int* positions() const { return positions_in() + n_; }

  // Stable radix sort of the pairs by the low `bits` bits of their keys.
  void sort(int device, cudaStream_t s, int bits) const {
    size_t temp_bytes = 0;
    const int n = static_cast<int>(n_);
    EMBER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in(), keys_in() + n_,
                                                     positions_in(), positions_in() + n_, n, 0,
                                                     bits, s));
    Scratch temp(device, std::max<size_t>(temp_bytes, 1));
    EMBER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys_in(),
                                                     keys_in() + n_, positions_in(),
                                                     positions_in() + n_, n, 0, bits, s));
  }

 private:
  int64_t n_;
  Scratch keys_, positions_;
};

// index_add's keys: the destination row of each source row j.
template <typename I>
__global__ void row_keys_kernel(const I* __restrict index, int64_t count, SortKey* __restrict keys,
                                int* __restrict positions) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < count;
       j += int64_t(gridDim.x) * blockDim.x) {
    keys[j] = static_cast<SortKey>(static_cast<int64_t>(index[j]));  // a bad index: never used
    positions[j] = static_cast<int>(j);
  }
}

// out[o, key, i] += src[o, j, i] over the rows j of each key, in order, in the compute type (f32
// for the 16-bit types: one rounding per destination): a thread per (o, sorted position p, i)
// whose p starts its key's run.
template <typename T>
__global__ void index_add_sorted_kernel(T* __restrict out, const T* __restrict src,
                                        const SortKey* __restrict keys,
                                        const int* __restrict positions, int64_t outer,
                                        int64_t count, int64_t size, int64_t inner,
                                        const int* __restrict bad) {
  if (*bad) return;
  const int64_t total = outer * count * inner;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner, r = e / inner;
    const int64_t p = r % count, o = r / count;
    const SortKey key = keys[p];
    if (p > 0 && keys[p - 1] == key) continue;  // not the first source of its row
    T* dst = out + (o * size + static_cast<int64_t>(key)) * inner + i;
    Compute<T> acc = cast<Compute<T>>(*dst);
    for (int64_t q = p; q < count && keys[q] == key; ++q)
      acc = acc + cast<Compute<T>>(src[(o * count + positions[q]) * inner + i]);
    *dst = cast<T>(acc);
  }
}

// scatter's keys: the offset in out of each element's destination.
template <typename I>
__global__ void scatter_keys_kernel(const I* __restrict index, Walk w, int64_t total,
                                    SortKey* __restrict keys, int* __restrict positions) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t a, b, ix;
    walk_offsets(w, e, &a, &b, &ix);
    keys[e] = static_cast<SortKey>(a + static_cast<int64_t>(index[ix]) * w.dim_stride);
    positions[e] = static_cast<int>(e);
  }
}

// out[key] = combine(... combine(out[key], src[first]) ..., src[last]): a thread per sorted
// position that starts its key's run.
template <typename T>
__global__ void scatter_sorted_kernel(ScatterOp op, T* __restrict out, const T* __restrict src,
                                      const SortKey* __restrict keys,
                                      const int* __restrict positions, Walk w, int64_t total,
                                      const int* __restrict bad) {
  if (*bad) return;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < total;
       p += int64_t(gridDim.x) * blockDim.x) {
    const SortKey key = keys[p];
    if (p > 0 && keys[p - 1] == key) continue;
    T acc = out[key];
    for (int64_t q = p; q < total && keys[q] == key; ++q) {
      int64_t a, b, ix;
      walk_offsets(w, positions[q], &a, &b, &ix);
      acc = kernels::scatter_combine(op, acc, src[b]);
    }
    out[key] = acc;
  }
}

template <typename I>
void index_add_sorted(const View& out, const View& src, const View& index, const Layout& l,
                      int64_t count, const RangeCheck& rc) {
  check_sortable("index_add", count, out.dtype == DType::f16 || out.dtype == DType::bf16);
  const int device = index.device;
  const SortBuffers pairs(device, count);
  row_keys_kernel<I><<<grid_for(count), kBlock, 0, rc.stream>>>(
      static_cast<const I*>(index.data), count, pairs.keys_in(), pairs.positions_in());
  EMBER_CUDA_LAUNCH_CHECK();
  pairs.sort(device, rc.stream, key_bits(static_cast<uint64_t>(std::max<int64_t>(l.size - 1, 0))));
  const int64_t total = l.outer * count * l.inner;
  kernels::dispatch_arithmetic<__half, __nv_bfloat16>(
      out.dtype, "index_add", "CUDA", [&](auto tag) {
        using T = typename decltype(tag)::type;
        index_add_sorted_kernel<T><<<grid_for(total), kBlock, 0, rc.stream>>>(
            static_cast<T*>(out.data), static_cast<const T*>(src.data), pairs.keys(),
            pairs.positions(), l.outer, count, l.size, l.inner, rc.flag);
        EMBER_CUDA_LAUNCH_CHECK();
      });
}

template <typename I>
void scatter_sorted(ScatterOp op, const View& out, const View& src, const View& index,
                    const Walk& w, int64_t total, const RangeCheck& rc) {
  check_sortable(op == ScatterOp::sum ? "scatter_add" : "scatter", total);
  const int device = index.device;
  const SortBuffers pairs(device, total);
  scatter_keys_kernel<I><<<grid_for(total), kBlock, 0, rc.stream>>>(
      static_cast<const I*>(index.data), w, total, pairs.keys_in(), pairs.positions_in());
  EMBER_CUDA_LAUNCH_CHECK();
  uint64_t last = 0;  // the largest offset in out
  for (int d = 0; d < out.shape.size(); ++d)
    last += static_cast<uint64_t>(std::max<int64_t>(out.shape[d] - 1, 0) * out.strides[d]);
  pairs.sort(device, rc.stream, key_bits(last));
  dispatch_numeric(out.dtype, "scatter", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_sorted_kernel<T><<<grid_for(total), kBlock, 0, rc.stream>>>(
        op, static_cast<T*>(out.data), static_cast<const T*>(src.data), pairs.keys(),
        pairs.positions(), w, total, rc.flag);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

bool index_select(const View& out, const View& in, int dim, const View& index) {
  const int64_t count = kernels::check_index_rows("index_select", in, out, dim, index);
  const Layout l = layout_of(in.shape, dim);
  if (count == 0) return true;
  const int device = index.device;
  return kernels::dispatch_index(index.dtype, "index", "index", [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    const int64_t row_bytes = l.inner * static_cast<int64_t>(element_size(in.dtype));
    if (out.numel() > 0) {
      dispatch_unit(unit_bytes(row_bytes, out.data, in.data), [&](auto unit_tag) {
        using U = decltype(unit_tag);
        const int64_t units = row_bytes / static_cast<int64_t>(sizeof(U));
        index_select_kernel<U, I><<<grid_for(l.outer * count * units), kBlock, 0, stream(device)>>>(
            static_cast<U*>(out.data), static_cast<const U*>(in.data),
            static_cast<const I*>(index.data), l.outer, count, l.size, units,
            device_error_record(device), dim);
        EMBER_CUDA_LAUNCH_CHECK();
      });
    }
    return true;  // a bad index surfaces at the next synchronisation
  });
}

bool index_add(const View& out, int dim, const View& index, const View& src) {
  const int64_t count = kernels::check_index_rows("index_add", out, src, dim, index);
  const Layout l = layout_of(out.shape, dim);
  if (count == 0) return true;
  const int device = index.device;
  return kernels::dispatch_index(index.dtype, "index", "index", [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    const RangeCheck rc = begin_check<I>(index, l.size, device, kIndexAdd, dim);
    const int64_t total = l.outer * count * l.inner;
    const bool half = out.dtype == DType::f16 || out.dtype == DType::bf16;
    if (total > 0 && (deterministic() || half)) {
      index_add_sorted<I>(out, src, index, l, count, rc);
    } else if (total > 0) {
      kernels::dispatch_arithmetic<__half, __nv_bfloat16>(
          out.dtype, "index_add", "CUDA", [&](auto tag) {
            using T = typename decltype(tag)::type;
            index_add_kernel<T, I><<<grid_for(total), kBlock, 0, rc.stream>>>(
                static_cast<T*>(out.data), static_cast<const T*>(src.data),
                static_cast<const I*>(index.data), l.outer, count, l.size, l.inner, rc.flag);
            EMBER_CUDA_LAUNCH_CHECK();
          });
    }
    return end_check(rc);
  });
}

bool gather(const View& out, const View& in, int dim, const View& index) {
  kernels::check_elementwise_index("gather", out, in, index);
  EMBER_ASSERT(out.shape == index.shape, "gather: out must have index's shape");
  const int64_t total = index.numel();
  if (total == 0) return true;
  Walk w;
  w.rank = index.shape.size();
  for (int d = 0; d < w.rank; ++d) {
    w.shape[d] = index.shape[d];
    w.stride_a[d] = out.strides[d];
    w.stride_b[d] = d == dim ? 0 : in.strides[d];
    w.stride_index[d] = index.strides[d];
  }
  w.dim_stride = in.strides[dim];
  const int device = index.device;
  return kernels::dispatch_index(index.dtype, "index", "index", [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    const RangeCheck rc = begin_check<I>(index, in.shape[dim], device, kGather, dim);
    kernels::dispatch_bytes(element_size(in.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      gather_kernel<U, I><<<grid_for(total), kBlock, 0, rc.stream>>>(
          static_cast<U*>(out.data), static_cast<const U*>(in.data),
          static_cast<const I*>(index.data), w, total, rc.flag);
      EMBER_CUDA_LAUNCH_CHECK();
    });
    return end_check(rc);
  });
}

bool scatter(ScatterOp op, const View& out, int dim, const View& index, const View& src) {
  kernels::check_elementwise_index("scatter", out, src, index);
  const int64_t total = index.numel();
  if (total == 0) return true;
  Walk w;
  w.rank = index.shape.size();
  for (int d = 0; d < w.rank; ++d) {
    w.shape[d] = index.shape[d];
    w.stride_a[d] = d == dim ? 0 : out.strides[d];
    w.stride_b[d] = src.strides[d];
    w.stride_index[d] = index.strides[d];
  }
  w.dim_stride = out.strides[dim];
  const int device = index.device;
  return kernels::dispatch_index(index.dtype, "index", "index", [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    const RangeCheck rc = begin_check<I>(index, out.shape[dim], device, kScatterAdd, dim);
    if (deterministic()) {
      scatter_sorted<I>(op, out, src, index, w, total, rc);
      return end_check(rc);
    }
    dispatch_numeric(out.dtype, "scatter", [&](auto tag) {
      using T = typename decltype(tag)::type;
      scatter_kernel<T, I><<<grid_for(total), kBlock, 0, rc.stream>>>(
          op, static_cast<T*>(out.data), static_cast<const T*>(src.data),
          static_cast<const I*>(index.data), w, total, rc.flag);
      EMBER_CUDA_LAUNCH_CHECK();
    });
    return end_check(rc);
  });
}

}  // namespace ember::cuda
