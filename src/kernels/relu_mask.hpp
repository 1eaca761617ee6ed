// src/kernels/relu_mask.hpp — the ReLU bit mask of a GEMM's output (Note [ReLU masks] in
// src/backend/backend.hpp): how the CPU backend and the CUDA fallbacks write and read it.
// cuBLASLt's RELU_AUX / DRELU epilogues use the same layout.
#pragma once

#include "kernels/common.hpp"

namespace ember::kernels {

/// Byte `byte` of row `row` of the mask of C (row-major, leading dimension ldc, n columns):
/// bit b is C[row, 8·byte + b] > 0; columns at or past n give 0 bits.
template <typename T>
EMBER_HD uint8_t relu_mask_byte(const T* c, int64_t ldc, int64_t n, int64_t row, int64_t byte) {
  const T* r = c + row * ldc;
  unsigned bits = 0;
  for (int b = 0; b < 8; ++b) {
    const int64_t j = byte * 8 + b;
    if (j < n && r[j] > T(0)) bits |= 1u << b;
  }
  return static_cast<uint8_t>(bits);
}

/// Whether ReLU let C[row, col] through: its bit in a mask with `ld` bits per row.
EMBER_HD inline bool relu_mask_test(const uint8_t* mask, int64_t ld, int64_t row, int64_t col) {
  const int64_t bit = row * ld + col;
  return ((mask[bit >> 3] >> (bit & 7)) & 1u) != 0;
}

}  // namespace ember::kernels
