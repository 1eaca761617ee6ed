// ember/nn/loss.hpp — loss modules: small callable objects holding a loss's options and
// wrapping the functional losses of ops.hpp (PyTorch's nn.MSELoss, nn.CrossEntropyLoss,
// nn.NLLLoss, nn.BCEWithLogitsLoss). They have no parameters.
//
//   nn::CrossEntropyLoss criterion({.ignore_index = 0, .label_smoothing = 0.1});
//   Tensor loss = criterion(logits, labels);    // logits [N, C], labels [N] (i64)
//   loss.backward();
#pragma once

#include <string>
#include <utility>

#include "ember/ops.hpp"
#include "ember/tensor.hpp"

namespace ember::nn {

/// "mean" | "sum" | "none" → Reduction; anything else is an ember::Error naming the choices.
Reduction parse_reduction(const std::string& name);
/// The inverse of parse_reduction: "mean", "sum" or "none".
std::string reduction_name(Reduction reduction);

/// Mean squared error: reduce((input - target)²). Shapes must match.
class MSELoss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::mean) : reduction_(reduction) {}
  explicit MSELoss(const std::string& reduction) : MSELoss(parse_reduction(reduction)) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const;
  Reduction reduction() const { return reduction_; }

 private:
  Reduction reduction_;
};

/// Softmax cross-entropy on logits [N, C] (or [C], or [N, C, d...]) with class-index targets
/// (i64; ignore_index skipped, mean over the rest) or class-probability targets (float, the
/// input's shape; mean over N). label_smoothing mixes the target with the uniform distribution.
class CrossEntropyLoss {
 public:
  CrossEntropyLoss() = default;
  explicit CrossEntropyLoss(CrossEntropyOptions options);
  Tensor operator()(const Tensor& input, const Tensor& target) const;
  const CrossEntropyOptions& options() const { return options_; }

 private:
  CrossEntropyOptions options_;
};

/// Negative log-likelihood on log-probabilities [N, C] with class-index targets [N].
class NLLLoss {
 public:
  explicit NLLLoss(Reduction reduction = Reduction::mean, int64_t ignore_index = -100)
      : reduction_(reduction), ignore_index_(ignore_index) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const;
  Reduction reduction() const { return reduction_; }
  int64_t ignore_index() const { return ignore_index_; }

 private:
  Reduction reduction_;
  int64_t ignore_index_;
};

/// Binary cross-entropy on logits (numerically stable), targets in [0, 1] of the input's
/// shape. pos_weight (optional, broadcast over the last dim) weighs the positive term.
class BCEWithLogitsLoss {
 public:
  explicit BCEWithLogitsLoss(Reduction reduction = Reduction::mean, Tensor pos_weight = Tensor())
      : reduction_(reduction), pos_weight_(std::move(pos_weight)) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const;
  Reduction reduction() const { return reduction_; }
  const Tensor& pos_weight() const { return pos_weight_; }

 private:
  Reduction reduction_;
  Tensor pos_weight_;
};

}  // namespace ember::nn
