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

enum class BinaryOp : uint8_t { EMBER_OPS_BINARY(EMBER_KERNEL_ENTRY_) count };

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
  double alpha = 1.0, beta = 0.0;
  /// Optional bias of length n added to each row of C (after alpha·AB + beta·C); may be null.
  const void* bias = nullptr;
  /// Activation applied last, in the same pass as the bias (C = act(alpha·AB + beta·C + bias)).
  GemmEpilogue epilogue = GemmEpilogue::none;
};

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
};

/// One fused Adam/AdamW step on one parameter: torch.optim's single-tensor formulas
/// (foreach=False), computed in the parameter's dtype with the scalars below cast to it.
/// `step` is the count after this step's increment (1 on the first step).
struct AdamArgs {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW: p *= 1 - lr·wd first; Adam: g += wd·p
  bool amsgrad = false;                 // max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq)
  bool maximize = false;                // ascend: g = -g
  int64_t step = 1;
};

/// One fused SGD step on one parameter (torch.optim.SGD, single-tensor formulas).
/// `first_step`: the momentum buffer is new and takes the gradient itself (no dampening).
struct SgdArgs {
  double lr = 1e-3;
  double momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false, maximize = false;
  bool first_step = false;
};

/// One parameter of a multi-tensor optimizer step: contiguous buffers of `numel` elements of
/// the call's dtype, all on one device. Adam: state = {exp_avg, exp_avg_sq, max_exp_avg_sq
/// (amsgrad only, else null)}; SGD: state = {momentum_buffer (momentum != 0 only, else null)}.
struct OptimSlot {
  void* param = nullptr;
  const void* grad = nullptr;
  void* state[3] = {nullptr, nullptr, nullptr};
  int64_t numel = 0;
};

/// The kernel table of one device type. Every slot must be filled.
struct Backend {
  const char* name;
  // memory
  void* (*allocate)(int device, size_t bytes, Pool pool,
                    size_t* block_bytes);                                    // throws OutOfMemory
  void (*deallocate)(int device, void* ptr, size_t block_bytes, Pool pool);  // returns to cache
  void (*memcpy_to_host)(int device, void* host_dst, const void* src, size_t bytes);
  void (*memcpy_from_host)(int device, void* dst, const void* host_src, size_t bytes);
  void (*empty_cache)(int device);
  void (*memory_stats)(int device, MemoryStats* stats);
  void (*reset_peak)(int device);
  void (*synchronize)(int device);
  // elementwise
  void (*fill)(const View& out, double value);    // any dtype
  void (*copy)(const View& out, const View& in);  // strided, casts dtypes
  void (*unary)(UnaryOp op, const View& out, const View& in, double a, double b);  // f32/f64
  void (*binary)(BinaryOp op, const View& out, const View& a, const View& b);      // same dtype in
  void (*where)(const View& out, const View& cond, const View& a, const View& b);  // cond bool
  /// Reduces `in` over the dims where out.shape == 1 and in.shape != 1 (out keeps rank).
  /// argmax/argmin: out is i64, exactly one dim reduced.
  void (*reduce)(ReduceOp op, const View& out, const View& in);
  /// Sum of squared deviations over reduced dims divided by (count - correction).
  void (*variance)(const View& out, const View& in, int64_t correction);
  // linear algebra
  void (*gemm)(const GemmArgs& args);  // f32/f64, contiguous rows (ld*) given
  // softmax over `dim` of a contiguous tensor; log_softmax when `log`.
  void (*softmax)(const View& out, const View& in, int dim, bool log);
  /// grad_in = softmax backward given out (the forward result) and grad_out; all contiguous.
  void (*softmax_backward)(const View& grad_in, const View& grad_out, const View& out, int dim,
                           bool log);
  // indexing (index is i64 or i32, contiguous; `in`/`out` contiguous). On a GPU the range
  // check does not wait for the device: the slot returns true, leaves the output unwritten
  // and the error is thrown at the next synchronisation (Note [Deferred device errors]).
  /// out = in.index_select(dim, index). Returns false when an index is out of range.
  bool (*index_select)(const View& out, const View& in, int dim, const View& index);
  /// out.index_add_(dim, index, src) (accumulates). Returns false on an out-of-range index.
  bool (*index_add)(const View& out, int dim, const View& index, const View& src);
  /// out = gather(in, dim, index); out has index's shape. False on out-of-range.
  bool (*gather)(const View& out, const View& in, int dim, const View& index);
  /// out.scatter_add_(dim, index, src). False on out-of-range.
  bool (*scatter_add)(const View& out, int dim, const View& index, const View& src);
  // random (counter-based so every device gives the same stream for a seed)
  /// Uniform [lo, hi) for float dtypes, from Philox(seed, offset + i).
  void (*uniform)(const View& out, uint64_t seed, uint64_t offset, double lo, double hi);
  void (*normal)(const View& out, uint64_t seed, uint64_t offset, double mean, double std);
  /// Dropout: mask[i] = u_i >= p ? 1/(1-p) : 0 (mask has in's dtype, contiguous) and
  /// out = in * mask, with u_i from Philox(seed, offset + i).
  void (*dropout)(const View& out, const View& mask, const View& in, double p, uint64_t seed,
                  uint64_t offset);
  // convolution and pooling (Window2d geometry; every View contiguous, see Window2d)
  /// columns[C·kh·kw, N·oh·ow] = the input patches of in[N, C, H, W] (zeros in the padding).
  void (*im2col)(const Window2d& w, const View& columns, const View& in);
  /// grad_in[N, C, H, W] = Σ of columns[C·kh·kw, N·oh·ow] over the patches (overwrites).
  void (*col2im)(const Window2d& w, const View& grad_in, const View& columns);
  /// out[N, C, oh, ow] = window maxima (padding is -inf, NaN wins); indices (i64) = h·W + w
  /// of each maximum within its [H, W] plane, as PyTorch.
  void (*max_pool2d)(const Window2d& w, const View& out, const View& indices, const View& in);
  /// grad_in[N, C, H, W] = grad_out scattered to `indices` (overwrites, accumulates ties).
  void (*max_pool2d_backward)(const Window2d& w, const View& grad_in, const View& grad_out,
                              const View& indices);
  /// out[N, C, oh, ow] = window means; the divisor counts padding when count_include_pad.
  void (*avg_pool2d)(const Window2d& w, const View& out, const View& in, bool count_include_pad);
  /// grad_in[N, C, H, W] = grad_out spread evenly over each window (overwrites).
  void (*avg_pool2d_backward)(const Window2d& w, const View& grad_in, const View& grad_out,
                              bool count_include_pad);
  // optimizers (optim.cpp): fused, in place, one pass over memory. Every View is
  // contiguous with param's dtype (f32/f64) and numel.
  // One form, multi-tensor (one launch on a GPU for a whole parameter group), every slot
  // with the same args (so the same step count). Adam/AdamW updates param, exp_avg,
  // exp_avg_sq (and max_exp_avg_sq when args.amsgrad) from grad; SGD updates param (and
  // momentum_buf when args.momentum != 0) from grad.
  void (*adam_step_multi)(int device, DType dtype, const OptimSlot* slots, int64_t count,
                          const AdamArgs& args);
  void (*sgd_step_multi)(int device, DType dtype, const OptimSlot* slots, int64_t count,
                         const SgdArgs& args);
  /// *total_norm (a 0-d buffer of `dtype` on the grads' device) = the norm of order
  /// norm_type (p > 0 or +inf) of all grads together; sums accumulate in f64 in a fixed order.
  void (*grad_norm_multi)(int device, DType dtype, void* const* grads, const int64_t* numels,
                          int64_t count, double norm_type, void* total_norm);
  /// grads *= min(1, max_norm / (total_norm + 1e-6)), total_norm read where it lives (no host
  /// sync on a GPU): torch.nn.utils.clip_grad_norm_'s clamped coefficient.
  void (*clip_grads_by_norm)(int device, DType dtype, void* const* grads, const int64_t* numels,
                             int64_t count, double max_norm, const void* total_norm);
  // batch normalisation (norm.cpp): `in`, `out`, `grad_out` are contiguous
  // [N, C, S] (S: the dims after C, multiplied); per-channel operands are contiguous [C].
  /// mean[C] and biased variance var[C] of each channel of in (accumulated in f64).
  void (*batch_norm_stats)(const View& mean, const View& var, const View& in);
  /// sum_g[C] = Σ grad_out and sum_gx[C] = Σ grad_out·(in - mean[c]) over each channel.
  void (*batch_norm_backward_reduce)(const View& sum_g, const View& sum_gx, const View& grad_out,
                                     const View& in, const View& mean);
  /// out = a·scale_a[c] + b·scale_b[c] + shift[c]; a View whose data is null is left out
  /// (b with scale_b, or shift).
  void (*channel_affine)(const View& out, const View& a, const View& scale_a, const View& b,
                         const View& scale_b, const View& shift);
  // fused softmax cross-entropy (loss): logits [N, C] contiguous f32/f64, target [N]
  // contiguous i64/i32 class indices; per row i (t = target[i], ε = label_smoothing),
  //   lse_i = log Σ_c exp(x_ic),  loss_i = (1-ε)·(lse_i - x_it) + (ε/C)·Σ_c (lse_i - x_ic),
  // and loss_i = 0 on rows whose target equals ignore_index. A label outside [0, C) that is
  // not ignore_index is an error: the CPU throws at once ("cross_entropy: label L at position
  // i is out of range for C classes ..."); a GPU records it and reports it at the next
  // synchronisation (Note [Deferred device errors] in src/cuda/device_error.cuh).
  /// loss_rows[N] and lse[N] (logits' dtype) as above. When count.data is set (0-d, logits'
  /// dtype) it gets the number of rows not ignored; when total.data is set (0-d) it gets
  /// Σ loss_rows, divided by that count when count.data is set (PyTorch's mean).
  void (*cross_entropy_forward)(const View& loss_rows, const View& lse, const View& total,
                                const View& count, const View& logits, const View& target,
                                int64_t ignore_index, double label_smoothing);
  /// grad_logits[N, C] = s_i·(softmax(x_i) - (1-ε)·onehot(t_i) - ε/C), 0 on ignored rows, with
  /// s_i = grad_loss[i] when grad_loss is [N], else grad_loss[] / count[] (count.data set:
  /// mean) or grad_loss[] (sum; grad_loss 0-d). Scalars are read on the device (no host sync).
  void (*cross_entropy_backward)(const View& grad_logits, const View& grad_loss, const View& count,
                                 const View& logits, const View& target, const View& lse,
                                 int64_t ignore_index, double label_smoothing);
};

/// The table for `type`. Throws "ember was built without CUDA" for cuda in a CPU-only build.
const Backend& backend_for(DeviceType type);
inline const Backend& backend_for(Device d) { return backend_for(d.type); }

/// Each backend's registration file defines its table getter (no static-init order games).
const Backend& cpu_backend();
#if defined(EMBER_WITH_CUDA)
const Backend& cuda_backend();
#endif

}  // namespace ember::backend
