// src/cpu/gemm_onednn.hpp — the CPU's GEMMs through oneDNN's matmul primitive
// (gemm_onednn.cpp), tried by the gemm slot (linalg.cpp): f16/bf16 before its widening path,
// f32 instead of OpenBLAS where Note [f32 GEMMs: OpenBLAS or oneDNN] measured it faster.
#pragma once

#include <string>

#include "cpu/kernels.hpp"

namespace ember::cpu {

/// C = act(alpha·op(A)·op(B) + beta·C + bias) for f32, f16 or bf16 A and B (C in their dtype, or
/// f32 with c_f32 for 16-bit A and B), batched, through oneDNN with f32 accumulation. Returns
/// false, having written nothing, when oneDNN is absent, switched off, or declines these arguments;
/// the caller then computes the product itself. Only the product, bias and activation: the bias
/// gradient, ReLU masks and GELU's pre-activation stay the caller's.
///   if (!gemm_onednn(args)) gemm_wide<BFloat16>(args);
bool gemm_onednn(const GemmArgs& args);

/// Whether an f32 product of these sizes is faster through oneDNN than through OpenBLAS at
/// ember's thread count (Note [f32 GEMMs: OpenBLAS or oneDNN]).
bool f32_gemm_prefers_onednn(const GemmArgs& args);

/// Switches the oneDNN path on or off for the whole process (on by default); tests compare
/// the two paths. Returns the previous setting.
///   const bool was = set_gemm_onednn_enabled(false);
bool set_gemm_onednn_enabled(bool on);

/// How the calling thread's last GEMM offered to oneDNN ran: "oneDNN <implementation>" (for example
/// "oneDNN brg:avx512_core_amx_bf16"), or why it did not ("oneDNN not found (...)",
/// "switched off", "oneDNN declined: ...").
///   gemm(args); std::string how = gemm_onednn_last();
std::string gemm_onednn_last();

}  // namespace ember::cpu
