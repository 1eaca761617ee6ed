// src/nn/registry_more.cpp — registry factories for the activation modules, Unflatten,
// Bilinear, GroupNorm, InstanceNorm1d/2d, RMSNorm, the recurrent layers and cells, and the
// transformer decoder side (called from register_all in registry.cpp). Like every factory they
// read only data from the config.
#include "ember/nn/activation.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/rnn.hpp"
#include "ember/nn/transformer.hpp"

namespace ember::nn {

namespace {

const json& options_of(const json& c) {
  static const json empty = json::object();
  return c.contains("options") && c["options"].is_object() ? c["options"] : empty;
}

template <typename T>
T get(const json& c, const char* key, T fallback) {
  const json& o = options_of(c);
  return o.contains(key) && !o[key].is_null() ? o[key].get<T>() : fallback;
}

template <typename T>
T get_in(const json& o, const char* key, T fallback) {
  return o.is_object() && o.contains(key) && !o[key].is_null() ? o[key].get<T>() : fallback;
}

Shape get_shape(const json& c, const char* key) {
  const json& o = options_of(c);
  if (!o.contains(key)) return Shape{};
  const json& s = o[key];
  return s.is_number_integer() ? Shape{s.get<int64_t>()} : Shape(s.get<std::vector<int64_t>>());
}

InstanceNormOptions instance_norm_options(const json& c) {
  return {get<int64_t>(c, "num_features", 0), get<double>(c, "eps", 1e-5),
          get<double>(c, "momentum", 0.1), get<bool>(c, "affine", false),
          get<bool>(c, "track_running_stats", false)};
}

RNNOptions rnn_options(const json& c) {
  RNNOptions r;
  r.input_size = get<int64_t>(c, "input_size", 0);
  r.hidden_size = get<int64_t>(c, "hidden_size", 0);
  r.num_layers = get<int64_t>(c, "num_layers", 1);
  r.nonlinearity = get<std::string>(c, "nonlinearity", "tanh");
  r.bias = get<bool>(c, "bias", true);
  r.batch_first = get<bool>(c, "batch_first", false);
  r.dropout = get<double>(c, "dropout", 0.0);
  r.bidirectional = get<bool>(c, "bidirectional", false);
  r.proj_size = get<int64_t>(c, "proj_size", 0);
  return r;
}

RNNCellOptions cell_options(const json& c) {
  return {get<int64_t>(c, "input_size", 0), get<int64_t>(c, "hidden_size", 0),
          get<bool>(c, "bias", true), get<std::string>(c, "nonlinearity", "tanh")};
}

TransformerDecoderLayerOptions decoder_layer_options(const json& o) {
  TransformerDecoderLayerOptions l;
  l.d_model = get_in<int64_t>(o, "d_model", 0);
  l.nhead = get_in<int64_t>(o, "nhead", 1);
  l.dim_feedforward = get_in<int64_t>(o, "dim_feedforward", 2048);
  l.dropout = get_in<double>(o, "dropout", 0.1);
  l.activation = get_in<std::string>(o, "activation", "relu");
  l.layer_norm_eps = get_in<double>(o, "layer_norm_eps", 1e-5);
  l.batch_first = get_in<bool>(o, "batch_first", false);
  l.norm_first = get_in<bool>(o, "norm_first", false);
  l.bias = get_in<bool>(o, "bias", true);
  return l;
}

template <typename Impl>
void simple(const char* name) {
  register_module_type(name, [](const json&) -> ModulePtr { return std::make_shared<Impl>(); });
}

}  // namespace

void register_more_modules() {
  register_module_type("Softplus", [](const json& c) -> ModulePtr {
    return std::make_shared<SoftplusImpl>(get<double>(c, "beta", 1.0),
                                          get<double>(c, "threshold", 20.0));
  });
  register_module_type("LeakyReLU", [](const json& c) -> ModulePtr {
    return std::make_shared<LeakyReLUImpl>(get<double>(c, "negative_slope", 0.01));
  });
  register_module_type("ELU", [](const json& c) -> ModulePtr {
    return std::make_shared<ELUImpl>(get<double>(c, "alpha", 1.0));
  });
  register_module_type("Hardtanh", [](const json& c) -> ModulePtr {
    return std::make_shared<HardtanhImpl>(get<double>(c, "min_val", -1.0),
                                          get<double>(c, "max_val", 1.0));
  });
  simple<ReLU6Impl>("ReLU6");
  simple<SELUImpl>("SELU");
  simple<MishImpl>("Mish");
  simple<HardswishImpl>("Hardswish");
  simple<HardsigmoidImpl>("Hardsigmoid");
  simple<LogSigmoidImpl>("LogSigmoid");
  register_module_type("PReLU", [](const json& c) -> ModulePtr {
    return std::make_shared<PReLUImpl>(get<int64_t>(c, "num_parameters", 1),
                                       get<double>(c, "init", 0.25));
  });
  register_module_type("GLU", [](const json& c) -> ModulePtr {
    return std::make_shared<GLUImpl>(get<int64_t>(c, "dim", -1));
  });
  register_module_type("Unflatten", [](const json& c) -> ModulePtr {
    return std::make_shared<UnflattenImpl>(get<int64_t>(c, "dim", 1),
                                           get_shape(c, "unflattened_size"));
  });
  register_module_type("Bilinear", [](const json& c) -> ModulePtr {
    return std::make_shared<BilinearImpl>(
        BilinearOptions{get<int64_t>(c, "in1_features", 0), get<int64_t>(c, "in2_features", 0),
                        get<int64_t>(c, "out_features", 0), get<bool>(c, "bias", true)});
  });
  register_module_type("GroupNorm", [](const json& c) -> ModulePtr {
    return std::make_shared<GroupNormImpl>(
        GroupNormOptions{get<int64_t>(c, "num_groups", 0), get<int64_t>(c, "num_channels", 0),
                         get<double>(c, "eps", 1e-5), get<bool>(c, "affine", true)});
  });
  register_module_type("InstanceNorm1d", [](const json& c) -> ModulePtr {
    return std::make_shared<InstanceNorm1dImpl>(instance_norm_options(c));
  });
  register_module_type("InstanceNorm2d", [](const json& c) -> ModulePtr {
    return std::make_shared<InstanceNorm2dImpl>(instance_norm_options(c));
  });
  register_module_type("RMSNorm", [](const json& c) -> ModulePtr {
    const json& o = options_of(c);
    std::optional<double> eps;
    if (o.contains("eps") && !o["eps"].is_null()) eps = o["eps"].get<double>();
    return std::make_shared<RMSNormImpl>(RMSNormOptions{get_shape(c, "normalized_shape"), eps,
                                                        get<bool>(c, "elementwise_affine", true)});
  });
  register_module_type(
      "RNN", [](const json& c) -> ModulePtr { return std::make_shared<RNNImpl>(rnn_options(c)); });
  register_module_type("LSTM", [](const json& c) -> ModulePtr {
    return std::make_shared<LSTMImpl>(rnn_options(c));
  });
  register_module_type(
      "GRU", [](const json& c) -> ModulePtr { return std::make_shared<GRUImpl>(rnn_options(c)); });
  register_module_type("RNNCell", [](const json& c) -> ModulePtr {
    return std::make_shared<RNNCellImpl>(cell_options(c));
  });
  register_module_type("LSTMCell", [](const json& c) -> ModulePtr {
    return std::make_shared<LSTMCellImpl>(cell_options(c));
  });
  register_module_type("GRUCell", [](const json& c) -> ModulePtr {
    return std::make_shared<GRUCellImpl>(cell_options(c));
  });
  register_module_type("TransformerDecoderLayer", [](const json& c) -> ModulePtr {
    return std::make_shared<TransformerDecoderLayerImpl>(decoder_layer_options(options_of(c)));
  });
  register_module_type("TransformerDecoder", [](const json& c) -> ModulePtr {
    const json& o = options_of(c);
    EMBER_CHECK(
        o.contains("layer") && o["layer"].is_object(),
        "nn::build: TransformerDecoder options need a \"layer\" object (the layer's options)");
    TransformerDecoderLayer prototype(decoder_layer_options(o["layer"]));
    Module norm;
    if (c.contains("children") && c["children"].contains("norm"))
      norm = build(c["children"]["norm"]);
    return std::make_shared<TransformerDecoderImpl>(prototype, get<int64_t>(c, "num_layers", 1),
                                                    norm);
  });
  register_module_type("Transformer", [](const json& c) -> ModulePtr {
    TransformerOptions t;
    t.d_model = get<int64_t>(c, "d_model", 512);
    t.nhead = get<int64_t>(c, "nhead", 8);
    t.num_encoder_layers = get<int64_t>(c, "num_encoder_layers", 6);
    t.num_decoder_layers = get<int64_t>(c, "num_decoder_layers", 6);
    t.dim_feedforward = get<int64_t>(c, "dim_feedforward", 2048);
    t.dropout = get<double>(c, "dropout", 0.1);
    t.activation = get<std::string>(c, "activation", "relu");
    t.layer_norm_eps = get<double>(c, "layer_norm_eps", 1e-5);
    t.batch_first = get<bool>(c, "batch_first", false);
    t.norm_first = get<bool>(c, "norm_first", false);
    t.bias = get<bool>(c, "bias", true);
    return std::make_shared<TransformerImpl>(t);
  });
}

}  // namespace ember::nn
