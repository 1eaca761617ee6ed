// examples/rl/cartpole.hpp — the classic cart-pole balancing task (Barto, Sutton & Anderson,
// 1983), with the constants, equations and limits of Gymnasium's CartPole-v1: a pole hinged
// on a cart moving along a track; each step pushes the cart left or right with a fixed force,
// the state advances by one explicit Euler step of 20 ms, and the reward is 1 per step until
// the pole leans past 12 degrees or the cart leaves the track (terminated), or 500 steps pass
// (truncated: the state is not terminal, so its value still counts).
#pragma once

#include <array>
#include <cmath>
#include <random>

namespace cartpole {

using State = std::array<float, 4>;  // x, x_dot, theta, theta_dot

struct Step {
  State obs;
  float reward = 0.0f;
  bool terminated = false;  // the pole fell or the cart left the track
  bool truncated = false;   // the step limit was reached
};

class CartPole {
 public:
  static constexpr int kActions = 2;  // 0: push left, 1: push right
  static constexpr int kMaxSteps = 500;

  explicit CartPole(unsigned seed) : rng_(seed) {}

  /// A new episode: every state variable uniform in [-0.05, 0.05].
  State reset() {
    std::uniform_real_distribution<double> u(-0.05, 0.05);
    for (double& s : s_) s = u(rng_);
    steps_ = 0;
    return observe();
  }

  Step step(int action) {
    constexpr double kGravity = 9.8, kCartMass = 1.0, kPoleMass = 0.1;
    constexpr double kTotalMass = kCartMass + kPoleMass;
    constexpr double kHalfLength = 0.5, kPoleMassLength = kPoleMass * kHalfLength;
    constexpr double kForce = 10.0, kTau = 0.02;  // N, s
    constexpr double kThetaLimit = 12.0 * 2.0 * M_PI / 360.0, kXLimit = 2.4;
    const double force = action == 1 ? kForce : -kForce;
    const double x = s_[0], x_dot = s_[1], theta = s_[2], theta_dot = s_[3];
    const double cos_t = std::cos(theta), sin_t = std::sin(theta);
    const double temp = (force + kPoleMassLength * theta_dot * theta_dot * sin_t) / kTotalMass;
    const double theta_acc = (kGravity * sin_t - cos_t * temp) /
                             (kHalfLength * (4.0 / 3.0 - kPoleMass * cos_t * cos_t / kTotalMass));
    const double x_acc = temp - kPoleMassLength * theta_acc * cos_t / kTotalMass;
    s_ = {x + kTau * x_dot, x_dot + kTau * x_acc, theta + kTau * theta_dot,
          theta_dot + kTau * theta_acc};
    ++steps_;
    Step out;
    out.obs = observe();
    out.reward = 1.0f;
    out.terminated = std::fabs(s_[0]) > kXLimit || std::fabs(s_[2]) > kThetaLimit;
    out.truncated = !out.terminated && steps_ >= kMaxSteps;
    return out;
  }

 private:
  State observe() const {
    return {static_cast<float>(s_[0]), static_cast<float>(s_[1]), static_cast<float>(s_[2]),
            static_cast<float>(s_[3])};
  }

  std::mt19937 rng_;
  std::array<double, 4> s_{};
  int steps_ = 0;
};

}  // namespace cartpole
