// src/cpu/gemm_onednn.hpp — the CPU's f16/bf16 GEMMs through oneDNN's matmul primitive
// (gemm_onednn.cpp), tried by the gemm slot (linalg.cpp) before its widening path.
#pragma once

#include <string>

#include "cpu/kernels.hpp"

namespace ember::cpu {

/// C = act(alpha·op(A)·op(B) + beta·C + bias) for f16/bf16 A and B (C in their dtype, or f32
/// with c_f32), batched, through oneDNN with f32 accumulation. Returns false, having written
/// nothing, when oneDNN is absent, switched off, or declines these arguments; the caller then
/// computes the product itself. Only the product, bias and activation: the bias gradient,
/// ReLU masks and GELU's pre-activation stay the caller's.
///   if (!gemm_onednn(args)) gemm_wide<BFloat16>(args);
bool gemm_onednn(const GemmArgs& args);

/// Switches the oneDNN path on or off for the whole process (on by default); tests compare
/// the two paths. Returns the previous setting.
///   const bool was = set_gemm_onednn_enabled(false);
bool set_gemm_onednn_enabled(bool on);

/// How the calling thread's last 16-bit GEMM ran: "oneDNN <implementation>" (for example
/// "oneDNN brg:avx512_core_amx_bf16"), or why it did not ("oneDNN not found (...)",
/// "switched off", "oneDNN declined: ...").
///   gemm(args); std::string how = gemm_onednn_last();
std::string gemm_onednn_last();

}  // namespace ember::cpu
