// src/core/tensor.cpp — the Tensor handle's metadata, and the only constructors of
// TensorImpl (src/core/make.hpp). Conversions, copies, in-place writes and printing are ops
// (src/ops/tensor.cpp); the autograd members are in src/autograd/tensor.cpp.
#include "ember/tensor.hpp"

#include <cstdint>

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
