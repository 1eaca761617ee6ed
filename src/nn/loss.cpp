// src/nn/loss.cpp — loss modules over the functional losses (src/ops/loss.cpp), which do the
// shape checks and carry the autograd rules.
#include "ember/nn/loss.hpp"

namespace ember::nn {

Reduction parse_reduction(const std::string& name) {
  if (name == "mean") return Reduction::mean;
  if (name == "sum") return Reduction::sum;
  if (name == "none") return Reduction::none;
  if (name == "batchmean") return Reduction::batchmean;
  detail::throw_error(detail::concat("parse_reduction: reduction '", name,
                                     "' (expected \"mean\", \"sum\", \"none\" or \"batchmean\")"));
}

std::string reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::mean: return "mean";
    case Reduction::sum: return "sum";
    case Reduction::none: return "none";
    case Reduction::batchmean: return "batchmean";
  }
  EMBER_ASSERT(false, "unknown Reduction value");
  return "";
}

Tensor MSELoss::operator()(const Tensor& input, const Tensor& target) const {
  return mse_loss(input, target, reduction_);
}

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyOptions options) : options_(options) {
  EMBER_CHECK(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0,
              "CrossEntropyLoss: label_smoothing ", options.label_smoothing,
              " (expected 0 <= label_smoothing <= 1)");
}

Tensor CrossEntropyLoss::operator()(const Tensor& input, const Tensor& target) const {
  return cross_entropy(input, target, options_);
}

Tensor NLLLoss::operator()(const Tensor& input, const Tensor& target) const {
  return nll_loss(input, target, reduction_, ignore_index_, weight_);
}

Tensor BCEWithLogitsLoss::operator()(const Tensor& input, const Tensor& target) const {
  return bce_with_logits(input, target, reduction_, pos_weight_, weight_);
}

namespace loss_fns {
Tensor l1(const Tensor& a, const Tensor& b, const L1LossOptions& o) {
  return l1_loss(a, b, o.reduction);
}
Tensor smooth_l1(const Tensor& a, const Tensor& b, const SmoothL1LossOptions& o) {
  return smooth_l1_loss(a, b, o.reduction, o.beta);
}
Tensor huber(const Tensor& a, const Tensor& b, const HuberLossOptions& o) {
  return huber_loss(a, b, o.reduction, o.delta);
}
Tensor kl_div(const Tensor& a, const Tensor& b, const KLDivLossOptions& o) {
  return ember::kl_div(a, b, o.reduction, o.log_target);
}
Tensor bce(const Tensor& a, const Tensor& b, const BCELossOptions& o) {
  return binary_cross_entropy(a, b, o.reduction, o.weight);
}
Tensor poisson_nll(const Tensor& a, const Tensor& b, const PoissonNLLLossOptions& o) {
  return poisson_nll_loss(a, b, o.log_input, o.full, o.eps, o.reduction);
}
Tensor margin_ranking(const Tensor& a, const Tensor& b, const Tensor& y,
                      const MarginRankingLossOptions& o) {
  return margin_ranking_loss(a, b, y, o.margin, o.reduction);
}
Tensor triplet_margin(const Tensor& a, const Tensor& p, const Tensor& n,
                      const TripletMarginLossOptions& o) {
  return triplet_margin_loss(a, p, n, o.margin, o.p, o.eps, o.swap, o.reduction);
}
Tensor cosine_embedding(const Tensor& a, const Tensor& b, const Tensor& y,
                        const CosineEmbeddingLossOptions& o) {
  return cosine_embedding_loss(a, b, y, o.margin, o.reduction);
}
Tensor multilabel_margin(const Tensor& a, const Tensor& b, const MultiLabelMarginLossOptions& o) {
  return multilabel_margin_loss(a, b, o.reduction);
}
Tensor multilabel_soft_margin(const Tensor& a, const Tensor& b,
                              const MultiLabelSoftMarginLossOptions& o) {
  return multilabel_soft_margin_loss(a, b, o.weight, o.reduction);
}
Tensor multi_margin(const Tensor& a, const Tensor& b, const MultiMarginLossOptions& o) {
  return multi_margin_loss(a, b, o.p, o.margin, o.weight, o.reduction);
}
Tensor hinge_embedding(const Tensor& a, const Tensor& b, const HingeEmbeddingLossOptions& o) {
  return hinge_embedding_loss(a, b, o.margin, o.reduction);
}
Tensor soft_margin(const Tensor& a, const Tensor& b, const SoftMarginLossOptions& o) {
  return soft_margin_loss(a, b, o.reduction);
}
Tensor gaussian_nll(const Tensor& input, const Tensor& target, const Tensor& var,
                    const GaussianNLLLossOptions& o) {
  return gaussian_nll_loss(input, target, var, o.full, o.eps, o.reduction);
}
Tensor triplet_margin_with_distance(const Tensor& a, const Tensor& p, const Tensor& n,
                                    const TripletMarginWithDistanceLossOptions& o) {
  return triplet_margin_with_distance_loss(a, p, n, o.distance_function, o.margin, o.swap,
                                           o.reduction);
}
}  // namespace loss_fns

}  // namespace ember::nn
