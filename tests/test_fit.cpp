// tests/test_fit.cpp — the training loop (fit, evaluate, callbacks, early stopping, progress)
// and the `ember` command's handling of bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>

#include "ember/ember.hpp"
#include "ember/data/dataloader.hpp"
#include "ember/data/dataset.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "ember/train/fit.hpp"

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
  train::History h = train::fit(net, train, opt, train::cross_entropy_loss(),
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
    train::History h = train::fit(net, loader, opt, train::cross_entropy_loss(),
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
    train::fit(net, loader, opt, train::cross_entropy_loss(), {.epochs = -1, .progress = train::Progress::none});
    FAIL() << "negative epochs accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fit: epochs -1"), std::string::npos) << e.what();
  }
}

// ---- the `ember` command: bad arguments give a short usage error, never a trace

struct CliRun {
  int status;
  std::string output;
};

#ifndef EMBER_CLI_PATH
#define EMBER_CLI_PATH ""
#endif

#define SKIP_WITHOUT_CLI() \
  if (std::string(EMBER_CLI_PATH).empty()) GTEST_SKIP() << "built without tools (EMBER_BUILD_TOOLS=OFF): no ember command to run"

CliRun run_cli(const std::string& args) {
  const std::string cmd = std::string(EMBER_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

void expect_usage_error(const std::string& args, const std::string& says) {
  const CliRun r = run_cli(args);
  EXPECT_NE(r.status, 0) << args;
  EXPECT_LT(r.status, 128) << args << ": killed by a signal\n" << r.output;
  EXPECT_NE(r.output.find(says), std::string::npos) << args << "\n" << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("what():"), std::string::npos) << r.output;
  EXPECT_LT(std::count(r.output.begin(), r.output.end(), '\n'), 12) << "short:\n" << r.output;
}

TEST(Cli, BadArgumentsGiveAShortUsageError) {
  SKIP_WITHOUT_CLI();
  expect_usage_error("", "subcommand");
  expect_usage_error("frobnicate", "subcommand");
  expect_usage_error("train --epochs -3", "--epochs");
  expect_usage_error("train --batch-size 0", "--batch-size");
  expect_usage_error("train --epochs many", "--epochs");
  expect_usage_error("train --no-such-flag", "--no-such-flag");
  expect_usage_error("eval", "model");
  expect_usage_error("predict model.safetensors", "--input");
}

TEST(Cli, RuntimeErrorsAreOneLineNotATrace) {
  SKIP_WITHOUT_CLI();
  expect_usage_error("train --optimizer rmsprop --dataset /nonexistent.csv", "error: ");
  expect_usage_error("eval /nonexistent/model.safetensors", "/nonexistent/model.safetensors");
  expect_usage_error("train --device tpu", "tpu");
  expect_usage_error("inspect /nonexistent.safetensors", "/nonexistent.safetensors");
}

TEST(Cli, InfoRuns) {
  SKIP_WITHOUT_CLI();
  const CliRun r = run_cli("info");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ember 0.1.0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cpu threads"), std::string::npos) << r.output;
}

}  // namespace
