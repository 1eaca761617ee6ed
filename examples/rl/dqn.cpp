// examples/rl/dqn.cpp — DQN (Mnih et al., 2015) on cart-pole (cartpole.hpp), with ember's
// device-resident replay buffer (ember/replay.hpp, docs/rl.md).
//
// An MLP Q-network (4-128-128-2) acts epsilon-greedily (epsilon falling linearly from 1 to
// 0.05 over the first 16% of the steps). Transitions go into a ReplayBuffer on the training
// device, 256 at a time (one push per field); after each push, 128 updates sample a batch of
// 64 from the buffer and regress Q(s, a) on r + gamma * max_a' Q_target(s', a') (Huber loss,
// gradient norm clipped to 10, Adam), and the target network is copied from the Q-network.
// On a GPU the update is a train::CapturedStep: sampling, forward, backward, clipping and
// Adam are one graph launch, and the program counts the bytes the updates move between host
// and device (zero: the batch never leaves the GPU; it fails otherwise). On the CPU the same
// update runs eagerly.
//
// Prints the mean return of the last 20 training episodes as it goes and the greedy policy's
// every 2,048 steps (5 episodes; the best weights are kept, since DQN's return swings as it
// trains); at the end the best weights play 10 new episodes, and the program exits non-zero
// unless their mean return is at least 4 times a random policy's (--short: 12,000 steps, the
// CTest entry example.dqn).
//
//   build/examples/rl/dqn [--short] [--steps N] [--cpu] [--seed S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cartpole.hpp"
#include "ember/ember.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "ember/replay.hpp"
#include "ember/train/capture.hpp"

namespace {

using namespace ember;
using cartpole::CartPole;

constexpr int64_t kObs = 4;                  // observation width
constexpr int64_t kHidden = 128;             // MLP width
constexpr int64_t kCapacity = 25000;         // replay rows
constexpr int64_t kBatch = 64;               // rows per update
constexpr int64_t kLearningStarts = 1000;    // env steps before the first update
constexpr int64_t kTrainEvery = 256;         // env steps per push and update round
constexpr int64_t kUpdatesPerRound = 128;    // updates per round
constexpr int64_t kTargetEvery = 128;        // updates between target copies
constexpr double kGamma = 0.99;              // discount
constexpr double kLearningRate = 1e-3;       // Adam
constexpr double kEpsilonEnd = 0.05;         // final exploration rate
constexpr double kEpsilonFraction = 0.16;    // share of the steps epsilon falls over
constexpr double kRequiredOverRandom = 4.0;  // greedy return needed, times random's
constexpr double kClipNorm = 10.0;           // gradient norm limit
constexpr int64_t kEvalEvery = 2048;         // env steps between greedy evaluations
constexpr int kEvalEpisodes = 5;             // episodes per evaluation
constexpr int kFinalEpisodes = 10;           // episodes of the final evaluation

struct Args {
  int64_t steps = 40000;
  bool cpu = false;
  unsigned seed = 0;
};

nn::Sequential q_network() {
  return nn::Sequential({nn::Linear(kObs, kHidden), nn::ReLU(), nn::Linear(kHidden, kHidden),
                         nn::ReLU(), nn::Linear(kHidden, CartPole::kActions)});
}

// The greedy action of `net` for one observation (one device read).
int greedy(nn::Sequential& net, const cartpole::State& obs, Device device) {
  NoGradGuard no_grad;
  const Tensor x = from_vector<float>({obs.begin(), obs.end()}, {1, kObs}).to(device);
  return static_cast<int>(argmax(net(x), 1).item<int64_t>());
}

// Mean return of `episodes` episodes of `policy` on a fresh environment.
template <typename Policy>
double mean_return(unsigned seed, int episodes, Policy&& policy) {
  CartPole env(seed);
  double total = 0.0;
  for (int e = 0; e < episodes; ++e) {
    cartpole::State obs = env.reset();
    for (;;) {
      const cartpole::Step s = env.step(policy(obs));
      total += s.reward;
      obs = s.obs;
      if (s.terminated || s.truncated) break;
    }
  }
  return total / episodes;
}

// Transitions gathered on the host between pushes (one push per field per round).
struct Pending {
  std::vector<float> obs, next_obs, reward, done;
  std::vector<int64_t> action;
  void add(const cartpole::State& o, int a, const cartpole::Step& s) {
    obs.insert(obs.end(), o.begin(), o.end());
    next_obs.insert(next_obs.end(), s.obs.begin(), s.obs.end());
    action.push_back(a);
    reward.push_back(s.reward);
    done.push_back(s.terminated ? 1.0f : 0.0f);  // a truncated episode still bootstraps
  }
  void push_into(ReplayBuffer& buffer) {
    const auto n = static_cast<int64_t>(action.size());
    if (n == 0) return;
    buffer.push({{"obs", from_vector<float>(obs, {n, kObs})},
                 {"action", from_vector<int64_t>(action, {n})},
                 {"reward", from_vector<float>(reward, {n})},
                 {"next_obs", from_vector<float>(next_obs, {n, kObs})},
                 {"done", from_vector<float>(done, {n})}});
    *this = Pending{};
  }
};

bool run(const Args& args) {
  const Device device = !args.cpu && cuda_available() ? Device::cuda(0) : Device::cpu();
  manual_seed(args.seed);
  std::mt19937 rng(args.seed + 1);
  const double random_return = mean_return(args.seed + 2, 50, [&](const cartpole::State&) {
    return static_cast<int>(rng() % CartPole::kActions);
  });
  std::printf("dqn on %s: %lld env steps; random policy mean return %.1f\n", device.str().c_str(),
              static_cast<long long>(args.steps), random_return);

  nn::Sequential q = q_network(), target = q_network();
  q->to(device);
  target->to(device);
  target->load_state_dict(q->state_dict());
  for (Tensor& p : target->parameters()) p.requires_grad_(false);
  optim::Adam opt(q->parameters(), {.lr = kLearningRate});
  ReplayBuffer buffer(kCapacity,
                      {{"obs", {kObs}},
                       {"action", {}, DType::i64},
                       {"reward", {}},
                       {"next_obs", {kObs}},
                       {"done", {}}},
                      {.device = device});

  // One update: everything from the sample to Adam's step stays on the device.
  auto update = [&](const std::vector<Tensor>&) {
    const ReplayBatch b = buffer.sample(kBatch);
    Tensor goal;
    {
      NoGradGuard no_grad;
      const Tensor next_q = amax(target(b["next_obs"]), {1});
      goal = b["reward"] + kGamma * (1.0 - b["done"]) * next_q;
    }
    const Tensor q_taken = gather(q(b["obs"]), 1, b["action"].unsqueeze(1)).squeeze(1);
    opt.zero_grad();
    Tensor loss = smooth_l1_loss(q_taken, goal);
    loss.backward();
    optim::clip_grad_norm_tensor(q->parameters(), kClipNorm);  // on the device: no host read
    opt.step();
    return std::vector<Tensor>{loss};
  };
  std::unique_ptr<train::CapturedStep> captured;
  if (device.is_cuda()) captured = std::make_unique<train::CapturedStep>(update);

  CartPole env(args.seed + 3);
  cartpole::State obs = env.reset();
  Pending pending;
  std::deque<double> recent;  // returns of the last 20 episodes
  double episode_return = 0.0;
  int64_t episodes = 0, updates = 0, moved_in = 0, moved_out = 0, counted = 0;
  // The weights of the best greedy evaluation so far (DQN's return swings as it trains).
  std::vector<Tensor> best;
  double best_return = -1.0;
  const auto start = std::chrono::steady_clock::now();
  const double decay_steps = kEpsilonFraction * static_cast<double>(args.steps);
  for (int64_t t = 1; t <= args.steps; ++t) {
    const double eps =
        std::max(kEpsilonEnd, 1.0 - (1.0 - kEpsilonEnd) * static_cast<double>(t) / decay_steps);
    const int action = std::uniform_real_distribution<double>(0, 1)(rng) < eps
                           ? static_cast<int>(rng() % CartPole::kActions)
                           : greedy(q, obs, device);
    const cartpole::Step s = env.step(action);
    pending.add(obs, action, s);
    episode_return += s.reward;
    obs = s.obs;
    if (s.terminated || s.truncated) {
      recent.push_back(episode_return);
      if (recent.size() > 20) recent.pop_front();
      episode_return = 0.0;
      obs = env.reset();
      if (++episodes % 20 == 0) {
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf(
            "episode %5lld  step %6lld  epsilon %.2f  mean return (last 20) %6.1f  %.1f s\n",
            static_cast<long long>(episodes), static_cast<long long>(t), eps,
            std::accumulate(recent.begin(), recent.end(), 0.0) / recent.size(), secs);
      }
    }
    if (t % kEvalEvery == 0 && t >= kLearningStarts) {
      const double r = mean_return(args.seed + 5 + static_cast<unsigned>(t), kEvalEpisodes,
                                   [&](const cartpole::State& o) { return greedy(q, o, device); });
      std::printf("step %6lld  greedy evaluation: mean return %.1f\n", static_cast<long long>(t),
                  r);
      if (r > best_return) {
        NoGradGuard no_grad;
        best_return = r;
        best.clear();
        for (const Tensor& p : q->parameters()) best.push_back(p.detach().clone());
      }
    }
    if (t % kTrainEvery != 0) continue;
    pending.push_into(buffer);
    if (t < kLearningStarts) continue;
    for (int64_t u = 0; u < kUpdatesPerRound; ++u) {
      // The bytes an update moves between host and device, counted from the third update on
      // (the first runs eagerly, the second captures).
      const MemoryStats before = memory_stats(device);
      if (captured)
        (*captured)({});
      else
        update({});
      const MemoryStats after = memory_stats(device);
      if (++updates > 2) {
        moved_in += after.host_to_device_bytes - before.host_to_device_bytes;
        moved_out += after.device_to_host_bytes - before.device_to_host_bytes;
        ++counted;
      }
      if (updates % kTargetEvery == 0) {
        NoGradGuard no_grad;
        const std::vector<Tensor> from = q->parameters();
        std::vector<Tensor> to = target->parameters();
        for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
      }
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%lld updates (%s) in %.1f s\n", static_cast<long long>(updates),
              captured ? "captured" : "eager, on the CPU", secs);
  if (captured)
    std::printf(
        "captured updates after the first two (%lld): %lld bytes host->device, %lld bytes "
        "device->host\n",
        static_cast<long long>(counted), static_cast<long long>(moved_in),
        static_cast<long long>(moved_out));

  if (!best.empty()) {  // back to the best evaluated weights
    NoGradGuard no_grad;
    std::vector<Tensor> params = q->parameters();
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(best[i]);
  }
  const double greedy_return =
      mean_return(args.seed + 4, kFinalEpisodes,
                  [&](const cartpole::State& o) { return greedy(q, o, device); });
  std::printf(
      "greedy policy (best evaluated weights) mean return over %d new episodes: %.1f "
      "(random %.1f)\n",
      kFinalEpisodes, greedy_return, random_return);
  bool ok = greedy_return >= kRequiredOverRandom * random_return;
  if (!ok)
    std::printf("dqn: the greedy return %.1f is below %.0fx the random policy's %.1f\n",
                greedy_return, kRequiredOverRandom, random_return);
  if (captured && (moved_in != 0 || moved_out != 0)) {
    std::printf("dqn: the captured updates moved bytes between host and device\n");
    ok = false;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--short") {
      args.steps = 12000;
    } else if (a == "--cpu") {
      args.cpu = true;
    } else if (a == "--steps" && i + 1 < argc) {
      args.steps = std::atoll(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      args.seed = static_cast<unsigned>(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: dqn [--short] [--steps N] [--cpu] [--seed S]\n");
      return 2;
    }
  }
  try {
    return run(args) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dqn: %s\n", e.what());
    return 1;
  }
}
