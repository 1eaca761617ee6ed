// src/kernels/index.hpp — the index family's shared arithmetic (src/cpu/index.cpp and
// src/cuda/index.cu): a tensor seen as [O, S, I] around the indexed dim.
#pragma once

#include <cstdint>

#include "ember/shape.hpp"

namespace ember::kernels {

/// `shape` around `dim`: O = product of the dims before it, S = its size, I = product after.
struct IndexLayout {
  int64_t outer = 1, size = 1, inner = 1;
};

inline IndexLayout layout_of(const Shape& shape, int dim) {
  IndexLayout l;
  for (int d = 0; d < dim; ++d) l.outer *= shape[d];
  l.size = shape[dim];
  for (int d = dim + 1; d < shape.size(); ++d) l.inner *= shape[d];
  return l;
}

}  // namespace ember::kernels
