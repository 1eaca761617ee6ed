// src/ops/loss_margin.cpp — issue 32's losses (the margin losses, the soft-margin and Gaussian
// likelihood losses, the triplet loss with any distance) and the distances (cosine similarity,
// pairwise distance, pdist), declared in include/ember/ops_nn.hpp. All are composites of
// ember's primitives, computed on the inputs' device (class targets are range-checked on the
// host only for CPU tensors, as src/ops/loss.cpp does), so their gradients are the
// primitives'.
#include <cmath>
#include <vector>

#include "ember/ops_nn.hpp"
#include "ops/common.hpp"

namespace ember {

namespace {

void check_reduction(Op op, Reduction r) {
  EMBER_CHECK(r != Reduction::batchmean, op_name(op),
              ": reduction batchmean is kl_div's only (expected mean, sum or none)");
}

Tensor reduced(const Tensor& per, Reduction r) {
  if (r == Reduction::sum) return sum(per);
  if (r == Reduction::mean) return mean(per);
  return per;
}

using ops::scalar_like;

// The checks every loss here opens with: input's dtype, a defined second operand on its
// device, and a reduction other than batchmean.
void check_loss(Op op, const Tensor& input, const Tensor& other, const char* what,
                Reduction reduction) {
  ops::check_supported(op, input);
  ops::check_defined(op_name(op), other, what);
  ops::check_same_device(op_name(op), input, other);
  check_reduction(op, reduction);
}

void check_same_shape(Op op, const Tensor& input, const Tensor& other, const char* what) {
  EMBER_CHECK(input.shape() == other.shape(), op_name(op), ": input shape ",
              input.shape().to_string(), " and ", what, " shape ", other.shape().to_string(),
              " differ (expected equal shapes)");
}

// Class-index targets [N] (i64/i32) for scores [N, C]: every label in [0, C) (read on the
// host for CPU tensors). Returns them as i64.
Tensor class_targets(Op op, const Tensor& scores, const Tensor& target) {
  ops::check_index_dtype(op_name(op), target);
  EMBER_CHECK(target.dim() == 1 && target.shape()[0] == scores.shape()[0], op_name(op),
              ": target shape ", target.shape().to_string(), " for input shape ",
              scores.shape().to_string(), " (expected [", scores.shape()[0], "])");
  Tensor t = target.to(DType::i64);
  if (!t.device().is_cpu()) return t;
  const int64_t classes = scores.shape()[1];
  const std::vector<int64_t> v = t.to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i)
    EMBER_CHECK(v[i] >= 0 && v[i] < classes, op_name(op), ": target ", v[i], " at position ", i,
                " is out of range (expected a class in [0, ", classes, "))");
  return t;
}

void check_class_weight(Op op, const Tensor& weight, const Tensor& input, int64_t classes) {
  if (!weight.defined()) return;
  ops::check_same_dtype(op_name(op), input, weight);
  ops::check_same_device(op_name(op), input, weight);
  EMBER_CHECK(weight.dim() == 1 && weight.shape()[0] == classes, op_name(op), ": weight shape ",
              weight.shape().to_string(), " (expected one weight per class: [", classes, "])");
}

}  // namespace

Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (const auto c = ops::autocast(Op::multilabel_margin_loss, {&input}))
    return multilabel_margin_loss(c[0], target, reduction);
  const ops::UserOp user(Op::multilabel_margin_loss, {&input, &target});
  check_loss(Op::multilabel_margin_loss, input, target, "target", reduction);
  ops::check_index_dtype("multilabel_margin_loss", target);
  EMBER_CHECK(input.dim() <= 2 && target.shape() == input.shape(),
              "multilabel_margin_loss: input shape ", input.shape().to_string(),
              " and target shape ", target.shape().to_string(),
              " (expected equal shapes [N, C] or [C])");
  const bool single = input.dim() < 2;
  const Tensor x = input.dim() == 2 ? input : input.reshape({1, -1});
  Tensor t = target.to(DType::i64).reshape(x.shape());
  const int64_t classes = x.shape()[1];
  if (t.device().is_cpu()) {
    const std::vector<int64_t> v = t.to_vector<int64_t>();
    for (size_t i = 0; i < v.size(); ++i)
      EMBER_CHECK(v[i] >= -1 && v[i] < classes, "multilabel_margin_loss: target ", v[i],
                  " at position ", i, " (expected class indices in [0, ", classes,
                  "), ended by -1)");
  }
  const TensorOptions idx{.dtype = DType::i64, .device = x.device()};
  // Label j counts while no -1 came before it (a running product of "not -1").
  Tensor valid = gt(cumprod(ne(t, -1.0).to(DType::i64), 1), 0.0);
  Tensor safe = where(valid, t, zeros(Shape{}, idx));
  // is_target[n, c]: c is one of row n's labels.
  Tensor classes_row = arange(static_cast<double>(classes), idx).reshape({1, 1, classes});
  Tensor is_target = any(logical_and(eq(safe.unsqueeze(2), classes_row), valid.unsqueeze(2)), {1});
  Tensor picked = gather(x, 1, safe);                               // x[y_j], [N, J]
  Tensor hinge = relu(1.0 - picked.unsqueeze(2) + x.unsqueeze(1));  // [N, J, C]
  Tensor mask = logical_and(valid.unsqueeze(2), logical_not(is_target).unsqueeze(1));
  Tensor per = sum(where(mask, hinge, scalar_like(hinge, 0.0)), {1, 2}) / double(classes);
  if (single && reduction == Reduction::none) return per.reshape(Shape{});
  return reduced(per, reduction);
}

Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                                   Reduction reduction) {
  if (const auto c = ops::autocast(Op::multilabel_soft_margin_loss, {&input, &target, &weight}))
    return multilabel_soft_margin_loss(c[0], c[1], c[2], reduction);
  const ops::UserOp user(Op::multilabel_soft_margin_loss, {&input, &target, &weight});
  check_loss(Op::multilabel_soft_margin_loss, input, target, "target", reduction);
  ops::check_same_dtype("multilabel_soft_margin_loss", input, target);
  check_same_shape(Op::multilabel_soft_margin_loss, input, target, "target");
  EMBER_CHECK(input.dim() >= 1, "multilabel_soft_margin_loss: input shape ",
              input.shape().to_string(), " (expected [N, C] or [C])");
  const int64_t classes = input.size(-1);
  Tensor per = neg(target * logsigmoid(input) + (1.0 - target) * logsigmoid(neg(input)));
  if (weight.defined()) {
    ops::check_same_dtype("multilabel_soft_margin_loss", input, weight);
    ops::check_same_device("multilabel_soft_margin_loss", input, weight);
    broadcast_shapes(weight.shape(), input.shape(), "multilabel_soft_margin_loss");
    per = per * weight;
  }
  per = sum(per, {-1}) / double(classes);
  return reduced(per, reduction);
}

Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p, double margin,
                         const Tensor& weight, Reduction reduction) {
  if (const auto c = ops::autocast(Op::multi_margin_loss, {&input, &weight}))
    return multi_margin_loss(c[0], target, p, margin, c[1], reduction);
  const ops::UserOp user(Op::multi_margin_loss, {&input, &target, &weight});
  check_loss(Op::multi_margin_loss, input, target, "target", reduction);
  EMBER_CHECK(p == 1 || p == 2, "multi_margin_loss: p ", p, " (expected 1 or 2)");
  EMBER_CHECK(input.dim() >= 1 && input.dim() <= 2, "multi_margin_loss: input shape ",
              input.shape().to_string(), " (expected [N, C] or [C])");
  const bool single = input.dim() == 1;
  const Tensor x = single ? input.unsqueeze(0) : input;
  const int64_t classes = x.shape()[1];
  EMBER_CHECK(!single || target.numel() == 1, "multi_margin_loss: target shape ",
              target.shape().to_string(), " for input shape ", input.shape().to_string(),
              " (expected one class index)");
  Tensor t = class_targets(Op::multi_margin_loss, x, single ? target.reshape({1}) : target);
  check_class_weight(Op::multi_margin_loss, weight, x, classes);
  Tensor picked = gather(x, 1, t.unsqueeze(1));  // x[y], [N, 1]
  Tensor h = relu(margin - picked + x);
  if (p == 2) h = h * h;
  if (weight.defined()) h = h * index_select(weight, 0, t).unsqueeze(1);
  Tensor classes_row =
      arange(static_cast<double>(classes), {.dtype = DType::i64, .device = x.device()})
          .reshape({1, classes});
  Tensor own = eq(t.unsqueeze(1), classes_row);  // i == y adds nothing
  Tensor per = sum(where(own, scalar_like(h, 0.0), h), {1}) / double(classes);
  if (single && reduction == Reduction::none) return per.reshape(target.shape());
  return reduced(per, reduction);
}

Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin,
                            Reduction reduction) {
  if (const auto c = ops::autocast(Op::hinge_embedding_loss, {&input, &target}))
    return hinge_embedding_loss(c[0], c[1], margin, reduction);
  const ops::UserOp user(Op::hinge_embedding_loss, {&input, &target});
  check_loss(Op::hinge_embedding_loss, input, target, "target", reduction);
  broadcast_shapes(input.shape(), target.shape(), "hinge_embedding_loss");
  const Tensor t = target.to(input.dtype());
  Tensor zero = scalar_like(input, 0.0);
  Tensor per =
      where(ne(t, 1.0), clamp_min(margin - input, 0.0), zero) + where(ne(t, -1.0), input, zero);
  return reduced(per, reduction);
}

Tensor soft_margin_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (const auto c = ops::autocast(Op::soft_margin_loss, {&input, &target}))
    return soft_margin_loss(c[0], c[1], reduction);
  const ops::UserOp user(Op::soft_margin_loss, {&input, &target});
  check_loss(Op::soft_margin_loss, input, target, "target", reduction);
  ops::check_same_dtype("soft_margin_loss", input, target);
  check_same_shape(Op::soft_margin_loss, input, target, "target");
  // log(1 + exp(-y·x)), without overflow for large -y·x.
  return reduced(softplus(neg(target * input)), reduction);
}

Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var_in, bool full,
                         double eps, Reduction reduction) {
  if (const auto c = ops::autocast(Op::gaussian_nll_loss, {&input, &target, &var_in}))
    return gaussian_nll_loss(c[0], c[1], c[2], full, eps, reduction);
  const ops::UserOp user(Op::gaussian_nll_loss, {&input, &target, &var_in});
  check_loss(Op::gaussian_nll_loss, input, target, "target", reduction);
  ops::check_same_dtype("gaussian_nll_loss", input, target);
  ops::check_defined("gaussian_nll_loss", var_in, "var");
  ops::check_same_dtype("gaussian_nll_loss", input, var_in);
  ops::check_same_device("gaussian_nll_loss", input, var_in);
  check_same_shape(Op::gaussian_nll_loss, input, target, "target");
  EMBER_CHECK(eps >= 0.0, "gaussian_nll_loss: eps ", eps, " (expected eps >= 0)");
  Tensor var = var_in;
  if (var.shape() != input.shape()) {
    const Shape& in = input.shape();
    const Shape lead(std::vector<int64_t>(in.begin(), in.end() - (in.empty() ? 0 : 1)));
    const bool one_fewer = !in.empty() && var.shape() == lead;
    const bool last_one =
        !in.empty() && var.dim() == input.dim() && var.size(-1) == 1 &&
        Shape(std::vector<int64_t>(var.shape().begin(), var.shape().end() - 1)) == lead;
    EMBER_CHECK(one_fewer || last_one, "gaussian_nll_loss: var shape ", var.shape().to_string(),
                " for input shape ", in.to_string(),
                " (expected the input's shape, it without the last dim, or a last dim of 1)");
    if (one_fewer) var = var.unsqueeze(-1);
  }
  if (var.device().is_cpu()) {
    NoGradGuard no_grad;
    EMBER_CHECK(!any(lt(var, 0.0)).item<bool>(),
                "gaussian_nll_loss: var has negative entries (expected variances >= 0)");
  }
  // max(var, eps) with the gradient of var itself (PyTorch clamps under no_grad).
  Tensor clamped = var + (clamp_min(var, eps) - var).detach();
  Tensor diff = input - target;
  Tensor per = (log(clamped) + diff * diff / clamped) * 0.5;
  if (full) per = per + 0.5 * std::log(2.0 * M_PI);
  return reduced(per, reduction);
}

Tensor triplet_margin_with_distance_loss(const Tensor& anchor, const Tensor& positive,
                                         const Tensor& negative,
                                         const DistanceFunction& distance_function, double margin,
                                         bool swap, Reduction reduction) {
  if (const auto c =
          ops::autocast(Op::triplet_margin_with_distance_loss, {&anchor, &positive, &negative}))
    return triplet_margin_with_distance_loss(c[0], c[1], c[2], distance_function, margin, swap,
                                             reduction);
  const ops::UserOp user(Op::triplet_margin_with_distance_loss, {&anchor, &positive, &negative});
  const Op op = Op::triplet_margin_with_distance_loss;
  check_loss(op, anchor, positive, "positive", reduction);
  ops::check_defined(op_name(op), negative, "negative");
  ops::check_same_device(op_name(op), anchor, negative);
  EMBER_CHECK(margin > 0.0, op_name(op), ": margin ", margin, " (expected margin > 0)");
  EMBER_CHECK(anchor.dim() == positive.dim() && anchor.dim() == negative.dim(), op_name(op),
              ": anchor, positive and negative shapes ", anchor.shape().to_string(), ", ",
              positive.shape().to_string(), ", ", negative.shape().to_string(),
              " (expected the same number of dims)");
  const DistanceFunction d =
      distance_function ? distance_function
                        : [](const Tensor& a, const Tensor& b) { return pairwise_distance(a, b); };
  Tensor d_pos = d(anchor, positive), d_neg = d(anchor, negative);
  if (swap) d_neg = minimum(d_neg, d(positive, negative));
  return reduced(clamp_min(margin + d_pos - d_neg, 0.0), reduction);
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  if (const auto c = ops::autocast(Op::cosine_similarity, {&x1, &x2}))
    return cosine_similarity(c[0], c[1], dim, eps);
  const ops::UserOp user(Op::cosine_similarity, {&x1, &x2});
  ops::check_supported(Op::cosine_similarity, x1);
  ops::check_defined("cosine_similarity", x2, "x2");
  ops::check_same_dtype("cosine_similarity", x1, x2);
  ops::check_same_device("cosine_similarity", x1, x2);
  const Shape common = broadcast_shapes(x1.shape(), x2.shape(), "cosine_similarity");
  const int64_t rank = static_cast<int64_t>(common.size());
  EMBER_CHECK(dim >= -std::max<int64_t>(rank, 1) && dim < std::max<int64_t>(rank, 1),
              "cosine_similarity: dim ", dim, " for inputs of shape ", common.to_string(),
              " (expected a dim in [", -std::max<int64_t>(rank, 1), ", ",
              std::max<int64_t>(rank, 1), "))");
  const Tensor a = x1.expand(common), b = x2.expand(common);
  // Each side divided by its norm clamped at eps (the clamp passes the gradient through, as
  // torch 2.x's in-place clamp under no_grad does).
  auto unit = [&](const Tensor& v) {
    Tensor n = norm(v, 2.0, {dim}, true);
    return v / (n + (clamp_min(n, eps) - n).detach());
  };
  return sum(unit(a) * unit(b), {dim});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  if (const auto c = ops::autocast(Op::pairwise_distance, {&x1, &x2}))
    return pairwise_distance(c[0], c[1], p, eps, keepdim);
  const ops::UserOp user(Op::pairwise_distance, {&x1, &x2});
  ops::check_supported(Op::pairwise_distance, x1);
  ops::check_defined("pairwise_distance", x2, "x2");
  ops::check_same_dtype("pairwise_distance", x1, x2);
  ops::check_same_device("pairwise_distance", x1, x2);
  EMBER_CHECK(x1.dim() >= 1 || x2.dim() >= 1, "pairwise_distance: input shapes ",
              x1.shape().to_string(), " and ", x2.shape().to_string(),
              " (expected at least one dim to take the distance over)");
  EMBER_CHECK(p >= 0.0, "pairwise_distance: p ", p, " (expected p >= 0)");
  broadcast_shapes(x1.shape(), x2.shape(), "pairwise_distance");
  return norm(x1 - x2 + eps, p, {-1}, keepdim);
}

Tensor pdist(const Tensor& input, double p) {
  if (const auto c = ops::autocast(Op::pdist, {&input})) return pdist(c[0], p);
  const ops::UserOp user(Op::pdist, {&input});
  ops::check_supported(Op::pdist, input);
  EMBER_CHECK(input.dim() == 2, "pdist: input shape ", input.shape().to_string(),
              " (expected a 2-D [N, M] set of rows)");
  EMBER_CHECK(p >= 0.0, "pdist: p ", p, " (expected p >= 0)");
  const int64_t n = input.shape()[0];
  std::vector<int64_t> first, second;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) {
      first.push_back(i);
      second.push_back(j);
    }
  const int64_t pairs = static_cast<int64_t>(first.size());
  if (pairs == 0) return zeros({0}, {.dtype = input.dtype(), .device = input.device()});
  Tensor a = index_select(input, 0, from_vector<int64_t>(first, {pairs}).to(input.device()));
  Tensor b = index_select(input, 0, from_vector<int64_t>(second, {pairs}).to(input.device()));
  return norm(a - b, p, {1});
}

}  // namespace ember
