// examples/regression.cpp — fit y = 3·x1 − 2·x2 + 0.5 + noise with a linear model.
//
// Shows the whole autograd loop with nothing but tensors: parameters, a forward pass,
// a loss, backward, and a hand-written SGD step under NoGradGuard. Prints the loss as it
// falls and the learned weights, and exits non-zero if they are not close to the truth.
//
//   build/examples/regression
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include "ember/ember.hpp"

namespace {

constexpr int64_t kSamples = 256;  // N: rows in the data set
constexpr int64_t kFeatures = 2;   // F: inputs per row
constexpr int kSteps = 100;
constexpr int kPrintEvery = 10;
constexpr double kLearningRate = 0.05;
constexpr double kNoise = 0.1;      // standard deviation of the noise on y
constexpr double kTolerance = 0.1;  // learned vs true weights, absolute

bool run() {
  using namespace ember;
  manual_seed(0);

  // Data: x [N, F] ~ N(0, 1); y [N, 1] = x·[3, −2]ᵀ + 0.5 + noise.
  Tensor x = randn({kSamples, kFeatures});
  Tensor true_w = tensor({3.0f, -2.0f}, {1, kFeatures});
  Tensor y = linear(x, true_w) + 0.5 + randn({kSamples, 1}, {}, 0.0, kNoise);

  // Model: y_hat = x·wᵀ + b, with w [1, F] and b [1] in the Persistent pool.
  Tensor w = parameter(zeros({1, kFeatures}));
  Tensor b = parameter(zeros({1}));

  for (int step = 0; step <= kSteps; ++step) {
    Tensor loss = mse_loss(linear(x, w, b), y);
    loss.backward();
    {
      NoGradGuard no_grad;  // the update itself must not be recorded
      w.add_(w.grad(), -kLearningRate);
      b.add_(b.grad(), -kLearningRate);
    }
    w.zero_grad();
    b.zero_grad();
    if (step % kPrintEvery == 0) std::printf("step %4d  loss %.6f\n", step, loss.item<float>());
  }

  const std::vector<float> learned_w = w.to_vector<float>();
  const float learned_b = b.to_vector<float>()[0];
  std::printf("learned  y = %.4f*x1 %+.4f*x2 %+.4f\n", learned_w[0], learned_w[1], learned_b);
  std::printf("true     y = 3.0000*x1 -2.0000*x2 +0.5000\n");
  const bool ok = std::fabs(learned_w[0] - 3.0) < kTolerance &&
                  std::fabs(learned_w[1] + 2.0) < kTolerance &&
                  std::fabs(learned_b - 0.5) < kTolerance;
  if (!ok)
    std::printf("regression: the learned weights are not within %.2f of the truth\n", kTolerance);
  return ok;
}

}  // namespace

int main() {
  try {
    return run() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "regression: %s\n", e.what());
    return 1;
  }
}
