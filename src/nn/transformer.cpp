// src/nn/transformer.cpp — TransformerEncoderLayer and TransformerEncoder, composed from
// MultiheadAttention, Linear, Dropout and LayerNorm modules (no hand-written backward).
#include "ember/nn/transformer.hpp"

#include <sstream>

#include "ember/nn/norm.hpp"
#include "py_repr.hpp"

namespace ember::nn {

namespace {

ModulePtr make_layer_norm(int64_t d_model, double eps, bool bias) {
  return std::make_shared<LayerNormImpl>(LayerNormOptions{Shape{d_model}, eps, true, bias});
}

}  // namespace

// ---- TransformerEncoderLayer ----

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(TransformerEncoderLayerOptions o)
    : options_(o) {
  EMBER_CHECK(o.d_model > 0 && o.nhead > 0 && o.dim_feedforward > 0,
              "TransformerEncoderLayer: d_model ", o.d_model, ", nhead ", o.nhead,
              ", dim_feedforward ", o.dim_feedforward, " (expected all > 0)");
  EMBER_CHECK(o.activation == "relu" || o.activation == "gelu",
              "TransformerEncoderLayer: activation '", o.activation,
              "' (expected \"relu\" or \"gelu\")");
  self_attn_ = std::make_shared<MultiheadAttentionImpl>(
      MultiheadAttentionOptions{.embed_dim = o.d_model,
                                .num_heads = o.nhead,
                                .dropout = o.dropout,
                                .bias = o.bias,
                                .batch_first = o.batch_first});
  register_module("self_attn", self_attn_);
  linear1_ = register_module("linear1",
                             std::make_shared<LinearImpl>(o.d_model, o.dim_feedforward, o.bias));
  dropout_ = register_module("dropout", std::make_shared<DropoutImpl>(o.dropout));
  linear2_ = register_module("linear2",
                             std::make_shared<LinearImpl>(o.dim_feedforward, o.d_model, o.bias));
  norm1_ = register_module("norm1", make_layer_norm(o.d_model, o.layer_norm_eps, o.bias));
  norm2_ = register_module("norm2", make_layer_norm(o.d_model, o.layer_norm_eps, o.bias));
  dropout1_ = register_module("dropout1", std::make_shared<DropoutImpl>(o.dropout));
  dropout2_ = register_module("dropout2", std::make_shared<DropoutImpl>(o.dropout));
}

Tensor TransformerEncoderLayerImpl::self_attention_block(const Tensor& x,
                                                         const EncoderMasks& masks) {
  AttentionOptions a;
  a.key_padding_mask = masks.src_key_padding_mask;
  a.attn_mask = masks.src_mask;
  a.is_causal = masks.is_causal;
  a.need_weights = false;
  return dropout1_->forward(self_attn_->forward(x, x, x, a).output);
}

Tensor TransformerEncoderLayerImpl::feed_forward_block(const Tensor& x) {
  Tensor h = linear1_->forward(x);
  h = options_.activation == "gelu" ? gelu(h) : relu(h);
  return dropout2_->forward(linear2_->forward(dropout_->forward(h)));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src, const EncoderMasks& masks) {
  EMBER_CHECK(
      src.defined() && (src.dim() == 3 || src.dim() == 2) && src.size(-1) == options_.d_model,
      "TransformerEncoderLayer: src shape ", src.defined() ? src.shape().to_string() : "undefined",
      " (expected ", options_.batch_first ? "[N, S, " : "[S, N, ", options_.d_model, "])");
  Tensor x = src;
  if (options_.norm_first) {
    x = add(x, self_attention_block(norm1_->forward(x), masks));
    x = add(x, feed_forward_block(norm2_->forward(x)));
  } else {
    x = norm1_->forward(add(x, self_attention_block(x, masks)));
    x = norm2_->forward(add(x, feed_forward_block(x)));
  }
  return x;
}

json TransformerEncoderLayerImpl::options() const {
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

std::string TransformerEncoderLayerImpl::extra_repr() const {
  std::ostringstream s;
  s << "d_model=" << options_.d_model << ", nhead=" << options_.nhead
    << ", dim_feedforward=" << options_.dim_feedforward << ", activation=" << options_.activation
    << ", norm_first=" << pyrepr::py_bool(options_.norm_first)
    << ", batch_first=" << pyrepr::py_bool(options_.batch_first);
  return s.str();
}

// ---- TransformerEncoder ----

TransformerEncoderImpl::TransformerEncoderImpl(TransformerEncoderOptions o) {
  TransformerEncoderLayerImpl prototype(o.layer);
  init(prototype, o.num_layers,
       o.final_norm ? make_layer_norm(o.layer.d_model, o.layer.layer_norm_eps, o.layer.bias)
                    : nullptr);
}

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerEncoderLayer& layer,
                                               int64_t num_layers, Module norm) {
  init(*layer, num_layers, norm.ptr());
}

void TransformerEncoderImpl::init(const TransformerEncoderLayerImpl& prototype, int64_t num_layers,
                                  ModulePtr norm) {
  EMBER_CHECK(num_layers > 0, "TransformerEncoder: num_layers ", num_layers, " (expected > 0)");
  const StateDict weights = prototype.state_dict();
  layer_list_ = std::make_shared<ModuleListImpl>();
  for (int64_t i = 0; i < num_layers; ++i) {
    // A deep copy of the prototype, as PyTorch's _get_clones: same dtype, device, weights, mode.
    auto copy = std::make_shared<TransformerEncoderLayerImpl>(prototype.layer_options());
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

const std::shared_ptr<TransformerEncoderLayerImpl>& TransformerEncoderImpl::layer(size_t i) const {
  EMBER_CHECK(i < layers_.size(), "TransformerEncoder: layer ", i, " is out of range (",
              layers_.size(), " layers)");
  return layers_[i];
}

Tensor TransformerEncoderImpl::forward(const Tensor& src, const EncoderMasks& masks) {
  Tensor x = src;
  for (auto& layer : layers_) x = layer->forward(x, masks);
  return norm_ ? norm_->forward(x) : x;
}

json TransformerEncoderImpl::options() const {
  TransformerEncoderLayerImpl* first = layers_.front().get();
  return {{"layer", first->options()}, {"num_layers", static_cast<int64_t>(layers_.size())}};
}

json TransformerEncoderImpl::config() const {
  json j = {{"type", type_name()}, {"options", options()}};
  if (norm_) j["children"] = {{"norm", norm_->config()}};
  return j;
}

}  // namespace ember::nn
