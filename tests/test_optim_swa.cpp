// tests/test_optim_swa.cpp — ASGD, Rprop, MultiplicativeLR and torch.optim.swa_utils
// (AveragedModel, SWALR, update_bn) against PyTorch 1.13 (tests/data/swa_fixtures.json, written
// by tests/gen_swa_fixtures.py); their bad-input errors; CUDA against CPU.
//
// Tolerances: f32 parameters and state within 1e-6 relative (plus 1e-7 × max(1, max|want|)
// absolute: ember's composed ops round like PyTorch's but may fuse differently), f64 within
// 1e-12 (plus 1e-13); averaged models and running stats within 1e-6 (plus 1e-6); learning rates
// within 1e-13 relative (the same double expressions as PyTorch's).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
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
using Case = ember_test::optim_util::OptimCase;
using ember_test::optim_util::TwoGroups;

const json& swa_fixtures() {
  return ember_test::optim_util::json_fixture("swa_fixtures.json", "tests/gen_swa_fixtures.py");
}

double rtol_of(DType dtype) { return dtype == DType::f64 ? 1e-12 : 1e-6; }

// ---------------------------------------------------------------------------------------
// ASGD and Rprop

Case load_swa_case(const std::string& name, Device device = Device::cpu()) {
  return ember_test::optim_util::load_optim_case(swa_fixtures().at("optimizers").at(name), device);
}

std::unique_ptr<optim::Optimizer> make_swa_optimizer(const Case& c) {
  const std::string type = c.spec["type"];
  if (type == "ASGD") return make_typed<optim::ASGD>(c.spec["groups"], c.params);
  if (type == "Rprop") return make_typed<optim::Rprop>(c.spec["groups"], c.params);
  throw std::runtime_error("unknown optimizer " + type);
}

std::vector<std::string> optimizer_names() {
  return ember_test::optim_util::keys_of(swa_fixtures().at("optimizers"));
}

class SwaOptimFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(SwaOptimFixture, MatchesTorchTrajectoryAndState) {
  Case c = load_swa_case(GetParam());
  auto opt = make_swa_optimizer(c);
  const double rtol = rtol_of(c.dtype), atol = rtol / 10;
  ember_test::optim_util::expect_torch_trajectory(c, *opt, rtol, atol, GetParam());
  const optim::OptimizerState s = opt->state_dict();
  // ASGD's eta and mu are float32 values, as PyTorch's 0-d tensors: equal.
  ember_test::optim_util::expect_torch_layout(s, c.spec, 0.0, GetParam());
  for (const auto& [key, names] : c.spec["final_state"].items()) {
    const size_t index = std::stoul(key);
    for (const auto& [name, want] : names.items()) {
      const Tensor* got = opt->state(c.params[index])->find(name);
      ASSERT_NE(got, nullptr) << name;
      EXPECT_TRUE(check_close(*got, from_json(want, c.shapes[index], c.dtype), rtol, atol,
                              GetParam() + " state " + key + "." + name));
    }
  }
}

TEST_P(SwaOptimFixture, StateDictResumesBitwise) {
  Case straight = load_swa_case(GetParam());
  auto opt_a = make_swa_optimizer(straight);
  run_steps(straight, *opt_a, 0, 20);

  Case first = load_swa_case(GetParam());
  auto opt_b = make_swa_optimizer(first);
  run_steps(first, *opt_b, 0, 10);
  const optim::OptimizerState s = opt_b->state_dict();
  optim::OptimizerState saved{json::parse(s.meta.dump()), {}};
  for (const auto& [name, t] : s.tensors) saved.tensors.emplace_back(name, t.clone());

  Case resumed = load_swa_case(GetParam());
  for (size_t i = 0; i < resumed.params.size(); ++i) {
    NoGradGuard g;
    resumed.params[i].copy_(first.params[i]);
  }
  auto opt_c = make_swa_optimizer(resumed);
  opt_c->load_state_dict(saved);
  run_steps(resumed, *opt_c, 10, 20);
  for (size_t i = 0; i < straight.params.size(); ++i)
    EXPECT_EQ(ember_test::values_f64(resumed.params[i]), ember_test::values_f64(straight.params[i]))
        << GetParam() << " param " << i << " differs after resuming";
  EXPECT_EQ(opt_c->state_dict().meta, opt_a->state_dict().meta);
}

// Composed from tensor ops: the CUDA run is the CPU run (the same ops, each rounded once).
TEST_P(SwaOptimFixture, CudaMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  Case cpu = load_swa_case(GetParam());
  Case gpu = load_swa_case(GetParam(), Device::cuda(0));
  auto opt_cpu = make_swa_optimizer(cpu);
  auto opt_gpu = make_swa_optimizer(gpu);
  run_steps(cpu, *opt_cpu, 0, 20);
  run_steps(gpu, *opt_gpu, 0, 20);
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    EXPECT_TRUE(check_close(gpu.params[i].to(Device::cpu()), cpu.params[i], 1e-6, 1e-7,
                            GetParam() + " cuda param " + std::to_string(i)));
    for (const auto& [name, t] : opt_gpu->state(gpu.params[i])->tensors)
      EXPECT_TRUE(t.device().is_cuda()) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, SwaOptimFixture, ::testing::ValuesIn(optimizer_names()));

TEST(SwaOptimErrors, BadOptionsNameTheOption) {
  Tensor w = parameter(randn({2, 2}));
  expect_error([&] { optim::ASGD({w}, {.lr = -0.1}); },
               {"ASGD: invalid learning rate -0.1 (expected lr >= 0)"});
  expect_error([&] { optim::ASGD({w}, {.weight_decay = -1.0}); },
               {"ASGD: invalid weight_decay -1 (expected weight_decay >= 0)"});
  expect_error([&] { optim::ASGD({w}, {.lambd = -0.5}); }, {"ASGD: invalid lambd -0.5"});
  expect_error([&] { optim::ASGD({w}, {.alpha = -1.0}); }, {"ASGD: invalid alpha -1"});
  expect_error([&] { optim::ASGD({w}, {.t0 = std::nan("")}); }, {"ASGD: invalid t0 nan"});
  expect_error([&] { optim::ASGD(std::vector<Tensor>{}); },
               {"ASGD: optimizer got an empty parameter list"});
  expect_error([&] { optim::Rprop({w}, {.lr = -1.0}); }, {"Rprop: invalid learning rate -1"});
  expect_error(
      [&] {
        optim::Rprop({w}, {.etas = {0.5, 0.9}});
      },
      {"Rprop: invalid etas (0.5, 0.9) (expected 0 < etaminus < 1 < etaplus)"});
  expect_error([&] { optim::Rprop({w}, {.etas = {1.5, 2.0}}); }, {"Rprop: invalid etas (1.5, 2)"});
  expect_error(
      [&] {
        optim::Rprop({w}, {.step_sizes = {1.0, 0.1}});
      },
      {"Rprop: invalid step_sizes (1, 0.1) (expected 0 <= min <= max)"});
  expect_error([&] { optim::Rprop(std::vector<Tensor>{}); },
               {"Rprop: optimizer got an empty parameter list"});
  expect_error(
      [&] {
        optim::Rprop opt({w});
        opt.update_group_options(0, {{"etas", {0.5}}});
      },
      {"Rprop options: etas must be a list of two numbers", "[0.5]"});
  // States that do not fit.
  optim::ASGD asgd({w});
  w.set_grad(ones({2, 2}));
  asgd.step();
  optim::OptimizerState bad = asgd.state_dict();
  bad.meta["state"]["0"].erase("eta");
  expect_error([&] { asgd.load_state_dict(bad); }, {"state.0.eta must be a number"});
  optim::Rprop rprop({w});
  rprop.step();
  optim::OptimizerState wrong = rprop.state_dict();
  wrong.tensors[0].second = zeros({3});
  expect_error([&] { rprop.load_state_dict(wrong); },
               {"Rprop.load_state_dict", "has shape [3], expected [2, 2]"});
  expect_error([&] { rprop.load_state_dict(asgd.state_dict()); },
               {"another optimizer", "expected \"Rprop\""});
}

// ASGD's ax is the average of the iterates from t0 on (mu = 1 / (t - t0)).
TEST(SwaOptimState, AsgdAveragesTheIteratesAfterT0) {
  Tensor w = parameter(zeros({1}));
  optim::ASGD opt({w}, {.lr = 0.1, .lambd = 0.0, .t0 = 2});
  std::vector<double> iterates;
  for (int i = 0; i < 6; ++i) {
    w.set_grad(full({1}, 1.0 + i));
    opt.step();
    iterates.push_back(w.to_vector<float>()[0]);
  }
  // Steps 1-4 run with mu = 1 (ax = p); step t > 4 with mu = 1 / (t - 1 - t0), so ax is the
  // mean of the iterates from step 4 on.
  const double want = (iterates[3] + iterates[4] + iterates[5]) / 3;
  EXPECT_NEAR(opt.state(w)->find("ax")->to_vector<float>()[0], want, 1e-5);
}

// ---------------------------------------------------------------------------------------
// MultiplicativeLR and SWALR

const std::map<std::string, optim::MultiplicativeLR::Lambda>& mul_lambdas() {
  static const std::map<std::string, optim::MultiplicativeLR::Lambda> m = {
      {"mul95", [](int64_t) { return 0.95; }},
      {"mul_wave", [](int64_t e) { return e % 3 == 0 ? 0.8 : 1.05; }},
  };
  return m;
}

std::shared_ptr<optim::LRScheduler> make_swa_scheduler(optim::Optimizer& opt, const json& s) {
  const std::string type = s["type"];
  if (type == "MultiplicativeLR") {
    std::vector<optim::MultiplicativeLR::Lambda> fns;
    for (const json& n : s["lambdas"]) fns.push_back(mul_lambdas().at(n.get<std::string>()));
    if (fns.size() == 1) return std::make_shared<optim::MultiplicativeLR>(opt, fns[0]);
    return std::make_shared<optim::MultiplicativeLR>(opt, fns);
  }
  if (type == "SWALR") {
    const json& lr = s["swa_lr"];
    const auto strategy = s.value("anneal_strategy", std::string("cos")) == "cos"
                              ? optim::AnnealStrategy::cos
                              : optim::AnnealStrategy::linear;
    return std::make_shared<optim::SWALR>(
        opt, lr.is_array() ? lr.get<std::vector<double>>() : std::vector<double>{lr.get<double>()},
        s["anneal_epochs"].get<int64_t>(), strategy);
  }
  std::vector<std::shared_ptr<optim::LRScheduler>> children;
  for (const json& child : s["schedulers"]) children.push_back(make_swa_scheduler(opt, child));
  if (type == "SequentialLR")
    return std::make_shared<optim::SequentialLR>(opt, children,
                                                 s["milestones"].get<std::vector<int64_t>>());
  throw std::runtime_error("unknown scheduler " + type);
}

std::vector<std::string> scheduler_names() {
  return ember_test::optim_util::keys_of(swa_fixtures().at("schedulers"));
}

class SwaSchedFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(SwaSchedFixture, MatchesTorchLrs) {
  const json& c = swa_fixtures().at("schedulers").at(GetParam());
  TwoGroups t;
  auto sched = make_swa_scheduler(t.opt, c["spec"]);
  expect_values(sched->get_last_lr(), c["lrs"][0], GetParam() + " after construction");
  for (size_t i = 1; i < c["lrs"].size(); ++i) {
    sched->step();
    expect_values(t.opt.lrs(), c["lrs"][i], GetParam() + " step " + std::to_string(i));
  }
}

TEST_P(SwaSchedFixture, StateDictResumesExactly) {
  const json& c = swa_fixtures().at("schedulers").at(GetParam());
  const size_t cut = 4;  // inside every anneal and before the SequentialLR milestone
  TwoGroups first;
  auto s1 = make_swa_scheduler(first.opt, c["spec"]);
  for (size_t i = 0; i < cut; ++i) s1->step();
  const json sched_state = json::parse(s1->state_dict().dump());
  for (const json& key : c["state_keys"]) {
    const std::string k = key.get<std::string>();
    if (k == "verbose" || k == "_get_lr_called_within_step" || k == "anneal_func") continue;
    EXPECT_TRUE(sched_state.contains(k)) << GetParam() << " state lacks PyTorch's '" << k << "'";
  }
  TwoGroups resumed;
  auto s2 = make_swa_scheduler(resumed.opt, c["spec"]);
  resumed.opt.load_state_dict({json::parse(first.opt.state_dict().meta.dump()), {}});
  s2->load_state_dict(sched_state);
  EXPECT_EQ(s2->state_dict(), sched_state);
  for (size_t i = cut; i + 1 < c["lrs"].size(); ++i) {
    s2->step();
    expect_values(resumed.opt.lrs(), c["lrs"][i + 1], GetParam() + " resumed " + std::to_string(i));
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, SwaSchedFixture, ::testing::ValuesIn(scheduler_names()));

TEST(SwaSchedErrors, BadArgumentsNameTheArgument) {
  TwoGroups t;
  expect_error([&] { optim::MultiplicativeLR(t.opt, optim::MultiplicativeLR::Lambda()); },
               {"MultiplicativeLR: lr_lambda is empty (expected a function)"});
  expect_error(
      [&] {
        optim::MultiplicativeLR(
            t.opt, std::vector<optim::MultiplicativeLR::Lambda>{[](int64_t) { return 0.9; }});
      },
      {"MultiplicativeLR: expected 2 lr_lambdas, one per parameter group (got 1)"});
  expect_error(
      [&] {
        optim::SWALR(t.opt, std::vector<double>{0.1, 0.2, 0.3});
      },
      {"SWALR: swa_lr has 3 values (expected one, or one per parameter group: 2)"});
  expect_error([&] { optim::SWALR(t.opt, -0.05); },
               {"SWALR: invalid swa_lr -0.05 for group 0 (expected a finite swa_lr >= 0)"});
  expect_error([&] { optim::SWALR(t.opt, 0.05, -1); },
               {"SWALR: invalid anneal_epochs -1 (expected anneal_epochs >= 0)"});
  optim::SWALR swa(t.opt, 0.05);
  json s = swa.state_dict();
  s["anneal_strategy"] = "exp";
  expect_error([&] { swa.load_state_dict(s); },
               {"SWALR.load_state_dict: unknown anneal_strategy \"exp\""});
  s = swa.state_dict();
  s["swa_lrs"] = {0.1};
  expect_error([&] { swa.load_state_dict(s); }, {"swa_lrs has 1 entries"});
  optim::MultiplicativeLR mul(t.opt, [](int64_t) { return 0.9; });
  expect_error([&] { mul.load_state_dict(swa.state_dict()); },
               {"another scheduler", "expected \"MultiplicativeLR\""});
}

// ---------------------------------------------------------------------------------------
// AveragedModel

nn::Sequential small_model() { return nn::Sequential({nn::Linear(3, 2), nn::BatchNorm1d(2)}); }

// Loads `values` (one entry of a fixture's "models", name -> flat list) into `m`.
void load_values(const nn::Module& m, const json& values) {
  nn::StateDict sd;
  for (const auto& [name, t] : m->state_dict())
    sd.emplace_back(name, from_json(values.at(name), t.shape(), DType::f64).to(t.dtype()));
  m->load_state_dict(sd);
}

void expect_state(const nn::Module& m, const json& want, const std::string& what) {
  const nn::StateDict sd = m->state_dict();
  ASSERT_EQ(sd.size(), want.size()) << what;
  for (const auto& [name, t] : sd) {
    ASSERT_TRUE(want.contains(name)) << what << ": PyTorch has no '" << name << "'";
    EXPECT_TRUE(check_close(t.to(DType::f64), from_json(want[name], t.shape(), DType::f64), 1e-6,
                            1e-6, what + " " + name));
  }
}

optim::AveragedModelOptions averaging(const json& c, bool custom_fn) {
  optim::AveragedModelOptions o{.use_buffers = c["use_buffers"].get<bool>()};
  if (c["avg"] == "ema" && custom_fn)
    o.avg_fn = [](const Tensor& a, const Tensor& p, int64_t) {
      return add(mul(a, 0.8), mul(p, 0.2));
    };
  else if (c["avg"] == "ema")
    o.decay = 0.8;
  return o;
}

class SwaAveragedFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(SwaAveragedFixture, MatchesTorch) {
  const json& c = swa_fixtures().at("averaged").at(GetParam());
  for (bool custom_fn : {false, true}) {
    nn::Sequential model = small_model();
    optim::AveragedModel swa(model, averaging(c, custom_fn));
    for (size_t k = 0; k < c["models"].size(); ++k) {
      load_values(model, c["models"][k]);  // the model after a training step
      swa->update_parameters(model);
      expect_state(swa, c["averaged"][k], GetParam() + " update " + std::to_string(k + 1));
    }
    EXPECT_EQ(swa->n_averaged(), static_cast<int64_t>(c["models"].size()));
    // forward is the averaged copy's
    const Tensor x = randn({4, 3});
    swa->eval();
    EXPECT_EQ(swa(x).to_vector<float>(), swa->module()(x).to_vector<float>());
  }
}

TEST_P(SwaAveragedFixture, StateDictResumes) {
  const json& c = swa_fixtures().at("averaged").at(GetParam());
  nn::Sequential model = small_model();
  optim::AveragedModel a(model, averaging(c, false));
  for (size_t k = 0; k < 2; ++k) {
    load_values(model, c["models"][k]);
    a->update_parameters(model);
  }
  optim::AveragedModel b(small_model(), averaging(c, false));
  b->load_state_dict(a->state_dict());
  EXPECT_EQ(b->n_averaged(), 2);
  for (size_t k = 2; k < c["models"].size(); ++k) {
    load_values(model, c["models"][k]);
    b->update_parameters(model);
  }
  expect_state(b, c["averaged"].back(), GetParam() + " resumed");
}

// The averaged copy on the GPU, the model on the CPU: the same averages.
TEST_P(SwaAveragedFixture, CudaMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  const json& c = swa_fixtures().at("averaged").at(GetParam());
  nn::Sequential model = small_model();
  optim::AveragedModelOptions on_gpu = averaging(c, false);
  on_gpu.device = Device::cuda(0);
  optim::AveragedModel cpu(model, averaging(c, false)), gpu(model, on_gpu);
  for (size_t k = 0; k < c["models"].size(); ++k) {
    load_values(model, c["models"][k]);
    cpu->update_parameters(model);
    gpu->update_parameters(model);
  }
  const nn::StateDict want = cpu->state_dict(), got = gpu->state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(got[i].second.device().is_cuda()) << got[i].first;  // n_averaged too
    EXPECT_TRUE(check_close(got[i].second.to(Device::cpu()).to(DType::f64),
                            want[i].second.to(DType::f64), 1e-6, 1e-7, got[i].first));
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, SwaAveragedFixture,
                         ::testing::Values("running", "running_buffers", "ema", "ema_buffers"));

TEST(SwaAveragedModel, CopyIsIndependentAndKeepsTheMode) {
  nn::Sequential model = small_model();
  model->eval();
  optim::AveragedModel swa(model);
  EXPECT_FALSE(swa->module()->is_training());
  const std::vector<Tensor> mine = swa->module()->parameters(), theirs = model->parameters();
  ASSERT_EQ(mine.size(), theirs.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_NE(mine[i].data_ptr(), theirs[i].data_ptr()) << "the copy shares a tensor";
    EXPECT_EQ(mine[i].to_vector<float>(), theirs[i].to_vector<float>());
  }
  EXPECT_EQ(swa->n_averaged(), 0);
  EXPECT_EQ(swa->state_dict().front().first, "n_averaged");
}

TEST(SwaAveragedModel, BadInputIsAClearError) {
  nn::Sequential model = small_model();
  expect_error([&] { optim::AveragedModel swa(model, optim::AveragedModelOptions{.decay = 1.5}); },
               {"AveragedModel: invalid decay 1.5 (expected 0 <= decay <= 1)"});
  expect_error(
      [&] {
        optim::AveragedModel swa(
            model,
            optim::AveragedModelOptions{
                .decay = 0.9, .avg_fn = [](const Tensor& a, const Tensor&, int64_t) { return a; }});
      },
      {"AveragedModel: got both decay 0.9 and avg_fn"});
  expect_error([&] { optim::AveragedModel swa(nn::Module{}); }, {"empty module handle"});
  optim::AveragedModel swa(model);
  nn::Sequential other({nn::Linear(3, 3)});
  expect_error([&] { swa->update_parameters(other); },
               {"AveragedModel.update_parameters: the model has 2 tensors to average, the "
                "averaged copy 4"});
  nn::Sequential reshaped({nn::Linear(3, 2), nn::BatchNorm1d(3)});
  expect_error([&] { swa->update_parameters(reshaped); }, {"tensor 2 has shape [3] in the model"});
}

// ---------------------------------------------------------------------------------------
// update_bn

nn::Sequential bn_model() {
  return nn::Sequential({nn::Linear(4, 3), nn::BatchNorm1d(3), nn::ReLU(), nn::Linear(3, 5),
                         nn::BatchNorm1d(5, 1e-5, 0.3)});
}

struct BnCase {
  nn::Sequential model = bn_model();
  std::vector<Tensor> batches;
  const json& c = swa_fixtures().at("update_bn");
  BnCase() {
    load_values(model, c["state"]);
    model->eval();
    for (size_t i = 0; i < c["batches"].size(); ++i)
      batches.push_back(
          from_json(c["batches"][i], {c["batch_sizes"][i].get<int64_t>(), 4}, DType::f32));
  }
};

TEST(SwaUpdateBn, MatchesTorch) {
  BnCase t;
  optim::update_bn(t.batches, t.model);
  expect_state(t.model, t.c["after"], "update_bn");
  EXPECT_EQ(t.model->is_training(), t.c["training_after"].get<bool>());
  auto* bn = dynamic_cast<nn::BatchNormImpl*>(t.model->children()[4].get());
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->norm_options().momentum, std::optional<double>(0.3)) << "momentum restored";
}

TEST(SwaUpdateBn, DataLoaderPassMatchesTorch) {
  BnCase t;
  data::DataLoader loader(std::make_shared<data::TensorDataset>(cat(t.batches, 0)),
                          {.batch_size = 8});
  optim::update_bn(loader, t.model);
  expect_state(t.model, t.c["after"], "update_bn over a DataLoader");
}

TEST(SwaUpdateBn, ErrorsAndModelsWithoutBatchNorm) {
  expect_error(
      [&] {
        optim::update_bn(std::vector<Tensor>{randn({2, 4})}, nn::Module());
      },
      {"update_bn: the model is an empty module handle"});
  nn::Sequential plain({nn::Linear(4, 2)});
  plain->eval();
  optim::update_bn(std::vector<Tensor>{randn({2, 4})}, plain);  // nothing to do
  EXPECT_FALSE(plain->is_training());
  // A batch that throws: momenta and mode are put back.
  BnCase t;
  expect_error([&] { optim::update_bn(std::vector<Tensor>{randn({2, 7})}, t.model); }, {"Linear"});
  EXPECT_FALSE(t.model->is_training());
  auto* bn = dynamic_cast<nn::BatchNormImpl*>(t.model->children()[1].get());
  EXPECT_EQ(bn->norm_options().momentum, std::optional<double>(0.1));
}

TEST(SwaUpdateBn, CudaMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  BnCase cpu, gpu;
  gpu.model->to(Device::cuda(0));
  optim::update_bn(cpu.batches, cpu.model);
  optim::update_bn(gpu.batches, gpu.model, Device::cuda(0));
  const nn::StateDict want = cpu.model->state_dict(), got = gpu.model->state_dict();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(check_close(got[i].second.to(Device::cpu()).to(DType::f64),
                            want[i].second.to(DType::f64), 1e-5, 1e-6, got[i].first));
}

}  // namespace
