// tests/test_optim.cpp — optimizers, LR schedulers and gradient clipping against PyTorch
// (tests/data/optim_fixtures.json, written by tests/gen_optim_fixtures.py), plus the
// contracts of ARCHITECTURE §3: in-place updates (data_ptr kept), optimizer state in the
// Persistent pool, no Pass-pool growth or allocation across steps, state_dict round trips,
// and clear errors for bad hyperparameters and mismatched state.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/optim.hpp"
#include "fixtures.hpp"
#include "optim_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::check_close;
using json = nlohmann::json;

using ember_test::optim_util::expect_error;
using ember_test::optim_util::from_json;
using ember_test::optim_util::make_typed;
using ember_test::optim_util::optim_fixtures;
using ember_test::optim_util::OptimCase;
using ember_test::optim_util::run_steps;
using ember_test::optim_util::set_grads;
using ember_test::optim_util::through_checkpoint;
using ember_test::optim_util::TwoGroups;

// ---------------------------------------------------------------------------------------
// optimizer fixtures

OptimCase load_case(const std::string& name) {
  return ember_test::optim_util::load_optim_case(optim_fixtures().at("optimizers").at(name),
                                                 Device::cpu());
}

std::unique_ptr<optim::Optimizer> make_optimizer(const json& spec,
                                                 const std::vector<Tensor>& params) {
  const std::string type = spec["type"];
  if (type == "SGD") return make_typed<optim::SGD>(spec["groups"], params);
  if (type == "Adam") return make_typed<optim::Adam>(spec["groups"], params);
  return make_typed<optim::AdamW>(spec["groups"], params);
}

class OptimFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(OptimFixture, MatchesTorchTrajectory) {
  OptimCase c = load_case(GetParam());
  auto opt = make_optimizer(c.spec, c.params);
  const double rtol = c.dtype == DType::f64 ? 1e-12 : 1e-6;
  const double atol = c.dtype == DType::f64 ? 1e-14 : 1e-7;
  ember_test::optim_util::expect_torch_trajectory(c, *opt, rtol, atol, GetParam());
  // State lives in the Persistent pool, next to its parameter, with its dtype and shape.
  for (const Tensor& p : c.params) {
    const optim::ParamState* s = opt->state(p);
    ASSERT_NE(s, nullptr);
    for (const auto& [name, t] : s->tensors) {
      EXPECT_EQ(pool_of(t), Pool::Persistent) << name;
      EXPECT_EQ(t.device(), p.device()) << name;
      EXPECT_EQ(t.dtype(), p.dtype()) << name;
      EXPECT_EQ(t.shape(), p.shape()) << name;
    }
  }
}

TEST_P(OptimFixture, StateDictRoundTripIsBitwise) {
  OptimCase straight = load_case(GetParam());
  auto opt_a = make_optimizer(straight.spec, straight.params);
  run_steps(straight, *opt_a, 0, 20);

  OptimCase first = load_case(GetParam());
  auto opt_b = make_optimizer(first.spec, first.params);
  run_steps(first, *opt_b, 0, 10);
  const optim::OptimizerState saved = through_checkpoint(opt_b->state_dict());

  OptimCase resumed = load_case(GetParam());
  for (size_t i = 0; i < resumed.params.size(); ++i) {
    NoGradGuard g;
    resumed.params[i].copy_(first.params[i]);
  }
  json groups = resumed.spec["groups"];
  for (json& g : groups) g["options"]["lr"] = 123.0;  // the state's lrs must win
  json spec = resumed.spec;
  spec["groups"] = groups;
  auto opt_c = make_optimizer(spec, resumed.params);
  opt_c->load_state_dict(saved);
  EXPECT_EQ(opt_c->lrs(), opt_b->lrs());
  run_steps(resumed, *opt_c, 10, 20);
  for (size_t i = 0; i < straight.params.size(); ++i) {
    const std::vector<double> a = ember_test::values_f64(resumed.params[i]);
    const std::vector<double> b = ember_test::values_f64(straight.params[i]);
    EXPECT_EQ(a, b) << GetParam() << " param " << i << " differs after resuming";
  }
  EXPECT_EQ(opt_c->state_dict().meta, opt_a->state_dict().meta);
}

INSTANTIATE_TEST_SUITE_P(Torch, OptimFixture,
                         ::testing::Values("sgd_plain", "sgd_momentum", "sgd_nesterov",
                                           "sgd_dampening_wd", "sgd_maximize_wd", "sgd_two_groups",
                                           "sgd_momentum_f64", "adam", "adam_amsgrad", "adam_wd",
                                           "adam_maximize_eps", "adam_skipped_grads",
                                           "adam_two_groups", "adam_f64", "adamw",
                                           "adamw_amsgrad_wd"));

// ---------------------------------------------------------------------------------------
// state dict layout and load checks

TEST(OptimState, LayoutFollowsPyTorch) {
  OptimCase c = load_case("adam_two_groups");
  auto opt = make_optimizer(c.spec, c.params);
  run_steps(c, *opt, 0, 3);
  const optim::OptimizerState s = opt->state_dict();
  EXPECT_EQ(s.meta["type"], "Adam");
  ASSERT_EQ(s.meta["param_groups"].size(), 2u);
  EXPECT_EQ(s.meta["param_groups"][0]["params"], json({0, 1}));
  EXPECT_EQ(s.meta["param_groups"][1]["params"], json({2}));
  EXPECT_EQ(s.meta["param_groups"][1]["lr"], 1e-3);
  EXPECT_EQ(s.meta["param_groups"][1]["betas"], json({0.5, 0.9}));
  EXPECT_EQ(s.meta["state"]["2"]["step"], 3);
  std::vector<std::string> names;
  for (const auto& [name, t] : s.tensors) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"state.0.exp_avg", "state.0.exp_avg_sq",
                                             "state.1.exp_avg", "state.1.exp_avg_sq",
                                             "state.2.exp_avg", "state.2.exp_avg_sq"}));
  // Per-parameter step counts: a parameter skipped on some steps has its own count.
  OptimCase skip = load_case("adam_skipped_grads");
  auto opt2 = make_optimizer(skip.spec, skip.params);
  run_steps(skip, *opt2, 0, 6);
  const json meta = opt2->state_dict().meta;
  EXPECT_EQ(meta["state"]["0"]["step"], 6);
  EXPECT_EQ(meta["state"]["1"]["step"], 4);
}

TEST(OptimState, LoadRejectsMismatchesAndChangesNothing) {
  OptimCase c = load_case("adam");
  auto opt = make_optimizer(c.spec, c.params);
  run_steps(c, *opt, 0, 2);
  const optim::OptimizerState good = opt->state_dict();
  const json before = opt->state_dict().meta;

  optim::OptimizerState wrong_type = good;
  wrong_type.meta["type"] = "SGD";
  expect_error([&] { opt->load_state_dict(wrong_type); }, {"Adam.load_state_dict", "SGD"});

  optim::OptimizerState two_groups = good;
  two_groups.meta["param_groups"].push_back(two_groups.meta["param_groups"][0]);
  expect_error([&] { opt->load_state_dict(two_groups); }, {"group count", "got 2", "expected 1"});

  optim::OptimizerState fewer = good;
  fewer.meta["param_groups"][0]["params"] = json({0, 1});
  expect_error([&] { opt->load_state_dict(fewer); }, {"parameter count", "got 2", "expected 3"});

  optim::OptimizerState bad_shape = good;
  bad_shape.tensors[0].second = zeros({3, 2});
  expect_error([&] { opt->load_state_dict(bad_shape); }, {"state.0.exp_avg", "[3, 2]", "[2, 3]"});

  optim::OptimizerState missing = good;
  missing.tensors.erase(missing.tensors.begin() + 1);
  expect_error([&] { opt->load_state_dict(missing); },
               {"missing state tensor", "state.0.exp_avg_sq"});

  optim::OptimizerState unknown = good;
  unknown.tensors.emplace_back("state.0.momentum_buffer", zeros({2, 3}));
  expect_error([&] { opt->load_state_dict(unknown); },
               {"unexpected state tensor", "state.0.momentum_buffer"});

  optim::OptimizerState bad_lr = good;
  bad_lr.meta["param_groups"][0]["lr"] = -0.5;
  expect_error([&] { opt->load_state_dict(bad_lr); }, {"invalid learning rate -0.5"});

  EXPECT_EQ(opt->state_dict().meta, before) << "a failed load must change nothing";
}

TEST(OptimState, SgdWithoutBufferStartsLikePyTorch) {
  // A PyTorch SGD state may lack momentum_buffer (None): the next step takes the gradient.
  Tensor p = parameter(tensor({1.0f, 2.0f}, {2}));
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  optim::OptimizerState s;
  s.meta = {{"type", "SGD"},
            {"state", {{"0", {{"step", 5}}}}},
            {"param_groups", {{{"lr", 0.1}, {"momentum", 0.9}, {"params", {0}}}}}};
  opt.load_state_dict(s);
  p.set_grad(tensor({1.0f, -1.0f}, {2}));
  opt.step();
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{0.9f, 2.1f}));
}

// ---------------------------------------------------------------------------------------
// memory contracts (ARCHITECTURE §3 rules 3-4)

TEST(OptimMemory, StepsAllocateNothingAndKeepBuffers) {
  for (const char* name : {"adam_amsgrad", "sgd_nesterov", "adamw"}) {
    OptimCase c = load_case(name);
    auto opt = make_optimizer(c.spec, c.params);
    set_grads(c, 0);
    opt->step();  // creates the state
    opt->step();
    const MemoryStats before = memory_stats(Device::cpu());
    std::vector<void*> ptrs;
    for (const Tensor& p : c.params) ptrs.push_back(p.data_ptr());
    for (int i = 0; i < 10; ++i) opt->step();
    const MemoryStats after = memory_stats(Device::cpu());
    EXPECT_EQ(after.pass_in_use, before.pass_in_use) << name;
    EXPECT_EQ(after.persistent_bytes, before.persistent_bytes) << name;
    EXPECT_EQ(after.alloc_count, before.alloc_count) << name << ": a steady-state step allocated";
    for (size_t i = 0; i < ptrs.size(); ++i) EXPECT_EQ(c.params[i].data_ptr(), ptrs[i]) << name;
  }
}

TEST(OptimMemory, StateIsPersistentAndCountsOnce) {
  Tensor w = parameter(randn({64, 32}));
  const int64_t persistent0 = memory_stats(Device::cpu()).persistent_bytes;
  optim::Adam opt({w}, {.amsgrad = true});
  w.set_grad(randn({64, 32}));
  opt.step();
  const int64_t grown = memory_stats(Device::cpu()).persistent_bytes - persistent0;
  EXPECT_GE(grown, 3 * 64 * 32 * 4) << "exp_avg, exp_avg_sq, max_exp_avg_sq in the Persistent pool";
  opt.step();
  EXPECT_EQ(memory_stats(Device::cpu()).persistent_bytes - persistent0, grown);
}

TEST(OptimMemory, LargeTensorThreadedStepMatchesSmall) {
  // Big enough to split across the thread pool; every element must match a chunked run.
  const int64_t n = 200003;
  Tensor init = randn({n});
  Tensor grad = randn({n});
  Tensor big = parameter(init);
  optim::Adam opt({big}, {.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true});
  big.set_grad(grad);
  opt.step();
  opt.step();
  std::vector<float> want;
  for (int64_t start = 0; start < n; start += 1000) {
    const int64_t len = std::min<int64_t>(1000, n - start);
    Tensor piece = parameter(init.slice(0, start, start + len));
    optim::Adam small({piece}, {.lr = 1e-2, .weight_decay = 0.1, .amsgrad = true});
    piece.set_grad(grad.slice(0, start, start + len).contiguous());
    small.step();
    small.step();
    for (float v : piece.to_vector<float>()) want.push_back(v);
  }
  EXPECT_EQ(big.to_vector<float>(), want);
}

TEST(OptimMemory, NonContiguousParameterUpdatesItsOwnBuffer) {
  Tensor base = randn({3, 4});
  Tensor p = base.t();  // a non-contiguous leaf
  p.requires_grad_(true);
  Tensor q = parameter(base.t().contiguous());
  Tensor g = randn({4, 3});
  optim::SGD opt_p({p}, {.lr = 0.1, .momentum = 0.9});
  optim::SGD opt_q({q}, {.lr = 0.1, .momentum = 0.9});
  void* ptr = p.data_ptr();
  for (int i = 0; i < 3; ++i) {
    p.set_grad(g);
    q.set_grad(g);
    opt_p.step();
    opt_q.step();
  }
  EXPECT_EQ(p.data_ptr(), ptr);
  EXPECT_EQ(p.contiguous().to_vector<float>(), q.to_vector<float>());
}

// ---------------------------------------------------------------------------------------
// errors

TEST(OptimErrors, BadHyperparametersNameTheValue) {
  Tensor w = parameter(randn({2, 2}));
  expect_error([&] { optim::Adam({w}, {.lr = -0.1}); },
               {"Adam: invalid learning rate -0.1 (expected lr >= 0)"});
  expect_error([&] { optim::Adam({w}, {.betas = {1.5, 0.9}}); }, {"Adam: invalid beta1 1.5"});
  expect_error([&] { optim::Adam({w}, {.betas = {0.9, 1.0}}); }, {"Adam: invalid beta2 1"});
  expect_error([&] { optim::Adam({w}, {.betas = {-0.1, 0.9}}); }, {"invalid beta1 -0.1"});
  expect_error([&] { optim::Adam({w}, {.eps = -1e-3}); }, {"Adam: invalid epsilon -0.001"});
  expect_error([&] { optim::Adam({w}, {.weight_decay = -0.01}); },
               {"Adam: invalid weight_decay -0.01"});
  expect_error([&] { optim::AdamW({w}, {.lr = -2.0}); }, {"AdamW: invalid learning rate -2"});
  expect_error([&] { optim::AdamW({w}, {.weight_decay = -1.0}); },
               {"AdamW: invalid weight_decay -1"});
  expect_error([&] { optim::SGD({w}, {.lr = -0.5}); }, {"SGD: invalid learning rate -0.5"});
  expect_error([&] { optim::SGD({w}, {.momentum = -0.9}); }, {"SGD: invalid momentum -0.9"});
  expect_error([&] { optim::SGD({w}, {.weight_decay = -3.0}); }, {"SGD: invalid weight_decay -3"});
  expect_error([&] { optim::SGD({w}, {.nesterov = true}); },
               {"nesterov requires momentum > 0", "momentum 0"});
  expect_error([&] { optim::SGD({w}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
               {"dampening = 0", "dampening 0.1"});
  expect_error([&] { optim::Adam({w}, {.lr = std::nan("")}); }, {"invalid learning rate nan"});
  // Groups are validated too.
  optim::Adam opt({w});
  Tensor v = parameter(randn({3}));
  expect_error(
      [&] {
        opt.add_param_group({{v}, optim::AdamOptions{.eps = -1.0}});
      },
      {"invalid epsilon -1"});
}

TEST(OptimErrors, BadParametersAndGradients) {
  Tensor w = parameter(randn({2, 2}));
  expect_error([&] { optim::SGD({w, w}); }, {"appears more than once"});
  optim::SGD opt({w});
  expect_error([&] { opt.add_param_group({w}); }, {"appears more than once"});
  Tensor leaf = randn({2}, {.requires_grad = true});
  Tensor made = leaf * 2.0;
  expect_error([&] { optim::SGD({made}); }, {"not a leaf"});
  expect_error([&] { optim::SGD({Tensor()}); }, {"undefined"});
  w.set_grad(randn({2, 2}, {.dtype = DType::f64}));
  expect_error([&] { opt.step(); }, {"SGD: gradient dtype f64", "f32"});
}

TEST(OptimErrors, ZeroGradAndGroupAccess) {
  Tensor w = parameter(randn({2}));
  Tensor b = parameter(randn({3}));
  optim::SGD opt({w}, {.lr = 0.5});
  opt.add_param_group({{b}, optim::SGDOptions{.lr = 0.05}});
  EXPECT_EQ(opt.param_group_count(), 2u);
  EXPECT_EQ(opt.lrs(), (std::vector<double>{0.5, 0.05}));
  opt.set_lr(1, 0.01);
  EXPECT_EQ(opt.param_groups()[1].options.lr, 0.01);
  EXPECT_EQ(opt.group_options(0)["lr"], 0.5);
  w.set_grad(ones({2}));
  b.set_grad(ones({3}));
  opt.zero_grad(false);
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{0.0f, 0.0f}));
  opt.zero_grad();
  EXPECT_FALSE(w.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  opt.step();  // no gradients: nothing happens
  EXPECT_EQ(opt.state(w), nullptr);
  expect_error([&] { opt.lr(7); }, {"no parameter group 7"});
  // Groups at construction (as in docs/optim.md).
  std::vector<Tensor> enc = {parameter(randn({2}))}, dec = {parameter(randn({2}))};
  optim::Adam adam({{enc, {.lr = 1e-4}}, {dec, {.lr = 1e-3}}});
  EXPECT_EQ(adam.lrs(), (std::vector<double>{1e-4, 1e-3}));
  EXPECT_EQ(adam.parameters().size(), 2u);
}

// ---------------------------------------------------------------------------------------
// schedulers

std::shared_ptr<optim::LRScheduler> make_scheduler(optim::Optimizer& opt, const json& s) {
  const std::string type = s["type"];
  if (type == "StepLR")
    return std::make_shared<optim::StepLR>(opt, s["step_size"], s.value("gamma", 0.1));
  if (type == "MultiStepLR")
    return std::make_shared<optim::MultiStepLR>(opt, s["milestones"].get<std::vector<int64_t>>(),
                                                s.value("gamma", 0.1));
  if (type == "ExponentialLR") return std::make_shared<optim::ExponentialLR>(opt, s["gamma"]);
  if (type == "CosineAnnealingLR")
    return std::make_shared<optim::CosineAnnealingLR>(opt, s["T_max"], s.value("eta_min", 0.0));
  if (type == "CosineAnnealingWarmRestarts")
    return std::make_shared<optim::CosineAnnealingWarmRestarts>(opt, s["T_0"], s.value("T_mult", 1),
                                                                s.value("eta_min", 0.0));
  if (type == "LinearLR")
    return std::make_shared<optim::LinearLR>(opt, s["start_factor"], s["end_factor"],
                                             s["total_iters"]);
  std::vector<std::shared_ptr<optim::LRScheduler>> children;
  for (const json& c : s["schedulers"]) children.push_back(make_scheduler(opt, c));
  if (type == "SequentialLR")
    return std::make_shared<optim::SequentialLR>(opt, children,
                                                 s["milestones"].get<std::vector<int64_t>>());
  return std::make_shared<optim::ChainedScheduler>(children);
}

optim::ReduceLROnPlateauOptions plateau_options(const json& s) {
  return {.mode = s["mode"] == "min" ? optim::PlateauMode::min : optim::PlateauMode::max,
          .factor = s["factor"],
          .patience = s["patience"],
          .threshold = s["threshold"],
          .threshold_mode =
              s["threshold_mode"] == "rel" ? optim::ThresholdMode::rel : optim::ThresholdMode::abs,
          .cooldown = s["cooldown"],
          .min_lr = s["min_lr"].get<std::vector<double>>()};
}

void expect_lrs(const std::vector<double>& got, const json& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t g = 0; g < got.size(); ++g) {
    const double w = want[g].get<double>();
    EXPECT_NEAR(got[g], w, 1e-15 + 1e-13 * std::abs(w)) << what << " group " << g;
  }
}

class SchedFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedFixture, MatchesTorchLrSequence) {
  const json& c = optim_fixtures().at("schedulers").at(GetParam());
  const json& spec = c["spec"];
  TwoGroups t;
  if (spec["type"] == "ReduceLROnPlateau") {
    optim::ReduceLROnPlateau sched(t.opt, plateau_options(spec));
    for (size_t i = 0; i < c["metrics"].size(); ++i) {
      sched.step(c["metrics"][i].get<double>());
      expect_lrs(t.opt.lrs(), c["lrs"][i], GetParam() + " step " + std::to_string(i + 1));
      expect_lrs(sched.get_last_lr(), c["lrs"][i], GetParam() + " get_last_lr");
    }
    return;
  }
  auto sched = make_scheduler(t.opt, spec);
  expect_lrs(sched->get_last_lr(), c["lrs"][0], GetParam() + " after construction");
  for (size_t i = 1; i < c["lrs"].size(); ++i) {
    sched->step();
    expect_lrs(sched->get_last_lr(), c["lrs"][i], GetParam() + " step " + std::to_string(i));
    if (spec["type"] != "SequentialLR")
      expect_lrs(t.opt.lrs(), c["lrs"][i], GetParam() + " group lrs");
  }
}

TEST_P(SchedFixture, StateDictResumesExactly) {
  const json& c = optim_fixtures().at("schedulers").at(GetParam());
  const json& spec = c["spec"];
  const size_t total = c["lrs"].size() - 1, cut = 12;
  const bool plateau = spec["type"] == "ReduceLROnPlateau";
  auto metric = [&](size_t i) { return plateau ? c["metrics"][i].get<double>() : 0.0; };

  TwoGroups first;
  json opt_state, sched_state;
  if (plateau) {
    optim::ReduceLROnPlateau s(first.opt, plateau_options(spec));
    for (size_t i = 0; i < cut; ++i) s.step(metric(i));
    sched_state = json::parse(s.state_dict().dump());
  } else {
    auto s = make_scheduler(first.opt, spec);
    for (size_t i = 0; i < cut; ++i) s->step();
    sched_state = json::parse(s->state_dict().dump());
  }
  opt_state = json::parse(first.opt.state_dict().meta.dump());

  TwoGroups resumed;
  std::vector<std::vector<double>> got;
  if (plateau) {
    optim::ReduceLROnPlateau s(resumed.opt, plateau_options(spec));
    resumed.opt.load_state_dict({opt_state, {}});
    s.load_state_dict(sched_state);
    for (size_t i = cut; i < total; ++i) {
      s.step(metric(i));
      got.push_back(s.get_last_lr());
    }
  } else {
    auto s = make_scheduler(resumed.opt, spec);
    resumed.opt.load_state_dict({opt_state, {}});
    s->load_state_dict(sched_state);
    EXPECT_EQ(s->state_dict(), sched_state);
    for (size_t i = cut; i < total; ++i) {
      s->step();
      got.push_back(s->get_last_lr());
    }
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const size_t row = plateau ? cut + i : cut + i + 1;
    expect_lrs(got[i], c["lrs"][row], GetParam() + " resumed step " + std::to_string(row));
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, SchedFixture,
                         ::testing::Values("step", "multistep", "exponential", "cosine_short",
                                           "cosine_long", "warm_restarts_mult2", "warm_restarts",
                                           "linear_warmup", "linear_decay",
                                           "sequential_warmup_cosine", "sequential_three",
                                           "chained_step_exp", "chained_linear_cosine",
                                           "plateau_min_rel", "plateau_max_abs"));

TEST(SchedBasics, InitialLrAndFractionalRestarts) {
  TwoGroups t;
  optim::CosineAnnealingWarmRestarts s(t.opt, 10, 1, 0.0);
  EXPECT_EQ(t.opt.initial_lr(0), 0.1);
  EXPECT_EQ(t.opt.state_dict().meta["param_groups"][1]["initial_lr"], 0.02);
  s.step_to(2.5);  // per-batch stepping
  EXPECT_DOUBLE_EQ(s.get_last_lr()[0], 0.1 * (1 + std::cos(std::numbers::pi * 2.5 / 10)) / 2);
  EXPECT_EQ(s.last_epoch(), 2);
  s.step_to(12.5);
  EXPECT_DOUBLE_EQ(s.get_last_lr()[0], 0.1 * (1 + std::cos(std::numbers::pi * 2.5 / 10)) / 2);
  // step_to on a chainable scheduler jumps through the closed form.
  TwoGroups u;
  optim::StepLR step(u.opt, 3, 0.5);
  step.step_to(7);
  EXPECT_DOUBLE_EQ(u.opt.lr(0), 0.1 * 0.25);
}

TEST(SchedBasics, BadArgumentsAreClearErrors) {
  TwoGroups t;
  expect_error([&] { optim::StepLR(t.opt, 0); }, {"StepLR: invalid step_size 0"});
  expect_error([&] { optim::CosineAnnealingLR(t.opt, 0); }, {"CosineAnnealingLR: invalid T_max 0"});
  expect_error([&] { optim::CosineAnnealingWarmRestarts(t.opt, 0); }, {"invalid T_0 0"});
  expect_error([&] { optim::CosineAnnealingWarmRestarts(t.opt, 5, 0); }, {"invalid T_mult 0"});
  expect_error([&] { optim::LinearLR(t.opt, 0.0); }, {"LinearLR: invalid start_factor 0"});
  expect_error([&] { optim::LinearLR(t.opt, 0.5, 1.5); }, {"LinearLR: invalid end_factor 1.5"});
  expect_error([&] { optim::ReduceLROnPlateau(t.opt, {.factor = 1.0}); }, {"invalid factor 1"});
  expect_error(
      [&] {
        optim::ReduceLROnPlateau(t.opt, {.min_lr = {0.1, 0.2, 0.3}});
      },
      {"expected 2 min_lrs"});
  TwoGroups fresh;
  expect_error([&] { optim::StepLR(fresh.opt, 3, 0.1, /*last_epoch=*/5); }, {"has no initial_lr"});
  auto a = std::make_shared<optim::StepLR>(t.opt, 3);
  auto b = std::make_shared<optim::ExponentialLR>(t.opt, 0.9);
  expect_error(
      [&] {
        optim::SequentialLR(t.opt, {a, b}, {2, 5});
      },
      {"milestones", "expected one milestone fewer"});
  auto other = std::make_shared<optim::ExponentialLR>(fresh.opt, 0.9);
  expect_error([&] { optim::ChainedScheduler({a, other}); }, {"different optimizers"});
  expect_error(
      [&] {
        a->load_state_dict({{"type", "ExponentialLR"}});
      },
      {"StepLR.load_state_dict", "ExponentialLR"});
}

// ---------------------------------------------------------------------------------------
// gradient clipping

TEST(ClipGrad, MatchesTorch) {
  for (const auto& [name, c] : optim_fixtures().at("clip").items()) {
    std::vector<Tensor> params;
    const json& shapes = optim_fixtures()["optimizers"]["adam"]["shapes"];
    for (size_t i = 0; i < c["grads"].size(); ++i) {
      const Shape shape(shapes[i].get<std::vector<int64_t>>());
      params.push_back(parameter(zeros(shape)));
      params.back().set_grad(from_json(c["grads"][i], shape, DType::f32));
    }
    if (c["kind"] == "norm") {
      const double norm_type = c["norm_type"].is_string() ? INFINITY : c["norm_type"].get<double>();
      const double total = optim::clip_grad_norm(params, c["max_norm"].get<double>(), norm_type);
      const double want = c["total_norm"].get<double>();
      EXPECT_NEAR(total, want, 1e-6 * want) << name;
    } else {
      optim::clip_grad_value(params, c["clip_value"].get<double>());
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor want = from_json(c["clipped"][i], params[i].shape(), DType::f32);
      EXPECT_TRUE(
          check_close(params[i].grad(), want, 1e-6, 1e-7, name + " grad " + std::to_string(i)));
    }
  }
}

TEST(ClipGrad, EdgeCases) {
  Tensor a = parameter(zeros({3}));
  Tensor b = parameter(zeros({2}));
  EXPECT_EQ(optim::clip_grad_norm({a, b}, 1.0), 0.0) << "no gradients: norm 0";
  a.set_grad(tensor({3.0f, 0.0f, 4.0f}, {3}));
  EXPECT_NEAR(optim::clip_grad_norm({a, b}, 10.0), 5.0, 1e-12)
      << "b has no gradient and is skipped";
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{3.0f, 0.0f, 4.0f}))
      << "below max_norm: unchanged";
  b.set_grad(tensor({INFINITY, 1.0f}, {2}));
  expect_error(
      [&] {
        optim::clip_grad_norm({a, b}, 1.0, 2.0, true);
      },
      {"clip_grad_norm", "non-finite"});
  expect_error([&] { optim::clip_grad_norm({a}, 1.0, 0.0); }, {"invalid norm_type 0"});
  expect_error([&] { optim::clip_grad_value({a}, -1.0); }, {"invalid clip_value -1"});
  void* ptr = a.grad().data_ptr();
  optim::clip_grad_norm({a}, 1.0);
  EXPECT_EQ(a.grad().data_ptr(), ptr) << "clipping scales the gradient in place";
  EXPECT_NEAR(a.grad().to_vector<float>()[2], 4.0 / (5.0 + 1e-6), 1e-7);
}

}  // namespace
