// tests/test_io_ordering.cpp — writes to one path land in the order they were issued (issue 27
// item 7, Note [Writes land in issue order] in src/io/safetensors.cpp): an asynchronous
// checkpoint still being written never replaces a later synchronous save_model or
// save_checkpoint of the same path with its older state, and two asynchronous ones land in
// order. Many rounds, with a checkpoint three times the size of the model file, so the
// synchronous write would finish first if it did not wait.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ember/data/dataloader.hpp"
#include "ember/data/dataset.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "ember/train/fit.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::ScratchDir;

nn::Module wide_net() {
  manual_seed(3);
  return nn::Sequential({nn::Linear(256, 512), nn::Linear(512, 256)});
}

void fill_all(const nn::Module& net, double value) {
  NoGradGuard no_grad;
  for (Tensor& p : net->parameters()) p.fill_(value);
}

// How many parameter values of `net` differ from `value` (0 when the file held that state).
int64_t mismatches(const nn::Module& net, double value) {
  int64_t bad = 0;
  for (const Tensor& p : net->parameters())
    for (float v : p.detach().to_vector<float>()) bad += v != static_cast<float>(value);
  return bad;
}

// One Adam step, so the checkpoint carries exp_avg and exp_avg_sq (3x the model's bytes).
void one_step(const nn::Module& net, optim::Optimizer& opt) {
  opt.zero_grad();
  mean(square(net->forward(ones({4, 256})))).backward();
  opt.step();
}

TEST(IoOrdering, LaterSynchronousSaveIsNeverReplacedByEarlierAsyncCheckpoint) {
  ScratchDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  nn::Module net = wide_net();
  optim::Adam opt(net->parameters(), {.lr = 1e-3});
  one_step(net, opt);
  nn::Module back = wide_net();
  int stale = 0;
  constexpr int kRounds = 60;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const double old_value = 2 * round + 1, new_value = 2 * round + 2;
    fill_all(net, old_value);
    io::save_checkpoint_async(path, net, opt, nullptr, /*step=*/2 * round + 1);
    fill_all(net, new_value);
    // The later write: a model file (smaller, so quicker) or a synchronous checkpoint.
    if (round % 2 == 0)
      io::save_model(net, path);
    else
      io::save_checkpoint(path, net, opt, nullptr, /*step=*/2 * round + 2);
    io::wait_for_checkpoint();
    io::load_state(back, path);
    const int64_t bad = mismatches(back, new_value);
    if (bad != 0) {
      ++stale;
      ADD_FAILURE() << "the file holds the earlier asynchronous state (" << bad
                    << " values differ from " << new_value << "; first is "
                    << back->parameters()[0].detach().to_vector<float>()[0] << ")";
    }
    const io::Inspection info = io::inspect(path);
    EXPECT_EQ(info.kind, round % 2 == 0 ? "model" : "checkpoint");
    if (round % 2 == 1) {
      EXPECT_EQ(info.metadata.at("ember.step"), std::to_string(2 * round + 2));
    }
    // Nothing is left behind: one file, no temporaries of either writer.
    EXPECT_EQ(dir.list(), std::vector<std::string>{"ckpt.safetensors"});
  }
  EXPECT_EQ(stale, 0) << "of " << kRounds << " rounds";
}

TEST(IoOrdering, AsyncCheckpointsToOnePathLandInOrder) {
  ScratchDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  nn::Module net = wide_net();
  optim::Adam opt(net->parameters(), {.lr = 1e-3});
  one_step(net, opt);
  nn::Module back = wide_net();
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    fill_all(net, 3 * round + 1);
    io::save_checkpoint_async(path, net, opt, nullptr, 3 * round + 1);
    fill_all(net, 3 * round + 2);
    io::save_checkpoint_async(path, net, opt, nullptr, 3 * round + 2);
    fill_all(net, 3 * round + 3);  // not saved: the file holds the last issued write
    io::load_state(back, path);    // a load in this process waits for the write in flight
    EXPECT_EQ(mismatches(back, 3 * round + 2), 0);
    EXPECT_EQ(io::inspect(path).metadata.at("ember.step"), std::to_string(3 * round + 2));
  }
  io::wait_for_checkpoint();
}

// A synchronous write that fails does not hold up the writes issued after it, and an
// asynchronous one that fails reports at the next wait and still lets later writes land.
TEST(IoOrdering, FailedWritesReleaseThePath) {
  ScratchDir dir;
  const std::string path = dir.file("m.safetensors");
  nn::Module net = wide_net();
  optim::Adam opt(net->parameters(), {.lr = 1e-3});
  one_step(net, opt);
  fill_all(net, 1.0);
  io::save_checkpoint_async(path, net, opt);
  // Refused inside the writer (duplicate names), after the asynchronous write was issued.
  ember_test::expect_error(
      [&] {
        io::write_safetensors(path, {{"a", ones({2})}, {"a", ones({2})}}, {});
      },
      {"duplicate tensor name 'a'"});
  fill_all(net, 2.0);
  io::save_model(net, path);
  nn::Module back = wide_net();
  io::load_state(back, path);
  EXPECT_EQ(mismatches(back, 2.0), 0);
  io::save_checkpoint_async(dir.file("missing/folder/c.safetensors"), net, opt);
  fill_all(net, 3.0);
  io::save_model(net, path);
  ember_test::expect_error([] { io::wait_for_checkpoint(); }, {"missing/folder"});
  io::load_state(back, path);
  EXPECT_EQ(mismatches(back, 3.0), 0);
}

// fit(checkpoint_every) writes its checkpoints asynchronously to checkpoint_path; a callback
// that saves the same path synchronously at the end of each epoch (after the epoch's last
// asynchronous checkpoint was issued) must be what the file holds afterwards.
TEST(IoOrdering, FitCheckpointsAndACallbackSaveToOnePathLandInOrder) {
  ScratchDir dir;
  const std::string path = dir.file("fit.safetensors");
  manual_seed(8);
  auto set = std::make_shared<data::TensorDataset>(randn({64, 256}), randn({64, 256}));
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    nn::Module net = wide_net();
    optim::Adam opt(net->parameters(), {.lr = 1e-3});
    data::DataLoader loader(set, {.batch_size = 16});
    int64_t saved_step = -1;
    train::fit(net, loader, opt, train::mse_loss_fn(),
               {.epochs = 2,
                .on_epoch =
                    [&](const train::EpochLog& log) {
                      saved_step = 1000 + log.epoch;
                      io::save_checkpoint(path, net, opt, nullptr, saved_step);
                    },
                .progress = train::Progress::none,
                .checkpoint_every = 1,
                .checkpoint_path = path,
                .checkpoint_async = true});
    EXPECT_EQ(io::inspect(path).metadata.at("ember.step"), std::to_string(saved_step));
  }
}

}  // namespace
