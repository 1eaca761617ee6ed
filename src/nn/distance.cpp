// src/nn/distance.cpp — CosineSimilarity and PairwiseDistance (ember/nn/distance.hpp). PyTorch
// prints both with no options: "CosineSimilarity()".
#include "ember/nn/distance.hpp"

namespace ember::nn {

CosineSimilarityImpl::CosineSimilarityImpl(CosineSimilarityOptions o) : options_(o) {
  check_options(o, "CosineSimilarity");
}

Tensor CosineSimilarityImpl::forward(const Tensor&) {
  detail::throw_error("CosineSimilarity: forward needs two inputs (call forward(x1, x2))");
}

Tensor CosineSimilarityImpl::forward(const Tensor& x1, const Tensor& x2) {
  return cosine_similarity(x1, x2, options_.dim, options_.eps);
}

PairwiseDistanceImpl::PairwiseDistanceImpl(PairwiseDistanceOptions o) : options_(o) {
  check_options(o, "PairwiseDistance");
}

Tensor PairwiseDistanceImpl::forward(const Tensor&) {
  detail::throw_error("PairwiseDistance: forward needs two inputs (call forward(x1, x2))");
}

Tensor PairwiseDistanceImpl::forward(const Tensor& x1, const Tensor& x2) {
  return pairwise_distance(x1, x2, options_.p, options_.eps, options_.keepdim);
}

}  // namespace ember::nn
