// src/models/llama.cpp — nn::Llama (include/ember/models/llama.hpp).
//
// Note [Rotary embedding as transformers computes it]
// The inverse frequencies are 1 / theta^(2i/d) in f32 (powf, as torch's pow of a float
// tensor), then rescaled by the checkpoint's rope type: "linear" divides them by the factor;
// "llama3" (Llama 3.1) divides the low frequencies (wavelength > original context /
// low_freq_factor) by the factor, keeps the high ones (wavelength < original context /
// high_freq_factor) and blends the band between. Angles are position · inv_freq in f32 (a
// position's angle in bf16 would be wrong by whole radians past a few hundred tokens), their
// cos and sin are cast to the activations' dtype, and a head's two halves rotate together
// (transformers' rotate_half layout, not interleaved pairs): x·cos + [-x₂, x₁]·sin, one
// rotary_embedding kernel per q and k, or at decode inside the attention kernel (f32: bitwise
// transformers' formula; f16/bf16: each pair computed in f32 and rounded once, where
// transformers rounds each product and the sum).
#include "ember/models/llama.hpp"

#include <cmath>
#include <numbers>
#include <optional>

#include "ember/autocast.hpp"
#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/nn/init.hpp"
#include "ember/ops.hpp"
#include "models/config_json.hpp"
#include "models/group.hpp"

namespace ember::nn {

using models::detail::bool_field;
using models::detail::int_field;
using models::detail::number_field;
using models::detail::string_field;

LlamaConfig LlamaConfig::from_json(const json& j) {
  const std::string op = "LlamaConfig::from_json";
  EMBER_CHECK(j.is_object(), op, ": ", j.type_name(), " (expected config.json's object)");
  models::detail::expect_model_type(j, "llama", op);
  LlamaConfig c;
  c.vocab_size = int_field(j, "vocab_size", c.vocab_size, op);
  c.hidden_size = int_field(j, "hidden_size", c.hidden_size, op);
  c.intermediate_size = int_field(j, "intermediate_size", c.intermediate_size, op);
  c.num_hidden_layers = int_field(j, "num_hidden_layers", c.num_hidden_layers, op);
  c.num_attention_heads = int_field(j, "num_attention_heads", c.num_attention_heads, op);
  c.num_key_value_heads = int_field(j, "num_key_value_heads", c.num_attention_heads, op);
  c.head_dim = int_field(j, "head_dim", c.hidden_size / c.num_attention_heads, op);
  c.max_position_embeddings =
      int_field(j, "max_position_embeddings", c.max_position_embeddings, op);
  c.rms_norm_eps = number_field(j, "rms_norm_eps", c.rms_norm_eps, op);
  c.tie_word_embeddings = bool_field(j, "tie_word_embeddings", c.tie_word_embeddings, op);
  c.attention_bias = bool_field(j, "attention_bias", false, op);
  c.mlp_bias = bool_field(j, "mlp_bias", false, op);
  c.initializer_range = number_field(j, "initializer_range", c.initializer_range, op);
  c.bos_token_id = int_field(j, "bos_token_id", c.bos_token_id, op, false);
  if (j.contains("eos_token_id") && j["eos_token_id"].is_array() && !j["eos_token_id"].empty())
    c.eos_token_id = j["eos_token_id"][0].get<int64_t>();  // Llama 3.1 lists several
  else
    c.eos_token_id = int_field(j, "eos_token_id", c.eos_token_id, op, false);
  const std::string act = string_field(j, "hidden_act", "silu", op);
  EMBER_CHECK(act == "silu", op, ": hidden_act \"", act, "\" (expected silu: SwiGLU)");
  // rope: transformers 4 keeps rope_theta at the top and the scaling in rope_scaling;
  // transformers 5 keeps both in rope_parameters.
  c.rope_theta = number_field(j, "rope_theta", c.rope_theta, op);
  const json* rope = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (j.contains(key) && !j[key].is_null()) {
      EMBER_CHECK(j[key].is_object(), op, ": config field \"", key, "\" is ", j[key].dump(),
                  " (expected an object)");
      rope = &j[key];
      break;
    }
  if (rope) {
    c.rope_theta = number_field(*rope, "rope_theta", c.rope_theta, op);
    c.rope_type = string_field(*rope, "rope_type", string_field(*rope, "type", "default", op), op);
    EMBER_CHECK(c.rope_type == "default" || c.rope_type == "linear" || c.rope_type == "llama3", op,
                ": rope type \"", c.rope_type, "\" (expected default, linear or llama3)");
    c.rope_factor = number_field(*rope, "factor", 1.0, op);
    c.rope_low_freq_factor = number_field(*rope, "low_freq_factor", c.rope_low_freq_factor, op);
    c.rope_high_freq_factor = number_field(*rope, "high_freq_factor", c.rope_high_freq_factor, op);
    c.rope_original_max_position_embeddings = int_field(
        *rope, "original_max_position_embeddings", c.rope_original_max_position_embeddings, op);
  }
  EMBER_CHECK(c.num_attention_heads % c.kv_heads() == 0, op, ": num_attention_heads ",
              c.num_attention_heads, " is not a multiple of num_key_value_heads ", c.kv_heads());
  EMBER_CHECK(c.head_size() % 2 == 0, op, ": head_dim ", c.head_size(),
              " (expected an even size: rotary embedding rotates pairs)");
  return c;
}

LlamaConfig LlamaConfig::from_file(const std::string& path) {
  return from_json(models::detail::read_json_file(path, "LlamaConfig::from_file"));
}

json LlamaConfig::to_json() const {
  json j = {{"model_type", "llama"},
            {"architectures", {"LlamaForCausalLM"}},
            {"vocab_size", vocab_size},
            {"hidden_size", hidden_size},
            {"intermediate_size", intermediate_size},
            {"num_hidden_layers", num_hidden_layers},
            {"num_attention_heads", num_attention_heads},
            {"num_key_value_heads", kv_heads()},
            {"head_dim", head_size()},
            {"max_position_embeddings", max_position_embeddings},
            {"rms_norm_eps", rms_norm_eps},
            {"rope_theta", rope_theta},
            {"hidden_act", "silu"},
            {"tie_word_embeddings", tie_word_embeddings},
            {"attention_bias", attention_bias},
            {"mlp_bias", mlp_bias},
            {"initializer_range", initializer_range},
            {"bos_token_id", bos_token_id},
            {"eos_token_id", eos_token_id}};
  if (rope_type != "default") {
    j["rope_scaling"] = {{"rope_type", rope_type}, {"factor", rope_factor}};
    if (rope_type == "llama3") {
      j["rope_scaling"]["low_freq_factor"] = rope_low_freq_factor;
      j["rope_scaling"]["high_freq_factor"] = rope_high_freq_factor;
      j["rope_scaling"]["original_max_position_embeddings"] = rope_original_max_position_embeddings;
    }
  }
  return j;
}

std::vector<float> LlamaConfig::inv_frequencies() const {
  // Note [Rotary embedding as transformers computes it].
  const int64_t d = head_size();
  std::vector<float> inv(static_cast<size_t>(d / 2));
  for (int64_t i = 0; i < d / 2; ++i)
    inv[static_cast<size_t>(i)] =
        1.0f /
        std::pow(static_cast<float>(rope_theta), static_cast<float>(2 * i) / static_cast<float>(d));
  const float factor = static_cast<float>(rope_factor);
  if (rope_type == "linear") {
    for (float& f : inv) f /= factor;
  } else if (rope_type == "llama3") {
    const float old_ctx = static_cast<float>(rope_original_max_position_embeddings);
    const float low = static_cast<float>(rope_low_freq_factor);
    const float high = static_cast<float>(rope_high_freq_factor);
    const float low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    for (float& f : inv) {
      const float wavelen = static_cast<float>(2.0 * std::numbers::pi) / f;
      const float scaled = wavelen > low_wavelen ? f / factor : f;
      const float smooth = (old_ctx / wavelen - low) / (high - low);
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? (1.0f - smooth) * scaled / factor + smooth * scaled : scaled;
    }
  }
  return inv;
}

// The rotary cos and sin of one forward (f32), cast once to the activations' dtype for every
// layer (rather than twice a layer).
struct Rotary {
  Tensor cos, sin;
  std::pair<Tensor, Tensor> cast{};
  const std::pair<Tensor, Tensor>& as(DType dtype) {
    if (!cast.first.defined() || cast.first.dtype() != dtype) cast = {cos.to(dtype), sin.to(dtype)};
    return cast;
  }
};

// input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj.
class LlamaLayerImpl : public models::detail::GroupImpl {
 public:
  explicit LlamaLayerImpl(const LlamaConfig& c)
      : GroupImpl("LlamaDecoderLayer"),
        heads_(c.num_attention_heads),
        kv_heads_(c.kv_heads()),
        hd_(c.head_size()),
        input_layernorm_(RMSNormOptions{{c.hidden_size}, c.rms_norm_eps}),
        post_attention_layernorm_(RMSNormOptions{{c.hidden_size}, c.rms_norm_eps}),
        q_proj_(c.hidden_size, heads_ * hd_, c.attention_bias),
        k_proj_(c.hidden_size, kv_heads_ * hd_, c.attention_bias),
        v_proj_(c.hidden_size, kv_heads_ * hd_, c.attention_bias),
        o_proj_(heads_ * hd_, c.hidden_size, c.attention_bias),
        gate_proj_(c.hidden_size, c.intermediate_size, c.mlp_bias),
        up_proj_(c.hidden_size, c.intermediate_size, c.mlp_bias),
        down_proj_(c.intermediate_size, c.hidden_size, c.mlp_bias) {
    auto attn = std::make_shared<GroupImpl>("LlamaAttention");
    attn->add("q_proj", q_proj_.ptr());
    attn->add("k_proj", k_proj_.ptr());
    attn->add("v_proj", v_proj_.ptr());
    attn->add("o_proj", o_proj_.ptr());
    auto mlp = std::make_shared<GroupImpl>("LlamaMLP");
    mlp->add("gate_proj", gate_proj_.ptr());
    mlp->add("up_proj", up_proj_.ptr());
    mlp->add("down_proj", down_proj_.ptr());
    add("self_attn", attn);
    add("mlp", mlp);
    add("input_layernorm", input_layernorm_.ptr());
    add("post_attention_layernorm", post_attention_layernorm_.ptr());
  }

  Tensor step(const Tensor& x, Rotary& rotary, const lm_detail::AttentionContext& attention,
              size_t layer) {
    const int64_t B = x.size(0), T = x.size(1);
    // Note [A norm in front of a few rows] in src/cuda/gemv.cu: at decode one kernel normalises
    // the input and computes q, k and v (then h is never made).
    auto heads = [&](const Tensor& t, int64_t n) {
      return t.reshape({B, T, n, hd_}).transpose(1, 2);  // [B, n, T, hd]
    };
    std::vector<Tensor> qkv;
    if (fuses(input_layernorm_, {&q_proj_, &k_proj_, &v_proj_}, x)) {
      qkv = rms_norm_linear(x, input_layernorm_->weight(), *input_layernorm_->norm_options().eps,
                            {q_proj_->weight(), k_proj_->weight(), v_proj_->weight()},
                            {q_proj_->bias(), k_proj_->bias(), v_proj_->bias()});
    } else {
      const Tensor h = input_layernorm_(x);
      qkv = {q_proj_(h), k_proj_(h), v_proj_(h)};
    }
    // Note [Rotary embedding as transformers computes it]: q and k rotated by the attention
    // (at decode inside its kernel: Note [Rotary embedding in the attention kernel] in
    // src/cuda/attention_kv.cu); rotary_embedding reads the head-transposed views in place.
    const auto& [c, s] = rotary.as(qkv[0].dtype());
    const Tensor y = lm_detail::causal_attention(heads(qkv[0], heads_), heads(qkv[1], kv_heads_),
                                                 heads(qkv[2], kv_heads_), layer, attention, c, s);
    // Note [A residual in the product] in src/ops/linalg.cpp: x + proj(·) in one GEMM.
    const Tensor r = o_proj_->forward(y.transpose(1, 2).reshape({B, T, heads_ * hd_}), x);
    // The MLP's input silu(gate_proj(g)) * up_proj(g) of g = post_attention_layernorm(r), at
    // decode in one kernel.
    Tensor a;
    if (fuses(post_attention_layernorm_, {&gate_proj_, &up_proj_}, r)) {
      a = rms_norm_swiglu(r, post_attention_layernorm_->weight(),
                          *post_attention_layernorm_->norm_options().eps, gate_proj_->weight(),
                          up_proj_->weight(), gate_proj_->bias(), up_proj_->bias());
    } else {
      const Tensor g = post_attention_layernorm_(r);
      a = silu(gate_proj_(g)) * up_proj_(g);
    }
    return down_proj_->forward(a, r);
  }

 private:
  // rms_norm_linear / rms_norm_swiglu can stand for `norm` then `projections`: a decode step's
  // few rows on a GPU (elsewhere the ops compose: the modules run instead), no gradient,
  // x of the norm's 16-bit dtype, an eps set, and no forward hooks to see the modules' outputs.
  static bool fuses(const RMSNorm& norm, std::initializer_list<const Linear*> projections,
                    const Tensor& x) {
    const Tensor w = norm->weight();
    bool ok = models::detail::fusable_decode_rows(x) && w.defined() && w.dtype() == x.dtype() &&
              norm->norm_options().eps.has_value() && !norm->has_forward_hooks();
    for (const Linear* p : projections) ok = ok && !(*p)->has_forward_hooks();
    return ok;
  }

  int64_t heads_, kv_heads_, hd_;
  RMSNorm input_layernorm_, post_attention_layernorm_;
  Linear q_proj_, k_proj_, v_proj_, o_proj_, gate_proj_, up_proj_, down_proj_;
};

LlamaImpl::LlamaImpl(LlamaConfig config)
    : config_(std::move(config)),
      embed_tokens_(config_.vocab_size, config_.hidden_size),
      norm_(RMSNormOptions{{config_.hidden_size}, config_.rms_norm_eps}),
      lm_head_(config_.hidden_size, config_.vocab_size, /*bias=*/false),
      inv_freq_(config_.inv_frequencies()) {
  const LlamaConfig& c = config_;
  EMBER_CHECK(c.num_attention_heads % c.kv_heads() == 0, "Llama: num_attention_heads ",
              c.num_attention_heads, " is not a multiple of num_key_value_heads ", c.kv_heads());
  auto model = std::make_shared<models::detail::GroupImpl>("LlamaModel");
  model->add("embed_tokens", embed_tokens_.ptr());
  auto layers = std::make_shared<models::detail::GroupImpl>("LlamaLayers");
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    layers_.push_back(std::make_shared<LlamaLayerImpl>(c));
    layers->add(std::to_string(i), layers_.back());
  }
  model->add("layers", layers);
  model->add("norm", norm_.ptr());
  register_module("model", model);
  register_module("lm_head", lm_head_.ptr());
  {  // transformers' initialisation: N(0, initializer_range) weights, zero biases, unit norms
    NoGradGuard no_grad;
    for (auto& [name, p] : named_parameters()) {
      if (p.dim() == 2)
        p.assign_(init::normal(p.shape(), c.initializer_range));
      else
        p.fill_(name.ends_with(".bias") ? 0.0 : 1.0);
    }
  }
  if (c.tie_word_embeddings) tie("lm_head.weight", embed_tokens_->weight());
}

Tensor LlamaImpl::run(const Tensor& ids, const Tensor& positions,
                      const lm_detail::AttentionContext& attention, bool last_only) {
  // Note [Rotary embedding as transformers computes it]: angles [B|1, 1, T, hd] in f32. The
  // frequencies are copied to the device once (a captured step may not copy host data).
  const int64_t half = static_cast<int64_t>(inv_freq_.size());
  if (!inv_freq_device_.defined() || inv_freq_device_.device() != ids.device())
    inv_freq_device_ = from_vector(inv_freq_, {half}, {.device = ids.device()});
  const Tensor& inv = inv_freq_device_;
  const Tensor angles = positions.to(DType::f32).unsqueeze(-1) * inv;  // [B|1, T, hd/2]
  const Tensor both = cat({angles, angles}, -1).unsqueeze(1);
  Rotary rotary{cos(both), sin(both)};
  Tensor x = models::detail::rows_of(embed_tokens_->weight(), ids);
  for (size_t i = 0; i < layers_.size(); ++i) x = layers_[i]->step(x, rotary, attention, i);
  if (last_only) x = x.narrow(1, x.size(1) - 1, 1);  // the norm is per row: only the last one
  {
    // Note [Norms in the weights' dtype] in src/models/gpt2.cpp: a 16-bit residual stream
    // normalised by the 16-bit kernel (autocast off) is the f32 norm autocast would run, cast
    // back by the head: one kernel instead of three. With gradients, autocast's f32 path.
    const bool own = x.dtype() == norm_->weight().dtype() &&
                     (x.dtype() == DType::bf16 || x.dtype() == DType::f16) && !grad_mode_enabled();
    std::optional<AutocastGuard> off;
    if (own) off.emplace(x.dtype(), /*enabled=*/false);
    x = norm_(x);
  }
  return lm_head_(x);
}

}  // namespace ember::nn
