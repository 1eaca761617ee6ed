// tools/cli_common.cpp — checks every `ember` subcommand shares, and the training run behind
// `ember train` (tools/cli_common.hpp).
#include "cli_common.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string_view>

#include "ember/data/distributed_sampler.hpp"
#include "ember/distributed.hpp"
#include "ember/distributed/data_parallel.hpp"
#include "ember/error.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/optim/adam.hpp"
#include "ember/optim/scheduler.hpp"
#include "ember/optim/sgd.hpp"
#include "ember/runtime.hpp"

namespace ember_cli {

using namespace ember;
namespace fs = std::filesystem;

CLI::Validator number(double min, bool min_ok) {
  std::ostringstream bound;
  bound << (min_ok ? ">= " : "> ") << min;
  const std::string want = "a number " + bound.str();
  return CLI::Validator(
      [min, min_ok, want](std::string& text) -> std::string {
        double v = 0.0;
        const std::string_view t =
            !text.empty() && text[0] == '+' ? std::string_view(text).substr(1) : text;
        const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        const bool ok = !t.empty() && ec == std::errc() && end == t.data() + t.size() &&
                        std::isfinite(v) && (min_ok ? v >= min : v > min);
        return ok ? std::string() : "'" + text + "' is not " + want;
      },
      "");
}

CLI::Validator one_of(const std::vector<std::string>& choices) {
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : ", ") + c;
  return CLI::Validator(
      [choices, list](std::string& text) -> std::string {
        for (const std::string& c : choices)
          if (text == c) return {};
        return "'" + text + "' is not one of " + list;
      },
      "");
}

void check_input_file(const char* flag, const std::string& path) {
  std::error_code ec;
  EMBER_CHECK(fs::is_regular_file(path, ec), "ember: ", flag, " ", path, ": no such file",
              fs::exists(path, ec) ? " (it is a folder)" : "");
  EMBER_CHECK(::access(path.c_str(), R_OK) == 0, "ember: ", flag, " ", path, ": not readable");
}

void check_output_path(const char* flag, const std::string& path) {
  EMBER_CHECK(!path.empty(), "ember: ", flag, " is empty (expected a file path)");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  EMBER_CHECK(fs::is_directory(dir, ec), "ember: ", flag, " ", path, ": the folder '", dir.string(),
              "' does not exist (expected an existing folder; create it first)");
  EMBER_CHECK(!fs::is_directory(path, ec), "ember: ", flag, " ", path,
              " is a folder (expected a file path)");
  EMBER_CHECK(::access(dir.c_str(), W_OK) == 0, "ember: ", flag, " ", path, ": the folder '",
              dir.string(), "' is not writable");
}

Device check_device(const std::string& name) {
  const Device d = Device::parse(name);
#if defined(EMBER_WITH_CUDA)
  const char* build = "";
#else
  const char* build = "; this ember was built without CUDA";
#endif
  if (!d.is_cuda()) return d;
  const int count = cuda_device_count();  // only now: it starts the CUDA runtime
  EMBER_CHECK(d.index < count, "ember: --device ", name, ": no such device (this machine has ",
              count, " CUDA device", count == 1 ? "" : "s", build, ")");
  return d;
}

std::string checkpoint_path(const TrainArgs& t) {
  if (!t.checkpoint.empty()) return t.checkpoint;
  std::string out = t.output;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out + ".ckpt";
}

Device check_train_args(const TrainArgs& t) {
  const Device device = check_device(t.device);
  EMBER_CHECK(!t.capture || device.is_cuda(), "ember: --capture on ", device.str(),
              " (expected --device cuda:N: a captured step is a CUDA graph)");
  EMBER_CHECK(!t.bf16 || device.is_cuda(), "ember: --bf16 on ", device.str(),
              " (expected --device cuda:N; the CPU trains in f32)");
  if (!t.checkpoint.empty())
    EMBER_CHECK(t.checkpoint_every > 0, "ember: --checkpoint ", t.checkpoint,
                " is never written without --checkpoint-every N (expected N >= 1)");
  if (t.checkpoint_every > 0) check_output_path("--checkpoint", checkpoint_path(t));
  if (!t.resume.empty()) {
    check_input_file("--resume", t.resume);
    const std::string kind = io::inspect(t.resume).kind;
    EMBER_CHECK(kind == "checkpoint", "ember: --resume ", t.resume,
                " is not an ember checkpoint (got kind '", kind,
                "', expected 'checkpoint', as --checkpoint-every writes)");
  }
  return device;
}

void join_job() {
  distributed::init();
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!std::getenv("EMBER_NUM_THREADS") && local && std::atoi(local) > 1)
    set_num_threads(std::max(1, get_num_threads() / std::atoi(local)));
}

namespace {

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainArgs& t,
                                                 const std::vector<Tensor>& params) {
  if (t.optimizer == "adam")
    return std::make_unique<optim::Adam>(
        params, optim::AdamOptions{.lr = t.lr, .weight_decay = t.weight_decay});
  if (t.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(
        params, optim::AdamWOptions{.lr = t.lr, .weight_decay = t.weight_decay});
  // sgd: the only other choice the parser lets through
  return std::make_unique<optim::SGD>(
      params,
      optim::SGDOptions{.lr = t.lr, .momentum = t.momentum, .weight_decay = t.weight_decay});
}

train::Progress progress_mode(const std::string& name) {
  return name == "bar"     ? train::Progress::bar
         : name == "lines" ? train::Progress::lines
         : name == "none"  ? train::Progress::none
                           : train::Progress::automatic;
}

}  // namespace

train::History run_training(const TrainArgs& t, TrainJob job) {
  // Distributed: each rank trains on its shard (the sampler shuffles per epoch), and the
  // wrapper's hooks on the parameters average the gradients in fit()'s backward; fit() and
  // the files it writes see the plain model.
  std::shared_ptr<data::DistributedShard> shard;
  std::optional<distributed::DistributedDataParallel> ddp;
  if (t.distributed) {
    shard = std::make_shared<data::DistributedShard>(
        job.train, data::DistributedSamplerOptions{.shuffle = job.shuffle, .seed = t.seed});
    ddp.emplace(job.model, distributed::DistributedDataParallelOptions{});
  }
  data::DataLoader train_loader(shard ? shard : job.train, {.batch_size = job.batch_size,
                                                            .shuffle = job.shuffle && !shard,
                                                            .seed = t.seed,
                                                            .num_workers = job.num_workers});

  const std::unique_ptr<optim::Optimizer> opt = make_optimizer(t, job.model->parameters());
  std::unique_ptr<optim::LRScheduler> sched;
  std::unique_ptr<optim::ReduceLROnPlateau> plateau;
  bool per_batch = false;
  if (t.scheduler == "cosine") {
    sched =
        std::make_unique<optim::CosineAnnealingLR>(*opt, job.epochs * train_loader.num_batches());
    per_batch = true;
  } else if (t.scheduler == "step") {
    sched = std::make_unique<optim::StepLR>(*opt, std::max<int64_t>(job.epochs / 3, 1), 0.1);
  } else if (t.scheduler == "exponential") {
    sched = std::make_unique<optim::ExponentialLR>(*opt, 0.9);
  } else if (t.scheduler == "plateau") {
    plateau = std::make_unique<optim::ReduceLROnPlateau>(
        *opt, optim::ReduceLROnPlateauOptions{.patience = 1});
  }

  train::FitOptions& fo = job.fit;
  fo.epochs = job.epochs;
  fo.val_loader = job.val_loader;
  fo.scheduler = sched.get();
  fo.scheduler_per_batch = per_batch;
  fo.plateau = plateau.get();
  fo.clip_grad_norm = t.clip_grad_norm;
  fo.capture_step = t.capture;
  if (t.bf16) fo.autocast = DType::bf16;
  fo.checkpoint_every = job.lead ? t.checkpoint_every : 0;  // rank 0 writes, every rank resumes
  if (fo.checkpoint_every > 0) fo.checkpoint_path = checkpoint_path(t);
  fo.progress = job.lead ? progress_mode(t.progress) : train::Progress::none;
  if (!t.resume.empty()) {
    const train::ResumePoint r =
        train::resume(t.resume, job.model, *opt, sched.get(), train_loader, fo.grad_scaler);
    // Note [Resuming at an epoch's end]: a checkpoint taken after an epoch's last batch holds
    // the loader at (epoch, batches). Its next batch is the next epoch's first, but fit()
    // would count the finished epoch again (one epoch more than asked, and its progress past
    // 100%): the run goes on from the next epoch, position 0. That epoch-end's validation and
    // per-epoch scheduler step came after the checkpoint, and are not repeated.
    if (train_loader.position() >= train_loader.num_batches())
      train_loader.set_state(train_loader.epoch() + 1, 0);
    fo.start_epoch = train_loader.epoch();
    fo.start_step = r.step;
    if (job.lead)
      std::cout << "resumed from " << t.resume << " at epoch " << fo.start_epoch + 1 << ", step "
                << r.step << "\n";
  }
  if (shard) {
    shard->set_epoch(fo.start_epoch);
    fo.on_epoch = [&shard, user = fo.on_epoch](const train::EpochLog& log) {
      shard->set_epoch(log.epoch + 1);
      if (user) user(log);
    };
  }
  return train::fit(job.model, train_loader, *opt, job.loss, fo);
}

}  // namespace ember_cli
