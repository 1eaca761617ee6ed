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

// Issue 16 convolution family: 1-D sizes (an integer or a [k] list) and 3-D sizes.
int64_t get_size1(const json& c, const char* key, int64_t fallback) {
  const json& o = options_of(c);
  if (!o.contains(key) || o[key].is_null()) return fallback;
  const json& v = o[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  EMBER_CHECK(v.is_array() && v.size() == 1, "nn::build: option '", key, "' is ", v.dump(),
              " (expected an integer or a one-element list)");
  return v[0].get<int64_t>();
}

std::optional<int64_t> get_optional_size1(const json& c, const char* key) {
  const json& o = options_of(c);
  if (!o.contains(key) || o[key].is_null()) return std::nullopt;
  return get_size1(c, key, 0);
}

Size3d get_size3(const json& c, const char* key, Size3d fallback) {
  const json& o = options_of(c);
  if (!o.contains(key) || o[key].is_null()) return fallback;
  const json& v = o[key];
  if (v.is_number_integer()) return Size3d(v.get<int64_t>());
  EMBER_CHECK(v.is_array() && v.size() == 3, "nn::build: option '", key, "' is ", v.dump(),
              " (expected an integer or a [depth, height, width] list)");
  return Size3d(v[0].get<int64_t>(), v[1].get<int64_t>(), v[2].get<int64_t>());
}

// padding="same" / "valid" (a string), else none (the padding is numbers).
std::optional<ConvPadding> get_padding_preset(const json& c) {
  const json& o = options_of(c);
  if (!o.contains("padding") || !o["padding"].is_string()) return std::nullopt;
  const std::string p = o["padding"].get<std::string>();
  EMBER_CHECK(p == "same" || p == "valid", "nn::build: option 'padding' is '", p,
              "' (expected a number, a list, \"same\" or \"valid\")");
  return p == "same" ? ConvPadding::same : ConvPadding::valid;
}

FoldOptions fold_options(const json& c) {
  return {get_size(c, "output_size", 1), get_size(c, "kernel_size", 1), get_size(c, "dilation", 1),
          get_size(c, "padding", 0), get_size(c, "stride", 1)};
}

InterpolateOptions interpolate_options(const json& c) {
  const json& o = options_of(c);
  InterpolateOptions r;
  if (o.contains("size") && !o["size"].is_null()) {
    const json& s = o["size"];
    r.size = s.is_number_integer() ? Shape{s.get<int64_t>()} : Shape(s.get<std::vector<int64_t>>());
  }
  if (o.contains("scale_factor") && !o["scale_factor"].is_null()) {
    const json& s = o["scale_factor"];
    r.scale_factor =
        s.is_number() ? std::vector<double>{s.get<double>()} : s.get<std::vector<double>>();
  }
  r.mode = get<std::string>(c, "mode", "nearest");
  r.align_corners = get_optional<bool>(c, "align_corners", std::nullopt);
  r.recompute_scale_factor = get<bool>(c, "recompute_scale_factor", false);
  return r;
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
        get_size(c, "kernel_size", 1), get_size(c, "stride", 1),
        get_padding_preset(c) ? 0 : get_size(c, "padding", 0), get_size(c, "dilation", 1),
        get<int64_t>(c, "groups", 1), get<bool>(c, "bias", true),
        get<std::string>(c, "padding_mode", "zeros"), get_padding_preset(c)});
  });
  // ---- issue 16: more convolutions, pools and resampling (src/nn/conv_more.cpp)
  register_module_type("Conv1d", [](const json& c) -> ModulePtr {
    return std::make_shared<Conv1dImpl>(Conv1dOptions{
        get<int64_t>(c, "in_channels", 0), get<int64_t>(c, "out_channels", 0),
        get_size1(c, "kernel_size", 1), get_size1(c, "stride", 1),
        get_padding_preset(c) ? 0 : get_size1(c, "padding", 0), get_size1(c, "dilation", 1),
        get<int64_t>(c, "groups", 1), get<bool>(c, "bias", true),
        get<std::string>(c, "padding_mode", "zeros"), get_padding_preset(c)});
  });
  register_module_type("Conv3d", [](const json& c) -> ModulePtr {
    return std::make_shared<Conv3dImpl>(Conv3dOptions{
        get<int64_t>(c, "in_channels", 0), get<int64_t>(c, "out_channels", 0),
        get_size3(c, "kernel_size", 1), get_size3(c, "stride", 1),
        get_padding_preset(c) ? 0 : get_size3(c, "padding", 0), get_size3(c, "dilation", 1),
        get<int64_t>(c, "groups", 1), get<bool>(c, "bias", true),
        get<std::string>(c, "padding_mode", "zeros"), get_padding_preset(c)});
  });
  register_module_type("ConvTranspose1d", [](const json& c) -> ModulePtr {
    return std::make_shared<ConvTranspose1dImpl>(ConvTranspose1dOptions{
        get<int64_t>(c, "in_channels", 0), get<int64_t>(c, "out_channels", 0),
        get_size1(c, "kernel_size", 1), get_size1(c, "stride", 1), get_size1(c, "padding", 0),
        get_size1(c, "output_padding", 0), get<int64_t>(c, "groups", 1), get<bool>(c, "bias", true),
        get_size1(c, "dilation", 1)});
  });
  register_module_type("ConvTranspose2d", [](const json& c) -> ModulePtr {
    return std::make_shared<ConvTranspose2dImpl>(ConvTranspose2dOptions{
        get<int64_t>(c, "in_channels", 0), get<int64_t>(c, "out_channels", 0),
        get_size(c, "kernel_size", 1), get_size(c, "stride", 1), get_size(c, "padding", 0),
        get_size(c, "output_padding", 0), get<int64_t>(c, "groups", 1), get<bool>(c, "bias", true),
        get_size(c, "dilation", 1)});
  });
  register_module_type("MaxPool1d", [](const json& c) -> ModulePtr {
    return std::make_shared<MaxPool1dImpl>(MaxPool1dOptions{
        get_size1(c, "kernel_size", 1), get_optional_size1(c, "stride"), get_size1(c, "padding", 0),
        get_size1(c, "dilation", 1), get<bool>(c, "ceil_mode", false)});
  });
  register_module_type("AvgPool1d", [](const json& c) -> ModulePtr {
    return std::make_shared<AvgPool1dImpl>(AvgPool1dOptions{
        get_size1(c, "kernel_size", 1), get_optional_size1(c, "stride"), get_size1(c, "padding", 0),
        get<bool>(c, "ceil_mode", false), get<bool>(c, "count_include_pad", true)});
  });
  register_module_type("AdaptiveAvgPool1d", [](const json& c) -> ModulePtr {
    return std::make_shared<AdaptiveAvgPool1dImpl>(get_size1(c, "output_size", 1));
  });
  register_module_type("AdaptiveAvgPool2d", [](const json& c) -> ModulePtr {
    return std::make_shared<AdaptiveAvgPool2dImpl>(get_size(c, "output_size", 1));
  });
  register_module_type("AdaptiveMaxPool1d", [](const json& c) -> ModulePtr {
    return std::make_shared<AdaptiveMaxPool1dImpl>(get_size1(c, "output_size", 1));
  });
  register_module_type("AdaptiveMaxPool2d", [](const json& c) -> ModulePtr {
    return std::make_shared<AdaptiveMaxPool2dImpl>(get_size(c, "output_size", 1));
  });
  register_module_type("Upsample", [](const json& c) -> ModulePtr {
    return std::make_shared<UpsampleImpl>(interpolate_options(c));
  });
  register_module_type("PixelShuffle", [](const json& c) -> ModulePtr {
    return std::make_shared<PixelShuffleImpl>(get<int64_t>(c, "upscale_factor", 1));
  });
  register_module_type("PixelUnshuffle", [](const json& c) -> ModulePtr {
    return std::make_shared<PixelUnshuffleImpl>(get<int64_t>(c, "downscale_factor", 1));
  });
  register_module_type("Unfold", [](const json& c) -> ModulePtr {
    return std::make_shared<UnfoldImpl>(fold_options(c));
  });
  register_module_type("Fold", [](const json& c) -> ModulePtr {
    return std::make_shared<FoldImpl>(fold_options(c));
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
