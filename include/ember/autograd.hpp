// ember/autograd.hpp — grad mode, and gradcheck (ARCHITECTURE §4).
#pragma once

#include <functional>
#include <vector>

#include "ember/tensor.hpp"

namespace ember {

/// While alive, ops on this thread record no graph. Example: { NoGradGuard g; w.add_(d); }
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// True when ops record the graph on this thread (the default).
bool grad_mode_enabled();
void set_grad_mode(bool enabled);

/// Computes d(outputs)/d(inputs) weighted by `grad_outputs` without touching `.grad`.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false);

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

/// Result of gradcheck: ok, and when not ok a message naming the input, element and both values.
struct GradcheckResult {
  bool ok = true;
  std::string message{};
  explicit operator bool() const { return ok; }
};

/// Compares analytic gradients of sum(fn(inputs) · w) (fixed random weights w) with f64 central
/// differences. Inputs are converted to f64 leaves; the inputs that require grad are checked
/// (every floating input when none requires grad).
/// Example: EXPECT_TRUE(gradcheck([](auto& x){ return tanh(x[0]); }, {randn({3})}));
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, GradcheckOptions options = {});
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, double eps, double atol, double rtol);

}  // namespace ember
