// src/cuda/cusolver_loader.hpp — cuSOLVER's dense routines and cuBLAS's triangular solve,
// opened with dlopen on first use (as cuBLASLt and cuDNN are: linking them would cost every
// process their start-up, and a machine may have the CUDA runtime without them).
// cusolver_api() finds and opens them once (Note [Finding cuSOLVER] in cusolver_loader.cpp)
// and returns the entry points, or null with the reason, in which case the decompositions take
// the host route (src/cuda/lapack.cpp).
#pragma once

#include <string>

#if __has_include(<cusolverDn.h>)
#include <cublas_v2.h>
#include <cusolverDn.h>
#define EMBER_HAVE_CUSOLVER_HEADERS 1
#endif

namespace ember::cuda {

#if defined(EMBER_HAVE_CUSOLVER_HEADERS)
/// One precision's routines (T = float: cusolverDnS*, cublasStrsm; double: the D ones).
template <typename T>
struct CusolverRoutines {
  cusolverStatus_t (*getrf_buffer_size)(cusolverDnHandle_t, int, int, T*, int, int*) = nullptr;
  cusolverStatus_t (*getrf)(cusolverDnHandle_t, int, int, T*, int, T*, int*, int*) = nullptr;
  cusolverStatus_t (*getrs)(cusolverDnHandle_t, cublasOperation_t, int, int, const T*, int,
                            const int*, T*, int, int*) = nullptr;
  cusolverStatus_t (*potrf_buffer_size)(cusolverDnHandle_t, cublasFillMode_t, int, T*, int,
                                        int*) = nullptr;
  cusolverStatus_t (*potrf)(cusolverDnHandle_t, cublasFillMode_t, int, T*, int, T*, int,
                            int*) = nullptr;
  cusolverStatus_t (*geqrf_buffer_size)(cusolverDnHandle_t, int, int, T*, int, int*) = nullptr;
  cusolverStatus_t (*geqrf)(cusolverDnHandle_t, int, int, T*, int, T*, T*, int, int*) = nullptr;
  cusolverStatus_t (*orgqr_buffer_size)(cusolverDnHandle_t, int, int, int, const T*, int, const T*,
                                        int*) = nullptr;
  cusolverStatus_t (*orgqr)(cusolverDnHandle_t, int, int, int, T*, int, const T*, T*, int,
                            int*) = nullptr;
  cusolverStatus_t (*gesvd_buffer_size)(cusolverDnHandle_t, int, int, int*) = nullptr;
  cusolverStatus_t (*gesvd)(cusolverDnHandle_t, signed char, signed char, int, int, T*, int, T*, T*,
                            int, T*, int, T*, int, T*, int*) = nullptr;
  cusolverStatus_t (*syevd_buffer_size)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t,
                                        int, const T*, int, const T*, int*) = nullptr;
  cusolverStatus_t (*syevd)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int, T*, int,
                            T*, T*, int, int*) = nullptr;
  cublasStatus_t (*trsm)(cublasHandle_t, cublasSideMode_t, cublasFillMode_t, cublasOperation_t,
                         cublasDiagType_t, int, int, const T*, const T*, int, T*, int) = nullptr;
};

/// The entry points ember uses; every pointer is set when cusolver_api() returns non-null.
struct CusolverApi {
  cusolverStatus_t (*create)(cusolverDnHandle_t*) = nullptr;
  cusolverStatus_t (*set_stream)(cusolverDnHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*blas_create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*blas_set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  CusolverRoutines<float> f32;
  CusolverRoutines<double> f64;
  std::string path;  // the libcusolver file that was opened
};

/// The loaded API, or null with *why saying what was missing. Never throws; thread-safe.
const CusolverApi* cusolver_api(std::string* why);
#endif

}  // namespace ember::cuda
