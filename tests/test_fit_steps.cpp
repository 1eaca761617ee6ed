// tests/test_fit_steps.cpp — fit()'s optimizer step: gradient clipping (by value and by norm,
// against hand computations), accumulation over micro-batches (the same weights as one big
// batch, a trailing partial group, resuming a checkpoint mid-epoch), the before-step hooks,
// multi-input models (train::MultiInputImpl, Parallel, MultiInputSequential,
// data::MultiTensorDataset) through fit, evaluate and save/load, and the whole step pinned
// bitwise against a hand-written loop (autocast, GradScaler and its skipped steps, clipping,
// accumulation, schedulers).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ember/data/dataloader.hpp"
#include "ember/data/dataset.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "ember/train/fit.hpp"
#include "ember/train/multi_input.hpp"
#include "error_of.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file

std::shared_ptr<data::TensorDataset> regression_set(int64_t n, uint64_t seed) {
  manual_seed(seed);
  Tensor x = randn({n, 3});
  Tensor y = randint(0, 3, {n});
  return std::make_shared<data::TensorDataset>(x, y);
}

nn::Module net3(uint64_t seed) {
  manual_seed(seed);
  return nn::Sequential({nn::Linear(3, 8), nn::Tanh(), nn::Linear(8, 3)});
}

std::vector<float> flat(const nn::Module& m) {
  std::vector<float> out;
  for (const Tensor& p : m->parameters()) {
    const std::vector<float> v = p.detach().to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, double tol,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int shown = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > tol && shown++ < 5)
      ADD_FAILURE() << what << ": parameter value " << i << " is " << a[i] << ", expected " << b[i]
                    << " (tolerance " << tol << ")";
}

// Trains net3(5) on `rows` examples with batch_size and k-batch accumulation.
std::vector<float> train_with(int64_t rows, int64_t batch_size, int64_t k, int64_t* steps) {
  auto ds = regression_set(rows, 11);
  data::DataLoader loader(ds, {.batch_size = batch_size, .shuffle = true, .seed = 4});
  nn::Module net = net3(5);
  optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  int64_t last_step = 0;
  train::fit(net, loader, opt, train::cross_entropy_loss(),
             {.epochs = 3,
              .on_batch = [&](const train::BatchLog& b) { last_step = b.global_step; },
              .progress = train::Progress::none,
              .accumulate_grad_batches = k});
  if (steps) *steps = last_step;
  return flat(net);
}

}  // namespace

// 4 micro-batches of 16 step as one batch of 64; 70 rows leave a trailing group of one
// 6-row batch, which steps on its own as a 64-row loader's last batch of 6 does.
TEST(FitSteps, AccumulationEqualsOneBigBatch) {
  for (const int64_t rows : {64, 70}) {
    int64_t big_steps = 0, acc_steps = 0;
    const std::vector<float> big = train_with(rows, 64, 1, &big_steps);
    const std::vector<float> acc = train_with(rows, 16, 4, &acc_steps);
    EXPECT_EQ(acc_steps, big_steps) << rows << " rows";
    EXPECT_EQ(big_steps, rows == 64 ? 3 : 6);
    expect_close(acc, big, 1e-6, std::to_string(rows) + " rows, 4 x 16 vs 64");
    // Without accumulation the 16-row batches give other weights (the test has teeth).
    const std::vector<float> plain = train_with(rows, 16, 1, nullptr);
    double diff = 0.0;
    for (size_t i = 0; i < plain.size(); ++i)
      diff = std::max(diff, double(std::fabs(plain[i] - big[i])));
    EXPECT_GT(diff, 1e-3);
  }
}

// Uneven micro-batches: 3 x 10 rows with k = 3 (batches 4, 4, 2) equals one batch of 10.
TEST(FitSteps, AccumulationWeightsUnevenBatchesBySamples) {
  const std::vector<float> big = train_with(10, 10, 1, nullptr);
  const std::vector<float> acc = train_with(10, 4, 3, nullptr);
  expect_close(acc, big, 1e-6, "batches 4+4+2 vs 10");
}

namespace {
// Linear(2, 1) with w = [1, 1], b = 0 on x = [1, 2], y = 0 under MSE: out = 3, so the
// gradients are dw = 2 * 3 * x = [6, 12] and db = 6; their norm is sqrt(216).
struct HandCase {
  nn::Linear lin{2, 1};
  std::shared_ptr<data::TensorDataset> ds;
  HandCase() {
    NoGradGuard g;
    lin->param("weight").copy_(tensor({1.0f, 1.0f}, {1, 2}));
    lin->param("bias").copy_(tensor({0.0f}, {1}));
    ds =
        std::make_shared<data::TensorDataset>(tensor({1.0f, 2.0f}, {1, 2}), tensor({0.0f}, {1, 1}));
  }
  // The gradients [dw0, dw1, db] seen by the before-step hook, and the grad_norm it saw.
  std::vector<float> grads_seen(train::FitOptions o, double* norm) {
    data::DataLoader loader(ds, {.batch_size = 1});
    optim::SGD opt(lin->parameters(), {.lr = 1.0});
    std::vector<float> seen;
    o.before_step = [&](train::Trainer& t) {
      for (const Tensor& p : t.model()->parameters()) {
        const std::vector<float> v = p.grad().to_vector<float>();
        seen.insert(seen.end(), v.begin(), v.end());
      }
      if (norm) *norm = t.grad_norm.defined() ? t.grad_norm.item<double>() : -1.0;
    };
    o.progress = train::Progress::none;
    train::fit(lin, loader, opt, train::mse_loss_fn(), o);
    return seen;
  }
};
}  // namespace

TEST(FitSteps, ClipByNormMatchesHandComputation) {
  HandCase c;
  double norm = 0.0;
  const std::vector<float> g = c.grads_seen({.clip_grad_norm = 1.0}, &norm);
  const double total = std::sqrt(216.0), scale = 1.0 / (total + 1e-6);
  EXPECT_NEAR(norm, total, 1e-5);
  expect_close(g, {float(6 * scale), float(12 * scale), float(6 * scale)}, 1e-6, "norm-clipped");
  // SGD with lr 1 steps by the clipped gradient.
  expect_close(flat(c.lin), {float(1 - 6 * scale), float(1 - 12 * scale), float(-6 * scale)}, 1e-6,
               "weights after the clipped step");
}

TEST(FitSteps, ClipByValueThenNormMatchesHandComputation) {
  {
    HandCase c;
    double norm = 0.0;
    const std::vector<float> g = c.grads_seen({.clip_grad_value = 5.0}, &norm);
    EXPECT_EQ(norm, -1.0);  // no norm clipping: grad_norm stays undefined
    expect_close(g, {5.0f, 5.0f, 5.0f}, 0.0, "value-clipped");
  }
  {
    HandCase c;
    double norm = 0.0;
    const std::vector<float> g =
        c.grads_seen({.clip_grad_value = 5.0, .clip_grad_norm = 1.0}, &norm);
    const double total = std::sqrt(75.0), scale = 1.0 / (total + 1e-6);
    EXPECT_NEAR(norm, total, 1e-5);
    expect_close(g, {float(5 * scale), float(5 * scale), float(5 * scale)}, 1e-6,
                 "value, then norm");
  }
  {  // the infinity norm: the largest |g| is 12
    HandCase c;
    double norm = 0.0;
    const std::vector<float> g =
        c.grads_seen({.clip_grad_norm = 3.0, .clip_norm_type = optim::kInfNorm}, &norm);
    EXPECT_NEAR(norm, 12.0, 1e-5);
    const double scale = 3.0 / (12.0 + 1e-6);
    expect_close(g, {float(6 * scale), float(12 * scale), float(6 * scale)}, 1e-6, "inf norm");
  }
}

namespace {
struct CountingCallback : train::Callback {
  int64_t before = 0, batches = 0;
  std::vector<int64_t> steps_at_hook;
  void on_before_optimizer_step(train::Trainer& t) override {
    ++before;
    steps_at_hook.push_back(t.global_step);
  }
  void on_batch_end(train::Trainer&, const train::BatchLog&) override { ++batches; }
};
}  // namespace

// The hooks run once per optimizer step, after backward, before step(): zeroing the
// gradients there leaves the weights as they were.
TEST(FitSteps, BeforeStepHookRunsOncePerStepBeforeTheStep) {
  auto ds = regression_set(40, 3);
  data::DataLoader loader(ds, {.batch_size = 8});  // 5 batches: groups (0,1) (2,3) (4)
  nn::Module net = net3(2);
  const std::vector<float> start = flat(net);
  optim::SGD opt(net->parameters(), {.lr = 0.5});
  auto cb = std::make_shared<CountingCallback>();
  int64_t hook_calls = 0;
  std::vector<int64_t> hook_batches;
  train::fit(net, loader, opt, train::cross_entropy_loss(),
             {.epochs = 2,
              .callbacks = {cb},
              .progress = train::Progress::none,
              .accumulate_grad_batches = 2,
              .before_step = [&](train::Trainer& t) {
                ++hook_calls;
                hook_batches.push_back(t.batch);
                for (const Tensor& p : t.model()->parameters()) {
                  EXPECT_TRUE(p.grad().defined());
                  p.grad().zero_();
                }
              }});
  EXPECT_EQ(hook_calls, 6);
  EXPECT_EQ(cb->before, 6);
  EXPECT_EQ(cb->batches, 10);
  EXPECT_EQ(cb->steps_at_hook, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(hook_batches, (std::vector<int64_t>{1, 3, 4, 1, 3, 4}));
  expect_close(flat(net), start, 0.0, "weights after steps on zeroed gradients");
}

TEST(FitSteps, BadStepOptionsAreClearErrors) {
  auto ds = regression_set(8, 1);
  data::DataLoader loader(ds, {.batch_size = 4});
  nn::Module net = net3(1);
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  auto run = [&](train::FitOptions o) {
    o.progress = train::Progress::none;
    train::fit(net, loader, opt, train::cross_entropy_loss(), o);
  };
  EXPECT_NE(test_util::error_of([&] {
              run({.accumulate_grad_batches = 0});
            }).find("accumulate_grad_batches 0 (expected >= 1)"),
            std::string::npos);
  opt.set_accumulate_steps(2);
  EXPECT_NE(test_util::error_of([&] {
              run({.accumulate_grad_batches = 2});
            }).find("with an optimizer that accumulates 2 steps itself"),
            std::string::npos);
  opt.set_accumulate_steps(1);
  EXPECT_NE(test_util::error_of([&] {
              run({.clip_grad_norm = -1.0});
            }).find("clip_grad_norm -1 (expected >= 0)"),
            std::string::npos);
  EXPECT_NE(test_util::error_of([&] {
              run({.clip_grad_value = -2.0});
            }).find("clip_grad_value -2 (expected >= 0)"),
            std::string::npos);
}

// A run stopped after its second optimizer step (mid-epoch, inside an accumulation group
// boundary) and resumed from the checkpoint ends with the uninterrupted run's weights.
TEST(FitSteps, CheckpointResumeWithAccumulationMatchesAnUninterruptedRun) {
  ember_test::ScratchDir dir;
  const std::string ckpt = dir.file("ckpt.safetensors");
  auto ds = regression_set(40, 9);
  const data::DataLoaderOptions lo{.batch_size = 8, .shuffle = true, .seed = 6};
  auto options = [&](int64_t start_epoch, int64_t start_step) {
    train::FitOptions o{.epochs = 3,
                        .progress = train::Progress::none,
                        .start_epoch = start_epoch,
                        .start_step = start_step,
                        .checkpoint_every = 1,
                        .checkpoint_path = ckpt,
                        .accumulate_grad_batches = 2};
    return o;
  };
  std::vector<float> expected;
  {
    data::DataLoader loader(ds, lo);
    nn::Module net = net3(8);
    optim::SGD opt(net->parameters(), {.lr = 0.2, .momentum = 0.9});
    train::fit(net, loader, opt, train::cross_entropy_loss(), options(0, 0));
    expected = flat(net);
  }
  {  // interrupted after step 4: epoch 1, loader position 2 (a group boundary)
    data::DataLoader loader(ds, lo);
    nn::Module net = net3(8);
    optim::SGD opt(net->parameters(), {.lr = 0.2, .momentum = 0.9});
    train::FitOptions o = options(0, 0);
    o.on_batch = [](const train::BatchLog& b) {
      if (b.global_step == 4) throw std::runtime_error("interrupted");
    };
    EXPECT_THROW(train::fit(net, loader, opt, train::cross_entropy_loss(), o), std::runtime_error);
  }
  data::DataLoader loader(ds, lo);
  nn::Module net = net3(99);  // other weights: the checkpoint must restore them
  optim::SGD opt(net->parameters(), {.lr = 0.2, .momentum = 0.9});
  const train::ResumePoint r = train::resume(ckpt, net, opt, nullptr, loader);
  EXPECT_EQ(r.step, 4);
  EXPECT_EQ(r.epoch, 1);
  EXPECT_EQ(loader.position(), 2);
  train::fit(net, loader, opt, train::cross_entropy_loss(), options(r.epoch, r.step));
  expect_close(flat(net), expected, 1e-6, "resumed vs uninterrupted");
}

// ---- multi-input models ----

namespace {
// forward(a, b) = la(a) + lb(b): a hand-written multi-input module.
struct TwoTowerImpl : train::MultiInputImpl {
  nn::Linear la{3, 2}, lb{2, 2};
  TwoTowerImpl() {
    register_module("la", la.ptr());
    register_module("lb", lb.ptr());
  }
  Tensor forward_inputs(const std::vector<Tensor>& x) override {
    EMBER_CHECK(x.size() == 2, "TwoTower: got ", x.size(), " inputs (expected 2)");
    return la(x[0]) + lb(x[1]);
  }
  std::string type_name() const override { return "TwoTower"; }
};

std::shared_ptr<data::MultiTensorDataset> two_input_set(int64_t n) {
  manual_seed(21);
  Tensor a = randn({n, 3}), b = randn({n, 2});
  // The class depends on both inputs: a's first column against b's first column.
  Tensor y = gt(index_select(a, 1, from_vector(std::vector<int64_t>{0}, {1})).reshape({n}),
                index_select(b, 1, from_vector(std::vector<int64_t>{0}, {1})).reshape({n}))
                 .to(DType::i64);
  return std::make_shared<data::MultiTensorDataset>(std::vector<Tensor>{a, b}, y);
}
}  // namespace

TEST(FitMultiInput, DatasetYieldsEveryInput) {
  auto ds = two_input_set(10);
  std::vector<int64_t> idx{3, 1};
  data::Example b = ds->get_batch(idx);
  ASSERT_EQ(b.inputs().size(), 2u);
  EXPECT_EQ(b.input.shape(), (Shape{2, 3}));
  EXPECT_EQ(b.extra_inputs[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(b.extra_inputs[0].to_vector<float>(),
            index_select(ds->inputs()[1], 0, from_vector(std::vector<int64_t>{3, 1}, {2}))
                .to_vector<float>());
  // The default Dataset::get_batch (stacking get(i)) keeps the extra inputs too.
  data::Example stacked = ds->Dataset::get_batch(idx);
  EXPECT_EQ(stacked.extra_inputs[0].to_vector<float>(), b.extra_inputs[0].to_vector<float>());
  EXPECT_EQ(stacked.target.to_vector<int64_t>(), b.target.to_vector<int64_t>());
  // Through a DataLoader (prefetch thread) every input arrives.
  data::DataLoader loader(ds, {.batch_size = 4});
  int64_t rows = 0;
  for (data::Example& e : loader) {
    ASSERT_EQ(e.extra_inputs.size(), 1u);
    EXPECT_EQ(e.extra_inputs[0].size(0), e.input.size(0));
    rows += e.input.size(0);
  }
  EXPECT_EQ(rows, 10);
  EXPECT_NE(test_util::error_of([] {
              data::MultiTensorDataset bad({randn({4, 2}), randn({5, 2})}, Tensor());
            }).find("input 1 shape [5, 2] and input 0 shape [4, 2] have different first dims"),
            std::string::npos);
}

TEST(FitMultiInput, ContainersComputeWhatTheyPromise) {
  manual_seed(3);
  nn::Linear a(3, 4), b(2, 4), head(8, 2);
  train::MultiInputSequential net({train::Parallel({a, b}), nn::ReLU(), head});
  Tensor xa = randn({5, 3}), xb = randn({5, 2});
  const std::vector<float> got = net({xa, xb}).to_vector<float>();
  const std::vector<float> want = head(relu(cat({a(xa), b(xb)}, 1))).to_vector<float>();
  expect_close(got, want, 1e-6, "MultiInputSequential(Parallel, ReLU, Linear)");
  std::vector<std::string> names;
  for (auto& [n, p] : net->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.0.weight", "0.0.bias", "0.1.weight", "0.1.bias",
                                             "2.weight", "2.bias"}));
  EXPECT_NE(test_util::error_of([&] {
              net({xa});
            }).find("Parallel: got 1 inputs (expected 2, one per branch)"),
            std::string::npos);
  nn::Module single = nn::Linear(3, 1);
  EXPECT_NE(test_util::error_of([&] {
              train::forward(single, {xa, xb});
            }).find("Linear takes one input (got 2"),
            std::string::npos);
  // Registered types: save_model / load_model rebuild the containers.
  ember_test::ScratchDir dir;
  io::save_model(net, dir.file("m.safetensors"));
  nn::Module back = io::load_model(dir.file("m.safetensors"));
  ASSERT_TRUE(train::is_multi_input(back));
  expect_close(train::forward(back, {xa, xb}).to_vector<float>(), got, 0.0, "loaded model");
}

TEST(FitMultiInput, FitAndEvaluateFeedEveryInput) {
  auto train_set = two_input_set(128);
  data::DataLoader loader(train_set, {.batch_size = 16, .shuffle = true, .seed = 1});
  for (const bool custom : {false, true}) {
    manual_seed(4);
    nn::Module net = custom ? nn::Module(std::make_shared<TwoTowerImpl>())
                            : nn::Module(train::MultiInputSequential(
                                  {train::Parallel({nn::Linear(3, 8), nn::Linear(2, 8)}),
                                   nn::ReLU(), nn::Linear(16, 2)}));
    optim::Adam opt(net->parameters(), {.lr = 0.05});
    const train::Metrics before = train::evaluate(net, loader, train::cross_entropy_loss());
    train::History h =
        train::fit(net, loader, opt, train::cross_entropy_loss(),
                   {.epochs = 15, .progress = train::Progress::none, .accumulate_grad_batches = 2});
    const train::Metrics after = train::evaluate(net, loader, train::cross_entropy_loss());
    EXPECT_EQ(after.samples, 128);
    EXPECT_LT(after.loss, before.loss * 0.5) << (custom ? "TwoTower" : "containers");
    ASSERT_TRUE(after.accuracy.has_value());
    EXPECT_GT(*after.accuracy, 0.9) << (custom ? "TwoTower" : "containers");
  }
}

// On a GPU: a multi-input model (extra inputs moved by fit), accumulation and both clippings
// give the CPU's weights to f32 rounding.
TEST(CudaFitSteps, AccumulationClippingAndMultiInputMatchTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto ds = two_input_set(96);
  auto run = [&](Device dev) {
    data::DataLoader loader(ds, {.batch_size = 16, .shuffle = true, .seed = 2});
    manual_seed(4);
    nn::Module net = train::MultiInputSequential(
        {train::Parallel({nn::Linear(3, 8), nn::Linear(2, 8)}), nn::ReLU(), nn::Linear(16, 2)});
    net->to(dev);
    optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
    int64_t hooks = 0;
    train::fit(net, loader, opt, train::cross_entropy_loss(),
               {.epochs = 3,
                .progress = train::Progress::none,
                .clip_grad_value = 0.5,
                .clip_grad_norm = 0.3,
                .accumulate_grad_batches = 4,
                .before_step = [&](train::Trainer& t) {
                  EXPECT_EQ(t.grad_norm.device(), dev);
                  ++hooks;
                }});
    EXPECT_EQ(hooks, 3 * 2);  // 6 batches per epoch in groups of 4 and 2
    net->to(Device::cpu());
    return flat(net);
  };
  const std::vector<float> cpu = run(Device::cpu());
  const std::vector<float> gpu = run(Device::cuda(0));
  expect_close(gpu, cpu, 1e-5, "cuda vs cpu");
}

// Issue 27 item 10: OneCycleLR and CyclicLR are defined per batch, so fit() steps them after
// every optimizer step without being told: over 3 epochs of 4 batches the lrs fit() uses are
// those of the schedule stepped 12 times by hand (stepped per epoch, the one-cycle schedule
// would stop at its third step, near the start of its rise).
namespace {
struct PerBatchCase {
  std::string name;
  std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)> make;
};
std::vector<PerBatchCase> per_batch_cases() {
  return {{"OneCycleLR",
           [](optim::Optimizer& o) -> std::unique_ptr<optim::LRScheduler> {
             return std::make_unique<optim::OneCycleLR>(
                 o, optim::OneCycleLROptions{.max_lr = {0.5}, .epochs = 3, .steps_per_epoch = 4});
           }},
          {"CyclicLR", [](optim::Optimizer& o) -> std::unique_ptr<optim::LRScheduler> {
             return std::make_unique<optim::CyclicLR>(
                 o, optim::CyclicLROptions{.base_lr = {0.01}, .max_lr = {0.1}, .step_size_up = 3});
           }}};
}
}  // namespace

TEST(FitSteps, PerBatchSchedulersStepEveryBatchByDefault) {
  auto ds = regression_set(64, 3);  // 4 batches of 16
  for (const PerBatchCase& c : per_batch_cases()) {
    SCOPED_TRACE(c.name);
    nn::Module ref_net = net3(1);
    optim::SGD ref_opt(ref_net->parameters(), {.lr = 0.1, .momentum = 0.9});
    std::unique_ptr<optim::LRScheduler> ref = c.make(ref_opt);
    std::vector<double> want_lr, want_momentum;
    for (int i = 0; i < 12; ++i) {
      ref->step();
      want_lr.push_back(ref_opt.lr(0));
      want_momentum.push_back(ref_opt.group_options(0)["momentum"].get<double>());
    }

    data::DataLoader loader(ds, {.batch_size = 16});
    nn::Module net = net3(1);
    optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
    std::unique_ptr<optim::LRScheduler> sched = c.make(opt);
    std::vector<double> lr_seen, momentum_seen;
    train::fit(net, loader, opt, train::cross_entropy_loss(),
               {.epochs = 3,
                .scheduler = sched.get(),
                .on_batch =
                    [&](const train::BatchLog&) {
                      lr_seen.push_back(opt.lr(0));
                      momentum_seen.push_back(opt.group_options(0)["momentum"].get<double>());
                    },
                .progress = train::Progress::none});
    ASSERT_EQ(lr_seen.size(), 12u);
    for (size_t k = 0; k < lr_seen.size(); ++k) {
      EXPECT_DOUBLE_EQ(lr_seen[k], want_lr[k]) << "lr after batch " << k;
      EXPECT_DOUBLE_EQ(momentum_seen[k], want_momentum[k]) << "momentum after batch " << k;
    }
    EXPECT_EQ(sched->last_epoch(), 12);
  }
}

// Asked explicitly to step such a scheduler once per epoch, fit() refuses before training.
TEST(FitSteps, PerBatchSchedulersRefuseToStepPerEpoch) {
  auto ds = regression_set(64, 3);
  for (const PerBatchCase& c : per_batch_cases()) {
    SCOPED_TRACE(c.name);
    data::DataLoader loader(ds, {.batch_size = 16});
    nn::Module net = net3(1);
    optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
    std::unique_ptr<optim::LRScheduler> sched = c.make(opt);
    const std::vector<float> before = flat(net);
    const double lr = opt.lr(0);
    const std::string msg = test_util::error_of([&] {
      train::fit(net, loader, opt, train::cross_entropy_loss(),
                 {.epochs = 3,
                  .scheduler = sched.get(),
                  .scheduler_per_batch = false,
                  .progress = train::Progress::none});
    });
    EXPECT_NE(msg.find("fit: " + c.name + " is defined per batch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("scheduler_per_batch = false"), std::string::npos) << msg;
    expect_close(flat(net), before, 0.0, "nothing trained");
    EXPECT_EQ(sched->last_epoch(), 0);
    EXPECT_EQ(opt.lr(0), lr);
  }
}

// Which schedulers fit() steps per batch when scheduler_per_batch is unset: those defined per
// optimizer step and containers holding one; the others once per epoch. An explicit true steps
// any scheduler per batch.
TEST(FitSteps, SchedulerKindDecidesTheDefaultStepping) {
  auto ds = regression_set(64, 3);  // 4 batches of 16
  auto run = [&](const std::function<std::shared_ptr<optim::LRScheduler>(optim::Optimizer&)>& make,
                 std::optional<bool> per_batch, int64_t* last_epoch) {
    data::DataLoader loader(ds, {.batch_size = 16});
    nn::Module net = net3(1);
    optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
    std::shared_ptr<optim::LRScheduler> sched = make(opt);
    train::fit(net, loader, opt, train::cross_entropy_loss(),
               {.epochs = 2,
                .scheduler = sched.get(),
                .scheduler_per_batch = per_batch,
                .progress = train::Progress::none});
    *last_epoch = sched->last_epoch();
    return opt.lr(0);
  };
  auto step_lr = [](optim::Optimizer& o) { return std::make_shared<optim::StepLR>(o, 1, 0.5); };
  int64_t epochs = 0;
  EXPECT_DOUBLE_EQ(run(step_lr, std::nullopt, &epochs), 0.025);  // 0.1 halved twice
  EXPECT_EQ(epochs, 2);
  EXPECT_DOUBLE_EQ(run(step_lr, true, &epochs), 0.1 / 256);  // halved after each of 8 batches
  EXPECT_EQ(epochs, 8);
  EXPECT_DOUBLE_EQ(run(step_lr, false, &epochs), 0.025);

  // A SequentialLR that holds a per-batch schedule is per batch itself.
  auto warm_then_cycle = [](optim::Optimizer& o) -> std::shared_ptr<optim::LRScheduler> {
    auto warm = std::make_shared<optim::LinearLR>(o, 0.5, 1.0, 2);
    auto cycle = std::make_shared<optim::CyclicLR>(
        o, optim::CyclicLROptions{.base_lr = {0.01}, .max_lr = {0.1}, .step_size_up = 3});
    return std::make_shared<optim::SequentialLR>(
        o, std::vector<std::shared_ptr<optim::LRScheduler>>{warm, cycle}, std::vector<int64_t>{2});
  };
  run(warm_then_cycle, std::nullopt, &epochs);
  EXPECT_EQ(epochs, 8);
  nn::Module net = net3(1);
  optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  EXPECT_TRUE(warm_then_cycle(opt)->per_batch());
  EXPECT_FALSE(optim::StepLR(opt, 1).per_batch());
  EXPECT_FALSE(optim::CosineAnnealingLR(opt, 10).per_batch());
  EXPECT_TRUE(optim::OneCycleLR(opt, {.max_lr = {0.1}, .total_steps = 10}).per_batch());
  EXPECT_TRUE(optim::ChainedScheduler(
                  {std::make_shared<optim::ExponentialLR>(opt, 0.9),
                   std::make_shared<optim::CyclicLR>(
                       opt, optim::CyclicLROptions{.base_lr = {0.01}, .max_lr = {0.1}})})
                  .per_batch());
}

// ---- the step, pinned (issue 30 item 3: one step function for eager and captured fit) ----

namespace {
// One configuration of fit()'s step. fit() must train exactly as the loop below spells out
// (docs/training.md): zero the gradients at a group's first batch; forward and loss under
// autocast; backward of the loss, weighted by its share of the group's samples and scaled;
// at a group's last batch unscale_, clip_grad_value, clip_grad_norm, step (through the
// scaler), update, then a per-batch scheduler; a per-epoch scheduler after the epoch.
struct StepCase {
  std::string name;
  int64_t k = 1;
  std::optional<double> clip_value = std::nullopt, clip_norm = std::nullopt;
  std::optional<DType> autocast = std::nullopt;
  bool scaler = false;  // a caller's GradScaler (f16 without one: fit's own, the default)
  bool per_batch_scheduler = false;
};

struct FitStepRun {
  std::vector<float> params;
  std::vector<double> losses;  // per epoch
  double scale = 0.0;
};

FitStepRun run_step_case(const StepCase& c, bool by_hand) {
  constexpr int64_t kRows = 42, kBatch = 8;  // batches 8 8 8 8 8 2
  auto ds = regression_set(kRows, 13);
  data::DataLoader loader(ds, {.batch_size = kBatch, .shuffle = true, .seed = 5});
  manual_seed(6);
  nn::Module net =
      nn::Sequential({nn::Linear(3, 8), nn::Tanh(), nn::Dropout(0.25), nn::Linear(8, 3)});
  optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::StepLR sched(opt, 2, 0.7);
  std::optional<optim::GradScaler> scaler;
  if (c.scaler)
    scaler.emplace(optim::GradScalerOptions{.init_scale = 3000.0, .growth_interval = 3});
  if (!c.scaler && by_hand && c.autocast == DType::f16) scaler.emplace();
  FitStepRun r;
  if (!by_hand) {
    const train::History h = train::fit(net, loader, opt, train::cross_entropy_loss(),
                                        {.epochs = 2,
                                         .scheduler = &sched,
                                         .scheduler_per_batch = c.per_batch_scheduler,
                                         .progress = train::Progress::none,
                                         .clip_grad_value = c.clip_value,
                                         .clip_grad_norm = c.clip_norm,
                                         .accumulate_grad_batches = c.k,
                                         .autocast = c.autocast,
                                         .grad_scaler = c.scaler ? &*scaler : nullptr});
    for (const train::EpochLog& e : h.epochs) r.losses.push_back(e.train.loss);
  } else {
    const std::vector<Tensor> params = net->parameters();
    const int64_t batches = loader.num_batches();
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      net->train();
      double loss_sum = 0.0;
      int64_t samples = 0, b = 0;
      for (auto it = loader.begin_on(Device::cpu()); it != loader.end(); ++it, ++b) {
        const int64_t n = it->input.size(0);
        const int64_t first = b / c.k * c.k, last = std::min(first + c.k, batches) - 1;
        int64_t group = 0;
        for (int64_t i = first; i <= last; ++i) group += std::min(kBatch, kRows - i * kBatch);
        if (b == first) opt.zero_grad();
        Tensor l;
        {
          std::optional<AutocastGuard> autocast;
          if (c.autocast) autocast.emplace(*c.autocast);
          l = cross_entropy(net(it->input), it->target);
        }
        const Tensor weighted = c.k == 1 ? l : l * (double(n) / double(group));
        (scaler ? scaler->scale(weighted) : weighted).backward();
        if (b == last) {
          if (scaler) scaler->unscale_(opt);
          if (c.clip_value) optim::clip_grad_value(params, *c.clip_value);
          if (c.clip_norm) optim::clip_grad_norm_tensor(params, *c.clip_norm);
          if (scaler) {
            scaler->step(opt);
            scaler->update();
          } else {
            opt.step();
          }
          if (c.per_batch_scheduler) sched.step();
        }
        loss_sum += l.item<double>() * static_cast<double>(n);
        samples += n;
      }
      if (!c.per_batch_scheduler) sched.step();
      r.losses.push_back(loss_sum / static_cast<double>(samples));
    }
  }
  r.params = flat(net);
  if (c.scaler) r.scale = scaler->get_scale();
  return r;
}
}  // namespace

TEST(FitSteps, EagerStepEqualsAHandWrittenLoopBitwise) {
  const std::vector<StepCase> cases = {
      {.name = "plain"},
      {.name = "clipping, a per-batch scheduler and a scaler",
       .clip_value = 0.5,
       .clip_norm = 0.3,
       .scaler = true,
       .per_batch_scheduler = true},
      {.name = "f16 autocast with fit's own scaler", .clip_norm = 1.0, .autocast = DType::f16},
      {.name = "bf16 autocast", .autocast = DType::bf16},
      {.name = "accumulation over 4 with clipping and a scaler",
       .k = 4,
       .clip_value = 0.5,
       .clip_norm = 0.3,
       .scaler = true,
       .per_batch_scheduler = true},
  };
  for (const StepCase& c : cases) {
    SCOPED_TRACE(c.name);
    const FitStepRun fitted = run_step_case(c, false), hand = run_step_case(c, true);
    EXPECT_EQ(fitted.params, hand.params);
    EXPECT_EQ(fitted.losses, hand.losses);
    EXPECT_EQ(fitted.scale, hand.scale);
    for (float v : fitted.params) ASSERT_TRUE(std::isfinite(v));
  }
}

// With a GradScaler, a batch whose gradients are not finite skips its optimizer step (the
// weights stay as they were) and halves the scale; it still counts as a step.
TEST(FitSteps, ScalerSkipsTheStepWhoseGradientsAreNotFinite) {
  auto ds = regression_set(32, 4);
  data::DataLoader loader(ds, {.batch_size = 8});  // 4 batches
  nn::Module net = net3(3);
  optim::SGD opt(net->parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 100});
  int64_t calls = 0;
  const train::LossFn loss = [&](const Tensor& out, const Tensor& y) {
    const Tensor l = cross_entropy(out, y);
    return calls++ == 2 ? l * std::numeric_limits<double>::infinity() : l;
  };
  std::vector<std::vector<float>> weights;
  std::vector<double> scales;
  std::vector<int64_t> steps;
  const train::History h = train::fit(net, loader, opt, loss,
                                      {.epochs = 1,
                                       .on_batch =
                                           [&](const train::BatchLog& b) {
                                             weights.push_back(flat(net));
                                             scales.push_back(scaler.get_scale());
                                             steps.push_back(b.global_step);
                                           },
                                       .progress = train::Progress::none,
                                       .grad_scaler = &scaler});
  ASSERT_EQ(weights.size(), 4u);
  EXPECT_NE(weights[1], weights[0]);
  EXPECT_EQ(weights[2], weights[1]) << "the step on infinite gradients was taken";
  EXPECT_NE(weights[3], weights[2]);
  EXPECT_EQ(scales, (std::vector<double>{1024.0, 1024.0, 512.0, 512.0}));
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(std::isinf(h.epochs.at(0).train.loss));
  for (float v : weights.back()) EXPECT_TRUE(std::isfinite(v));
}

// A per-batch scheduler steps after every optimizer step, not after every micro-batch.
TEST(FitSteps, PerBatchSchedulerStepsWithTheOptimizerWhenAccumulating) {
  auto ds = regression_set(40, 3);
  data::DataLoader loader(ds, {.batch_size = 8});  // 5 batches: groups (0,1) (2,3) (4)
  nn::Module net = net3(2);
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  optim::StepLR sched(opt, 1, 0.5);
  std::vector<double> lrs;
  train::fit(net, loader, opt, train::cross_entropy_loss(),
             {.epochs = 2,
              .scheduler = &sched,
              .scheduler_per_batch = true,
              .on_batch = [&](const train::BatchLog&) { lrs.push_back(opt.lr(0)); },
              .progress = train::Progress::none,
              .accumulate_grad_batches = 2});
  EXPECT_EQ(sched.last_epoch(), 6);
  const std::vector<double> want = {0.1,    0.05,    0.05,    0.025,    0.0125,
                                    0.0125, 0.00625, 0.00625, 0.003125, 0.0015625};
  ASSERT_EQ(lrs.size(), want.size());
  for (size_t i = 0; i < lrs.size(); ++i) EXPECT_DOUBLE_EQ(lrs[i], want[i]) << "batch " << i;
}
