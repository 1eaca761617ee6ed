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

// ---- TransformerLayerBase ----

TransformerLayerBase::TransformerLayerBase(const char* name, TransformerEncoderLayerOptions o,
                                           std::initializer_list<const char*> attentions)
    : options_(o) {
  EMBER_CHECK(o.d_model > 0 && o.nhead > 0 && o.dim_feedforward > 0, name, ": d_model ", o.d_model,
              ", nhead ", o.nhead, ", dim_feedforward ", o.dim_feedforward, " (expected all > 0)");
  EMBER_CHECK(o.activation == "relu" || o.activation == "gelu", name, ": activation '",
              o.activation, "' (expected \"relu\" or \"gelu\")");
  const MultiheadAttentionOptions attn{.embed_dim = o.d_model,
                                       .num_heads = o.nhead,
                                       .dropout = o.dropout,
                                       .bias = o.bias,
                                       .batch_first = o.batch_first};
  for (const char* attention : attentions) {
    attentions_.push_back(std::make_shared<MultiheadAttentionImpl>(attn));
    register_module(attention, attentions_.back());
  }
  linear1_ = register_module("linear1",
                             std::make_shared<LinearImpl>(o.d_model, o.dim_feedforward, o.bias));
  dropout_ = register_module("dropout", std::make_shared<DropoutImpl>(o.dropout));
  linear2_ = register_module("linear2",
                             std::make_shared<LinearImpl>(o.dim_feedforward, o.d_model, o.bias));
  const size_t blocks = attentions.size() + 1;
  for (size_t i = 1; i <= blocks; ++i)
    norms_.push_back(register_module("norm" + std::to_string(i),
                                     make_layer_norm(o.d_model, o.layer_norm_eps, o.bias)));
  for (size_t i = 1; i <= blocks; ++i)
    dropouts_.push_back(
        register_module("dropout" + std::to_string(i), std::make_shared<DropoutImpl>(o.dropout)));
}

Tensor TransformerLayerBase::residual(size_t i, const Tensor& x,
                                      const std::function<Tensor(const Tensor&)>& block) {
  // Children run through run_forward, so their forward hooks fire (as PyTorch's __call__).
  if (options_.norm_first)
    return add(x, run_forward(*dropouts_[i], block(run_forward(*norms_[i], x))));
  return run_forward(*norms_[i], add(x, run_forward(*dropouts_[i], block(x))));
}

Tensor TransformerLayerBase::attend(size_t i, const Tensor& x, const Tensor& kv,
                                    AttentionOptions a) {
  a.need_weights = false;
  return attentions_[i]->forward(x, kv, kv, a).output;
}

Tensor TransformerLayerBase::feed_forward(const Tensor& x) {
  Tensor h = run_forward(*linear1_, x);
  h = options_.activation == "gelu" ? gelu(h) : relu(h);
  return run_forward(*linear2_, run_forward(*dropout_, h));
}

json TransformerLayerBase::options() const { return options_json(options_); }

std::string TransformerLayerBase::extra_repr() const {
  std::ostringstream s;
  s << "d_model=" << options_.d_model << ", nhead=" << options_.nhead
    << ", dim_feedforward=" << options_.dim_feedforward << ", activation=" << options_.activation
    << ", norm_first=" << pyrepr::py_bool(options_.norm_first)
    << ", batch_first=" << pyrepr::py_bool(options_.batch_first);
  return s.str();
}

// ---- TransformerEncoderLayer ----

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(TransformerEncoderLayerOptions o)
    : TransformerLayerBase("TransformerEncoderLayer", std::move(o), {"self_attn"}) {}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src, const EncoderMasks& masks) {
  EMBER_CHECK(
      src.defined() && (src.dim() == 3 || src.dim() == 2) && src.size(-1) == options_.d_model,
      "TransformerEncoderLayer: src shape ", src.defined() ? src.shape().to_string() : "undefined",
      " (expected ", options_.batch_first ? "[N, S, " : "[S, N, ", options_.d_model, "])");
  AttentionOptions a;
  a.key_padding_mask = masks.src_key_padding_mask;
  a.attn_mask = masks.src_mask;
  a.is_causal = masks.is_causal;
  Tensor x = residual(0, src, [&](const Tensor& h) { return attend(0, h, h, a); });
  return residual(1, x, [&](const Tensor& h) { return feed_forward(h); });
}

// ---- TransformerStackBase ----

void TransformerStackBase::init(
    const TransformerLayerBase& prototype, int64_t num_layers, ModulePtr norm,
    const std::function<ModulePtr(const TransformerEncoderLayerOptions&)>& make) {
  EMBER_CHECK(num_layers > 0, type_name(), ": num_layers ", num_layers, " (expected > 0)");
  const StateDict weights = prototype.state_dict();
  layer_list_ = std::make_shared<ModuleListImpl>();
  for (int64_t i = 0; i < num_layers; ++i) {
    // A deep copy of the prototype, as PyTorch's _get_clones: same dtype, device, weights, mode.
    ModulePtr copy = make(prototype.layer_options());
    if (!weights.empty()) {
      copy->to(weights.front().second.dtype());
      copy->to(weights.front().second.device());
    }
    copy->load_state_dict(weights, true);
    copy->train(prototype.is_training());
    layer_list_->push_back(Module(copy));
  }
  register_module("layers", layer_list_);
  if (norm) norm_ = register_module("norm", norm);
}

void TransformerStackBase::check_layer_index(size_t i) const {
  EMBER_CHECK(i < num_layers(), type_name(), ": layer ", i, " is out of range (", num_layers(),
              " layers)");
}

json TransformerStackBase::options() const {
  return {{"layer", (*layer_list_)[0]->options()},
          {"num_layers", static_cast<int64_t>(num_layers())}};
}

json TransformerStackBase::config() const {
  json j = {{"type", type_name()}, {"options", options()}};
  if (norm_) j["children"] = {{"norm", norm_->config()}};
  return j;
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
  TransformerStackBase::init(prototype, num_layers, std::move(norm), [this](const auto& o) {
    layers_.push_back(std::make_shared<TransformerEncoderLayerImpl>(o));
    return layers_.back();
  });
}

const std::shared_ptr<TransformerEncoderLayerImpl>& TransformerEncoderImpl::layer(size_t i) const {
  check_layer_index(i);
  return layers_[i];
}

Tensor TransformerEncoderImpl::forward(const Tensor& src, const EncoderMasks& masks) {
  Tensor x = src;
  for (auto& layer : layers_) x = layer->forward(x, masks);
  return norm_ ? run_forward(*norm_, x) : x;
}

}  // namespace ember::nn
