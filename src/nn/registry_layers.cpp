// src/nn/registry_layers.cpp — registry factories for the convolution, pooling, normalisation
// and embedding modules (called from register_all in registry.cpp). Each reads only the
// options of a config() JSON; sizes may be one number or a [h, w] pair, optional values null.
#include "ember/nn/conv.hpp"
#include "ember/nn/embedding.hpp"
#include "ember/nn/norm.hpp"

namespace ember::nn {

namespace {

const json& options_of(const json& c) {
  static const json empty = json::object();
  return c.contains("options") ? c["options"] : empty;
}

template <typename T>
T get(const json& c, const char* key, T fallback) {
  const json& o = options_of(c);
  return o.contains(key) && !o[key].is_null() ? o[key].get<T>() : fallback;
}

Size2d to_size(const json& v, const char* key) {
  if (v.is_number_integer()) return Size2d(v.get<int64_t>());
  EMBER_CHECK(v.is_array() && v.size() == 2, "nn::build: option '", key, "' is ", v.dump(),
              " (expected an integer or a [height, width] pair)");
  return Size2d(v[0].get<int64_t>(), v[1].get<int64_t>());
}

Size2d get_size(const json& c, const char* key, Size2d fallback) {
  const json& o = options_of(c);
  return o.contains(key) && !o[key].is_null() ? to_size(o[key], key) : fallback;
}

std::optional<Size2d> get_optional_size(const json& c, const char* key) {
  const json& o = options_of(c);
  if (!o.contains(key) || o[key].is_null()) return std::nullopt;
  return to_size(o[key], key);
}

template <typename T>
std::optional<T> get_optional(const json& c, const char* key, std::optional<T> fallback) {
  const json& o = options_of(c);
  if (!o.contains(key)) return fallback;
  if (o[key].is_null()) return std::nullopt;
  return o[key].get<T>();
}

BatchNormOptions batch_norm_options(const json& c) {
  return {get<int64_t>(c, "num_features", 0), get<double>(c, "eps", 1e-5),
          get_optional<double>(c, "momentum", 0.1), get<bool>(c, "affine", true),
          get<bool>(c, "track_running_stats", true)};
}

}  // namespace

void register_layer_modules() {
  register_module_type("Conv2d", [](const json& c) -> ModulePtr {
    return std::make_shared<Conv2dImpl>(Conv2dOptions{
        get<int64_t>(c, "in_channels", 0), get<int64_t>(c, "out_channels", 0),
        get_size(c, "kernel_size", 1), get_size(c, "stride", 1), get_size(c, "padding", 0),
        get_size(c, "dilation", 1), get<int64_t>(c, "groups", 1), get<bool>(c, "bias", true)});
  });
  register_module_type("MaxPool2d", [](const json& c) -> ModulePtr {
    return std::make_shared<MaxPool2dImpl>(MaxPool2dOptions{
        get_size(c, "kernel_size", 1), get_optional_size(c, "stride"), get_size(c, "padding", 0),
        get_size(c, "dilation", 1), get<bool>(c, "ceil_mode", false)});
  });
  register_module_type("AvgPool2d", [](const json& c) -> ModulePtr {
    return std::make_shared<AvgPool2dImpl>(AvgPool2dOptions{
        get_size(c, "kernel_size", 1), get_optional_size(c, "stride"), get_size(c, "padding", 0),
        get<bool>(c, "ceil_mode", false), get<bool>(c, "count_include_pad", true)});
  });
  register_module_type("BatchNorm1d", [](const json& c) -> ModulePtr {
    return std::make_shared<BatchNorm1dImpl>(batch_norm_options(c));
  });
  register_module_type("BatchNorm2d", [](const json& c) -> ModulePtr {
    return std::make_shared<BatchNorm2dImpl>(batch_norm_options(c));
  });
  register_module_type("LayerNorm", [](const json& c) -> ModulePtr {
    const json& o = options_of(c);
    Shape shape;
    if (o.contains("normalized_shape")) {
      const json& s = o["normalized_shape"];
      shape =
          s.is_number_integer() ? Shape{s.get<int64_t>()} : Shape(s.get<std::vector<int64_t>>());
    }
    return std::make_shared<LayerNormImpl>(
        LayerNormOptions{shape, get<double>(c, "eps", 1e-5),
                         get<bool>(c, "elementwise_affine", true), get<bool>(c, "bias", true)});
  });
  register_module_type("Embedding", [](const json& c) -> ModulePtr {
    return std::make_shared<EmbeddingImpl>(
        EmbeddingOptions{get<int64_t>(c, "num_embeddings", 0), get<int64_t>(c, "embedding_dim", 0),
                         get_optional<int64_t>(c, "padding_idx", std::nullopt)});
  });
}

}  // namespace ember::nn
