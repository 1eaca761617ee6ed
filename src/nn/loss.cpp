// src/nn/loss.cpp — loss modules over the functional losses (src/ops/loss.cpp), which do the
// shape checks and carry the autograd rules.
#include "ember/nn/loss.hpp"

namespace ember::nn {

Reduction parse_reduction(const std::string& name) {
  if (name == "mean") return Reduction::mean;
  if (name == "sum") return Reduction::sum;
  if (name == "none") return Reduction::none;
  detail::throw_error(detail::concat("parse_reduction: reduction '", name,
                                     "' (expected \"mean\", \"sum\" or \"none\")"));
}

std::string reduction_name(Reduction reduction) {
  switch (reduction) {
    case Reduction::mean: return "mean";
    case Reduction::sum: return "sum";
    case Reduction::none: return "none";
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
  return nll_loss(input, target, reduction_, ignore_index_);
}

Tensor BCEWithLogitsLoss::operator()(const Tensor& input, const Tensor& target) const {
  return bce_with_logits(input, target, reduction_, pos_weight_);
}

}  // namespace ember::nn
