// src/cuda/cusolver.hpp — the decompose slot's device route (src/cuda/cusolver.cpp) and the
// rule that picks it (src/cuda/lapack.cpp).
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "cuda/cusolver_loader.hpp"

namespace ember::cuda {

#if defined(EMBER_HAVE_CUSOLVER_HEADERS)
/// The decompose slot's contract (src/backend/backend.hpp) on the device, through cuSOLVER and
/// cuBLAS (Note [Row-major matrices through cuSOLVER]); operands contiguous on one device,
/// f32 or f64. Throws when cuSOLVER cannot be loaded (the caller checks cusolver_api first).
int64_t cusolver_decompose(backend::Decomposition op, const backend::View& a,
                           const backend::View& b, const backend::View& out0,
                           const backend::View& out1, const backend::View& out2);
#endif

}  // namespace ember::cuda
