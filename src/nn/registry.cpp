// src/nn/registry.cpp — factories for every built-in module type, registered once before the
// first nn::build: here the linear layers, the activations, Flatten / Unflatten, Dropout and the
// containers; the convolution, pooling, normalisation, embedding and recurrent layers in
// registry_layers.cpp; attention and the transformers in registry_transformer.cpp. Each factory
// reads only the data in the config (no code is ever loaded), by name through the module's
// options fields (src/nn/registry.hpp).
#include "nn/registry.hpp"

#include <mutex>

#include "ember/nn/activation.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/dropout.hpp"
#include "ember/nn/flatten.hpp"
#include "ember/nn/linear.hpp"

namespace ember::nn {

void register_transformer_modules();  // src/nn/registry_transformer.cpp
void register_layer_modules();        // src/nn/registry_layers.cpp

namespace {

void register_activations() {
  using namespace registry;
  register_plain<ReLUImpl>("ReLU");
  register_plain<ReLU6Impl>("ReLU6");
  register_with<LeakyReLUImpl, LeakyReLUOptions>("LeakyReLU");
  register_with<PReLUImpl, PReLUOptions>("PReLU");
  register_with<ELUImpl, ELUOptions>("ELU");
  register_plain<SELUImpl>("SELU");
  register_with<GELUImpl, GELUOptions>("GELU");
  register_plain<SiLUImpl>("SiLU");
  register_plain<MishImpl>("Mish");
  register_plain<SigmoidImpl>("Sigmoid");
  register_plain<LogSigmoidImpl>("LogSigmoid");
  register_plain<TanhImpl>("Tanh");
  register_with<HardtanhImpl, HardtanhOptions>("Hardtanh");
  register_plain<HardswishImpl>("Hardswish");
  register_plain<HardsigmoidImpl>("Hardsigmoid");
  register_with<SoftplusImpl, SoftplusOptions>("Softplus");
  register_with<CELUImpl, CELUOptions>("CELU");
  register_plain<SoftsignImpl>("Softsign");
  register_plain<TanhshrinkImpl>("Tanhshrink");
  register_with<HardshrinkImpl, ShrinkOptions>("Hardshrink");
  register_with<SoftshrinkImpl, ShrinkOptions>("Softshrink");
  register_with<ThresholdImpl, ThresholdOptions>("Threshold");
  register_with<RReLUImpl, RReLUOptions>("RReLU");
  register_with<GLUImpl, DimOptions>("GLU");
  register_with<SoftmaxImpl, DimOptions>("Softmax");
  register_with<LogSoftmaxImpl, DimOptions>("LogSoftmax");
}

void register_all() {
  using namespace registry;
  register_plain<IdentityImpl>("Identity");
  register_with<LinearImpl, LinearOptions>("Linear");
  register_with<BilinearImpl, BilinearOptions>("Bilinear");
  register_with<FlattenImpl, FlattenOptions>("Flatten");
  register_with<UnflattenImpl, UnflattenOptions>("Unflatten");
  register_with<DropoutImpl, DropoutOptions>("Dropout");
  register_container<SequentialImpl>("Sequential");
  register_activations();
  register_transformer_modules();
  register_layer_modules();
}

}  // namespace

void register_builtin_modules() {
  static std::once_flag once;
  std::call_once(once, register_all);
}

}  // namespace ember::nn
