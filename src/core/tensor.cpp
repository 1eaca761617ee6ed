// src/core/tensor.cpp — the Tensor handle's metadata, and the only constructors of
// TensorImpl (src/core/make.hpp). Conversions, copies, in-place writes and printing are ops
// (src/ops/tensor.cpp); the autograd members are in src/autograd/tensor.cpp.
#include "ember/tensor.hpp"

#include <cstdint>
#include <span>

#include "core/checks.hpp"
#include "core/make.hpp"

namespace ember {

void Tensor::throw_undefined(const char* member) {
  detail::throw_error(detail::concat(
      "Tensor::", member,
      ": the tensor handle is empty (an undefined Tensor: default-constructed or moved-from; "
      "expected a tensor made by a factory or an op)"));
}

int64_t Tensor::size(int64_t d) const {
  const TensorImpl& impl = checked("size");
  return impl.shape[wrap_dim(d, impl.shape.size(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  const TensorImpl& impl = checked("stride");
  return impl.strides[wrap_dim(d, impl.shape.size(), "stride")];
}

bool Tensor::is_contiguous() const {
  checked("is_contiguous");
  if (impl_->shape.numel() == 0) return true;  // empty: any strides (as PyTorch)
  int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    const int64_t s = impl_->shape[i];
    if (s == 1) continue;
    if (impl_->strides[i] != expected) return false;
    expected *= s;
  }
  return true;
}

namespace core {

// Note [Memory formats]
// channels_last is a stride pattern, not a new shape: a [N, C, H, W] tensor whose channels are
// innermost (NHWC in memory). Its dims from innermost to outermost are C, W, H, N (3-d: C, W,
// H, D, N); memory_order() gives them outermost first. Ops that know the format (the library
// convolutions, BatchNorm, the 2-d pools) read and write it directly; elementwise ops give
// their output the input's format and walk every operand in memory order, so their kernels
// see contiguous runs (ops::in_memory_order). Everything else reads any strides correctly
// and returns contiguous tensors. Dims of size 1 may have any stride in both formats, so a
// tensor can be both (C = 1, or H = W = 1); suggest_memory_format() then says channels_last
// only for the exact strides make_tensor(..., channels_last) gives, so a [N, 1, H, W] input
// made channels_last stays so.
std::span<const int> memory_order(MemoryFormat format) {
  static constexpr int k2d[] = {0, 2, 3, 1};
  static constexpr int k3d[] = {0, 2, 3, 4, 1};
  if (format == MemoryFormat::channels_last) return k2d;
  if (format == MemoryFormat::channels_last_3d) return k3d;
  return {};
}

Shape format_strides(const Shape& shape, MemoryFormat format) {
  const std::span<const int> order = memory_order(format);
  if (order.empty()) return contiguous_strides(shape);
  EMBER_CHECK(shape.size() == static_cast<int>(order.size()), "memory format ",
              memory_format_name(format), ": expected a tensor of ", order.size(),
              " dims (got shape ", shape.to_string(), ")");
  Shape st = Shape::filled(shape.size(), 1);
  int64_t acc = 1;
  for (int i = static_cast<int>(order.size()) - 1; i >= 0; --i) {
    st[order[i]] = acc;
    acc *= shape[order[i]] > 0 ? shape[order[i]] : 1;
  }
  return st;
}

const char* memory_format_name(MemoryFormat format) {
  switch (format) {
    case MemoryFormat::contiguous: return "contiguous";
    case MemoryFormat::preserve: return "preserve";
    case MemoryFormat::channels_last: return "channels_last";
    case MemoryFormat::channels_last_3d: return "channels_last_3d";
  }
  return "?";
}

Tensor make_tensor(const Shape& shape, DType dtype, Device device, MemoryFormat format) {
  Tensor t = make_tensor(shape, dtype, device);
  if (format == MemoryFormat::channels_last || format == MemoryFormat::channels_last_3d)
    detail::TensorAccess::impl(t)->strides = format_strides(shape, format);
  return t;
}

}  // namespace core

bool Tensor::is_contiguous(MemoryFormat format) const {
  const TensorImpl& impl = checked("is_contiguous");
  EMBER_CHECK(format != MemoryFormat::preserve,
              "is_contiguous: MemoryFormat::preserve names no layout (expected contiguous, "
              "channels_last or channels_last_3d)");
  if (format == MemoryFormat::contiguous) return is_contiguous();
  const std::span<const int> order = core::memory_order(format);
  if (impl.shape.size() != static_cast<int>(order.size())) return false;
  if (impl.shape.numel() == 0) return true;
  int64_t expected = 1;
  for (int i = static_cast<int>(order.size()) - 1; i >= 0; --i) {
    const int64_t s = impl.shape[order[i]];
    if (s == 1) continue;
    if (impl.strides[order[i]] != expected) return false;
    expected *= s;
  }
  return true;
}

MemoryFormat Tensor::suggest_memory_format() const {
  const TensorImpl& impl = checked("suggest_memory_format");
  const int rank = impl.shape.size();
  if (rank != 4 && rank != 5) return MemoryFormat::contiguous;
  const MemoryFormat last =
      rank == 4 ? MemoryFormat::channels_last : MemoryFormat::channels_last_3d;
  if (impl.strides == core::format_strides(impl.shape, last) &&
      impl.strides != contiguous_strides(impl.shape))
    return last;
  if (is_contiguous()) return MemoryFormat::contiguous;
  return is_contiguous(last) ? last : MemoryFormat::contiguous;
}

void Tensor::set_data_(const Tensor& src) {
  TensorImpl& impl = checked("set_data_");
  EMBER_CHECK(src.defined(), "set_data_: the source is an undefined tensor (expected a tensor)");
  EMBER_CHECK(src.shape() == impl.shape, "set_data_: shape mismatch (got ", src.shape().to_string(),
              ", expected ", impl.shape.to_string(), ")");
  impl.storage = src.storage();
  impl.offset = src.offset();
  impl.strides = src.strides();
  impl.dtype = src.dtype();
}

namespace core {

void check_defined(const char* op, const Tensor& t, const char* what) {
  EMBER_CHECK(t.defined(), op, ": ", what, " is an undefined tensor (expected a tensor)");
}

Tensor make_tensor(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    EMBER_CHECK(d >= 0, "empty: negative dimension in shape ", shape.to_string());
  // A shape whose element or byte count overflows would wrap to a small allocation.
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape) overflow |= __builtin_mul_overflow(n, d, &n);
  int64_t signed_bytes = 0;
  overflow |= __builtin_mul_overflow(n, static_cast<int64_t>(element_size(dtype)), &signed_bytes);
  EMBER_CHECK(!overflow, "empty: shape ", shape.to_string(), " of ", dtype_name(dtype),
              " has more bytes than 64 bits count (got an overflowing size, expected at most ",
              INT64_MAX, " bytes)");
  auto impl = std::make_shared<TensorImpl>();
  const auto bytes = static_cast<size_t>(signed_bytes);
  impl->storage = std::make_shared<Storage>(bytes, device, current_pool());
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return detail::TensorAccess::wrap(std::move(impl));
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  return detail::TensorAccess::wrap(std::move(impl));
}

Tensor wrap_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype) {
  EMBER_ASSERT(
      storage && storage->bytes() >= static_cast<size_t>(shape.numel()) * element_size(dtype),
      "wrap_storage: the storage is smaller than ", shape.to_string());
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return detail::TensorAccess::wrap(std::move(impl));
}

}  // namespace core

}  // namespace ember
