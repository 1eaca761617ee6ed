// examples/plugin/gated_linear.cpp — a custom module shipped as a plugin (docs/modules.md).
//
// GatedLinear(in, out): y = (x Wᵀ + b) ⊙ sigmoid(x Gᵀ), a gated linear unit. Built as a shared
// library (build/examples/plugin/libember_gated_linear.so); loading it registers the module
// type "GatedLinear", so the stock command trains and serves a model that uses it:
//
//   PLUGIN=build/examples/plugin/libember_gated_linear.so
//   ember train --plugin $PLUGIN --model gated.json --dataset iris.csv --label species
//   ember predict model.safetensors --plugin $PLUGIN --input rows.csv
//
// with gated.json: {"type": "Sequential", "children": [
//   {"type": "GatedLinear", "options": {"in_features": 4, "out_features": 16}},
//   {"type": "Linear", "options": {"in_features": 16, "out_features": 3}}]}
#include <memory>
#include <string>

#include "ember/ember.hpp"
#include "ember/nn/init.hpp"
#include "ember/nn/module.hpp"

namespace {

using namespace ember;  // NOLINT: a small example

// The impl holds the parameters (registered by name, in forward order) and the forward.
class GatedLinearImpl : public nn::ModuleImpl {
 public:
  GatedLinearImpl(int64_t in_features, int64_t out_features)
      : in_(in_features), out_(out_features) {
    EMBER_CHECK(in_ > 0 && out_ > 0, "GatedLinear: in_features ", in_, " and out_features ", out_,
                " (expected both >= 1)");
    weight_ = register_parameter("weight", nn::init::kaiming_uniform_default({out_, in_}));
    bias_ = register_parameter("bias", zeros({out_}));
    gate_ = register_parameter("gate", nn::init::kaiming_uniform_default({out_, in_}));
  }

  Tensor forward(const Tensor& x) override {
    return linear(x, weight_, bias_) * sigmoid(linear(x, gate_));
  }
  // The registry key, and the constructor arguments the factory below reads back.
  std::string type_name() const override { return "GatedLinear"; }
  nn::json options() const override { return {{"in_features", in_}, {"out_features", out_}}; }
  std::string extra_repr() const override {
    return "in_features=" + std::to_string(in_) + ", out_features=" + std::to_string(out_);
  }

 private:
  int64_t in_, out_;
  Tensor weight_, bias_, gate_;
};

// The handle users hold: GatedLinear g(4, 16); g(x); g->parameters().
class GatedLinear : public nn::ModuleHolder<GatedLinearImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

// Registered when the library is loaded (dlopen runs static initialisers): the factory
// rebuilds the module from config() JSON, data only.
[[maybe_unused]] const bool kRegistered = [] {
  nn::register_module_type("GatedLinear", [](const nn::json& config) -> nn::ModulePtr {
    const nn::json& o = config.at("options");
    return std::make_shared<GatedLinearImpl>(o.at("in_features").get<int64_t>(),
                                             o.at("out_features").get<int64_t>());
  });
  return true;
}();

}  // namespace
