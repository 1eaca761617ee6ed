// src/nn/registry_transformer.cpp — registry factories for ModuleList, MultiheadAttention,
// TransformerEncoderLayer and TransformerEncoder (called from src/nn/registry.cpp). Like every
// factory they read only data from the config.
#include "ember/nn/attention.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/transformer.hpp"

namespace ember::nn {

namespace {

template <typename T>
T value_or(const json& object, const char* key, T fallback) {
  return object.is_object() && object.contains(key) ? object[key].get<T>() : fallback;
}

const json& options_of(const json& config) {
  static const json empty = json::object();
  return config.contains("options") ? config["options"] : empty;
}

TransformerEncoderLayerOptions layer_options(const json& o) {
  TransformerEncoderLayerOptions l;
  l.d_model = value_or<int64_t>(o, "d_model", 0);
  l.nhead = value_or<int64_t>(o, "nhead", 1);
  l.dim_feedforward = value_or<int64_t>(o, "dim_feedforward", 2048);
  l.dropout = value_or<double>(o, "dropout", 0.1);
  l.activation = value_or<std::string>(o, "activation", "relu");
  l.layer_norm_eps = value_or<double>(o, "layer_norm_eps", 1e-5);
  l.batch_first = value_or<bool>(o, "batch_first", false);
  l.norm_first = value_or<bool>(o, "norm_first", false);
  l.bias = value_or<bool>(o, "bias", true);
  return l;
}

}  // namespace

void register_transformer_modules() {
  register_module_type("ModuleList", [](const json& c) -> ModulePtr {
    auto list = std::make_shared<ModuleListImpl>();
    if (c.contains("children")) {
      EMBER_CHECK(c["children"].is_array(), "nn::build: ModuleList children must be a list");
      for (const json& child : c["children"]) list->push_back(build(child));
    }
    return list;
  });
  register_module_type("MultiheadAttention", [](const json& c) -> ModulePtr {
    const json& o = options_of(c);
    MultiheadAttentionOptions m;
    m.embed_dim = value_or<int64_t>(o, "embed_dim", 0);
    m.num_heads = value_or<int64_t>(o, "num_heads", 1);
    m.dropout = value_or<double>(o, "dropout", 0.0);
    m.bias = value_or<bool>(o, "bias", true);
    m.batch_first = value_or<bool>(o, "batch_first", false);
    m.kdim = value_or<int64_t>(o, "kdim", 0);
    m.vdim = value_or<int64_t>(o, "vdim", 0);
    return std::make_shared<MultiheadAttentionImpl>(m);
  });
  register_module_type("TransformerEncoderLayer", [](const json& c) -> ModulePtr {
    return std::make_shared<TransformerEncoderLayerImpl>(layer_options(options_of(c)));
  });
  register_module_type("TransformerEncoder", [](const json& c) -> ModulePtr {
    const json& o = options_of(c);
    EMBER_CHECK(
        o.contains("layer") && o["layer"].is_object(),
        "nn::build: TransformerEncoder options need a \"layer\" object (the layer's options)");
    TransformerEncoderLayer prototype(layer_options(o["layer"]));
    Module norm;
    if (c.contains("children") && c["children"].contains("norm"))
      norm = build(c["children"]["norm"]);
    return std::make_shared<TransformerEncoderImpl>(prototype,
                                                    value_or<int64_t>(o, "num_layers", 1), norm);
  });
}

}  // namespace ember::nn
