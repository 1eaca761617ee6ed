// ember/models/llama.hpp — Llama (Touvron et al. 2023; Llama 3's rope scaling) with Hugging
// Face's parameter names: RMSNorm, rotary position embedding, SwiGLU MLP, grouped-query
// attention, no biases (docs/language_models.md).
//
//   nn::Llama model(nn::LlamaConfig::from_file("llama/config.json"));
//   Tensor logits = model(ids);                    // ids [B, T] i64 -> [B, T, vocab]
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ember/models/causal_lm.hpp"
#include "ember/nn/embedding.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"

namespace ember::nn {

/// LlamaConfig of transformers (the fields config.json carries).
struct LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 0;  // 0: num_attention_heads (no grouping)
  int64_t head_dim = 0;             // 0: hidden_size / num_attention_heads
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  /// "default", "linear" (positions divided by rope_factor) or "llama3" (Llama 3.1's
  /// frequency-dependent scaling with the low/high frequency factors).
  std::string rope_type = "default";
  double rope_factor = 1.0, rope_low_freq_factor = 1.0, rope_high_freq_factor = 4.0;
  int64_t rope_original_max_position_embeddings = 8192;
  bool tie_word_embeddings = false;
  bool attention_bias = false, mlp_bias = false;
  double initializer_range = 0.02;
  int64_t bos_token_id = 1, eos_token_id = 2;

  /// From transformers' config.json (model_type "llama"): reads rope_theta and rope scaling
  /// from rope_scaling (transformers 4) or rope_parameters (transformers 5). A hidden_act other
  /// than "silu" or a rope type ember does not compute (yarn, dynamic, longrope) is refused,
  /// naming the field and what is supported.
  static LlamaConfig from_json(const json& config);
  static LlamaConfig from_file(const std::string& path);
  json to_json() const;
  int64_t kv_heads() const {
    return num_key_value_heads ? num_key_value_heads : num_attention_heads;
  }
  int64_t head_size() const { return head_dim ? head_dim : hidden_size / num_attention_heads; }
  /// The rotary inverse frequencies (head_size()/2 of them) after rope scaling, as
  /// transformers computes them (in f32).
  std::vector<float> inv_frequencies() const;
};

class LlamaLayerImpl;

/// model.{embed_tokens, layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
/// post_attention_layernorm, mlp.{gate,up,down}_proj}, norm} and lm_head (tied to
/// model.embed_tokens.weight when tie_word_embeddings).
class LlamaImpl : public CausalLMImpl {
 public:
  explicit LlamaImpl(LlamaConfig config);
  std::string type_name() const override { return "Llama"; }
  json options() const override { return config_.to_json(); }
  const LlamaConfig& model_config() const { return config_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_positions() const override { return config_.max_position_embeddings; }
  int64_t num_layers() const override { return config_.num_hidden_layers; }

 protected:
  Tensor run(const Tensor& ids, const Tensor& positions,
             const lm_detail::AttentionContext& attention, bool last_only) override;
  DType weight_dtype() const override { return embed_tokens_->weight().dtype(); }

 private:
  LlamaConfig config_;
  Embedding embed_tokens_;
  std::vector<std::shared_ptr<LlamaLayerImpl>> layers_;
  RMSNorm norm_;
  Linear lm_head_;
  std::vector<float> inv_freq_;
  Tensor inv_freq_device_;  // inv_freq_ where the model computes (made by the first forward)
};

class Llama : public ModuleHolder<LlamaImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn
