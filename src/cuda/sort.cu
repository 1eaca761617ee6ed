// src/cuda/sort.cu — sort (the order of each row) and the inclusive scans (cumsum, cumprod,
// cummax, cummin) on CUDA.
//
// sort, two algorithms with one result (Note [Sort order] in src/kernels/sort.hpp):
//   rows of up to kBitonicMax elements: one block per row sorts (value, position) pairs in
//     shared memory with a bitonic network whose comparator breaks ties by position, so the
//     result equals a stable sort;
//   longer rows: CUB's segmented radix sort (stable) of the order-preserving integer keys of
//     kernels::sort_key, one segment per row.
// scan: a thread per [outer, ·, inner] line walks it in order when lines are many or inner > 1
// (neighbouring threads read neighbouring elements); a long contiguous line (inner == 1) gets a
// block that scans tiles of kBlock elements in shared memory and carries the running state
// between tiles. Either way each element sees the same sequence of combine steps as the CPU up to
// the association of sums (f32 sums and products accumulate in f64).
#include <climits>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "cuda/common.cuh"
#include "cuda/loops.cuh"
#include "kernels/sort.hpp"

namespace ember::cuda {
namespace {

constexpr int kBitonicMax = 4096;  // the longest row sorted in shared memory (48 KiB for f64)

// ---- sort: bitonic network in shared memory ----

template <typename T>
__global__ void bitonic_sort_kernel(const T* __restrict in, int64_t* __restrict indices,
                                    int64_t rows, int n, int padded, bool descending) {
  extern __shared__ __align__(8) unsigned char smem[];
  T* keys = reinterpret_cast<T*>(smem);
  int* pos = reinterpret_cast<int*>(keys + padded);
  // Padding (pos >= n) sorts after every element.
  auto before = [&](int a, int b) {
    if (pos[a] >= n) return false;
    if (pos[b] >= n) return true;
    return kernels::sorts_before(keys[a], pos[a], keys[b], pos[b], descending);
  };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = in + r * n;
    for (int i = threadIdx.x; i < padded; i += blockDim.x) {
      if (i < n) keys[i] = row[i];
      pos[i] = i;
    }
    __syncthreads();
    for (int k = 2; k <= padded; k <<= 1) {
      for (int j = k >> 1; j > 0; j >>= 1) {
        for (int t = threadIdx.x; t < padded / 2; t += blockDim.x) {
          const int lo = 2 * t - (t & (j - 1)), hi = lo + j;
          const bool ascending = (lo & k) == 0;
          if (ascending ? before(hi, lo) : before(lo, hi)) {
            const T kv = keys[lo];
            keys[lo] = keys[hi];
            keys[hi] = kv;
            const int pv = pos[lo];
            pos[lo] = pos[hi];
            pos[hi] = pv;
          }
        }
        __syncthreads();
      }
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) indices[r * n + i] = pos[i];
    __syncthreads();
  }
}

template <typename T>
void bitonic_sort(const T* in, int64_t* indices, int64_t rows, int n, bool descending,
                  cudaStream_t s) {
  int padded = 1;
  while (padded < n) padded <<= 1;
  const int threads = std::min(1024, std::max(32, padded / 2));
  const size_t bytes = static_cast<size_t>(padded) * (sizeof(T) + sizeof(int));
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, 65535 * 8));
  bitonic_sort_kernel<T><<<blocks, threads, bytes, s>>>(in, indices, rows, n, padded, descending);
  EMBER_CUDA_LAUNCH_CHECK();
}

// ---- sort: segmented radix sort of integer keys ----

template <typename T>
__global__ void sort_keys_kernel(const T* __restrict in, kernels::SortKey<T>* __restrict keys,
                                 int64_t* __restrict positions, int64_t count, int64_t n,
                                 bool descending) {
  EMBER_CUDA_KERNEL_LOOP(i, count) {
    keys[i] = kernels::sort_key(in[i], descending);
    positions[i] = i % n;
  }
}

__global__ void row_offsets_kernel(int* offsets, int64_t rows, int n) {
  EMBER_CUDA_KERNEL_LOOP(r, rows + 1) offsets[r] = static_cast<int>(r * n);
}

// Rows are sorted in chunks of fewer than INT_MAX elements (CUB counts items in int).
template <typename T>
void radix_sort(int device, const T* in, int64_t* indices, int64_t rows, int64_t n, bool descending,
                cudaStream_t s) {
  using K = kernels::SortKey<T>;
  EMBER_ASSERT(n < INT_MAX, "sort (CUDA): a row of ", n, " elements is too long");
  const int64_t chunk_rows = std::max<int64_t>(1, std::min<int64_t>(rows, INT_MAX / n));
  const int64_t chunk = chunk_rows * n;
  Scratch keys_in(device, chunk * sizeof(K)), keys_out(device, chunk * sizeof(K));
  Scratch positions(device, chunk * sizeof(int64_t));
  Scratch offsets(device, (chunk_rows + 1) * sizeof(int));
  row_offsets_kernel<<<grid_for(chunk_rows + 1), kBlock, 0, s>>>(static_cast<int*>(offsets.get()),
                                                                 chunk_rows, static_cast<int>(n));
  EMBER_CUDA_LAUNCH_CHECK();
  size_t temp_bytes = 0;
  EMBER_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      nullptr, temp_bytes, static_cast<const K*>(keys_in.get()), static_cast<K*>(keys_out.get()),
      static_cast<const int64_t*>(positions.get()), indices, static_cast<int>(chunk),
      static_cast<int>(chunk_rows), static_cast<int*>(offsets.get()),
      static_cast<int*>(offsets.get()) + 1, 0, static_cast<int>(sizeof(K) * 8), s));
  Scratch temp(device, std::max<size_t>(temp_bytes, 1));
  for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
    const int64_t nr = std::min(chunk_rows, rows - r0), count = nr * n;
    sort_keys_kernel<T><<<grid_for(count), kBlock, 0, s>>>(
        in + r0 * n, static_cast<K*>(keys_in.get()), static_cast<int64_t*>(positions.get()), count,
        n, descending);
    EMBER_CUDA_LAUNCH_CHECK();
    EMBER_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
        temp.get(), temp_bytes, static_cast<const K*>(keys_in.get()),
        static_cast<K*>(keys_out.get()), static_cast<const int64_t*>(positions.get()),
        indices + r0 * n, static_cast<int>(count), static_cast<int>(nr),
        static_cast<int*>(offsets.get()), static_cast<int*>(offsets.get()) + 1, 0,
        static_cast<int>(sizeof(K) * 8), s));
  }
}

// ---- scans ----

template <typename T>
__global__ void scan_lines_kernel(kernels::ScanLayout l, ScanOp op, const T* __restrict in,
                                  T* __restrict out, int64_t* __restrict indices, bool reverse) {
  EMBER_CUDA_KERNEL_LOOP(line, l.outer * l.inner) {
    kernels::scan_line(l, op, in, out, indices, line, reverse);
  }
}

// One block per contiguous line: tiles of kBlock elements, an inclusive Hillis–Steele scan of
// each tile in shared memory, joined to the state carried from the tiles before.
template <typename T>
__global__ void scan_rows_kernel(int64_t lines, int64_t n, ScanOp op, const T* __restrict in,
                                 T* __restrict out, int64_t* __restrict indices, bool reverse) {
  using Acc = kernels::ScanAcc<T>;
  using State = kernels::ScanState<Acc>;
  __shared__ State tile[kBlock];
  __shared__ State carry;
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    const T* x = in + line * n;
    T* y = out + line * n;
    int64_t* ix = indices ? indices + line * n : nullptr;
    for (int64_t t0 = 0; t0 < n; t0 += kBlock) {
      const int64_t k = t0 + threadIdx.x;
      const bool live = k < n;
      const int64_t i = reverse ? n - 1 - k : k;
      if (live) tile[threadIdx.x] = State{static_cast<Acc>(x[i]), i};
      __syncthreads();
      const int width = static_cast<int>(std::min<int64_t>(kBlock, n - t0));
      for (int step = 1; step < width; step <<= 1) {
        State v;
        const bool join = live && threadIdx.x >= step;
        if (join) v = kernels::scan_join(op, tile[threadIdx.x - step], tile[threadIdx.x]);
        __syncthreads();
        if (join) tile[threadIdx.x] = v;
        __syncthreads();
      }
      State s;
      if (live) {
        s = t0 == 0 ? tile[threadIdx.x] : kernels::scan_join(op, carry, tile[threadIdx.x]);
        y[i] = static_cast<T>(s.value);
        if (ix) ix[i] = s.index;
      }
      __syncthreads();  // every thread has read `carry` before the last one replaces it
      if (live && threadIdx.x == width - 1) carry = s;
      __syncthreads();
    }
  }
}

}  // namespace

void sort(const View& indices, const View& in, bool descending) {
  int64_t rows = 0, n = 0;
  kernels::sort_rows("CUDA", indices, in, rows, n);
  if (rows == 0 || n == 0) return;
  cudaStream_t s = stream(in.device);
  dispatch_numeric(in.dtype, "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in.data);
    int64_t* idx = static_cast<int64_t*>(indices.data);
    if (n <= kBitonicMax)
      bitonic_sort(x, idx, rows, static_cast<int>(n), descending, s);
    else
      radix_sort(in.device, x, idx, rows, n, descending, s);
  });
}

void scan(ScanOp op, const View& out, const View& indices, const View& in, int dim, bool reverse) {
  const kernels::ScanLayout l = kernels::scan_layout("CUDA", op, out, indices, in, dim);
  const int64_t lines = l.outer * l.inner;
  if (lines == 0 || l.n == 0) return;
  const bool indexed = op == ScanOp::max || op == ScanOp::min;
  int64_t* ix = indexed ? static_cast<int64_t*>(indices.data) : nullptr;
  cudaStream_t s = stream(in.device);
  dispatch_numeric(in.dtype, "scan", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in.data);
    T* y = static_cast<T*>(out.data);
    // A line per thread while that fills the GPU (or inner > 1 keeps it coalesced).
    if (l.inner > 1 || lines >= 4096 || l.n < 256) {
      scan_lines_kernel<T><<<grid_for(lines), kBlock, 0, s>>>(l, op, x, y, ix, reverse);
    } else {
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(lines, 65535));
      scan_rows_kernel<T><<<blocks, kBlock, 0, s>>>(lines, l.n, op, x, y, ix, reverse);
    }
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace ember::cuda
