// ember/nn/dropout.hpp — Dropout (torch.nn.Dropout): zeroes each element with probability p
// in training mode and scales the rest by 1 / (1 - p); the identity in eval mode.
//
//   nn::Dropout drop(0.1);
//   Tensor y = drop(x);     // training: about a tenth zeroed; drop->eval(): y is x
#pragma once

#include <string>

#include "ember/nn/module.hpp"
#include "ember/ops.hpp"

namespace ember::nn {

struct DropoutOptions {
  double p = 0.5;
  static constexpr auto fields() {
    return std::tuple{field("p", &DropoutOptions::p, opts::closed(0, 1))};
  }
};

/// Inverted dropout in training mode, identity in eval mode; seeded by manual_seed.
class DropoutImpl : public ModuleImpl {
 public:
  explicit DropoutImpl(DropoutOptions options);
  explicit DropoutImpl(double p = 0.5) : DropoutImpl(DropoutOptions{p}) {}
  Tensor forward(const Tensor& x) override { return dropout(x, options_.p, is_training()); }
  std::string type_name() const override { return "Dropout"; }
  json options() const override { return options_json(options_); }
  std::string extra_repr() const override;

 private:
  DropoutOptions options_;
};
class Dropout : public ModuleHolder<DropoutImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn
