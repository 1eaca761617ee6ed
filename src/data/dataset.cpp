// src/data/dataset.cpp — Dataset's default get_batch and TensorDataset.
#include "ember/data/dataset.hpp"

#include <vector>

#include "ember/ops.hpp"

namespace ember::data {

Example Dataset::get_batch(std::span<const int64_t> indices) const {
  EMBER_CHECK(!indices.empty(), "Dataset::get_batch: no indices (expected at least one)");
  const int64_t n = size();
  std::vector<Tensor> inputs, targets;
  inputs.reserve(indices.size());
  targets.reserve(indices.size());
  for (const int64_t i : indices) {
    EMBER_CHECK(i >= 0 && i < n, "Dataset::get_batch: index ", i,
                " is out of range (expected 0 to ", n - 1, ")");
    Example e = get(i);
    EMBER_CHECK(e.input.defined(), "Dataset::get_batch: example ", i, " has no input");
    // Either every example has a target or none has.
    EMBER_CHECK(inputs.empty() || e.target.defined() == !targets.empty(),
                "Dataset::get_batch: example ", i,
                e.target.defined() ? " has a target but earlier examples have none"
                                   : " has no target but earlier examples have one");
    inputs.push_back(std::move(e.input));
    if (e.target.defined()) targets.push_back(std::move(e.target));
  }
  Example batch;
  batch.input = stack(inputs, 0);
  if (!targets.empty()) batch.target = stack(targets, 0);
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

}  // namespace ember::data
