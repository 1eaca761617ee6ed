// tests/test_grad_scaler.cpp — optim::GradScaler: a scaled training run against PyTorch's
// GradScaler sequence (tests/data/grad_scaler_fixtures.json, written by
// tests/gen_grad_scaler_fixtures.py: the same steps skipped, the scale sequence exactly, the
// parameters to f32 tolerance), the unscale and update kernels, the state dict, the errors,
// checkpoint resume, and on a GPU: CUDA against the CPU and a captured scaled step against eager.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "ember/train/capture.hpp"
#include "ember/train/fit.hpp"
#include "fixtures.hpp"
#include "ops/optim.hpp"

namespace {

using ember::Device;
using ember::DType;
using ember::Tensor;
using nlohmann::json;
namespace optim = ember::optim;

const json& scaler_fixture() {
  static const json doc = [] {
    std::ifstream in(ember_test::data_dir() + "/grad_scaler_fixtures.json");
    if (!in) throw std::runtime_error("cannot open grad_scaler_fixtures.json");
    return json::parse(in);
  }();
  return doc;
}

Device cuda0() { return Device::cuda(0); }

Tensor vec(const json& values, const ember::Shape& shape, Device device) {
  return ember::from_vector(values.get<std::vector<float>>(), shape, {.device = device});
}

std::vector<float> host(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); }

// Same values bit for bit (f32 or f64; no NaN).
bool same(const Tensor& a, const Tensor& b) {
  return a.to(Device::cpu()).to_vector<double>() == b.to(Device::cpu()).to_vector<double>();
}

// The fixture's 4-8-3 tanh MLP: parameters w1 [8,4], b1 [8], w2 [3,8], b2 [3].
struct TanhMlp {
  std::vector<std::string> names = {"w1", "b1", "w2", "b2"};
  std::vector<Tensor> params;
  Tensor x, y;
  TanhMlp(const json& fx, Device device) {
    const std::vector<ember::Shape> shapes = {{8, 4}, {8}, {3, 8}, {3}};
    for (size_t i = 0; i < names.size(); ++i) {
      Tensor p = vec(fx["initial"][names[i]], shapes[i], device);
      p.requires_grad_();
      params.push_back(p);
    }
    x = vec(fx["x"], {16, 4}, device);
    y = vec(fx["y"], {16, 3}, device);
  }
  Tensor loss(const Tensor& x_in, const Tensor& y_in) const {
    Tensor h = ember::tanh(ember::matmul(x_in, params[0].t()) + params[1]);
    return ember::mse_loss(ember::matmul(h, params[2].t()) + params[3], y_in);
  }
  size_t index(const std::string& name) const {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return i;
    throw std::runtime_error("no parameter " + name);
  }
};

// Writes `value` into element `index` of `p`'s gradient (the fixture's injected inf/NaN).
void poison_grad(const Tensor& p, int64_t index, double value) {
  Tensor g = p.grad();
  std::vector<float> v = host(g);
  v[static_cast<size_t>(index)] = static_cast<float>(value);
  g.copy_(ember::from_vector(v, g.shape(), {.device = g.device()}));
}

double parse_bad(const std::string& text) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  if (text == "-inf") return -std::numeric_limits<double>::infinity();
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  return std::stod(text);
}

// Trains the fixture's case `name` with the scaler on `device` and compares every step.
template <typename MakeOpt>
void run_against_torch(const std::string& name, Device device, MakeOpt&& make_opt) {
  const json& fx = scaler_fixture()[name];
  TanhMlp net(fx, device);
  auto opt = make_opt(net.params);
  optim::GradScaler scaler({.init_scale = fx["init_scale"].get<double>(),
                            .growth_factor = fx["growth_factor"].get<double>(),
                            .backoff_factor = fx["backoff_factor"].get<double>(),
                            .growth_interval = fx["growth_interval"].get<int64_t>()});
  std::vector<std::vector<float>> before;
  for (const Tensor& p : net.params) before.push_back(host(p));
  for (int64_t step = 1; step <= fx["steps"].get<int64_t>(); ++step) {
    SCOPED_TRACE(name + " step " + std::to_string(step) + " on " + device.str());
    const json& rec = fx["record"][step - 1];
    opt->zero_grad();
    scaler.scale(net.loss(net.x, net.y)).backward();
    if (fx["bad"].contains(std::to_string(step))) {
      const json& bad = fx["bad"][std::to_string(step)];
      poison_grad(net.params[net.index(bad[0].get<std::string>())], bad[1].get<int64_t>(),
                  parse_bad(bad[2].get<std::string>()));
    }
    scaler.step(*opt);
    scaler.update();
    EXPECT_EQ(scaler.found_inf().item<float>(), rec["found_inf"].get<float>());
    EXPECT_EQ(scaler.get_scale(), rec["scale"].get<double>());
    EXPECT_EQ(scaler.get_growth_tracker(), rec["tracker"].get<int64_t>());
    for (size_t i = 0; i < net.params.size(); ++i) {
      const std::vector<float> now = host(net.params[i]);
      if (rec["found_inf"].get<float>() != 0.0f) {
        EXPECT_EQ(now, before[i]) << net.names[i] << " changed on a skipped step";
      }
      const std::vector<float> want = rec["params"][net.names[i]].get<std::vector<float>>();
      ASSERT_EQ(now.size(), want.size());
      for (size_t k = 0; k < now.size(); ++k)
        ASSERT_NEAR(now[k], want[k], 2e-5 + 2e-5 * std::fabs(want[k]))
            << net.names[i] << "[" << k << "]";
      before[i] = now;
    }
  }
  if (name == "adam") {  // PyTorch's step counts: skipped steps are not counted
    const optim::OptimizerState sd = opt->state_dict();
    for (size_t i = 0; i < net.params.size(); ++i)
      EXPECT_EQ(sd.meta["state"][std::to_string(i)]["step"].get<int64_t>(),
                fx["final_step"][i].get<int64_t>());
  }
}

auto make_adam = [](const std::vector<Tensor>& p) {
  return std::make_unique<optim::Adam>(p, optim::AdamOptions{.lr = 1e-2});
};
auto make_sgd = [](const std::vector<Tensor>& p) {
  return std::make_unique<optim::SGD>(
      p, optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1});
};

TEST(GradScalerTorch, AdamSkipsAndScalesAsPyTorch) {
  run_against_torch("adam", Device::cpu(), make_adam);
}

TEST(GradScalerTorch, SgdMomentumStartsAtFirstTakenStep) {
  run_against_torch("sgd", Device::cpu(), make_sgd);
}

// The update rule alone, through the public API: a 1-element SGD parameter whose gradient is
// finite or inf per the fixture's pattern; growth stops at f32's largest finite scale.
void run_rule(Device device) {
  const json& fx = scaler_fixture()["rule"];
  Tensor p = ember::zeros({1}, {.device = device});
  p.requires_grad_();
  optim::SGD opt({p}, {.lr = 0.0});
  optim::GradScaler scaler({.init_scale = fx["init_scale"].get<double>(),
                            .growth_factor = fx["growth_factor"].get<double>(),
                            .backoff_factor = fx["backoff_factor"].get<double>(),
                            .growth_interval = fx["growth_interval"].get<int64_t>()});
  for (size_t i = 0; i < fx["found"].size(); ++i) {
    opt.zero_grad();
    scaler.scale(p.sum()).backward();
    if (fx["found"][i].get<int>()) poison_grad(p, 0, parse_bad("inf"));
    scaler.step(opt);
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), fx["after"][i][0].get<double>()) << "update " << i;
    EXPECT_EQ(scaler.get_growth_tracker(), fx["after"][i][1].get<int64_t>()) << "update " << i;
  }
}

TEST(GradScaler, UpdateRuleMatchesPyTorch) { run_rule(Device::cpu()); }

// unscale_ multiplies by f32(1 / f64(scale)) exactly and flags inf and NaN.
void check_unscale(Device device) {
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor a = ember::randn({5, 7}, {.dtype = dtype, .device = device});
    Tensor b = ember::randn({300}, {.dtype = dtype, .device = device});
    a.requires_grad_();
    b.requires_grad_();
    optim::SGD opt({a, b}, {.lr = 0.0});
    optim::GradScaler scaler({.init_scale = 3.0});
    scaler.scale((a * a).sum() + (b * 2.0).sum()).backward();
    const Tensor ga = a.grad().clone(), gb = b.grad().clone();
    scaler.unscale_(opt);
    const double inv = static_cast<double>(static_cast<float>(1.0 / 3.0));
    EXPECT_TRUE(same(a.grad(), ga * inv)) << dtype_name(dtype);
    EXPECT_TRUE(same(b.grad(), gb * inv)) << dtype_name(dtype);
    EXPECT_EQ(scaler.found_inf(opt).item<float>(), 0.0f);
    scaler.step(opt);
    scaler.update();
    EXPECT_EQ(scaler.found_inf().item<float>(), 0.0f);
    for (double bad :
         {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
          std::numeric_limits<double>::quiet_NaN()}) {
      opt.zero_grad();
      scaler.scale((a * a).sum() + (b * 2.0).sum()).backward();
      Tensor g = b.grad();
      std::vector<double> v = g.to(Device::cpu()).to_vector<double>();
      v[299] = bad;
      g.copy_(ember::from_vector(v, g.shape(), {.device = device}).to(dtype));
      scaler.unscale_(opt);
      EXPECT_EQ(scaler.found_inf(opt).item<float>(), 1.0f) << bad;
      scaler.update();  // unscale_ alone counts as an inf check
      EXPECT_EQ(scaler.found_inf().item<float>(), 1.0f) << bad;
    }
  }
}

TEST(GradScaler, UnscaleDividesExactlyAndFlagsInfAndNan) { check_unscale(Device::cpu()); }

TEST(GradScaler, StateDictRoundTrip) {
  Tensor p = ember::ones({3});
  p.requires_grad_();
  optim::SGD opt({p}, {.lr = 0.1});
  optim::GradScaler a(
      {.init_scale = 256.0, .growth_factor = 4.0, .backoff_factor = 0.25, .growth_interval = 3});
  EXPECT_EQ(a.state_dict()["scale"].get<double>(), 256.0);  // before the first scale()
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    a.scale(p.sum()).backward();
    a.step(opt);
    a.update();
  }
  const json sd = a.state_dict();
  EXPECT_EQ(sd["scale"].get<double>(), 256.0);
  EXPECT_EQ(sd["growth_factor"].get<double>(), 4.0);
  EXPECT_EQ(sd["backoff_factor"].get<double>(), 0.25);
  EXPECT_EQ(sd["growth_interval"].get<int64_t>(), 3);
  EXPECT_EQ(sd["_growth_tracker"].get<int64_t>(), 2);
  optim::GradScaler b;
  b.load_state_dict(sd);
  EXPECT_EQ(b.state_dict(), sd);
  // The next clean step grows both the same way.
  for (optim::GradScaler* s : {&a, &b}) {
    opt.zero_grad();
    s->scale(p.sum()).backward();
    s->step(opt);
    s->update();
    EXPECT_EQ(s->get_scale(), 1024.0);
    EXPECT_EQ(s->get_growth_tracker(), 0);
  }
  optim::GradScaler disabled({.enabled = false});
  EXPECT_TRUE(disabled.state_dict().empty());
  EXPECT_THROW(b.load_state_dict(disabled.state_dict()), ember::Error);
  json bad = sd;
  bad["growth_factor"] = 0.5;
  EXPECT_THROW(b.load_state_dict(bad), ember::Error);
  EXPECT_EQ(b.get_growth_factor(), 4.0);  // unchanged on error
}

void expect_error(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
  } catch (const ember::Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(GradScaler, Errors) {
  expect_error([] { optim::GradScaler s({.growth_factor = 1.0}); }, "growth_factor");
  expect_error([] { optim::GradScaler s({.backoff_factor = 1.0}); }, "backoff_factor");
  expect_error([] { optim::GradScaler s({.backoff_factor = 0.0}); }, "backoff_factor");
  expect_error([] { optim::GradScaler s({.growth_interval = 0}); }, "growth_interval");
  expect_error([] { optim::GradScaler s({.init_scale = -1.0}); }, "init_scale");
  optim::GradScaler s;
  expect_error([&] { s.scale(Tensor()); }, "undefined");
  Tensor p = ember::ones({2});
  p.requires_grad_();
  optim::Adam opt({p}, {.lr = 0.1});
  expect_error([&] { s.unscale_(opt); }, "scale(loss)");
  expect_error([&] { s.update(); }, "scale(loss)");
  s.scale(p.sum()).backward();
  expect_error([&] { s.update(); }, "no inf checks");
  s.unscale_(opt);
  expect_error([&] { s.unscale_(opt); }, "already been called");
  s.step(opt);
  expect_error([&] { s.step(opt); }, "already been called since the last update");
  expect_error([&] { s.unscale_(opt); }, "after step()");
  s.update();
  s.unscale_(opt);  // a new iteration may unscale again
  s.update();
  // Half-precision gradients are refused (keep f32 master weights), as PyTorch's.
  Tensor h = ember::ones({2}, {.dtype = DType::f16});
  h.requires_grad_();
  optim::SGD half({h}, {.lr = 0.1});
  s.scale(h.to(DType::f32).sum()).backward();
  expect_error([&] { s.unscale_(half); }, "unscale");
}

TEST(GradScaler, DisabledIsANoOp) {
  optim::GradScaler s({.enabled = false});
  EXPECT_FALSE(s.is_enabled());
  Tensor p = ember::ones({2});
  p.requires_grad_();
  optim::SGD opt({p}, {.lr = 0.5});
  Tensor loss = p.sum();
  EXPECT_TRUE(s.scale(loss).is_same(loss));
  loss.backward();
  s.unscale_(opt);
  s.step(opt);  // a plain step
  s.update();
  EXPECT_EQ(host(p), (std::vector<float>{0.5f, 0.5f}));
  EXPECT_EQ(s.get_scale(), 1.0);
}

// RMSprop has no device-side skip: the scaler reads found_inf on the host and skips there.
TEST(GradScaler, HostSkipForOtherOptimizers) {
  Tensor p = ember::ones({2});
  p.requires_grad_();
  optim::RMSprop opt({p}, {.lr = 0.1});
  optim::GradScaler s({.init_scale = 8.0});
  s.scale(p.sum()).backward();
  poison_grad(p, 1, parse_bad("nan"));
  s.step(opt);
  s.update();
  EXPECT_EQ(host(p), (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(opt.state(p), nullptr);  // not stepped at all
  EXPECT_EQ(s.get_scale(), 4.0);
  opt.zero_grad();
  s.scale(p.sum()).backward();
  s.step(opt);
  s.update();
  EXPECT_NE(host(p)[0], 1.0f);
  EXPECT_EQ(opt.state(p)->step, 1);
}

// A run checkpointed mid-way and resumed equals the uninterrupted run bit for bit.
void check_resume(Device device) {
  const std::string path = ::testing::TempDir() + "grad_scaler_resume_" + device.str() + ".st";
  auto make_net = [&] {
    ember::manual_seed(7);
    ember::nn::Sequential net;
    net->push_back(ember::nn::Linear(4, 8));
    net->push_back(ember::nn::Tanh());
    net->push_back(ember::nn::Linear(8, 3));
    net->to(device);
    return net;
  };
  ember::manual_seed(11);
  const Tensor x = ember::randn({16, 4}).to(device), y = ember::randn({16, 3}).to(device);
  auto train = [&](ember::nn::Sequential& net, optim::Adam& opt, optim::GradScaler& scaler,
                   int from, int to) {
    for (int step = from; step < to; ++step) {
      opt.zero_grad();
      scaler.scale(ember::mse_loss(net(x), y)).backward();
      if (step == 3 || step == 9) poison_grad(net->parameters()[0], 1, parse_bad("inf"));
      scaler.unscale_(opt);
      optim::clip_grad_norm_tensor(net->parameters(), 1.0);
      scaler.step(opt);
      scaler.update();
    }
  };
  const optim::GradScalerOptions so{.init_scale = 1024.0, .growth_interval = 2};
  ember::nn::Sequential a = make_net();
  optim::Adam opt_a(a->parameters(), {.lr = 1e-2});
  optim::GradScaler scaler_a(so);
  train(a, opt_a, scaler_a, 0, 12);

  ember::nn::Sequential b = make_net();
  optim::Adam opt_b(b->parameters(), {.lr = 1e-2});
  optim::GradScaler scaler_b(so);
  train(b, opt_b, scaler_b, 0, 6);
  ember::io::save_checkpoint(path, b, opt_b, nullptr, 6, json::object(), nullptr, &scaler_b);

  ember::nn::Sequential c = make_net();
  optim::Adam opt_c(c->parameters(), {.lr = 1e-2});
  optim::GradScaler scaler_c;
  ember::io::load_checkpoint(path, c, opt_c, nullptr, nullptr, &scaler_c);
  EXPECT_EQ(scaler_c.state_dict(), scaler_b.state_dict());
  train(c, opt_c, scaler_c, 6, 12);
  for (size_t i = 0; i < a->parameters().size(); ++i)
    EXPECT_EQ(host(a->parameters()[i]), host(c->parameters()[i])) << "parameter " << i;
  EXPECT_EQ(scaler_a.state_dict(), scaler_c.state_dict());
  EXPECT_EQ(opt_a.state_dict().meta["state"], opt_c.state_dict().meta["state"]);
  // A checkpoint without a scaler refuses one.
  ember::io::save_checkpoint(path, b, opt_b);
  expect_error([&] { ember::io::load_checkpoint(path, c, opt_c, nullptr, nullptr, &scaler_c); },
               "GradScaler");
  std::remove(path.c_str());
}

TEST(GradScaler, CheckpointResumeIsBitwise) { check_resume(Device::cpu()); }

// fit() with a scaler of power-of-two scales (exact scaling and unscaling, no overflow)
// trains bit for bit as without one; the scaler grows on schedule.
std::vector<float> fit_params(Device device, optim::GradScaler* scaler,
                              std::optional<DType> autocast, double* last_loss = nullptr,
                              bool capture = false) {
  ember::manual_seed(3);
  auto ds = std::make_shared<ember::data::TensorDataset>(ember::randn({64, 3}),
                                                         ember::randint(0, 3, {64}));
  ember::data::DataLoader loader(ds, {.batch_size = 16, .shuffle = true, .seed = 2});
  ember::nn::Sequential net;
  net->push_back(ember::nn::Linear(3, 8));
  net->push_back(ember::nn::Tanh());
  net->push_back(ember::nn::Linear(8, 3));
  net->to(device);
  optim::Adam opt(net->parameters(), {.lr = 1e-2});
  const ember::train::History h =
      ember::train::fit(net, loader, opt, ember::train::cross_entropy_loss(),
                        {.epochs = 3,
                         .progress = ember::train::Progress::none,
                         .clip_grad_norm = 1.0,
                         .capture_step = capture,
                         .autocast = autocast,
                         .grad_scaler = scaler});
  if (last_loss) *last_loss = h.epochs.back().train.loss;
  std::vector<float> out;
  for (const Tensor& p : net->parameters()) {
    const std::vector<float> v = host(p);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(GradScaler, FitWithScalerTrainsAsWithout) {
  optim::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 4});
  EXPECT_EQ(fit_params(Device::cpu(), &scaler, std::nullopt),
            fit_params(Device::cpu(), nullptr, std::nullopt));
  EXPECT_EQ(scaler.get_scale(), 1024.0 * 8);  // 12 clean steps: grown 3 times
}

TEST(GradScaler, FitUnderF16AutocastScalesByDefault) {
  double first = 0.0, last = 0.0;
  fit_params(Device::cpu(), nullptr, std::nullopt, &first);
  const std::vector<float> p = fit_params(Device::cpu(), nullptr, DType::f16, &last);
  for (float v : p) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NEAR(last, first, 0.05);  // f16 forward: close to the f32 run's final loss
}

// ---- GPU ----

TEST(CudaGradScaler, AdamAndSgdMatchPyTorch) {
  SKIP_WITHOUT_CUDA();
  run_against_torch("adam", cuda0(), make_adam);
  run_against_torch("sgd", cuda0(), make_sgd);
  run_rule(cuda0());
}

TEST(CudaGradScaler, UnscaleMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  check_unscale(cuda0());
  // The same gradients on both backends give the same bits.
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor g = ember::randn({70000}, {.dtype = dtype}) * 1e3;
    Tensor on_cpu = g.clone(), on_gpu = g.to(cuda0());
    const Tensor scale = ember::full({1}, 12345.0), scale_gpu = scale.to(cuda0());
    Tensor f_cpu = ember::zeros({1}), f_gpu = ember::zeros({1}).to(cuda0());
    ember::ops::amp_unscale_({on_cpu}, scale, f_cpu);
    ember::ops::amp_unscale_({on_gpu}, scale_gpu, f_gpu);
    EXPECT_TRUE(same(on_cpu, on_gpu.to(Device::cpu())));
  }
}

TEST(CudaGradScaler, CheckpointResumeIsBitwise) {
  SKIP_WITHOUT_CUDA();
  check_resume(cuda0());
}

// fit() with capture_step and a scaler: bitwise the eager fit, the scale sequence too.
TEST(CudaGradScaler, CapturedFitWithScalerEqualsEager) {
  SKIP_WITHOUT_CUDA();
  optim::GradScaler a({.init_scale = 3000.0, .growth_interval = 3});
  optim::GradScaler b({.init_scale = 3000.0, .growth_interval = 3});
  EXPECT_EQ(fit_params(cuda0(), &a, std::nullopt, nullptr, /*capture=*/true),
            fit_params(cuda0(), &b, std::nullopt, nullptr, /*capture=*/false));
  EXPECT_EQ(a.state_dict(), b.state_dict());
  EXPECT_EQ(a.get_scale(), 3000.0f * 16);
}

// A scaled Adam step (scale, backward, unscale_, clip, step, update) captured once replays
// bitwise equal to eager, with an inf injected on some steps through an input (no host read:
// the capture itself would refuse one).
TEST(CudaGradScaler, CapturedScaledAdamStepReplaysBitwise) {
  SKIP_WITHOUT_CUDA();
  const json& fx = scaler_fixture()["adam"];
  struct Run {
    TanhMlp net;
    optim::Adam opt;
    optim::GradScaler scaler;
    explicit Run(const json& f)
        : net(f, Device::cuda(0)),
          opt(net.params, {.lr = 1e-2}),
          scaler({.init_scale = 65536.0, .growth_interval = 3}) {}
    std::vector<Tensor> step(const std::vector<Tensor>& in) {
      opt.zero_grad();
      Tensor loss = net.loss(in[0], in[1]) + (net.params[0] * in[2]).sum();
      scaler.scale(loss).backward();
      scaler.unscale_(opt);
      optim::clip_grad_norm_tensor(net.params, 1.0);
      scaler.step(opt);
      scaler.update();
      return {loss};
    }
  };
  Run eager(fx), captured(fx);
  ember::train::CapturedStep graph(
      [&](const std::vector<Tensor>& in) { return captured.step(in); });
  const std::vector<int> poisoned = {0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0};
  for (size_t i = 0; i < poisoned.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    const Tensor poison = ember::full(
        {1}, poisoned[i] ? std::numeric_limits<double>::infinity() : 0.0, {.device = cuda0()});
    eager.step({eager.net.x, eager.net.y, poison});
    graph({captured.net.x, captured.net.y, poison});
    for (size_t k = 0; k < eager.net.params.size(); ++k)
      ASSERT_EQ(host(eager.net.params[k]), host(captured.net.params[k])) << "parameter " << k;
    ASSERT_EQ(eager.scaler.get_scale(), captured.scaler.get_scale());
    ASSERT_EQ(eager.scaler.found_inf().item<float>(), static_cast<float>(poisoned[i]));
    ASSERT_EQ(captured.scaler.found_inf().item<float>(), static_cast<float>(poisoned[i]));
  }
  EXPECT_EQ(eager.opt.state_dict().meta["state"], captured.opt.state_dict().meta["state"]);
  EXPECT_GE(graph.replay_count(), 9);
  // An optimizer without a device-side skip is refused inside a capture, naming the scaler.
  Tensor p = ember::ones({4}, {.device = cuda0()});
  p.requires_grad_();
  optim::RMSprop rms({p}, {.lr = 0.1});
  optim::GradScaler s;
  ember::train::CapturedStep bad([&](const std::vector<Tensor>& in) {
    rms.zero_grad();
    s.scale((p * in[0]).sum()).backward();
    s.step(rms);
    s.update();
    return std::vector<Tensor>{};
  });
  const Tensor one = ember::ones({4}, {.device = cuda0()});
  bad({one});  // warm-up: eager
  expect_error([&] { bad({one}); }, "GradScaler.step");
}

}  // namespace
