// src/ops/decompose.hpp — what the linear-algebra op files share (src/ops/decompose.cpp and
// src/ops/linalg_*.cpp): the matrix checks, the call of the decompose slot, and the batch-shape
// and matrix helpers their forwards and backwards are written with.
#pragma once

#include <initializer_list>

#include "ops/common.hpp"

namespace ember::ops::linalg {

/// Checks `a` for `op` (the catalogue's dtype, then a matrix or batch [..., m, n], square when
/// asked): "op: input shape [3] (expected a matrix or a batch of matrices [..., m, n])".
void check_matrices(Op op, const Tensor& a, bool square);

/// Runs the decompose slot on contiguous copies of a and b; a matrix the slot reports failed
/// is an error "op: the matrix at batch index i <failure> (input shape ...)". Empty inputs run
/// nothing (the caller gives empty outputs their values).
void run(Op op, backend::Decomposition kind, const Tensor& a, const Tensor& b, const Tensor& o0,
         const Tensor& o1, const Tensor& o2, const char* failure);
/// The same without the error: the batch index of the first failed matrix, or -1.
int64_t run_unchecked(backend::Decomposition kind, const Tensor& a, const Tensor& b,
                      const Tensor& o0, const Tensor& o1, const Tensor& o2);

/// The transpose of the last two dims (torch's .mT).
inline Tensor mT(const Tensor& x) { return x.transpose(-2, -1); }
/// `batch` followed by `last`.
Shape with_last(const Shape& batch, std::initializer_list<int64_t> last);
/// The batch dims of a matrix batch [..., m, n]: [...].
Shape batch_of(const Tensor& a);
/// The n × n identity in `like`'s dtype on its device.
Tensor eye(int64_t n, const Tensor& like);
/// The m × n matrix with ones on its main diagonal, zeros elsewhere.
Tensor eye(int64_t m, int64_t n, const Tensor& like);
/// The main diagonals of a matrix batch [..., n, n] as [..., n] (differentiable).
Tensor diagonal(const Tensor& a);
/// Vectors [..., n] placed on the diagonals of [..., n, n] (differentiable).
Tensor diag_embed(const Tensor& v);

}  // namespace ember::ops::linalg
