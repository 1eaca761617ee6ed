// ember/optim/sgd.hpp — stochastic gradient descent with momentum, Nesterov and weight
// decay: torch.optim.SGD's update, fused into one in-place pass per parameter.
//
//   optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true});
#pragma once

#include <tuple>

#include "ember/optim/optimizer.hpp"

namespace ember::optim {

/// Hyperparameters of torch.optim.SGD (lr defaults to 1e-3, as PyTorch 2.x).
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2: g += weight_decay · p
  bool nesterov = false;      // needs momentum > 0 and dampening == 0
  bool maximize = false;      // ascend instead of descend

  /// PyTorch keys, as the member names.
  static constexpr auto fields() {
    using O = SGDOptions;
    return std::tuple{field("lr", &O::lr, at_least(0).named("learning rate")),
                      field("momentum", &O::momentum, at_least(0)),
                      field("dampening", &O::dampening, not_nan()),
                      field("weight_decay", &O::weight_decay, at_least(0)),
                      field("nesterov", &O::nesterov),
                      field("maximize", &O::maximize)};
  }
};

/// check_fields, then nesterov's needs. Throws ember::Error naming the bad value:
/// "SGD: invalid learning rate -0.1 (expected lr >= 0)".
void validate_options(const SGDOptions& o, const std::string& who);

/// Per step, for each parameter p with gradient g (torch.optim.SGD, foreach=False):
///   g = -g if maximize;  g += weight_decay·p
///   momentum: buf = g on the first step, else buf = momentum·buf + (1 - dampening)·g;
///             g = g + momentum·buf (nesterov) or g = buf
///   p -= lr·g
/// State per parameter: "momentum_buffer" (only when momentum != 0).
class SGD : public TypedOptimizer<SGDOptions> {
 public:
  explicit SGD(std::vector<Tensor> params, SGDOptions options = {});
  explicit SGD(std::vector<Group> groups, SGDOptions defaults = {});
  std::string type_name() const override { return "SGD"; }
  bool skips_on_device() const override { return true; }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;
};

}  // namespace ember::optim
