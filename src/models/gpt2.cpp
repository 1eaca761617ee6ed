// src/models/gpt2.cpp — nn::GPT2 (include/ember/models/gpt2.hpp).
#include "ember/models/gpt2.hpp"

#include <cmath>

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

GPT2Config GPT2Config::from_json(const json& j) {
  const std::string op = "GPT2Config::from_json";
  EMBER_CHECK(j.is_object(), op, ": ", j.type_name(), " (expected config.json's object)");
  models::detail::expect_model_type(j, "gpt2", op);
  GPT2Config c;
  c.vocab_size = int_field(j, "vocab_size", c.vocab_size, op);
  c.n_positions = int_field(j, "n_positions", c.n_positions, op);
  c.n_embd = int_field(j, "n_embd", c.n_embd, op);
  c.n_layer = int_field(j, "n_layer", c.n_layer, op);
  c.n_head = int_field(j, "n_head", c.n_head, op);
  c.n_inner = int_field(j, "n_inner", 0, op);
  c.layer_norm_epsilon = number_field(j, "layer_norm_epsilon", c.layer_norm_epsilon, op);
  c.activation_function = string_field(j, "activation_function", c.activation_function, op);
  c.tie_word_embeddings = bool_field(j, "tie_word_embeddings", true, op);
  c.initializer_range = number_field(j, "initializer_range", c.initializer_range, op);
  c.bos_token_id = int_field(j, "bos_token_id", c.bos_token_id, op, false);
  c.eos_token_id = int_field(j, "eos_token_id", c.eos_token_id, op, false);
  EMBER_CHECK(c.activation_function == "gelu_new" || c.activation_function == "gelu_pytorch_tanh" ||
                  c.activation_function == "gelu",
              op, ": activation_function \"", c.activation_function,
              "\" (expected gelu_new, gelu_pytorch_tanh or gelu)");
  for (const char* unsupported :
       {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"})
    EMBER_CHECK(!bool_field(j, unsupported, false, op), op, ": config field \"", unsupported,
                "\" is true (ember's GPT2 computes GPT-2's original attention only)");
  EMBER_CHECK(c.n_embd % c.n_head == 0, op, ": n_embd ", c.n_embd, " is not a multiple of n_head ",
              c.n_head);
  return c;
}

GPT2Config GPT2Config::from_file(const std::string& path) {
  return from_json(models::detail::read_json_file(path, "GPT2Config::from_file"));
}

json GPT2Config::to_json() const {
  return {{"model_type", "gpt2"},
          {"architectures", {"GPT2LMHeadModel"}},
          {"vocab_size", vocab_size},
          {"n_positions", n_positions},
          {"n_ctx", n_positions},
          {"n_embd", n_embd},
          {"n_layer", n_layer},
          {"n_head", n_head},
          {"n_inner", n_inner ? json(n_inner) : json(nullptr)},
          {"layer_norm_epsilon", layer_norm_epsilon},
          {"activation_function", activation_function},
          {"tie_word_embeddings", tie_word_embeddings},
          {"initializer_range", initializer_range},
          {"bos_token_id", bos_token_id},
          {"eos_token_id", eos_token_id}};
}

// Note [Norms in the weights' dtype]
// A model with bf16 weights computes under autocast (CausalLMImpl::forward), which runs
// layer_norm in f32: a cast of the bf16 residual in, the norm, and the linear after it casting
// the f32 result back, three kernels. layer_norm has bf16 kernels that compute in f32 and
// round once, bitwise the same result after that cast, so a norm whose input already has its
// weights' dtype runs with autocast off: one kernel.
namespace {
Tensor run_norm(const LayerNorm& ln, const Tensor& x, DType weights) {
  if (x.dtype() != weights || weights == DType::f32 || weights == DType::f64) return ln(x);
  AutocastGuard off(weights, /*enabled=*/false);
  return ln(x);
}

// A norm and the linear after it: for a decode step's few rows on a GPU with no gradient,
// 16-bit weights and no hooks on either module, layer_norm_linear (one kernel: Note [A norm in
// front of a few rows] in src/cuda/gemv.cu); otherwise the two modules.
Tensor norm_linear(const LayerNorm& ln, const Linear& lin, const Tensor& x, DType weights,
                   Activation act = Activation::none) {
  if (models::detail::fusable_decode_rows(x) && x.dtype() == weights && !ln->has_forward_hooks() &&
      !lin->has_forward_hooks())
    return layer_norm_linear(x, ln->weight(), ln->bias(), ln->norm_options().eps, lin->weight(),
                             lin->bias(), act);
  const Tensor n = run_norm(ln, x, weights);
  return act == Activation::none ? lin(n) : lin->forward(n, act);
}
}  // namespace

// ln_1, attn.{c_attn, c_proj}, ln_2, mlp.{c_fc, c_proj}.
class GPT2BlockImpl : public models::detail::GroupImpl {
 public:
  GPT2BlockImpl(const GPT2Config& c, int64_t inner)
      : GroupImpl("GPT2Block"),
        d_(c.n_embd),
        heads_(c.n_head),
        tanh_gelu_(c.activation_function != "gelu"),
        ln_1_(LayerNormOptions{{c.n_embd}, c.layer_norm_epsilon}),
        ln_2_(LayerNormOptions{{c.n_embd}, c.layer_norm_epsilon}),
        c_attn_(c.n_embd, 3 * c.n_embd),
        attn_proj_(c.n_embd, c.n_embd),
        c_fc_(c.n_embd, inner),
        mlp_proj_(inner, c.n_embd) {
    auto attn = std::make_shared<GroupImpl>("GPT2Attention");
    attn->add("c_attn", c_attn_.ptr());
    attn->add("c_proj", attn_proj_.ptr());
    auto mlp = std::make_shared<GroupImpl>("GPT2MLP");
    mlp->add("c_fc", c_fc_.ptr());
    mlp->add("c_proj", mlp_proj_.ptr());
    add("ln_1", ln_1_.ptr());
    add("attn", attn);
    add("ln_2", ln_2_.ptr());
    add("mlp", mlp);
  }

  Tensor step(const Tensor& x, const lm_detail::AttentionContext& attention, size_t layer,
              DType weights) {
    const int64_t B = x.size(0), T = x.size(1), hd = d_ / heads_;
    const std::vector<Tensor> qkv =
        split(norm_linear(ln_1_, c_attn_, x, weights), d_, -1);  // 3 views [B, T, d]
    auto heads = [&](const Tensor& t) { return t.reshape({B, T, heads_, hd}).transpose(1, 2); };
    const Tensor y =
        lm_detail::causal_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), layer, attention);
    // Note [A residual in the product] in src/ops/linalg.cpp: x + proj(·) in one GEMM.
    const Tensor h = attn_proj_->forward(y.transpose(1, 2).reshape({B, T, d_}), x);
    const Tensor a = tanh_gelu_ ? norm_linear(ln_2_, c_fc_, h, weights, Activation::gelu_tanh)
                                : gelu(norm_linear(ln_2_, c_fc_, h, weights));
    return mlp_proj_->forward(a, h);
  }

 private:
  int64_t d_, heads_;
  bool tanh_gelu_;
  LayerNorm ln_1_, ln_2_;
  Linear c_attn_, attn_proj_, c_fc_, mlp_proj_;
};

GPT2Impl::GPT2Impl(GPT2Config config)
    : config_(std::move(config)),
      wte_(config_.vocab_size, config_.n_embd),
      wpe_(config_.n_positions, config_.n_embd),
      ln_f_(LayerNormOptions{{config_.n_embd}, config_.layer_norm_epsilon}),
      lm_head_(config_.n_embd, config_.vocab_size, /*bias=*/false) {
  const GPT2Config& c = config_;
  EMBER_CHECK(c.n_embd % c.n_head == 0, "GPT2: n_embd ", c.n_embd, " is not a multiple of n_head ",
              c.n_head);
  auto transformer = std::make_shared<models::detail::GroupImpl>("GPT2Model");
  transformer->add("wte", wte_.ptr());
  transformer->add("wpe", wpe_.ptr());
  auto h = std::make_shared<models::detail::GroupImpl>("GPT2Layers");
  for (int64_t i = 0; i < c.n_layer; ++i) {
    blocks_.push_back(std::make_shared<GPT2BlockImpl>(c, c.n_inner ? c.n_inner : 4 * c.n_embd));
    h->add(std::to_string(i), blocks_.back());
  }
  transformer->add("h", h);
  transformer->add("ln_f", ln_f_.ptr());
  register_module("transformer", transformer);
  register_module("lm_head", lm_head_.ptr());
  // GPT-2's initialisation: weights N(0, initializer_range), the residual projections'
  // scaled by 1/√(2·n_layer), biases 0, LayerNorm weights 1. (Under an init::SkipInitGuard,
  // as models::from_pretrained builds, normal() draws nothing.)
  {
    NoGradGuard no_grad;
    const double proj_std = c.initializer_range / std::sqrt(2.0 * static_cast<double>(c.n_layer));
    for (auto& [name, p] : named_parameters()) {
      if (p.dim() == 2)
        p.assign_(init::normal(p.shape(),
                               name.ends_with("c_proj.weight") ? proj_std : c.initializer_range));
      else
        p.fill_(name.ends_with(".bias") ? 0.0 : 1.0);
    }
  }
  if (c.tie_word_embeddings) tie("lm_head.weight", wte_->weight());
}

Tensor GPT2Impl::run(const Tensor& ids, const Tensor& positions,
                     const lm_detail::AttentionContext& attention, bool last_only) {
  Tensor x = models::detail::rows_of(wte_->weight(), ids) +
             models::detail::rows_of(wpe_->weight(), positions);  // [B, T, d] + [1|B, T, d]
  for (size_t i = 0; i < blocks_.size(); ++i) x = blocks_[i]->step(x, attention, i, weight_dtype());
  if (last_only) x = x.narrow(1, x.size(1) - 1, 1);  // the norm is per row: only the last one
  x = run_norm(ln_f_, x, weight_dtype());
  return lm_head_(x);
}

}  // namespace ember::nn
