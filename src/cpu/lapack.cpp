// src/cpu/lapack.cpp — the decompose slot: inverse, determinant, solve, Cholesky, QR, SVD, the
// symmetric eigendecomposition, LU with partial pivoting and triangular solves of each matrix
// of a batch, through the LAPACK routines OpenBLAS carries (getrf/getri/getrs, potrf,
// geqrf/orgqr, gesdd, syevd, trtrs; declared here, Fortran calling convention).
//
// LAPACK is column-major and ember row-major: a row-major buffer is the transpose to LAPACK.
// inverse, det and cholesky use that directly (inv(Aᵀ) = inv(A)ᵀ, det Aᵀ = det A, and the upper
// factor U of Aᵀ = A is Lᵀ, whose row-major reading is L); solve factors Aᵀ and solves with the
// transposed system; qr and svd transpose a copy first. eigh reads the row-major lower triangle
// as LAPACK's upper one; lu transposes a copy (row pivoting needs the real rows); the
// triangular solves pass Aᵀ with trans = 'T' and the other triangle. Batches run one matrix at a
// time on this thread (LAPACK calls BLAS, which must not run inside a parallel_for body).
#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"

extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgetri_(const int* n, float* a, const int* lda, const int* ipiv, float* work, const int* lwork,
             int* info);
void dgetri_(const int* n, double* a, const int* lda, const int* ipiv, double* work,
             const int* lwork, int* info);
void sgetrs_(const char* trans, const int* n, const int* nrhs, const float* a, const int* lda,
             const int* ipiv, float* b, const int* ldb, int* info, size_t);
void dgetrs_(const char* trans, const int* n, const int* nrhs, const double* a, const int* lda,
             const int* ipiv, double* b, const int* ldb, int* info, size_t);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau,
             float* work, const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork,
             int* iwork, int* info, size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info, size_t);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
             float* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
void strtrs_(const char* uplo, const char* trans, const char* diag, const int* n, const int* nrhs,
             const float* a, const int* lda, float* b, const int* ldb, int* info, size_t, size_t,
             size_t);
void dtrtrs_(const char* uplo, const char* trans, const char* diag, const int* n, const int* nrhs,
             const double* a, const int* lda, double* b, const int* ldb, int* info, size_t, size_t,
             size_t);
}

namespace ember::cpu {
namespace {

// The LAPACK routines of one precision.
template <typename T>
struct Lapack;
#define EMBER_LAPACK_(T, p)                                                                        \
  template <>                                                                                      \
  struct Lapack<T> {                                                                               \
    static void getrf(int m, int n, T* a, int lda, int* ipiv, int* info) {                         \
      p##getrf_(&m, &n, a, &lda, ipiv, info);                                                      \
    }                                                                                              \
    static void getri(int n, T* a, int lda, const int* ipiv, T* w, int lw, int* info) {            \
      p##getri_(&n, a, &lda, ipiv, w, &lw, info);                                                  \
    }                                                                                              \
    static void getrs(char t, int n, int nrhs, const T* a, int lda, const int* ipiv, T* b,         \
                      int ldb, int* info) {                                                        \
      p##getrs_(&t, &n, &nrhs, a, &lda, ipiv, b, &ldb, info, 1);                                   \
    }                                                                                              \
    static void potrf(char u, int n, T* a, int lda, int* info) {                                   \
      p##potrf_(&u, &n, a, &lda, info, 1);                                                         \
    }                                                                                              \
    static void geqrf(int m, int n, T* a, int lda, T* tau, T* w, int lw, int* info) {              \
      p##geqrf_(&m, &n, a, &lda, tau, w, &lw, info);                                               \
    }                                                                                              \
    static void orgqr(int m, int n, int k, T* a, int lda, const T* tau, T* w, int lw, int* info) { \
      p##orgqr_(&m, &n, &k, a, &lda, tau, w, &lw, info);                                           \
    }                                                                                              \
    static void gesdd(char j, int m, int n, T* a, int lda, T* s, T* u, int ldu, T* vt, int ldvt,   \
                      T* w, int lw, int* iw, int* info) {                                          \
      p##gesdd_(&j, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, w, &lw, iw, info, 1);                  \
    }                                                                                              \
    static void syevd(char u, int n, T* a, int lda, T* w, T* work, int lw, int* iw, int liw,       \
                      int* info) {                                                                 \
      const char v = 'V';                                                                          \
      p##syevd_(&v, &u, &n, a, &lda, w, work, &lw, iw, &liw, info, 1, 1);                          \
    }                                                                                              \
    static void trtrs(char u, char t, int n, int nrhs, const T* a, int lda, T* b, int ldb,         \
                      int* info) {                                                                 \
      const char d = 'N';                                                                          \
      p##trtrs_(&u, &t, &d, &n, &nrhs, a, &lda, b, &ldb, info, 1, 1, 1);                           \
    }                                                                                              \
  };
EMBER_LAPACK_(float, s)
EMBER_LAPACK_(double, d)
#undef EMBER_LAPACK_

// out[j, i] = in[i, j] for a rows × cols matrix (row-major both).
template <typename T>
void transpose_into(T* out, const T* in, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[j * rows + i] = in[i * cols + j];
}

// A workspace query (lwork = -1) answer as a size.
template <typename T>
int work_size(T query) {
  return std::max(1, static_cast<int>(query));
}

template <typename T>
int64_t run(Decomposition op, const View& a, const View& b, const View& out0, const View& out1,
            const View& out2) {
  const int rank = a.shape.size();
  const int m = static_cast<int>(a.shape[rank - 2]), n = static_cast<int>(a.shape[rank - 1]);
  const int k = std::min(m, n);
  const int64_t batch = a.numel() / std::max<int64_t>(int64_t{m} * n, 1);
  const T* in = static_cast<const T*>(a.data);
  std::vector<T> work_a(static_cast<size_t>(m) * n);
  std::vector<int> ipiv(static_cast<size_t>(std::max(k, 1)));
  int64_t first_singular = -1;  // lu: the first matrix with a zero pivot
  for (int64_t i = 0; i < batch; ++i) {
    const T* ai = in + i * m * n;
    int info = 0;
    switch (op) {
      case Decomposition::inverse: {
        T* o = static_cast<T*>(out0.data) + i * n * n;
        std::memcpy(o, ai, sizeof(T) * n * n);
        if (n == 0) break;
        Lapack<T>::getrf(n, n, o, n, ipiv.data(), &info);
        if (info != 0) return i;
        T query;
        Lapack<T>::getri(n, o, n, ipiv.data(), &query, -1, &info);
        std::vector<T> w(static_cast<size_t>(work_size(query)));
        Lapack<T>::getri(n, o, n, ipiv.data(), w.data(), static_cast<int>(w.size()), &info);
        if (info != 0) return i;
        break;
      }
      case Decomposition::det: {
        std::memcpy(work_a.data(), ai, sizeof(T) * n * n);
        T det = T(1);
        if (n > 0) {
          Lapack<T>::getrf(n, n, work_a.data(), n, ipiv.data(), &info);
          // info > 0: an exact zero pivot, the determinant is 0 (U's diagonal says so too).
          for (int j = 0; j < n; ++j) {
            det *= work_a[static_cast<size_t>(j) * n + j];
            if (ipiv[j] != j + 1) det = -det;
          }
        }
        static_cast<T*>(out0.data)[i] = det;
        break;
      }
      case Decomposition::solve: {
        const int rhs = static_cast<int>(b.shape[b.shape.size() - 1]);
        std::memcpy(work_a.data(), ai, sizeof(T) * n * n);
        std::vector<T> x(static_cast<size_t>(n) * rhs);
        transpose_into(x.data(), static_cast<const T*>(b.data) + i * n * rhs, n, rhs);
        if (n > 0) {
          Lapack<T>::getrf(n, n, work_a.data(), n, ipiv.data(), &info);
          if (info != 0) return i;
          Lapack<T>::getrs('T', n, rhs, work_a.data(), n, ipiv.data(), x.data(), n, &info);
        }
        transpose_into(static_cast<T*>(out0.data) + i * n * rhs, x.data(), rhs, n);
        break;
      }
      case Decomposition::cholesky: {
        T* o = static_cast<T*>(out0.data) + i * n * n;
        std::memcpy(o, ai, sizeof(T) * n * n);
        if (n == 0) break;
        Lapack<T>::potrf('U', n, o, n, &info);
        if (info != 0) return i;
        for (int r = 0; r < n; ++r)
          for (int c = r + 1; c < n; ++c) o[r * n + c] = T(0);  // L is lower triangular
        break;
      }
      case Decomposition::qr: {
        std::vector<T> col(static_cast<size_t>(m) * n), tau(static_cast<size_t>(std::max(k, 1)));
        transpose_into(col.data(), ai, m, n);  // column-major A
        T* r = static_cast<T*>(out1.data) + i * k * n;
        T* q = static_cast<T*>(out0.data) + i * m * k;
        if (k == 0) break;
        T query;
        Lapack<T>::geqrf(m, n, col.data(), m, tau.data(), &query, -1, &info);
        std::vector<T> w(static_cast<size_t>(work_size(query)));
        Lapack<T>::geqrf(m, n, col.data(), m, tau.data(), w.data(), static_cast<int>(w.size()),
                         &info);
        for (int rr = 0; rr < k; ++rr)
          for (int c = 0; c < n; ++c)
            r[rr * n + c] = c >= rr ? col[static_cast<size_t>(c) * m + rr] : T(0);
        Lapack<T>::orgqr(m, k, k, col.data(), m, tau.data(), &query, -1, &info);
        w.resize(static_cast<size_t>(std::max(work_size(query), static_cast<int>(w.size()))));
        Lapack<T>::orgqr(m, k, k, col.data(), m, tau.data(), w.data(), static_cast<int>(w.size()),
                         &info);
        transpose_into(q, col.data(), k, m);  // Q's first k columns, row-major [m, k]
        break;
      }
      case Decomposition::svd: {
        std::vector<T> col(static_cast<size_t>(m) * n), u(static_cast<size_t>(m) * k),
            vt(static_cast<size_t>(k) * n);
        std::vector<int> iwork(static_cast<size_t>(8 * std::max(k, 1)));
        transpose_into(col.data(), ai, m, n);
        T* s = static_cast<T*>(out1.data) + i * k;
        if (k == 0) break;
        T query;
        Lapack<T>::gesdd('S', m, n, col.data(), m, s, u.data(), m, vt.data(), k, &query, -1,
                         iwork.data(), &info);
        std::vector<T> w(static_cast<size_t>(work_size(query)));
        Lapack<T>::gesdd('S', m, n, col.data(), m, s, u.data(), m, vt.data(), k, w.data(),
                         static_cast<int>(w.size()), iwork.data(), &info);
        if (info != 0) return i;
        transpose_into(static_cast<T*>(out0.data) + i * m * k, u.data(), k, m);
        transpose_into(static_cast<T*>(out2.data) + i * k * n, vt.data(), n, k);
        break;
      }
      case Decomposition::eigh: {
        // Row-major A read as column-major is Aᵀ: its upper triangle is A's lower one.
        std::memcpy(work_a.data(), ai, sizeof(T) * n * n);
        T query;
        int iquery = 0;
        Lapack<T>::syevd('U', n, work_a.data(), n, static_cast<T*>(out0.data) + i * n, &query, -1,
                         &iquery, -1, &info);
        std::vector<T> w(static_cast<size_t>(work_size(query)));
        std::vector<int> iw(static_cast<size_t>(std::max(1, iquery)));
        Lapack<T>::syevd('U', n, work_a.data(), n, static_cast<T*>(out0.data) + i * n, w.data(),
                         static_cast<int>(w.size()), iw.data(), static_cast<int>(iw.size()), &info);
        if (info != 0) return i;
        // Column j of Z is eigenvector j; row-major out1[r][j] = Z(r, j).
        transpose_into(static_cast<T*>(out1.data) + i * n * n, work_a.data(), n, n);
        break;
      }
      case Decomposition::lu: {
        std::vector<T> col(static_cast<size_t>(m) * n);
        transpose_into(col.data(), ai, m, n);
        Lapack<T>::getrf(m, n, col.data(), m, ipiv.data(), &info);
        if (info > 0 && first_singular < 0) first_singular = i;  // every matrix is still written
        transpose_into(static_cast<T*>(out0.data) + i * m * n, col.data(), n, m);
        int32_t* piv = static_cast<int32_t*>(out1.data) + i * k;
        for (int j = 0; j < k; ++j) piv[j] = ipiv[j];
        break;
      }
      case Decomposition::solve_lower:
      case Decomposition::solve_upper: {
        const int rhs = static_cast<int>(b.shape[b.shape.size() - 1]);
        std::vector<T> x(static_cast<size_t>(n) * rhs);
        transpose_into(x.data(), static_cast<const T*>(b.data) + i * n * rhs, n, rhs);
        // The buffer is Aᵀ to LAPACK: A lower is its upper triangle, solved transposed.
        const char uplo = op == Decomposition::solve_lower ? 'U' : 'L';
        Lapack<T>::trtrs(uplo, 'T', n, rhs, ai, n, x.data(), n, &info);
        if (info != 0) return i;
        transpose_into(static_cast<T*>(out0.data) + i * n * rhs, x.data(), rhs, n);
        break;
      }
    }
  }
  return first_singular;
}

}  // namespace

int64_t decompose(Decomposition op, const View& a, const View& b, const View& out0,
                  const View& out1, const View& out2) {
  EMBER_ASSERT(a.shape.size() >= 2 && backend::is_contiguous(a),
               "decompose: a must be a "
               "contiguous batch of matrices");
  return dispatch_float(a.dtype, "decompose", [&](auto tag) -> int64_t {
    using T = typename decltype(tag)::type;
    return run<T>(op, a, b, out0, out1, out2);
  });
}

}  // namespace ember::cpu
