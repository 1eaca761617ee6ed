// ember/data/dataloader.hpp — batches from a Dataset: seeded shuffle, drop_last, prefetch.
//
// A range-for over a DataLoader covers one epoch (or what is left of it). Each epoch's
// order is a permutation fixed by (seed, epoch) alone, drawn with ember's own generator,
// so it is the same on every standard library and platform. With prefetch on, a worker
// thread assembles batch k+1 while the caller trains on batch k (one batch ahead).
//
//   auto ds = std::make_shared<data::TensorDataset>(x, y);
//   data::DataLoader loader(ds, {.batch_size = 64, .shuffle = true, .seed = 1});
//   for (int e = 0; e < 10; ++e)
//     for (data::Example& batch : loader) train_step(batch.input, batch.target);
//
// Note [DataLoader state]
// The loader's state is (epoch, position): position counts the batches of `epoch` handed
// out so far. Starting an iteration continues from that state; stepping past the last
// batch moves to (epoch + 1, 0). Saving (epoch(), position()) inside the loop body and
// later calling set_state() with them resumes with exactly the batches an uninterrupted
// run would have produced next. A prefetched batch that was never handed out does not
// count. Leaving a loop early keeps the state, so the next loop continues mid-epoch.
// The promise holds only for a loader that makes the same batches: the same dataset size,
// batch_size, shuffle and drop_last, and the same seed when shuffling. state() records
// those next to (epoch, position) and load_state() refuses a state taken with others,
// naming each difference (prefetch, num_workers and device do not change the batches and
// are not recorded). Checkpoints store state() (ember.dataloader, docs/checkpoints.md).
//
// Note [Parallel examples]
// With num_workers = N >= 1 the examples of a batch are made by N worker threads owned by
// the loader (started at the first batch, kept across epochs): each takes the next index not
// yet taken, calls dataset->get(i) and copies the example into its row of the batch (or,
// for examples collate() must check, keeps it for collate() of all of them in order: Note
// [Examples copied into the batch] in dataloader.cpp), so what each thread did leaves no trace. An
// error is the one of the batch's first failing example. Before an epoch's first batch the loader
// calls dataset->begin_epoch(epoch), with or without workers, so a dataset that augments at random
// (ImageFolder) can seed each example from (seed, epoch, index): batches then depend on
// neither N nor timing, and a resumed run sees the augmentations an uninterrupted one would.
// N counts decoding threads only: the prefetch thread waits while they work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/data/dataset.hpp"
#include "ember/device.hpp"

namespace ember::data {

struct DataLoaderOptions {
  int64_t batch_size = 32;
  /// Reshuffle every epoch with the permutation fixed by (seed, epoch).
  bool shuffle = false;
  /// Drop the last batch when it would be smaller than batch_size.
  bool drop_last = false;
  uint64_t seed = 0;
  /// Assemble the next batch on a background thread while the caller uses this one.
  bool prefetch = true;
  /// Threads that make a batch's examples in parallel (Note [Parallel examples]). 0: the
  /// batch is dataset->get_batch(indices) on one thread; N >= 1: dataset->get(i) for each
  /// index on N threads the loader owns, then collate(). The batches are the same for any N.
  int num_workers = 0;
  /// When set, batches are moved to this device (on the prefetch thread when prefetching).
  /// fit() and evaluate() ignore it: they deliver batches to the model's device (begin_on).
  std::optional<Device> device = std::nullopt;
};

/// The order of epoch `epoch`: a permutation of 0 .. n-1 that depends on (seed, epoch) only
/// (xoshiro256** seeded through splitmix64, Fisher-Yates with unbiased bounded draws).
/// Example: shuffled_indices(5, 42, 0) -> e.g. [3, 0, 4, 1, 2], identical everywhere.
std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, int64_t epoch);

/// A loader's position and everything that fixes its batches (Note [DataLoader state]).
struct DataLoaderState {
  int64_t epoch = 0;
  int64_t position = 0;
  int64_t size = 0;  // examples in the dataset
  int64_t batch_size = 0;
  bool shuffle = false;
  bool drop_last = false;
  uint64_t seed = 0;
};

/// Iterates a Dataset in batches. Not copyable or movable; use it from one thread.
class DataLoader {
 public:
  /// Throws when `dataset` is null or batch_size < 1.
  explicit DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options = {});
  /// Stops the prefetch thread (waits for at most the batch it is assembling).
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Input iterator over the rest of the current epoch. Dereferencing gives the current
  /// batch, which stays valid until the iterator is advanced. Starting a new iteration
  /// (begin(), set_state()) invalidates older iterators.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    using pointer = Example*;
    using reference = Example&;

    Iterator() = default;
    Example& operator*() const;
    Example* operator->() const { return &**this; }
    /// Hands out the next batch; past the last one the loader moves to the next epoch.
    /// Re-throws an exception raised while assembling the batch.
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(const Iterator& other) const { return loader_ == other.loader_; }

   private:
    friend class DataLoader;
    explicit Iterator(DataLoader* loader) : loader_(loader) {}
    DataLoader* loader_ = nullptr;  // null at the end
  };

  /// Continues the current epoch from position() (see Note [DataLoader state]).
  Iterator begin();
  /// Like begin(), but this iteration's batches are delivered to `device` (moved on the
  /// prefetch thread when prefetching) instead of options().device. fit() and evaluate() use
  /// it with the model's device, the one place a training run's device is decided.
  /// Example: for (auto it = loader.begin_on(Device::cuda(0)); it != loader.end(); ++it) ...
  Iterator begin_on(Device device);
  Iterator end() { return Iterator(); }

  /// Batches per epoch: ceil(size / batch_size), or floor with drop_last.
  int64_t num_batches() const;
  /// Examples in the dataset.
  int64_t size() const;
  /// The epoch being iterated (0-based).
  int64_t epoch() const { return epoch_; }
  /// Batches of this epoch already handed out.
  int64_t position() const { return position_; }
  /// Resumes at `position` batches into `epoch` (0 <= position <= num_batches()). Checks
  /// nothing about where the numbers came from; prefer state() / load_state().
  void set_state(int64_t epoch, int64_t position);
  /// The position with the options that fix the batches. Example:
  ///   data::DataLoaderState s = loader.state();  ...  other.load_state(s);
  DataLoaderState state() const;
  /// Throws, changing nothing, unless `s` comes from a loader that makes the same batches
  /// as this one (same size, batch_size, shuffle, drop_last, and seed when shuffling) and
  /// its position fits; the error names every option that differs.
  void check_state(const DataLoaderState& s) const;
  /// check_state(s), then set_state(s.epoch, s.position).
  void load_state(const DataLoaderState& s);

  const DataLoaderOptions& options() const { return options_; }
  const std::shared_ptr<Dataset>& dataset() const { return dataset_; }

  /// A one-line summary: "DataLoader(size=60000, batch_size=64, batches=938, shuffle=True,
  /// seed=1, drop_last=False, prefetch=True, epoch=0, position=0)" (", num_workers=2" with
  /// workers, ", device=cuda:0" when batches are moved).
  std::string to_string() const;

  /// Indices of batch `batch` of epoch `epoch` (what that batch's rows are taken from).
  std::vector<int64_t> batch_indices(int64_t epoch, int64_t batch) const;

 private:
  struct Prefetcher;
  struct Workers;

  void start_epoch(std::optional<Device> device);
  void stop_worker();
  void advance();
  Example make_batch(const std::vector<int64_t>& order, int64_t batch,
                     std::optional<Device> device) const;
  Iterator start(std::optional<Device> device);

  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions options_;
  int64_t epoch_ = 0;
  int64_t position_ = 0;
  std::shared_ptr<const std::vector<int64_t>> order_;  // this epoch's order (while iterating)
  std::optional<Device> target_;                       // where this iteration's batches go
  std::unique_ptr<Prefetcher> worker_;
  std::shared_ptr<Workers> workers_;  // num_workers threads, made at the first batch
  Example current_;
  bool active_ = false;  // an iteration is in progress
};

/// Prints loader.to_string().
std::ostream& operator<<(std::ostream& os, const DataLoader& loader);

}  // namespace ember::data
