// ember/optim/lbfgs.hpp — L-BFGS (torch.optim.LBFGS): a quasi-Newton method that keeps the
// last history_size (step, gradient change) pairs, with an optional strong-Wolfe line
// search. Each step calls a closure that recomputes the loss and its gradients, several
// times. Built from tensor ops (flat vectors on the parameters' device); one parameter group.
//
//   optim::LBFGS opt(net->parameters(), {.lr = 1, .line_search_fn =
//   optim::LineSearch::strong_wolfe}); for (int i = 0; i < 10; ++i)
//     opt.step([&] {
//       opt.zero_grad();
//       Tensor loss = criterion(net(x), y);
//       loss.backward();
//       return loss.item<double>();
//     });
#pragma once

#include <optional>

#include "ember/optim/optimizer.hpp"

namespace ember::optim {

enum class LineSearch : uint8_t { none, strong_wolfe };

/// Hyperparameters of torch.optim.LBFGS. JSON keys as PyTorch: line_search_fn is null or
/// "strong_wolfe"; max_eval is stored resolved.
struct LBFGSOptions {
  double lr = 1.0;
  int64_t max_iter = 20;                           // iterations per step()
  std::optional<int64_t> max_eval = std::nullopt;  // closure calls per step (max_iter · 5 / 4)
  double tolerance_grad = 1e-7;                    // stop when max |g| <= this
  double tolerance_change = 1e-9;  // stop when the step or loss change falls below this
  int64_t history_size = 100;
  LineSearch line_search_fn = LineSearch::none;

  static constexpr auto fields() {
    using O = LBFGSOptions;
    return std::tuple{field("lr", &O::lr, at_least(0).named("learning rate")),
                      field("max_iter", &O::max_iter, at_least(1)),
                      field("max_eval", &O::max_eval, at_least(1)),
                      field("tolerance_grad", &O::tolerance_grad, at_least(0)),
                      field("tolerance_change", &O::tolerance_change, at_least(0)),
                      field("history_size", &O::history_size, at_least(1)),
                      field("line_search_fn", &O::line_search_fn)};
  }
};

/// line_search_fn in JSON: null or "strong_wolfe".
void to_json(json& j, LineSearch l);
void from_json(const json& j, LineSearch& l);
/// fields() gives the JSON; to_json stores max_eval resolved (max_iter · 5 / 4 when unset).
void to_json(json& j, const LBFGSOptions& o);

/// L-BFGS. step() without a closure throws (L-BFGS must re-evaluate the loss); step(closure)
/// runs up to max_iter iterations and returns the loss of the closure's first call.
/// The state is global (PyTorch keeps it under the first parameter); in the state dict,
/// meta.state["0"] holds func_evals, n_iter, t, H_diag, prev_loss and ro, and the tensors
/// are "state.0.d", "state.0.prev_flat_grad", "state.0.old_dirs.<i>", "state.0.old_stps.<i>"
/// (flat vectors over all parameters).
class LBFGS : public TypedOptimizer<LBFGSOptions> {
 public:
  explicit LBFGS(std::vector<Tensor> params, LBFGSOptions options = {});
  std::string type_name() const override { return "LBFGS"; }
  using Optimizer::step;
  double step(const std::function<double()>& closure) override;
  OptimizerState state_dict() const override;
  void load_state_dict(const OptimizerState& state) override;
  /// Closure calls and iterations over the optimizer's life (PyTorch's func_evals, n_iter).
  int64_t func_evals() const { return func_evals_; }
  int64_t n_iter() const { return n_iter_; }
  /// Curvature pairs held (at most history_size).
  size_t history() const { return old_dirs_.size(); }

 protected:
  void update() override;
  StateSpec state_spec(size_t group) const override;

 private:
  Tensor flat_grad() const;
  void add_to_params(double t, const Tensor& d);
  int64_t numel() const;

  int64_t func_evals_ = 0, n_iter_ = 0;
  Tensor d_, prev_flat_grad_;
  double t_ = 0.0, h_diag_ = 1.0;
  std::optional<double> prev_loss_;
  std::vector<Tensor> old_dirs_, old_stps_;
  std::vector<double> ro_;
};

}  // namespace ember::optim
