// src/backend/attention.hpp — the operands of the fused attention slots (sdpa_forward,
// sdpa_backward in slots.def): cuDNN's flash attention on CUDA; the CPU has no fused kernel.
//
// Shape letters: B batch, H heads, L query length, S key length, E head dim of q and k, Ev of v.
// q, k, v, o and the gradients are [B, H, L|S, E|Ev] with any strides whose last one is 1;
// stats is contiguous f32 [B, H, L, 1], the log-sum-exp of each row of scaled scores.
//
// KvCacheAttentionArgs are attention_with_kv_cache's (kv_cache_attention in slots.def; both
// backends, math in src/kernels/attention.hpp): T queries per row over a key/value cache that
// the call extends in place.
#pragma once

#include <cstdint>

#include "ember/dtype.hpp"

namespace ember::backend {

struct SdpaArgs {
  DType dtype = DType::bf16;  // of q, k, v, o and every gradient (f16 or bf16)
  int device = 0;
  int64_t batch = 0, heads = 0, len_q = 0, len_kv = 0, head_dim = 0, head_dim_v = 0;
  // Strides in elements of the [B, H, L|S, E] views (the last stride is 1).
  int64_t q_strides[4] = {}, k_strides[4] = {}, v_strides[4] = {}, o_strides[4] = {};
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;      // forward: written; backward: read (the forward's output)
  void* stats = nullptr;  // forward: written; backward: read
  double scale = 1.0;
  bool causal = false;  // top-left aligned lower triangle
  // Key padding: row b attends to its first seq_len_kv[b] keys. Device i32 [B] each (seq_len_q
  // is L everywhere); null when there is no padding.
  const int32_t* seq_len_q = nullptr;
  const int32_t* seq_len_kv = nullptr;
  // Additive mask (0 or -inf for a bool mask), added to the scaled scores: the dtype of q,
  // shape bias_dims (each 1 or B, H, L; the last S), strides in elements; null: none.
  const void* bias = nullptr;
  int64_t bias_dims[4] = {}, bias_strides[4] = {};
  double dropout_p = 0.0;  // on the attention weights; 0 = none
  // Dropout only: device i64 [4] {seed, 0, offset, 0} that cuDNN's generator reads. The
  // forward writes it on the device from philox_seed/philox_offset (inside a captured step
  // from the replay's generator state, so each replay draws anew); the backward reads it.
  int64_t* rng_state = nullptr;
  uint64_t philox_seed = 0, philox_offset = 0;
  bool need_backward = false;  // forward: also build the backward plan now
  // backward only: grad_o with o's strides, read; grad_q, grad_k, grad_v with the strides
  // below ([B, H, L|S, E|Ev] views; set in the forward too: its backward plan uses them),
  // written
  int64_t grad_q_strides[4] = {}, grad_k_strides[4] = {}, grad_v_strides[4] = {};
  const void* grad_o = nullptr;
  void* grad_q = nullptr;
  void* grad_k = nullptr;
  void* grad_v = nullptr;
};

/// attention_with_kv_cache's operands. q [B, H, T, E], k/v [B, H_kv, T, E|Ev] (the new keys and
/// values), k_cache/v_cache [B, H_kv, S_max, E|Ev] (written at rows seqlens[b] .. + T - 1),
/// out [B, H, T, Ev] contiguous: any strides for the others, all of one float dtype. seqlens is
/// i64 [B] contiguous; key_mask is bool [B, key_mask_len] contiguous (key_mask_len <= S_max; keys
/// at or after it are real) or null (no padding).
struct KvCacheAttentionArgs {
  DType dtype = DType::f32;
  int device = 0;
  int64_t batch = 0, heads = 0, kv_heads = 0, len_q = 0, capacity = 0, head_dim = 0, head_dim_v = 0;
  int64_t q_strides[4] = {}, k_strides[4] = {}, v_strides[4] = {}, k_cache_strides[4] = {},
          v_cache_strides[4] = {};
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  void* out = nullptr;
  const int64_t* seqlens = nullptr;
  const bool* key_mask = nullptr;
  int64_t key_mask_len = 0;
  double scale = 1.0;
  /// Rotary tables [B|1, 1, T, E] (rows contiguous; rotary_strides: their batch and position
  /// strides) to apply to q and k in the kernel, or null (kv_cache_rotary_fits says when a
  /// backend takes them; otherwise the op rotates q and k first).
  const void* rotary_cos = nullptr;
  const void* rotary_sin = nullptr;
  int64_t rotary_strides[2] = {};
};

}  // namespace ember::backend
