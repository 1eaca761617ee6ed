// src/data/preprocess.cpp — Standardizer: per-column mean and population std, and the
// transform that applies them.
#include "ember/data/preprocess.hpp"

#include <cmath>

#include "ember/autograd.hpp"
#include "ember/ops.hpp"

namespace ember::data {

Standardizer Standardizer::fit(const Tensor& x) {
  EMBER_CHECK(x.defined() && x.dim() == 2 && x.size(0) >= 1, "Standardizer::fit: inputs ",
              x.defined() ? x.shape().to_string() : "undefined", " (expected [N, F] with N >= 1)");
  EMBER_CHECK(is_floating(x.dtype()), "Standardizer::fit: dtype ", dtype_name(x.dtype()),
              " (expected a floating dtype)");
  NoGradGuard g;
  // f64 on the host: the statistics of a large f32 column keep their digits.
  const std::vector<double> v =
      x.detach().to(Device::cpu()).to(DType::f64).contiguous().to_vector<double>();
  const int64_t n = x.size(0), f = x.size(1);
  // A NaN or inf would make its column's statistics NaN and every standardised value NaN.
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < f; ++j)
      EMBER_CHECK(std::isfinite(v[i * f + j]), "Standardizer::fit: column ", j, " holds ",
                  std::isnan(v[i * f + j]) ? "NaN" : (v[i * f + j] > 0 ? "inf" : "-inf"),
                  " at row ", i,
                  " (expected finite values; drop or impute the missing ones first)");
  Standardizer s;
  s.mean.assign(static_cast<size_t>(f), 0.0);
  s.scale.assign(static_cast<size_t>(f), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < f; ++j) s.mean[j] += v[i * f + j];
  for (double& m : s.mean) m /= static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < f; ++j) {
      const double d = v[i * f + j] - s.mean[j];
      s.scale[j] += d * d;
    }
  for (double& sd : s.scale) {
    sd = std::sqrt(sd / static_cast<double>(n));
    if (!(sd > 0.0) || !std::isfinite(sd)) sd = 1.0;  // a constant column maps to 0
  }
  return s;
}

Tensor Standardizer::transform(const Tensor& x) const {
  EMBER_CHECK(x.defined() && x.dim() == 2 && x.size(1) == static_cast<int64_t>(mean.size()),
              "Standardizer::transform: inputs ", x.defined() ? x.shape().to_string() : "undefined",
              " (expected [N, ", mean.size(), "], the columns it was fitted on)");
  EMBER_CHECK(scale.size() == mean.size(), "Standardizer::transform: ", mean.size(), " means but ",
              scale.size(), " scales (expected as many)");
  const int64_t f = static_cast<int64_t>(mean.size());
  const TensorOptions o{.dtype = x.dtype(), .device = x.device()};
  const Tensor m = from_vector(mean, {1, f}, o);
  const Tensor sd = from_vector(scale, {1, f}, o);
  return (x - m) / sd;
}

}  // namespace ember::data
