// src/core/make.hpp — the only constructors of TensorImpl (ARCHITECTURE §1): a new tensor,
// a view of another's storage, and a tensor over storage made elsewhere (io: a mapped file).
// Internal to the library; everything above core builds tensors through these.
#pragma once

#include <memory>

#include "ember/tensor.hpp"

namespace ember::core {

/// A new contiguous tensor from the current pool (Pass unless a PoolGuard says otherwise).
Tensor make_tensor(const Shape& shape, DType dtype, Device device);

/// An alias of `base`'s storage with new geometry (no autograd).
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);

/// A contiguous tensor over `storage` (at offset 0), which must hold shape × dtype.
Tensor wrap_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype);

}  // namespace ember::core
