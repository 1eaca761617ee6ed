// ember/data/preprocess.hpp — input scaling learnt on training data and applied unchanged at
// prediction time (sklearn's StandardScaler: mean_, scale_, fit, transform).
//
//   data::Standardizer s = data::Standardizer::fit(train_x);   // per-column mean and std
//   Tensor a = s.transform(train_x), b = s.transform(test_x);  // the training statistics
//
// `ember train --standardize` stores mean and scale in the saved model's metadata and
// `ember predict` applies them (docs/data.md).
#pragma once

#include <vector>

#include "ember/tensor.hpp"

namespace ember::data {

/// x -> (x - mean) / scale, column by column over the last dim of [N, F] inputs.
struct Standardizer {
  std::vector<double> mean{};   // F column means
  std::vector<double> scale{};  // F population standard deviations (1 where a column is constant)

  /// Per-column mean and population standard deviation of `x` ([N, F], N >= 1, floating).
  /// A constant column gets scale 1, so it maps to 0 instead of dividing by 0.
  static Standardizer fit(const Tensor& x);
  /// (x - mean) / scale in x's dtype on x's device. Throws when x is not [N, F] with F equal
  /// to mean.size() (naming both). Example: s.transform(rows)
  Tensor transform(const Tensor& x) const;
  /// F, the number of columns it was fitted on (0 when empty).
  size_t features() const { return mean.size(); }
};

}  // namespace ember::data
