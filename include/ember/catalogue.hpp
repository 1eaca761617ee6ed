// include/ember/catalogue.hpp — every public op, named once: its family, whether it is
// differentiable, the dtypes each backend computes it in, and the kernel that computes it.
//
// This list is the one place an op is declared to exist. The `Op` enum, op names in error
// messages and autograd node names, the generic kernel enums (backend::UnaryOp, BinaryOp,
// ReduceOp), `supports()` and the op test driver (tests/test_catalogue.cpp) all come from it;
// src/backend/registry.cpp breaks the build when an entry names a kernel that does not exist.
// How to add an op: docs/contributing.md.
//
//   if (ember::supports(ember::Op::softmax, DType::f32, Device::cuda()))  ...
//   ember::op_info(ember::Op::gelu).name  // "gelu"
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ember/device.hpp"
#include "ember/dtype.hpp"

namespace ember {

/// The family an op belongs to; each family's code lives in files of that name
/// (src/ops/<family>.cpp, src/kernels/<family>.hpp, src/cpu/<family>.cpp, src/cuda/<family>.cu).
enum class OpFamily : uint8_t {
  elementwise,
  reduce,
  sort,  // sorting, selection along a dim and scans
  softmax,
  linalg,
  shape,
  index,
  random,
  norm,
  conv,
  loss,
  rnn,        // recurrent layers' fused steps
  attention,  // scaled_dot_product_attention: fused kernels (cuDNN) beside the composed path
};

/// A set of dtypes, one bit per DType.
struct DTypeSet {
  uint16_t bits = 0;
  constexpr bool contains(DType t) const { return (bits >> static_cast<int>(t)) & 1u; }
  constexpr DTypeSet operator|(DTypeSet o) const { return {static_cast<uint16_t>(bits | o.bits)}; }
  constexpr bool operator==(const DTypeSet&) const = default;
  /// "f32, f64" (empty: "none").
  std::string to_string() const;
};
constexpr DTypeSet dtypes_of(DType t) { return {static_cast<uint16_t>(1u << static_cast<int>(t))}; }

inline constexpr DTypeSet kNoDTypes{};
inline constexpr DTypeSet kFloat = dtypes_of(DType::f32) | dtypes_of(DType::f64);
inline constexpr DTypeSet kInteger = dtypes_of(DType::i32) | dtypes_of(DType::i64);
inline constexpr DTypeSet kNumeric = kFloat | kInteger;
inline constexpr DTypeSet kComparable = kNumeric | dtypes_of(DType::u8) | dtypes_of(DType::boolean);
inline constexpr DTypeSet kHalfFloats = dtypes_of(DType::f16) | dtypes_of(DType::bf16);
inline constexpr DTypeSet kAnyFloat = kFloat | kHalfFloats;
inline constexpr DTypeSet kArithmetic = kNumeric | kHalfFloats;
inline constexpr DTypeSet kIntegerOrBool = kInteger | dtypes_of(DType::boolean);
inline constexpr DTypeSet kAnyDType{static_cast<uint16_t>((1u << kNumDTypes) - 1)};

// The catalogue. Each family list is X(name, family, differentiable, cpu dtypes, cuda dtypes)
// for ops computed by the generic kernel of the same name (backend::UnaryOp::name, ...).
// EMBER_OPS_OTHER adds the kernel column: the Backend slot that computes the op, or
// `composite` (built from other ops) or `view` (no kernel: a new view of the input).
// The dtype columns are what the op accepts for its main input; an op that needs a specific
// dtype for another operand (an index, a condition; layer_norm's and rms_norm's weight and
// bias: the input's dtype, or f32 for an f16/bf16 input) says so in its error.

#define EMBER_OPS_UNARY(X)                                \
  X(neg, elementwise, true, kArithmetic, kArithmetic)     \
  X(abs, elementwise, true, kArithmetic, kArithmetic)     \
  X(sqrt, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(rsqrt, elementwise, true, kAnyFloat, kAnyFloat)       \
  X(square, elementwise, true, kAnyFloat, kAnyFloat)      \
  X(exp, elementwise, true, kAnyFloat, kAnyFloat)         \
  X(log, elementwise, true, kAnyFloat, kAnyFloat)         \
  X(sign, elementwise, true, kArithmetic, kArithmetic)    \
  X(relu, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(sigmoid, elementwise, true, kAnyFloat, kAnyFloat)     \
  X(tanh, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(silu, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(softplus, elementwise, true, kAnyFloat, kAnyFloat)    \
  X(leaky_relu, elementwise, true, kAnyFloat, kAnyFloat)  \
  X(elu, elementwise, true, kAnyFloat, kAnyFloat)         \
  X(selu, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(mish, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(hardswish, elementwise, true, kAnyFloat, kAnyFloat)   \
  X(hardsigmoid, elementwise, true, kAnyFloat, kAnyFloat) \
  X(logsigmoid, elementwise, true, kAnyFloat, kAnyFloat)  \
  X(sin, elementwise, true, kAnyFloat, kAnyFloat)         \
  X(cos, elementwise, true, kAnyFloat, kAnyFloat)         \
  X(tan, elementwise, true, kAnyFloat, kAnyFloat)         \
  X(asin, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(acos, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(atan, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(sinh, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(cosh, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(floor, elementwise, true, kAnyFloat, kAnyFloat)       \
  X(ceil, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(round, elementwise, true, kAnyFloat, kAnyFloat)       \
  X(trunc, elementwise, true, kAnyFloat, kAnyFloat)       \
  X(frac, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(log1p, elementwise, true, kAnyFloat, kAnyFloat)       \
  X(expm1, elementwise, true, kAnyFloat, kAnyFloat)       \
  X(log2, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(log10, elementwise, true, kAnyFloat, kAnyFloat)       \
  X(exp2, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(reciprocal, elementwise, true, kAnyFloat, kAnyFloat)  \
  X(erf, elementwise, true, kAnyFloat, kAnyFloat)         \
  X(erfc, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(erfinv, elementwise, true, kAnyFloat, kAnyFloat)      \
  X(clamp, elementwise, true, kArithmetic, kArithmetic)   \
  /* issue 32, group special */                           \
  X(asinh, elementwise, true, kAnyFloat, kAnyFloat)       \
  X(acosh, elementwise, true, kAnyFloat, kAnyFloat)       \
  X(atanh, elementwise, true, kAnyFloat, kAnyFloat)       \
  X(lgamma, elementwise, true, kAnyFloat, kAnyFloat)      \
  X(digamma, elementwise, true, kAnyFloat, kAnyFloat)     \
  X(polygamma, elementwise, true, kAnyFloat, kAnyFloat)   \
  X(i0, elementwise, true, kAnyFloat, kAnyFloat)          \
  X(special_i0e, elementwise, true, kAnyFloat, kAnyFloat) \
  X(special_i1, elementwise, true, kAnyFloat, kAnyFloat)  \
  X(special_i1e, elementwise, true, kAnyFloat, kAnyFloat) \
  X(erfcx, elementwise, true, kAnyFloat, kAnyFloat)       \
  X(sinc, elementwise, true, kAnyFloat, kAnyFloat)        \
  X(frexp, elementwise, true, kAnyFloat, kAnyFloat)

#define EMBER_OPS_BINARY(X)                                               \
  X(add, elementwise, true, kArithmetic, kArithmetic)                     \
  X(sub, elementwise, true, kArithmetic, kArithmetic)                     \
  X(mul, elementwise, true, kArithmetic, kArithmetic)                     \
  X(div, elementwise, true, kArithmetic, kArithmetic)                     \
  X(pow, elementwise, true, kAnyFloat, kAnyFloat)                         \
  X(maximum, elementwise, true, kArithmetic, kArithmetic)                 \
  X(minimum, elementwise, true, kArithmetic, kArithmetic)                 \
  X(atan2, elementwise, true, kAnyFloat, kAnyFloat)                       \
  X(fmod, elementwise, true, kAnyFloat, kAnyFloat)                        \
  X(remainder, elementwise, true, kAnyFloat, kAnyFloat)                   \
  /* issue 32, group special (before eq: the comparisons end the list) */ \
  X(xlogy, elementwise, true, kAnyFloat, kAnyFloat)                       \
  X(special_xlog1py, elementwise, true, kAnyFloat, kAnyFloat)             \
  X(hypot, elementwise, true, kAnyFloat, kAnyFloat)                       \
  X(copysign, elementwise, true, kAnyFloat, kAnyFloat)                    \
  X(nextafter, elementwise, false, kFloat, kFloat)                        \
  X(logaddexp, elementwise, true, kAnyFloat, kAnyFloat)                   \
  X(logaddexp2, elementwise, true, kAnyFloat, kAnyFloat)                  \
  X(special_zeta, elementwise, true, kAnyFloat, kAnyFloat)                \
  X(gcd, elementwise, false, kInteger, kInteger)                          \
  X(lcm, elementwise, false, kInteger, kInteger)                          \
  X(bitwise_and, elementwise, false, kIntegerOrBool, kIntegerOrBool)      \
  X(bitwise_or, elementwise, false, kIntegerOrBool, kIntegerOrBool)       \
  X(bitwise_xor, elementwise, false, kIntegerOrBool, kIntegerOrBool)      \
  X(bitwise_left_shift, elementwise, false, kInteger, kInteger)           \
  X(bitwise_right_shift, elementwise, false, kInteger, kInteger)          \
  X(eq, elementwise, false, kAnyDType, kAnyDType)                         \
  X(ne, elementwise, false, kAnyDType, kAnyDType)                         \
  X(lt, elementwise, false, kAnyDType, kAnyDType)                         \
  X(le, elementwise, false, kAnyDType, kAnyDType)                         \
  X(gt, elementwise, false, kAnyDType, kAnyDType)                         \
  X(ge, elementwise, false, kAnyDType, kAnyDType)                         \
  X(logical_and, elementwise, false, kAnyDType, kAnyDType)                \
  X(logical_or, elementwise, false, kAnyDType, kAnyDType)                 \
  X(logical_xor, elementwise, false, kAnyDType, kAnyDType)

#define EMBER_OPS_REDUCE(X)                          \
  X(sum, reduce, true, kAnyDType, kAnyDType)         \
  X(mean, reduce, true, kAnyFloat, kAnyFloat)        \
  X(max, reduce, true, kArithmetic, kArithmetic)     \
  X(min, reduce, true, kArithmetic, kArithmetic)     \
  X(prod, reduce, true, kAnyFloat, kAnyFloat)        \
  X(argmax, reduce, false, kArithmetic, kArithmetic) \
  X(argmin, reduce, false, kArithmetic, kArithmetic)

#define EMBER_OPS_OTHER(X)                                                             \
  X(gelu, elementwise, true, kAnyFloat, kAnyFloat, unary)                              \
  X(scale, elementwise, true, kAnyFloat, kAnyFloat, unary)                             \
  X(logical_not, elementwise, false, kAnyDType, kAnyDType, unary)                      \
  X(where, elementwise, true, kAnyDType, kAnyDType, where)                             \
  X(clone, elementwise, true, kAnyDType, kAnyDType, copy)                              \
  X(contiguous, elementwise, true, kAnyDType, kAnyDType, copy)                         \
  X(to, elementwise, true, kAnyDType, kAnyDType, copy)                                 \
  X(masked_fill, elementwise, true, kAnyDType, kAnyDType, composite)                   \
  X(hardtanh, elementwise, true, kAnyFloat, kAnyFloat, unary)                          \
  X(prelu, elementwise, true, kAnyFloat, kAnyFloat, composite)                         \
  X(glu, elementwise, true, kAnyFloat, kAnyFloat, composite)                           \
  X(clamp_min, elementwise, true, kArithmetic, kArithmetic, unary)                     \
  X(clamp_max, elementwise, true, kArithmetic, kArithmetic, unary)                     \
  X(isnan, elementwise, false, kAnyDType, kAnyDType, composite)                        \
  X(isinf, elementwise, false, kAnyDType, kAnyDType, composite)                        \
  X(isfinite, elementwise, false, kAnyDType, kAnyDType, composite)                     \
  X(nan_to_num, elementwise, true, kAnyFloat, kAnyFloat, composite)                    \
  X(lerp, elementwise, true, kAnyFloat, kAnyFloat, composite)                          \
  X(addcmul, elementwise, true, kAnyFloat, kAnyFloat, composite)                       \
  X(addcdiv, elementwise, true, kAnyFloat, kAnyFloat, composite)                       \
  /* issue 32, group special */                                                        \
  X(mvlgamma, elementwise, true, kAnyFloat, kAnyFloat, composite)                      \
  X(logit, elementwise, true, kAnyFloat, kAnyFloat, composite)                         \
  X(signbit, elementwise, false, kArithmetic, kArithmetic, composite)                  \
  X(fix, elementwise, true, kAnyFloat, kAnyFloat, composite)                           \
  X(ldexp, elementwise, true, kAnyFloat, kAnyFloat, composite)                         \
  X(float_power, elementwise, true, kArithmetic, kArithmetic, composite)               \
  X(heaviside, elementwise, false, kArithmetic, kArithmetic, composite)                \
  X(bitwise_not, elementwise, false, kIntegerOrBool, kIntegerOrBool, composite)        \
  X(isclose, elementwise, false, kArithmetic, kArithmetic, composite)                  \
  X(celu, elementwise, true, kAnyFloat, kAnyFloat, composite)                          \
  X(softsign, elementwise, true, kAnyFloat, kAnyFloat, composite)                      \
  X(hardshrink, elementwise, true, kAnyFloat, kAnyFloat, composite)                    \
  X(softshrink, elementwise, true, kAnyFloat, kAnyFloat, composite)                    \
  X(tanhshrink, elementwise, true, kAnyFloat, kAnyFloat, composite)                    \
  X(threshold, elementwise, true, kAnyFloat, kAnyFloat, composite)                     \
  X(rrelu, elementwise, true, kAnyFloat, kAnyFloat, composite)                         \
  X(special_entr, elementwise, true, kAnyFloat, kAnyFloat, composite)                  \
  X(special_ndtr, elementwise, true, kAnyFloat, kAnyFloat, composite)                  \
  X(special_ndtri, elementwise, true, kAnyFloat, kAnyFloat, composite)                 \
  X(special_log_ndtr, elementwise, true, kAnyFloat, kAnyFloat, composite)              \
  X(var, reduce, true, kAnyFloat, kAnyFloat, variance)                                 \
  X(sum_to, reduce, true, kAnyDType, kAnyDType, reduce)                                \
  X(std, reduce, true, kAnyFloat, kAnyFloat, composite)                                \
  X(logsumexp, reduce, true, kFloat, kFloat, composite)                                \
  X(norm, reduce, true, kFloat, kFloat, composite)                                     \
  X(nansum, reduce, true, kAnyDType, kAnyDType, composite)                             \
  X(nanmean, reduce, true, kAnyFloat, kAnyFloat, composite)                            \
  X(count_nonzero, reduce, false, kAnyDType, kAnyDType, composite)                     \
  X(any, reduce, false, kAnyDType, kAnyDType, composite)                               \
  X(all, reduce, false, kAnyDType, kAnyDType, composite)                               \
  X(max_with_indices, reduce, true, kArithmetic, kArithmetic, composite)               \
  X(min_with_indices, reduce, true, kArithmetic, kArithmetic, composite)               \
  X(sort, sort, true, kNumeric, kNumeric, sort)                                        \
  X(argsort, sort, false, kNumeric, kNumeric, sort)                                    \
  X(topk, sort, true, kNumeric, kNumeric, sort)                                        \
  X(kthvalue, sort, true, kNumeric, kNumeric, sort)                                    \
  X(median, sort, true, kNumeric, kNumeric, sort)                                      \
  X(nanmedian, sort, true, kFloat, kFloat, sort)                                       \
  X(cumsum, sort, true, kComparable, kComparable, scan)                                \
  X(cumprod, sort, true, kComparable, kComparable, scan)                               \
  X(cummax, sort, true, kNumeric, kNumeric, scan)                                      \
  X(cummin, sort, true, kNumeric, kNumeric, scan)                                      \
  X(diff, sort, true, kNumeric, kNumeric, composite)                                   \
  X(softmax, softmax, true, kAnyFloat, kAnyFloat, softmax)                             \
  X(log_softmax, softmax, true, kAnyFloat, kAnyFloat, softmax)                         \
  X(matmul, linalg, true, kAnyFloat, kAnyFloat, gemm)                                  \
  X(linear, linalg, true, kAnyFloat, kAnyFloat, gemm)                                  \
  X(mm, linalg, true, kAnyFloat, kAnyFloat, gemm)                                      \
  X(bmm, linalg, true, kAnyFloat, kAnyFloat, gemm)                                     \
  X(dot, linalg, true, kAnyFloat, kAnyFloat, gemm)                                     \
  X(outer, linalg, true, kAnyFloat, kAnyFloat, composite)                              \
  X(addmm, linalg, true, kAnyFloat, kAnyFloat, composite)                              \
  X(baddbmm, linalg, true, kAnyFloat, kAnyFloat, composite)                            \
  X(inv, linalg, true, kFloat, kFloat, decompose)                                      \
  X(det, linalg, true, kFloat, kFloat, decompose)                                      \
  X(solve, linalg, true, kFloat, kFloat, decompose)                                    \
  X(cholesky, linalg, true, kFloat, kFloat, decompose)                                 \
  X(qr, linalg, true, kFloat, kFloat, decompose)                                       \
  X(svd, linalg, true, kFloat, kFloat, decompose)                                      \
  X(eigh, linalg, true, kFloat, kFloat, decompose)                                     \
  X(eigvalsh, linalg, true, kFloat, kFloat, composite)                                 \
  X(slogdet, linalg, true, kFloat, kFloat, decompose)                                  \
  X(lu_factor, linalg, true, kFloat, kFloat, decompose)                                \
  X(lu, linalg, true, kFloat, kFloat, composite)                                       \
  X(lu_solve, linalg, true, kFloat, kFloat, composite)                                 \
  X(solve_triangular, linalg, true, kFloat, kFloat, decompose)                         \
  X(triangular_solve, linalg, true, kFloat, kFloat, composite)                         \
  X(cholesky_solve, linalg, true, kFloat, kFloat, composite)                           \
  X(lstsq, linalg, true, kFloat, kFloat, composite)                                    \
  X(pinv, linalg, true, kFloat, kFloat, composite)                                     \
  X(matrix_rank, linalg, false, kFloat, kFloat, composite)                             \
  X(matrix_power, linalg, true, kFloat, kFloat, composite)                             \
  X(matrix_exp, linalg, true, kFloat, kFloat, composite)                               \
  X(householder_product, linalg, true, kFloat, kFloat, composite)                      \
  X(vector_norm, linalg, true, kFloat, kFloat, composite)                              \
  X(matrix_norm, linalg, true, kFloat, kFloat, composite)                              \
  X(cond, linalg, true, kFloat, kFloat, composite)                                     \
  X(cross, linalg, true, kFloat, kFloat, composite)                                    \
  X(kron, linalg, true, kFloat, kFloat, composite)                                     \
  X(tensordot, linalg, true, kFloat, kFloat, composite)                                \
  X(multi_dot, linalg, true, kFloat, kFloat, composite)                                \
  X(chain_matmul, linalg, true, kFloat, kFloat, composite)                             \
  X(einsum, linalg, true, kAnyFloat, kAnyFloat, composite)                             \
  X(reshape, shape, true, kAnyDType, kAnyDType, copy)                                  \
  X(view, shape, true, kAnyDType, kAnyDType, view)                                     \
  X(transpose, shape, true, kAnyDType, kAnyDType, view)                                \
  X(t, shape, true, kAnyDType, kAnyDType, view)                                        \
  X(permute, shape, true, kAnyDType, kAnyDType, view)                                  \
  X(slice, shape, true, kAnyDType, kAnyDType, view)                                    \
  X(narrow, shape, true, kAnyDType, kAnyDType, view)                                   \
  X(select, shape, true, kAnyDType, kAnyDType, view)                                   \
  X(expand, shape, true, kAnyDType, kAnyDType, view)                                   \
  X(squeeze, shape, true, kAnyDType, kAnyDType, view)                                  \
  X(unsqueeze, shape, true, kAnyDType, kAnyDType, view)                                \
  X(flatten, shape, true, kAnyDType, kAnyDType, copy)                                  \
  X(cat, shape, true, kAnyDType, kAnyDType, copy)                                      \
  X(stack, shape, true, kAnyDType, kAnyDType, copy)                                    \
  X(split, shape, true, kAnyDType, kAnyDType, view)                                    \
  X(chunk, shape, true, kAnyDType, kAnyDType, view)                                    \
  X(flip, shape, true, kAnyDType, kAnyDType, composite)                                \
  X(roll, shape, true, kAnyDType, kAnyDType, composite)                                \
  X(repeat, shape, true, kAnyDType, kAnyDType, composite)                              \
  X(tile, shape, true, kAnyDType, kAnyDType, composite)                                \
  X(repeat_interleave, shape, true, kAnyDType, kAnyDType, composite)                   \
  X(unbind, shape, true, kAnyDType, kAnyDType, view)                                   \
  X(movedim, shape, true, kAnyDType, kAnyDType, view)                                  \
  X(tril, shape, true, kAnyDType, kAnyDType, composite)                                \
  X(triu, shape, true, kAnyDType, kAnyDType, composite)                                \
  X(diag, shape, true, kAnyDType, kAnyDType, composite)                                \
  X(meshgrid, shape, true, kAnyDType, kAnyDType, view)                                 \
  X(pad, shape, true, kAnyDType, kAnyDType, composite)                                 \
  X(unfold, shape, true, kAnyDType, kAnyDType, composite)                              \
  X(pixel_shuffle, shape, true, kAnyDType, kAnyDType, composite)                       \
  X(pixel_unshuffle, shape, true, kAnyDType, kAnyDType, composite)                     \
  /* issue 32, group shape (include/ember/ops_shape.hpp) */                            \
  X(rot90, shape, true, kAnyDType, kAnyDType, composite)                               \
  X(atleast_1d, shape, true, kAnyDType, kAnyDType, composite)                          \
  X(atleast_2d, shape, true, kAnyDType, kAnyDType, composite)                          \
  X(atleast_3d, shape, true, kAnyDType, kAnyDType, composite)                          \
  X(hstack, shape, true, kAnyDType, kAnyDType, composite)                              \
  X(vstack, shape, true, kAnyDType, kAnyDType, composite)                              \
  X(dstack, shape, true, kAnyDType, kAnyDType, composite)                              \
  X(column_stack, shape, true, kAnyDType, kAnyDType, composite)                        \
  X(tensor_split, shape, true, kAnyDType, kAnyDType, composite)                        \
  X(hsplit, shape, true, kAnyDType, kAnyDType, composite)                              \
  X(vsplit, shape, true, kAnyDType, kAnyDType, composite)                              \
  X(dsplit, shape, true, kAnyDType, kAnyDType, composite)                              \
  X(unflatten, shape, true, kAnyDType, kAnyDType, composite)                           \
  X(narrow_copy, shape, true, kAnyDType, kAnyDType, composite)                         \
  X(broadcast_to, shape, true, kAnyDType, kAnyDType, composite)                        \
  X(broadcast_tensors, shape, true, kAnyDType, kAnyDType, composite)                   \
  X(as_strided, shape, true, kAnyDType, kAnyDType, view)                               \
  X(diagonal, shape, true, kAnyDType, kAnyDType, view)                                 \
  X(diag_embed, shape, true, kAnyDType, kAnyDType, composite)                          \
  X(diagflat, shape, true, kAnyDType, kAnyDType, composite)                            \
  X(trace, shape, true, kArithmetic, kArithmetic, composite)                           \
  X(block_diag, shape, true, kAnyDType, kAnyDType, composite)                          \
  X(cartesian_prod, shape, true, kAnyDType, kAnyDType, composite)                      \
  X(combinations, shape, true, kAnyDType, kAnyDType, composite)                        \
  X(logcumsumexp, sort, true, kFloat, kFloat, scan)                                    \
  X(mode, sort, true, kNumeric, kNumeric, composite)                                   \
  X(aminmax, reduce, true, kArithmetic, kArithmetic, composite)                        \
  X(var_mean, reduce, true, kAnyFloat, kAnyFloat, composite)                           \
  X(std_mean, reduce, true, kAnyFloat, kAnyFloat, composite)                           \
  X(quantile, sort, true, kFloat, kFloat, composite)                                   \
  X(nanquantile, sort, true, kFloat, kFloat, composite)                                \
  X(histc, reduce, false, kFloat, kFloat, composite)                                   \
  X(bincount, reduce, false, kInteger, kInteger, composite)                            \
  X(unique, sort, false, kComparable, kComparable, composite)                          \
  X(unique_consecutive, sort, false, kComparable, kComparable, composite)              \
  X(searchsorted, sort, false, kNumeric, kNumeric, composite)                          \
  X(bucketize, sort, false, kNumeric, kNumeric, composite)                             \
  X(trapezoid, reduce, true, kFloat, kFloat, composite)                                \
  X(cumulative_trapezoid, sort, true, kFloat, kFloat, composite)                       \
  X(take, index, true, kAnyDType, kAnyDType, composite)                                \
  X(take_along_dim, index, true, kAnyDType, kAnyDType, composite)                      \
  X(put, index, true, kNumeric, kNumeric, composite)                                   \
  X(masked_scatter, index, true, kAnyDType, kAnyDType, composite)                      \
  X(index_reduce, index, true, kNumeric, kNumeric, composite)                          \
  X(index_select, index, true, kAnyDType, kAnyDType, index_select)                     \
  X(gather, index, true, kAnyDType, kAnyDType, gather)                                 \
  X(scatter_add, index, true, kNumeric, kNumeric, scatter)                             \
  X(scatter, index, true, kNumeric, kNumeric, scatter)                                 \
  X(scatter_reduce, index, true, kNumeric, kNumeric, scatter)                          \
  X(embedding_bag, index, true, kFloat, kFloat, composite)                             \
  X(embedding, index, true, kAnyFloat, kAnyFloat, index_select)                        \
  X(nonzero, index, false, kComparable, kComparable, composite)                        \
  X(masked_select, index, true, kAnyDType, kAnyDType, composite)                       \
  X(index_add, index, true, kArithmetic, kArithmetic, index_add)                       \
  X(index_fill, index, true, kAnyDType, kAnyDType, composite)                          \
  X(index_copy, index, true, kNumeric, kNumeric, composite)                            \
  X(one_hot, index, false, kInteger, kInteger, composite)                              \
  X(rand, random, false, kAnyFloat, kAnyFloat, uniform)                                \
  X(randn, random, false, kAnyFloat, kAnyFloat, normal)                                \
  X(dropout, random, true, kAnyFloat, kAnyFloat, dropout)                              \
  X(layer_norm, norm, true, kAnyFloat, kAnyFloat, layer_norm_forward)                  \
  X(rms_norm, norm, true, kAnyFloat, kAnyFloat, rms_norm_forward)                      \
  X(batch_norm, norm, true, kAnyFloat, kAnyFloat, batch_norm_stats)                    \
  X(conv2d, conv, true, kAnyFloat, kAnyFloat, im2col)                                  \
  X(max_pool2d, conv, true, kAnyFloat, kAnyFloat, max_pool2d)                          \
  X(max_pool2d_with_indices, conv, true, kAnyFloat, kAnyFloat, max_pool2d)             \
  X(avg_pool2d, conv, true, kAnyFloat, kAnyFloat, avg_pool2d)                          \
  X(conv1d, conv, true, kAnyFloat, kAnyFloat, composite)                               \
  X(conv3d, conv, true, kAnyFloat, kAnyFloat, composite)                               \
  X(conv_transpose2d, conv, true, kAnyFloat, kAnyFloat, col2im)                        \
  X(conv_transpose1d, conv, true, kAnyFloat, kAnyFloat, composite)                     \
  X(max_pool1d, conv, true, kAnyFloat, kAnyFloat, composite)                           \
  X(avg_pool1d, conv, true, kAnyFloat, kAnyFloat, composite)                           \
  X(adaptive_avg_pool1d, conv, true, kAnyFloat, kAnyFloat, composite)                  \
  X(adaptive_avg_pool2d, conv, true, kAnyFloat, kAnyFloat, composite)                  \
  X(adaptive_max_pool1d, conv, true, kAnyFloat, kAnyFloat, composite)                  \
  X(adaptive_max_pool2d, conv, true, kAnyFloat, kAnyFloat, composite)                  \
  X(interpolate, conv, true, kFloat, kFloat, composite)                                \
  X(im2col, conv, true, kAnyFloat, kAnyFloat, im2col)                                  \
  X(col2im, conv, true, kAnyFloat, kAnyFloat, col2im)                                  \
  X(mse_loss, loss, true, kFloat, kFloat, composite)                                   \
  X(cross_entropy_probs, loss, true, kFloat, kFloat, composite)                        \
  X(cross_entropy, loss, true, kFloat, kFloat, cross_entropy_forward)                  \
  X(nll_loss, loss, true, kFloat, kFloat, gather)                                      \
  X(bce_with_logits, loss, true, kFloat, kFloat, composite)                            \
  X(binary_cross_entropy, loss, true, kFloat, kFloat, composite)                       \
  X(l1_loss, loss, true, kFloat, kFloat, composite)                                    \
  X(smooth_l1_loss, loss, true, kFloat, kFloat, composite)                             \
  X(huber_loss, loss, true, kFloat, kFloat, composite)                                 \
  X(kl_div, loss, true, kFloat, kFloat, composite)                                     \
  X(margin_ranking_loss, loss, true, kFloat, kFloat, composite)                        \
  X(triplet_margin_loss, loss, true, kFloat, kFloat, composite)                        \
  X(cosine_embedding_loss, loss, true, kFloat, kFloat, composite)                      \
  X(poisson_nll_loss, loss, true, kFloat, kFloat, composite)                           \
  X(ctc_loss, loss, true, kFloat, kFloat, composite)                                   \
  /* issue 32, group nn (include/ember/ops_nn.hpp) */                                  \
  X(multilabel_margin_loss, loss, true, kFloat, kFloat, composite)                     \
  X(multilabel_soft_margin_loss, loss, true, kFloat, kFloat, composite)                \
  X(multi_margin_loss, loss, true, kFloat, kFloat, composite)                          \
  X(hinge_embedding_loss, loss, true, kFloat, kFloat, composite)                       \
  X(soft_margin_loss, loss, true, kFloat, kFloat, composite)                           \
  X(gaussian_nll_loss, loss, true, kFloat, kFloat, composite)                          \
  X(triplet_margin_with_distance_loss, loss, true, kFloat, kFloat, composite)          \
  X(cosine_similarity, linalg, true, kFloat, kFloat, composite)                        \
  X(pairwise_distance, linalg, true, kFloat, kFloat, composite)                        \
  X(pdist, linalg, true, kFloat, kFloat, composite)                                    \
  X(max_pool3d, conv, true, kFloat, kFloat, composite)                                 \
  X(avg_pool3d, conv, true, kFloat, kFloat, composite)                                 \
  X(adaptive_avg_pool3d, conv, true, kFloat, kFloat, composite)                        \
  X(adaptive_max_pool3d, conv, true, kFloat, kFloat, composite)                        \
  X(max_unpool1d, conv, true, kFloat, kFloat, composite)                               \
  X(max_unpool2d, conv, true, kFloat, kFloat, composite)                               \
  X(max_unpool3d, conv, true, kFloat, kFloat, composite)                               \
  X(lp_pool1d, conv, true, kFloat, kFloat, composite)                                  \
  X(lp_pool2d, conv, true, kFloat, kFloat, composite)                                  \
  X(lp_pool3d, conv, true, kFloat, kFloat, composite)                                  \
  X(channel_shuffle, shape, true, kAnyDType, kAnyDType, composite)                     \
  X(local_response_norm, norm, true, kFloat, kFloat, composite)                        \
  X(affine_grid, conv, true, kFloat, kFloat, composite)                                \
  X(grid_sample, conv, true, kFloat, kFloat, composite)                                \
  X(fractional_max_pool2d, conv, true, kFloat, kFloat, composite)                      \
  X(fractional_max_pool3d, conv, true, kFloat, kFloat, composite)                      \
  X(conv_transpose3d, conv, true, kFloat, kFloat, composite)                           \
  X(lstm_recurrence, rnn, true, kFloat, kFloat, lstm_step)                             \
  X(rotary_embedding, attention, true, kAnyFloat, kAnyFloat, rotary_embedding)         \
  X(scaled_dot_product_attention, attention, true, kAnyFloat, kAnyFloat, sdpa_forward) \
  X(attention_with_kv_cache, attention, false, kAnyFloat, kAnyFloat, kv_cache_attention)

#define EMBER_OPS_ENTRY_(name, ...) name,
#define EMBER_OPS_OTHER_ENTRY_(name, family, grad, cpu, cuda, kernel) name,

/// Every public op (ember::add is Op::add). Op::count is the number of ops.
enum class Op : uint16_t {
  EMBER_OPS_UNARY(EMBER_OPS_ENTRY_) EMBER_OPS_BINARY(EMBER_OPS_ENTRY_)
      EMBER_OPS_REDUCE(EMBER_OPS_ENTRY_) EMBER_OPS_OTHER(EMBER_OPS_OTHER_ENTRY_) count
};

/// What the catalogue says about one op.
struct OpInfo {
  Op op;
  const char* name;  // as in ember::name(...) and in its errors
  OpFamily family;
  bool differentiable;
  DTypeSet cpu;   // dtypes the CPU backend computes it in
  DTypeSet cuda;  // dtypes the CUDA backend computes it in
  /// The dtypes of `type`'s backend.
  constexpr DTypeSet dtypes(DeviceType type) const { return type == DeviceType::cuda ? cuda : cpu; }
};

/// The catalogue's row for `op`.
const OpInfo& op_info(Op op);
/// The op's name: op_name(Op::log_softmax) is "log_softmax".
inline const char* op_name(Op op) { return op_info(op).name; }
/// Every op, in catalogue order (for tests, documentation and tools).
std::span<const OpInfo> catalogue();
/// The op called `name`, or Op::count when there is none.
Op op_by_name(std::string_view name);
/// Whether `device`'s backend computes `op` in `dtype` (a CUDA device in a build without
/// CUDA supports nothing). Ops check this once, before dispatch, and throw otherwise.
bool supports(Op op, DType dtype, Device device);
std::string_view family_name(OpFamily family);

}  // namespace ember
