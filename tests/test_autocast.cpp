// tests/test_autocast.cpp — AutocastGuard: the policy table (and docs/mixed_precision.md, which
// reproduces it), the dtypes ops run in, the parameter-cast cache, gradients in the master
// weights' dtype, and a model trained 200 steps under bf16 autocast against the f32 run — on
// the CPU and, where one is present, on the GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "tensor_values.hpp"

namespace {

using ember::AutocastGuard;
using ember::AutocastPolicy;
using ember::Device;
using ember::DType;
using ember::Op;
using ember::Tensor;
using ember_test::devices;
namespace nn = ember::nn;
namespace optim = ember::optim;

TEST(Autocast, DocsListTheTable) {
  std::ifstream in(std::string(EMBER_TEST_DATA_DIR) + "/../../docs/mixed_precision.md");
  ASSERT_TRUE(in) << "docs/mixed_precision.md not found";
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const std::regex row(R"(\| `(\w+)` \| (lower|f32|promote) \|)");
  std::map<std::string, std::string> docs;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), row); it != std::sregex_iterator(); ++it)
    docs[(*it)[1]] = (*it)[2];
  int listed = 0;
  for (const ember::OpInfo& info : ember::catalogue()) {
    const AutocastPolicy p = ember::autocast_policy(info.op);
    const auto found = docs.find(info.name);
    if (p == AutocastPolicy::none) {
      EXPECT_EQ(found, docs.end()) << info.name << " is in the docs' table but has no policy";
      continue;
    }
    ++listed;
    ASSERT_NE(found, docs.end()) << info.name << " (" << ember::autocast_policy_name(p)
                                 << ") is missing from docs/mixed_precision.md";
    EXPECT_EQ(found->second, ember::autocast_policy_name(p)) << info.name;
  }
  EXPECT_EQ(listed, static_cast<int>(docs.size()));
  EXPECT_GE(listed, 50);
}

TEST(Autocast, OpsRunInTheirPolicysDtype) {
  for (const Device dev : devices()) {
    SCOPED_TRACE(dev.str());
    ember::manual_seed(1);
    const ember::TensorOptions o{.device = dev};
    Tensor x = ember::randn({4, 8}, o), w = ember::randn({3, 8}, o), b = ember::randn({3}, o);
    Tensor d = ember::randn({4, 3}, {.dtype = DType::f64, .device = dev});
    AutocastGuard autocast(DType::bf16);
    EXPECT_TRUE(ember::autocast_enabled());
    Tensor y = ember::linear(x, w, b);
    EXPECT_EQ(y.dtype(), DType::bf16);                                      // lower
    EXPECT_EQ(ember::relu(y).dtype(), DType::bf16);                         // none: as received
    EXPECT_EQ(ember::softmax(y, 1).dtype(), DType::f32);                    // f32
    EXPECT_EQ(ember::sum(y).dtype(), DType::f32);                           // f32
    EXPECT_EQ(ember::add(y, ember::zeros({4, 3}, o)).dtype(), DType::f32);  // promotion
    EXPECT_EQ(ember::cat({y, ember::zeros({4, 3}, o)}, 0).dtype(), DType::f32);  // promote
    EXPECT_EQ(ember::matmul(d, d.t()).dtype(), DType::f64);  // f64 is never lowered
    {
      AutocastGuard off(DType::bf16, false);
      EXPECT_FALSE(ember::autocast_enabled());
      EXPECT_EQ(ember::linear(x, w, b).dtype(), DType::f32);
    }
    EXPECT_TRUE(ember::autocast_enabled());
    AutocastGuard half(DType::f16);
    EXPECT_EQ(ember::matmul(x, w.t()).dtype(), DType::f16);
  }
  EXPECT_FALSE(ember::autocast_enabled());
}

TEST(Autocast, LowerEqualsTheExplicitCasts) {
  for (const Device dev : devices()) {
    SCOPED_TRACE(dev.str());
    ember::manual_seed(2);
    const ember::TensorOptions o{.device = dev};
    Tensor x = ember::randn({16, 32}, o), w = ember::randn({8, 32}, o), b = ember::randn({8}, o);
    Tensor want = ember::linear(x.to(DType::bf16), w.to(DType::bf16), b.to(DType::bf16));
    AutocastGuard autocast(DType::bf16);
    ember_test::expect_equal(ember::linear(x, w, b), want, "linear under autocast");
  }
}

TEST(Autocast, GradientsComeBackInTheMasterWeightsDtype) {
  for (const Device dev : devices()) {
    SCOPED_TRACE(dev.str());
    ember::manual_seed(3);
    const ember::TensorOptions o{.device = dev};
    Tensor x = ember::randn({8, 4}, o);
    Tensor w = ember::parameter(ember::randn({5, 4}, o)),
           b = ember::parameter(ember::zeros({5}, o));
    Tensor loss;
    {
      AutocastGuard autocast(DType::bf16);
      loss = ember::mse_loss(ember::linear(x, w, b), ember::zeros({8, 5}, o));
      EXPECT_EQ(loss.dtype(), DType::f32);
      loss.backward();  // inside the scope: backward keeps the forward's dtypes
    }
    ASSERT_TRUE(w.grad().defined());
    EXPECT_EQ(w.grad().dtype(), DType::f32);
    EXPECT_EQ(b.grad().dtype(), DType::f32);
    // Against the f32 gradient: bf16 rounding of the product (8 bits of mantissa).
    Tensor wf = w.detach().requires_grad_(), bf = b.detach().requires_grad_();
    ember::mse_loss(ember::linear(x, wf, bf), ember::zeros({8, 5}, o)).backward();
    EXPECT_TRUE(ember_test::check_close(w.grad(), wf.grad(), 3e-2, 3e-2, "dW under bf16"));
    EXPECT_TRUE(ember_test::check_close(b.grad(), bf.grad(), 3e-2, 3e-2, "db under bf16"));
  }
}

TEST(Autocast, AParametersCastIsMadeOncePerScopeAndRenewedAfterAWrite) {
  Tensor w = ember::parameter(ember::randn({4, 4}));
  Tensor x = ember::randn({2, 4});
  {
    AutocastGuard autocast(DType::bf16);
    EXPECT_EQ(ember::autocast_cache_size(), 0);
    Tensor a = ember::matmul(x, w);
    Tensor c = ember::matmul(x, w.t());
    EXPECT_EQ(ember::autocast_cache_size(), 1) << "one cast of w for both uses";
    {
      ember::NoGradGuard no_grad;
      w.mul_(2.0);  // a new version: the next use casts again
    }
    Tensor d = ember::matmul(x, w);
    EXPECT_EQ(ember::autocast_cache_size(), 2);
    Tensor want = ember::matmul(x.to(DType::bf16), w.detach().to(DType::bf16));
    ember_test::expect_equal(d.detach(), want, "matmul after the write");
    Tensor e = ember::matmul(x.to(DType::bf16), w);  // not a parameter use: x is no leaf
    (void)e;
    EXPECT_EQ(ember::autocast_cache_size(), 2);
  }
  EXPECT_EQ(ember::autocast_cache_size(), 0) << "the cache ends with the outermost scope";
}

TEST(Autocast, WrongUseIsAnError) {
  const std::string msg =
      ember::test_util::error_of([] { AutocastGuard g(DType::f32); }, "AutocastGuard");
  EXPECT_NE(msg.find("AutocastGuard: the low precision dtype must be bf16 or f16 (got f32)"),
            std::string::npos)
      << msg;
  // An op without 16-bit kernels (logsumexp) says how to run it in f32.
  const std::string lse = ember::test_util::error_of(
      [] {
        ember::logsumexp(ember::randn({2, 2}).to(DType::bf16), {1});
      },
      "logsumexp");
  EXPECT_NE(lse.find("AutocastGuard"), std::string::npos) << lse;
}

// A 16-64-64-1 ReLU MLP fitting a smooth function with SGD (momentum 0.9), 200 full-batch
// steps, in f32 and
// under bf16 autocast from the same initial weights.
struct TrainRun {
  std::vector<double> losses;
  std::vector<Tensor> weights;
};

TrainRun train(Device dev, bool autocast) {
  ember::manual_seed(7);
  nn::Sequential net;
  net->push_back(nn::Linear(16, 64));
  net->push_back(nn::ReLU());
  net->push_back(nn::Linear(64, 64));
  net->push_back(nn::ReLU());
  net->push_back(nn::Linear(64, 1));
  net->to(dev);
  Tensor x = ember::randn({256, 16}).to(dev);
  Tensor y = ember::sin(ember::sum(x, ember::Shape{1}, true) * 0.5).to(dev);
  optim::SGD opt(net->parameters(), {.lr = 0.05, .momentum = 0.9});
  TrainRun r;
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    Tensor loss;
    {
      AutocastGuard guard(DType::bf16, autocast);
      Tensor out = net(x);
      EXPECT_EQ(out.dtype(), autocast ? DType::bf16 : DType::f32);
      loss = ember::mse_loss(out, y);
    }
    EXPECT_EQ(loss.dtype(), DType::f32);
    loss.backward();
    opt.step();
    r.losses.push_back(loss.item<double>());
  }
  for (const Tensor& p : net->parameters()) {
    EXPECT_EQ(p.dtype(), DType::f32) << "master weights stay f32";
    r.weights.push_back(p.detach().to(Device::cpu()));
  }
  return r;
}

TEST(Autocast, TrainingUnderBf16FollowsTheF32Run) {
  for (const Device dev : devices()) {
    SCOPED_TRACE(dev.str());
    const TrainRun f32 = train(dev, false), bf16 = train(dev, true);
    ASSERT_EQ(f32.losses.size(), bf16.losses.size());
    EXPECT_LT(f32.losses.back(), 0.2 * f32.losses.front()) << "the f32 run learns";
    // Tolerances (about twice the drift measured on the CPU): each step's loss within 5% of
    // the f32 run's plus 0.2% of the first loss (bf16's floor: the f32 run fits to ~4e-5,
    // the bf16 one to ~8e-5), the final weights within 0.12 x the largest |weight| (measured
    // 0.057 of 1.01).
    EXPECT_NE(bf16.losses.back(), f32.losses.back()) << "the autocast run computed in f32";
    const double floor = 0.002 * f32.losses.front();
    for (size_t i = 0; i < f32.losses.size(); ++i)
      EXPECT_NEAR(bf16.losses[i], f32.losses[i], 0.05 * f32.losses[i] + floor) << "step " << i;
    double scale = 0;
    for (const Tensor& w : f32.weights)
      scale = std::max(scale, ember::max(ember::abs(w)).item<double>());
    for (size_t i = 0; i < f32.weights.size(); ++i)
      EXPECT_TRUE(ember_test::check_close(bf16.weights[i], f32.weights[i], 0.0, 0.12 * scale,
                                          "parameter " + std::to_string(i)));
  }
}

}  // namespace
