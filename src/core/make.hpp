// src/core/make.hpp — the only constructors of TensorImpl (ARCHITECTURE §1): a new tensor,
// a view of another's storage, and a tensor over storage made elsewhere (io: a mapped file);
// and the one way to fill a tensor with bytes from host memory. Internal to the library;
// everything above core builds tensors through these.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "ember/tensor.hpp"

namespace ember::core {

/// A new contiguous tensor from the current pool (Pass unless a PoolGuard says otherwise).
Tensor make_tensor(const Shape& shape, DType dtype, Device device);

/// A new tensor in memory format `format` (contiguous or preserve: row-major; channels_last
/// and channels_last_3d: channels innermost, Note [Memory formats] in src/core/tensor.cpp).
Tensor make_tensor(const Shape& shape, DType dtype, Device device, MemoryFormat format);

/// `format`'s strides for `shape` (channels_last: 4 dims, channels_last_3d: 5, else refused).
Shape format_strides(const Shape& shape, MemoryFormat format);

/// A channels_last format's dims from outermost to innermost in memory ({0, 2, 3, 1} and
/// {0, 2, 3, 4, 1}); empty for contiguous and preserve.
std::span<const int> memory_order(MemoryFormat format);

const char* memory_format_name(MemoryFormat format);

/// An alias of `base`'s storage with new geometry (no autograd).
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);

/// A contiguous tensor over `storage` (at offset 0), which must hold shape × dtype.
Tensor wrap_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype);

/// Writes `bytes` bytes from host memory into contiguous `dst` on its device (a plain copy
/// on the CPU, one host-to-device copy on a GPU, refused inside a captured step); bumps dst's
/// version.
void copy_from_host(const Tensor& dst, const void* src, size_t bytes);

}  // namespace ember::core
