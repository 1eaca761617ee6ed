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
//
// A multi-input example (a model whose forward takes several tensors, train::MultiInputImpl)
// carries its first input in `input` and the others in `extra_inputs`; MultiTensorDataset
// makes them from several [N, ...] tensors:
//   auto two = std::make_shared<data::MultiTensorDataset>(std::vector<Tensor>{xa, xb}, y);
//   two->get_batch(idx).inputs();                              // {xa rows, xb rows}
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ember/tensor.hpp"

namespace ember::data {

/// One example, or a batch of them (then every tensor leads with the batch dim).
/// `target` may be undefined for unlabelled data.
struct Example {
  Tensor input{};
  Tensor target{};
  /// The second and later inputs of a multi-input example (empty for one input).
  std::vector<Tensor> extra_inputs{};
  /// Every input in order: {input, extra_inputs...}.
  std::vector<Tensor> inputs() const;
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
  /// index (collate); override it when a whole batch can be gathered at once.
  virtual Example get_batch(std::span<const int64_t> indices) const;
  /// DataLoader calls it before it assembles any batch of epoch `epoch` (also when resuming
  /// mid-epoch), while no batch is being assembled. A dataset whose examples depend on the
  /// epoch (random augmentation: ImageFolder) records it; the default ignores it.
  virtual void begin_epoch(int64_t epoch) { (void)epoch; }
};

/// Stacks examples into a batch (what the default get_batch does with get(i)): every tensor
/// gains a leading batch dim. Throws when some examples have a target and others not, or
/// their input counts differ. Example: Example b = collate({ds.get(0), ds.get(1)});
Example collate(std::vector<Example> examples);

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

/// Examples are rows of several input tensors and one target tensor: example i is
/// {inputs[0][i], inputs[1][i], ...} with target targets[i] (PyTorch's TensorDataset(*tensors)).
/// Example: data::MultiTensorDataset ds({ids, dense}, labels);   // ids [N, 8], dense [N, 4]
class MultiTensorDataset : public Dataset {
 public:
  /// Throws when there is no input, a tensor is undefined or 0-d, or the first dims differ.
  /// An undefined `targets` makes an unlabelled dataset.
  MultiTensorDataset(std::vector<Tensor> inputs, Tensor targets);

  int64_t size() const override;
  Example get(int64_t index) const override;
  Example get_batch(std::span<const int64_t> indices) const override;

  const std::vector<Tensor>& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 private:
  std::vector<Tensor> inputs_;
  Tensor targets_;
};

}  // namespace ember::data
