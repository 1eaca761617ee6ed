// tests/test_anomaly.cpp — check_grad_anomaly (statuses, counts, max |g|, actions, one read per
// device), GradAnomalyCallback in fit() with a loss that turns NaN at a known step, and
// AnomalyGuard (the op named for a forward NaN and a backward Inf; nothing changes when nothing
// is anomalous). The CUDA versions skip without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/anomaly.hpp"
#include "ember/data/dataloader.hpp"
#include "ember/data/dataset.hpp"
#include "ember/ember.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "ember/train/anomaly.hpp"
#include "ember/train/capture.hpp"
#include "ember/train/fit.hpp"
#include "error_of.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;
using ember_test::kFloatInf;
using ember_test::kFloatNaN;

// A parameter of `values` with gradient `grad` (undefined: none).
Tensor param_with_grad(const std::vector<float>& values, const std::vector<float>& grad,
                       Device d = Device::cpu(), DType dtype = DType::f32) {
  const Shape shape{static_cast<int64_t>(values.size())};
  Tensor p = parameter(from_vector(values, shape).to(dtype).to(d));
  if (!grad.empty()) p.set_grad(from_vector(grad, shape).to(dtype).to(d));
  return p;
}

NamedGradTensors mixed_params(Device d) {
  return {{"a", param_with_grad({1, 2, 3}, {1, -3, 2}, d)},
          {"b", param_with_grad({0, 0, 0, 0, 0}, {kFloatNaN, 1, kFloatInf, -kFloatInf, -5}, d)},
          {"c", param_with_grad({1, 1}, {}, d)},
          {"d", param_with_grad({1, 1}, {kFloatInf, kFloatInf}, d)},
          {"e", param_with_grad({1, 1}, {kFloatNaN, 0.25f}, d)}};
}

void expect_mixed_report(const GradAnomalyReport& r) {
  ASSERT_EQ(r.params.size(), 5u);
  const GradAnomaly &a = r.params[0], &b = r.params[1], &c = r.params[2], &d = r.params[3],
                    &e = r.params[4];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.shape, Shape({3}));
  EXPECT_EQ(a.status, GradStatus::ok);
  EXPECT_EQ(a.max_abs, 3.0);
  EXPECT_EQ(a.nan_count, 0);
  EXPECT_EQ(a.inf_count, 0);
  EXPECT_EQ(b.status, GradStatus::nan_and_inf);
  EXPECT_EQ(b.max_abs, 5.0);  // over the finite elements
  EXPECT_EQ(b.nan_count, 1);
  EXPECT_EQ(b.inf_count, 2);
  EXPECT_EQ(c.status, GradStatus::no_grad);
  EXPECT_TRUE(std::isnan(c.max_abs));
  EXPECT_FALSE(c.anomalous());
  EXPECT_EQ(d.status, GradStatus::inf);
  EXPECT_TRUE(std::isnan(d.max_abs));  // no finite element
  EXPECT_EQ(d.inf_count, 2);
  EXPECT_EQ(e.status, GradStatus::nan);
  EXPECT_EQ(e.max_abs, 0.25);
  EXPECT_EQ(e.nan_count, 1);
  EXPECT_EQ(r.anomalies(), 3);
  ASSERT_NE(r.first_anomaly(), nullptr);
  EXPECT_EQ(r.first_anomaly()->name, "b");
  EXPECT_FALSE(r.ok());
}

TEST(GradAnomaly, StatusCountsAndMaxAbs) {
  expect_mixed_report(check_grad_anomaly(mixed_params(Device::cpu()), AnomalyAction::silent));
}

TEST(GradAnomaly, AllFiniteIsOk) {
  const GradAnomalyReport r = check_grad_anomaly(
      NamedGradTensors{{"w", param_with_grad({1, 2}, {0.5f, -0.75f})}}, AnomalyAction::error);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.params[0].max_abs, 0.75);
  EXPECT_EQ(grad_status_name(GradStatus::nan_and_inf), std::string("nan+inf"));
  EXPECT_EQ(grad_status_name(GradStatus::no_grad), std::string("no grad"));
}

TEST(GradAnomaly, HalfAndDoubleGradients) {
  for (const DType dt : {DType::f16, DType::bf16, DType::f64}) {
    const GradAnomalyReport r = check_grad_anomaly(
        NamedGradTensors{
            {"h", param_with_grad({1, 2, 3}, {kFloatNaN, -2, 0.5f}, Device::cpu(), dt)}},
        AnomalyAction::silent);
    EXPECT_EQ(r.params[0].status, GradStatus::nan) << dtype_name(dt);
    EXPECT_EQ(r.params[0].nan_count, 1) << dtype_name(dt);
    EXPECT_EQ(r.params[0].max_abs, 2.0) << dtype_name(dt);
  }
}

TEST(GradAnomaly, LargeOverMaxAbs) {
  const NamedGradTensors p{{"w", param_with_grad({1, 2}, {0.5f, -40.0f})},
                           {"v", param_with_grad({1}, {kFloatNaN})}};
  const GradAnomalyReport r =
      check_grad_anomaly(p, GradAnomalyOptions{.action = AnomalyAction::silent, .max_abs = 10.0});
  EXPECT_EQ(r.params[0].status, GradStatus::large);
  EXPECT_EQ(r.params[1].status, GradStatus::nan);  // NaN outranks large
  EXPECT_EQ(error_of([&] {
              check_grad_anomaly(
                  p, GradAnomalyOptions{.action = AnomalyAction::error, .max_abs = 10.0});
            }),
            "check_grad_anomaly: parameter 'w' of shape [2] has a gradient of status large (0 "
            "NaN, 0 Inf, max finite |g| 40, over the limit max_abs = 10); 2 of 2 parameters are "
            "anomalous");
  // Under the limit: ok.
  EXPECT_EQ(
      check_grad_anomaly(p, GradAnomalyOptions{.action = AnomalyAction::silent, .max_abs = 100.0})
          .params[0]
          .status,
      GradStatus::ok);
}

TEST(GradAnomaly, ErrorNamesTheFirstBadParameter) {
  EXPECT_EQ(
      error_of([] { check_grad_anomaly(mixed_params(Device::cpu()), AnomalyAction::error); }),
      "check_grad_anomaly: parameter 'b' of shape [5] has a gradient of status nan+inf (1 NaN, "
      "2 Inf, max finite |g| 5, expected finite values); 3 of 5 parameters are anomalous");
  EXPECT_EQ(error_of([] {
              check_grad_anomaly(
                  mixed_params(Device::cpu()),
                  GradAnomalyOptions{.action = AnomalyAction::error, .context = "step 7"});
            }).rfind("check_grad_anomaly: step 7: parameter 'b' of shape [5]", 0),
            0u);
}

TEST(GradAnomaly, WarnWritesOneLinePerBadParameter) {
  testing::internal::CaptureStderr();
  const GradAnomalyReport r = check_grad_anomaly(mixed_params(Device::cpu()));  // warn
  const std::string err = testing::internal::GetCapturedStderr();
  expect_mixed_report(r);
  EXPECT_EQ(err,
            "check_grad_anomaly: parameter 'b' [5] gradient nan+inf: 1 NaN, 2 Inf, max finite |g| "
            "5\n"
            "check_grad_anomaly: parameter 'd' [2] gradient inf: 0 NaN, 2 Inf, max finite |g| "
            "none\n"
            "check_grad_anomaly: parameter 'e' [2] gradient nan: 1 NaN, 0 Inf, max finite |g| "
            "0.25\n");
  testing::internal::CaptureStderr();
  check_grad_anomaly(mixed_params(Device::cpu()), AnomalyAction::silent);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(GradAnomaly, UnnamedParametersAndModules) {
  const GradAnomalyReport r = check_grad_anomaly(
      std::vector<Tensor>{param_with_grad({1}, {1}), param_with_grad({1}, {kFloatNaN})},
      AnomalyAction::silent);
  EXPECT_EQ(r.params[0].name, "#0");
  EXPECT_EQ(r.params[1].name, "#1");
  EXPECT_EQ(r.first_anomaly()->name, "#1");
  // A module's named parameters, after a backward whose loss is NaN.
  manual_seed(3);
  nn::Module net = nn::Sequential({nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2)});
  Tensor x = tensor({1, 2, kFloatNaN}, {1, 3});
  net(x).sum().backward();
  const std::string err =
      error_of([&] { check_grad_anomaly(net->named_parameters(), AnomalyAction::error); });
  EXPECT_EQ(err.rfind("check_grad_anomaly: parameter '0.weight' of shape [4, 3]", 0), 0u) << err;
}

TEST(GradAnomaly, BadInputRefused) {
  EXPECT_EQ(error_of([] {
              check_grad_anomaly(NamedGradTensors{{"w", Tensor()}});
            }),
            "check_grad_anomaly: parameter 'w' is an undefined tensor (expected a parameter)");
  EXPECT_EQ(error_of([] {
              check_grad_anomaly(NamedGradTensors{{"w", param_with_grad({1}, {1})}},
                                 GradAnomalyOptions{.max_abs = -1.0});
            }),
            "check_grad_anomaly: invalid max_abs (got -1; expected a limit >= 0, or none)");
  // Empty lists and empty gradients are fine.
  EXPECT_TRUE(check_grad_anomaly(NamedGradTensors{}, AnomalyAction::error).ok());
  Tensor empty = parameter(zeros({0, 3}));
  empty.set_grad(zeros({0, 3}));
  EXPECT_TRUE(check_grad_anomaly(NamedGradTensors{{"e", empty}}, AnomalyAction::error).ok());
}

TEST(CudaGradAnomaly, OneReadOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  const Device d = Device::cuda(0);
  const NamedGradTensors params = mixed_params(d);
  synchronize(d);
  const int64_t before = memory_stats(d).device_to_host_bytes;
  const GradAnomalyReport r = check_grad_anomaly(params, AnomalyAction::silent);
  // One [4, 3] f64 read: the four parameters with a gradient, nothing per parameter.
  EXPECT_EQ(memory_stats(d).device_to_host_bytes - before, 4 * 3 * 8);
  expect_mixed_report(r);
  for (const DType dt : {DType::f16, DType::bf16}) {
    const GradAnomalyReport h = check_grad_anomaly(
        NamedGradTensors{{"h", param_with_grad({1, 2, 3}, {kFloatInf, -2, 0.5f}, d, dt)}},
        AnomalyAction::silent);
    EXPECT_EQ(h.params[0].status, GradStatus::inf) << dtype_name(dt);
    EXPECT_EQ(h.params[0].max_abs, 2.0) << dtype_name(dt);
  }
}

// ---- fit() ----

// 8 batches of 4 samples in order; sample 13 (batch 3) has a NaN feature, so the loss and every
// gradient of the first layer turn NaN at optimizer step 3.
std::shared_ptr<data::TensorDataset> poisoned_set() {
  manual_seed(11);
  Tensor x = randn({32, 8});
  std::vector<float> xs = x.to_vector<float>();
  xs[13 * 8 + 5] = kFloatNaN;
  return std::make_shared<data::TensorDataset>(from_vector(xs, {32, 8}), randint(0, 4, {32}));
}

// Tanh carries the NaN through (ReLU would not: relu(NaN) is 0 here, so only the first layer's
// weight column of the NaN feature would turn NaN).
nn::Module fit_net() {
  manual_seed(5);
  return nn::Sequential({nn::Linear(8, 16), nn::Tanh(), nn::Linear(16, 4)});
}

TEST(GradAnomalyCallback, FitStopsAtTheStepWhoseLossTurnsNaN) {
  data::DataLoader loader(poisoned_set(), {.batch_size = 4});
  nn::Module net = fit_net();
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  auto check = std::make_shared<train::GradAnomalyCallback>(AnomalyAction::error);
  const std::string err = error_of([&] {
    train::fit(net, loader, opt, train::cross_entropy_loss(),
               {.epochs = 1, .callbacks = {check}, .progress = train::Progress::none});
  });
  EXPECT_EQ(err,
            "check_grad_anomaly: step 3 (epoch 0, batch 3): parameter '0.weight' of shape [16, "
            "8] has a gradient of status nan (128 NaN, 0 Inf, max finite |g| none, expected "
            "finite values); 4 of 4 parameters are anomalous");
  EXPECT_EQ(check->anomalous_steps(), 1);
  EXPECT_EQ(check->first_anomalous_step(), 3);
  EXPECT_EQ(check->last_report().params[1].nan_count, 16);  // 0.bias
  // The step was not taken: the weights are still finite.
  for (const Tensor& p : net->parameters())
    EXPECT_EQ(sum(isfinite(p.detach())).item<int64_t>(), p.numel());
}

TEST(GradAnomalyCallback, SilentCountsEveryAnomalousStep) {
  data::DataLoader loader(poisoned_set(), {.batch_size = 4});
  nn::Module net = fit_net();
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  auto check = std::make_shared<train::GradAnomalyCallback>(AnomalyAction::silent);
  train::fit(net, loader, opt, train::cross_entropy_loss(),
             {.epochs = 1, .callbacks = {check}, .progress = train::Progress::none});
  // Step 3 writes NaN into the weights, so steps 3..7 all have NaN gradients.
  EXPECT_EQ(check->first_anomalous_step(), 3);
  EXPECT_EQ(check->anomalous_steps(), 5);
  EXPECT_FALSE(check->last_report().ok());
}

TEST(GradAnomalyCallback, WarnNamesTheStepAndGoesOn) {
  data::DataLoader loader(poisoned_set(), {.batch_size = 4});
  nn::Module net = fit_net();
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  auto check = std::make_shared<train::GradAnomalyCallback>();  // warn
  testing::internal::CaptureStderr();
  train::fit(net, loader, opt, train::cross_entropy_loss(),
             {.epochs = 1, .callbacks = {check}, .progress = train::Progress::none});
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.substr(0, err.find('\n')),
            "check_grad_anomaly: step 3 (epoch 0, batch 3): parameter '0.weight' [16, 8] gradient "
            "nan: 128 NaN, 0 Inf, max finite |g| none");
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 5 * 4);  // steps 3..7, four parameters
  EXPECT_EQ(check->anomalous_steps(), 5);
}

// ---- AnomalyGuard ----

TEST(AnomalyGuard, OffByDefaultAndNests) {
  EXPECT_FALSE(anomaly_mode_enabled());
  Tensor x = tensor({-1.0f}).requires_grad_();
  EXPECT_TRUE(std::isnan(log(x).item<float>()));  // no guard: no check
  {
    AnomalyGuard outer;
    {
      AnomalyGuard inner;
      EXPECT_TRUE(anomaly_mode_enabled());
    }
    EXPECT_TRUE(anomaly_mode_enabled());
  }
  EXPECT_FALSE(anomaly_mode_enabled());
}

void forward_nan_named(Device d) {
  Tensor x = tensor({1.0f, -1.0f, 2.0f, 4.0f}, {4}, {.device = d}).requires_grad_();
  AnomalyGuard guard;
  Tensor y = x - 0.5;  // finite: passes
  EXPECT_EQ(error_of([&] { (void)log(y); }),
            "AnomalyGuard: log (forward) produced 1 NaN and 0 Inf in its output [4] (f32, " +
                d.str() + "); its input 0 [4] made by sub, finite");
}

TEST(AnomalyGuard, ForwardNaNNamesTheOpAndItsInput) { forward_nan_named(Device::cpu()); }
TEST(CudaAnomalyGuard, ForwardNaNNamesTheOpAndItsInput) {
  SKIP_WITHOUT_CUDA();
  forward_nan_named(Device::cuda(0));
}

void backward_inf_named(Device d) {
  Tensor x = tensor({0.0f, 1.0f, 4.0f}, {3}, {.device = d}).requires_grad_();
  AnomalyGuard guard;
  Tensor loss = sqrt(x).sum();  // sqrt(0) = 0: the forward is finite
  EXPECT_EQ(error_of([&] { loss.backward(); }),
            "AnomalyGuard: the backward of sqrt produced 0 NaN and 1 Inf in the gradient of its "
            "input 0 [3] (f32, " +
                d.str() + "), a leaf; the gradient coming in to sqrt [3] was finite");
}

TEST(AnomalyGuard, BackwardInfNamesTheOp) { backward_inf_named(Device::cpu()); }
TEST(CudaAnomalyGuard, BackwardInfNamesTheOp) {
  SKIP_WITHOUT_CUDA();
  backward_inf_named(Device::cuda(0));
}

TEST(AnomalyGuard, AnomalyFromALeafOrTheSeed) {
  Tensor x = tensor({1.0f, kFloatNaN}).requires_grad_();
  {
    AnomalyGuard guard;
    EXPECT_EQ(error_of([&] { (void)exp(x); }),
              "AnomalyGuard: exp (forward) produced 1 NaN and 0 Inf in its output [2] (f32, cpu); "
              "its input 0 [2] a leaf, holding 1 NaN and 0 Inf (the anomaly came in with an input "
              "that no checked op made: a leaf, a tensor computed without recording, or data)");
  }
  Tensor w = tensor({1.0f, 2.0f}).requires_grad_();
  Tensor y = exp(w);
  AnomalyGuard guard;
  EXPECT_EQ(error_of([&] {
              y.backward(tensor({kFloatInf, 1.0f}));
            }),
            "AnomalyGuard: the backward of exp produced 0 NaN and 1 Inf in the gradient of its "
            "input 0 [2] (f32, cpu), a leaf; the gradient coming in to exp [2] already held 0 "
            "NaN and 1 Inf (made where the gradients of the output's several uses were summed, "
            "or the seed gradient passed to backward)");
}

// An MLP step with and without the guard: the same loss and gradients, bitwise.
void same_results_with_guard(Device d) {
  const auto step = [d](bool guarded) {
    manual_seed(21);
    nn::Module net = nn::Sequential({nn::Linear(6, 8), nn::GELU(), nn::Linear(8, 3)});
    net->to(d);
    Tensor x = randn({5, 6}).to(d);
    Tensor t = randint(0, 3, {5}).to(d);
    std::unique_ptr<AnomalyGuard> guard;
    if (guarded) guard = std::make_unique<AnomalyGuard>();
    Tensor loss = cross_entropy(net(x), t);
    loss.backward();
    std::vector<float> out = loss.detach().to(Device::cpu()).to_vector<float>();
    for (const Tensor& p : net->parameters()) {
      const std::vector<float> g = p.grad().to(Device::cpu()).to_vector<float>();
      out.insert(out.end(), g.begin(), g.end());
    }
    return out;
  };
  const std::vector<float> plain = step(false), guarded = step(true);
  ASSERT_EQ(plain.size(), guarded.size());
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_EQ(std::memcmp(&plain[i], &guarded[i], sizeof(float)), 0) << "value " << i;
}

TEST(AnomalyGuard, NoErrorAndIdenticalResultsWhenFinite) { same_results_with_guard(Device::cpu()); }
TEST(CudaAnomalyGuard, NoErrorAndIdenticalResultsWhenFinite) {
  SKIP_WITHOUT_CUDA();
  same_results_with_guard(Device::cuda(0));
}

TEST(CudaAnomalyGuard, RefusedInsideACapturedStep) {
  SKIP_WITHOUT_CUDA();
  const Device d = Device::cuda(0);
  Tensor w = parameter(ones({4}, {.device = d}));
  AnomalyGuard guard;
  const std::string err = error_of([&] {
    train::CapturedStep step(
        [&](const std::vector<Tensor>& in) {
          Tensor loss = (in[0] * w).sum();
          loss.backward();
          return std::vector<Tensor>{loss.detach()};
        },
        {.device = d});
    for (int i = 0; i < 3; ++i) step({ones({4}, {.device = d})});
  });
  EXPECT_NE(err.find("AnomalyGuard: copies between the host and the device inside a captured "
                     "step"),
            std::string::npos)
      << err;
}

}  // namespace
