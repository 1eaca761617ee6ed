// src/ops/loss.cpp — losses: mse, cross-entropy (logits with class indices or
// probabilities; on probabilities as ggmlR's ag_cross_entropy), nll, bce_with_logits.
// Cross-entropy with class indices is one fused backend kernel forward and one backward
// (softmax, pick, smoothing, ignore_index and the reduction together; the labels are checked
// on the device, so a GPU step never waits for the host). The other losses are composites of
// primitives, so their gradients come from the primitives.
#include "ops/common.hpp"

namespace ember {

namespace {

Tensor reduce_loss(const Tensor& per_element, Reduction r) {
  switch (r) {
    case Reduction::none: return per_element;
    case Reduction::sum: return sum(per_element);
    case Reduction::mean: return mean(per_element);
  }
  return per_element;
}

// Validates class-index targets for [N, C] scores: dtype, device and shape.
void check_target_shape(const char* op, const Tensor& scores, const Tensor& target) {
  ops::check_defined(op, target, "target");
  EMBER_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32, op, ": target dtype ",
              dtype_name(target.dtype()),
              " (expected class indices as i64, or probabilities of the input's shape)");
  ops::check_same_device(op, scores, target);
  EMBER_CHECK(target.dim() == 1 && target.shape()[0] == scores.shape()[0], op, ": target shape ",
              target.shape().to_string(), " does not match input shape ",
              scores.shape().to_string(), " (expected [", scores.shape()[0], "])");
}

// check_target_shape, then every label in range (or equal to ignore_index) on the CPU; on a
// GPU the range is left to the device (the gather that picks the labels reports a bad one at
// the next synchronisation, Note [Deferred device errors]). Returns targets as i64 [N].
Tensor check_targets(const char* op, const Tensor& scores, const Tensor& target,
                     int64_t ignore_index) {
  check_target_shape(op, scores, target);
  Tensor t = target.to(DType::i64);
  if (!t.device().is_cpu()) return t;
  const int64_t classes = scores.shape()[1];
  const std::vector<int64_t> v = t.to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i)
    EMBER_CHECK(v[i] == ignore_index || (v[i] >= 0 && v[i] < classes), op, ": label ", v[i],
                " at position ", i, " is out of range for ", classes,
                " classes (expected labels in [0, ", classes, ") or ignore_index ", ignore_index,
                ")");
  return t;
}

// Scores [N, C, d1, ...] -> [N*d1*..., C]; targets [N, d1, ...] -> [N*d1*...].
void flatten_spatial(Tensor& scores, Tensor& target) {
  if (scores.dim() <= 2) return;
  Shape perm;
  perm.push_back(0);
  for (int i = 2; i < scores.dim(); ++i) perm.push_back(i);
  perm.push_back(1);
  const int64_t c = scores.shape()[1];
  scores = scores.permute(perm).reshape({-1, c});
  target = target.reshape({-1});
}

// -log_probs[i, target[i]] with ignored rows masked; returns (per-row loss, valid mask).
std::pair<Tensor, Tensor> picked_nll(const Tensor& log_probs, const Tensor& t,
                                     int64_t ignore_index) {
  Tensor valid = ne(t, full(Shape{}, static_cast<double>(ignore_index),
                            {.dtype = DType::i64, .device = t.device()}));
  Tensor safe = where(valid, t, zeros(Shape{}, {.dtype = DType::i64, .device = t.device()}));
  Tensor picked = gather(log_probs, 1, safe.unsqueeze(1)).squeeze(1);
  Tensor vf = valid.to(log_probs.dtype());
  // Masked with where, not a multiply by vf: with every row ignored the mean's gradient is
  // 1/0 = inf, and inf · 0 would write NaN into the weights; where passes 0 there (PyTorch).
  Tensor zero = zeros(Shape{}, {.dtype = log_probs.dtype(), .device = log_probs.device()});
  return {where(valid, neg(picked), zero), vf};
}

Tensor reduce_masked(const Tensor& per_row, const Tensor& valid, Reduction r) {
  if (r == Reduction::mean) return div(sum(per_row), sum(valid));
  return reduce_loss(per_row, r);
}

// Fused softmax cross-entropy of scores [N, C] against class indices t [N] (i64/i32): one
// backend kernel forward (per-row loss and logsumexp, then the reduction with the count of
// non-ignored rows, all on the device) and one backward from the saved logsumexp.
Tensor fused_cross_entropy(const Tensor& scores, const Tensor& t, const CrossEntropyOptions& o) {
  Tensor x = scores.contiguous(), tc = t.contiguous();
  const int64_t n = x.shape()[0];
  const Device dev = x.device();
  Tensor loss_rows = ops::make_tensor({n}, x.dtype(), dev);
  Tensor lse = ops::make_tensor({n}, x.dtype(), dev);
  Tensor total, count;
  if (o.reduction != Reduction::none) total = ops::make_tensor(Shape{}, x.dtype(), dev);
  if (o.reduction == Reduction::mean) count = ops::make_tensor(Shape{}, x.dtype(), dev);
  const backend::View none_view{};
  const backend::Backend& be = ops::backend_of(x);
  be.cross_entropy_forward(ops::view_of(loss_rows), ops::view_of(lse),
                           total.defined() ? ops::view_of(total) : none_view,
                           count.defined() ? ops::view_of(count) : none_view, ops::view_of(x),
                           ops::view_of(tc), o.ignore_index, o.label_smoothing);
  Tensor out = o.reduction == Reduction::none ? loss_rows : total;
  if (autograd::needs_grad(x))
    autograd::record(
        Op::cross_entropy, out, {&x},
        [o, sx = autograd::SavedTensor(x), st = autograd::SavedTensor(tc),
         sl = autograd::SavedTensor(lse),
         sc = count.defined() ? autograd::SavedTensor(count) : autograd::SavedTensor()](
            const Tensor& g, autograd::GradList& gi) {
          Tensor xs = sx.get(), ts = st.get(), ls = sl.get(), gc = g.contiguous();
          Tensor cs = sc.defined() ? sc.get() : Tensor();
          Tensor grad = ops::make_tensor(xs.shape(), xs.dtype(), xs.device());
          ops::backend_of(xs).cross_entropy_backward(
              ops::view_of(grad), ops::view_of(gc),
              cs.defined() ? ops::view_of(cs) : backend::View{}, ops::view_of(xs), ops::view_of(ts),
              ops::view_of(ls), o.ignore_index, o.label_smoothing);
          gi[0] = grad;
        });
  return out;
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  ops::check_supported(Op::mse_loss, input);
  ops::check_defined("mse_loss", target, "target");
  EMBER_CHECK(input.shape() == target.shape(), op_name(Op::mse_loss), ": input shape ",
              input.shape().to_string(), " and target shape ", target.shape().to_string(),
              " differ (expected equal shapes)");
  return reduce_loss(square(sub(input, target)), reduction);
}

Tensor cross_entropy_probs(const Tensor& probs, const Tensor& target, Reduction reduction) {
  ops::check_supported(Op::cross_entropy_probs, probs);
  ops::check_defined("cross_entropy_probs", target, "target");
  EMBER_CHECK(probs.shape() == target.shape() && probs.dim() >= 1, op_name(Op::cross_entropy_probs),
              ": input shape ", probs.shape().to_string(), " and target shape ",
              target.shape().to_string(), " (expected equal shapes [N, C])");
  Tensor per_row = neg(sum(mul(target, log(probs)), {-1}));
  if (reduction == Reduction::mean) return mean(per_row);
  return reduce_loss(per_row, reduction);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction,
                int64_t ignore_index) {
  ops::check_defined("nll_loss", log_probs);
  ops::check_supported(Op::nll_loss, log_probs, "log_probs");
  EMBER_CHECK(log_probs.dim() >= 2, op_name(Op::nll_loss), ": input shape ",
              log_probs.shape().to_string(), " (expected [N, C] or [N, C, ...])");
  Tensor scores = log_probs, t = target;
  const Shape none_shape = target.shape();
  flatten_spatial(scores, t);
  t = check_targets("nll_loss", scores, t, ignore_index);
  auto [per_row, valid] = picked_nll(scores, t, ignore_index);
  if (reduction == Reduction::none) return per_row.reshape(none_shape);
  return reduce_masked(per_row, valid, reduction);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, CrossEntropyOptions o) {
  ops::check_defined("cross_entropy", logits);
  ops::check_defined("cross_entropy", target, "target");
  ops::check_supported(Op::cross_entropy, logits, "logits");
  EMBER_CHECK(logits.dim() >= 1, op_name(Op::cross_entropy), ": input shape ",
              logits.shape().to_string(), " (expected [N, C] or [C])");
  EMBER_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0, op_name(Op::cross_entropy),
              ": label_smoothing ", o.label_smoothing, " (expected 0 <= label_smoothing <= 1)");
  if (logits.dim() == 1) {  // a single sample of C classes
    Tensor l = logits.unsqueeze(0);
    Tensor t = is_floating(target.dtype()) ? target.unsqueeze(0) : target.reshape({1});
    Tensor out = cross_entropy(l, t, o);
    return o.reduction == Reduction::none ? out.reshape(Shape{}) : out;
  }
  const int64_t classes = logits.shape()[1];
  const double eps = o.label_smoothing;
  if (is_floating(target.dtype())) {  // class probabilities
    EMBER_CHECK(target.shape() == logits.shape(), op_name(Op::cross_entropy),
                ": probability target shape ", target.shape().to_string(),
                " (expected the input's shape ", logits.shape().to_string(), ")");
    ops::check_same_dtype("cross_entropy", logits, target);
    Tensor tgt =
        eps > 0.0 ? add(mul(target, 1.0 - eps), eps / static_cast<double>(classes)) : target;
    Tensor per = neg(sum(mul(log_softmax(logits, 1), tgt), {1}));
    return reduce_loss(per, o.reduction);
  }
  Tensor scores = logits, t = target;
  const Shape none_shape = target.shape();
  ops::check_defined("cross_entropy", target, "target");
  EMBER_CHECK(target.dim() == logits.dim() - 1, op_name(Op::cross_entropy), ": target shape ",
              target.shape().to_string(), " does not match input shape ",
              logits.shape().to_string(), " (expected the input's shape without dim 1)");
  flatten_spatial(scores, t);
  check_target_shape("cross_entropy", scores, t);
  Tensor out = fused_cross_entropy(scores, t, o);
  return o.reduction == Reduction::none ? out.reshape(none_shape) : out;
}

Tensor bce_with_logits(const Tensor& logits, const Tensor& target, Reduction reduction,
                       const Tensor& pos_weight) {
  ops::check_defined("bce_with_logits", logits);
  ops::check_defined("bce_with_logits", target, "target");
  ops::check_supported(Op::bce_with_logits, logits, "logits");
  ops::check_same_dtype("bce_with_logits", logits, target);
  EMBER_CHECK(logits.shape() == target.shape(), op_name(Op::bce_with_logits), ": input shape ",
              logits.shape().to_string(), " and target shape ", target.shape().to_string(),
              " differ (expected equal shapes)");
  // log(1 + exp(-|x|)) + max(-x, 0) = softplus(-x), computed without overflow.
  Tensor softplus_neg = add(log(add(exp(neg(abs(logits))), 1.0)), relu(neg(logits)));
  Tensor loss;
  if (pos_weight.defined()) {
    // (1 - y)·x + (1 + (pw - 1)·y)·softplus(-x)
    Tensor lw = add(mul(mul(target, add(pos_weight, -1.0)), 1.0), 1.0);
    loss = add(mul(add(neg(target), 1.0), logits), mul(lw, softplus_neg));
  } else {
    loss = add(mul(add(neg(target), 1.0), logits), softplus_neg);
  }
  return reduce_loss(loss, reduction);
}

}  // namespace ember
