// tests/test_optim_more.cpp — the optimizers and schedules of issue 16 against PyTorch 1.13
// (tests/data/optim_fixtures.json: more_optimizers, more_schedulers, lbfgs; written by
// tests/gen_optim_fixtures.py): RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam, LBFGS;
// ConstantLR, PolynomialLR, LambdaLR, OneCycleLR, CyclicLR, CosineDecayLR; gradient
// accumulation; printed summaries; CUDA against CPU for the fused kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <sstream>
#include <string>
#include <vector>

#include "ember/data/dataloader.hpp"
#include "ember/ember.hpp"
#include "ember/optim.hpp"
#include "fixtures.hpp"
#include "optim_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::check_close;
using json = nlohmann::json;

using ember_test::optim_util::expect_error;
using ember_test::optim_util::expect_values;
using ember_test::optim_util::from_json;
using ember_test::optim_util::make_typed;
using ember_test::optim_util::run_steps;
using ember_test::optim_util::set_grads;
using Case = ember_test::optim_util::OptimCase;
using ember_test::optim_util::optim_fixtures;
using ember_test::optim_util::through_checkpoint;

Case load_more_case(const std::string& name, Device device = Device::cpu()) {
  return ember_test::optim_util::load_optim_case(optim_fixtures().at("more_optimizers").at(name),
                                                 device);
}

std::unique_ptr<optim::Optimizer> make_more_optimizer(const json& spec,
                                                      const std::vector<Tensor>& params) {
  const std::string type = spec["type"];
  if (type == "RMSprop") return make_typed<optim::RMSprop>(spec["groups"], params);
  if (type == "Adagrad") return make_typed<optim::Adagrad>(spec["groups"], params);
  if (type == "Adadelta") return make_typed<optim::Adadelta>(spec["groups"], params);
  if (type == "Adamax") return make_typed<optim::Adamax>(spec["groups"], params);
  if (type == "NAdam") return make_typed<optim::NAdam>(spec["groups"], params);
  if (type == "RAdam") return make_typed<optim::RAdam>(spec["groups"], params);
  throw std::runtime_error("unknown optimizer " + type);
}

std::vector<std::string> more_optimizer_names() {
  return ember_test::optim_util::keys_of(optim_fixtures().at("more_optimizers"));
}

class MoreOptimFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(MoreOptimFixture, MatchesTorchTrajectory) {
  Case c = load_more_case(GetParam());
  auto opt = make_more_optimizer(c.spec, c.params);
  // f32: bitwise PyTorch's (the same operations, rounded the same, fused where its CPU
  // kernels fuse); f64: within 1e-12 (one f64 element of radam_wd_betas_f64 differs by an
  // ulp from step 13), far inside the 1e-6 the issue asks for.
  const double rtol = c.dtype == DType::f64 ? 1e-12 : 0.0;
  const double atol = c.dtype == DType::f64 ? 1e-14 : 0.0;
  ember_test::optim_util::expect_torch_trajectory(c, *opt, rtol, atol, GetParam());
  // State names and group keys as PyTorch's state_dict().
  ember_test::optim_util::expect_torch_layout(opt->state_dict(), c.spec, 1e-7, GetParam());
  for (const Tensor& p : c.params) {
    const optim::ParamState* st = opt->state(p);
    ASSERT_NE(st, nullptr);
    for (const auto& [name, t] : st->tensors) {
      EXPECT_EQ(pool_of(t), Pool::Persistent) << name;
      EXPECT_EQ(t.dtype(), p.dtype()) << name;
    }
  }
}

TEST_P(MoreOptimFixture, StateDictRoundTripIsBitwise) {
  Case straight = load_more_case(GetParam());
  auto opt_a = make_more_optimizer(straight.spec, straight.params);
  run_steps(straight, *opt_a, 0, 20);

  Case first = load_more_case(GetParam());
  auto opt_b = make_more_optimizer(first.spec, first.params);
  run_steps(first, *opt_b, 0, 10);
  const optim::OptimizerState saved = through_checkpoint(opt_b->state_dict());

  Case resumed = load_more_case(GetParam());
  for (size_t i = 0; i < resumed.params.size(); ++i) {
    NoGradGuard g;
    resumed.params[i].copy_(first.params[i]);
  }
  json spec = resumed.spec;
  for (json& g : spec["groups"]) g["options"]["lr"] = 123.0;  // the state's lrs must win
  auto opt_c = make_more_optimizer(spec, resumed.params);
  opt_c->load_state_dict(saved);
  EXPECT_EQ(opt_c->lrs(), opt_b->lrs());
  run_steps(resumed, *opt_c, 10, 20);
  for (size_t i = 0; i < straight.params.size(); ++i)
    EXPECT_EQ(ember_test::values_f64(resumed.params[i]), ember_test::values_f64(straight.params[i]))
        << GetParam() << " param " << i << " differs after resuming";
  EXPECT_EQ(opt_c->state_dict().meta, opt_a->state_dict().meta);
}

// CUDA against CPU: the same fused math (src/kernels/optim.hpp) on both backends.
TEST_P(MoreOptimFixture, CudaMatchesCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the CUDA optimizer kernels need a GPU";
  Case cpu = load_more_case(GetParam());
  Case gpu = load_more_case(GetParam(), Device::cuda(0));
  auto opt_cpu = make_more_optimizer(cpu.spec, cpu.params);
  auto opt_gpu = make_more_optimizer(gpu.spec, gpu.params);
  std::vector<void*> ptrs;
  for (const Tensor& p : gpu.params) ptrs.push_back(p.data_ptr());
  for (size_t step = 0; step < 20; ++step) {
    set_grads(cpu, step);
    set_grads(gpu, step);
    opt_cpu->step();
    opt_gpu->step();
  }
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    // One shared formula, each operation rounded once on both sides: bitwise equal.
    EXPECT_EQ(ember_test::values_f64(gpu.params[i]), ember_test::values_f64(cpu.params[i]))
        << GetParam() << " cuda param " << i;
    EXPECT_EQ(gpu.params[i].data_ptr(), ptrs[i]) << "in place on the device";
    const optim::ParamState* st = opt_gpu->state(gpu.params[i]);
    if (st) {
      for (const auto& [name, t] : st->tensors) EXPECT_TRUE(t.device().is_cuda()) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, MoreOptimFixture, ::testing::ValuesIn(more_optimizer_names()));

TEST(MoreOptimMemory, StepsAllocateNothingAndKeepBuffers) {
  for (const char* name : {"rmsprop_momentum_centered", "adagrad_decay_init", "adadelta", "adamax",
                           "nadam_two_groups", "radam_wd_betas"}) {
    Case c = load_more_case(name);
    auto opt = make_more_optimizer(c.spec, c.params);
    set_grads(c, 0);
    opt->step();  // creates the state
    opt->step();
    const MemoryStats before = memory_stats(Device::cpu());
    for (int i = 0; i < 10; ++i) opt->step();
    const MemoryStats after = memory_stats(Device::cpu());
    EXPECT_EQ(after.persistent_bytes, before.persistent_bytes) << name;
    EXPECT_EQ(after.alloc_count, before.alloc_count) << name << ": a steady-state step allocated";
  }
}

TEST(MoreOptimMemory, LargeTensorThreadedStepMatchesSmall) {
  // Big enough to split across the thread pool; every element must match a chunked run.
  const int64_t n = 100003;
  Tensor init = randn({n});
  Tensor grad = randn({n});
  Tensor big = parameter(init);
  optim::RMSprop opt({big}, {.momentum = 0.9, .centered = true});
  big.set_grad(grad);
  opt.step();
  opt.step();
  std::vector<float> want;
  for (int64_t start = 0; start < n; start += 1000) {
    const int64_t len = std::min<int64_t>(1000, n - start);
    Tensor piece = parameter(init.slice(0, start, start + len).contiguous());
    optim::RMSprop small({piece}, {.momentum = 0.9, .centered = true});
    piece.set_grad(grad.slice(0, start, start + len).contiguous());
    small.step();
    small.step();
    for (float v : piece.to_vector<float>()) want.push_back(v);
  }
  EXPECT_EQ(big.to_vector<float>(), want);
}

TEST(MoreOptimErrors, BadInputNamesTheOptimizer) {
  Tensor w = parameter(randn({2, 2}));
  expect_error([&] { optim::RMSprop({w}, {.lr = -0.1}); },
               {"RMSprop: invalid learning rate -0.1 (expected lr >= 0)"});
  expect_error([&] { optim::RMSprop({w}, {.alpha = -0.5}); }, {"RMSprop: invalid alpha -0.5"});
  expect_error([&] { optim::RMSprop({w}, {.momentum = -1.0}); }, {"RMSprop: invalid momentum -1"});
  expect_error([&] { optim::Adagrad({w}, {.lr_decay = -1.0}); }, {"Adagrad: invalid lr_decay -1"});
  expect_error([&] { optim::Adagrad({w}, {.initial_accumulator_value = -0.1}); },
               {"Adagrad: invalid initial_accumulator_value -0.1"});
  expect_error([&] { optim::Adadelta({w}, {.rho = 1.5}); },
               {"Adadelta: invalid rho 1.5 (expected 0 <= rho <= 1)"});
  expect_error([&] { optim::Adamax({w}, {.betas = {1.0, 0.9}}); }, {"Adamax: invalid beta1 1"});
  expect_error([&] { optim::NAdam({w}, {.momentum_decay = -0.1}); },
               {"NAdam: invalid momentum_decay -0.1"});
  expect_error([&] { optim::RAdam({w}, {.eps = -1.0}); }, {"RAdam: invalid epsilon -1"});
  expect_error([&] { optim::LBFGS({w}, {.history_size = 0}); }, {"LBFGS: invalid history_size 0"});
  expect_error([&] { optim::RMSprop(std::vector<Tensor>{}); },
               {"RMSprop: optimizer got an empty parameter list"});
  expect_error([&] { optim::Adagrad(std::vector<Tensor>{}); },
               {"Adagrad: optimizer got an empty parameter list"});
  expect_error([&] { optim::LBFGS(std::vector<Tensor>{}); },
               {"LBFGS: optimizer got an empty parameter list"});
  // A state dict of another optimizer.
  optim::RMSprop rms({w});
  w.set_grad(ones({2, 2}));
  rms.step();
  optim::Adamax adamax({w});
  expect_error([&] { adamax.load_state_dict(rms.state_dict()); },
               {"Adamax.load_state_dict", "another optimizer", "RMSprop", "expected \"Adamax\""});
  optim::LBFGS lbfgs({w});
  expect_error([&] { lbfgs.load_state_dict(rms.state_dict()); },
               {"LBFGS.load_state_dict", "RMSprop"});
  // NAdam's mu_product must come with its state.
  optim::NAdam nadam({w});
  nadam.step();
  optim::OptimizerState bad = nadam.state_dict();
  bad.meta["state"]["0"].erase("mu_product");
  expect_error([&] { nadam.load_state_dict(bad); }, {"state.0.mu_product must be a number"});
}

TEST(MoreOptimState, AdagradStateExistsBeforeTheFirstStep) {
  Tensor w = parameter(zeros({3}));
  optim::Adagrad opt({w}, {.initial_accumulator_value = 0.25});
  const optim::OptimizerState s = opt.state_dict();
  EXPECT_EQ(s.meta["state"]["0"]["step"], 0);
  ASSERT_EQ(s.tensors.size(), 1u);
  EXPECT_EQ(s.tensors[0].first, "state.0.sum");
  EXPECT_EQ(s.tensors[0].second.to_vector<float>(), (std::vector<float>{0.25f, 0.25f, 0.25f}));
}

TEST(MoreOptimState, MaximizeIsMinimizingTheNegatedGradient) {
  for (bool centered : {false, true}) {
    Tensor a = parameter(tensor({1.0f, -2.0f, 0.5f}, {3}));
    Tensor b = parameter(tensor({1.0f, -2.0f, 0.5f}, {3}));
    optim::RMSprop up({a}, {.momentum = 0.5, .centered = centered, .maximize = true});
    optim::RMSprop down({b}, {.momentum = 0.5, .centered = centered});
    for (int i = 0; i < 5; ++i) {
      Tensor g = tensor({0.3f * static_cast<float>(i + 1), -0.7f, 0.1f}, {3});
      a.set_grad(g);
      b.set_grad(-g);
      up.step();
      down.step();
    }
    EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  }
}

// ---------------------------------------------------------------------------------------
// gradient accumulation

TEST(OptimAccumulate, MeanOfKMicroBatchesEqualsOneBigStep) {
  const std::vector<std::vector<float>> grads = {{1, 2}, {3, -1}, {0.5, 4},
                                                 {2, 2}, {1, 0},  {-3, 1}};
  Tensor a = parameter(tensor({1.0f, 1.0f}, {2}));
  Tensor b = parameter(tensor({1.0f, 1.0f}, {2}));
  optim::Adam acc({a}, {.lr = 0.1});
  acc.set_accumulate_steps(3);
  optim::Adam big({b}, {.lr = 0.1});
  for (size_t i = 0; i < grads.size(); ++i) {
    acc.zero_grad();  // skipped while accumulating: autograd-style sums build up in .grad
    Tensor g = from_vector<float>(grads[i], {2});
    if (a.grad().defined())
      a.set_grad(a.grad() + g);
    else
      a.set_grad(g);
    acc.step();
    EXPECT_EQ(acc.accumulate_count(), static_cast<int64_t>((i + 1) % 3));
    if ((i + 1) % 3 == 0) {
      std::vector<float> mean(2, 0.0f);
      for (size_t k = i - 2; k <= i; ++k)
        for (size_t j = 0; j < 2; ++j) mean[j] += grads[k][j];
      for (float& m : mean) m /= 3.0f;
      b.set_grad(from_vector<float>(mean, {2}));
      big.step();
      EXPECT_TRUE(check_close(a, b, 1e-6, 1e-7, "accumulated Adam after " + std::to_string(i)));
    } else {
      EXPECT_EQ(acc.state(a) == nullptr, i < 3) << "no update before the k-th call";
    }
  }
}

TEST(OptimAccumulate, SumModeAndStateDictKeepTheCounter) {
  Tensor w = parameter(tensor({0.0f}, {1}));
  optim::SGD opt({w}, {.lr = 1.0});
  opt.set_accumulate_steps(2, optim::GradAccumulation::sum);
  w.set_grad(tensor({1.0f}, {1}));
  opt.step();
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0.0f}));
  const json meta = opt.state_dict().meta;
  EXPECT_EQ(meta["accumulate"], json({{"steps", 2}, {"count", 1}, {"mode", "sum"}}));
  opt.zero_grad();
  EXPECT_TRUE(w.grad().defined()) << "zero_grad waits for the update";
  w.set_grad(tensor({3.0f}, {1}));  // the sum of two micro-batches, 1 + 2
  opt.step();
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{-3.0f})) << "sum: the update sees 1 + 2";
  // A fresh optimizer resumes the counter.
  Tensor v = parameter(tensor({0.0f}, {1}));
  optim::SGD other({v}, {.lr = 1.0});
  other.load_state_dict({meta, {}});
  EXPECT_EQ(other.accumulate_steps(), 2);
  EXPECT_EQ(other.accumulate_count(), 1);
  EXPECT_EQ(other.accumulate_mode(), optim::GradAccumulation::sum);
  v.set_grad(tensor({2.0f}, {1}));
  other.step();
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{-2.0f}));
  expect_error([&] { opt.set_accumulate_steps(0); }, {"SGD: invalid accumulate_steps 0"});
  json bad = meta;
  bad["accumulate"]["count"] = 5;
  expect_error([&] { other.load_state_dict({bad, {}}); }, {"invalid accumulate counter"});
}

// ---------------------------------------------------------------------------------------
// LBFGS

struct LbfgsProblem {
  std::vector<Tensor> params;
  Tensor target, centre;
  explicit LbfgsProblem(const json& doc) {
    for (size_t i = 0; i < doc["shapes"].size(); ++i)
      params.push_back(parameter(from_json(
          doc["init"][i], Shape(doc["shapes"][i].get<std::vector<int64_t>>()), DType::f64)));
    target = from_json(doc["target"], {2, 2}, DType::f64);
    centre = from_json(doc["centre"], {4}, DType::f64);
  }
  Tensor loss() const {
    return sum(square(matmul(params[0], params[2]) - target)) +
           sum(square(params[1] - centre)) * 0.5 + sum(square(square(params[1]))) * 0.1;
  }
};

optim::LBFGSOptions lbfgs_options(const json& o) {
  optim::LBFGSOptions out;
  o.get_to(out);
  return out;
}

TEST(LBFGS, MatchesTorch) {
  const json& doc = optim_fixtures().at("lbfgs");
  for (const auto& [name, c] : doc["cases"].items()) {
    LbfgsProblem prob(doc);
    optim::LBFGS opt(prob.params, lbfgs_options(c["options"]));
    int calls = 0;
    auto closure = [&] {
      opt.zero_grad();
      Tensor l = prob.loss();
      l.backward();
      ++calls;
      return l.item<double>();
    };
    for (size_t step = 0; step < c["losses"].size(); ++step) {
      const double loss = opt.step(closure);
      const double want = c["losses"][step].get<double>();
      EXPECT_NEAR(loss, want, 1e-9 * std::abs(want)) << name << " step " << step;
      for (size_t i = 0; i < prob.params.size(); ++i) {
        const Tensor w = from_json(c["params"][step][i], prob.params[i].shape(), DType::f64);
        EXPECT_TRUE(
            check_close(prob.params[i], w, 1e-10, 1e-12,
                        name + " step " + std::to_string(step) + " param " + std::to_string(i)));
      }
      EXPECT_EQ(opt.func_evals(), c["state"][step]["func_evals"].get<int64_t>()) << name;
      EXPECT_EQ(opt.n_iter(), c["state"][step]["n_iter"].get<int64_t>()) << name;
      EXPECT_EQ(opt.history(), c["state"][step]["history"].get<size_t>()) << name;
    }
    EXPECT_EQ(calls, c["closure_calls"].get<int>()) << name;
  }
}

TEST(LBFGS, StateDictResumesAndClosureMisuseIsAnError) {
  const json& doc = optim_fixtures().at("lbfgs");
  const json& c = doc["cases"]["lbfgs_strong_wolfe"];
  LbfgsProblem a(doc), b(doc);
  optim::LBFGS opt_a(a.params, lbfgs_options(c["options"]));
  auto closure_for = [](optim::LBFGS& opt, LbfgsProblem& p) {
    return [&opt, &p] {
      opt.zero_grad();
      Tensor l = p.loss();
      l.backward();
      return l.item<double>();
    };
  };
  for (int i = 0; i < 2; ++i) opt_a.step(closure_for(opt_a, a));
  const optim::OptimizerState saved = through_checkpoint(opt_a.state_dict());
  EXPECT_EQ(saved.meta["state"]["0"]["n_iter"], c["state"][1]["n_iter"]);
  for (size_t i = 0; i < b.params.size(); ++i) {
    NoGradGuard g;
    b.params[i].copy_(a.params[i]);
  }
  optim::LBFGS opt_b(b.params, {.lr = 7.0});
  opt_b.load_state_dict(saved);
  EXPECT_EQ(opt_b.lr(0), 1.0);
  for (int i = 2; i < 5; ++i) {
    opt_a.step(closure_for(opt_a, a));
    opt_b.step(closure_for(opt_b, b));
  }
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_EQ(ember_test::values_f64(a.params[i]), ember_test::values_f64(b.params[i]));
  EXPECT_EQ(opt_b.func_evals(), opt_a.func_evals());

  expect_error([&] { opt_a.step(); }, {"LBFGS.step: needs a closure", "got step() without one"});
  expect_error([&] { opt_a.step(std::function<double()>()); },
               {"LBFGS.step: got an empty closure"});
  Tensor extra = parameter(zeros({2}));
  opt_a.add_param_group({extra});
  expect_error([&] { opt_a.step(closure_for(opt_a, a)); },
               {"LBFGS.step: L-BFGS supports one parameter group (got 2)"});
}

TEST(LBFGS, CudaMatchesCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: L-BFGS on the GPU needs one";
  const json& doc = optim_fixtures().at("lbfgs");
  const json& c = doc["cases"]["lbfgs_strong_wolfe"];
  LbfgsProblem cpu(doc), gpu(doc);
  for (Tensor& p : gpu.params) p = parameter(p.detach().to(Device::cuda(0)));
  gpu.target = gpu.target.to(Device::cuda(0));
  gpu.centre = gpu.centre.to(Device::cuda(0));
  optim::LBFGS opt_cpu(cpu.params, lbfgs_options(c["options"]));
  optim::LBFGS opt_gpu(gpu.params, lbfgs_options(c["options"]));
  auto closure_for = [](optim::LBFGS& opt, LbfgsProblem& p) {
    return [&opt, &p] {
      opt.zero_grad();
      Tensor l = p.loss();
      l.backward();
      return l.item<double>();
    };
  };
  for (int i = 0; i < 3; ++i) {
    const double a = opt_cpu.step(closure_for(opt_cpu, cpu));
    const double b = opt_gpu.step(closure_for(opt_gpu, gpu));
    EXPECT_NEAR(a, b, 1e-9 * std::abs(a)) << "step " << i;
  }
  for (size_t i = 0; i < cpu.params.size(); ++i)
    EXPECT_TRUE(check_close(gpu.params[i].to(Device::cpu()), cpu.params[i], 1e-7, 1e-9,
                            "lbfgs cuda param " + std::to_string(i)));
}

TEST(LBFGS, OtherOptimizersTakeAClosureToo) {
  Tensor w = parameter(tensor({3.0f}, {1}));
  optim::SGD opt({w}, {.lr = 0.25});
  const double loss = opt.step([&] {
    opt.zero_grad();
    Tensor l = sum(square(w));
    l.backward();
    return l.item<double>();
  });
  EXPECT_EQ(loss, 9.0);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1.5f}));  // 3 - 0.25 · 6
}

// ---------------------------------------------------------------------------------------
// schedulers

const std::map<std::string, optim::LambdaLR::Lambda>& lambdas() {
  static const std::map<std::string, optim::LambdaLR::Lambda> m = {
      {"exp95", [](int64_t e) { return std::pow(0.95, static_cast<double>(e)); }},
      {"warmup_inv", [](int64_t e) {
         return e < 5 ? static_cast<double>(e + 1) / 5
                      : 1.0 / (1 + 0.1 * static_cast<double>(e - 5));
       }}};
  return m;
}

std::vector<double> double_list(const json& v) {
  return v.is_array() ? v.get<std::vector<double>>() : std::vector<double>{v.get<double>()};
}

std::shared_ptr<optim::LRScheduler> make_more_scheduler(optim::Optimizer& opt, const json& s) {
  const std::string type = s["type"];
  if (type == "ConstantLR")
    return std::make_shared<optim::ConstantLR>(opt, s.value("factor", 1.0 / 3),
                                               s.value("total_iters", 5));
  if (type == "PolynomialLR")
    return std::make_shared<optim::PolynomialLR>(opt, s.value("total_iters", 5),
                                                 s.value("power", 1.0));
  if (type == "LambdaLR") {
    std::vector<optim::LambdaLR::Lambda> fns;
    for (const json& n : s["lambdas"]) fns.push_back(lambdas().at(n.get<std::string>()));
    if (fns.size() == 1) return std::make_shared<optim::LambdaLR>(opt, fns[0]);
    return std::make_shared<optim::LambdaLR>(opt, fns);
  }
  if (type == "OneCycleLR") {
    optim::OneCycleLROptions o{.max_lr = double_list(s["max_lr"]), .total_steps = s["total_steps"]};
    o.pct_start = s.value("pct_start", 0.3);
    o.anneal_strategy = s.value("anneal_strategy", std::string("cos")) == "cos"
                            ? optim::AnnealStrategy::cos
                            : optim::AnnealStrategy::linear;
    o.cycle_momentum = s.value("cycle_momentum", true);
    if (s.contains("base_momentum")) o.base_momentum = double_list(s["base_momentum"]);
    if (s.contains("max_momentum")) o.max_momentum = double_list(s["max_momentum"]);
    o.div_factor = s.value("div_factor", 25.0);
    o.final_div_factor = s.value("final_div_factor", 1e4);
    o.three_phase = s.value("three_phase", false);
    return std::make_shared<optim::OneCycleLR>(opt, o);
  }
  if (type == "CyclicLR") {
    optim::CyclicLROptions o{.base_lr = double_list(s["base_lr"]),
                             .max_lr = double_list(s["max_lr"])};
    o.step_size_up = s.value("step_size_up", 2000);
    if (s.contains("step_size_down")) o.step_size_down = s["step_size_down"].get<int64_t>();
    const std::string mode = s.value("mode", std::string("triangular"));
    o.mode = mode == "triangular"    ? optim::CyclicMode::triangular
             : mode == "triangular2" ? optim::CyclicMode::triangular2
                                     : optim::CyclicMode::exp_range;
    o.gamma = s.value("gamma", 1.0);
    o.cycle_momentum = s.value("cycle_momentum", true);
    if (s.contains("base_momentum")) o.base_momentum = double_list(s["base_momentum"]);
    if (s.contains("max_momentum")) o.max_momentum = double_list(s["max_momentum"]);
    return std::make_shared<optim::CyclicLR>(opt, o);
  }
  std::vector<std::shared_ptr<optim::LRScheduler>> children;
  for (const json& child : s["schedulers"]) children.push_back(make_more_scheduler(opt, child));
  if (type == "SequentialLR")
    return std::make_shared<optim::SequentialLR>(opt, children,
                                                 s["milestones"].get<std::vector<int64_t>>());
  if (type == "ChainedScheduler") return std::make_shared<optim::ChainedScheduler>(children);
  throw std::runtime_error("unknown scheduler " + type);
}

// Two groups with lrs 0.1 and 0.02 (as the generator), SGD (momentum 0 or 0.9) or Adam.
struct TwoGroupOptimizer {
  Tensor a = parameter(zeros({2}));
  Tensor b = parameter(zeros({3}));
  std::unique_ptr<optim::Optimizer> opt;
  explicit TwoGroupOptimizer(const std::string& kind) {
    if (kind == "Adam") {
      opt = std::make_unique<optim::Adam>(
          std::vector<optim::Adam::Group>{{{a}, {.lr = 0.1}}, {{b}, {.lr = 0.02}}});
    } else {
      const double m = kind == "SGD_momentum" ? 0.9 : 0.0;
      opt = std::make_unique<optim::SGD>(std::vector<optim::SGD::Group>{
          {{a}, {.lr = 0.1, .momentum = m}}, {{b}, {.lr = 0.02, .momentum = m}}});
    }
  }
  std::vector<double> momenta() const {
    std::vector<double> out;
    for (size_t g = 0; g < 2; ++g) {
      const json o = opt->group_options(g);
      out.push_back(o.contains("momentum") ? o["momentum"].get<double>()
                                           : o["betas"][0].get<double>());
    }
    return out;
  }
};

std::vector<std::string> more_scheduler_names() {
  return ember_test::optim_util::keys_of(optim_fixtures().at("more_schedulers"));
}

class MoreSchedFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(MoreSchedFixture, MatchesTorchLrAndMomentum) {
  const json& c = optim_fixtures().at("more_schedulers").at(GetParam());
  const json& spec = c["spec"];
  TwoGroupOptimizer t(spec.value("optimizer", std::string("SGD")));
  auto sched = make_more_scheduler(*t.opt, spec);
  expect_values(sched->get_last_lr(), c["lrs"][0], GetParam() + " after construction");
  expect_values(t.momenta(), c["momenta"][0], GetParam() + " momentum after construction");
  for (size_t i = 1; i < c["lrs"].size(); ++i) {
    sched->step();
    expect_values(sched->get_last_lr(), c["lrs"][i], GetParam() + " step " + std::to_string(i));
    if (spec["type"] != "SequentialLR")  // PyTorch's get_last_lr there is the child's
      expect_values(t.opt->lrs(), c["lrs"][i], GetParam() + " group lrs");
    expect_values(t.momenta(), c["momenta"][i], GetParam() + " momentum " + std::to_string(i));
  }
}

TEST_P(MoreSchedFixture, StateDictResumesExactly) {
  const json& c = optim_fixtures().at("more_schedulers").at(GetParam());
  const json& spec = c["spec"];
  const std::string kind = spec.value("optimizer", std::string("SGD"));
  const size_t total = c["lrs"].size() - 1, cut = 12;
  TwoGroupOptimizer first(kind);
  auto s1 = make_more_scheduler(*first.opt, spec);
  for (size_t i = 0; i < cut; ++i) s1->step();
  const json sched_state = json::parse(s1->state_dict().dump());
  const json opt_state = json::parse(first.opt->state_dict().meta.dump());
  for (const json& key : c["state_keys"]) {
    const std::string k = key.get<std::string>();
    if (k == "verbose" || k == "_get_lr_called_within_step" || k == "anneal_func" ||
        k == "_scale_fn_ref" || k == "_scale_fn_custom")
      continue;  // Python-only entries
    EXPECT_TRUE(sched_state.contains(k)) << GetParam() << " state lacks PyTorch's '" << k << "'";
  }

  TwoGroupOptimizer resumed(kind);
  auto s2 = make_more_scheduler(*resumed.opt, spec);
  resumed.opt->load_state_dict({opt_state, {}});
  s2->load_state_dict(sched_state);
  EXPECT_EQ(s2->state_dict(), sched_state);
  for (size_t i = cut; i < total; ++i) {
    s2->step();
    expect_values(s2->get_last_lr(), c["lrs"][i + 1], GetParam() + " resumed " + std::to_string(i));
    expect_values(resumed.momenta(), c["momenta"][i + 1], GetParam() + " resumed momentum");
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, MoreSchedFixture, ::testing::ValuesIn(more_scheduler_names()));

TEST(SchedMore, CosineDecayHoldsItsFloor) {
  TwoGroupOptimizer t("SGD");
  optim::CosineDecayLR sched(*t.opt, 10, 0.001);
  optim::SGD ref_opt({parameter(zeros({1}))}, {.lr = 0.1});
  optim::CosineAnnealingLR torch_like(ref_opt, 10, 0.001);
  for (int e = 1; e <= 25; ++e) {
    sched.step();
    torch_like.step();
    const double t_e = std::min(e, 10);
    const double want = 0.001 + (0.1 - 0.001) * (1 + std::cos(std::numbers::pi * t_e / 10)) / 2;
    EXPECT_NEAR(t.opt->lr(0), want, 1e-15) << "epoch " << e;
    if (e <= 10) {
      EXPECT_NEAR(ref_opt.lr(0), want, 1e-15) << "the same cosine up to T_max";
    }
  }
  EXPECT_EQ(t.opt->lr(0), 0.001) << "held at eta_min";
  EXPECT_GT(ref_opt.lr(0), 0.01) << "PyTorch's CosineAnnealingLR rises again after T_max";
  const json s = sched.state_dict();
  TwoGroupOptimizer u("SGD");
  optim::CosineDecayLR again(*u.opt, 10, 0.001);
  again.load_state_dict(s);
  again.step();
  EXPECT_EQ(again.get_last_lr()[0], 0.001);
}

TEST(SchedMore, BadArgumentsAreClearErrors) {
  TwoGroupOptimizer t("SGD");
  expect_error([&] { optim::ConstantLR(*t.opt, 1.5); }, {"ConstantLR: invalid factor 1.5"});
  expect_error([&] { optim::PolynomialLR(*t.opt, 0); }, {"PolynomialLR: invalid total_iters 0"});
  expect_error(
      [&] { optim::LambdaLR(*t.opt, std::vector<optim::LambdaLR::Lambda>{lambdas().at("exp95")}); },
      {"LambdaLR: expected 2 lr_lambdas", "got 1"});
  expect_error([&] { optim::OneCycleLR(*t.opt, {.max_lr = {0.1}}); },
               {"OneCycleLR: set total_steps, or epochs and steps_per_epoch"});
  expect_error(
      [&] {
        optim::OneCycleLR(*t.opt, {.max_lr = {0.1, 0.2, 0.3}, .total_steps = 5});
      },
      {"expected 2 values for max_lr", "got 3"});
  optim::OneCycleLR short_run(*t.opt, {.max_lr = {0.1}, .total_steps = 3, .cycle_momentum = false});
  for (int i = 0; i < 3; ++i) short_run.step();
  expect_error([&] { short_run.step(); }, {"OneCycleLR: tried to step 5 times", "total_steps = 3"});
  TwoGroupOptimizer plain("SGD");
  optim::RMSprop rms({parameter(zeros({1}))});
  expect_error(
      [&] { optim::CyclicLR(*plain.opt, {.base_lr = {0.1}, .max_lr = {0.2}, .step_size_up = 0}); },
      {"CyclicLR: invalid step sizes"});
  optim::Adagrad adagrad({parameter(zeros({1}))});
  expect_error([&] { optim::OneCycleLR(adagrad, {.max_lr = {0.1}, .total_steps = 10}); },
               {"OneCycleLR: Adagrad has neither momentum nor betas"});
  optim::ConstantLR c(*plain.opt);
  expect_error(
      [&] {
        c.load_state_dict({{"type", "PolynomialLR"}});
      },
      {"ConstantLR.load_state_dict", "PolynomialLR"});
}

TEST(SchedMore, CustomScaleFunction) {
  TwoGroupOptimizer t("SGD");
  optim::CyclicLR sched(*t.opt, {.base_lr = {0.0},
                                 .max_lr = {1.0},
                                 .step_size_up = 2,
                                 .scale_fn = [](double x) { return 1.0 / (1.0 + x); },
                                 .scale_mode = optim::ScaleMode::iterations,
                                 .cycle_momentum = false});
  EXPECT_DOUBLE_EQ(t.opt->lr(0), 0.0);  // epoch 0: the bottom
  sched.step();                         // epoch 1: halfway up, scale 1/(1+1)
  EXPECT_DOUBLE_EQ(t.opt->lr(0), 0.25);
  sched.step();  // epoch 2: the peak, scale 1/3
  EXPECT_DOUBLE_EQ(t.opt->lr(0), 1.0 / 3);
}

// ---------------------------------------------------------------------------------------
// printed summaries

TEST(OptimPrint, OptimizerLooksLikePyTorchsRepr) {
  Tensor w = parameter(zeros({2}));
  Tensor b = parameter(zeros({2}));
  optim::Adam opt({{{w}, {.lr = 1e-3}}, {{b}, {.lr = 0.01, .amsgrad = true}}});
  std::ostringstream out;
  out << opt;
  EXPECT_EQ(out.str(),
            "Adam (\n"
            "Parameter Group 0\n"
            "    amsgrad: False\n"
            "    betas: (0.9, 0.999)\n"
            "    eps: 1e-08\n"
            "    lr: 0.001\n"
            "    maximize: False\n"
            "    weight_decay: 0.0\n"
            "Parameter Group 1\n"
            "    amsgrad: True\n"
            "    betas: (0.9, 0.999)\n"
            "    eps: 1e-08\n"
            "    lr: 0.01\n"
            "    maximize: False\n"
            "    weight_decay: 0.0\n"
            ")");
  optim::LBFGS lbfgs({parameter(zeros({1}))});
  EXPECT_NE(lbfgs.to_string().find("line_search_fn: None"), std::string::npos) << lbfgs.to_string();
  optim::RMSprop rms({parameter(zeros({1}))});
  rms.set_accumulate_steps(4);
  EXPECT_NE(rms.to_string().find("Accumulate 4 steps (mean)"), std::string::npos);
}

TEST(OptimPrint, SchedulersAndLoader) {
  TwoGroupOptimizer t("SGD");
  optim::StepLR step(*t.opt, 7, 0.5);
  step.step();
  std::ostringstream out;
  out << step;
  EXPECT_EQ(out.str(), "StepLR(gamma=0.5, last_epoch=1, last_lr=[0.1,0.02], step_size=7)");
  optim::ReduceLROnPlateau plateau(*t.opt);
  EXPECT_EQ(plateau.to_string().rfind("ReduceLROnPlateau(best=inf, cooldown=0", 0), 0u)
      << plateau.to_string();
  auto a = std::make_shared<optim::LinearLR>(*t.opt, 0.5, 1.0, 3);
  auto c = std::make_shared<optim::ExponentialLR>(*t.opt, 0.9);
  optim::ChainedScheduler chain({a, c});
  EXPECT_NE(chain.to_string().find("_schedulers=[LinearLR, ExponentialLR]"), std::string::npos)
      << chain.to_string();

  auto ds = std::make_shared<data::TensorDataset>(zeros({10, 3}), zeros({10}));
  data::DataLoader loader(ds, {.batch_size = 4, .shuffle = true, .seed = 7, .prefetch = false});
  std::ostringstream lo;
  lo << loader;
  EXPECT_EQ(lo.str(),
            "DataLoader(size=10, batch_size=4, batches=3, shuffle=True, seed=7, drop_last=False, "
            "prefetch=False, epoch=0, position=0)");
}

// Every options struct takes designated initializers naming only some members, with no
// warning (the rule 5): this block fails to compile under -Werror otherwise.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wmissing-field-initializers"
TEST(OptimOptions, DesignatedInitializersNeedNoFullList) {
  const optim::RMSpropOptions rms{.momentum = 0.9};
  const optim::AdagradOptions adagrad{.lr_decay = 0.1};
  const optim::AdadeltaOptions adadelta{.rho = 0.8};
  const optim::AdamaxOptions adamax{.eps = 1e-6};
  const optim::NAdamOptions nadam{.momentum_decay = 0.01};
  const optim::RAdamOptions radam{.weight_decay = 0.1};
  const optim::LBFGSOptions lbfgs{.line_search_fn = optim::LineSearch::strong_wolfe};
  const optim::SGDOptions sgd{.momentum = 0.9};
  const optim::AdamOptions adam{.amsgrad = true};
  const optim::AdamWOptions adamw{.lr = 1e-4};
  const optim::OneCycleLROptions one{.max_lr = {0.1}, .total_steps = 10};
  const optim::CyclicLROptions cyc{.base_lr = {0.01}, .max_lr = {0.1}};
  const optim::ReduceLROnPlateauOptions plateau{.patience = 3};
  EXPECT_EQ(rms.alpha, 0.99);
  EXPECT_EQ(adagrad.eps, 1e-10);
  EXPECT_EQ(adadelta.lr, 1.0);
  EXPECT_EQ(adamax.lr, 2e-3);
  EXPECT_EQ(nadam.lr, 2e-3);
  EXPECT_EQ(radam.lr, 1e-3);
  EXPECT_EQ(lbfgs.max_iter, 20);
  EXPECT_EQ(sgd.lr + adam.lr + adamw.lr, 1e-3 + 1e-3 + 1e-4);
  EXPECT_EQ(one.pct_start + cyc.gamma, 1.3);
  EXPECT_EQ(plateau.factor, 0.1);
}
#pragma GCC diagnostic pop

}  // namespace
