// src/cuda/cusolver.cpp — the decompose slot's device route: cuSOLVER's dense routines (getrf,
// getrs, potrf, geqrf, orgqr, gesvd, syevd) and cuBLAS's trsm, one matrix of a batch at a time
// on the device's stream, with the small kernels of cusolver_kernels.cuh around them.
//
// Note [Row-major matrices through cuSOLVER]
// cuSOLVER is column-major and ember row-major: a row-major buffer read column-major is the
// transpose, which the routines use as the CPU's LAPACK calls do (src/cpu/lapack.cpp), so each
// op gives the host route's results to rounding:
//   inverse   getrf of Aᵀ, then getrs of (Aᵀ)X = I: X = A⁻ᵀ column-major, which read row-major
//             is A⁻¹ (written straight into the output);
//   det       getrf of Aᵀ (det Aᵀ = det A): the diagonal's product, negated per row swap;
//   solve     getrf of Aᵀ, getrs with trans = T on B transposed to column-major, transposed back;
//   cholesky  potrf (upper) of the buffer: U with A = UᵀU, whose row-major reading is L; the
//             strictly upper triangle (the input's, untouched) is zeroed;
//   qr        geqrf and orgqr on A transposed to column-major; R from the factor, Q transposed;
//   svd       gesvd needs rows >= columns: for m >= n on A transposed (U and Vᵀ transposed
//             back); for m < n on the buffer as it is (Aᵀ, tall): Aᵀ = U₁SV₁ᵀ gives A = V₁SU₁ᵀ,
//             and gesvd's U₁ and V₁ᵀ, read row-major, are A's Vh and U, written in place;
//   eigh      syevd (upper) of the buffer, whose upper triangle is A's lower one; the
//             eigenvector columns transposed into rows;
//   lu        getrf on A transposed to column-major (row pivoting needs the real rows), the
//             factor transposed back, the 1-based pivots copied;
//   solve_lower / solve_upper  trsm from the right on the buffers as they are: AX = B is
//             XᵀAᵀ = Bᵀ, and B's buffer read column-major is Bᵀ, A's is Aᵀ (the other triangle);
//             a zero on the diagonal is found by a kernel first (trsm does not check).
// Failures (a singular matrix, a matrix that is not positive definite, an iteration that did not
// converge) come back in per-matrix info words, read once after the batch: the first failing
// index is returned, as the host route returns it. singular LU factors are still written.
#include "cuda/cusolver.hpp"

#if defined(EMBER_HAVE_CUSOLVER_HEADERS)

#include <algorithm>
#include <array>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/common.cuh"
#include "cuda/cusolver_kernels.cuh"
#include "ember/error.hpp"

namespace ember::cuda {
namespace {

using backend::Decomposition;

const CusolverApi& api() {
  std::string why;
  const CusolverApi* a = cusolver_api(&why);
  EMBER_CHECK(a != nullptr, "decompose (cuSOLVER): ", why);
  return *a;
}

void check(cusolverStatus_t s, const char* routine) {
  EMBER_CHECK(s == CUSOLVER_STATUS_SUCCESS, "decompose (cuSOLVER): ", routine,
              " failed with status ", static_cast<int>(s));
}
void check(cublasStatus_t s, const char* routine) {
  EMBER_CHECK(s == CUBLAS_STATUS_SUCCESS, "decompose (cuBLAS): ", routine, " failed with status ",
              static_cast<int>(s));
}

// One cuSOLVER and one cuBLAS handle per device, used by one thread at a time (the handles
// keep per-call state: the stream, the workspace).
struct Handles {
  std::mutex mutex;
  cusolverDnHandle_t solver = nullptr;
  cublasHandle_t blas = nullptr;
};
Handles& handles_of(int device) {
  static std::array<Handles, 64> all;
  return all[static_cast<size_t>(device % 64)];
}

template <typename T>
const CusolverRoutines<T>& routines() {
  if constexpr (std::is_same_v<T, float>)
    return api().f32;
  else
    return api().f64;
}

// Device scratch of n elements of E (at least one, so every pointer is valid).
template <typename E>
struct Buffer {
  Scratch scratch;
  Buffer(int device, int64_t n)
      : scratch(device, sizeof(E) * static_cast<size_t>(std::max<int64_t>(n, 1))) {}
  E* get() const { return static_cast<E*>(scratch.get()); }
};

// The first index whose info word is nonzero (positive: a failure), or -1.
int64_t first_failure(int device, const int* info, int64_t batch) {
  std::vector<int> host(static_cast<size_t>(batch));
  if (batch > 0) memcpy_to_host(device, host.data(), info, sizeof(int) * host.size());
  for (int64_t i = 0; i < batch; ++i)
    if (host[static_cast<size_t>(i)] != 0) return i;
  return -1;
}

void copy(cudaStream_t s, void* dst, const void* src, size_t bytes) {
  if (bytes) EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
}

// getrf of each column-major m×n matrix of `a` (batch stride m·n), pivots at stride min(m, n).
template <typename T>
void factor_lu(const CusolverRoutines<T>& r, cusolverDnHandle_t h, int device, T* a, int* piv,
               int* info, int64_t batch, int64_t m, int64_t n) {
  const int mi = static_cast<int>(m), ni = static_cast<int>(n);
  int lwork = 0;
  check(r.getrf_buffer_size(h, mi, ni, a, mi, &lwork), "getrf_bufferSize");
  Buffer<T> work(device, lwork);
  for (int64_t i = 0; i < batch; ++i)
    check(r.getrf(h, mi, ni, a + i * m * n, mi, work.get(), piv + i * std::min(m, n), info + i),
          "getrf");
}

template <typename T>
int64_t run(Decomposition op, const View& a, const View& b, const View& out0, const View& out1,
            const View& out2, cusolverDnHandle_t h, cublasHandle_t blas, cudaStream_t st) {
  const CusolverRoutines<T>& r = routines<T>();
  const int device = a.device;
  const size_t rank = a.shape.size();
  const int64_t m = a.shape[rank - 2], n = a.shape[rank - 1], k = std::min(m, n);
  const int64_t batch = a.numel() / std::max<int64_t>(m * n, 1);
  const T* in = static_cast<const T*>(a.data);
  T* o0 = static_cast<T*>(out0.data);
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  Buffer<int> info(device, batch), ignored(device, 1);
  switch (op) {
    case Decomposition::inverse:
    case Decomposition::det:
    case Decomposition::solve: {
      Buffer<T> lu(device, batch * n * n);
      Buffer<int> piv(device, batch * n);
      copy(st, lu.get(), in, sizeof(T) * batch * n * n);
      factor_lu(r, h, device, lu.get(), piv.get(), info.get(), batch, n, n);
      if (op == Decomposition::det) {
        solver::det_of_lu(st, o0, lu.get(), piv.get(), batch, n);
        return -1;  // a zero pivot is a zero determinant, not a failure
      }
      const int64_t rhs = op == Decomposition::inverse ? n : b.shape[b.shape.size() - 1];
      Buffer<T> x(device, op == Decomposition::solve ? batch * n * rhs : 0);
      T* target = op == Decomposition::inverse ? o0 : x.get();
      if (op == Decomposition::inverse)
        solver::identity(st, o0, batch, n);
      else
        solver::transpose(st, x.get(), static_cast<const T*>(b.data), batch, n, rhs);
      const cublasOperation_t trans = op == Decomposition::inverse ? CUBLAS_OP_N : CUBLAS_OP_T;
      for (int64_t i = 0; i < batch; ++i)
        check(r.getrs(h, trans, ni, static_cast<int>(rhs), lu.get() + i * n * n, ni,
                      piv.get() + i * n, target + i * n * rhs, ni, ignored.get()),
              "getrs");
      if (op == Decomposition::solve) solver::transpose(st, o0, x.get(), batch, rhs, n);
      return first_failure(device, info.get(), batch);
    }
    case Decomposition::cholesky: {
      copy(st, o0, in, sizeof(T) * batch * n * n);
      int lwork = 0;
      check(r.potrf_buffer_size(h, CUBLAS_FILL_MODE_UPPER, ni, o0, ni, &lwork), "potrf_bufferSize");
      Buffer<T> work(device, lwork);
      for (int64_t i = 0; i < batch; ++i)
        check(r.potrf(h, CUBLAS_FILL_MODE_UPPER, ni, o0 + i * n * n, ni, work.get(), lwork,
                      info.get() + i),
              "potrf");
      solver::zero_upper(st, o0, batch, n);
      return first_failure(device, info.get(), batch);
    }
    case Decomposition::qr: {
      Buffer<T> col(device, batch * m * n), tau(device, batch * k);
      solver::transpose(st, col.get(), in, batch, m, n);
      int lq = 0, lo = 0;
      check(r.geqrf_buffer_size(h, mi, ni, col.get(), mi, &lq), "geqrf_bufferSize");
      check(r.orgqr_buffer_size(h, mi, ki, ki, col.get(), mi, tau.get(), &lo), "orgqr_bufferSize");
      const int lwork = std::max(lq, lo);
      Buffer<T> work(device, lwork);
      for (int64_t i = 0; i < batch; ++i)
        check(r.geqrf(h, mi, ni, col.get() + i * m * n, mi, tau.get() + i * k, work.get(), lwork,
                      info.get() + i),
              "geqrf");
      solver::r_of_qr(st, static_cast<T*>(out1.data), col.get(), batch, m, n, k);
      for (int64_t i = 0; i < batch; ++i)
        check(r.orgqr(h, mi, ki, ki, col.get() + i * m * n, mi, tau.get() + i * k, work.get(),
                      lwork, info.get() + i),
              "orgqr");
      // Q: the first k columns of each factor (column-major m×k, batch stride m·n).
      solver::transpose(st, o0, col.get(), batch, k, m, m * n);
      return -1;
    }
    case Decomposition::svd: {
      T* s = static_cast<T*>(out1.data);
      T* vh = static_cast<T*>(out2.data);
      const bool tall = m >= n;
      // gesvd's operand, rows >= columns: A (m×n, transposed) or the buffer as it is (Aᵀ, n×m).
      const int rows = tall ? mi : ni, cols = tall ? ni : mi;
      Buffer<T> col(device, batch * m * n);
      if (tall)
        solver::transpose(st, col.get(), in, batch, m, n);
      else
        copy(st, col.get(), in, sizeof(T) * batch * m * n);
      Buffer<T> u(device, tall ? batch * m * k : 0), vt(device, tall ? batch * k * n : 0);
      int lwork = 0;
      check(r.gesvd_buffer_size(h, rows, cols, &lwork), "gesvd_bufferSize");
      Buffer<T> work(device, lwork);
      for (int64_t i = 0; i < batch; ++i) {
        // tall: U (m×k) and Vᵀ (k×n) to scratch; wide: U₁ (n×k) is Vh, V₁ᵀ (k×m) is U.
        T* ui = tall ? u.get() + i * m * k : vh + i * k * n;
        T* vti = tall ? vt.get() + i * k * n : o0 + i * m * k;
        check(r.gesvd(h, 'S', 'S', rows, cols, col.get() + i * m * n, rows, s + i * k, ui, rows,
                      vti, ki, work.get(), lwork, nullptr, info.get() + i),
              "gesvd");
      }
      if (tall) {
        solver::transpose(st, o0, u.get(), batch, k, m);
        solver::transpose(st, vh, vt.get(), batch, n, k);
      }
      return first_failure(device, info.get(), batch);
    }
    case Decomposition::eigh: {
      Buffer<T> z(device, batch * n * n);
      copy(st, z.get(), in, sizeof(T) * batch * n * n);
      T* w = o0;
      int lwork = 0;
      check(r.syevd_buffer_size(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, ni, z.get(),
                                ni, w, &lwork),
            "syevd_bufferSize");
      Buffer<T> work(device, lwork);
      for (int64_t i = 0; i < batch; ++i)
        check(r.syevd(h, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, ni, z.get() + i * n * n,
                      ni, w + i * n, work.get(), lwork, info.get() + i),
              "syevd");
      solver::transpose(st, static_cast<T*>(out1.data), z.get(), batch, n, n);
      return first_failure(device, info.get(), batch);
    }
    case Decomposition::lu: {
      Buffer<T> col(device, batch * m * n);
      Buffer<int> piv(device, batch * k);
      solver::transpose(st, col.get(), in, batch, m, n);
      factor_lu(r, h, device, col.get(), piv.get(), info.get(), batch, m, n);
      solver::transpose(st, o0, col.get(), batch, n, m);
      copy(st, out1.data, piv.get(), sizeof(int) * batch * k);
      return first_failure(device, info.get(), batch);
    }
    case Decomposition::solve_lower:
    case Decomposition::solve_upper: {
      const int64_t rhs = b.shape[b.shape.size() - 1];
      solver::zero_diagonal(st, info.get(), in, batch, n);
      copy(st, o0, b.data, sizeof(T) * batch * n * rhs);
      const cublasFillMode_t uplo =
          op == Decomposition::solve_lower ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
      const T one = T(1);
      for (int64_t i = 0; i < batch; ++i)
        check(r.trsm(blas, CUBLAS_SIDE_RIGHT, uplo, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT,
                     static_cast<int>(rhs), ni, &one, in + i * n * n, ni, o0 + i * n * rhs,
                     static_cast<int>(rhs)),
              "trsm");
      return first_failure(device, info.get(), batch);
    }
  }
  return -1;
}

}  // namespace

int64_t cusolver_decompose(Decomposition op, const View& a, const View& b, const View& out0,
                           const View& out1, const View& out2) {
  const CusolverApi& lib = api();
  Handles& hs = handles_of(a.device);
  std::lock_guard<std::mutex> lock(hs.mutex);
  const cudaStream_t st = stream(a.device);  // makes the device current
  if (!hs.solver) check(lib.create(&hs.solver), "cusolverDnCreate");
  if (!hs.blas) check(lib.blas_create(&hs.blas), "cublasCreate");
  check(lib.set_stream(hs.solver, st), "cusolverDnSetStream");
  check(lib.blas_set_stream(hs.blas, st), "cublasSetStream");
  int64_t result = -1;
  dispatch_float(a.dtype, "decompose", [&](auto tag) {
    using T = typename decltype(tag)::type;
    result = run<T>(op, a, b, out0, out1, out2, hs.solver, hs.blas, st);
  });
  return result;
}

}  // namespace ember::cuda

#endif  // EMBER_HAVE_CUSOLVER_HEADERS
