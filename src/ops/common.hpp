// src/ops/common.hpp — helpers every op family shares: output allocation, backend views,
// dtype/device checks. Shape rules live in the op files; kernels live in the backends.
#pragma once

#include <array>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "autograd/node.hpp"
#include "backend/backend.hpp"
#include "backend/device_runtime.hpp"
#include "core/checks.hpp"
#include "core/make.hpp"
#include "ember/autocast.hpp"
#include "ember/catalogue.hpp"
#include "ember/ops.hpp"
#include "ember/profiler.hpp"
#include "ember/tensor.hpp"

namespace ember::ops {

// Tensors are constructed in core only (src/core/make.hpp).
using core::make_tensor;
using core::make_view;

inline backend::View view_of(const Tensor& t) {
  return {t.data_ptr(), t.dtype(), t.device().index, t.shape(), t.strides()};
}

/// The memory format an op gives the output it makes like `t`: its suggested one (contiguous
/// for any rank but 4 and 5; Note [Memory formats] in src/core/tensor.cpp).
inline MemoryFormat format_of(const Tensor& t) { return t.suggest_memory_format(); }

/// `result` in x's channels_last format (one transpose) when x has one, else as it is: for the
/// ops that compute on gathered or grouped rows and keep their input's format at the end.
inline Tensor in_format_of(const Tensor& x, const Tensor& result) {
  const MemoryFormat format = format_of(x);
  return format == MemoryFormat::contiguous ? result : result.contiguous(format);
}

/// Whether `t`'s elements fill one run of numel() elements from data_ptr(), in any order:
/// contiguous, or channels_last (channels_last_3d) with that format's strides. Kernels that
/// treat a buffer as a flat list (norms, clipping, loss scaling) take such tensors as they are.
inline bool is_dense(const Tensor& t) {
  if (t.is_contiguous()) return true;
  if (t.dim() == 4) return t.is_contiguous(MemoryFormat::channels_last);
  return t.dim() == 5 && t.is_contiguous(MemoryFormat::channels_last_3d);
}

/// Reorders the dims of `views` (operands of one shape, the output first) into `format`'s
/// memory order, outermost first, so that an elementwise kernel walking them row-major walks
/// a channels_last output contiguously (views of another rank are left alone; elementwise
/// results do not depend on the order). Nothing for contiguous.
inline void in_memory_order(MemoryFormat format, std::initializer_list<backend::View*> views) {
  const std::span<const int> order = core::memory_order(format);
  if (order.empty()) return;
  for (backend::View* v : views) {
    if (v->shape.size() != static_cast<int>(order.size())) continue;
    const Shape shape = v->shape, strides = v->strides;
    for (size_t i = 0; i < order.size(); ++i) {
      v->shape[static_cast<int>(i)] = shape[order[i]];
      v->strides[static_cast<int>(i)] = strides[order[i]];
    }
  }
}

/// `t` seen with `shape` (t's shape must broadcast to it): stride 0 on broadcast dims.
backend::View broadcast_view(const Tensor& t, const Shape& shape);

inline const backend::Backend& backend_of(const Tensor& t) {
  return backend::backend_for(t.device().type);
}

/// dst = src (same shape, any strides, cast to dst's dtype), walking dst in its memory order.
inline void copy_in_memory_order(const Tensor& dst, const Tensor& src) {
  backend::View d = view_of(dst), s = view_of(src);
  in_memory_order(format_of(dst), {&d, &s});
  backend_of(dst).copy(d, s);
}

// The ops' undefined-input check is core's (src/core/checks.hpp), which autograd uses too.
using core::check_defined;

/// The op the user called, for the errors of the ops it runs (Note [Errors name the op the
/// user called] in ember/error.hpp). Open one first thing in a composite:
///   const ops::UserOp user(Op::addcmul, {&x, &t1, &t2});
class UserOp final : public detail::ErrorScope {
 public:
  UserOp(Op op, std::initializer_list<const Tensor*> inputs) noexcept;
  UserOp(const char* op, std::initializer_list<const Tensor*> inputs) noexcept;
  /// The same over a list of tensors (stack, meshgrid).
  UserOp(Op op, const std::vector<Tensor>& inputs) noexcept;
  ~UserOp() = default;
  std::string describe() const override;

 private:
  static constexpr size_t kMaxInputs = 6;
  std::array<const Tensor*, kMaxInputs> inputs_{};
  size_t count_ = 0;
  const std::vector<Tensor>* list_ = nullptr;
  detail::ProfileScope profile_;
};

/// The op being computed, for the profiler (Note [Profiling at no cost when off] in
/// src/core/profiler.hpp): a primitive opens one next to its one dtype check,
///   const ops::OpScope scope(op, x);
///   ops::check_supported(op, x);
/// so that its kernels, their device time and its allocations are charged to it. Composites
/// get one from UserOp. Nothing happens when no Profiler records.
class OpScope final {
 public:
  OpScope(Op op, const Tensor& t) noexcept
      : scope_(ProfileKind::op, op_name(op), t.defined() ? t.device().index : -1) {}
  OpScope(Op op, Device device) noexcept : scope_(ProfileKind::op, op_name(op), device.index) {}

 private:
  detail::ProfileScope scope_;
};

/// grad · relu'(x), one kernel: x > 0 ? grad : grad · 0 (the bits of grad · (x > 0), -0 and
/// NaN included). grad and x of one shape, dtype and device (the backward of relu and of the
/// linear + ReLU epilogue).
Tensor relu_backward(const Tensor& grad, const Tensor& x);
/// grad · gelu_tanh'(x) (Note [Activation backward in one]): the backward of gelu(x, "tanh")
/// and of the linear + GELU epilogue.
Tensor gelu_tanh_backward(const Tensor& grad, const Tensor& x);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
/// Whether `t`'s device computes `op` in t's dtype (the catalogue's answer).
inline bool supports_here(Op op, const Tensor& t) { return supports(op, t.dtype(), t.device()); }
/// The one dtype check of an op, made before dispatch: throws unless the catalogue lists
/// t's dtype for `op` on t's device ("exp: unsupported dtype i64 on cpu (supported: f32, f64)").
/// Also refuses an undefined `t`.
void check_supported(Op op, const Tensor& t, const char* what = "input");
/// The same check for a dtype an op is about to compute in (a promoted one) on `device`.
void check_supported(Op op, DType dtype, Device device);

/// torch.result_type of several tensors (undefined ones are skipped): Note [Type promotion].
DType result_type(std::initializer_list<const Tensor*> tensors);
/// The op's operands cast to their result type (differentiably, with .to(DType), so each
/// input's gradient comes back in its own dtype), after checking that the devices agree and
/// that the catalogue lists the result type for `op` there. Inputs already of that dtype are
/// returned as they are. Every binary op starts with it:
///   const auto [a, b] = ops::promote(Op::add, a_in, b_in);
std::pair<Tensor, Tensor> promote(Op op, const Tensor& a, const Tensor& b);
/// An op's inputs under autocast (Note [Autocast], src/ops/autocast.cpp): true when the
/// policy cast some; c[i] is input i, cast or not. Every op of the autocast table starts with
///   if (const auto c = ops::autocast(Op::mm, {&a, &b})) return mm(c[0], c[1]);
struct AutocastInputs {
  std::unique_ptr<std::array<Tensor, 6>> t;  // null (one pointer to build) when nothing was cast
  explicit operator bool() const { return t != nullptr; }
  const Tensor& operator[](size_t i) const { return (*t)[i]; }
};
AutocastInputs autocast_slow(Op op, std::initializer_list<const Tensor*> inputs);
inline AutocastInputs autocast(Op op, std::initializer_list<const Tensor*> inputs) {
  if (!autocast_enabled()) [[likely]]
    return {};
  return autocast_slow(op, inputs);
}

/// `t` in autocast's low dtype, through the scope's cast cache (a parameter is converted once
/// per outermost scope and grad mode); `t` itself when it is not f32/f16/bf16 or has it.
Tensor autocast_lower(const Tensor& t);

/// The same for an op over a list of tensors (cat, stack): empty when nothing was cast.
std::optional<std::vector<Tensor>> autocast_list(Op op, const std::vector<Tensor>& tensors);

/// `t`'s copy in `dtype` that the op which made `t` wrote beside it, if it did and `t` has not
/// been written since; else an empty handle (Note [A lower-precision copy beside a tensor]).
Tensor low_copy_of(const Tensor& t, DType dtype);
/// Records `low` (t's values rounded to low's dtype, same shape, contiguous) beside `t`.
void attach_low_copy(const Tensor& t, const Tensor& low);
/// Whether ops write low copies at all (on; EMBER_LOW_COPY=0 or set_low_copies(false) turns
/// them off, for measuring and for tests that compare both ways).
bool low_copies_enabled();
void set_low_copies(bool on);
/// Whether an op with an f32 output should write its low copy: autocast is on (and copies are).
inline bool want_low_copy(DType out) {
  return out == DType::f32 && autocast_enabled() && low_copies_enabled();
}

/// `t` cast to `dtype` (itself when it has it already).
inline Tensor cast_to(const Tensor& t, DType dtype) {
  return t.defined() && t.dtype() != dtype ? t.to(dtype) : t;
}
void check_index_dtype(const char* op, const Tensor& index);
/// Refuses a scalar an integer `dtype` cannot hold (NaN, ±inf, outside its range), as
/// PyTorch's "value cannot be converted without overflow". Floating and bool take any value
/// (bool: non-zero, NaN included, is true).
void check_scalar_fits(const char* op, double value, DType dtype);

/// Refuses an in-place write into `t` that would corrupt the graph (a tensor that requires
/// grad while recording) or its own values (an expanded view: stride 0 over a dim > 1).
void check_writable(const char* op, const Tensor& t);
/// check_writable, then bumps the version of `t` for the write that follows.
void check_inplace(const char* op, const Tensor& t);

// Factories (factory.cpp, random.cpp): the options' device and dtype, or the defaults.
inline Device device_or_default(const TensorOptions& o) {
  return o.device ? *o.device : default_device();
}
inline DType dtype_or_default(const TensorOptions& o) { return o.dtype.value_or(default_dtype()); }
/// A new factory result `t` with the options' requires_grad applied.
inline Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad) t.requires_grad_(true);
  return t;
}

/// Reduced-to-keepdim shape: dims listed in `dims` become 1 (all when empty).
Shape reduced_shape(const Shape& in, const Shape& dims, const char* op);
/// Drop the size-1 reduced dims (for keepdim = false).
Shape squeeze_dims(const Shape& keep, const Shape& in, const Shape& dims);

/// A 0-d tensor holding `v` in `like`'s dtype and device: the scalar operand of an op on it.
inline Tensor scalar_like(const Tensor& like, double v) {
  return full(Shape{}, v, {.dtype = like.dtype(), .device = like.device()});
}

/// Constants the ops' formulas and gradients share.
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kLn2 = 0.69314718055994530942;
inline constexpr double kTwoOverSqrtPi = 1.12837916709551257390;  // 2/√π: erf's derivative

}  // namespace ember::ops
