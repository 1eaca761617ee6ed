// ember/ops.hpp — every tensor operation. Differentiable ops record autograd nodes when
// an input requires grad and grad mode is on. Binary ops broadcast (NumPy rules); shape
// errors name the op and both shapes.
//
//   Tensor h = relu(linear(x, w1, b1));
//   Tensor loss = cross_entropy(linear(h, w2, b2), labels);
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/tensor.hpp"

namespace ember {

/// How a loss reduces its per-element values: none, mean, sum; batchmean (kl_div only) is the
/// sum divided by the batch size, as PyTorch's.
enum class Reduction : uint8_t { none, mean, sum, batchmean };

// ---- type promotion (docs/ops.md) ----
/// The dtype two dtypes combine into, as torch.promote_types: bool < integer < float, the
/// wider integer (u8 < i32 < i64), the wider float (f16 with bf16 is f32).
///   promote_types(DType::i32, DType::f32)  // f32
DType promote_types(DType a, DType b);
/// The dtype a binary op computes a and b in, as torch.result_type: promote_types of the
/// two, except that a 0-d tensor does not widen a dimensioned one of its own category or a
/// higher one (f32 tensor + 0-d f64 is f32; i32 tensor + 0-d f64 is f64).
DType result_type(const Tensor& a, const Tensor& b);

// ---- elementwise, binary (broadcasting; operands of different dtypes are promoted to
// their result_type, and each input's gradient comes back in its own dtype) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
/// a ** b elementwise (both tensors, broadcasting).
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// with a scalar
Tensor add(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
/// x * s (ggmlR's ag_scale).
Tensor scale(const Tensor& x, double s);
Tensor pow(const Tensor& x, double exponent);
/// Elements limited to [lo, hi]; the gradient passes where lo <= x <= hi. An integer tensor
/// stays integer with integral bounds and becomes f32 with a fractional one, as PyTorch.
Tensor clamp(const Tensor& x, double lo, double hi);

// ---- elementwise, unary ----
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
/// "none": x·Φ(x) with the exact erf; "tanh": the tanh approximation (as PyTorch).
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
/// log(1 + exp(beta·x)) / beta, and x itself where beta·x > threshold (PyTorch's softplus).
///   softplus(x)  softplus(x, 2.0, 10.0)
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
/// The activations of torch.nn.functional, with PyTorch's defaults and gradients:
/// leaky_relu (x or slope·x), elu (x or alpha·(eˣ - 1)), selu (scaled elu, PyTorch's
/// constants), mish (x·tanh(softplus(x))), hardtanh (clamped to [min_val, max_val]),
/// hardswish (x·relu6(x + 3)/6), hardsigmoid (relu6(x + 3)/6), logsigmoid (log σ(x), stable),
/// prelu (slope·x below 0 with one learnable slope or one per channel, input dim 1) and glu
/// (the first half of `dim` times σ of the second half).
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1.0);
Tensor selu(const Tensor& x);
Tensor mish(const Tensor& x);
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor hardswish(const Tensor& x);
Tensor hardsigmoid(const Tensor& x);
Tensor logsigmoid(const Tensor& x);
Tensor prelu(const Tensor& x, const Tensor& weight);
Tensor glu(const Tensor& x, int64_t dim = -1);

// ---- the math library (f32/f64; PyTorch's names, values and gradients) ----
// sin(x), cos(x), tan(x), asin(x), acos(x), atan(x), sinh(x), cosh(x); log1p(x) = log(1 + x)
// and expm1(x) = exp(x) - 1, exact near 0; log2, log10, exp2; reciprocal(x) = 1 / x;
// erf, erfc = 1 - erf, erfinv (erf's inverse on (-1, 1); ±inf at ±1, NaN outside).
// floor, ceil, trunc, and round (half to even, as torch.round) have zero gradient;
// frac(x) = x - trunc(x) has gradient 1. Example: sin(x).sum().backward() gives cos(x).
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor frac(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor erfc(const Tensor& x);
Tensor erfinv(const Tensor& x);

/// atan2(a, b): the angle of (b, a) in (-π, π]; fmod: the remainder with the dividend's sign
/// (C's fmod); remainder: with the divisor's sign (Python's %). f32/f64, broadcasting.
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, double b);
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, double b);
/// Elementwise logic on any numeric or bool tensors (non-zero is true, NaN too); bool out.
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
/// clamp with one bound (PyTorch's clamp_min / clamp_max, clamp(x, min=None, max=...)), or
/// with tensor bounds that broadcast. Example: clamp(x, std::nullopt, 1.0)
Tensor clamp_min(const Tensor& x, double lo);
Tensor clamp_max(const Tensor& x, double hi);
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi);
/// Bool masks of NaN, ±inf and finite elements (integer and bool tensors: all false, all
/// false, all true).
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
/// NaN -> nan, +inf -> posinf, -inf -> neginf (default: the dtype's largest finite values),
/// gradient 1 where x is finite. Example: nan_to_num(x, 0.0)
Tensor nan_to_num(const Tensor& x, double nan = 0.0, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);
/// start + weight · (end - start).
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
Tensor lerp(const Tensor& start, const Tensor& end, double weight);
/// x + value · t1 · t2, and x + value · t1 / t2.
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, double value = 1.0);
Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, double value = 1.0);

/// Elementwise NOT: true where x is 0 (or false), for any dtype; bool out.
///   logical_not(gt(x, 0.0))
Tensor logical_not(const Tensor& x);

// ---- comparisons and selection (not differentiable, results are bool) ----
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
/// Against a number: in a's dtype when b is exactly one of its values, else in f64 (so an
/// integer tensor against 2.5 compares exactly, never against a truncated 2).
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
/// cond ? a : b, broadcasting all three; differentiable in a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with `value` where mask is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

/// Product of all elements, or over `dims` (like sum); differentiable, zeros included
/// (the gradient at a slice's only zero is the product of the others).
Tensor prod(const Tensor& x);
Tensor prod(const Tensor& x, const Shape& dims, bool keepdim = false);

// ---- reductions (dims may be negative; empty dims = all) ----
/// Floats keep their dtype; integer and bool tensors sum into i64, as in PyTorch (an i32
/// sum cannot overflow silently). Example: sum(from_vector<int32_t>({2147483647, 1}, {2})) is
/// the i64 2147483648.
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
/// Largest element; the gradient goes to the maxima (split evenly between ties).
Tensor max(const Tensor& x);
Tensor max(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor min(const Tensor& x);
Tensor min(const Tensor& x, const Shape& dims, bool keepdim = false);
/// Variance with `correction` (1 = unbiased, as torch.var's default).
Tensor var(const Tensor& x, const Shape& dims, int64_t correction = 1, bool keepdim = false);
Tensor var(const Tensor& x, int64_t correction = 1);
/// Index of the largest element along `dim` (i64).
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
/// sqrt(var(...)): the standard deviation with Bessel's `correction`, as torch.std.
Tensor std(const Tensor& x, const Shape& dims, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, int64_t correction = 1);
/// log Σ exp(x) over `dims` (all dims when empty), stable for large |x|.
Tensor logsumexp(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
/// The vector p-norm over `dims` (all when empty): p = 2, 1, ±inf (max / min of |x|), 0 (the
/// count of non-zeros) or any other p: (Σ |x|^p)^(1/p). torch.linalg.vector_norm.
Tensor norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);
/// sum and mean that skip NaN (nanmean of an all-NaN slice is NaN, as PyTorch).
Tensor nansum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor nanmean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
/// The number of non-zero elements over `dims` (all when empty), i64.
Tensor count_nonzero(const Tensor& x, const Shape& dims = {});
/// Whether any / all elements over `dims` (all when empty) are non-zero, bool.
Tensor any(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor all(const Tensor& x, const Shape& dims = {}, bool keepdim = false);

// ---- sorting, selection along a dim, scans ----
/// Values and their positions (i64) along a dim: PyTorch's (values, indices) results.
///   auto [v, i] = sort(x, 1);   Tensor top = topk(x, 3).values;
struct ValuesIndices {
  Tensor values{};
  Tensor indices{};
};
/// x sorted along `dim`: NaN greatest (last ascending, first descending), equal values in
/// input order (every sort is stable; `stable` is accepted for PyTorch's signature). The
/// gradient of the values goes back to the positions they came from.
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
/// The k largest (or smallest) elements along `dim`, always in sorted order.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                   bool sorted = true);
/// The k-th smallest element along `dim` (k counts from 1).
ValuesIndices kthvalue(const Tensor& x, int64_t k, int64_t dim = -1, bool keepdim = false);
/// The lower median (element (n - 1) / 2 in sorted order); NaN when the slice holds a NaN.
/// nanmedian skips NaN (NaN only for an all-NaN slice). Without a dim: of all elements.
Tensor median(const Tensor& x);
ValuesIndices median(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor nanmedian(const Tensor& x);
ValuesIndices nanmedian(const Tensor& x, int64_t dim, bool keepdim = false);
/// Largest / smallest element along one dim and its position (the first of ties; NaN wins),
/// as torch.max(x, dim); the gradient goes to that position only. amax/amin are the
/// Tensor-only reductions over any dims (max(x, dims) / min(x, dims)).
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
/// Inclusive scans along `dim`: running sums and products (integer and bool inputs give i64,
/// as in PyTorch), and running maxima / minima with the position of each (the latest of
/// equal extremes; a NaN propagates). Example: cumsum(from_vector<float>({1, 2, 3}, {3}), 0)
/// is [1, 3, 6].
Tensor cumsum(const Tensor& x, int64_t dim);
Tensor cumprod(const Tensor& x, int64_t dim);
ValuesIndices cummax(const Tensor& x, int64_t dim);
ValuesIndices cummin(const Tensor& x, int64_t dim);
/// The n-th forward difference along `dim` (x[i+1] - x[i], n times), after concatenating
/// `prepend` before and `append` after x along dim (each optional).
Tensor diff(const Tensor& x, int64_t n = 1, int64_t dim = -1, const Tensor& prepend = Tensor(),
            const Tensor& append = Tensor());

// ---- softmax family ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// ---- linear algebra ----
/// torch.matmul semantics: 1-D·1-D dot, 2-D·2-D, batched with broadcasting of batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
/// The fixed-rank products, which do not broadcast (matmul does): mm of [n, k]·[k, m], bmm of
/// [b, n, k]·[b, k, m], dot of two vectors (0-d), outer of two vectors ([n, m]).
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);
/// beta·input + alpha·mm(m1, m2), and the batched beta·input + alpha·bmm(b1, b2); input
/// broadcasts to the product, and is not read when beta is 0.
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta = 1.0,
             double alpha = 1.0);
Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, double beta = 1.0,
               double alpha = 1.0);
/// torch.linalg's decompositions of a matrix or a batch [..., m, n] (f32/f64, differentiable
/// with PyTorch's formulas): inv, det (gradient for invertible matrices), solve(A, B) = A⁻¹B (B
/// [..., n, k] or a vector [n]; batch dims broadcast), cholesky (lower L with A = L·Lᵀ; A
/// symmetric positive definite), qr (reduced: Q [.., m, k], R [.., k, n], k = min(m, n)) and
/// svd (reduced: U, S descending, Vh, with A = U·diag(S)·Vh; the gradient assumes distinct
/// singular values, as PyTorch warns). CPU: LAPACK (OpenBLAS's); CUDA: the host's LAPACK, or
/// cuSOLVER (set_preferred_linalg_library, docs/ops.md). A singular or non-positive-definite
/// matrix is an error naming its batch index.
Tensor inv(const Tensor& a);
Tensor det(const Tensor& a);
Tensor solve(const Tensor& a, const Tensor& b);
Tensor cholesky(const Tensor& a);
struct QR {
  Tensor Q{};
  Tensor R{};
};
QR qr(const Tensor& a);
struct SVD {
  Tensor U{};
  Tensor S{};
  Tensor Vh{};
};
SVD svd(const Tensor& a);
/// The symmetric eigendecomposition, as torch.linalg.eigh: eigenvalues [..., n] ascending and
/// eigenvectors [..., n, n] (columns, A = V·diag(L)·Vᵀ). Only one triangle of A is read: the
/// lower (`uplo` "L") or the upper ("U"), so symmetrise a computed A first. The gradient is
/// PyTorch's (symmetric; it assumes distinct eigenvalues). eigvalsh: the eigenvalues only.
///   auto [l, v] = eigh(a);   Tensor l2 = eigvalsh(a);
struct Eigh {
  Tensor eigenvalues{};
  Tensor eigenvectors{};
};
Eigh eigh(const Tensor& a, const std::string& uplo = "L");
Tensor eigvalsh(const Tensor& a, const std::string& uplo = "L");
/// torch.linalg.eig and eigvals are refused: the eigenvalues of a general real matrix are
/// complex and ember has no complex dtype. The error says so and points to eigh / eigvalsh,
/// which cover symmetric matrices.
struct Eig {
  Tensor eigenvalues{};
  Tensor eigenvectors{};
};
Eig eig(const Tensor& a);
Tensor eigvals(const Tensor& a);
/// sign(det A) and log|det A| through an LU factorisation, as torch.linalg.slogdet: a singular
/// matrix gives sign 0 and logabsdet -inf. The gradient flows through logabsdet (A⁻ᵀ·g).
///   auto [sign, logabsdet] = slogdet(a);   // det(a) == sign * exp(logabsdet)
struct SlogDet {
  Tensor sign{};
  Tensor logabsdet{};
};
SlogDet slogdet(const Tensor& a);
/// LU with partial pivoting, as torch.linalg.lu_factor: LU [..., m, n] packs L (unit lower,
/// diagonal not stored) and U; pivots [..., min(m, n)] i32, 1-based, the rows LAPACK swapped
/// in turn. A singular matrix is an error (PyTorch's; lu() accepts it). Differentiable.
///   auto [lu_, piv] = lu_factor(a);   Tensor x = lu_solve(lu_, piv, b);
struct LUFactor {
  Tensor LU{};
  Tensor pivots{};
};
LUFactor lu_factor(const Tensor& a);
/// A = P·L·U unpacked, as torch.linalg.lu: P [..., m, m], L [..., m, k], U [..., k, n].
struct LU {
  Tensor P{};
  Tensor L{};
  Tensor U{};
};
LU lu(const Tensor& a);
/// X with A·X = B (`left`) or X·A = B (Aᵀ in place of A with `adjoint`), A = P·L·U packed by
/// lu_factor (`packed`, `pivots`), as torch.linalg.lu_solve.
Tensor lu_solve(const Tensor& packed, const Tensor& pivots, const Tensor& b, bool left = true,
                bool adjoint = false);
/// X with A·X = B (`left`) or X·A = B for triangular A, as torch.linalg.solve_triangular: only
/// the `upper` or lower triangle is read, `unitriangular` takes its diagonal as ones; batch
/// dims broadcast. A zero on the diagonal is an error naming the batch index.
///   Tensor x = solve_triangular(l, b, /*upper=*/false);
Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left = true,
                        bool unitriangular = false);
/// torch.triangular_solve(b, A, upper, transpose, unitriangular): the older argument order;
/// solution with A·X = B (Aᵀ·X = B with `transpose`) and a copy of A.
struct TriangularSolve {
  Tensor solution{};
  Tensor cloned_coefficient{};
};
TriangularSolve triangular_solve(const Tensor& b, const Tensor& a, bool upper = true,
                                 bool transpose = false, bool unitriangular = false);
/// X with (L·Lᵀ)·X = B from a Cholesky factor (`upper`: A = Uᵀ·U), as torch.cholesky_solve:
/// two triangular solves, so only the factor's triangle is read and gets a gradient.
///   Tensor x = cholesky_solve(b, cholesky(a));
Tensor cholesky_solve(const Tensor& b, const Tensor& l, bool upper = false);
/// The least-squares solution of A·X = B, as torch.linalg.lstsq for A of full rank: through
/// QR (m >= n: min ‖AX - B‖; m < n: the minimum-norm solution). residuals: ‖AX - B‖² per
/// column when m > n, else empty; rank: min(m, n) (i64, full rank assumed); singular_values
/// empty (as PyTorch's default driver gelsy). B [..., m, k]; batch dims broadcast.
///   Tensor x = lstsq(a, b).solution;
struct Lstsq {
  Tensor solution{};
  Tensor residuals{};
  Tensor rank{};
  Tensor singular_values{};
};
Lstsq lstsq(const Tensor& a, const Tensor& b);
/// The Moore-Penrose pseudo-inverse through the SVD (`hermitian`: through eigh), as
/// torch.linalg.pinv: singular values at or below max(atol, rtol·σ_max) count as 0; rtol
/// defaults to max(m, n)·ε of the dtype when neither is given (0 when only atol is).
///   Tensor p = pinv(a);   Tensor x = matmul(pinv(a), b);
Tensor pinv(const Tensor& a, std::optional<double> atol = std::nullopt,
            std::optional<double> rtol = std::nullopt, bool hermitian = false);
/// The number of singular values above the same tolerance (i64, not differentiable), as
/// torch.linalg.matrix_rank.
Tensor matrix_rank(const Tensor& a, std::optional<double> atol = std::nullopt,
                   std::optional<double> rtol = std::nullopt, bool hermitian = false);
/// A to the integer power n (n < 0: the inverse's power; n = 0: the identity), by squaring,
/// as torch.linalg.matrix_power.   Tensor a3 = matrix_power(a, 3);
Tensor matrix_power(const Tensor& a, int64_t n);
/// exp(A) = Σ Aᵏ/k! of square matrices, by scaling and squaring (a degree-16 Taylor
/// polynomial of A/2ˢ, ‖A/2ˢ‖₁ ≤ 1/2, squared s times), as torch.linalg.matrix_exp.
Tensor matrix_exp(const Tensor& a);
/// The first n columns of H₁·…·H_k, Hᵢ = I - τᵢ·vᵢ·vᵢᵀ with vᵢ below A's diagonal in column i
/// (and 1 on it), as torch.linalg.householder_product: A [..., m, n], tau [..., k], k <= n <= m.
Tensor householder_product(const Tensor& a, const Tensor& tau);
/// torch.linalg.vector_norm: norm(x, ord, dims, keepdim) under the torch.linalg name.
Tensor vector_norm(const Tensor& x, double ord = 2.0, const Shape& dims = {}, bool keepdim = false);
/// torch.linalg.matrix_norm over `dims` (two dims, default the last two): "fro", "nuc", or a
/// number: ±1 (max/min column sum of |A|), ±inf (max/min row sum), ±2 (largest / smallest
/// singular value).   Tensor f = matrix_norm(a);   Tensor s = matrix_norm(a, 2.0);
Tensor matrix_norm(const Tensor& a, const std::string& ord = "fro", const Shape& dims = {-2, -1},
                   bool keepdim = false);
Tensor matrix_norm(const Tensor& a, double ord, const Shape& dims = {-2, -1}, bool keepdim = false);
/// The condition number, as torch.linalg.cond: σ_max/σ_min for p = 2 (the default), σ_min/σ_max
/// for -2, otherwise matrix_norm(A, p)·matrix_norm(A⁻¹, p) (square A).
Tensor cond(const Tensor& a, std::optional<double> p = std::nullopt);
Tensor cond(const Tensor& a, const std::string& p);
/// The cross product of 3-vectors along `dim` (size 3 in both; other dims broadcast), as
/// torch.linalg.cross.   Tensor c = cross(a, b);
Tensor cross(const Tensor& a, const Tensor& b, int64_t dim = -1);
/// The Kronecker product, as torch.kron: result[i·p + k, j·q + l] = a[i, j]·b[k, l] (any rank,
/// the shorter shape padded with leading 1s; at most 4 dims).
Tensor kron(const Tensor& a, const Tensor& b);
/// Sums over the last `dims` dims of a and the first `dims` of b, or over the listed pairs,
/// as torch.tensordot; one GEMM.   tensordot(a, b, 2);   tensordot(a, b, {1, 0}, {0, 2});
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims = 2);
Tensor tensordot(const Tensor& a, const Tensor& b, const Shape& dims_a, const Shape& dims_b);
/// The product of a chain of matrices in the cheapest order, as torch.linalg.multi_dot (the
/// first may be a vector [n], read as a row; the last a vector, read as a column; their dims
/// are dropped from the result). chain_matmul: the same for matrices only (torch.chain_matmul).
///   Tensor y = multi_dot({a, b, c});
Tensor multi_dot(const std::vector<Tensor>& tensors);
Tensor chain_matmul(const std::vector<Tensor>& matrices);
/// Einstein summation over any subscripts, as torch.einsum: letters, "..." for broadcast dims,
/// an optional "->output" (implicit: "..." then the letters used once, sorted), repeated
/// letters in one operand for diagonals. Lowered to permutes, sums and one bmm per pair.
///   einsum("bhqd,bhkd->bhqk", {q, k})   einsum("ii->i", {m})   einsum("...ij,...jk", {a, b})
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);
/// x·Wᵀ + b in one GEMM (bias optional). W is [out, in] as in PyTorch.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
/// An activation linear can apply in its GEMM's epilogue (cuBLASLt on a GPU, the bias pass on
/// the CPU). gelu_tanh is GELU's tanh approximation (gelu(x, "tanh")), not the default erf GELU.
enum class Activation : uint8_t { none, relu, gelu_tanh };
/// act(x·Wᵀ + b), equal forward and backward to the activation applied after linear:
/// linear(x, w, b, Activation::relu) equals relu(linear(x, w, b)). Both activations are fused
/// into the GEMM; with a gradient, gelu_tanh keeps its pre-activation from the epilogue and
/// its backward may run in the next linear's GEMM (Note [GELU backward in the next GEMM] in
/// src/ops/linalg.cpp; in bf16/f16 on a GPU within a rounding of gelu(linear(…), "tanh")).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation activation);
/// residual + linear(x, weight, bias), the add done in the GEMM where nothing needs a gradient
/// (a transformer block's x + proj(h) at decode: one kernel, not two; the sum rounded once, so
/// within a rounding of the composite). With a gradient to compute, or a residual whose dtype,
/// device or shape differs from the product's, it is the composite (broadcasting as add does).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual);
/// linear(layer_norm(x, {k}, norm_weight, norm_bias, eps), weight, bias, activation) with k =
/// x.size(-1): a pre-norm block's norm and the linear after it (norm_weight, norm_bias, bias
/// may be undefined). Where nothing needs a gradient and the backend has a kernel for it (a
/// decode step's 1-4 rows of f16/bf16 on a GPU: Note [A norm in front of a few rows] in
/// src/cuda/gemv.cu), one kernel normalises the rows and multiplies, the values those of the
/// two ops (bit for bit while layer_norm takes the row in registers: k <= 1024); otherwise it
/// is the composite. The norm's parameters must have x's dtype for the fused kernel.
Tensor layer_norm_linear(const Tensor& x, const Tensor& norm_weight, const Tensor& norm_bias,
                         double eps, const Tensor& weight, const Tensor& bias = Tensor(),
                         Activation activation = Activation::none);
/// linear(rms_norm(x, {k}, norm_weight, eps), weight, bias, activation), fused as
/// layer_norm_linear is.
Tensor rms_norm_linear(const Tensor& x, const Tensor& norm_weight, double eps, const Tensor& weight,
                       const Tensor& bias = Tensor(), Activation activation = Activation::none);
/// The products of one normalised x with several weights (a Llama layer's q, k and v
/// projections): linear(norm(x), weights[i], biases[i], activation) for each i (biases empty,
/// or one per weight, each possibly undefined). Fused as the single-weight form, with up to
/// three weights in one kernel that normalises the rows once.
///   auto qkv = rms_norm_linear(x, ln->weight(), 1e-5, {wq, wk, wv});  // {q, k, v}
std::vector<Tensor> layer_norm_linear(const Tensor& x, const Tensor& norm_weight,
                                      const Tensor& norm_bias, double eps,
                                      const std::vector<Tensor>& weights,
                                      const std::vector<Tensor>& biases = {},
                                      Activation activation = Activation::none);
std::vector<Tensor> rms_norm_linear(const Tensor& x, const Tensor& norm_weight, double eps,
                                    const std::vector<Tensor>& weights,
                                    const std::vector<Tensor>& biases = {},
                                    Activation activation = Activation::none);
/// silu(rms_norm_linear(x, norm_weight, eps, gate_weight, gate_bias)) ·
/// rms_norm_linear(x, norm_weight, eps, up_weight, up_bias): a SwiGLU MLP's input (Llama's
/// act_fn(gate_proj(x)) * up_proj(x) after its post-attention norm). Fused where
/// rms_norm_linear is (the gate and up weights of one shape): one kernel normalises the rows,
/// computes both products and combines them, each product, the silu and the multiply rounded
/// as the composite's kernels round them.
Tensor rms_norm_swiglu(const Tensor& x, const Tensor& norm_weight, double eps,
                       const Tensor& gate_weight, const Tensor& up_weight,
                       const Tensor& gate_bias = Tensor(), const Tensor& up_bias = Tensor());

// ---- shape (views where possible; differentiable) ----
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// Pieces of `split_size` along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
/// Sums `x` down to `shape` (undoes broadcasting). Used by autograd; public for users too.
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- rearrangements (differentiable, every dtype; PyTorch's semantics) ----
/// x reversed along each of `dims`.                       flip(x, {0, 1})
Tensor flip(const Tensor& x, const Shape& dims);
/// Elements shifted by shifts[i] along dims[i], wrapping around (no dims: over the
/// flattened tensor, one shift).                          roll(x, {1}, {0})
Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims = {});
/// x tiled repeats[i] times along each dim (repeats may add leading dims), as Tensor.repeat;
/// tile pads `reps` with leading 1s when it is shorter than x's rank, as torch.tile.
Tensor repeat(const Tensor& x, const Shape& repeats);
Tensor tile(const Tensor& x, const Shape& reps);
/// Each element (slice along dim) repeated `repeats` times in place: [a, b] -> [a, a, b, b].
/// Without a dim, over the flattened tensor. A tensor of counts gives one count per slice
/// (read on the host: it sizes the result).
Tensor repeat_interleave(const Tensor& x, int64_t repeats,
                         std::optional<int64_t> dim = std::nullopt);
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats,
                         std::optional<int64_t> dim = std::nullopt);
/// The slices of x along dim (views), as torch.unbind.
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
/// x with dims source[i] moved to destination[i], the others in order (a view).
Tensor movedim(const Tensor& x, const Shape& source, const Shape& destination);
Tensor movedim(const Tensor& x, int64_t source, int64_t destination);
/// The lower / upper triangle of the last two dims (others 0): elements with
/// col - row <= diagonal (tril) or >= diagonal (triu).
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
/// A vector placed on diagonal `diagonal` of a square matrix, or a matrix's diagonal read out.
Tensor diag(const Tensor& x, int64_t diagonal = 0);
/// Coordinate grids of 1-D tensors: "ij" (matrix) or "xy" (Cartesian, first two swapped).
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors,
                             const std::string& indexing = "ij");
/// F.pad: `pads` are (before, after) pairs from the last dim backwards; mode "constant"
/// (fills `value`, negative pads crop), "reflect" (mirrors without the edge, pads < size),
/// "replicate" (repeats the edge) or "circular" (wraps, pads <= size).
///   pad(x, {1, 1, 2, 0}, "reflect")  // last dim +1 each side, the one before +2 in front
Tensor pad(const Tensor& x, const Shape& pads, const std::string& mode = "constant",
           double value = 0.0);
/// Tensor.unfold: the windows of `size` elements, `step` apart, along dim; the window's
/// elements become a new last dim ([..., n, ...] -> [..., (n - size) / step + 1, ..., size]).
Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step);
/// [..., C·r², H, W] -> [..., C, H·r, W·r] (sub-pixel convolution's rearrangement), and back.
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);

// ---- indexing ----
/// Rows of `x` along `dim` picked by integer `index` (1-D). Backward: scatter-add.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// out[i][j] = x[i][index[i][j]] (dim 1), as torch.gather.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// x with src added at index along dim, as torch.scatter_add (out-of-place).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// Embedding lookup: weight[index] for an index tensor of any shape.
Tensor embedding(const Tensor& weight, const Tensor& index);
/// The coordinates of the non-zero elements, [count, rank] i64 in row-major order; the
/// count is read on the host (it sizes the result), as in PyTorch.
Tensor nonzero(const Tensor& x);
/// One-argument where: nonzero's coordinates as one 1-D tensor per dim, as torch.where(c).
std::vector<Tensor> where(const Tensor& condition);
/// The elements of x where mask (bool, broadcasting) is true, as a 1-D tensor.
Tensor masked_select(const Tensor& x, const Tensor& mask);
/// Out-of-place index_add_/index_fill_/index_copy_ along dim with a 1-D index: rows of x at
/// index get alpha·source added (repeats add up), `value`, or source's rows (indices must be
/// distinct for index_copy; repeated ones add up here, PyTorch leaves them undefined).
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 double alpha = 1.0);
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, double value);
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);
/// Out-of-place scatter_: x with src's elements (or `value`) written at index along dim
/// (index's shape, fitting src and x as torch.scatter). Repeated targets keep one source
/// (unspecified which on a GPU, as PyTorch). Gradients: x where not overwritten, src at its
/// target.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, double value);
/// torch.scatter_reduce: src combined into x at index by "sum", "prod", "mean", "amax" or
/// "amin", with x's own values (include_self) or without them (targets hit by no index keep
/// x). Integer means round down, as PyTorch. Differentiable for every reduce (amax/amin split
/// the gradient between ties, prod is exact with zeros).
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);
/// F.embedding_bag: sums, means or maxima of weight's rows over bags — the rows of a 2-D input,
/// or the runs of a 1-D input that start at `offsets` (include_last_offset: offsets ends with
/// the input's length). per_sample_weights (mode "sum") scale each row; entries equal to
/// padding_idx are left out (and not counted by "mean"); an empty bag gives zeros.
Tensor embedding_bag(const Tensor& weight, const Tensor& input, const Tensor& offsets = Tensor(),
                     const std::string& mode = "mean", const Tensor& per_sample_weights = Tensor(),
                     bool include_last_offset = false,
                     std::optional<int64_t> padding_idx = std::nullopt);
/// i64 one-hot rows of class indices (i64/i32): [..., num_classes]; num_classes -1 takes the
/// largest index + 1. Indices are range-checked on the host.
Tensor one_hot(const Tensor& index, int64_t num_classes = -1);

// ---- neural-network functions ----
/// Inverted dropout: zeroes with probability p and scales the rest by 1/(1-p) in training.
Tensor dropout(const Tensor& x, double p, bool training = true);
/// Normalises over the trailing dims `normalized_shape`; weight/bias optional.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
/// torch.nn.functional.rms_norm (PyTorch 2.4): y = x / √(mean(x²) + eps) · weight over the
/// trailing dims `normalized_shape`, one fused kernel per direction (the backward gives x's and
/// the weight's gradients). weight (optional, 1 when left out) has normalized_shape and x's
/// dtype, or f32 for an f16/bf16 x; eps unset is torch.finfo(x.dtype).eps. f16/bf16 compute in
/// f32 and round y once (f64 row sums, as layer_norm); PyTorch's F.rms_norm and transformers'
/// LlamaRMSNorm instead round x / √(...) to x's dtype before multiplying by the weight, so a
/// 16-bit y may differ from theirs by that one rounding (f32 and f64 compute the same thing).
/// Under an AutocastGuard it runs in f32.
///   Tensor y = rms_norm(x, {64}, weight, 1e-6);  // x [B, T, 64], weight [64]
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);
/// Rotary position embedding as transformers applies it: out = x·cos + rotate_half(x)·sin with
/// rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]) over the last dim D (even), one kernel.
/// `interleaved` pairs x[2i] with x[2i+1] instead (GPT-J / Meta's layout: out[2i] = x[2i]·cos[2i]
/// - x[2i+1]·sin[2i], out[2i+1] = x[2i+1]·cos[2i+1] + x[2i]·sin[2i+1]). x [..., D] may be any
/// view (a head-transposed [B, H, T, D] is read through its strides, not copied); cos and sin
/// (x's dtype and device) broadcast to x, as [T, D] or [B, 1, T, D]; out is contiguous, x's
/// shape. f16/bf16 compute each pair in f32 and round once. Differentiable in x; cos and sin
/// get gradients too when they require them (composed from mul and sum_to).
///   Tensor q_rot = rotary_embedding(q, cos, sin);  // q [B, H, T, 64], cos, sin [B, 1, T, 64]
Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin,
                        bool interleaved = false);
/// Batch norm over dim 1 (N, C, ...). Training: batch statistics, running stats updated in
/// place (momentum as PyTorch, unbiased running var). Eval: running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);
/// relu(batch_norm(x, ...) + residual), or relu(batch_norm(x, ...)) without a residual, in one
/// pass over the activations, forward and backward (ReLU's backward folded into batch norm's):
/// the values and gradients of the composite bit for bit, with fewer passes over memory (a
/// ResNet block's BatchNorm-ReLU and its residual join). residual: x's shape and device; of
/// another dtype, the composite runs (the add promotes).
Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training,
                       double momentum = 0.1, double eps = 1e-5, const Tensor& residual = Tensor());

// ---- convolution and pooling (NCHW; an unbatched [C, H, W] input is accepted too) ----
/// A (height, width) pair; one number means both: conv2d(x, w, b, /*stride=*/2) or {2, 1}.
struct Size2d {
  int64_t h = 0, w = 0;
  Size2d(int64_t both) : h(both), w(both) {}  // NOLINT: 3 reads as (3, 3), as in PyTorch
  Size2d(int64_t height, int64_t width) : h(height), w(width) {}
  bool operator==(const Size2d&) const = default;
};
/// 2-D cross-correlation as torch.nn.functional.conv2d: x [N, C, H, W], weight
/// [O, C/groups, kh, kw], bias [O] (optional); out [N, O, oh, ow] with
/// oh = (H + 2·pad - dilation·(kh - 1) - 1) / stride + 1. Example:
///   Tensor y = conv2d(x, w, b, /*stride=*/1, /*padding=*/1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              Size2d stride = 1, Size2d padding = 0, Size2d dilation = 1, int64_t groups = 1);
/// Max over each window (padding counts as -inf) as torch's max_pool2d; stride defaults to the
/// kernel. The gradient goes to each window's argmax. Example: max_pool2d(x, 2).
Tensor max_pool2d(const Tensor& x, Size2d kernel, std::optional<Size2d> stride = std::nullopt,
                  Size2d padding = 0, Size2d dilation = 1, bool ceil_mode = false);
/// max_pool2d and the argmax of each window (i64, h·W + w within its plane, as PyTorch).
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, Size2d kernel,
                                                  std::optional<Size2d> stride = std::nullopt,
                                                  Size2d padding = 0, Size2d dilation = 1,
                                                  bool ceil_mode = false);
/// Mean over each window as torch's avg_pool2d; count_include_pad counts the zero padding in
/// the divisor. Example: avg_pool2d(x, 3, 1, 1, false, false).
Tensor avg_pool2d(const Tensor& x, Size2d kernel, std::optional<Size2d> stride = std::nullopt,
                  Size2d padding = 0, bool ceil_mode = false, bool count_include_pad = true);

// ---- more convolutions, pooling and resampling (issue 16; src/ops/conv.cpp, conv_nd.cpp) ----
/// A (depth, height, width) triple; one number means all three: conv3d(x, w, b, 2) or {1, 2, 2}.
struct Size3d {
  int64_t d = 0, h = 0, w = 0;
  Size3d(int64_t all) : d(all), h(all), w(all) {}  // NOLINT: 3 reads as (3, 3, 3)
  Size3d(int64_t depth, int64_t height, int64_t width) : d(depth), h(height), w(width) {}
  bool operator==(const Size3d&) const = default;
};
/// PyTorch's string paddings: "valid" (none) or "same" (output size = input size, stride 1;
/// an odd total puts the extra zero after, as PyTorch). conv2d(x, w, b, 1, ConvPadding::same)
enum class ConvPadding : uint8_t { valid, same };
/// 1-D cross-correlation as F.conv1d: x [N, C, L] (or [C, L]), weight [O, C/groups, k],
/// bias [O]; out [N, O, (L + 2·pad - dilation·(k - 1) - 1) / stride + 1]. conv1d(x, w, b, 1, 2)
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              ConvPadding padding, int64_t dilation = 1, int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2d stride,
              ConvPadding padding, Size2d dilation = 1, int64_t groups = 1);
/// 3-D cross-correlation as F.conv3d: x [N, C, D, H, W] (or [C, D, H, W]), weight
/// [O, C/groups, kd, kh, kw], bias [O]. A composite: one conv2d per kernel depth.
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              Size3d stride = 1, Size3d padding = 0, Size3d dilation = 1, int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size3d stride,
              ConvPadding padding, Size3d dilation = 1, int64_t groups = 1);
/// Transposed convolution (the gradient of conv2d with respect to its input) as
/// F.conv_transpose2d: x [N, C, H, W], weight [C, O/groups, kh, kw], bias [O]; out [N, O,
/// (H - 1)·stride - 2·pad + dilation·(kh - 1) + output_padding + 1, ...]; output_padding must
/// be smaller than stride or dilation. conv_transpose2d(x, w, b, 2, 1, 1) doubles H and W
/// for a 3×3 kernel.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        Size2d stride = 1, Size2d padding = 0, Size2d output_padding = 0,
                        int64_t groups = 1, Size2d dilation = 1);
/// conv_transpose2d's 1-D form: x [N, C, L] (or [C, L]), weight [C, O/groups, k].
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        int64_t stride = 1, int64_t padding = 0, int64_t output_padding = 0,
                        int64_t groups = 1, int64_t dilation = 1);
/// The 1-D pools of [N, C, L] (or [C, L]) as F.max_pool1d / F.avg_pool1d (the 2-D pools over
/// a unit height); indices are positions along L.
Tensor max_pool1d(const Tensor& x, int64_t kernel, std::optional<int64_t> stride = std::nullopt,
                  int64_t padding = 0, int64_t dilation = 1, bool ceil_mode = false);
std::pair<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, int64_t kernel,
                                                  std::optional<int64_t> stride = std::nullopt,
                                                  int64_t padding = 0, int64_t dilation = 1,
                                                  bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, int64_t kernel, std::optional<int64_t> stride = std::nullopt,
                  int64_t padding = 0, bool ceil_mode = false, bool count_include_pad = true);
/// Adaptive pools as PyTorch: output cell i covers input [floor(i·in/out), ceil((i+1)·in/out)).
/// Average: the mean of its cells; max: the largest (a NaN wins), with indices (h·W + w within
/// the plane, or the position along L) from the *_with_indices forms. adaptive_avg_pool2d(x, 1)
Tensor adaptive_avg_pool1d(const Tensor& x, int64_t output_size);
Tensor adaptive_avg_pool2d(const Tensor& x, Size2d output_size);
Tensor adaptive_max_pool1d(const Tensor& x, int64_t output_size);
std::pair<Tensor, Tensor> adaptive_max_pool1d_with_indices(const Tensor& x, int64_t output_size);
Tensor adaptive_max_pool2d(const Tensor& x, Size2d output_size);
std::pair<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x, Size2d output_size);
/// F.interpolate's arguments: the output's spatial size or the scale factor (exactly one;
/// one entry stands for every spatial dim), the mode ("nearest", "nearest-exact", "linear"
/// for 3-D input, "bilinear" or "bicubic" for 4-D, "trilinear" for 5-D) and align_corners
/// (linear and cubic modes only; false when unset). recompute_scale_factor: compute the scale
/// from the sizes.
struct InterpolateOptions {
  Shape size = {};
  std::vector<double> scale_factor = {};
  std::string mode = "nearest";
  std::optional<bool> align_corners = std::nullopt;
  bool recompute_scale_factor = false;
};
/// Resamples the spatial dims (all after N, C) as F.interpolate, forward and backward:
///   interpolate(x, {.scale_factor = {2.0}, .mode = "bilinear", .align_corners = false})
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);
/// F.unfold: the sliding blocks of x [N, C, H, W] (or [C, H, W]) as columns [N, C·kh·kw, L],
/// L the number of blocks; and F.fold, its adjoint, summing columns back into [N, C, H, W]
/// (output_size = (H, W)). fold(unfold(x)) multiplies each pixel by the blocks covering it.
Tensor im2col(const Tensor& x, Size2d kernel, Size2d dilation = 1, Size2d padding = 0,
              Size2d stride = 1);
Tensor col2im(const Tensor& columns, Size2d output_size, Size2d kernel, Size2d dilation = 1,
              Size2d padding = 0, Size2d stride = 1);

// ---- losses ----
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
/// Cross-entropy on probabilities (ggmlR ag_cross_entropy): -Σ target·log(p) / rows.
Tensor cross_entropy_probs(const Tensor& probs, const Tensor& target,
                           Reduction reduction = Reduction::mean);
/// Softmax cross-entropy on logits [N, C] (or [N, C, ...]) with class-index targets (i64).
struct CrossEntropyOptions {
  Reduction reduction = Reduction::mean;
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  /// Class weights [C] (optional): each row's loss times its class's weight; the mean divides
  /// by the sum of the weights of the rows not ignored, as PyTorch.
  Tensor weight = Tensor();
};
Tensor cross_entropy(const Tensor& logits, const Tensor& target, CrossEntropyOptions options = {});
/// Negative log-likelihood on log-probabilities [N, C] with class-index targets.
/// Class weights as cross_entropy's.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                Reduction reduction = Reduction::mean, int64_t ignore_index = -100,
                const Tensor& weight = Tensor());
/// Binary cross-entropy on logits (numerically stable), targets in [0, 1].
/// `weight` (optional, broadcasting to the input) scales each element's loss.
Tensor bce_with_logits(const Tensor& logits, const Tensor& target,
                       Reduction reduction = Reduction::mean, const Tensor& pos_weight = Tensor(),
                       const Tensor& weight = Tensor());
/// Binary cross-entropy on probabilities in [0, 1] (each log clamped at -100, as PyTorch; on
/// the CPU values outside [0, 1] are refused). `weight` as bce_with_logits'.
Tensor binary_cross_entropy(const Tensor& probs, const Tensor& target,
                            Reduction reduction = Reduction::mean, const Tensor& weight = Tensor());
/// |input - target|.
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
/// 0.5·d²/beta where d = |input - target| < beta, else d - 0.5·beta (beta 0: l1_loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      Reduction reduction = Reduction::mean, double beta = 1.0);
/// 0.5·d² where d < delta, else delta·(d - 0.5·delta).
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
                  double delta = 1.0);
/// KL divergence with `input` log-probabilities: target·(log target - input) (0 where target
/// is 0), or with log_target exp(target)·(target - input). Reduction::batchmean divides the
/// sum by the batch size (the mathematically right mean; mean averages every element).
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
              bool log_target = false);
/// max(0, -y·(x1 - x2) + margin), y = ±1.
Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin = 0.0,
                           Reduction reduction = Reduction::mean);
/// max(d(a, p) - d(a, n) + margin, 0) with d the p-norm distance of the last dim (+eps, as
/// F.pairwise_distance); swap uses min(d(a, n), d(p, n)).
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin = 1.0, double p = 2.0, double eps = 1e-6,
                           bool swap = false, Reduction reduction = Reduction::mean);
/// 1 - cos(x1, x2) where y = 1, max(0, cos - margin) where y = -1 (rows of [N, D]).
Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& y,
                             double margin = 0.0, Reduction reduction = Reduction::mean);
/// Poisson negative log-likelihood: exp(input) - target·input (log_input), or input -
/// target·log(input + eps); `full` adds Stirling's term where target > 1.
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input = true,
                        bool full = false, double eps = 1e-8,
                        Reduction reduction = Reduction::mean);
/// Connectionist temporal classification: log_probs [T, N, C] (log_softmax over C), targets
/// [N, S] padded or 1-D concatenated, lengths per sample (i64, read on the host). mean
/// divides each loss by its target length, then averages, as PyTorch; zero_infinity zeroes
/// impossible alignments (and their gradients).
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank = 0,
                Reduction reduction = Reduction::mean, bool zero_infinity = false);

// ---- recurrent layers ----
/// The LSTM recurrence of one layer direction, fused (what nn::LSTM runs without proj_size):
/// gx [T, N, 4H] is the input projection x·W_ihᵀ + b_ih + b_hh for every step (gates in
/// PyTorch's order i, f, g, o), h0 and c0 [N, H] the initial state, w_hh [4H, H], mask an
/// optional bool [T, N] (false: the step is padding and the row keeps its state), reverse
/// walks t from T-1 down. Returns the states [2, T, N, H]: [0][t] = h_t, [1][t] = c_t.
/// Differentiable in gx, h0, c0 and w_hh. Example: lstm_recurrence(gx, h0, c0, w_hh).select(0, 0)
Tensor lstm_recurrence(const Tensor& gx, const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                       const Tensor& mask = Tensor(), bool reverse = false);

}  // namespace ember
