// ember/attention.hpp — scaled_dot_product_attention (fused attention), PyTorch semantics.
//
//   Tensor out = ember::scaled_dot_product_attention(q, k, v, {.is_causal = true});
//
// q [..., L, E], k [..., S, E], v [..., S, Ev] (leading dims broadcast) give [..., L, Ev]:
//   softmax(q·kᵀ·scale + mask) · v, with dropout on the attention weights.
// On a GPU, f16/bf16 inputs go through cuDNN's fused flash attention when it applies
// (docs/attention.md says when); everything else is composed from primitive ops.
#pragma once

#include <optional>
#include <string>

#include "ember/tensor.hpp"

namespace ember {

/// Options of scaled_dot_product_attention (torch.nn.functional.scaled_dot_product_attention's
/// keyword arguments).
struct SdpaOptions {
  /// Broadcastable to [..., L, S]. bool: true = may attend (PyTorch's SDPA convention, the
  /// opposite of MultiheadAttention's masks); float: added to the scores (-inf blocks).
  Tensor attn_mask{};
  /// Lower-triangular mask aligned top-left (query i sees keys j <= i). Not with attn_mask.
  bool is_causal = false;
  /// Dropout probability on the attention weights, in [0, 1]; applied whenever > 0 (as
  /// PyTorch's functional form: pass 0 in evaluation). Draws from ember's generator.
  double dropout_p = 0.0;
  /// Multiplies q·kᵀ; 1/√E when unset.
  std::optional<double> scale = std::nullopt;
};

/// softmax(q·kᵀ·scale + mask)·v over the last two dims. Differentiable in q, k, v (and a float
/// mask on the composed path). Example:
///   Tensor y = scaled_dot_product_attention(q, k, v);  // q [N, H, L, E] -> y [N, H, L, Ev]
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const SdpaOptions& options = {});

/// Options of attention_with_kv_cache.
struct KVCacheAttentionOptions {
  /// [B, L] (1 <= L <= S_max), bool or integer: 1 for a real key, 0 for padding (Hugging
  /// Face's attention_mask over the cache's positions; keys at L and after count as real). A
  /// query always attends to its own key, so a padded query is never left with none.
  /// Undefined: no padding.
  Tensor key_padding_mask{};
  /// Multiplies q·kᵀ; 1/√E when unset.
  std::optional<double> scale = std::nullopt;
  /// Rotary position embedding of the queries and the new keys, applied inside the call (flash-
  /// attn's rotary_cos / rotary_sin): cos and sin [B or 1, 1, T, E] in q's dtype, as
  /// rotary_embedding takes them for the T new positions (transformers' rotate_half pairs). The
  /// result, and what is written into k_cache, are those of passing rotary_embedding(q, cos,
  /// sin) and rotary_embedding(k, cos, sin) instead, bit for bit; on a GPU one kernel does all
  /// (16-bit head dims of 64 or 128; otherwise the two rotations run first). Both or neither.
  Tensor rotary_cos{}, rotary_sin{};
};

/// Attention of T new queries over a key/value cache that the call extends in place, in one
/// kernel (flash-attn's flash_attn_with_kvcache, in Hugging Face's [B, H, S, E] layout): the
/// new keys and values k, v [B, H_kv, T, E|Ev] are written into k_cache, v_cache
/// [B, H_kv, S_max, E|Ev] at positions cache_seqlens[b] .. cache_seqlens[b] + T - 1, and query i
/// of row b (q [B, H, T, E]) attends causally to keys 0 .. cache_seqlens[b] + i, skipping
/// those key_padding_mask marks as padding (but never its own). H a multiple of H_kv (grouped-query
/// attention). cache_seqlens (i64 or i32 [B], on q's device) is read on the device only, so a
/// captured decode step replays at a new position by writing it. Returns [B, H, T, Ev]. For
/// inference: no gradient. A row whose positions do not fit the cache is an ember::Error (on a GPU
/// at the next synchronisation, with nothing written). Example (one decode step):
///   Tensor y = attention_with_kv_cache(q, k_cache, v_cache, k, v, lengths);  // lengths += 1
Tensor attention_with_kv_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                               const Tensor& k, const Tensor& v, const Tensor& cache_seqlens,
                               const KVCacheAttentionOptions& options = {});

/// Which path computed a scaled_dot_product_attention call.
enum class SdpaBackend : uint8_t {
  none,     // no call yet on this thread
  unfused,  // composed from primitive ops (the CPU, other dtypes, masks cuDNN does not take)
  cudnn,    // cuDNN's fused flash attention
};

/// The path this thread's last scaled_dot_product_attention call took (tests use it so a
/// fused-path test cannot pass on the fallback).
SdpaBackend sdpa_last_backend();
/// Why the last call on this thread did not take the fused path ("" when it did, or before any
/// call): "dtype f32 (the fused path takes f16 and bf16)", "cuDNN not found: ...", ...
std::string sdpa_fallback_reason();
/// The state of cuDNN on `device` (default: the first GPU): "cuDNN 9.10.2 (/path/libcudnn.so.9)"
/// or why it is not available. Loads cuDNN on first call; never throws.
std::string sdpa_cudnn_status(int device = 0);

}  // namespace ember
