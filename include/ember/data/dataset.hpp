// ember/data/dataset.hpp — the Dataset interface and TensorDataset (ARCHITECTURE §6).
//
// A Dataset hands out examples by index. DataLoader asks for whole batches through
// get_batch(), which by default stacks get(i); TensorDataset answers get_batch() with one
// index_select per tensor, the fast path used in training.
//
//   auto ds = std::make_shared<data::TensorDataset>(x, y);   // x [N, F], y [N]
//   data::Example e = ds->get(0);                             // e.input [F], e.target []
//   std::vector<int64_t> idx{3, 1, 4};
//   data::Example b = ds->get_batch(idx);                     // b.input [3, F], b.target [3]
#pragma once

#include <cstdint>
#include <span>

#include "ember/tensor.hpp"

namespace ember::data {

/// One example, or a batch of them (then both tensors lead with the batch dim).
/// `target` may be undefined for unlabelled data.
struct Example {
  Tensor input;
  Tensor target;
};

/// A source of examples indexed 0 .. size()-1.
///
/// DataLoader calls get_batch() from its prefetch thread, one call at a time; an
/// implementation must not depend on running on the caller's thread.
class Dataset {
 public:
  virtual ~Dataset() = default;

  /// Number of examples.
  virtual int64_t size() const = 0;
  /// Example `index` (0 <= index < size()).
  virtual Example get(int64_t index) const = 0;
  /// The examples at `indices` with a leading batch dim. The default stacks get(i) for each
  /// index; override it when a whole batch can be gathered at once.
  virtual Example get_batch(std::span<const int64_t> indices) const;
};

/// Examples are rows (first-dim slices) of `inputs` and `targets`.
/// Example: data::TensorDataset ds(images, labels);   // images [N, 784], labels [N]
class TensorDataset : public Dataset {
 public:
  /// Throws when a tensor is undefined or 0-d, or when the first dims differ (naming both shapes).
  TensorDataset(Tensor inputs, Tensor targets);
  /// An unlabelled dataset: examples have an undefined `target`.
  explicit TensorDataset(Tensor inputs);

  int64_t size() const override;
  /// Views of row `index` (no copy).
  Example get(int64_t index) const override;
  /// One index_select per tensor on the tensors' own device.
  Example get_batch(std::span<const int64_t> indices) const override;

  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor inputs_;
  Tensor targets_;
};

}  // namespace ember::data
