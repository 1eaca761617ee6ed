// src/cuda/cusolver_kernels.cu — the kernels of cusolver_kernels.cuh.
#include "cuda/common.cuh"
#include "cuda/cusolver_kernels.cuh"

namespace ember::cuda::solver {
namespace {

constexpr int kTile = 32;

// One 32×32 tile per block through shared memory (both reads and writes coalesced); z is the
// batch index (grid.z, looped when the batch is larger than the grid allows).
template <typename T>
__global__ void transpose_kernel(T* dst, const T* src, int64_t batch, int64_t rows, int64_t cols,
                                 int64_t src_stride) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile,
                r0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z) {
    const T* s = src + b * src_stride;
    T* d = dst + b * rows * cols;
    for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
      const int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[i][threadIdx.x] = s[r * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += blockDim.y) {
      const int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (r < rows && c < cols) d[c * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

#define EMBER_GRID_STRIDE(i, n)                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void identity_kernel(T* dst, int64_t total, int64_t n) {
  EMBER_GRID_STRIDE(i, total) {
    const int64_t e = i % (n * n);
    dst[i] = e / n == e % n ? T(1) : T(0);
  }
}

template <typename T>
__global__ void zero_upper_kernel(T* a, int64_t total, int64_t n) {
  EMBER_GRID_STRIDE(i, total) {
    const int64_t e = i % (n * n);
    if (e % n > e / n) a[i] = T(0);
  }
}

template <typename T>
__global__ void r_of_qr_kernel(T* r, const T* col, int64_t total, int64_t m, int64_t n, int64_t k) {
  EMBER_GRID_STRIDE(i, total) {
    const int64_t b = i / (k * n), e = i % (k * n), row = e / n, c = e % n;
    r[i] = c >= row ? col[b * m * n + c * m + row] : T(0);
  }
}

template <typename T>
__global__ void det_of_lu_kernel(T* out, const T* lu, const int* ipiv, int64_t batch, int64_t n) {
  EMBER_GRID_STRIDE(b, batch) {
    T det = T(1);
    for (int64_t j = 0; j < n; ++j) {
      det *= lu[b * n * n + j * n + j];
      if (ipiv[b * n + j] != j + 1) det = -det;
    }
    out[b] = det;
  }
}

template <typename T>
__global__ void zero_diagonal_kernel(int* flags, const T* a, int64_t batch, int64_t n) {
  EMBER_GRID_STRIDE(b, batch) {
    int zero = 0;
    for (int64_t j = 0; j < n; ++j) zero |= a[b * n * n + j * n + j] == T(0) ? 1 : 0;
    flags[b] = zero;
  }
}

#undef EMBER_GRID_STRIDE

}  // namespace

template <typename T>
void transpose(cudaStream_t s, T* dst, const T* src, int64_t batch, int64_t rows, int64_t cols,
               int64_t src_stride) {
  if (batch == 0 || rows == 0 || cols == 0) return;
  if (src_stride < 0) src_stride = rows * cols;
  const dim3 block(kTile, 8);
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                  static_cast<unsigned>((rows + kTile - 1) / kTile),
                  static_cast<unsigned>(batch < 65535 ? batch : 65535));
  transpose_kernel<<<grid, block, 0, s>>>(dst, src, batch, rows, cols, src_stride);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <typename T>
void identity(cudaStream_t s, T* dst, int64_t batch, int64_t n) {
  if (batch * n == 0) return;
  identity_kernel<<<grid_for(batch * n * n), kBlock, 0, s>>>(dst, batch * n * n, n);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <typename T>
void zero_upper(cudaStream_t s, T* a, int64_t batch, int64_t n) {
  if (batch * n == 0) return;
  zero_upper_kernel<<<grid_for(batch * n * n), kBlock, 0, s>>>(a, batch * n * n, n);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <typename T>
void r_of_qr(cudaStream_t s, T* r, const T* col, int64_t batch, int64_t m, int64_t n, int64_t k) {
  if (batch * k * n == 0) return;
  r_of_qr_kernel<<<grid_for(batch * k * n), kBlock, 0, s>>>(r, col, batch * k * n, m, n, k);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <typename T>
void det_of_lu(cudaStream_t s, T* out, const T* lu, const int* ipiv, int64_t batch, int64_t n) {
  if (batch == 0) return;
  det_of_lu_kernel<<<grid_for(batch), kBlock, 0, s>>>(out, lu, ipiv, batch, n);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <typename T>
void zero_diagonal(cudaStream_t s, int* flags, const T* a, int64_t batch, int64_t n) {
  if (batch == 0) return;
  zero_diagonal_kernel<<<grid_for(batch), kBlock, 0, s>>>(flags, a, batch, n);
  EMBER_CUDA_LAUNCH_CHECK();
}

#define EMBER_SOLVER_KERNELS(T)                                                               \
  template void transpose<T>(cudaStream_t, T*, const T*, int64_t, int64_t, int64_t, int64_t); \
  template void identity<T>(cudaStream_t, T*, int64_t, int64_t);                              \
  template void zero_upper<T>(cudaStream_t, T*, int64_t, int64_t);                            \
  template void r_of_qr<T>(cudaStream_t, T*, const T*, int64_t, int64_t, int64_t, int64_t);   \
  template void det_of_lu<T>(cudaStream_t, T*, const T*, const int*, int64_t, int64_t);       \
  template void zero_diagonal<T>(cudaStream_t, int*, const T*, int64_t, int64_t);
EMBER_SOLVER_KERNELS(float)
EMBER_SOLVER_KERNELS(double)
#undef EMBER_SOLVER_KERNELS

}  // namespace ember::cuda::solver
