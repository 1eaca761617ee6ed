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
    : TransformerLayerBase("TransformerDecoderLayer", std::move(o),
                           {"self_attn", "multihead_attn"}) {}

Tensor TransformerDecoderLayerImpl::forward(const Tensor&) {
  detail::throw_error(
      "TransformerDecoderLayer: needs the target and the encoder's memory (call "
      "forward(tgt, memory), not forward(tgt))");
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
  AttentionOptions self;
  self.attn_mask = masks.tgt_mask;
  self.key_padding_mask = masks.tgt_key_padding_mask;
  self.is_causal = masks.tgt_is_causal;
  AttentionOptions cross;
  cross.attn_mask = masks.memory_mask;
  cross.key_padding_mask = masks.memory_key_padding_mask;
  cross.is_causal = masks.memory_is_causal;
  Tensor x = residual(0, tgt, [&](const Tensor& h) { return attend(0, h, h, self); });
  x = residual(1, x, [&](const Tensor& h) { return attend(1, h, memory, cross); });
  return residual(2, x, [&](const Tensor& h) { return feed_forward(h); });
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
  TransformerStackBase::init(prototype, num_layers, std::move(norm), [this](const auto& o) {
    layers_.push_back(std::make_shared<TransformerDecoderLayerImpl>(o));
    return layers_.back();
  });
}

const std::shared_ptr<TransformerDecoderLayerImpl>& TransformerDecoderImpl::layer(size_t i) const {
  check_layer_index(i);
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
  return norm_ ? run_forward(*norm_, x) : x;
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

json TransformerImpl::options() const { return options_json(options_); }

std::string TransformerImpl::extra_repr() const {
  std::ostringstream s;
  s << "d_model=" << options_.d_model << ", nhead=" << options_.nhead
    << ", num_encoder_layers=" << options_.num_encoder_layers
    << ", num_decoder_layers=" << options_.num_decoder_layers;
  return s.str();
}

}  // namespace ember::nn
