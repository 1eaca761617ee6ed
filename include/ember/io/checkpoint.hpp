// ember/io/checkpoint.hpp — models and training state as safetensors files (ARCHITECTURE §7).
//
//   io::save_model(net, "mlp.safetensors");
//   nn::Module back = io::load_model("mlp.safetensors");            // rebuilt, eval mode
//   io::save_checkpoint("ckpt.safetensors", net, opt, &sched, step);  // resume exactly later
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ember/data/dataloader.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/nn/module.hpp"
#include "ember/optim/optimizer.hpp"
#include "ember/optim/scheduler.hpp"

namespace ember::optim {
class GradScaler;
}

namespace ember::io {

struct SaveOptions {
  /// Store floating tensors in this dtype (f32 when unset; f16/bf16 halve the file). The
  /// original dtype is recorded and restored on load.
  std::optional<DType> storage_dtype = std::nullopt;
  /// Extra string metadata (keys must not start with "ember." or be "format").
  std::map<std::string, std::string> metadata{};
  /// Save even when a module type in the architecture is not registered
  /// (nn::register_module_type): load_model(path) will then refuse the file, and it loads
  /// only with load_state into a module you build or with load_model(path, builder).
  bool allow_unregistered = false;
};

/// Parameters, buffers and the architecture (config JSON), written atomically. Refuses,
/// writing nothing, a model whose architecture names a module type the registry does not
/// know (anywhere in the tree), since load_model could never rebuild it; register the type
/// with nn::register_module_type first, or set options.allow_unregistered.
void save_model(const nn::Module& model, const std::string& path, const SaveOptions& options = {});
/// Rebuilds the module from the stored architecture with the module registry (no code from
/// the file ever runs), copies the values onto `device`, returns it in eval mode.
nn::Module load_model(const std::string& path, Device device = Device::cpu());
/// As above, with the module built by `builder(architecture)` instead of the registry.
nn::Module load_model(const std::string& path,
                      const std::function<nn::Module(const nn::json&)>& builder,
                      Device device = Device::cpu());
/// Loads values into an existing module. Strict: one error listing every missing and
/// unexpected name and every shape or dtype mismatch (nothing is changed). Non-strict:
/// applies what fits and returns the report.
nn::LoadReport load_state(const nn::Module& model, const std::string& path, bool strict = true);

/// Everything needed to resume training bit-identically.
struct CheckpointInfo {
  int64_t step = 0;
  nn::json extra{};
  int64_t loader_epoch = 0, loader_position = 0;
};
/// Model + optimizer state (+ scheduler, RNG, DataLoader state, GradScaler state when given)
/// + step + extra. The scaler's state_dict() goes into metadata "ember.grad_scaler".
/// Unlike save_model it accepts unregistered module types: a checkpoint is resumed into
/// existing objects (load_checkpoint), which never consults the registry. Its architecture
/// is still recorded (for inspect and load_model with a builder).
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer& optimizer,
                     const optim::LRScheduler* scheduler = nullptr, int64_t step = 0,
                     const nn::json& extra = nn::json::object(),
                     const data::DataLoader* loader = nullptr,
                     const optim::GradScaler* scaler = nullptr);
/// save_checkpoint that returns once the state is snapshotted, writing it on a background
/// thread while training goes on (Note [Asynchronous checkpoints] in src/io/checkpoint.cpp):
/// GPU parameters, buffers and optimizer state are copied into pinned host memory by copies
/// queued on the device (kept for the next checkpoint: one copy of the state), CPU ones
/// cloned, the metadata taken at the call. One write
/// is in flight at a time: a call while one is running waits for it first, and rethrows its
/// error if it failed. A crash at any moment leaves the old file or the new one, never a torn
/// one. Writes to one path land in the order they were issued: a later save_model,
/// save_checkpoint or save_checkpoint_async of the same path waits for this write, so it is
/// never replaced by this older state. Call wait_for_checkpoint() before reading the file or
/// exiting.
void save_checkpoint_async(const std::string& path, const nn::Module& model,
                           const optim::Optimizer& optimizer,
                           const optim::LRScheduler* scheduler = nullptr, int64_t step = 0,
                           const nn::json& extra = nn::json::object(),
                           const data::DataLoader* loader = nullptr,
                           const optim::GradScaler* scaler = nullptr);
/// Waits for the asynchronous checkpoint in flight, if any; rethrows its error.
void wait_for_checkpoint();
/// Whether an asynchronous checkpoint is being written.
bool checkpoint_in_flight();
/// Restores what save_checkpoint wrote into existing objects (strict names and shapes),
/// including ember's RNG state, the DataLoader's epoch and position and the GradScaler's state
/// (a scaler given for a checkpoint without one is refused). Refuses, changing
/// nothing, a loader whose options (dataset size, batch_size, shuffle, drop_last, seed when
/// shuffling) differ from the saved loader's, naming each difference.
CheckpointInfo load_checkpoint(const std::string& path, const nn::Module& model,
                               optim::Optimizer& optimizer, optim::LRScheduler* scheduler = nullptr,
                               data::DataLoader* loader = nullptr,
                               optim::GradScaler* scaler = nullptr);

/// What a file holds, readable without knowing the model.
struct Inspection {
  std::string path{}, kind{}, format_version{}, ember_version{}, created{};
  nn::json architecture{};  // null when absent
  std::map<std::string, std::string> metadata{};
  struct Row {
    std::string name{}, dtype{}, role{};  // role: parameter, buffer, optimizer, tensor
    Shape shape{};
    uint64_t bytes = 0;
  };
  std::vector<Row> tensors{};
  uint64_t total_bytes = 0, parameter_count = 0, file_bytes = 0;
  /// "verified" (the data matches ember.data_checksum), "not checked", or "absent" (the file
  /// has no ember.data_checksum, e.g. written by another tool).
  std::string checksum{};
  /// Table text as `ember inspect` prints it.
  std::string to_string() const;
  nn::json to_json() const;
};
/// Reads the header (and, with verify_checksum, hashes the data: a mismatch throws the
/// error load_model gives). Example: io::inspect("mlp.safetensors", true).checksum == "verified"
Inspection inspect(const std::string& path, bool verify_checksum = false);

}  // namespace ember::io
