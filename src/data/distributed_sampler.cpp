// src/data/distributed_sampler.cpp — DistributedSampler and DistributedShard
// (include/ember/data/distributed_sampler.hpp).
#include "ember/data/distributed_sampler.hpp"

#include "ember/data/dataloader.hpp"
#include "ember/distributed.hpp"
#include "ember/error.hpp"

namespace ember::data {

namespace {

DistributedSamplerOptions resolved(DistributedSamplerOptions o) {
  const bool up = distributed::is_initialized();
  if (o.num_replicas == -1) o.num_replicas = up ? distributed::world_size() : 1;
  if (o.rank == -1) o.rank = up ? distributed::rank() : 0;
  return o;
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t size, DistributedSamplerOptions options)
    : size_(size), options_(resolved(options)) {
  EMBER_CHECK(size_ >= 0, "DistributedSampler: dataset size ", size_, " (expected >= 0)");
  const int r = options_.num_replicas;
  EMBER_CHECK(r >= 1, "DistributedSampler: num_replicas ", r, " (expected >= 1)");
  EMBER_CHECK(options_.rank >= 0 && options_.rank < r, "DistributedSampler: rank ", options_.rank,
              " is out of range (expected 0 .. ", r - 1, ")");
  num_samples_ = options_.drop_last ? size_ / r : (size_ + r - 1) / r;
}

void DistributedSampler::set_epoch(int64_t epoch) {
  EMBER_CHECK(epoch >= 0, "DistributedSampler::set_epoch: epoch ", epoch, " (expected >= 0)");
  epoch_ = epoch;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (options_.shuffle) {
    order = shuffled_indices(size_, options_.seed, epoch);
  } else {
    order.resize(static_cast<size_t>(size_));
    for (int64_t i = 0; i < size_; ++i) order[i] = i;
  }
  const int64_t total = total_size();
  // Padding repeats the order from its start, as often as needed (PyTorch's rule).
  for (int64_t i = 0; static_cast<int64_t>(order.size()) < total; ++i) order.push_back(order[i]);
  order.resize(static_cast<size_t>(total));
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = options_.rank; i < total; i += options_.num_replicas) mine.push_back(order[i]);
  return mine;
}

DistributedShard::DistributedShard(std::shared_ptr<Dataset> base, DistributedSamplerOptions options)
    : base_(std::move(base)), sampler_(base_ ? base_->size() : 0, options) {
  EMBER_CHECK(base_ != nullptr, "DistributedShard: the dataset is null");
  indices_ = sampler_.indices();
}

void DistributedShard::set_epoch(int64_t epoch) {
  sampler_.set_epoch(epoch);
  indices_ = sampler_.indices();
}

Example DistributedShard::get(int64_t index) const {
  EMBER_CHECK(index >= 0 && index < size(), "DistributedShard: index ", index,
              " is out of range (expected 0 .. ", size() - 1, ")");
  return base_->get(indices_[static_cast<size_t>(index)]);
}

Example DistributedShard::get_batch(std::span<const int64_t> indices) const {
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  for (int64_t i : indices) {
    EMBER_CHECK(i >= 0 && i < size(), "DistributedShard: index ", i,
                " is out of range (expected 0 .. ", size() - 1, ")");
    mapped.push_back(indices_[static_cast<size_t>(i)]);
  }
  return base_->get_batch(mapped);
}

}  // namespace ember::data
