// src/data/dataset.cpp — Dataset's default get_batch and TensorDataset.
#include "ember/data/dataset.hpp"

#include <vector>

#include "ember/ops.hpp"

namespace ember::data {

std::vector<Tensor> Example::inputs() const {
  std::vector<Tensor> all;
  all.reserve(1 + extra_inputs.size());
  all.push_back(input);
  all.insert(all.end(), extra_inputs.begin(), extra_inputs.end());
  return all;
}

Example Dataset::get_batch(std::span<const int64_t> indices) const {
  EMBER_CHECK(!indices.empty(), "Dataset::get_batch: no indices (expected at least one)");
  const int64_t n = size();
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (const int64_t i : indices) {
    EMBER_CHECK(i >= 0 && i < n, "Dataset::get_batch: index ", i,
                " is out of range (expected 0 to ", n - 1, ")");
    examples.push_back(get(i));
  }
  return collate(std::move(examples));
}

Example collate(std::vector<Example> examples) {
  EMBER_CHECK(!examples.empty(), "collate: no examples (expected at least one)");
  std::vector<Tensor> inputs, targets;
  std::vector<std::vector<Tensor>> extras;
  inputs.reserve(examples.size());
  targets.reserve(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    Example& e = examples[i];
    EMBER_CHECK(e.input.defined(), "collate: the batch's example ", i, " has no input");
    // Either every example has a target or none has.
    EMBER_CHECK(inputs.empty() || e.target.defined() == !targets.empty(),
                "collate: the batch's example ", i,
                e.target.defined() ? " has a target but earlier examples have none"
                                   : " has no target but earlier examples have one");
    // Every example has as many inputs as the first.
    EMBER_CHECK(inputs.empty() || e.extra_inputs.size() == extras.size(),
                "collate: the batch's example ", i, " has ", e.extra_inputs.size() + 1,
                " inputs but earlier examples have ", extras.size() + 1);
    if (inputs.empty()) extras.resize(e.extra_inputs.size());
    for (size_t k = 0; k < extras.size(); ++k) extras[k].push_back(std::move(e.extra_inputs[k]));
    inputs.push_back(std::move(e.input));
    if (e.target.defined()) targets.push_back(std::move(e.target));
  }
  Example batch;
  batch.input = stack(inputs, 0);
  if (!targets.empty()) batch.target = stack(targets, 0);
  for (const std::vector<Tensor>& column : extras) batch.extra_inputs.push_back(stack(column, 0));
  return batch;
}

namespace {
void check_rows(const Tensor& t, const char* what) {
  EMBER_CHECK(t.defined(), "TensorDataset: ", what, " tensor is undefined (expected a tensor)");
  EMBER_CHECK(t.dim() >= 1, "TensorDataset: ", what,
              " tensor is 0-d (expected a leading example dim)");
}
}  // namespace

TensorDataset::TensorDataset(Tensor inputs, Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  check_rows(inputs_, "inputs");
  check_rows(targets_, "targets");
  EMBER_CHECK(inputs_.size(0) == targets_.size(0), "TensorDataset: inputs shape ",
              inputs_.shape().to_string(), " and targets shape ", targets_.shape().to_string(),
              " have different first dims (got ", inputs_.size(0), " and ", targets_.size(0),
              ", expected equal)");
}

TensorDataset::TensorDataset(Tensor inputs) : inputs_(std::move(inputs)) {
  check_rows(inputs_, "inputs");
}

int64_t TensorDataset::size() const { return inputs_.size(0); }

Example TensorDataset::get(int64_t index) const {
  EMBER_CHECK(index >= 0 && index < size(), "TensorDataset::get: index ", index,
              " is out of range (expected 0 to ", size() - 1, ")");
  Example e;
  e.input = inputs_.select(0, index);
  if (targets_.defined()) e.target = targets_.select(0, index);
  return e;
}

Example TensorDataset::get_batch(std::span<const int64_t> indices) const {
  EMBER_CHECK(!indices.empty(), "TensorDataset::get_batch: no indices (expected at least one)");
  const std::vector<int64_t> rows(indices.begin(), indices.end());
  const int64_t count = static_cast<int64_t>(rows.size());
  // index_select names an out-of-range index and the valid range itself.
  Example batch;
  const Tensor index = from_vector(rows, {count}, {.device = inputs_.device()});
  batch.input = index_select(inputs_, 0, index);
  if (targets_.defined())
    batch.target = index_select(
        targets_, 0, targets_.device() == inputs_.device() ? index : index.to(targets_.device()));
  return batch;
}

// ---- MultiTensorDataset ----

MultiTensorDataset::MultiTensorDataset(std::vector<Tensor> inputs, Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  EMBER_CHECK(!inputs_.empty(), "MultiTensorDataset: no input tensors (expected at least one)");
  for (size_t k = 0; k < inputs_.size(); ++k) {
    const std::string what = "input " + std::to_string(k);
    check_rows(inputs_[k], what.c_str());
    EMBER_CHECK(inputs_[k].size(0) == inputs_[0].size(0), "MultiTensorDataset: input ", k,
                " shape ", inputs_[k].shape().to_string(), " and input 0 shape ",
                inputs_[0].shape().to_string(), " have different first dims (expected equal)");
  }
  if (targets_.defined()) {
    check_rows(targets_, "targets");
    EMBER_CHECK(targets_.size(0) == inputs_[0].size(0), "MultiTensorDataset: targets shape ",
                targets_.shape().to_string(), " and input 0 shape ", inputs_[0].shape().to_string(),
                " have different first dims (expected equal)");
  }
}

int64_t MultiTensorDataset::size() const { return inputs_[0].size(0); }

Example MultiTensorDataset::get(int64_t index) const {
  EMBER_CHECK(index >= 0 && index < size(), "MultiTensorDataset::get: index ", index,
              " is out of range (expected 0 to ", size() - 1, ")");
  Example e;
  e.input = inputs_[0].select(0, index);
  for (size_t k = 1; k < inputs_.size(); ++k) e.extra_inputs.push_back(inputs_[k].select(0, index));
  if (targets_.defined()) e.target = targets_.select(0, index);
  return e;
}

Example MultiTensorDataset::get_batch(std::span<const int64_t> indices) const {
  EMBER_CHECK(!indices.empty(),
              "MultiTensorDataset::get_batch: no indices (expected at least one)");
  const std::vector<int64_t> rows(indices.begin(), indices.end());
  const Tensor index = from_vector(rows, {static_cast<int64_t>(rows.size())});
  auto gather = [&](const Tensor& t) {
    return index_select(t, 0, t.device() == index.device() ? index : index.to(t.device()));
  };
  Example batch;
  batch.input = gather(inputs_[0]);
  for (size_t k = 1; k < inputs_.size(); ++k) batch.extra_inputs.push_back(gather(inputs_[k]));
  if (targets_.defined()) batch.target = gather(targets_);
  return batch;
}

}  // namespace ember::data
