// tools/cli_common.hpp — what the `ember` command's subcommands share (tools/ember.cpp, the
// subcommands' own files such as tools/generate.cpp and tools/train_text.cpp): the argument
// validators and path checks (Note [Argument checks] in tools/ember.cpp), and the training
// run that `ember train` drives for every kind of model (run_training).
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/data/dataloader.hpp"
#include "ember/device.hpp"
#include "ember/nn/module.hpp"
#include "ember/train/fit.hpp"

namespace ember_cli {

// ---- argument checks (Note [Argument checks] in tools/ember.cpp) ----

/// A whole number >= min that fits Int; e.g. "--epochs: 'abc' is not a whole number >= 1".
template <typename Int>
CLI::Validator whole_number(Int min) {
  const std::string want = "a whole number >= " + std::to_string(min);
  return CLI::Validator(
      [min, want](std::string& text) -> std::string {
        Int v{};
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec == std::errc::result_out_of_range)
          return "'" + text + "' is too large (expected " + want + ")";
        if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < min)
          return "'" + text + "' is not " + want;
        return {};
      },
      "");
}
/// A finite number above min (or at least min when min_ok); e.g. "--lr: 'x' is not a number > 0".
CLI::Validator number(double min, bool min_ok);
/// One of `choices`; e.g. "--optimizer: 'rmsprop' is not one of adam, adamw, sgd".
CLI::Validator one_of(const std::vector<std::string>& choices);

/// `path` is a regular file this process can read; ember::Error naming `flag` otherwise.
void check_input_file(const char* flag, const std::string& path);
/// `path` names a file that can be written: its folder exists and is writable, and `path`
/// itself is not a folder. Checked before any work, so a bad path writes nothing.
void check_output_path(const char* flag, const std::string& path);
/// The device exists on this machine (Device::parse checks the spelling).
ember::Device check_device(const std::string& name);

// ---- ember train ----

/// `ember train`'s flags that every kind of model shares (the data flags are the caller's).
struct TrainArgs {
  std::string model = "mlp", optimizer = "adam", scheduler = "none", device = "cpu";
  std::string output;  // default: model.safetensors (a folder with --text: required)
  std::string checkpoint, resume, progress = "auto";
  int64_t epochs = 5, checkpoint_every = 0;
  double lr = 1e-3, momentum = 0.9, weight_decay = 0.0;
  std::optional<double> clip_grad_norm;
  uint64_t seed = 42;
  bool distributed = false;
  bool capture = false;  // each step one CUDA graph (FitOptions::capture_step)
  bool bf16 = false;     // the forward under bf16 autocast (FitOptions::autocast)
};

/// --checkpoint, or OUTPUT.ckpt beside the output (a folder's trailing '/' dropped).
std::string checkpoint_path(const TrainArgs& t);
/// The flags every training run checks before any work: the device exists, --capture and
/// --bf16 are on a CUDA device, --checkpoint comes with --checkpoint-every and its folder is
/// writable, a --resume file is an ember checkpoint. Returns the device.
ember::Device check_train_args(const TrainArgs& t);
/// --distributed (docs/distributed.md): joins the mpirun job and, unless EMBER_NUM_THREADS
/// says otherwise, shares this host's cores among its ranks.
void join_job();

/// What one `ember train` run trains; the classifier path (tools/ember.cpp), the text path
/// (tools/train_text.cpp) and the image path (tools/train_images.cpp) each fill one and hand it
/// to run_training.
struct TrainJob {
  ember::nn::Module model;  // on its device already
  std::shared_ptr<ember::data::Dataset> train;
  int64_t batch_size = 1;
  /// Passes over `train`; `shuffle` false when the dataset orders itself.
  int64_t epochs = 1;
  bool shuffle = true;
  ember::data::DataLoader* val_loader = nullptr;
  ember::train::LossFn loss;
  /// Whether this process prints and writes files (rank 0 of a distributed job).
  bool lead = true;
  /// Threads making the training batches' examples (DataLoaderOptions::num_workers): images
  /// are decoded and augmented on them (tools/train_images.cpp).
  int num_workers = 0;
  /// The caller's fit() options (capture_step, autocast, on_epoch, ...); run_training fills
  /// in the rest from TrainArgs: epochs, validation, scheduler, checkpoints, progress, resume.
  ember::train::FitOptions fit{};
};

/// Trains `job` as `ember train` does: the optimizer, scheduler, clipping, checkpoints,
/// capture, autocast and progress from `t`; resuming from --resume; under --distributed, each rank
/// on its shard of the data with the gradients averaged (distributed::DistributedDataParallel).
ember::train::History run_training(const TrainArgs& t, TrainJob job);

// ---- ember generate ----

/// `ember generate`'s flags (tools/generate.cpp).
struct GenerateArgs {
  std::string model;  // a Hugging Face folder: config.json and model.safetensors
  std::string prompt;
  std::string tokenizer;                  // default: MODEL/tokenizer.json
  std::optional<int64_t> max_new_tokens;  // default: 64, or what fits
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  double repetition_penalty = 1.0;
  std::optional<uint64_t> seed;  // default: a random seed
  bool greedy = false;
  std::string device = "cpu";
  bool bf16 = false;
};
/// Continues the prompt, writing only the new text to stdout as it comes (a line end follows).
int cmd_generate(GenerateArgs g);

}  // namespace ember_cli
