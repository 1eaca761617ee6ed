// src/cpu/softmax_rows.hpp — softmax.cpp's vectorised row reductions, for kernels outside the
// softmax family that need the same stable log-sum-exp (cross-entropy in loss.cpp).
//
// Both read a contiguous row x[0, n): the maximum (NaN wins), and Σ exp(x - shift) summed in
// f64 lanes in a fixed order (deterministic), as softmax and log_softmax compute them.
#pragma once

#include <cstdint>

namespace ember::cpu {

/// The largest element of x[0, n) (-inf when n = 0; NaN when any is NaN).
///   const float m = softmax_row_max(row, classes);
float softmax_row_max(const float* x, int64_t n);
double softmax_row_max(const double* x, int64_t n);

/// Σ exp(x[i] - shift) over x[0, n), accumulated in f64.
///   const double s = softmax_row_exp_sum(row, classes, m);
double softmax_row_exp_sum(const float* x, int64_t n, float shift);
double softmax_row_exp_sum(const double* x, int64_t n, double shift);

}  // namespace ember::cpu
