// src/nn/registry_more.cpp — registry factories for the activation modules, Unflatten,
// Bilinear, GroupNorm, InstanceNorm1d/2d, RMSNorm, the recurrent layers and cells, and the
// transformer decoder side (called from register_all in registry.cpp). Like every factory they
// read only data from the config, by name.
#include "ember/nn/activation.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/rnn.hpp"
#include "ember/nn/transformer.hpp"
#include "nn/registry.hpp"

namespace ember::nn {

/// TransformerEncoder / TransformerDecoder from {"options": {"layer": {...}, "num_layers": n},
/// "children": {"norm": config}} (src/nn/registry_transformer.cpp).
template <typename Impl, typename Layer>
ModulePtr build_transformer_stack(const json& config, const std::string& type);

void register_more_modules() {
  using namespace registry;
  register_with<SoftplusImpl, SoftplusOptions>("Softplus");
  register_with<LeakyReLUImpl, LeakyReLUOptions>("LeakyReLU");
  register_with<ELUImpl, ELUOptions>("ELU");
  register_with<HardtanhImpl, HardtanhOptions>("Hardtanh");
  register_plain<ReLU6Impl>("ReLU6");
  register_plain<SELUImpl>("SELU");
  register_plain<MishImpl>("Mish");
  register_plain<HardswishImpl>("Hardswish");
  register_plain<HardsigmoidImpl>("Hardsigmoid");
  register_plain<LogSigmoidImpl>("LogSigmoid");
  register_with<PReLUImpl, PReLUOptions>("PReLU");
  register_with<GLUImpl, DimOptions>("GLU");
  register_with<UnflattenImpl, UnflattenOptions>("Unflatten");
  register_with<BilinearImpl, BilinearOptions>("Bilinear");
  register_with<GroupNormImpl, GroupNormOptions>("GroupNorm");
  register_with<InstanceNorm1dImpl, InstanceNormOptions>("InstanceNorm1d");
  register_with<InstanceNorm2dImpl, InstanceNormOptions>("InstanceNorm2d");
  register_with<RMSNormImpl, RMSNormOptions>("RMSNorm");
  register_with<RNNImpl, RNNOptions>("RNN");
  register_with<LSTMImpl, RNNOptions>("LSTM");
  register_with<GRUImpl, RNNOptions>("GRU");
  register_with<RNNCellImpl, RNNCellOptions>("RNNCell");
  register_with<LSTMCellImpl, RNNCellOptions>("LSTMCell");
  register_with<GRUCellImpl, RNNCellOptions>("GRUCell");
  register_with<TransformerDecoderLayerImpl, TransformerDecoderLayerOptions>(
      "TransformerDecoderLayer");
  register_module_type("TransformerDecoder", [](const json& c) {
    return build_transformer_stack<TransformerDecoderImpl, TransformerDecoderLayer>(
        c, "TransformerDecoder");
  });
  register_with<TransformerImpl, TransformerOptions>("Transformer");
}

}  // namespace ember::nn
