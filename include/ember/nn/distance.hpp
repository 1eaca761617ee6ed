// ember/nn/distance.hpp — torch.nn.CosineSimilarity and torch.nn.PairwiseDistance: modules of
// two inputs over cosine_similarity and pairwise_distance (ember/ops_nn.hpp).
//
//   nn::CosineSimilarity cos(nn::CosineSimilarityOptions{.dim = 1});
//   Tensor s = cos->forward(a, b);                      // [N, D] x2 -> [N]
//   nn::PairwiseDistance dist;                          // p = 2
//   Tensor d = dist->forward(a, b);
#pragma once

#include <string>

#include "ember/nn/module.hpp"
#include "ember/ops_nn.hpp"

namespace ember::nn {

struct CosineSimilarityOptions {
  int64_t dim = 1;
  double eps = 1e-8;
  static constexpr auto fields() {
    using O = CosineSimilarityOptions;
    return std::tuple{field("dim", &O::dim), field("eps", &O::eps, opts::at_least(0))};
  }
};

/// cosine_similarity(x1, x2, dim, eps); forward(x) alone is refused (two inputs are needed).
class CosineSimilarityImpl : public ModuleImpl {
 public:
  explicit CosineSimilarityImpl(CosineSimilarityOptions options = {});
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x1, const Tensor& x2);
  std::string type_name() const override { return "CosineSimilarity"; }
  json options() const override { return options_json(options_); }

 private:
  CosineSimilarityOptions options_;
};
class CosineSimilarity : public ModuleHolder<CosineSimilarityImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct PairwiseDistanceOptions {
  double p = 2.0;
  double eps = 1e-6;
  bool keepdim = false;
  static constexpr auto fields() {
    using O = PairwiseDistanceOptions;
    return std::tuple{field("p", &O::p, opts::at_least(0)), field("eps", &O::eps),
                      field("keepdim", &O::keepdim)};
  }
};

/// pairwise_distance(x1, x2, p, eps, keepdim); forward(x) alone is refused.
class PairwiseDistanceImpl : public ModuleImpl {
 public:
  explicit PairwiseDistanceImpl(PairwiseDistanceOptions options = {});
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x1, const Tensor& x2);
  std::string type_name() const override { return "PairwiseDistance"; }
  json options() const override { return options_json(options_); }

 private:
  PairwiseDistanceOptions options_;
};
class PairwiseDistance : public ModuleHolder<PairwiseDistanceImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

}  // namespace ember::nn
