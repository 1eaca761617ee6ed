// tests/io_helper.cpp — the child processes of tests/test_io_process.cpp.
//
//   io_helper save-loop PATH         save model A, then B, print "ready <microseconds per
//                                    save>", then alternate A, B, A, ... to PATH until killed
//   io_helper async-save-loop PATH   the same with checkpoints of A and B (with Adam state)
//                                    through save_checkpoint_async
//   io_helper write-models DIR       write DIR/a.safetensors and DIR/b.safetensors (the
//                                    references the crash test compares against)
//   io_helper train N CKPT OUT       train 2N steps from scratch, checkpointing to CKPT after
//                                    step N; save the final model to OUT
//   io_helper resume N CKPT OUT      load CKPT (after step N), train N more, save to OUT
//
// The training run has Dropout (RNG state), Adam with a StepLR scheduler, and a shuffled
// DataLoader with prefetching whose epochs end mid-run, so a resume is exact only when
// every piece of state comes back.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"

namespace {

using namespace ember;  // NOLINT: small program

// Keeps a result alive so the work that made it is not optimised away.
void bench_sink(const Tensor& t) {
  static volatile const void* sink;
  sink = t.data_ptr();
}

// Models A and B of the crash test: same architecture, different values (~70 KB each).
nn::Module crash_model(int which) {
  manual_seed(which == 0 ? 11 : 22);
  return nn::Sequential(
      std::vector<nn::Module>{nn::Linear(64, 256), nn::ReLU(), nn::Linear(256, 10)});
}

// The asynchronous variant: checkpoints of A and B (each with an Adam state) alternately
// through save_checkpoint_async, with a small training step of the other model in between.
int async_save_loop(const std::string& path) {
  const nn::Module models[2] = {crash_model(0), crash_model(1)};
  optim::Adam opts[2] = {optim::Adam(models[0]->parameters(), {}),
                         optim::Adam(models[1]->parameters(), {})};
  const Tensor x = randn({4, 64});
  io::save_checkpoint(path, models[0], opts[0]);
  const auto t0 = std::chrono::steady_clock::now();
  io::save_checkpoint_async(path, models[1], opts[1]);
  io::wait_for_checkpoint();
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  std::printf("ready %lld\n", static_cast<long long>(us));
  std::fflush(stdout);
  for (uint64_t i = 0;; ++i) {
    io::save_checkpoint_async(path, models[i % 2], opts[i % 2]);
    NoGradGuard no_grad;  // work while the write runs; the snapshot is already taken
    bench_sink(models[(i + 1) % 2]->forward(x));
  }
}

int save_loop(const std::string& path) {
  const nn::Module models[2] = {crash_model(0), crash_model(1)};
  io::save_model(models[0], path);
  const auto t0 = std::chrono::steady_clock::now();
  io::save_model(models[1], path);
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  std::printf("ready %lld\n", static_cast<long long>(us));
  std::fflush(stdout);
  for (uint64_t i = 0;; ++i) io::save_model(models[i % 2], path);
}

struct Run {
  nn::Module net;
  std::unique_ptr<optim::Adam> opt;
  std::unique_ptr<optim::StepLR> sched;
  std::unique_ptr<data::DataLoader> loader;
};

// Everything built from fixed seeds; a resumed run rebuilds it, then loads the checkpoint.
Run make_run() {
  Run r;
  manual_seed(7);
  Tensor x = randn({22, 8});
  Tensor y = randint(0, 4, {22});
  manual_seed(42);
  r.net = nn::Sequential(
      std::vector<nn::Module>{nn::Linear(8, 16), nn::ReLU(), nn::Dropout(0.3), nn::Linear(16, 4)});
  r.net->train();
  r.opt = std::make_unique<optim::Adam>(r.net->parameters(), optim::AdamOptions{.lr = 0.01});
  r.sched = std::make_unique<optim::StepLR>(*r.opt, 3, 0.5);
  auto ds = std::make_shared<data::TensorDataset>(x, y);
  // 22 examples in batches of 6: 4 batches per epoch, the last of 4 examples.
  r.loader = std::make_unique<data::DataLoader>(
      ds, data::DataLoaderOptions{.batch_size = 6, .shuffle = true, .seed = 5});
  return r;
}

// Optimizer steps `from` .. `to` (exclusive); checkpoints to `ckpt` after step `save_at`.
void train(Run& r, int64_t from, int64_t to, int64_t save_at, const std::string& ckpt) {
  int64_t step = from;
  while (step < to) {
    for (data::Example& b : *r.loader) {
      r.opt->zero_grad();
      cross_entropy(r.net(b.input), b.target).backward();
      r.opt->step();
      r.sched->step();
      ++step;
      if (step == save_at)
        io::save_checkpoint(ckpt, r.net, *r.opt, r.sched.get(), step, {}, r.loader.get());
      if (step == to) break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "save-loop" && argc == 3) return save_loop(argv[2]);
    if (mode == "async-save-loop" && argc == 3) return async_save_loop(argv[2]);
    if (mode == "write-models" && argc == 3) {
      io::save_model(crash_model(0), std::string(argv[2]) + "/a.safetensors");
      io::save_model(crash_model(1), std::string(argv[2]) + "/b.safetensors");
      return 0;
    }
    if ((mode == "train" || mode == "resume") && argc == 5) {
      const int64_t n = std::atoll(argv[2]);
      Run r = make_run();
      if (mode == "train") {
        train(r, 0, 2 * n, n, argv[3]);
      } else {
        const io::CheckpointInfo info =
            io::load_checkpoint(argv[3], r.net, *r.opt, r.sched.get(), r.loader.get());
        if (info.step != n) {
          std::fprintf(stderr, "io_helper: checkpoint is at step %lld, expected %lld\n",
                       static_cast<long long>(info.step), static_cast<long long>(n));
          return 1;
        }
        r.net->train();
        train(r, n, 2 * n, -1, "");
      }
      io::save_model(r.net, argv[4]);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "io_helper: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr,
               "usage: io_helper save-loop PATH | write-models DIR | train N CKPT OUT | resume N "
               "CKPT OUT\n");
  return 2;
}
