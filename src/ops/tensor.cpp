// src/ops/tensor.cpp — the Tensor members that are ops: detach, contiguous, clone, dtype
// and device conversion (differentiable), reading values, printing, the in-place writes and
// the method forms of common ops.
#include "ember/tensor.hpp"

#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <sstream>

#include "core/capture.hpp"
#include "ember/ops.hpp"
#include "ops/common.hpp"
#include "ops/tensor.hpp"

namespace ember {

Tensor Tensor::detach() const {
  checked("detach");
  return ops::make_view(*this, shape(), strides(), offset());
}

// ---- conversion ----

Tensor Tensor::contiguous() const {
  checked("contiguous");
  if (is_contiguous()) return *this;
  return clone(MemoryFormat::contiguous);
}

// As torch: contiguous(format) keeps a tensor whose strides already satisfy `format` (dims of
// size 1 may have any stride), to(format) keeps only one whose suggested format is `format`,
// so x.to(channels_last) of a [N, 1, H, W] x gives the exact channels_last strides.
Tensor Tensor::contiguous(MemoryFormat format) const {
  checked("contiguous");
  if (format == MemoryFormat::preserve || is_contiguous(format)) return *this;
  return clone(format);
}

Tensor Tensor::to(MemoryFormat format) const {
  checked("to");
  if (format == MemoryFormat::preserve || suggest_memory_format() == format) return *this;
  return clone(format);
}

Tensor Tensor::clone(MemoryFormat format) const {
  checked("clone");
  if (format == MemoryFormat::preserve) format = suggest_memory_format();
  Tensor out = ops::make_tensor(shape(), dtype(), device(), format);
  ops::copy_in_memory_order(out, *this);
  if (autograd::needs_grad(*this))
    autograd::record(Op::clone, out, {this},
                     [](const Tensor& g, autograd::GradList& gi) { gi[0] = g; });
  return out;
}

Tensor Tensor::to(DType target) const {
  checked("to");
  if (target == dtype()) return *this;
  Tensor out = ops::make_tensor(shape(), target, device(), suggest_memory_format());
  ops::copy_in_memory_order(out, *this);
  if (autograd::needs_grad(*this) && is_floating(target)) {
    const DType from = dtype();
    autograd::record(Op::to, out, {this},
                     [from](const Tensor& g, autograd::GradList& gi) { gi[0] = g.to(from); });
  }
  return out;
}

Tensor Tensor::to(Device target) const {
  checked("to");
  if (target == device()) return *this;
  detail::check_no_host_transfer(target.is_cpu() ? "to(cpu)" : "to(cuda)");
  // The bytes move as they lie: a channels_last tensor arrives channels_last.
  const MemoryFormat format = suggest_memory_format();
  Tensor src = contiguous(format);
  Tensor out = ops::make_tensor(shape(), dtype(), target, format);
  const size_t bytes = static_cast<size_t>(numel()) * element_size(dtype());
  if (bytes) {
    if (src.device().is_cpu()) {
      backend::runtime_for(target).memcpy_from_host(target.index, out.data_ptr(), src.data_ptr(),
                                                    bytes);
    } else if (target.is_cpu()) {
      backend::runtime_for(src.device())
          .memcpy_to_host(src.device().index, out.data_ptr(), src.data_ptr(), bytes);
    } else {
      Tensor host = src.to(Device::cpu());
      return host.to(target);
    }
  }
  if (autograd::needs_grad(*this)) {
    const Device from = device();
    autograd::record(Op::to, out, {this},
                     [from](const Tensor& g, autograd::GradList& gi) { gi[0] = g.to(from); });
  }
  return out;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  ops::check_defined("to_vector", *this, "tensor");
  if (!device().is_cpu()) detail::check_no_host_transfer("to_vector");
  NoGradGuard no_grad;
  Tensor host = to(Device::cpu());
  if (host.dtype() != dtype_of<T>()) host = host.to(dtype_of<T>());
  host = host.contiguous();
  std::vector<T> out(static_cast<size_t>(numel()));
  if constexpr (std::is_same_v<T, bool>) {
    const auto* p = static_cast<const uint8_t*>(host.data_ptr());
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i] != 0;
  } else {
    if (!out.empty()) std::memcpy(out.data(), host.data_ptr(), out.size() * sizeof(T));
  }
  return out;
}

template <typename T>
T Tensor::item() const {
  ops::check_defined("item", *this, "tensor");
  if (!device().is_cpu()) detail::check_no_host_transfer("item");
  EMBER_CHECK(numel() == 1, "item: the tensor has ", numel(), " elements (shape ",
              shape().to_string(), "; expected exactly one)");
  return to_vector<T>()[0];
}

#define EMBER_INSTANTIATE_READ(T)                       \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
EMBER_INSTANTIATE_READ(float)
EMBER_INSTANTIATE_READ(double)
EMBER_INSTANTIATE_READ(int32_t)
EMBER_INSTANTIATE_READ(int64_t)
EMBER_INSTANTIATE_READ(uint8_t)
EMBER_INSTANTIATE_READ(bool)
EMBER_INSTANTIATE_READ(Half)
EMBER_INSTANTIATE_READ(BFloat16)
#undef EMBER_INSTANTIATE_READ

// ---- printing ----

std::string Tensor::to_string() const {
  std::ostringstream out;
  out << *this;
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "Tensor(undefined)";
  if (!t.device().is_cpu()) detail::check_no_host_transfer("printing a tensor (operator<<)");
  constexpr int64_t kEdge = 3;  // values shown at each end of an abbreviated dim
  const bool integral = !is_floating(t.dtype());
  NoGradGuard no_grad;
  std::vector<double> v = t.to(DType::f64).to_vector<double>();
  const Shape& s = t.shape();
  std::ostringstream body;
  body << std::setprecision(6);
  // Recursive print with "..." for dims longer than 2*kEdge.
  std::function<void(int, int64_t)> rec = [&](int d, int64_t base) {
    if (d == s.size()) {
      if (integral)
        body << static_cast<int64_t>(v[base]);
      else
        body << v[base];
      return;
    }
    int64_t stride = 1;
    for (int i = d + 1; i < s.size(); ++i) stride *= s[i];
    body << "[";
    const bool cut = s[d] > 2 * kEdge;
    for (int64_t i = 0; i < s[d]; ++i) {
      if (cut && i == kEdge) {
        body << "...";
        i = s[d] - kEdge - 1;
        if (i + 1 < s[d]) body << ", ";
        continue;
      }
      rec(d + 1, base + i * stride);
      if (i + 1 < s[d]) body << ", ";
    }
    body << "]";
  };
  if (t.numel() > 0 || s.size() == 0)
    rec(0, 0);
  else
    body << "[]";
  out << "Tensor(shape=" << s.to_string() << ", dtype=" << dtype_name(t.dtype())
      << ", device=" << t.device().str();
  if (t.requires_grad()) out << ", requires_grad";
  return out << ", values=" << body.str() << ")";
}

// ---- in-place ----

Tensor& Tensor::copy_(const Tensor& src) {
  checked("copy_");
  ops::check_defined("copy_", src, "source");
  ops::check_inplace("copy_", *this);
  // The source must broadcast TO the target: a mutual broadcast ([2, 2] with [2, 1]) is not
  // enough, it would copy a slice of the source.
  EMBER_CHECK(src.dim() <= dim() && broadcast_shapes(src.shape(), shape(), "copy_") == shape(),
              "copy_: source shape ", src.shape().to_string(),
              " does not broadcast to the target shape ", shape().to_string(),
              " (expected each source dim equal to the target's or 1)");
  Tensor s = src;
  if (s.device() != device()) s = s.to(device());
  backend::View d = ops::view_of(*this), v = ops::broadcast_view(s, shape());
  ops::in_memory_order(ops::format_of(*this), {&d, &v});
  ops::backend_of(*this).copy(d, v);
  return *this;
}

Tensor& Tensor::assign_(const Tensor& src) {
  checked("assign_");
  ops::check_defined("assign_", src, "source");
  EMBER_CHECK(src.shape() == shape(), "assign_: shape mismatch (got ", src.shape().to_string(),
              ", expected ", shape().to_string(), ")");
  return copy_(src);
}

Tensor& Tensor::fill_(double value) {
  checked("fill_");
  ops::check_scalar_fits("fill_", value, dtype());
  ops::check_inplace("fill_", *this);
  backend::View v = ops::view_of(*this);
  ops::in_memory_order(ops::format_of(*this), {&v});
  ops::backend_of(*this).fill(v, value);
  return *this;
}

namespace {
// torch.can_cast for an in-place result: no float into an integer or bool tensor, no
// integer into a bool one.
bool can_cast_into(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  return !(from != DType::boolean && to == DType::boolean);
}

Tensor& binary_inplace(Tensor& self, const Tensor& other, Op op, const char* name);

// Note [In-place type promotion]
// self op= other with other of another dtype, as PyTorch: the op computes in
// result_type(self, other) (Note [Type promotion]), which must be castable to self's dtype
// (an f32 or i64 tensor cannot take an in-place float result into i64, nor div_'s true
// division); the result is then written back in self's dtype. When the result type is
// self's own, other is cast to it and the kernel runs in place; otherwise (an f32 target with
// an f64 tensor) the op runs out of place in the result type and is copied back, so the
// rounding is PyTorch's (once, at the end).
Tensor& promoted_inplace(Tensor& self, const Tensor& other, Op op, const char* name) {
  DType rt = result_type(self, other);
  if (op == Op::div && !is_floating(rt)) rt = DType::f32;  // true division, as div
  EMBER_CHECK(can_cast_into(rt, self.dtype()), name, ": the result type ", dtype_name(rt), " (of ",
              dtype_name(self.dtype()), " and ", dtype_name(other.dtype()),
              ") cannot be cast to the in-place target's dtype ", dtype_name(self.dtype()),
              " (expected a result of that dtype; use the out-of-place op, or convert the target "
              "with .to(DType) first)");
  if (rt == self.dtype()) {
    NoGradGuard no_grad;  // the cast of a temporary operand
    return binary_inplace(self, other.to(rt), op, name);
  }
  ops::check_same_device(name, self, other);
  ops::check_inplace(name, self);
  const Shape b = broadcast_shapes(self.shape(), other.shape(), name);
  EMBER_CHECK(b == self.shape(), name, ": shape ", other.shape().to_string(),
              " does not broadcast to the in-place target ", self.shape().to_string());
  NoGradGuard no_grad;
  Tensor wide = self.to(rt);
  binary_inplace(wide, other.to(rt), op, name);
  ops::backend_of(self).copy(ops::view_of(self), ops::view_of(wide));
  return self;
}

// out = self op other (other broadcast to self), written into self's buffer.
Tensor& binary_inplace(Tensor& self, const Tensor& other, Op op, const char* name) {
  ops::check_defined(name, self, "the in-place target");
  ops::check_defined(name, other, "other");
  if (other.dtype() != self.dtype() || (op == Op::div && !is_floating(self.dtype())))
    return promoted_inplace(self, other, op, name);
  const ops::OpScope op_scope(op, self);
  ops::check_supported(op, self, "the in-place target");
  ops::check_same_device(name, self, other);
  const Shape b = broadcast_shapes(self.shape(), other.shape(), name);
  EMBER_CHECK(b == self.shape(), name, ": shape ", other.shape().to_string(),
              " does not broadcast to the in-place target ", self.shape().to_string());
  ops::check_inplace(name, self);
  backend::View out = ops::view_of(self), in = ops::view_of(self),
                other_view = ops::broadcast_view(other, self.shape());
  ops::in_memory_order(ops::format_of(self), {&out, &in, &other_view});
  ops::backend_of(self).binary(backend::binary_kernel(op), out, in, other_view);
  return self;
}

bool is_integral_value(double v) { return std::nearbyint(v) == v; }

// self = self·s + t in place. Float tensors take the affine kernel; integer tensors keep
// their dtype with an integral scalar (the binary kernel), as PyTorch. A fractional scalar
// would make a float result that an integer tensor cannot hold: refused, as PyTorch does.
Tensor& affine_inplace(Tensor& self, double s, double t, Op op, const char* name) {
  const ops::OpScope op_scope(op, self);
  ops::check_supported(op, self, "the in-place target");
  ops::check_inplace(name, self);
  if (!is_floating(self.dtype())) {
    EMBER_CHECK(is_integral_value(s) && is_integral_value(t), name, ": the result with ",
                s != 1.0 ? s : t, " is a float, which the ", dtype_name(self.dtype()),
                " tensor cannot hold in place (expected an integral scalar, or convert with "
                ".to(DType::f32) first)");
    const TensorOptions o{.dtype = self.dtype(), .device = self.device()};
    return s != 1.0 ? binary_inplace(self, full(Shape{}, s, o), Op::mul, name)
                    : binary_inplace(self, full(Shape{}, t, o), Op::add, name);
  }
  backend::View v = ops::view_of(self), in = ops::view_of(self);
  ops::in_memory_order(ops::format_of(self), {&v, &in});
  ops::backend_of(self).unary(backend::UnaryOp::affine, v, in, s, t);
  return self;
}
}  // namespace

namespace {
// self += alpha · other.
Tensor& add_scaled(Tensor& self, const Tensor& other, double alpha, const char* name) {
  if (alpha == 1.0) return binary_inplace(self, other, Op::add, name);
  ops::check_defined(name, other, "other");
  ops::check_writable(name, self);  // before the guard below, which would hide requires_grad
  NoGradGuard g;
  return binary_inplace(self, other * alpha, Op::add, name);
}
}  // namespace

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  return add_scaled(*this, other, alpha, "add_");
}
Tensor& Tensor::sub_(const Tensor& other) { return add_scaled(*this, other, -1.0, "sub_"); }
Tensor& Tensor::mul_(const Tensor& other) { return binary_inplace(*this, other, Op::mul, "mul_"); }
Tensor& Tensor::div_(const Tensor& other) { return binary_inplace(*this, other, Op::div, "div_"); }

Tensor& Tensor::mul_(double value) { return affine_inplace(*this, value, 0.0, Op::mul, "mul_"); }
Tensor& Tensor::add_(double value) { return affine_inplace(*this, 1.0, value, Op::add, "add_"); }
Tensor& Tensor::clamp_(double lo, double hi) {
  const ops::OpScope op_scope(Op::clamp, *this);
  ops::check_supported(Op::clamp, *this, "the in-place target");
  EMBER_CHECK(!(lo > hi), "clamp_: lower bound ", lo, " is above upper bound ", hi);
  if (!is_floating(dtype())) {
    // Integer tensors (the clamp kernel is float-only): maximum and minimum in place with
    // integral bounds; a fractional bound would make a float result, refused as in mul_.
    EMBER_CHECK(is_integral_value(lo) && is_integral_value(hi), "clamp_: the result with ",
                is_integral_value(lo) ? hi : lo, " is a float, which the ", dtype_name(dtype()),
                " tensor cannot hold in place (expected integral bounds, or convert with "
                ".to(DType::f32) first)");
    const TensorOptions o{.dtype = dtype(), .device = device()};
    if (std::isfinite(lo)) binary_inplace(*this, full(Shape{}, lo, o), Op::maximum, "clamp_");
    if (std::isfinite(hi)) binary_inplace(*this, full(Shape{}, hi, o), Op::minimum, "clamp_");
    return *this;
  }
  ops::check_inplace("clamp_", *this);
  backend::View v = ops::view_of(*this);
  ops::backend_of(*this).unary(backend::UnaryOp::clamp, v, v, lo, hi);
  return *this;
}

// ---- method forms of common ops ----
Tensor Tensor::sum() const { return ember::sum(*this); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const {
  return ember::sum(*this, dims, keepdim);
}
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const {
  return ember::mean(*this, dims, keepdim);
}
Tensor Tensor::max() const { return ember::max(*this); }
Tensor Tensor::min() const { return ember::min(*this); }
Tensor Tensor::argmax(int64_t d, bool keepdim) const { return ember::argmax(*this, d, keepdim); }
Tensor Tensor::matmul(const Tensor& other) const { return ember::matmul(*this, other); }
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::relu() const { return ember::relu(*this); }
Tensor Tensor::sigmoid() const { return ember::sigmoid(*this); }
Tensor Tensor::tanh() const { return ember::tanh(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::pow(double e) const { return ember::pow(*this, e); }
Tensor Tensor::softmax(int64_t d) const { return ember::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return ember::log_softmax(*this, d); }

}  // namespace ember
