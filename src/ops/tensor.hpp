// src/ops/tensor.hpp — ops on whole tensors that the layers above ops use internally (io),
// declared without the backend table.
#pragma once

#include <cstddef>

#include "ember/tensor.hpp"

namespace ember::ops {

/// Writes `bytes` bytes from host memory into contiguous `dst` on its device (a plain copy
/// on the CPU, one host-to-device copy on a GPU); bumps dst's version.
void copy_from_host(const Tensor& dst, const void* src, size_t bytes);

}  // namespace ember::ops
