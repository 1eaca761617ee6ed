// src/models/causal_lm.cpp — the KV cache, and the checks, positions and masks every decoder-
// only model's forward shares (include/ember/models/causal_lm.hpp).
//
// Note [Positions and masks of a language model's forward]
// A forward sees ids [B, T] that follow `past` = cache->length() positions. Without an
// attention mask the positions are past .. past+T-1 for every row, and attention is causal:
// from the start (past = 0: sdpa's is_causal) or one query over everything before it (T = 1:
// no mask at all). A chunk after a past (past > 0, T > 1) needs the bottom-right causal mask
// j <= past + i, built here. With Hugging Face's attention_mask [B, past + T] (1 real, 0 pad)
// a row's positions count its real tokens (cumsum - 1, as transformers' generate does), and a
// query may attend to key j when j is causal for it and real — or j is the query itself, so a
// padded query never has an empty row (softmax would give NaN, and NaN·0 in the next layer's
// P·V would reach real rows through the padded keys' values). The mask is small ([B, T, S]
// bools) and built on the host.
//
// Note [Attention through the cache]
// With a cache, a short chunk (T <= kCachePathMaxT: every decode step) goes through
// attention_with_kv_cache: one kernel per layer writes the new keys and values into the cache
// and attends over it, reading each row's length on the device and grouped-query heads
// without repeating them. A long chunk (a prompt's prefill) is appended and goes through
// scaled_dot_product_attention, whose fused kernel (cuDNN's flash attention on a GPU) is the
// faster one there.
//
// Note [A captured decode step]
// A CUDA graph replays fixed kernels on fixed addresses, so a step that is captured must not
// depend on host values that change between steps: the cache's length decides the key views'
// shapes and the positions. With cache_position (and position_ids) the step takes them from
// device tensors: positions come from position_ids, the cache path reads its lengths from
// cache_position[0], and nothing reads the host's length() (which the call leaves as it is).
// models::generate captures such a step when GenerationOptions::capture is set: the step reads
// its ids, positions and cache_position from one device buffer and moves the positions on
// itself, and each token's ids are copied into the buffer on the device before the replay.
#include "ember/models/causal_lm.hpp"

#include <cmath>
#include <optional>
#include <string>

#include "ember/attention.hpp"
#include "ember/autocast.hpp"
#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/ops.hpp"

namespace ember::nn {

KVCache::KVCache(int64_t capacity) : capacity_(capacity) {
  EMBER_CHECK(capacity > 0, "KVCache: capacity ", capacity, " (expected at least one position)");
}

std::pair<Tensor, Tensor> KVCache::buffers(size_t layer, const Tensor& k, const Tensor& v) {
  EMBER_CHECK(!grad_mode_enabled(),
              "KVCache: append while gradients are recorded (the cache is for inference: run "
              "generation under NoGradGuard)");
  EMBER_CHECK(k.defined() && v.defined() && k.dim() == 4 && v.dim() == 4 &&
                  v.shape().to_string() == k.shape().to_string(),
              "KVCache: layer ", layer, " appends k ",
              k.defined() ? k.shape().to_string() : "undefined", " and v ",
              v.defined() ? v.shape().to_string() : "undefined",
              " (expected two [B, H_kv, T, head_dim] of one shape)");
  if (layer >= k_.size()) {
    k_.resize(layer + 1);
    v_.resize(layer + 1);
  }
  if (!k_[layer].defined()) {
    EMBER_CHECK(batch_ == 0 || batch_ == k.size(0), "KVCache: layer ", layer,
                " appends a batch of ", k.size(0), " to a cache holding a batch of ", batch_);
    const Shape shape{k.size(0), k.size(1), capacity_, k.size(3)};
    k_[layer] = zeros(shape, {.dtype = k.dtype(), .device = k.device()});
    v_[layer] = zeros(shape, {.dtype = v.dtype(), .device = v.device()});
    batch_ = k.size(0);
  }
  const Tensor& K = k_[layer];
  const Tensor& V = v_[layer];
  EMBER_CHECK(k.size(0) == K.size(0) && k.size(1) == K.size(1) && k.size(3) == K.size(3) &&
                  k.dtype() == K.dtype() && v.dtype() == V.dtype() && k.device() == K.device() &&
                  v.device() == K.device(),
              "KVCache: layer ", layer, " appends ", k.shape().to_string(), " ",
              dtype_name(k.dtype()), " on ", k.device().str(), " to a cache of [", K.size(0), ", ",
              K.size(1), ", *, ", K.size(3), "] ", dtype_name(K.dtype()), " on ", K.device().str(),
              " (reset() keeps the buffers; a new batch or model needs a new KVCache)");
  return {K, V};
}

std::pair<Tensor, Tensor> KVCache::append(size_t layer, const Tensor& k, const Tensor& v) {
  auto [K, V] = buffers(layer, k, v);
  const int64_t T = k.size(2);
  EMBER_CHECK(length_ + T <= capacity_, "KVCache: ", length_, " positions held and ", T,
              " more do not fit its capacity of ", capacity_,
              " (make the cache with room for the prompt and every new token)");
  const bool first = length_ == 0;
  K.narrow(2, length_, T).copy_(k);
  V.narrow(2, length_, T).copy_(v);
  // The first chunk's keys and values are k and v themselves: returned as they are, the
  // attention after them sees a layout that does not depend on the cache's capacity (cuDNN
  // builds a plan per layout: about 70 ms on an H100 for each new capacity, that is for every
  // generate() with another prompt length or max_new_tokens, were the cache's views passed).
  if (first) return {k, v};
  return {K.narrow(2, 0, length_ + T), V.narrow(2, 0, length_ + T)};
}

void KVCache::advance(int64_t T) {
  EMBER_CHECK(T >= 0 && length_ + T <= capacity_, "KVCache: advance by ", T, " from ", length_,
              " (capacity ", capacity_, ")");
  length_ += T;
}

namespace {

// Note [Attention through the cache]: the longest chunk that takes the cache path.
constexpr int64_t kCachePathMaxT = 16;

void check_device_of(const std::string& op, const char* what, const Tensor& t, const Tensor& ids) {
  EMBER_CHECK(t.device() == ids.device(), op, ": ", what, " on ", t.device().str(), " with ids on ",
              ids.device().str(), " (expected one device)");
}

// [B, H_kv, S, hd] -> [B, H_kv·group, S, hd]: each key head serves `group` query heads.
Tensor repeat_heads(const Tensor& x, int64_t group) {
  if (group == 1) return x;
  const Shape s = x.shape();
  return x.unsqueeze(2)
      .expand({s[0], s[1], group, s[2], s[3]})
      .reshape({s[0], s[1] * group, s[2], s[3]});
}

}  // namespace

namespace lm_detail {

Tensor causal_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v, size_t layer,
                        const AttentionContext& a, const Tensor& cos, const Tensor& sin) {
  if (a.seqlens.defined()) {  // Note [Attention through the cache]
    auto [K, V] = a.cache->buffers(layer, k_in, v);
    return attention_with_kv_cache(
        q_in, K, V, k_in, v, a.seqlens,
        {.key_padding_mask = a.key_mask, .rotary_cos = cos, .rotary_sin = sin});
  }
  const Tensor q = cos.defined() ? rotary_embedding(q_in, cos, sin) : q_in;
  const Tensor k = cos.defined() ? rotary_embedding(k_in, cos, sin) : k_in;
  Tensor K = k, V = v;
  if (a.cache) std::tie(K, V) = a.cache->append(layer, k, v);
  EMBER_CHECK(q.size(1) % K.size(1) == 0, "attention: ", q.size(1), " query heads over ", K.size(1),
              " key heads (expected a multiple)");
  const int64_t group = q.size(1) / K.size(1);
  K = repeat_heads(K, group);
  V = repeat_heads(V, group);
  if (a.mask.defined()) return scaled_dot_product_attention(q, K, V, {.attn_mask = a.mask});
  // Note [Positions and masks of a language model's forward]: no mask means from the start.
  return scaled_dot_product_attention(q, K, V, {.is_causal = q.size(2) > 1});
}

}  // namespace lm_detail

Tensor CausalLMImpl::forward(const Tensor& ids, const CausalLMOptions& options) {
  const std::string op = type_name() + ".forward";
  EMBER_CHECK(ids.defined(), op, ": undefined ids (expected token ids [B, T], i64)");
  EMBER_CHECK(ids.dim() == 2 && ids.dtype() == DType::i64 && ids.size(0) > 0 && ids.size(1) > 0, op,
              ": ids ", ids.shape().to_string(), " ", dtype_name(ids.dtype()),
              " (expected token ids [B, T], i64, B and T at least 1)");
  const int64_t B = ids.size(0), T = ids.size(1);
  KVCache* cache = options.cache;
  const bool on_device = options.cache_position.defined();  // Note [A captured decode step]
  const int64_t past = cache && !on_device ? cache->length() : 0;
  EMBER_CHECK(past + T <= max_positions(), op, ": ", past, " past and ", T,
              " new positions exceed the model's context of ", max_positions(), " positions");
  if (cache) {
    EMBER_CHECK(cache->batch() == 0 || cache->batch() == B, op, ": a batch of ", B,
                " with a KVCache holding a batch of ", cache->batch());
    EMBER_CHECK(on_device || past + T <= cache->capacity(), "KVCache: ", past,
                " positions held and ", T, " more do not fit its capacity of ", cache->capacity(),
                " (make the cache with room for the prompt and every new token)");
  }
  if (ids.device().is_cpu()) {
    for (int64_t id : ids.contiguous().to_vector<int64_t>())
      EMBER_CHECK(id >= 0 && id < vocab_size(), op, ": token id ", id,
                  " is outside the vocabulary [0, ", vocab_size(), ")");
  }
  const TensorOptions on_ids{.dtype = DType::i64, .device = ids.device()};
  const Tensor& am = options.attention_mask;
  if (am.defined()) {
    EMBER_CHECK(!is_floating(am.dtype()), op, ": attention_mask of dtype ", dtype_name(am.dtype()),
                " (expected 1/0 in an integer or bool tensor)");
    check_device_of(op, "attention_mask", am, ids);
  }
  if (options.position_ids.defined()) {
    const Tensor& p = options.position_ids;
    EMBER_CHECK(p.dim() == 2 && (p.size(0) == B || p.size(0) == 1) && p.size(1) == T &&
                    p.dtype() == DType::i64,
                op, ": position_ids ", p.shape().to_string(), " ", dtype_name(p.dtype()),
                " (expected i64 [", B, " or 1, ", T, "])");
    check_device_of(op, "position_ids", p, ids);
  }
  lm_detail::AttentionContext attention{.cache = cache};
  Tensor positions = options.position_ids;
  if (on_device) {
    const Tensor& cp = options.cache_position;
    EMBER_CHECK(cache, op, ": cache_position without a cache (expected CausalLMOptions::cache)");
    EMBER_CHECK(cp.dim() == 1 && cp.size(0) == T && cp.dtype() == DType::i64, op,
                ": cache_position ", cp.shape().to_string(), " ", dtype_name(cp.dtype()),
                " (expected i64 [", T, "]: the cache positions of the ", T, " new tokens)");
    check_device_of(op, "cache_position", cp, ids);
    EMBER_CHECK(T <= kCachePathMaxT, op, ": ", T, " tokens with cache_position (expected at most ",
                kCachePathMaxT, " per step; prefill a prompt without it)");
    if (am.defined()) {
      EMBER_CHECK(am.dim() == 2 && am.size(0) == B && am.size(1) <= cache->capacity(), op,
                  ": attention_mask ", am.shape().to_string(), " with cache_position (expected [",
                  B, ", L], L at most the cache's ", cache->capacity(), " positions)");
      EMBER_CHECK(positions.defined(), op,
                  ": attention_mask with cache_position but no position_ids (expected the "
                  "positions of the new tokens: they count real tokens only)");
      attention.key_mask = am;
    }
    if (!positions.defined()) positions = cp.reshape({1, T});
    attention.seqlens = cp.narrow(0, 0, 1).expand({B}).contiguous();  // once, not per layer
  } else {
    // Note [Positions and masks of a language model's forward].
    if (am.defined()) {
      EMBER_CHECK(am.dim() == 2 && am.size(0) == B && am.size(1) == past + T, op,
                  ": attention_mask ", am.shape().to_string(), " (expected [", B, ", ", past + T,
                  "]: one entry per past and new position of each row)");
    }
    const bool cache_path = cache && T <= kCachePathMaxT;  // Note [Attention through the cache]
    if (cache_path && am.defined()) attention.key_mask = am;
    if (am.defined() && (!positions.defined() || !cache_path)) {
      const std::vector<int64_t> m = am.to(DType::i64).contiguous().to_vector<int64_t>();
      const int64_t S = past + T;
      std::vector<int64_t> pos(static_cast<size_t>(B * T));
      std::vector<uint8_t> allow(static_cast<size_t>(B * T * S));
      for (int64_t b = 0; b < B; ++b) {
        int64_t seen = 0;
        for (int64_t j = 0; j < S; ++j) {
          seen += m[static_cast<size_t>(b * S + j)] != 0;
          if (j >= past) pos[static_cast<size_t>(b * T + j - past)] = seen > 0 ? seen - 1 : 0;
        }
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < S; ++j)
            allow[static_cast<size_t>((b * T + i) * S + j)] =
                (j <= past + i && m[static_cast<size_t>(b * S + j)] != 0) || j == past + i;
      }
      if (!positions.defined()) positions = from_vector(pos, {B, T}, {.device = ids.device()});
      if (!cache_path)
        attention.mask =
            from_vector(allow, {B, 1, T, S}, {.device = ids.device()}).to(DType::boolean);
    } else if (!positions.defined()) {
      positions = arange(static_cast<double>(past), static_cast<double>(past + T), 1.0, on_ids)
                      .reshape({1, T});
      // The cache's length is the first of these positions: a view of it (no launch at B = 1).
      if (cache_path)
        attention.seqlens = positions.narrow(1, 0, 1).reshape({1}).expand({B}).contiguous();
    }
    if (cache_path && !attention.seqlens.defined())
      attention.seqlens = full({B}, static_cast<double>(past), on_ids);
    if (!cache_path && past > 0 && !am.defined()) {  // a chunk after a past: bottom-right causal
      std::vector<uint8_t> allow(static_cast<size_t>(T * (past + T)));
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < past + T; ++j)
          allow[static_cast<size_t>(i * (past + T) + j)] = j <= past + i;
      attention.mask =
          from_vector(allow, {1, 1, T, past + T}, {.device = ids.device()}).to(DType::boolean);
    }
  }
  // A model with bf16 (f16) weights computes as under autocast to that dtype: its GEMMs and
  // attention in it, its norms and softmaxes in f32 (the precision they have no kernels below).
  std::optional<AutocastGuard> half;
  if (const DType w = weight_dtype(); w == DType::bf16 || w == DType::f16) half.emplace(w);
  Tensor logits = run(ids, positions, attention, options.last_only);
  if (cache && !on_device) cache->advance(T);
  return logits;
}

}  // namespace ember::nn
