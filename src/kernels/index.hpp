// src/kernels/index.hpp — the index family's shared arithmetic (src/cpu/index.cpp and
// src/cuda/index.cu): a tensor seen as [O, S, I] around the indexed dim.
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "ember/error.hpp"
#include "ember/shape.hpp"
#include "kernels/common.hpp"

namespace ember::kernels {

// Note [16-bit index_add]
// index_add into an f16/bf16 tensor (index_select's and embedding's backward among others)
// accumulates in f32 and rounds once per destination element: the source rows of one
// destination row are added, in index order, to its old value widened to f32, and the sum is
// stored once — the f32 index_add of the widened operands, rounded once (PyTorch's CUDA
// embedding backward accumulates in f32 likewise; its CPU index_add rounds after every add).
// Both backends group the sources by destination with a stable sort of their positions (on
// CUDA the sorted path of Note [Deterministic accumulation] in src/cuda/index.cu, taken for
// the 16-bit types whatever the deterministic setting), so the result is deterministic and the
// same on both (tests/test_half_kernels.cpp).

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

// What the index slots of both backends assume (internal asserts: the ops checked it) and
// the number of indices. `rows` is the operand whose `dim` the index counts: out for
// index_select, src for index_add.
inline int64_t check_index_rows(const char* slot, const backend::View& data,
                                const backend::View& rows, int dim, const backend::View& index) {
  EMBER_ASSERT(
      backend::is_contiguous(data) && backend::is_contiguous(rows) && backend::is_contiguous(index),
      slot, ": operands must be contiguous");
  EMBER_ASSERT(data.dtype == rows.dtype, slot, ": dtype mismatch");
  const int64_t count = index.numel();
  EMBER_ASSERT(rows.shape[dim] == count, slot, ": ", rows.shape[dim], " rows for ", count,
               " indices");
  return count;
}

// gather (out has index's shape) and scatter_add (src has it): the index is contiguous.
inline void check_elementwise_index(const char* slot, const backend::View& a,
                                    const backend::View& b, const backend::View& index) {
  EMBER_ASSERT(backend::is_contiguous(index), slot, ": index must be contiguous");
  EMBER_ASSERT(a.dtype == b.dtype, slot, ": dtype mismatch");
}

/// The target element after scatter op `op` brings `v` to it.
template <typename T>
EMBER_HD inline T scatter_combine(backend::ScatterOp op, T old, T v) {
  using backend::ScatterOp;
  switch (op) {
    case ScatterOp::assign: return v;
    case ScatterOp::sum: return old + v;
    case ScatterOp::prod: return old * v;
    case ScatterOp::max:
      return (old != old || v != v) ? (old != old ? old : v) : (v > old ? v : old);
    default: return (old != old || v != v) ? (old != old ? old : v) : (v < old ? v : old);
  }
}

}  // namespace ember::kernels
