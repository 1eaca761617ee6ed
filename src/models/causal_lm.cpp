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
// Note [A decode step's attention]
// A decode step is one query per row over every cached key: a [B, H, 1, S] score row. cuDNN's
// fused attention keys its execution plans on the shapes, so a key length that grows by one
// each token builds a new plan each token; the composed form (q·Kᵀ·scale, softmax, ·V) has no
// plan to build and, for one query, reads the cache once as the fused kernel would.
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

std::pair<Tensor, Tensor> KVCache::append(size_t layer, const Tensor& k, const Tensor& v) {
  EMBER_CHECK(!grad_mode_enabled(),
              "KVCache: append while gradients are recorded (the cache is for inference: run "
              "generation under NoGradGuard)");
  EMBER_CHECK(k.defined() && v.defined() && k.dim() == 4 && v.shape() == k.shape(),
              "KVCache: layer ", layer, " appends k ",
              k.defined() ? k.shape().to_string() : "undefined", " and v ",
              v.defined() ? v.shape().to_string() : "undefined",
              " (expected two [B, H_kv, T, head_dim] of one shape)");
  const int64_t T = k.size(2);
  EMBER_CHECK(length_ + T <= capacity_, "KVCache: ", length_, " positions held and ", T,
              " more do not fit its capacity of ", capacity_,
              " (make the cache with room for the prompt and every new token)");
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
  Tensor& K = k_[layer];
  Tensor& V = v_[layer];
  EMBER_CHECK(k.size(0) == K.size(0) && k.size(1) == K.size(1) && k.size(3) == K.size(3) &&
                  k.dtype() == K.dtype() && v.dtype() == V.dtype() && k.device() == K.device() &&
                  v.device() == K.device(),
              "KVCache: layer ", layer, " appends ", k.shape().to_string(), " ",
              dtype_name(k.dtype()), " on ", k.device().str(), " to a cache of [", K.size(0), ", ",
              K.size(1), ", *, ", K.size(3), "] ", dtype_name(K.dtype()), " on ", K.device().str(),
              " (reset() keeps the buffers; a new batch or model needs a new KVCache)");
  K.narrow(2, length_, T).copy_(k);
  V.narrow(2, length_, T).copy_(v);
  return {K.narrow(2, 0, length_ + T), V.narrow(2, 0, length_ + T)};
}

void KVCache::advance(int64_t T) {
  EMBER_CHECK(T >= 0 && length_ + T <= capacity_, "KVCache: advance by ", T, " from ", length_,
              " (capacity ", capacity_, ")");
  length_ += T;
}

namespace {

// [B, H_kv, S, hd] -> [B, H_kv·group, S, hd]: each key head serves `group` query heads.
Tensor repeat_heads(const Tensor& x, int64_t group) {
  if (group == 1) return x;
  const Shape s = x.shape();
  return x.unsqueeze(2)
      .expand({s[0], s[1], group, s[2], s[3]})
      .reshape({s[0], s[1] * group, s[2], s[3]});
}

}  // namespace

namespace detail {

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, size_t layer,
                        KVCache* cache, const Tensor& mask) {
  Tensor K = k, V = v;
  if (cache) std::tie(K, V) = cache->append(layer, k, v);
  EMBER_CHECK(q.size(1) % K.size(1) == 0, "attention: ", q.size(1), " query heads over ", K.size(1),
              " key heads (expected a multiple)");
  const int64_t group = q.size(1) / K.size(1);
  K = repeat_heads(K, group);
  V = repeat_heads(V, group);
  if (mask.defined()) return scaled_dot_product_attention(q, K, V, {.attn_mask = mask});
  if (q.size(2) == 1 && cache) {
    // Note [A decode step's attention]: one query over the cache, composed (two batched
    // GEMMs and a softmax). The fused path would build a cuDNN plan for every new key length,
    // one per generated token (tens of milliseconds each on the H200).
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
    const Tensor scores = matmul(q * scale, K.transpose(2, 3));  // [B, H, 1, S]
    return matmul(softmax(scores, -1).to(V.dtype()), V);
  }
  // Note [Positions and masks of a language model's forward]: no mask means from the start
  // (causal) or a single query (everything before it).
  return scaled_dot_product_attention(q, K, V, {.is_causal = q.size(2) > 1});
}

}  // namespace detail

Tensor CausalLMImpl::forward(const Tensor& ids, const CausalLMOptions& options) {
  const std::string op = type_name() + ".forward";
  EMBER_CHECK(ids.defined(), op, ": undefined ids (expected token ids [B, T], i64)");
  EMBER_CHECK(ids.dim() == 2 && ids.dtype() == DType::i64 && ids.size(0) > 0 && ids.size(1) > 0, op,
              ": ids ", ids.shape().to_string(), " ", dtype_name(ids.dtype()),
              " (expected token ids [B, T], i64, B and T at least 1)");
  const int64_t B = ids.size(0), T = ids.size(1);
  const int64_t past = options.cache ? options.cache->length() : 0;
  EMBER_CHECK(past + T <= max_positions(), op, ": ", past, " past and ", T,
              " new positions exceed the model's context of ", max_positions(), " positions");
  if (options.cache)
    EMBER_CHECK(options.cache->batch() == 0 || options.cache->batch() == B, op, ": a batch of ", B,
                " with a KVCache holding a batch of ", options.cache->batch());
  if (ids.device().is_cpu()) {
    for (int64_t id : ids.contiguous().to_vector<int64_t>())
      EMBER_CHECK(id >= 0 && id < vocab_size(), op, ": token id ", id,
                  " is outside the vocabulary [0, ", vocab_size(), ")");
  }
  // Note [Positions and masks of a language model's forward].
  const TensorOptions on_ids{.dtype = DType::i64, .device = ids.device()};
  Tensor positions, mask;
  if (options.attention_mask.defined()) {
    const Tensor& am = options.attention_mask;
    EMBER_CHECK(am.dim() == 2 && am.size(0) == B && am.size(1) == past + T, op, ": attention_mask ",
                am.shape().to_string(), " (expected [", B, ", ", past + T,
                "]: one entry per past and new position of each row)");
    EMBER_CHECK(!is_floating(am.dtype()), op, ": attention_mask of dtype ", dtype_name(am.dtype()),
                " (expected 1/0 in an integer or bool tensor)");
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
    positions = from_vector(pos, {B, T}, {.device = ids.device()});
    mask = from_vector(allow, {B, 1, T, S}, {.device = ids.device()}).to(DType::boolean);
  } else {
    positions = arange(static_cast<double>(past), static_cast<double>(past + T), 1.0, on_ids)
                    .reshape({1, T});
    if (past > 0 && T > 1) {  // a chunk after a past: the bottom-right causal mask
      std::vector<uint8_t> allow(static_cast<size_t>(T * (past + T)));
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < past + T; ++j)
          allow[static_cast<size_t>(i * (past + T) + j)] = j <= past + i;
      mask = from_vector(allow, {1, 1, T, past + T}, {.device = ids.device()}).to(DType::boolean);
    }
  }
  // A model with bf16 (f16) weights computes as under autocast to that dtype: its GEMMs and
  // attention in it, its norms and softmaxes in f32 (the precision they have no kernels below).
  std::optional<AutocastGuard> half;
  if (const DType w = parameters().front().dtype(); w == DType::bf16 || w == DType::f16)
    half.emplace(w);
  Tensor logits = run(ids, positions, mask, options.cache, options.last_only);
  if (options.cache) options.cache->advance(T);
  return logits;
}

}  // namespace ember::nn
