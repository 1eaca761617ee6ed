// src/cpu/kernels.hpp — the CPU backend's kernels, one declaration per Backend slot.
//
// Each function implements the contract written above its slot in src/backend/slots.def;
// src/cpu/backend_cpu.cpp puts them in the table. Nothing outside src/cpu (and its tests)
// should call these directly: go through backend::backend_for().
//
// In-place use: the output of an elementwise kernel (unary, binary, where, copy, dropout),
// of softmax and of softmax_backward may be the very same memory as an input (same data
// and strides); partial overlap is not supported. Reductions, gemm and the index kernels
// need an output that does not overlap their inputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/backend.hpp"
#include "backend/device_runtime.hpp"

namespace ember::cpu {

// Every Backend slot (src/backend/slots.def), defined in the file of its family: allocator,
// elementwise/unary/binary, reduce, linalg, softmax, index, random, conv, norm, optim, loss.
#include "backend/slot_declarations.inc"

/// The size class a request of `bytes` is served from (64-byte minimum, <= 12.5% waste above).
size_t size_class(size_t bytes);

}  // namespace ember::cpu
