// ember/data/distributed_sampler.hpp — each rank's share of a dataset (docs/distributed.md).
//
// The rule is PyTorch's DistributedSampler: every rank computes the same order of the whole
// dataset (shuffled_indices(n, seed, epoch) when shuffling, else 0 .. n-1), makes its length
// a multiple of the number of replicas, and takes every num_replicas-th index starting at
// its rank. So the shards of one epoch are disjoint and together cover the data, and
// set_epoch() reshuffles identically on every rank.
//   drop_last = false (the default): the order is padded by repeating it from the start, so
//     each rank gets ceil(n / R) indices and a few examples appear twice in the epoch.
//   drop_last = true: the tail is dropped, so each rank gets floor(n / R) indices.
//
// DistributedShard is the dataset view to hand a DataLoader (with shuffle = false; the
// sampler shuffles): example i of the shard is example indices()[i] of the base.
//   auto shard = std::make_shared<data::DistributedShard>(dataset,   // rank from init()
//                                                          data::DistributedSamplerOptions{.seed =
//                                                          7});
//   data::DataLoader loader(shard, {.batch_size = 32});              // shuffle stays off
//   for (int64_t e = 0; e < epochs; ++e) { shard->set_epoch(e); for (auto& b : loader) ... }
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ember/data/dataset.hpp"

namespace ember::data {

struct DistributedSamplerOptions {
  /// -1: distributed::world_size() (1 before init()).
  int num_replicas = -1;
  /// -1: distributed::rank() (0 before init()).
  int rank = -1;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

class DistributedSampler {
 public:
  /// Throws when size < 0, num_replicas < 1 or rank is not in 0 .. num_replicas - 1.
  explicit DistributedSampler(int64_t size, DistributedSamplerOptions options = {});

  /// The epoch whose order indices() gives (the same on every rank).
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  /// This rank's indices for the current epoch / for `epoch`. Example (n = 5, R = 2, no
  /// shuffle): rank 0 -> [0, 2, 4], rank 1 -> [1, 3, 0].
  std::vector<int64_t> indices() const { return indices(epoch_); }
  std::vector<int64_t> indices(int64_t epoch) const;
  /// Indices per rank per epoch: ceil(n / R), or floor(n / R) with drop_last.
  int64_t num_samples() const { return num_samples_; }
  /// num_samples() * num_replicas().
  int64_t total_size() const { return num_samples_ * options_.num_replicas; }
  int num_replicas() const { return options_.num_replicas; }
  int rank() const { return options_.rank; }
  const DistributedSamplerOptions& options() const { return options_; }

 private:
  int64_t size_;
  DistributedSamplerOptions options_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

/// A Dataset of this rank's shard of `base` for the sampler's current epoch.
class DistributedShard : public Dataset {
 public:
  DistributedShard(std::shared_ptr<Dataset> base, DistributedSamplerOptions options = {});
  /// Changes the shard to `epoch`'s; call it before each epoch's loop, not during one.
  void set_epoch(int64_t epoch);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override;
  Example get_batch(std::span<const int64_t> indices) const override;
  /// Passes the loader's epoch on to the base dataset (its augmentations), not to the shard.
  void begin_epoch(int64_t epoch) override { base_->begin_epoch(epoch); }
  const DistributedSampler& sampler() const { return sampler_; }
  /// The base indices of this epoch's shard.
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<Dataset> base_;
  DistributedSampler sampler_;
  std::vector<int64_t> indices_;
};

}  // namespace ember::data
