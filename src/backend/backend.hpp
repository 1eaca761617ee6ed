// src/backend/backend.hpp — the seam between ops and devices (ARCHITECTURE §5).
//
// A backend is one table of kernels for one device type. Kernels see raw pointers,
// shapes and strides only (a View); they never see Tensor, autograd or modules. Ops do
// every shape check and broadcast before calling a kernel: a kernel may assume its
// views are valid, that `out` has the shape the op computed, and that inputs have been
// broadcast to `out`'s shape with stride-0 dims. The CPU table is filled in src/cpu,
// the CUDA table in src/cuda.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "backend/attention.hpp"
#include "backend/conv_library.hpp"
#include "backend/optim_args.hpp"
#include "ember/catalogue.hpp"
#include "ember/device.hpp"
#include "ember/dtype.hpp"
#include "ember/memory.hpp"
#include "ember/shape.hpp"

namespace ember::backend {

/// A strided window on device memory. `data` points at element 0 (offset applied);
/// strides are in elements and may be 0 (broadcast) but never negative.
struct View {
  void* data = nullptr;
  DType dtype = DType::f32;
  int device = 0;  // index of the device `data` lives on (a kernel never asks the driver)
  Shape shape;
  Shape strides;
  int64_t numel() const { return shape.numel(); }
};

/// True when `v` is C-contiguous (size-1 dims may have any stride; an empty view, with a
/// zero-size dim, is contiguous whatever its strides, as in PyTorch).
inline bool is_contiguous(const View& v) {
  for (int d = 0; d < v.shape.size(); ++d)
    if (v.shape[d] == 0) return true;
  int64_t expected = 1;
  for (int d = v.shape.size() - 1; d >= 0; --d) {
    if (v.shape[d] == 1) continue;
    if (v.strides[d] != expected) return false;
    expected *= v.shape[d];
  }
  return true;
}

// The generic kernels' ops. Their public entries come from the op catalogue
// (include/ember/catalogue.hpp: UnaryOp::exp is Op::exp's kernel); the kernel-only entries
// below serve ops whose kernel has another name (gelu, add with a scalar) and backward rules.
// Adding an entry without a formula fails the build (src/kernels/elementwise.hpp, reduce.hpp).
#define EMBER_KERNEL_ENTRY_(name, ...) name,

/// Unary kernel entries with a formula in src/kernels/elementwise.hpp besides the catalogue's.
#define EMBER_UNARY_KERNEL_ONLY(X)                               \
  X(gelu_erf)       /* gelu(x, "none") */                        \
  X(gelu_tanh)      /* gelu(x, "tanh") */                        \
  X(affine)         /* x * a + b: add/mul/scale with a scalar */ \
  X(pow_scalar)     /* x ** a */                                 \
  X(relu_grad)      /* x > 0 ? 1 : 0 */                          \
  X(gelu_erf_grad)  /* d gelu_erf / dx */                        \
  X(gelu_tanh_grad) /* d gelu_tanh / dx */                       \
  X(silu_grad)      /* d silu / dx */                            \
  X(clamp_mask)     /* a <= x <= b ? 1 : 0 */

enum class UnaryOp : uint8_t {
  EMBER_OPS_UNARY(EMBER_KERNEL_ENTRY_) EMBER_UNARY_KERNEL_ONLY(EMBER_KERNEL_ENTRY_)
      logical_not,  // bool out, any dtype in (its own loop in each backend)
  count
};

/// Binary kernel entries with a formula in src/kernels/elementwise.hpp besides the catalogue's.
#define EMBER_BINARY_KERNEL_ONLY(X)                                                               \
  X(relu_backward)      /* b > 0 ? a : a·0 — a gradient through ReLU, b its input or output */ \
  X(gelu_tanh_backward) /* a · gelu_tanh'(b): a gradient through gelu(b, "tanh") */              \
  X(gelu_erf_backward)  /* a · gelu'(b) */                                                       \
  X(silu_backward)      /* a · silu'(b) */

enum class BinaryOp : uint8_t {
  EMBER_OPS_BINARY(EMBER_KERNEL_ENTRY_) EMBER_BINARY_KERNEL_ONLY(EMBER_KERNEL_ENTRY_) count
};

/// The comparisons and the logical ops, eq .. logical_xor in the catalogue: they read any T and
/// write bool; every other binary kernel (one listed after logical_xor too) writes its
/// operands' dtype. The ops that allocate the output and both backends' kernels ask this.
constexpr bool is_comparison(BinaryOp op) {
  return op >= BinaryOp::eq && op <= BinaryOp::logical_xor;
}

enum class ReduceOp : uint8_t { EMBER_OPS_REDUCE(EMBER_KERNEL_ENTRY_) count };

// The kernel entry of a catalogue op of the unary, binary or reduce list: the lists open the
// catalogue in that order, and each kernel enum opens with its list (the same order).
inline constexpr int kFirstBinaryOp = static_cast<int>(Op::add);
inline constexpr int kFirstReduceOp = static_cast<int>(Op::sum);
constexpr UnaryOp unary_kernel(Op op) { return static_cast<UnaryOp>(static_cast<int>(op)); }
constexpr BinaryOp binary_kernel(Op op) {
  return static_cast<BinaryOp>(static_cast<int>(op) - kFirstBinaryOp);
}
constexpr ReduceOp reduce_kernel(Op op) {
  return static_cast<ReduceOp>(static_cast<int>(op) - kFirstReduceOp);
}
static_assert(unary_kernel(Op::clamp) == UnaryOp::clamp && binary_kernel(Op::ge) == BinaryOp::ge &&
              reduce_kernel(Op::argmin) == ReduceOp::argmin);

/// The running reduction of the scan slot: cumsum, cumprod, cummax, cummin, and
/// logcumsumexp (logaddexp steps; f32/f64 only).
enum class ScanOp : uint8_t { sum, prod, max, min, logaddexp };

/// The matrix decompositions of the decompose slot (LAPACK on the CPU). Beyond the six whose
/// operands slots.def gives:
///   eigh  out0 = eigenvalues [.., n] ascending, out1 = eigenvectors [.., n, n] (columns);
///         only a's lower triangle is read; returns a matrix whose iteration did not converge.
///   lu    out0 = L and U packed [.., m, n] (L unit lower, its diagonal not stored), out1 =
///         pivots i32 [.., min(m, n)] (1-based rows swapped in turn, as LAPACK); every matrix
///         is written; returns the first with a zero pivot (singular).
///   solve_lower / solve_upper  out0 = a⁻¹·b for triangular a [.., n, n] (only that triangle
///         read), b [.., n, k]; returns the first a with a zero on its diagonal.
enum class Decomposition : uint8_t {
  inverse,
  det,
  solve,
  cholesky,
  qr,
  svd,
  eigh,
  lu,
  solve_lower,
  solve_upper
};

/// How the scatter slot combines a source element with its target: overwrite (scatter), or
/// scatter_reduce's sum, prod, amax, amin (NaN propagates through amax/amin).
enum class ScatterOp : uint8_t { assign, sum, prod, max, min };

/// An activation applied to C in the GEMM's epilogue, after the bias (see GemmArgs).
enum class GemmEpilogue : uint8_t {
  none,
  relu,       // max(c, 0)
  gelu_tanh,  // 0.5·c·(1 + tanh(√(2/π)·(c + 0.044715·c³))): cuBLASLt's GELU; never the erf form
  count
};

/// Operands of a batched GEMM: C[b] = alpha · op(A[b]) · op(B[b]) + beta · C[b], row-major.
/// Batch strides may be 0 (a broadcast operand). Transposes are flags, never copies.
struct GemmArgs {
  DType dtype = DType::f32;
  int device = 0;  // index of the device every operand lives on
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  int64_t lda = 0, batch_stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, batch_stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, batch_stride_c = 0;
  /// A and B f16/bf16 with C — and bias_grad — in f32 (a mixed-precision product written in
  /// its inputs' master dtype, Note [Autocast's linear writes f32 gradients]); no bias, no
  /// epilogue, no ReLU masks.
  bool c_f32 = false;
  double alpha = 1.0, beta = 0.0;
  /// Optional bias of length n added to each row of C (after alpha·AB + beta·C); may be null.
  const void* bias = nullptr;
  /// Activation applied last, in the same pass as the bias (C = act(alpha·AB + beta·C + bias)).
  GemmEpilogue epilogue = GemmEpilogue::none;
  /// Optional (batch 1, no bias, no activation): receives the m sums of op(A)'s rows over k,
  /// in A's dtype — a bias gradient beside the weight gradient dW = gᵀ·x, so the sum needs no
  /// launch of its own where cuBLASLt's BGRADB epilogue applies (else the reduce slot runs).
  void* bias_grad = nullptr;
  /// ReLU bit masks (Note [ReLU masks]; batch 1). With epilogue relu: if set, may receive the
  /// mask of C (bit (i, j) set where C[i, j] > 0), relu_mask_bytes(m, n) bytes, written only
  /// where it costs no pass of its own (CUDA: inside the GEMM's epilogue); the backend then
  /// sets *relu_mask_written.
  void* relu_mask_out = nullptr;
  bool* relu_mask_written = nullptr;
  /// If set (no bias, no epilogue, no bias_grad): ReLU's backward applied to the product,
  /// C[i, j] = bit (i, j) of this mask ? (alpha·AB)[i, j] : 0 (cuBLASLt's DRELU epilogue) …
  const void* relu_mask_in = nullptr;
  /// … and, if set, C's n column sums (summed over the m rows, in C's dtype): the bias
  /// gradient of the layer whose ReLU made the mask (DRELU_BGRAD).
  void* relu_bias_grad = nullptr;
  /// GELU's pre-activation (Note [GELU backward in the next GEMM]; batch 1, ldc == n). With
  /// epilogue gelu_tanh: if set, receives alpha·AB + beta·C + bias before the GELU, [m, n]
  /// contiguous in C's dtype (CUDA: cuBLASLt's GELU_AUX(_BIAS), whose C is the GELU of the
  /// unrounded pre-activation). Always written when set.
  void* gelu_pre_out = nullptr;
  /// If set (no bias, no epilogue, no bias_grad, no ReLU mask): C = alpha·AB ·
  /// gelu_tanh'(gelu_pre_in) elementwise, gelu_pre_in [m, n] contiguous in C's dtype (DGELU) …
  const void* gelu_pre_in = nullptr;
  /// … and, if set, C's n column sums in C's dtype (DGELU_BGRAD).
  void* gelu_bias_grad = nullptr;
  /// Optional (batch 1, beta 0, no activation, masks, GELU operands or bias gradient, C in
  /// A's dtype): [m, n] in C's dtype with C's leading dimension, added last, C = alpha·AB +
  /// bias + residual — a residual connection in the product (Note [A residual in the
  /// product] in src/ops/linalg.cpp). A backend without a kernel for it copies it into C and
  /// runs the product with beta = 1.
  const void* residual = nullptr;
  /// B is written by nothing queued since the work before a ReadOnlyGuard listing it finished
  /// (a decode step's weights): the product may load it before the kernels ahead of it finish
  /// (CUDA's few-rows kernels: Note [Weights loaded before the wait] in src/cuda/gemv.cu).
  bool b_read_only = false;
};

// Note [ReLU masks]
// A ReLU mask records which outputs of a GEMM with a ReLU epilogue were positive: one bit per
// element of C [m, n], row i starting at bit i·relu_mask_ld(n), bit b of a byte holding
// column 8·byte + b (low bit first). It is cuBLASLt's RELU_AUX layout for our row-major C
// (its column-major [n, m] output with a leading dimension in bits that is a multiple of
// 128), so the CUDA backend's epilogues write and read it directly; the CPU backend and the
// CUDA fallbacks use the same layout (src/kernels/relu_mask.hpp).
inline int64_t relu_mask_ld(int64_t n) { return (n + 127) / 128 * 128; }
inline int64_t relu_mask_bytes(int64_t m, int64_t n) { return m * (relu_mask_ld(n) / 8); }

/// The norm applied to op(A)'s rows before a product (the norm_linear slot): layer_norm over
/// the k values of each row with `weight` and `bias` (either may be null), or rms_norm with
/// `weight` (rms: no bias); the parameters in A's dtype, contiguous [k].
struct RowNorm {
  const void* weight = nullptr;
  const void* bias = nullptr;
  double eps = 1e-5;
  bool rms = false;
};

/// batch_norm_prepare's operands (Note [Batch norm's per-channel arithmetic in one kernel] in
/// src/kernels/norm.hpp): contiguous [C] views of the per-channel dtype P (f32 for 16-bit data,
/// else the data's). Reads mean and var (training: the batch's, biased; eval: the running
/// statistics); writes invstd = 1/√(var + eps), scale = invstd·weight and shift = bias -
/// mean·scale; training with running statistics also updates them in place (momentum, and
/// `unbias` = M/(M - 1) on the variance). weight, bias and the running statistics may be
/// absent (data null: weight 1, bias 0, no update).
struct BatchNormPrepare {
  View invstd, scale, shift;
  View mean, var;
  View running_mean, running_var;
  View weight, bias;
  double eps = 1e-5, momentum = 0.1, unbias = 1.0;
  bool training = true;
};

/// batch_norm_backward_prepare's operands ([C] views of P, as above): from Σg and Σg·(x - mean)
/// (sum_g, sum_gx), mean, invstd and weight (absent: 1) it writes scale_g = weight·invstd and,
/// training (inv_m = 1/M), scale_x and shift of dx = g·scale_g + x·scale_x + shift (Note [Fused
/// batch norm] in src/ops/norm.cpp); grad_weight = Σg·(x - mean)·invstd and grad_bias = Σg
/// where their views have data.
struct BatchNormBackwardPrepare {
  View scale_g, scale_x, shift;
  View grad_weight, grad_bias;
  View sum_g, sum_gx, mean, invstd, weight;
  double inv_m = 0.0;
  bool training = true;
};

/// channel_affine's operands: `out`, `a`, `b`, `gate` and `residual` are [N, C, S] views of
/// one layout (nc3 in src/ops/norm.cpp), the scales and shift [C] of the per-channel dtype.
/// Per element, in that dtype:
///   v = a'·scale_a[c] + b·scale_b[c] + shift[c]     (a' = a where gate > 0, else a·0)
///   out = relu?(round(round(v) + residual))
/// Absent operands (data null) are left out: gate (a' = a), b with scale_b, shift (+0),
/// residual (out = relu?(round(v))). The gate is ReLU's backward folded in (the bits of
/// relu_backward's a·(gate > 0 ? 1 : 0)), the residual and relu batch_norm_relu's epilogue
/// (the bits of the composite's add and relu).
struct ChannelAffine {
  View out, a, scale_a;
  View gate;
  View b, scale_b;
  View shift;
  View residual;
  bool relu = false;
};

/// GemmArgs::residual's conditions: one plain product with a bias at most, C in A's dtype.
inline bool residual_fits(const GemmArgs& g) {
  return g.batch == 1 && g.beta == 0.0 && g.epilogue == GemmEpilogue::none && !g.c_f32 &&
         !g.bias_grad && !g.relu_mask_out && !g.relu_mask_in && !g.gelu_pre_out && !g.gelu_pre_in &&
         g.ldc >= g.n;
}

/// The product of `g` with its residual already copied into C: beta = 1, no residual.
inline GemmArgs accumulating_into_residual(const GemmArgs& g) {
  GemmArgs r = g;
  r.residual = nullptr;
  r.beta = 1.0;
  return r;
}

/// The reduce slot's operands for GemmArgs::bias_grad: out [1, m] or [m, 1], in op(A) as it
/// is stored ([k, m] when trans_a, else [m, k]); reduce(sum, out, in) gives the row sums.
inline std::pair<View, View> gemm_bias_grad_views(const GemmArgs& g) {
  View out{g.bias_grad, g.c_f32 ? DType::f32 : g.dtype, g.device, Shape{}, Shape{}};
  View in{const_cast<void*>(g.a), g.dtype, g.device, Shape{}, Shape{}};
  if (g.trans_a) {
    in.shape = Shape{g.k, g.m};
    out.shape = Shape{1, g.m};
    out.strides = Shape{g.m, 1};
  } else {
    in.shape = Shape{g.m, g.k};
    out.shape = Shape{g.m, 1};
    out.strides = Shape{1, 1};
  }
  in.strides = Shape{g.lda, 1};
  return {out, in};
}

/// The reduce slot's operands for the column sums of C [m, n] into `out` [1, n]
/// (GemmArgs::relu_bias_grad, GemmArgs::gelu_bias_grad).
inline std::pair<View, View> gemm_column_sum_views(const GemmArgs& g, void* out) {
  return {View{out, g.dtype, g.device, Shape{1, g.n}, Shape{g.n, 1}},
          View{g.c, g.dtype, g.device, Shape{g.m, g.n}, Shape{g.ldc, 1}}};
}

/// Geometry of a 2-D window sliding over a contiguous [N, C, H, W] input (convolution and
/// pooling). The op computes out_h/out_w (PyTorch's formulas, ceil_mode included) and checks
/// every size; kernels trust them. Window (y, x) of output (oy, ox) reads input rows
/// oy·stride_h - pad_h + i·dilation_h for i < kernel_h (columns likewise).
struct Window2d {
  int64_t batch = 0, channels = 0, height = 0, width = 0;  // input [N, C, H, W]
  int64_t out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  // The pools' input and output (and max_pool2d's indices) NHWC: element (n, c, y, x) at
  // ((n·H + y)·W + x)·C + c (Note [Memory formats] in src/core/tensor.cpp). im2col: false.
  bool channels_last = false;
};

/// One step of the fused LSTM recurrence (Note [Fused LSTM] in src/ops/rnn.cpp): N rows of H
/// cells, every operand a contiguous block of the call's dtype (f32/f64) on `device`. Gates
/// are PyTorch's (input, forget, cell, output), H columns each, pre-activation gx + gh.
struct LstmStepArgs {
  DType dtype = DType::f32;
  int device = 0;
  int64_t batch = 0, hidden = 0;
  const void* gx = nullptr;      // [N, 4H] this step's input projection, both biases included
  const void* gh = nullptr;      // [N, 4H] h_prev · W_hhᵀ
  const void* h_prev = nullptr;  // [N, H]
  const void* c_prev = nullptr;  // [N, H]
  const bool* mask = nullptr;    // [N] or null: a row whose mask is false keeps h_prev, c_prev
  void* h = nullptr;             // [N, H] the new state
  void* c = nullptr;             // [N, H]
  void* acts = nullptr;          // [N, 4H] the activated gates (0 in masked rows), for backward
};

/// The backward of one LstmStepArgs step. grad_h/grad_c are the gradients reaching h_t and c_t
/// from outside the recurrence (the layer's output, h_n, c_n); carry_h/carry_c the ones
/// reaching them through it. On return carry_c holds dL/dc_{t-1} and carry_h the part of
/// dL/dh_{t-1} that bypasses the gates (the masked rows' gradient, 0 elsewhere), to which the
/// caller adds grad_gates · W_hh.
struct LstmStepBackwardArgs {
  DType dtype = DType::f32;
  int device = 0;
  int64_t batch = 0, hidden = 0;
  const void* grad_h = nullptr;  // [N, H]
  const void* grad_c = nullptr;  // [N, H]
  void* carry_h = nullptr;       // [N, H] in and out (see above)
  void* carry_c = nullptr;       // [N, H] in and out
  const void* acts = nullptr;    // [N, 4H] the forward's activated gates
  const void* c = nullptr;       // [N, H] c_t
  const void* c_prev = nullptr;  // [N, H] c_{t-1}
  const bool* mask = nullptr;    // [N] or null, as in the forward
  void* grad_gates = nullptr;    // [N, 4H] dL/d(gx + gh) (0 in masked rows)
};

/// The kernel table of one device type: a function pointer per slot of slots.def.
struct Backend {
  const char* name;
#define EMBER_SLOT(ret, slot, params) ret(*slot) params;
#include "backend/slots.def"
#undef EMBER_SLOT
};

/// The table for `type`. Throws "ember was built without CUDA" for cuda in a CPU-only build.
const Backend& backend_for(DeviceType type);
inline const Backend& backend_for(Device d) { return backend_for(d.type); }

/// Each backend's registration file defines its table getter (no static-init order games).
const Backend& cpu_backend();
#if defined(EMBER_WITH_CUDA)
const Backend& cuda_backend();
#endif
/// The table of `type` whose kernel slots record themselves in the profiler
/// (src/backend/profiled.cpp); backend_for hands it out while a Profiler records.
const Backend& profiled_backend(DeviceType type);

}  // namespace ember::backend
