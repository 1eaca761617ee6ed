// ember/models/gpt2.hpp — GPT-2 (Radford et al. 2019) with Hugging Face's parameter names:
// learned positions, pre-norm LayerNorm, tanh GELU, fused QKV projection, the head tied to the
// token embedding (docs/language_models.md).
//
//   nn::GPT2 model(nn::GPT2Config::from_file("gpt2/config.json"));
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

/// GPT2Config of transformers (the fields config.json carries; the defaults are GPT-2 124M's).
struct GPT2Config {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_inner = 0;  // 0: 4 · n_embd
  double layer_norm_epsilon = 1e-5;
  /// "gelu_new" / "gelu_pytorch_tanh" (the tanh approximation) or "gelu" (erf).
  std::string activation_function = "gelu_new";
  bool tie_word_embeddings = true;
  double initializer_range = 0.02;
  int64_t bos_token_id = 50256, eos_token_id = 50256;

  /// From transformers' config.json (model_type "gpt2"). Unknown architectures, activations
  /// and options ember does not compute (scale_attn_by_inverse_layer_idx,
  /// reorder_and_upcast_attn, add_cross_attention) are refused, naming the field.
  static GPT2Config from_json(const json& config);
  static GPT2Config from_file(const std::string& path);
  /// The fields above, as config.json writes them (model_type "gpt2").
  json to_json() const;
};

class GPT2BlockImpl;

/// transformer.{wte, wpe, h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj},
/// ln_f} and lm_head (tied to transformer.wte.weight unless tie_word_embeddings is false).
/// The weights are drawn as GPT-2's (N(0, initializer_range), the residual projections scaled
/// by 1/√(2·n_layer)). Linear weights are [out, in]: Hugging Face's files keep GPT-2's Conv1D
/// [in, out], which models::from_pretrained transposes.
class GPT2Impl : public CausalLMImpl {
 public:
  explicit GPT2Impl(GPT2Config config);
  std::string type_name() const override { return "GPT2"; }
  json options() const override { return config_.to_json(); }
  const GPT2Config& model_config() const { return config_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  int64_t max_positions() const override { return config_.n_positions; }
  int64_t num_layers() const override { return config_.n_layer; }

 protected:
  Tensor run(const Tensor& ids, const Tensor& positions,
             const lm_detail::AttentionContext& attention, bool last_only) override;
  DType weight_dtype() const override { return wte_->weight().dtype(); }

 private:
  GPT2Config config_;
  Embedding wte_, wpe_;
  std::vector<std::shared_ptr<GPT2BlockImpl>> blocks_;
  LayerNorm ln_f_;
  Linear lm_head_;
};

class GPT2 : public ModuleHolder<GPT2Impl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn
