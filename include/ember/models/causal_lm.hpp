// ember/models/causal_lm.hpp — what every decoder-only language model shares: the KV cache
// and the forward that takes one (nn::GPT2, nn::Llama; docs/language_models.md).
//
//   nn::GPT2 model(nn::GPT2Config::from_file("gpt2/config.json"));
//   nn::KVCache cache(model->max_positions());
//   Tensor logits = model->forward(prompt, {.cache = &cache});        // prefill: [B, T, V]
//   Tensor next = model->forward(last_token, {.cache = &cache});      // one position: [B, 1, V]
#pragma once

#include <concepts>
#include <cstdint>
#include <utility>
#include <vector>

#include "ember/nn/module.hpp"
#include "ember/tensor.hpp"

namespace ember::nn {

/// Keys and values of the positions a model has seen, one pair per layer, kept where the model
/// computes and in the dtype its keys come in (bf16 under bf16 autocast). Each layer's pair is
/// allocated once, [B, H_kv, capacity, head_dim], on its first append; a decode step writes
/// one position into it and attends to a view of the filled part: nothing grows or moves.
/// For inference: appending while gradients are recorded is refused (run under NoGradGuard).
class KVCache {
 public:
  /// Room for `capacity` positions (prompt and generated tokens together).
  explicit KVCache(int64_t capacity);

  /// Positions held: the position the next token takes.
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  /// The batch the cache was allocated for (0 before the first append).
  int64_t batch() const { return batch_; }
  /// Forgets every position (the buffers stay allocated for the next sequence).
  void reset() { length_ = 0; }

  /// Writes layer `layer`'s k and v ([B, H_kv, T, head_dim]) at positions [length, length + T)
  /// and returns views of positions [0, length + T). ember::Error when they do not fit, when
  /// B, H_kv, head_dim, dtype or device differ from the first append's, or when gradients
  /// are being recorded.
  std::pair<Tensor, Tensor> append(size_t layer, const Tensor& k, const Tensor& v);
  /// Layer `layer`'s whole buffers [B, H_kv, capacity, head_dim], allocated on the first call
  /// for k and v's batch, heads, dtype and device (the checks of append()); what
  /// attention_with_kv_cache writes into.
  std::pair<Tensor, Tensor> buffers(size_t layer, const Tensor& k, const Tensor& v);
  /// Every layer has appended T positions: they become part of length().
  void advance(int64_t T);

 private:
  int64_t capacity_ = 0, length_ = 0, batch_ = 0;
  std::vector<Tensor> k_, v_;
};

/// Options of a language model's forward (beyond the token ids [B, T], i64).
struct CausalLMOptions {
  /// Past keys and values: the ids are positions cache->length() onwards, and are added to
  /// the cache (which the call advances). nullptr: the ids are the whole sequence.
  KVCache* cache = nullptr;
  /// [B, past + T], 1 for a real token and 0 for padding (any integer or bool dtype), as
  /// Hugging Face's attention_mask: padded keys are never attended to, and positions count
  /// real tokens only, so a left-padded row computes what it computes alone. With
  /// cache_position: [B, L] over the cache's first L positions (L <= its capacity; positions
  /// after L count as real).
  Tensor attention_mask{};
  /// Where the ids go in the cache, read on the device (Hugging Face's cache_position, i64
  /// [T]: consecutive positions, the first one the number of positions held): a step that
  /// never reads the cache's length on the host, so a decode step can be captured into a
  /// CUDA graph and replayed with new values here (Note [A captured decode step]). The cache
  /// is written but its length() is not advanced. Needs `cache`.
  Tensor cache_position{};
  /// The ids' positions, i64 [B|1, T] on the device (Hugging Face's position_ids). Default:
  /// counted from the cache's length (or cache_position), over real tokens when there is an
  /// attention_mask; with cache_position and an attention_mask they must be given.
  Tensor position_ids{};
  /// Logits of the last position only ([B, 1, V]): what generation needs, without the
  /// [B, T, V] classifier over the whole prompt.
  bool last_only = false;
};

namespace lm_detail {
/// What the attention layers of one forward share (CausalLMImpl::forward makes it;
/// Note [Positions and masks of a language model's forward]).
struct AttentionContext {
  KVCache* cache = nullptr;
  /// The cache path (attention_with_kv_cache): the positions each row's cache holds, i64 [B]
  /// on the device; undefined: scaled_dot_product_attention over the keys given.
  Tensor seqlens;
  /// The cache path's key padding mask, bool [B, L]; or undefined.
  Tensor key_mask;
  /// The other path's mask, bool [B, 1, T, S] (true: may attend); undefined: causal.
  Tensor mask;
};
}  // namespace lm_detail

/// A decoder-only language model: token ids [B, T] (i64) -> logits [B, T, vocab].
class CausalLMImpl : public ModuleImpl {
 public:
  Tensor forward(const Tensor& ids) override { return forward(ids, CausalLMOptions{}); }
  /// The logits, checking the ids (i64, [B, T], within the vocabulary and the context) and
  /// the cache and mask first.
  Tensor forward(const Tensor& ids, const CausalLMOptions& options);

  virtual int64_t vocab_size() const = 0;
  /// The longest sequence the model takes (learned positions' rows; Llama's
  /// max_position_embeddings).
  virtual int64_t max_positions() const = 0;
  virtual int64_t num_layers() const = 0;

 protected:
  /// The model's computation, inputs already checked. `positions` [B|1, T] (i64) are the
  /// tokens' positions; `attention` is what causal_attention needs.
  virtual Tensor run(const Tensor& ids, const Tensor& positions,
                     const lm_detail::AttentionContext& attention, bool last_only) = 0;
  /// The dtype of the model's weights (bf16 weights compute under autocast to bf16).
  virtual DType weight_dtype() const = 0;
};

/// A handle to any language model (what models::from_pretrained returns):
/// model->forward(ids, {.cache = &cache}), model->vocab_size().
class CausalLM : public ModuleHolder<CausalLMImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  /// Any model's handle converts: models::generate(gpt2, ...) with an nn::GPT2.
  template <typename Impl>
  requires std::derived_from<Impl, CausalLMImpl> CausalLM(
      const ModuleHolder<Impl>& model)  // NOLINT
      : ModuleHolder(std::shared_ptr<CausalLMImpl>(model.ptr())) {}
};

namespace lm_detail {
/// Attention of q [B, H, T, hd] over k, v [B, H_kv, T, hd] (H a multiple of H_kv: grouped
/// query attention), with the cache and masks of CausalLMImpl::run. Returns [B, H, T, hd].
/// With rotary tables cos, sin ([B|1, 1, T, hd]), q and k are rotated first (rotary_embedding),
/// inside the attention kernel on the cache path.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, size_t layer,
                        const AttentionContext& attention, const Tensor& cos = Tensor(),
                        const Tensor& sin = Tensor());
}  // namespace lm_detail

}  // namespace ember::nn
