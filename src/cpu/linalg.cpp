// src/cpu/linalg.cpp — batched GEMM through OpenBLAS, plus the optional bias epilogue.
//
// C[b] = act(alpha · op(A[b]) · op(B[b]) + beta · C[b] (+ bias on every row)), row-major, for
// b in [0, batch) with per-operand batch strides (0 broadcasts one matrix), in f32/f64 (large f32
// products through oneDNN's matmul where it is loaded: Note [f32 GEMMs: OpenBLAS or oneDNN] in
// gemm_onednn.cpp), and in f16/bf16 through oneDNN's matmul where it is loaded (Note [16-bit
// GEMMs through oneDNN]), else through f32 (gemm_wide). Transposes go
// to cblas as flags; nothing is copied. The batch loop calls BLAS from this thread only:
// OpenBLAS threads each call itself with the count kept equal to ember's pool
// (src/cpu/threads.cpp), and BLAS must never run inside a parallel_for body.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "cpu/gemm_onednn.hpp"
#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"
#include "cpu/vec_math.hpp"
#include "kernels/relu_mask.hpp"

namespace ember::cpu {
namespace {

template <typename T>
void blas_gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda,
               const T* b, int ldb, T beta, T* c, int ldc) {
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// C = beta · C for an empty inner dimension (BLAS would reject ld = 0 there).
template <typename T>
void scale_rows(T* c, int64_t m, int64_t n, int64_t ldc, T beta) {
  for (int64_t i = 0; i < m; ++i) {
    T* row = c + i * ldc;
    if (beta == T(0)) {
      for (int64_t j = 0; j < n; ++j) row[j] = T(0);
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

template <typename T>
EMBER_VECTORIZE void add_bias_rows(T* __restrict c, const T* __restrict bias, int64_t rows,
                                   int64_t n, int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i) {
    T* __restrict row = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
  }
}

// The epilogue after BLAS: bias (may be null) then the activation, one pass over each row.
template <typename T>
void epilogue_rows(T* c, const T* bias, backend::GemmEpilogue act, int64_t rows, int64_t n,
                   int64_t ldc) {
  if (bias) add_bias_rows(c, bias, rows, n, ldc);
  if (act == backend::GemmEpilogue::none) return;
  const T k0 = static_cast<T>(0.7978845608028654), k1 = static_cast<T>(0.044715);
  for (int64_t i = 0; i < rows; ++i) {
    T* row = c + i * ldc;
    if (act == backend::GemmEpilogue::relu) {
      for (int64_t j = 0; j < n; ++j) row[j] = row[j] < T(0) ? T(0) : row[j];  // UnaryOp::relu
    } else {  // gelu_tanh, the formula of UnaryOp::gelu_tanh
      for (int64_t j = 0; j < n; ++j) {
        const T x = row[j];
        row[j] = T(0.5) * x * (T(1) + tanh_of(k0 * (x + k1 * x * x * x)));
      }
    }
  }
}

int to_int(int64_t v, const char* what) {
  EMBER_CHECK(v >= 0 && v <= INT_MAX, "gemm: ", what, " = ", v, " is beyond BLAS's 32-bit range");
  return static_cast<int>(v);
}

template <typename T>
void gemm_typed(const GemmArgs& g) {
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  const T* bias = static_cast<const T*>(g.bias);
  const int m = to_int(g.m, "m"), n = to_int(g.n, "n"), k = to_int(g.k, "k");
  const int lda = to_int(g.lda, "lda"), ldb = to_int(g.ldb, "ldb"), ldc = to_int(g.ldc, "ldc");
  EMBER_ASSERT(ldc >= n, "gemm: ldc ", ldc, " < n ", n);
  if (k > 0) {
    EMBER_ASSERT(lda >= (g.trans_a ? m : k) && ldb >= (g.trans_b ? k : n),
                 "gemm: leading dimensions too small");
  }
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  if (k > 0) park_workers();  // OpenBLAS's threads get the cores
  for (int64_t i = 0; i < g.batch; ++i) {
    T* ci = c + i * g.batch_stride_c;
    if (k == 0) {
      scale_rows(ci, m, n, ldc, beta);
    } else {
      blas_gemm<T>(g.trans_a, g.trans_b, m, n, k, alpha, a + i * g.batch_stride_a, lda,
                   b + i * g.batch_stride_b, ldb, beta, ci, ldc);
    }
    if (bias || g.epilogue != backend::GemmEpilogue::none) {
      const int64_t grain = std::max<int64_t>(1, kGrainCheap / std::max(n, 1));
      parallel_for(m, grain, [&](int64_t r0, int64_t r1) {
        epilogue_rows(ci + r0 * ldc, bias, g.epilogue, r1 - r0, n, ldc);
      });
    }
  }
}

// Rows x cols of a 16-bit matrix with leading dimension ld, to or from contiguous f32.
template <typename T>
void widen(float* out, const T* in, int64_t rows, int64_t cols, int64_t ld) {
  parallel_for(rows, std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   for (int64_t j = 0; j < cols; ++j)
                     out[r * cols + j] = static_cast<float>(in[r * ld + j]);
               });
}
template <typename T>
void narrow(T* out, const float* in, int64_t rows, int64_t cols, int64_t ld) {
  parallel_for(rows, std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   for (int64_t j = 0; j < cols; ++j) out[r * ld + j] = T(in[r * cols + j]);
               });
}

// GemmArgs::bias_grad of a c_f32 product: the m sums over k of op(A) (A 16-bit, [k, m] when
// trans_a, else [m, k], leading dimension lda), each in f64 in the order of k, rounded once
// to f32 (zeros when k = 0).
template <typename T>
void row_sums(const GemmArgs& g) {
  const T* a = static_cast<const T*>(g.a);
  float* out = static_cast<float*>(g.bias_grad);
  parallel_for(g.m, std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(g.k, 1)),
               [&](int64_t r0, int64_t r1) {
                 std::vector<double> s(static_cast<size_t>(r1 - r0), 0.0);
                 if (g.trans_a) {  // column sums of [k, m]: row by row, in order
                   for (int64_t j = 0; j < g.k; ++j)
                     for (int64_t r = r0; r < r1; ++r)
                       s[r - r0] += static_cast<float>(a[j * g.lda + r]);
                 } else {
                   for (int64_t r = r0; r < r1; ++r)
                     for (int64_t j = 0; j < g.k; ++j)
                       s[r - r0] += static_cast<float>(a[r * g.lda + j]);
                 }
                 for (int64_t r = r0; r < r1; ++r) out[r] = static_cast<float>(s[r - r0]);
               });
}

// f16/bf16 (Note [16-bit floats on the CPU]): each product of the batch in f32 through
// OpenBLAS's sgemm — operands widened to contiguous f32, bias and activation applied in f32 —
// and C rounded to the 16-bit type once.
template <typename T>
void gemm_wide(const GemmArgs& g) {
  const int64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
  const int64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
  std::vector<float> a(static_cast<size_t>(a_rows * a_cols));
  std::vector<float> b(static_cast<size_t>(b_rows * b_cols));
  std::vector<float> c(g.c_f32 ? 0 : static_cast<size_t>(g.m * g.n)), bias;
  if (g.bias) {
    bias.resize(static_cast<size_t>(g.n));
    widen(bias.data(), static_cast<const T*>(g.bias), 1, g.n, g.n);
  }
  GemmArgs f = g;
  f.dtype = DType::f32;
  f.batch = 1;
  f.a = a.data();
  f.lda = std::max<int64_t>(a_cols, 1);
  f.b = b.data();
  f.ldb = std::max<int64_t>(b_cols, 1);
  f.c = c.data();
  f.ldc = g.n;
  f.bias = g.bias ? bias.data() : nullptr;
  f.bias_grad = nullptr;
  f.relu_mask_out = nullptr;
  f.relu_mask_written = nullptr;
  f.relu_mask_in = nullptr;
  f.relu_bias_grad = nullptr;
  for (int64_t i = 0; i < g.batch; ++i) {
    const T* ai = static_cast<const T*>(g.a) + i * g.batch_stride_a;
    const T* bi = static_cast<const T*>(g.b) + i * g.batch_stride_b;
    if (g.k > 0) {
      widen(a.data(), ai, a_rows, a_cols, g.lda);
      widen(b.data(), bi, b_rows, b_cols, g.ldb);
    }
    if (g.c_f32) {  // C is f32 already: the product lands in it
      f.c = static_cast<float*>(g.c) + i * g.batch_stride_c;
      f.ldc = g.ldc;
      gemm_typed<float>(f);
      continue;
    }
    T* ci = static_cast<T*>(g.c) + i * g.batch_stride_c;
    if (g.beta != 0.0) widen(c.data(), ci, g.m, g.n, g.ldc);
    gemm_typed<float>(f);
    narrow(ci, c.data(), g.m, g.n, g.ldc);
  }
}

// Note [ReLU masks]: writes the mask of C (after the epilogue), or zeroes C where the mask
// is clear (ReLU's backward, as cuBLASLt's DRELU).
template <typename T>
void relu_mask_pass(const GemmArgs& g) {
  T* c = static_cast<T*>(g.c);
  const int64_t ld = backend::relu_mask_ld(g.n), row_bytes = ld / 8;
  parallel_for(g.m, std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(g.n, 1)),
               [&](int64_t r0, int64_t r1) {
                 if (g.relu_mask_out) {
                   auto* mask = static_cast<uint8_t*>(g.relu_mask_out);
                   for (int64_t i = r0; i < r1; ++i)
                     for (int64_t b = 0; b < row_bytes; ++b)
                       mask[i * row_bytes + b] = kernels::relu_mask_byte(c, g.ldc, g.n, i, b);
                 } else {
                   const auto* mask = static_cast<const uint8_t*>(g.relu_mask_in);
                   for (int64_t i = r0; i < r1; ++i)
                     for (int64_t j = 0; j < g.n; ++j)
                       if (!kernels::relu_mask_test(mask, ld, i, j)) c[i * g.ldc + j] = T(0);
                 }
               });
}

#include "kernels/gelu_gemm.inc"

}  // namespace

// No fused kernel on the CPU: the op composes the norm and the product.
bool norm_linear(int, std::span<const GemmArgs>, const backend::RowNorm&, bool) { return false; }

void gemm(const GemmArgs& args) {
  num_threads();  // first use: the pool's creation sets OpenBLAS's thread count
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return;
  if (args.residual) {  // GemmArgs::residual: copied into C, then C += the product
    EMBER_ASSERT(backend::residual_fits(args), "gemm: a residual is for one plain product");
    const size_t es = element_size(args.dtype);
    for (int64_t i = 0; i < args.m; ++i)
      std::memcpy(static_cast<char*>(args.c) + static_cast<size_t>(i * args.ldc) * es,
                  static_cast<const char*>(args.residual) + static_cast<size_t>(i * args.ldc) * es,
                  static_cast<size_t>(args.n) * es);
    return gemm(backend::accumulating_into_residual(args));
  }
  if (args.gelu_pre_out || args.gelu_pre_in) return gelu_gemm_unfused(args);
  EMBER_ASSERT(!args.c_f32 || ((args.dtype == DType::f16 || args.dtype == DType::bf16) &&
                               !args.bias && args.epilogue == backend::GemmEpilogue::none &&
                               !args.relu_mask_out && !args.relu_mask_in),
               "gemm: an f32 C is for one plain product of f16/bf16 operands");
  dispatch_any_float(args.dtype, "gemm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsHalfLike<T>) {
      if (!gemm_onednn(args)) gemm_wide<T>(args);
    } else {
      if constexpr (std::is_same_v<T, float>) {
        if (f32_gemm_prefers_onednn(args) && gemm_onednn(args)) return;
      }
      gemm_typed<T>(args);
    }
  });
  if (args.bias_grad && args.c_f32) {
    dispatch_any_float(args.dtype, "gemm", [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kIsHalfLike<T>) row_sums<T>(args);
    });
  } else if (args.bias_grad) {
    const auto [out, in] = backend::gemm_bias_grad_views(args);
    reduce(ReduceOp::sum, out, in);
  }
  if (args.relu_mask_out || args.relu_mask_in) {
    EMBER_ASSERT(args.batch == 1, "gemm: ReLU masks are for one product");
    dispatch_any_float(args.dtype, "gemm",
                       [&](auto tag) { relu_mask_pass<typename decltype(tag)::type>(args); });
    if (args.relu_mask_out && args.relu_mask_written) *args.relu_mask_written = true;
  }
  if (args.relu_bias_grad) {
    const auto [out, in] = backend::gemm_column_sum_views(args, args.relu_bias_grad);
    reduce(ReduceOp::sum, out, in);
  }
}

}  // namespace ember::cpu
