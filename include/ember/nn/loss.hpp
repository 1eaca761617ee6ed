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
#include "ember/ops_nn.hpp"
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

/// Negative log-likelihood on log-probabilities [N, C] with class-index targets [N]; class
/// weights [C] optional.
class NLLLoss {
 public:
  explicit NLLLoss(Reduction reduction = Reduction::mean, int64_t ignore_index = -100,
                   Tensor weight = Tensor())
      : reduction_(reduction), ignore_index_(ignore_index), weight_(std::move(weight)) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const;
  Reduction reduction() const { return reduction_; }
  int64_t ignore_index() const { return ignore_index_; }
  const Tensor& weight() const { return weight_; }

 private:
  Reduction reduction_;
  int64_t ignore_index_;
  Tensor weight_;
};

/// Binary cross-entropy on logits (numerically stable), targets in [0, 1] of the input's
/// shape. pos_weight (optional, broadcast over the last dim) weighs the positive term.
class BCEWithLogitsLoss {
 public:
  explicit BCEWithLogitsLoss(Reduction reduction = Reduction::mean, Tensor pos_weight = Tensor(),
                             Tensor weight = Tensor())
      : reduction_(reduction), pos_weight_(std::move(pos_weight)), weight_(std::move(weight)) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const;
  Reduction reduction() const { return reduction_; }
  const Tensor& pos_weight() const { return pos_weight_; }
  const Tensor& weight() const { return weight_; }

 private:
  Reduction reduction_;
  Tensor pos_weight_;
  Tensor weight_;
};

/// The other losses of torch.nn, each an options struct (PyTorch's defaults) and a callable
/// over the functional loss of the same name (ops.hpp has the formulas):
///   nn::SmoothL1Loss loss({.beta = 0.5});   Tensor l = loss(pred, target);
struct L1LossOptions {
  Reduction reduction = Reduction::mean;
};
struct SmoothL1LossOptions {
  Reduction reduction = Reduction::mean;
  double beta = 1.0;
};
struct HuberLossOptions {
  Reduction reduction = Reduction::mean;
  double delta = 1.0;
};
struct KLDivLossOptions {
  Reduction reduction = Reduction::mean;
  bool log_target = false;
};
struct BCELossOptions {
  Reduction reduction = Reduction::mean;
  Tensor weight = Tensor();
};
struct MarginRankingLossOptions {
  double margin = 0.0;
  Reduction reduction = Reduction::mean;
};
struct TripletMarginLossOptions {
  double margin = 1.0;
  double p = 2.0;
  double eps = 1e-6;
  bool swap = false;
  Reduction reduction = Reduction::mean;
};
struct CosineEmbeddingLossOptions {
  double margin = 0.0;
  Reduction reduction = Reduction::mean;
};
struct PoissonNLLLossOptions {
  bool log_input = true;
  bool full = false;
  double eps = 1e-8;
  Reduction reduction = Reduction::mean;
};
struct CTCLossOptions {
  int64_t blank = 0;
  Reduction reduction = Reduction::mean;
  bool zero_infinity = false;
};

// Issue 32's losses (ember/ops_nn.hpp has the formulas).
struct MultiLabelMarginLossOptions {
  Reduction reduction = Reduction::mean;
};
struct MultiLabelSoftMarginLossOptions {
  Tensor weight = Tensor();
  Reduction reduction = Reduction::mean;
};
struct MultiMarginLossOptions {
  int64_t p = 1;
  double margin = 1.0;
  Tensor weight = Tensor();
  Reduction reduction = Reduction::mean;
};
struct HingeEmbeddingLossOptions {
  double margin = 1.0;
  Reduction reduction = Reduction::mean;
};
struct SoftMarginLossOptions {
  Reduction reduction = Reduction::mean;
};
/// GaussianNLLLoss is called as loss(input, target, var).
struct GaussianNLLLossOptions {
  bool full = false;
  double eps = 1e-6;
  Reduction reduction = Reduction::mean;
};
/// distance_function: pairwise_distance when empty.
struct TripletMarginWithDistanceLossOptions {
  DistanceFunction distance_function = nullptr;
  double margin = 1.0;
  bool swap = false;
  Reduction reduction = Reduction::mean;
};

/// A loss module of two operands (input, target).
template <typename Options, Tensor (*Fn)(const Tensor&, const Tensor&, const Options&)>
class PairLoss {
 public:
  explicit PairLoss(Options options = {}) : options_(std::move(options)) {}
  Tensor operator()(const Tensor& input, const Tensor& target) const {
    return Fn(input, target, options_);
  }
  const Options& options() const { return options_; }

 private:
  Options options_;
};
/// A loss module of three operands (x1, x2, target) or (anchor, positive, negative).
template <typename Options,
          Tensor (*Fn)(const Tensor&, const Tensor&, const Tensor&, const Options&)>
class TripleLoss {
 public:
  explicit TripleLoss(Options options = {}) : options_(std::move(options)) {}
  Tensor operator()(const Tensor& a, const Tensor& b, const Tensor& c) const {
    return Fn(a, b, c, options_);
  }
  const Options& options() const { return options_; }

 private:
  Options options_;
};

namespace loss_fns {
Tensor l1(const Tensor& a, const Tensor& b, const L1LossOptions& o);
Tensor smooth_l1(const Tensor& a, const Tensor& b, const SmoothL1LossOptions& o);
Tensor huber(const Tensor& a, const Tensor& b, const HuberLossOptions& o);
Tensor kl_div(const Tensor& a, const Tensor& b, const KLDivLossOptions& o);
Tensor bce(const Tensor& a, const Tensor& b, const BCELossOptions& o);
Tensor poisson_nll(const Tensor& a, const Tensor& b, const PoissonNLLLossOptions& o);
Tensor margin_ranking(const Tensor& a, const Tensor& b, const Tensor& y,
                      const MarginRankingLossOptions& o);
Tensor triplet_margin(const Tensor& a, const Tensor& p, const Tensor& n,
                      const TripletMarginLossOptions& o);
Tensor cosine_embedding(const Tensor& a, const Tensor& b, const Tensor& y,
                        const CosineEmbeddingLossOptions& o);
Tensor multilabel_margin(const Tensor& a, const Tensor& b, const MultiLabelMarginLossOptions& o);
Tensor multilabel_soft_margin(const Tensor& a, const Tensor& b,
                              const MultiLabelSoftMarginLossOptions& o);
Tensor multi_margin(const Tensor& a, const Tensor& b, const MultiMarginLossOptions& o);
Tensor hinge_embedding(const Tensor& a, const Tensor& b, const HingeEmbeddingLossOptions& o);
Tensor soft_margin(const Tensor& a, const Tensor& b, const SoftMarginLossOptions& o);
Tensor gaussian_nll(const Tensor& input, const Tensor& target, const Tensor& var,
                    const GaussianNLLLossOptions& o);
Tensor triplet_margin_with_distance(const Tensor& a, const Tensor& p, const Tensor& n,
                                    const TripletMarginWithDistanceLossOptions& o);
}  // namespace loss_fns

using L1Loss = PairLoss<L1LossOptions, loss_fns::l1>;
using SmoothL1Loss = PairLoss<SmoothL1LossOptions, loss_fns::smooth_l1>;
using HuberLoss = PairLoss<HuberLossOptions, loss_fns::huber>;
using KLDivLoss = PairLoss<KLDivLossOptions, loss_fns::kl_div>;
using BCELoss = PairLoss<BCELossOptions, loss_fns::bce>;
using PoissonNLLLoss = PairLoss<PoissonNLLLossOptions, loss_fns::poisson_nll>;
using MarginRankingLoss = TripleLoss<MarginRankingLossOptions, loss_fns::margin_ranking>;
using TripletMarginLoss = TripleLoss<TripletMarginLossOptions, loss_fns::triplet_margin>;
using CosineEmbeddingLoss = TripleLoss<CosineEmbeddingLossOptions, loss_fns::cosine_embedding>;
using MultiLabelMarginLoss = PairLoss<MultiLabelMarginLossOptions, loss_fns::multilabel_margin>;
using MultiLabelSoftMarginLoss =
    PairLoss<MultiLabelSoftMarginLossOptions, loss_fns::multilabel_soft_margin>;
using MultiMarginLoss = PairLoss<MultiMarginLossOptions, loss_fns::multi_margin>;
using HingeEmbeddingLoss = PairLoss<HingeEmbeddingLossOptions, loss_fns::hinge_embedding>;
using SoftMarginLoss = PairLoss<SoftMarginLossOptions, loss_fns::soft_margin>;
using GaussianNLLLoss = TripleLoss<GaussianNLLLossOptions, loss_fns::gaussian_nll>;
using TripletMarginWithDistanceLoss =
    TripleLoss<TripletMarginWithDistanceLossOptions, loss_fns::triplet_margin_with_distance>;

/// CTC over log_probs [T, N, C] with targets and the two length tensors (ctc_loss).
class CTCLoss {
 public:
  explicit CTCLoss(CTCLossOptions options = {}) : options_(options) {}
  Tensor operator()(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                    const Tensor& target_lengths) const {
    return ctc_loss(log_probs, targets, input_lengths, target_lengths, options_.blank,
                    options_.reduction, options_.zero_infinity);
  }
  const CTCLossOptions& options() const { return options_; }

 private:
  CTCLossOptions options_;
};

}  // namespace ember::nn
