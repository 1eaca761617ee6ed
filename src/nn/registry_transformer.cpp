// src/nn/registry_transformer.cpp — registry factories for ModuleList, MultiheadAttention and
// the transformers: the encoder and decoder layers, their stacks and Transformer (called from
// src/nn/registry.cpp). Like every factory they read only data from the config, by name.
#include "ember/nn/attention.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/transformer.hpp"
#include "nn/registry.hpp"

namespace ember::nn {

namespace {

/// A stack's options: the layer's options (an object, required) and the number of layers; the
/// final norm, when there is one, is the config's child "norm" (any registered module).
template <typename Impl, typename Layer>
ModulePtr build_transformer_stack(const json& config, const std::string& type) {
  const json& o = registry::config_options(config);
  EMBER_CHECK(o.contains("layer") && o["layer"].is_object(), "nn::build: ", type,
              " options need a \"layer\" object (the layer's options)");
  const TransformerStackOptions stack = options_from<TransformerStackOptions>(o, type);
  Layer prototype(stack.layer);
  Module norm;
  if (config.contains("children") && config["children"].contains("norm"))
    norm = build(config["children"]["norm"]);
  return std::make_shared<Impl>(prototype, stack.num_layers, norm);
}

}  // namespace

void register_transformer_modules() {
  using namespace registry;
  register_container<ModuleListImpl>("ModuleList");
  register_with<MultiheadAttentionImpl, MultiheadAttentionOptions>("MultiheadAttention");
  register_with<TransformerEncoderLayerImpl, TransformerEncoderLayerOptions>(
      "TransformerEncoderLayer");
  register_module_type("TransformerEncoder", [](const json& c) {
    return build_transformer_stack<TransformerEncoderImpl, TransformerEncoderLayer>(
        c, "TransformerEncoder");
  });
  register_with<TransformerDecoderLayerImpl, TransformerDecoderLayerOptions>(
      "TransformerDecoderLayer");
  register_module_type("TransformerDecoder", [](const json& c) {
    return build_transformer_stack<TransformerDecoderImpl, TransformerDecoderLayer>(
        c, "TransformerDecoder");
  });
  register_with<TransformerImpl, TransformerOptions>("Transformer");
}

}  // namespace ember::nn
