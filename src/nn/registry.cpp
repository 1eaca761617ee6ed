// src/nn/registry.cpp — factories for every built-in module type, registered once before the
// first nn::build. Each factory reads only the data in the config (no code is ever loaded),
// by name through the module's options fields (src/nn/registry.hpp).
#include "nn/registry.hpp"

#include <mutex>

#include "ember/nn/linear.hpp"

namespace ember::nn {

void register_transformer_modules();  // src/nn/registry_transformer.cpp
void register_layer_modules();        // src/nn/registry_layers.cpp
void register_more_modules();         // src/nn/registry_more.cpp

namespace {

void register_all() {
  using namespace registry;
  register_with<LinearImpl, LinearOptions>("Linear");
  register_with<FlattenImpl, FlattenOptions>("Flatten");
  register_with<DropoutImpl, DropoutOptions>("Dropout");
  register_plain<ReLUImpl>("ReLU");
  register_plain<SiLUImpl>("SiLU");
  register_plain<SigmoidImpl>("Sigmoid");
  register_plain<TanhImpl>("Tanh");
  register_plain<IdentityImpl>("Identity");
  register_with<GELUImpl, GELUOptions>("GELU");
  register_with<SoftmaxImpl, DimOptions>("Softmax");
  register_with<LogSoftmaxImpl, DimOptions>("LogSoftmax");
  register_container<SequentialImpl>("Sequential");
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
