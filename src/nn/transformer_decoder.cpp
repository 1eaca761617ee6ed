// src/nn/transformer_decoder.cpp — TransformerDecoderLayer, TransformerDecoder, Transformer and
// generate_square_subsequent_mask, composed from MultiheadAttention, Linear, Dropout,
// LayerNorm and the encoder (src/nn/transformer.cpp); no hand-written backward.
#include <limits>
#include <sstream>

#include "ember/autograd.hpp"
#include "ember/nn/init.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/transformer.hpp"
#include "py_repr.hpp"

namespace ember::nn {

namespace {

ModulePtr make_norm(int64_t d_model, double eps, bool bias) {
  return std::make_shared<LayerNormImpl>(LayerNormOptions{Shape{d_model}, eps, true, bias});
}

std::string shape_of(const Tensor& t) { return t.defined() ? t.shape().to_string() : "undefined"; }

}  // namespace

Tensor generate_square_subsequent_mask(int64_t n, Device device) {
  EMBER_CHECK(n >= 0, "generate_square_subsequent_mask: size ", n, " (expected >= 0)");
  return masked_fill(zeros({n, n}, {.device = device}), causal_mask(n, n, device),
                     -std::numeric_limits<double>::infinity());
}

Tensor TransformerImpl::generate_square_subsequent_mask(int64_t n, Device device) {
  return nn::generate_square_subsequent_mask(n, device);
}

// ---- TransformerDecoderLayer ----

TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(TransformerDecoderLayerOptions o)
    : options_(o) {
  EMBER_CHECK(o.d_model > 0 && o.nhead > 0 && o.dim_feedforward > 0,
              "TransformerDecoderLayer: d_model ", o.d_model, ", nhead ", o.nhead,
              ", dim_feedforward ", o.dim_feedforward, " (expected all > 0)");
  EMBER_CHECK(o.activation == "relu" || o.activation == "gelu",
              "TransformerDecoderLayer: activation '", o.activation,
              "' (expected \"relu\" or \"gelu\")");
  const MultiheadAttentionOptions attn{.embed_dim = o.d_model,
                                       .num_heads = o.nhead,
                                       .dropout = o.dropout,
                                       .bias = o.bias,
                                       .batch_first = o.batch_first};
  self_attn_ = std::make_shared<MultiheadAttentionImpl>(attn);
  register_module("self_attn", self_attn_);
  multihead_attn_ = std::make_shared<MultiheadAttentionImpl>(attn);
  register_module("multihead_attn", multihead_attn_);
  linear1_ = register_module("linear1",
                             std::make_shared<LinearImpl>(o.d_model, o.dim_feedforward, o.bias));
  dropout_ = register_module("dropout", std::make_shared<DropoutImpl>(o.dropout));
  linear2_ = register_module("linear2",
                             std::make_shared<LinearImpl>(o.dim_feedforward, o.d_model, o.bias));
  norm1_ = register_module("norm1", make_norm(o.d_model, o.layer_norm_eps, o.bias));
  norm2_ = register_module("norm2", make_norm(o.d_model, o.layer_norm_eps, o.bias));
  norm3_ = register_module("norm3", make_norm(o.d_model, o.layer_norm_eps, o.bias));
  dropout1_ = register_module("dropout1", std::make_shared<DropoutImpl>(o.dropout));
  dropout2_ = register_module("dropout2", std::make_shared<DropoutImpl>(o.dropout));
  dropout3_ = register_module("dropout3", std::make_shared<DropoutImpl>(o.dropout));
}

Tensor TransformerDecoderLayerImpl::forward(const Tensor&) {
  detail::throw_error(
      "TransformerDecoderLayer: needs the target and the encoder's memory (call "
      "forward(tgt, memory), not forward(tgt))");
}

Tensor TransformerDecoderLayerImpl::self_attention_block(const Tensor& x,
                                                         const DecoderMasks& masks) {
  AttentionOptions a;
  a.attn_mask = masks.tgt_mask;
  a.key_padding_mask = masks.tgt_key_padding_mask;
  a.is_causal = masks.tgt_is_causal;
  a.need_weights = false;
  return dropout1_->forward(self_attn_->forward(x, x, x, a).output);
}

Tensor TransformerDecoderLayerImpl::cross_attention_block(const Tensor& x, const Tensor& memory,
                                                          const DecoderMasks& masks) {
  AttentionOptions a;
  a.attn_mask = masks.memory_mask;
  a.key_padding_mask = masks.memory_key_padding_mask;
  a.is_causal = masks.memory_is_causal;
  a.need_weights = false;
  return dropout2_->forward(multihead_attn_->forward(x, memory, memory, a).output);
}

Tensor TransformerDecoderLayerImpl::feed_forward_block(const Tensor& x) {
  Tensor h = linear1_->forward(x);
  h = options_.activation == "gelu" ? gelu(h) : relu(h);
  return dropout3_->forward(linear2_->forward(dropout_->forward(h)));
}

Tensor TransformerDecoderLayerImpl::forward(const Tensor& tgt, const Tensor& memory,
                                            const DecoderMasks& masks) {
  const auto& o = options_;
  const char* layout = o.batch_first ? "[N, T, " : "[T, N, ";
  EMBER_CHECK(tgt.defined() && (tgt.dim() == 3 || tgt.dim() == 2) && tgt.size(-1) == o.d_model,
              "TransformerDecoderLayer: tgt shape ", shape_of(tgt), " (expected ", layout,
              o.d_model, "] or unbatched [T, ", o.d_model, "])");
  EMBER_CHECK(memory.defined() && memory.dim() == tgt.dim() && memory.size(-1) == o.d_model,
              "TransformerDecoderLayer: memory shape ", shape_of(memory), " (expected ",
              o.batch_first ? "[N, S, " : "[S, N, ", o.d_model, "], the rank of tgt ",
              tgt.shape().to_string(), ")");
  Tensor x = tgt;
  if (o.norm_first) {
    x = add(x, self_attention_block(norm1_->forward(x), masks));
    x = add(x, cross_attention_block(norm2_->forward(x), memory, masks));
    x = add(x, feed_forward_block(norm3_->forward(x)));
  } else {
    x = norm1_->forward(add(x, self_attention_block(x, masks)));
    x = norm2_->forward(add(x, cross_attention_block(x, memory, masks)));
    x = norm3_->forward(add(x, feed_forward_block(x)));
  }
  return x;
}

json TransformerDecoderLayerImpl::options() const {
  const auto& o = options_;
  return {{"d_model", o.d_model},
          {"nhead", o.nhead},
          {"dim_feedforward", o.dim_feedforward},
          {"dropout", o.dropout},
          {"activation", o.activation},
          {"layer_norm_eps", o.layer_norm_eps},
          {"batch_first", o.batch_first},
          {"norm_first", o.norm_first},
          {"bias", o.bias}};
}

std::string TransformerDecoderLayerImpl::extra_repr() const {
  std::ostringstream s;
  s << "d_model=" << options_.d_model << ", nhead=" << options_.nhead
    << ", dim_feedforward=" << options_.dim_feedforward << ", activation=" << options_.activation
    << ", norm_first=" << pyrepr::py_bool(options_.norm_first)
    << ", batch_first=" << pyrepr::py_bool(options_.batch_first);
  return s.str();
}

// ---- TransformerDecoder ----

TransformerDecoderImpl::TransformerDecoderImpl(TransformerDecoderOptions o) {
  TransformerDecoderLayerImpl prototype(o.layer);
  init(prototype, o.num_layers,
       o.final_norm ? make_norm(o.layer.d_model, o.layer.layer_norm_eps, o.layer.bias) : nullptr);
}

TransformerDecoderImpl::TransformerDecoderImpl(const TransformerDecoderLayer& layer,
                                               int64_t num_layers, Module norm) {
  init(*layer, num_layers, norm.ptr());
}

void TransformerDecoderImpl::init(const TransformerDecoderLayerImpl& prototype, int64_t num_layers,
                                  ModulePtr norm) {
  EMBER_CHECK(num_layers > 0, "TransformerDecoder: num_layers ", num_layers, " (expected > 0)");
  const StateDict weights = prototype.state_dict();
  layer_list_ = std::make_shared<ModuleListImpl>();
  for (int64_t i = 0; i < num_layers; ++i) {
    // A deep copy of the prototype (PyTorch's _get_clones): same weights, dtype, device, mode.
    auto copy = std::make_shared<TransformerDecoderLayerImpl>(prototype.layer_options());
    if (!weights.empty()) {
      copy->to(weights.front().second.dtype());
      copy->to(weights.front().second.device());
    }
    copy->load_state_dict(weights, true);
    copy->train(prototype.is_training());
    layer_list_->push_back(Module(copy));
    layers_.push_back(copy);
  }
  register_module("layers", layer_list_);
  if (norm) norm_ = register_module("norm", norm);
}

const std::shared_ptr<TransformerDecoderLayerImpl>& TransformerDecoderImpl::layer(size_t i) const {
  EMBER_CHECK(i < layers_.size(), "TransformerDecoder: layer ", i, " is out of range (",
              layers_.size(), " layers)");
  return layers_[i];
}

Tensor TransformerDecoderImpl::forward(const Tensor&) {
  detail::throw_error(
      "TransformerDecoder: needs the target and the encoder's memory (call forward(tgt, "
      "memory), not forward(tgt))");
}

Tensor TransformerDecoderImpl::forward(const Tensor& tgt, const Tensor& memory,
                                       const DecoderMasks& masks) {
  Tensor x = tgt;
  for (auto& layer : layers_) x = layer->forward(x, memory, masks);
  return norm_ ? norm_->forward(x) : x;
}

json TransformerDecoderImpl::options() const {
  return {{"layer", layers_.front()->options()},
          {"num_layers", static_cast<int64_t>(layers_.size())}};
}

json TransformerDecoderImpl::config() const {
  json j = {{"type", type_name()}, {"options", options()}};
  if (norm_) j["children"] = {{"norm", norm_->config()}};
  return j;
}

// ---- Transformer ----

TransformerImpl::TransformerImpl(TransformerOptions o) : options_(o) {
  EMBER_CHECK(o.num_encoder_layers > 0 && o.num_decoder_layers > 0,
              "Transformer: num_encoder_layers ", o.num_encoder_layers, " and num_decoder_layers ",
              o.num_decoder_layers, " (expected both > 0)");
  const TransformerEncoderLayerOptions layer{.d_model = o.d_model,
                                             .nhead = o.nhead,
                                             .dim_feedforward = o.dim_feedforward,
                                             .dropout = o.dropout,
                                             .activation = o.activation,
                                             .layer_norm_eps = o.layer_norm_eps,
                                             .batch_first = o.batch_first,
                                             .norm_first = o.norm_first,
                                             .bias = o.bias};
  encoder_ = std::make_shared<TransformerEncoderImpl>(TransformerEncoderOptions{
      .layer = layer, .num_layers = o.num_encoder_layers, .final_norm = true});
  decoder_ = std::make_shared<TransformerDecoderImpl>(TransformerDecoderOptions{
      .layer = layer, .num_layers = o.num_decoder_layers, .final_norm = true});
  register_module("encoder", encoder_);
  register_module("decoder", decoder_);
  // PyTorch's Transformer._reset_parameters: xavier_uniform_ for every matrix.
  NoGradGuard g;
  for (Tensor& p : parameters())
    if (p.dim() > 1) p.assign_(init::xavier_uniform(p.shape(), 1.0, p.dtype()).to(p.device()));
}

Tensor TransformerImpl::forward(const Tensor&) {
  detail::throw_error(
      "Transformer: needs a source and a target sequence (call forward(src, tgt), not "
      "forward(x))");
}

Tensor TransformerImpl::forward(const Tensor& src, const Tensor& tgt,
                                const TransformerMasks& masks) {
  const auto& o = options_;
  EMBER_CHECK(src.defined() && tgt.defined() && src.dim() == tgt.dim() &&
                  (src.dim() == 3 || src.dim() == 2),
              "Transformer: src shape ", shape_of(src), " and tgt shape ", shape_of(tgt),
              " (expected ", o.batch_first ? "[N, S, E] and [N, T, E]" : "[S, N, E] and [T, N, E]",
              ", or unbatched [S, E] and [T, E])");
  const int bdim = o.batch_first ? 0 : 1;
  EMBER_CHECK(src.dim() == 2 || src.size(bdim) == tgt.size(bdim), "Transformer: src shape ",
              src.shape().to_string(), " and tgt shape ", tgt.shape().to_string(),
              " have different batch sizes (expected equal)");
  EMBER_CHECK(src.size(-1) == o.d_model && tgt.size(-1) == o.d_model, "Transformer: src shape ",
              src.shape().to_string(), " and tgt shape ", tgt.shape().to_string(),
              " (expected d_model ", o.d_model, " features in both)");
  EncoderMasks em;
  em.src_mask = masks.src_mask;
  em.src_key_padding_mask = masks.src_key_padding_mask;
  em.is_causal = masks.src_is_causal;
  const Tensor memory = encoder_->forward(src, em);
  DecoderMasks dm;
  dm.tgt_mask = masks.tgt_mask;
  dm.memory_mask = masks.memory_mask;
  dm.tgt_key_padding_mask = masks.tgt_key_padding_mask;
  dm.memory_key_padding_mask = masks.memory_key_padding_mask;
  dm.tgt_is_causal = masks.tgt_is_causal;
  dm.memory_is_causal = masks.memory_is_causal;
  return decoder_->forward(tgt, memory, dm);
}

json TransformerImpl::options() const {
  const auto& o = options_;
  return {{"d_model", o.d_model},
          {"nhead", o.nhead},
          {"num_encoder_layers", o.num_encoder_layers},
          {"num_decoder_layers", o.num_decoder_layers},
          {"dim_feedforward", o.dim_feedforward},
          {"dropout", o.dropout},
          {"activation", o.activation},
          {"layer_norm_eps", o.layer_norm_eps},
          {"batch_first", o.batch_first},
          {"norm_first", o.norm_first},
          {"bias", o.bias}};
}

std::string TransformerImpl::extra_repr() const {
  std::ostringstream s;
  s << "d_model=" << options_.d_model << ", nhead=" << options_.nhead
    << ", num_encoder_layers=" << options_.num_encoder_layers
    << ", num_decoder_layers=" << options_.num_decoder_layers;
  return s.str();
}

}  // namespace ember::nn
