// tests/test_fit.cpp — the training loop (fit, evaluate, callbacks and their order, early
// stopping, plateau, progress, option errors, the captured loop against the eager one).
// The `ember` command's tests are in tests/test_cli_args.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/data/dataloader.hpp"
#include "ember/data/dataset.hpp"
#include "ember/ember.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "ember/train/fit.hpp"
#include "ember/train/multi_input.hpp"

namespace {

using namespace ember;  // NOLINT: test file

// Two Gaussian blobs per class, 4 classes in 8 dims: learnable in a few epochs.
std::shared_ptr<data::TensorDataset> blobs(int64_t n, uint64_t seed) {
  manual_seed(1234);
  Tensor centers = randn({4, 8}) * 3.0;  // the same classes for every split
  manual_seed(seed);
  Tensor y = randint(0, 4, {n});
  Tensor x = index_select(centers, 0, y) + randn({n, 8});
  return std::make_shared<data::TensorDataset>(x, y);
}

nn::Module small_net() {
  return nn::Sequential({nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 4)});
}

std::vector<float> flat_params(const nn::Module& m) {
  std::vector<float> out;
  for (const Tensor& p : m->parameters()) {
    const std::vector<float> v = p.detach().to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(Fit, HistoryMetricsAndHooks) {
  auto train_set = blobs(256, 1), val_set = blobs(128, 2);
  data::DataLoader train(train_set, {.batch_size = 32, .shuffle = true, .seed = 3});
  data::DataLoader val(val_set, {.batch_size = 64});
  manual_seed(7);
  nn::Module net = small_net();
  optim::Adam opt(net->parameters(), {.lr = 1e-2});
  std::vector<train::BatchLog> batches;
  std::vector<int64_t> epochs_seen;
  std::ostringstream out;
  train::History h =
      train::fit(net, train, opt, train::cross_entropy_loss(),
                 {.epochs = 3,
                  .val_loader = &val,
                  .on_batch = [&](const train::BatchLog& b) { batches.push_back(b); },
                  .on_epoch = [&](const train::EpochLog& e) { epochs_seen.push_back(e.epoch); },
                  .progress = train::Progress::none,
                  .out = &out});
  ASSERT_EQ(h.epochs.size(), 3u);
  EXPECT_EQ(epochs_seen, (std::vector<int64_t>{0, 1, 2}));
  ASSERT_EQ(batches.size(), 3u * 8u);  // 256 / 32 batches per epoch
  for (size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(batches[i].global_step, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(batches[i].epoch, static_cast<int64_t>(i) / 8);
    EXPECT_EQ(batches[i].batch, static_cast<int64_t>(i) % 8);
    EXPECT_EQ(batches[i].batch_size, 32);
  }
  for (const train::EpochLog& e : h.epochs) {
    EXPECT_EQ(e.train.samples, 256);
    ASSERT_TRUE(e.val.has_value());
    EXPECT_EQ(e.val->samples, 128);
    ASSERT_TRUE(e.train.accuracy.has_value());
    EXPECT_GT(e.samples_per_second, 0.0);
    ASSERT_EQ(e.lrs.size(), 1u);
    EXPECT_DOUBLE_EQ(e.lrs[0], 1e-2);
  }
  // The separable blobs are learnt: loss falls, and validation accuracy ends high.
  EXPECT_LT(h.epochs[2].train.loss, h.epochs[0].train.loss);
  EXPECT_GT(*h.epochs[2].val->accuracy, 0.9);
  EXPECT_TRUE(out.str().empty()) << "Progress::none printed: " << out.str();
  // The training-mode epoch metric is the mean of the batch losses, sample-weighted.
  double mean = 0.0;
  for (size_t i = 16; i < 24; ++i) mean += batches[i].loss / 8.0;
  EXPECT_NEAR(h.epochs[2].train.loss, mean, 1e-5);
  // evaluate() agrees with the last epoch's validation metrics and restores train mode.
  net->train();
  const train::Metrics m = train::evaluate(net, val, train::cross_entropy_loss());
  EXPECT_TRUE(net->is_training());
  EXPECT_NEAR(m.loss, h.epochs[2].val->loss, 1e-6);
  EXPECT_DOUBLE_EQ(*m.accuracy, *h.epochs[2].val->accuracy);
}

TEST(Fit, SchedulerPerEpochAndPerBatch) {
  auto ds = blobs(64, 4);
  data::DataLoader loader(ds, {.batch_size = 16});
  {
    manual_seed(1);
    nn::Module net = small_net();
    optim::SGD opt(net->parameters(), {.lr = 0.1});
    optim::StepLR sched(opt, 1, 0.5);
    train::History h =
        train::fit(net, loader, opt, train::cross_entropy_loss(),
                   {.epochs = 3, .scheduler = &sched, .progress = train::Progress::none});
    ASSERT_EQ(h.epochs.size(), 3u);
    EXPECT_DOUBLE_EQ(h.epochs[0].lrs[0], 0.1);
    EXPECT_DOUBLE_EQ(h.epochs[1].lrs[0], 0.05);
    EXPECT_DOUBLE_EQ(h.epochs[2].lrs[0], 0.025);
    EXPECT_DOUBLE_EQ(opt.lr(0), 0.0125);
  }
  {
    manual_seed(1);
    nn::Module net = small_net();
    optim::SGD opt(net->parameters(), {.lr = 0.1});
    optim::CosineAnnealingLR sched(opt, /*T_max=*/8);  // 2 epochs x 4 batches
    std::vector<double> lrs;
    train::fit(net, loader, opt, train::cross_entropy_loss(),
               {.epochs = 2,
                .scheduler = &sched,
                .scheduler_per_batch = true,
                .on_batch = [&](const train::BatchLog&) { lrs.push_back(opt.lr(0)); },
                .progress = train::Progress::none});
    ASSERT_EQ(lrs.size(), 8u);
    // Stepped after every batch: after batch k the lr is eta(k + 1) of the cosine.
    for (size_t k = 0; k < lrs.size(); ++k)
      EXPECT_NEAR(lrs[k], 0.05 * (1.0 + std::cos(M_PI * static_cast<double>(k + 1) / 8.0)), 1e-12)
          << "batch " << k;
  }
}

// Ruins the model after epoch 1 (every weight negated, so the logits point the wrong way)
// and freezes it (learning rate 0), so validation loss is worse from epoch 2 on.
class Sabotage : public train::Callback {
 public:
  explicit Sabotage(std::vector<float>* snapshot) : snapshot_(snapshot) {}
  void on_epoch_end(train::Trainer& t, const train::EpochLog& log) override {
    if (log.epoch == 1) {
      *snapshot_ = flat_params(t.model());
      NoGradGuard no_grad;
      for (Tensor& p : t.model()->parameters()) p.mul_(-1.0);
      t.optimizer().set_lr(0, 0.0);
    }
  }

 private:
  std::vector<float>* snapshot_;
};

TEST(Fit, EarlyStoppingStopsAndRestoresBestWeights) {
  auto train_set = blobs(256, 5), val_set = blobs(128, 6);
  data::DataLoader train(train_set, {.batch_size = 32, .shuffle = true, .seed = 1});
  data::DataLoader val(val_set, {.batch_size = 128});
  manual_seed(3);
  nn::Module net = small_net();
  optim::Adam opt(net->parameters(), {.lr = 1e-2});
  std::vector<float> best_weights;
  auto early = std::make_shared<train::EarlyStopping>(
      train::EarlyStoppingOptions{.monitor = "val_loss", .patience = 2});
  train::History h = train::fit(net, train, opt, train::cross_entropy_loss(),
                                {.epochs = 20,
                                 .val_loader = &val,
                                 .callbacks = {early, std::make_shared<Sabotage>(&best_weights)},
                                 .progress = train::Progress::none});
  EXPECT_TRUE(h.stopped_early);
  ASSERT_TRUE(h.best_epoch.has_value());
  EXPECT_EQ(*h.best_epoch, 1);
  EXPECT_EQ(h.epochs.size(), 4u) << "patience 2 after the best epoch 1";
  EXPECT_GT(h.epochs[2].val->loss, h.epochs[1].val->loss);
  EXPECT_EQ(flat_params(net), best_weights) << "the best epoch's weights are restored";
}

TEST(Fit, ProgressLinesAndBar) {
  auto ds = blobs(64, 8);
  data::DataLoader loader(ds, {.batch_size = 16});
  for (train::Progress mode : {train::Progress::lines, train::Progress::bar}) {
    manual_seed(1);
    nn::Module net = small_net();
    optim::SGD opt(net->parameters(), {.lr = 0.1});
    std::ostringstream out;
    train::fit(net, loader, opt, train::cross_entropy_loss(),
               {.epochs = 2, .val_loader = &loader, .progress = mode, .out = &out});
    const std::string s = out.str();
    EXPECT_NE(s.find("epoch 1/2: loss "), std::string::npos) << s;
    EXPECT_NE(s.find("epoch 2/2: loss "), std::string::npos) << s;
    EXPECT_NE(s.find("samples/s"), std::string::npos) << s;
    EXPECT_NE(s.find("val_acc "), std::string::npos) << s;
    if (mode == train::Progress::lines) {
      EXPECT_EQ(s.find('\r'), std::string::npos) << "lines mode draws no live bar";
      EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 2) << "one line per epoch:\n" << s;
    } else {
      EXPECT_NE(s.find('\r'), std::string::npos) << "the bar redraws in place";
      EXPECT_NE(s.find("ETA"), std::string::npos) << s;
    }
  }
}

TEST(Fit, BadOptionsAreErrors) {
  auto ds = blobs(16, 1);
  data::DataLoader loader(ds, {.batch_size = 8});
  nn::Module net = small_net();
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  try {
    train::fit(net, loader, opt, train::cross_entropy_loss(),
               {.epochs = -1, .progress = train::Progress::none});
    FAIL() << "negative epochs accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fit: epochs -1"), std::string::npos) << e.what();
  }
}

// Issue 14 item 5: the device is decided in one place, the model. A loader set to deliver
// elsewhere is overridden (its batches go to the model's device), and the deprecated
// FitOptions::device and evaluate(device) must agree with the model or are refused by name.
TEST(Fit, TheRunsDeviceIsTheModels) {
  nn::Module net = small_net();
  EXPECT_EQ(train::model_device(net), Device::cpu());
  data::DataLoader loader(blobs(16, 1), {.batch_size = 8, .device = Device::cpu()});
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  train::FitOptions o{.progress = train::Progress::none};
  o.device = Device::cuda(0);
  try {
    train::fit(net, loader, opt, train::cross_entropy_loss(), o);
    FAIL() << "a FitOptions::device other than the model's was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fit: FitOptions::device is cuda:0 but the model is on "
                                         "cpu; a run's device is its model's"),
              std::string::npos)
        << e.what();
  }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  try {
    train::evaluate(net, loader, train::cross_entropy_loss(), Device::cuda(0));
    FAIL() << "an evaluate device other than the model's was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("evaluate: the device argument is cuda:0"),
              std::string::npos)
        << e.what();
  }
#pragma GCC diagnostic pop
  o.device = Device::cpu();
  EXPECT_NO_THROW(train::fit(net, loader, opt, train::cross_entropy_loss(), o));
  // begin_on delivers to the device asked for, whatever the loader's option says.
  for (auto it = loader.begin_on(Device::cpu()); it != loader.end(); ++it)
    EXPECT_EQ(it->input.device(), Device::cpu());
}

// Issue 15 item 19: a loss over no samples (it was 0, a perfect score) is an error.
TEST(Fit, EmptyLoaderIsAnError) {
  nn::Module net = small_net();
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  auto expect_error = [](auto&& fn, const std::string& says) {
    try {
      fn();
      ADD_FAILURE() << "accepted: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  auto empty =
      std::make_shared<data::TensorDataset>(zeros({0, 8}), zeros({0}, {.dtype = DType::i64}));
  data::DataLoader none(empty, {.batch_size = 8});
  expect_error([&] { train::evaluate(net, none, train::cross_entropy_loss()); },
               "evaluate: the loader has no batches (got 0 examples with batch_size 8, expected at "
               "least one batch)");
  data::DataLoader dropped(blobs(5, 1), {.batch_size = 8, .drop_last = true});
  expect_error(
      [&] { train::evaluate(net, dropped, train::cross_entropy_loss()); },
      "evaluate: the loader has no batches (got 5 examples with batch_size 8 and drop_last");
  EXPECT_TRUE(net->is_training()) << "the mode is unchanged";
  expect_error(
      [&] {
        train::fit(net, none, opt, train::cross_entropy_loss(),
                   {.progress = train::Progress::none});
      },
      "fit: the training loader has no batches (got 0 examples");
  // As a validation loader it fails the same way, not with val_loss 0.
  data::DataLoader train_loader(blobs(16, 2), {.batch_size = 8});
  expect_error(
      [&] {
        train::fit(net, train_loader, opt, train::cross_entropy_loss(),
                   {.val_loader = &none, .progress = train::Progress::none});
      },
      "evaluate: the loader has no batches");
  // Nothing left to run (a resumed, finished run): no batches are needed.
  EXPECT_NO_THROW(train::fit(net, none, opt, train::cross_entropy_loss(),
                             {.epochs = 1, .progress = train::Progress::none, .start_epoch = 1}));
}

// Every hook, in the order fit() calls it, with the step counts each sees: 3 batches an epoch
// in groups of 2 (the last group has one batch), 2 epochs.
class Recorder : public train::Callback {
 public:
  explicit Recorder(std::vector<std::string>* log) : log_(log) {}
  void on_train_begin(train::Trainer& t) override {
    log_->push_back("train_begin step " + std::to_string(t.global_step));
  }
  void on_before_optimizer_step(train::Trainer& t) override {
    log_->push_back("before_optimizer_step " + where(t.epoch, t.batch, t.global_step));
  }
  void on_batch_end(train::Trainer&, const train::BatchLog& b) override {
    log_->push_back("batch_end " + where(b.epoch, b.batch, b.global_step));
  }
  void on_epoch_end(train::Trainer&, const train::EpochLog& e) override {
    log_->push_back("epoch_end " + std::to_string(e.epoch) + (e.val ? " val" : ""));
  }
  void on_train_end(train::Trainer& t, train::History& h) override {
    log_->push_back("train_end step " + std::to_string(t.global_step) + " epochs " +
                    std::to_string(h.epochs.size()));
  }
  static std::string where(int64_t epoch, int64_t batch, int64_t step) {
    return std::to_string(epoch) + "." + std::to_string(batch) + " step " + std::to_string(step);
  }

 private:
  std::vector<std::string>* log_;
};

TEST(Fit, HooksRunInOrder) {
  auto ds = blobs(24, 3);
  data::DataLoader loader(ds, {.batch_size = 8});
  manual_seed(2);
  nn::Module net = small_net();
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  std::vector<std::string> log;
  train::fit(
      net, loader, opt, train::cross_entropy_loss(),
      {.epochs = 2,
       .val_loader = &loader,
       .callbacks = {std::make_shared<Recorder>(&log)},
       .on_batch =
           [&](const train::BatchLog& b) {
             log.push_back("on_batch " + Recorder::where(b.epoch, b.batch, b.global_step));
           },
       .on_epoch =
           [&](const train::EpochLog& e) { log.push_back("on_epoch " + std::to_string(e.epoch)); },
       .progress = train::Progress::none,
       .start_step = 10,
       .accumulate_grad_batches = 2,
       .before_step =
           [&](train::Trainer& t) {
             log.push_back("before_step " + Recorder::where(t.epoch, t.batch, t.global_step));
           }});
  const std::vector<std::string> want = {
      "train_begin step 10",
      "batch_end 0.0 step 10",
      "on_batch 0.0 step 10",
      "before_optimizer_step 0.1 step 10",
      "before_step 0.1 step 10",
      "batch_end 0.1 step 11",
      "on_batch 0.1 step 11",
      "before_optimizer_step 0.2 step 11",
      "before_step 0.2 step 11",
      "batch_end 0.2 step 12",
      "on_batch 0.2 step 12",
      "epoch_end 0 val",
      "on_epoch 0",
      "batch_end 1.0 step 12",
      "on_batch 1.0 step 12",
      "before_optimizer_step 1.1 step 12",
      "before_step 1.1 step 12",
      "batch_end 1.1 step 13",
      "on_batch 1.1 step 13",
      "before_optimizer_step 1.2 step 13",
      "before_step 1.2 step 13",
      "batch_end 1.2 step 14",
      "on_batch 1.2 step 14",
      "epoch_end 1 val",
      "on_epoch 1",
      "train_end step 14 epochs 2",
  };
  EXPECT_EQ(log, want);
}

// ReduceLROnPlateau is stepped once an epoch with the validation loss, or the training loss
// when there is no validation: its best() is the smallest of those.
TEST(Fit, PlateauStepsWithTheValidationLossElseTheTrainingLoss) {
  auto train_set = blobs(64, 3), val_set = blobs(32, 4);
  for (const bool with_val : {true, false}) {
    SCOPED_TRACE(with_val ? "with validation" : "without validation");
    data::DataLoader train(train_set, {.batch_size = 16});
    data::DataLoader val(val_set, {.batch_size = 16});
    manual_seed(1);
    nn::Module net = small_net();
    optim::SGD opt(net->parameters(), {.lr = 0.1});
    optim::ReduceLROnPlateau plateau(opt, {.factor = 0.5, .patience = 0});
    const train::History h = train::fit(net, train, opt, train::cross_entropy_loss(),
                                        {.epochs = 3,
                                         .val_loader = with_val ? &val : nullptr,
                                         .plateau = &plateau,
                                         .progress = train::Progress::none});
    double best = std::numeric_limits<double>::infinity();
    for (const train::EpochLog& e : h.epochs)
      best = std::min(best, with_val ? e.val->loss : e.train.loss);
    EXPECT_EQ(plateau.last_epoch(), 3);
    EXPECT_DOUBLE_EQ(plateau.best(), best);
  }
}

// Each option fit() checks is refused before any training, naming the option and the value.
TEST(Fit, EveryBadOptionIsAClearError) {
  auto ds = blobs(16, 1);
  data::DataLoader loader(ds, {.batch_size = 8});
  manual_seed(4);
  nn::Module net = small_net();
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  const std::vector<float> before = flat_params(net);
  auto error_of = [&](train::FitOptions o,
                      const train::LossFn& loss = train::cross_entropy_loss()) {
    o.progress = train::Progress::none;
    try {
      train::fit(net, loader, opt, loss, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto expect_says = [](const std::string& got, const std::string& says) {
    EXPECT_NE(got.find(says), std::string::npos) << "expected '" << says << "', got: " << got;
  };
  try {
    train::fit(nn::Module(), loader, opt, train::cross_entropy_loss(), {});
    ADD_FAILURE() << "an undefined model was accepted";
  } catch (const Error& e) {
    expect_says(e.what(), "fit: the model is undefined");
  }
  expect_says(error_of({.epochs = 2, .start_epoch = -1}),
              "fit: epochs 2 and start_epoch -1 (expected both >= 0)");
  expect_says(error_of({}, train::LossFn()), "fit: no loss function given");
  expect_says(error_of({.checkpoint_every = 5}),
              "fit: checkpoint_every 5 needs a checkpoint_path (got '')");
  expect_says(error_of({.checkpoint_every = -1, .checkpoint_path = "c.safetensors"}),
              "fit: checkpoint_every -1");
  expect_says(error_of({.clip_norm_type = 0.0}),
              "fit: clip_norm_type 0 (expected p > 0, or optim::kInfNorm)");
  expect_says(error_of({.autocast = DType::f32}), "fit: autocast f32 (expected f16 or bf16)");
  EXPECT_EQ(flat_params(net), before) << "nothing trained";
}

// FitOptions::validate() checks the options alone, with fit()'s messages, before there is a
// run; the overload with the run's objects adds the checks that need them.
TEST(Fit, ValidateChecksTheOptionsBeforeARun) {
  auto says = [](const std::function<void()>& fn, const std::string& what) {
    try {
      fn();
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  EXPECT_NO_THROW(train::FitOptions{}.validate());
  says([] { train::FitOptions{.clip_grad_norm = -1.0}.validate(); },
       "fit: clip_grad_norm -1 (expected >= 0)");
  says([] { train::FitOptions{.accumulate_grad_batches = 0}.validate(); },
       "fit: accumulate_grad_batches 0 (expected >= 1)");
  says(
      [] {
        train::FitOptions{.before_step = [](train::Trainer&) {}, .capture_step = true}.validate();
      },
      "fit: capture_step cannot call before_step inside the captured graph");
  nn::Module net = small_net();
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  optim::OneCycleLR one_cycle(opt, {.max_lr = {0.1}, .total_steps = 10});
  says([&] { train::FitOptions{.scheduler = &one_cycle, .scheduler_per_batch = false}.validate(); },
       "fit: OneCycleLR is defined per batch");
  data::DataLoader loader(blobs(16, 1), {.batch_size = 8});
  const train::LossFn loss = train::cross_entropy_loss();
  EXPECT_NO_THROW(train::FitOptions{}.validate(net, loader, opt, loss));
  says([&] { train::FitOptions{}.validate(nn::Module(), loader, opt, loss); },
       "fit: the model is undefined");
  says([&] { train::FitOptions{}.validate(net, loader, opt, train::LossFn()); },
       "fit: no loss function given");
  says([&] { train::FitOptions{.capture_step = true}.validate(net, loader, opt, loss); },
       "fit: capture_step needs the model on a CUDA device (got cpu)");
  opt.set_accumulate_steps(2);
  says([&] { train::FitOptions{.accumulate_grad_batches = 2}.validate(net, loader, opt, loss); },
       "fit: accumulate_grad_batches 2 with an optimizer that accumulates 2 steps itself");
}
}  // namespace

namespace {

// Note [Metrics on the device] (src/train/fit.cpp): on a GPU an epoch of fit() reads the
// device only at its end (the loss sum and the correct count), however many steps it has;
// a per-batch hook reads each batch's loss.
int64_t device_reads_of_one_epoch(int64_t batches, bool batch_hook) {
  const Device gpu = Device::cuda(0);
  auto set = blobs(16 * batches, 9);
  data::DataLoader loader(set, {.batch_size = 16, .shuffle = true, .seed = 4});
  manual_seed(8);
  nn::Module net = small_net();
  net->to(gpu);
  optim::Adam opt(net->parameters(), {.lr = 1e-2});
  std::ostringstream out;
  train::FitOptions o{.epochs = 1, .progress = train::Progress::lines, .out = &out};
  o.callbacks.push_back(std::make_shared<train::EarlyStopping>(
      train::EarlyStoppingOptions{.monitor = "loss", .restore_best = false}));
  if (batch_hook) o.on_batch = [](const train::BatchLog&) {};
  const int64_t before = memory_stats(gpu).device_to_host_bytes;
  const train::History h = train::fit(net, loader, opt, train::cross_entropy_loss(), o);
  const int64_t reads = memory_stats(gpu).device_to_host_bytes - before;
  EXPECT_EQ(h.epochs.at(0).train.samples, 16 * batches);
  EXPECT_TRUE(std::isfinite(h.epochs.at(0).train.loss));
  return reads;
}

TEST(CudaFit, AnEpochReadsTheDeviceOnlyAtItsEnd) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: this test counts device-to-host bytes";
  const int64_t four = device_reads_of_one_epoch(4, false);
  const int64_t twelve = device_reads_of_one_epoch(12, false);
  EXPECT_EQ(four, twelve) << "bytes read from the device grow with the number of steps";
  EXPECT_LE(four, 16);  // the f64 loss sum and the i64 correct count
  // The counter sees reads: a per-batch hook reads each step's loss.
  const int64_t hooked = device_reads_of_one_epoch(12, true);
  EXPECT_GE(hooked, twelve + 12 * 4);
}

// Issue 14 item 5: the model decides; the loader delivers there (the host-to-device copy
// happens on its prefetch thread), and a model split over two devices is refused by name.
TEST(CudaFit, TheLoaderDeliversToTheModelsDevice) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: this test runs a model on the GPU";
  const Device gpu = Device::cuda(0);
  nn::Module net = small_net();
  net->to(gpu);
  EXPECT_EQ(train::model_device(net), gpu);
  data::DataLoader loader(blobs(32, 3), {.batch_size = 16, .device = Device::cpu()});
  for (auto it = loader.begin_on(gpu); it != loader.end(); ++it) {
    EXPECT_EQ(it->input.device(), gpu);
    EXPECT_EQ(it->target.device(), gpu);
  }
  const train::Metrics m = train::evaluate(net, loader, train::cross_entropy_loss());
  EXPECT_EQ(m.samples, 32);
  net->named_parameters().back().second.set_data_(
      net->named_parameters().back().second.to(Device::cpu()));
  try {
    train::model_device(net);
    FAIL() << "a model on two devices was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model_device: the model is on two devices: '0.weight' "
                                         "is on cuda:0 and '2.bias' on cpu"),
              std::string::npos)
        << e.what();
  }
}

// fit(capture_step) refuses what cannot run inside a graph, naming it.
TEST(CudaFit, CaptureStepRefusesAccumulationAndBeforeStep) {
  SKIP_WITHOUT_CUDA();
  auto ds = blobs(32, 2);
  data::DataLoader loader(ds, {.batch_size = 16});
  nn::Module net = small_net();
  net->to(Device::cuda(0));
  optim::SGD opt(net->parameters(), {.lr = 0.1});
  auto says = [&](train::FitOptions o, const std::string& what) {
    o.progress = train::Progress::none;
    o.capture_step = true;
    try {
      train::fit(net, loader, opt, train::cross_entropy_loss(), o);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  says({.accumulate_grad_batches = 2},
       "fit: capture_step steps the optimizer on every batch (got accumulate_grad_batches 2, "
       "optimizer accumulate_steps 1; expected 1 for both)");
  says({.before_step = [](train::Trainer&) {}},
       "fit: capture_step cannot call before_step inside the captured graph");
}

// A captured fit of a multi-input classifier (the extra input goes into the graph too) is the
// eager fit bitwise: the epochs' losses and accuracies, every batch's loss and step, the
// weights and the last gradient norm. The callbacks' on_before_optimizer_step runs eagerly
// only (inside a graph it would not run again on replay).
TEST(CudaFit, CapturedMultiInputFitEqualsEagerWithItsHooks) {
  SKIP_WITHOUT_CUDA();
  struct Run {
    std::vector<double> epoch_losses, accuracies, batch_losses;
    std::vector<int64_t> steps;
    std::vector<float> weights;
    double grad_norm = 0.0;
    int64_t before_hooks = 0;
  };
  struct Hooks : train::Callback {
    Run* run;
    explicit Hooks(Run* r) : run(r) {}
    void on_before_optimizer_step(train::Trainer&) override { ++run->before_hooks; }
    void on_batch_end(train::Trainer&, const train::BatchLog& b) override {
      run->batch_losses.push_back(b.loss);
      run->steps.push_back(b.global_step);
    }
    void on_train_end(train::Trainer& t, train::History&) override {
      run->grad_norm = t.grad_norm.item<double>();
    }
  };
  auto fit_once = [](bool capture) {
    manual_seed(5);
    Tensor a = randn({100, 8}), b = randn({100, 3});
    Tensor y = randint(0, 4, {100});
    auto ds = std::make_shared<data::MultiTensorDataset>(std::vector<Tensor>{a, b}, y);
    data::DataLoader loader(ds, {.batch_size = 32, .shuffle = true, .seed = 7});  // last: 4 rows
    manual_seed(6);
    nn::Module net = train::MultiInputSequential(
        {train::Parallel({nn::Linear(8, 8), nn::Linear(3, 8)}), nn::ReLU(), nn::Linear(16, 4)});
    net->to(Device::cuda(0));
    optim::Adam opt(net->parameters(), {.lr = 1e-2});
    Run run;
    const train::History h = train::fit(net, loader, opt, train::cross_entropy_loss(),
                                        {.epochs = 3,
                                         .callbacks = {std::make_shared<Hooks>(&run)},
                                         .progress = train::Progress::none,
                                         .clip_grad_norm = 0.5,
                                         .capture_step = capture});
    for (const train::EpochLog& e : h.epochs) {
      run.epoch_losses.push_back(e.train.loss);
      run.accuracies.push_back(e.train.accuracy.value_or(-1.0));
    }
    net->to(Device::cpu());
    run.weights = flat_params(net);
    return run;
  };
  const Run eager = fit_once(false), graph = fit_once(true);
  EXPECT_EQ(graph.epoch_losses, eager.epoch_losses);
  EXPECT_EQ(graph.accuracies, eager.accuracies);
  EXPECT_EQ(graph.batch_losses, eager.batch_losses);
  EXPECT_EQ(graph.steps, eager.steps);
  EXPECT_EQ(graph.weights, eager.weights);
  EXPECT_EQ(graph.grad_norm, eager.grad_norm);
  EXPECT_EQ(eager.before_hooks, 12);
  EXPECT_EQ(graph.before_hooks, 0);
  EXPECT_GE(graph.accuracies.back(), 0.0);
}

}  // namespace
