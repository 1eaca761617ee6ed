// src/cuda/cusolver_kernels.cuh — the small kernels around cuSOLVER's column-major routines
// (src/cuda/cusolver.cpp): batched transposes between ember's row-major matrices and LAPACK's
// column-major ones, identities, triangle masks, R out of geqrf's factor, determinants from an
// LU factor and a zero-diagonal check. Each queues on `s`; T is float or double.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ember::cuda::solver {

/// dst[b] = src[b]ᵀ: src [batch, rows, cols] row-major (matrix b at src + b·src_stride; -1:
/// rows·cols), dst [batch, cols, rows] dense.
template <typename T>
void transpose(cudaStream_t s, T* dst, const T* src, int64_t batch, int64_t rows, int64_t cols,
               int64_t src_stride = -1);

/// Every matrix of dst [batch, n, n] the identity.
template <typename T>
void identity(cudaStream_t s, T* dst, int64_t batch, int64_t n);

/// Zeroes the strictly upper triangle (row-major: column > row) of a [batch, n, n].
template <typename T>
void zero_upper(cudaStream_t s, T* a, int64_t batch, int64_t n);

/// r [batch, k, n] row-major from geqrf's column-major factor col [batch, n, m] (m rows):
/// r[i][j] = col(i, j) for j >= i, else 0.
template <typename T>
void r_of_qr(cudaStream_t s, T* r, const T* col, int64_t batch, int64_t m, int64_t n, int64_t k);

/// out[b] = det of the matrix whose getrf factor is lu [batch, n, n] (column-major) with 1-based
/// pivots ipiv [batch, n]: the diagonal's product, negated per row swap, in the CPU's order.
template <typename T>
void det_of_lu(cudaStream_t s, T* out, const T* lu, const int* ipiv, int64_t batch, int64_t n);

/// flags[b] = 1 when a[b] [n, n] has a zero on its diagonal, else 0.
template <typename T>
void zero_diagonal(cudaStream_t s, int* flags, const T* a, int64_t batch, int64_t n);

}  // namespace ember::cuda::solver
