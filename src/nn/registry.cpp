// src/nn/registry.cpp — factories for every built-in module type, registered once before the
// first nn::build. Each factory reads only the data in the config (no code is ever loaded).
#include <mutex>

#include "ember/nn/linear.hpp"

namespace ember::nn {

void register_transformer_modules();  // src/nn/registry_transformer.cpp
void register_layer_modules();        // src/nn/registry_layers.cpp
void register_more_modules();         // src/nn/registry_more.cpp

namespace {

template <typename T>
T opt(const json& config, const char* key, T fallback) {
  if (!config.contains("options")) return fallback;
  const json& o = config["options"];
  return o.contains(key) ? o[key].get<T>() : fallback;
}

void register_all() {
  register_module_type("Linear", [](const json& c) -> ModulePtr {
    return std::make_shared<LinearImpl>(LinearOptions{opt<int64_t>(c, "in_features", 0),
                                                      opt<int64_t>(c, "out_features", 0),
                                                      opt<bool>(c, "bias", true)});
  });
  register_module_type("Flatten", [](const json& c) -> ModulePtr {
    return std::make_shared<FlattenImpl>(opt<int64_t>(c, "start_dim", 1),
                                         opt<int64_t>(c, "end_dim", -1));
  });
  register_module_type("Dropout", [](const json& c) -> ModulePtr {
    return std::make_shared<DropoutImpl>(opt<double>(c, "p", 0.5));
  });
  register_module_type("ReLU",
                       [](const json&) -> ModulePtr { return std::make_shared<ReLUImpl>(); });
  register_module_type("SiLU",
                       [](const json&) -> ModulePtr { return std::make_shared<SiLUImpl>(); });
  register_module_type("Sigmoid",
                       [](const json&) -> ModulePtr { return std::make_shared<SigmoidImpl>(); });
  register_module_type("Tanh",
                       [](const json&) -> ModulePtr { return std::make_shared<TanhImpl>(); });
  register_module_type("Identity",
                       [](const json&) -> ModulePtr { return std::make_shared<IdentityImpl>(); });
  register_module_type("GELU", [](const json& c) -> ModulePtr {
    return std::make_shared<GELUImpl>(opt<std::string>(c, "approximate", "none"));
  });
  register_module_type("Softmax", [](const json& c) -> ModulePtr {
    return std::make_shared<SoftmaxImpl>(opt<int64_t>(c, "dim", -1));
  });
  register_module_type("LogSoftmax", [](const json& c) -> ModulePtr {
    return std::make_shared<LogSoftmaxImpl>(opt<int64_t>(c, "dim", -1));
  });
  register_module_type("Sequential", [](const json& c) -> ModulePtr {
    auto seq = std::make_shared<SequentialImpl>();
    if (c.contains("children")) {
      EMBER_CHECK(c["children"].is_array(), "nn::build: Sequential children must be a list");
      for (const json& child : c["children"]) seq->push_back(build(child));
    }
    return seq;
  });
  register_transformer_modules();
  register_layer_modules();
  register_more_modules();
}

}  // namespace

void register_builtin_modules() {
  static std::once_flag once;
  std::call_once(once, register_all);
}

}  // namespace ember::nn
