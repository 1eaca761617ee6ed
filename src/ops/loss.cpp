// src/ops/loss.cpp — losses: mse, cross-entropy (logits with class indices or
// probabilities; on probabilities as ggmlR's ag_cross_entropy), nll, bce_with_logits.
// Cross-entropy with class indices is one fused backend kernel forward and one backward
// (softmax, pick, smoothing, ignore_index and the reduction together; the labels are checked
// on the device, so a GPU step never waits for the host). The other losses are composites of
// primitives, so their gradients come from the primitives.
#include <cmath>
#include <limits>
#include <vector>

#include "ops/common.hpp"

namespace ember {

namespace {

Tensor reduce_loss(const Tensor& per_element, Reduction r) {
  switch (r) {
    case Reduction::none: return per_element;
    case Reduction::sum: return sum(per_element);
    case Reduction::mean: return mean(per_element);
    case Reduction::batchmean: break;
  }
  detail::throw_error("reduction batchmean is kl_div's only (expected mean, sum or none)");
}

// Every loss but kl_div refuses batchmean by name.
void check_reduction(Op op, Reduction r) {
  EMBER_CHECK(r != Reduction::batchmean, op_name(op),
              ": reduction batchmean is kl_div's only (expected mean, sum or none)");
}

// The two operands of an elementwise loss: defined, one dtype and device, equal shapes.
void check_pair(Op op, const Tensor& input, const Tensor& target, const char* what = "target") {
  const ops::OpScope op_scope(op, input);
  ops::check_supported(op, input);
  ops::check_defined(op_name(op), target, what);
  ops::check_same_dtype(op_name(op), input, target);
  ops::check_same_device(op_name(op), input, target);
  EMBER_CHECK(input.shape() == target.shape(), op_name(op), ": input shape ",
              input.shape().to_string(), " and ", what, " shape ", target.shape().to_string(),
              " differ (expected equal shapes)");
}

// Class weights [C] for C classes (optional): floating, the scores' dtype and device.
void check_class_weight(Op op, const Tensor& weight, const Tensor& scores, int64_t classes) {
  if (!weight.defined()) return;
  ops::check_same_dtype(op_name(op), scores, weight);
  ops::check_same_device(op_name(op), scores, weight);
  EMBER_CHECK(weight.dim() == 1 && weight.shape()[0] == classes, op_name(op), ": weight shape ",
              weight.shape().to_string(), " (expected one weight per class: [", classes, "])");
}

using ops::scalar_like;

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

// -w[t_i]·log_probs[i, t_i] with ignored rows masked; returns (per-row loss, the weight of
// each row: w[t_i], or 1, and 0 where ignored — the mean's divisor is their sum, as PyTorch).
std::pair<Tensor, Tensor> picked_nll(const Tensor& log_probs, const Tensor& t, int64_t ignore_index,
                                     const Tensor& weight = Tensor()) {
  Tensor valid = ne(t, full(Shape{}, static_cast<double>(ignore_index),
                            {.dtype = DType::i64, .device = t.device()}));
  Tensor safe = where(valid, t, zeros(Shape{}, {.dtype = DType::i64, .device = t.device()}));
  Tensor picked = gather(log_probs, 1, safe.unsqueeze(1)).squeeze(1);
  Tensor zero = zeros(Shape{}, {.dtype = log_probs.dtype(), .device = log_probs.device()});
  Tensor vf = valid.to(log_probs.dtype());
  Tensor loss = neg(picked);
  if (weight.defined()) {
    Tensor w = index_select(weight, 0, safe);
    vf = where(valid, w, zero);
    loss = loss * w;
  }
  // Masked with where, not a multiply by vf: with every row ignored the mean's gradient is
  // 1/0 = inf, and inf · 0 would write NaN into the weights; where passes 0 there (PyTorch).
  return {where(valid, loss, zero), vf};
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
  // 16-bit logits: losses in f32 (Note [Cross-entropy of 16-bit logits]).
  const DType acc = x.dtype() == DType::bf16 || x.dtype() == DType::f16 ? DType::f32 : x.dtype();
  Tensor loss_rows = ops::make_tensor({n}, acc, dev);
  Tensor lse = ops::make_tensor({n}, acc, dev);
  Tensor total, count;
  if (o.reduction != Reduction::none) total = ops::make_tensor(Shape{}, acc, dev);
  if (o.reduction == Reduction::mean) count = ops::make_tensor(Shape{}, acc, dev);
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
  if (const auto c = ops::autocast(Op::mse_loss, {&input, &target}))
    return mse_loss(c[0], c[1], reduction);
  const ops::OpScope op_scope(Op::mse_loss, input);
  ops::check_supported(Op::mse_loss, input);
  check_reduction(Op::mse_loss, reduction);
  ops::check_defined("mse_loss", target, "target");
  EMBER_CHECK(input.shape() == target.shape(), op_name(Op::mse_loss), ": input shape ",
              input.shape().to_string(), " and target shape ", target.shape().to_string(),
              " differ (expected equal shapes)");
  return reduce_loss(square(sub(input, target)), reduction);
}

Tensor cross_entropy_probs(const Tensor& probs, const Tensor& target, Reduction reduction) {
  if (const auto c = ops::autocast(Op::cross_entropy_probs, {&probs, &target}))
    return cross_entropy_probs(c[0], c[1], reduction);
  const ops::OpScope op_scope(Op::cross_entropy_probs, probs);
  ops::check_supported(Op::cross_entropy_probs, probs);
  check_reduction(Op::cross_entropy_probs, reduction);
  ops::check_defined("cross_entropy_probs", target, "target");
  EMBER_CHECK(probs.shape() == target.shape() && probs.dim() >= 1, op_name(Op::cross_entropy_probs),
              ": input shape ", probs.shape().to_string(), " and target shape ",
              target.shape().to_string(), " (expected equal shapes [N, C])");
  Tensor per_row = neg(sum(mul(target, log(probs)), {-1}));
  if (reduction == Reduction::mean) return mean(per_row);
  return reduce_loss(per_row, reduction);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction,
                int64_t ignore_index, const Tensor& weight) {
  const ops::UserOp user(Op::nll_loss, {&log_probs, &target});
  if (const auto c = ops::autocast(Op::nll_loss, {&log_probs, &weight}))
    return nll_loss(c[0], target, reduction, ignore_index, c[1]);
  ops::check_defined("nll_loss", log_probs);
  const ops::OpScope op_scope(Op::nll_loss, log_probs);
  ops::check_supported(Op::nll_loss, log_probs, "log_probs");
  check_reduction(Op::nll_loss, reduction);
  EMBER_CHECK(log_probs.dim() >= 2, op_name(Op::nll_loss), ": input shape ",
              log_probs.shape().to_string(), " (expected [N, C] or [N, C, ...])");
  Tensor scores = log_probs, t = target;
  const Shape none_shape = target.shape();
  flatten_spatial(scores, t);
  t = check_targets("nll_loss", scores, t, ignore_index);
  check_class_weight(Op::nll_loss, weight, scores, scores.shape()[1]);
  auto [per_row, valid] = picked_nll(scores, t, ignore_index, weight);
  if (reduction == Reduction::none) return per_row.reshape(none_shape);
  return reduce_masked(per_row, valid, reduction);
}

// Note [Cross-entropy of 16-bit logits]
// Autocast runs cross_entropy in f32, as PyTorch's: bf16 logits [B·T, vocab] are cast to f32,
// and their f32 gradient cast back (GPT-2: four passes over 3.3 GB, 4 of 48 ms a step, and
// 6.6 GB of peak memory). The cast up is exact and the fused kernel computes in f32 anyway, so
// on a GPU the kernels read the 16-bit logits themselves, compute every step in f32 (loss,
// lse and the loss's dtype f32, as the cast path gives), and write the gradient in the
// logits' dtype, rounded once as the cast back rounds it: bitwise the cast path's values,
// without the f32 copies. Only where the fused kernel would run (class indices, no class
// weights); everything else takes the cast.
static bool reads_half_logits(const Tensor& logits, const Tensor& target,
                              const CrossEntropyOptions& o) {
  return autocast_enabled() && logits.defined() && target.defined() && logits.device().is_cuda() &&
         (logits.dtype() == DType::bf16 || logits.dtype() == DType::f16) && logits.dim() >= 2 &&
         !is_floating(target.dtype()) && !o.weight.defined() &&
         autocast_policy(Op::cross_entropy) == AutocastPolicy::f32;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, CrossEntropyOptions o) {
  const bool half_logits = reads_half_logits(logits, target, o);
  if (!half_logits)
    if (const auto c = ops::autocast(Op::cross_entropy, {&logits, &target, &o.weight})) {
      o.weight = c[2];
      return cross_entropy(c[0], c[1], o);
    }
  ops::check_defined("cross_entropy", logits);
  ops::check_defined("cross_entropy", target, "target");
  const ops::OpScope op_scope(Op::cross_entropy, logits);
  if (!half_logits) ops::check_supported(Op::cross_entropy, logits, "logits");
  EMBER_CHECK(logits.dim() >= 1, op_name(Op::cross_entropy), ": input shape ",
              logits.shape().to_string(), " (expected [N, C] or [C])");
  EMBER_CHECK(o.label_smoothing >= 0.0 && o.label_smoothing <= 1.0, op_name(Op::cross_entropy),
              ": label_smoothing ", o.label_smoothing, " (expected 0 <= label_smoothing <= 1)");
  check_reduction(Op::cross_entropy, o.reduction);
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
    check_class_weight(Op::cross_entropy, o.weight, logits, classes);
    Tensor tgt =
        eps > 0.0 ? add(mul(target, 1.0 - eps), eps / static_cast<double>(classes)) : target;
    Tensor lp = log_softmax(logits, 1);
    if (o.weight.defined()) {  // w broadcast over dim 1; mean still divides by the rows
      Shape ws = Shape::filled(logits.dim(), 1);
      ws[1] = classes;
      lp = lp * o.weight.reshape(ws);
    }
    Tensor per = neg(sum(mul(lp, tgt), {1}));
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
  if (o.weight.defined()) {
    // Class weights: PyTorch's weighted form, -(1-ε)·w_t·logp_t - (ε/C)·Σ_c w_c·logp_c per
    // row, the mean divided by Σ w_t over the rows not ignored. A composite of log_softmax
    // and the weighted pick (the fused kernel has no weights).
    check_class_weight(Op::cross_entropy, o.weight, scores, classes);
    Tensor ti = check_targets("cross_entropy", scores, t, o.ignore_index);
    Tensor lp = log_softmax(scores, 1);
    auto [picked, wsum] = picked_nll(lp, ti, o.ignore_index, o.weight);
    Tensor per = picked;
    if (eps > 0.0) {
      Tensor valid = ne(ti, full(Shape{}, static_cast<double>(o.ignore_index),
                                 {.dtype = DType::i64, .device = ti.device()}));
      Tensor smooth = neg(sum(lp * o.weight.reshape({1, classes}), {1}));
      smooth = where(valid, smooth, zeros(Shape{}, {.dtype = lp.dtype(), .device = lp.device()}));
      per = picked * (1.0 - eps) + smooth * (eps / static_cast<double>(classes));
    }
    if (o.reduction == Reduction::none) return per.reshape(none_shape);
    return reduce_masked(per, wsum, o.reduction);
  }
  Tensor out = fused_cross_entropy(scores, t, o);
  return o.reduction == Reduction::none ? out.reshape(none_shape) : out;
}

Tensor bce_with_logits(const Tensor& logits, const Tensor& target, Reduction reduction,
                       const Tensor& pos_weight, const Tensor& weight) {
  const ops::UserOp user(Op::bce_with_logits, {&logits, &target});
  if (const auto c = ops::autocast(Op::bce_with_logits, {&logits, &target, &pos_weight, &weight}))
    return bce_with_logits(c[0], c[1], reduction, c[2], c[3]);
  ops::check_defined("bce_with_logits", logits);
  check_reduction(Op::bce_with_logits, reduction);
  ops::check_defined("bce_with_logits", target, "target");
  const ops::OpScope op_scope(Op::bce_with_logits, logits);
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
  if (weight.defined()) {
    ops::check_same_dtype("bce_with_logits", logits, weight);
    ops::check_same_device("bce_with_logits", logits, weight);
    broadcast_shapes(weight.shape(), logits.shape(), "bce_with_logits");
    loss = loss * weight;
  }
  return reduce_loss(loss, reduction);
}

// ---- regression, ranking and embedding losses (issue 16): composites ----

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (const auto c = ops::autocast(Op::l1_loss, {&input, &target}))
    return l1_loss(c[0], c[1], reduction);
  check_pair(Op::l1_loss, input, target);
  check_reduction(Op::l1_loss, reduction);
  return reduce_loss(abs(input - target), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  if (const auto c = ops::autocast(Op::smooth_l1_loss, {&input, &target}))
    return smooth_l1_loss(c[0], c[1], reduction, beta);
  check_pair(Op::smooth_l1_loss, input, target);
  check_reduction(Op::smooth_l1_loss, reduction);
  EMBER_CHECK(beta >= 0.0, "smooth_l1_loss: beta ", beta, " (expected beta >= 0)");
  Tensor d = abs(input - target);
  if (beta == 0.0) return reduce_loss(d, reduction);
  return reduce_loss(where(lt(d, beta), d * d * (0.5 / beta), d - 0.5 * beta), reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta) {
  if (const auto c = ops::autocast(Op::huber_loss, {&input, &target}))
    return huber_loss(c[0], c[1], reduction, delta);
  check_pair(Op::huber_loss, input, target);
  check_reduction(Op::huber_loss, reduction);
  EMBER_CHECK(delta > 0.0, "huber_loss: delta ", delta, " (expected delta > 0)");
  Tensor d = abs(input - target);
  return reduce_loss(where(lt(d, delta), d * d * 0.5, (d - 0.5 * delta) * delta), reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target) {
  if (const auto c = ops::autocast(Op::kl_div, {&input, &target}))
    return kl_div(c[0], c[1], reduction, log_target);
  check_pair(Op::kl_div, input, target);
  Tensor per;
  if (log_target) {
    per = exp(target) * (target - input);
  } else {
    // target·(log target - input), 0 where target is 0 (xlogy's convention).
    Tensor positive = gt(target, 0.0);
    Tensor safe = where(positive, target, scalar_like(target, 1.0));
    per = where(positive, target * log(safe), scalar_like(target, 0.0)) - target * input;
  }
  if (reduction == Reduction::batchmean) {
    const int64_t n = input.dim() ? input.shape()[0] : 1;
    return sum(per) / static_cast<double>(n);
  }
  return reduce_loss(per, reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, Reduction reduction,
                            const Tensor& weight) {
  if (const auto c = ops::autocast(Op::binary_cross_entropy, {&input, &target, &weight}))
    return binary_cross_entropy(c[0], c[1], reduction, c[2]);
  check_pair(Op::binary_cross_entropy, input, target);
  check_reduction(Op::binary_cross_entropy, reduction);
  if (input.device().is_cpu() && input.numel() > 0) {
    const double lo = min(input).item<double>(), hi = max(input).item<double>();
    EMBER_CHECK(lo >= 0.0 && hi <= 1.0, "binary_cross_entropy: input values span [", lo, ", ", hi,
                "] (expected probabilities in [0, 1]; use bce_with_logits for logits)");
  }
  // PyTorch clamps each log at -100, so p = 0 or 1 gives a finite loss; its gradient is
  // PyTorch's formula, not the clamped logs' (whose 0 · 1/0 was NaN at a saturated p).
  Tensor per;
  {
    NoGradGuard no_grad;
    Tensor log_p = clamp_min(log(input), -100.0), log_q = clamp_min(log(1.0 - input), -100.0);
    per = neg(target * log_p + (1.0 - target) * log_q);
  }
  if (autograd::needs_grad(input, target))
    autograd::record(Op::binary_cross_entropy, per, {&input, &target},
                     [sp = autograd::SavedTensor(input), st = autograd::SavedTensor(target)](
                         const Tensor& g, autograd::GradList& gi) {
                       const Tensor p = sp.get(), t = st.get();
                       // d/dp = (p - t) / max(p (1 - p), 1e-12); d/dt = -logit(p).
                       gi[0] = g * (p - t) / clamp_min(p * (1.0 - p), 1e-12);
                       gi[1] = g * (log(1.0 - p) - log(p));
                     });
  if (weight.defined()) {
    ops::check_same_dtype("binary_cross_entropy", input, weight);
    ops::check_same_device("binary_cross_entropy", input, weight);
    broadcast_shapes(weight.shape(), input.shape(), "binary_cross_entropy");
    per = per * weight;
  }
  return reduce_loss(per, reduction);
}

Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin,
                           Reduction reduction) {
  const ops::UserOp user(Op::margin_ranking_loss, {&x1, &x2, &y});
  if (const auto c = ops::autocast(Op::margin_ranking_loss, {&x1, &x2, &y}))
    return margin_ranking_loss(c[0], c[1], c[2], margin, reduction);
  const ops::OpScope op_scope(Op::margin_ranking_loss, x1);
  ops::check_supported(Op::margin_ranking_loss, x1);
  ops::check_defined("margin_ranking_loss", x2, "input2");
  ops::check_defined("margin_ranking_loss", y, "target");
  check_reduction(Op::margin_ranking_loss, reduction);
  ops::check_same_dtype("margin_ranking_loss", x1, x2);
  ops::check_same_dtype("margin_ranking_loss", x1, y);
  return reduce_loss(relu(neg(y) * (x1 - x2) + margin), reduction);
}

namespace {
// ‖a - b + eps‖_p over the last dim (F.pairwise_distance).
Tensor pairwise_distance(const Tensor& a, const Tensor& b, double p, double eps) {
  return norm(a - b + eps, p, {-1});
}
}  // namespace

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin, double p, double eps, bool swap, Reduction reduction) {
  if (const auto c = ops::autocast(Op::triplet_margin_loss, {&anchor, &positive, &negative}))
    return triplet_margin_loss(c[0], c[1], c[2], margin, p, eps, swap, reduction);
  const ops::OpScope op_scope(Op::triplet_margin_loss, anchor);
  ops::check_supported(Op::triplet_margin_loss, anchor);
  check_reduction(Op::triplet_margin_loss, reduction);
  for (const Tensor* t : {&positive, &negative}) {
    ops::check_defined("triplet_margin_loss", *t, t == &positive ? "positive" : "negative");
    ops::check_same_dtype("triplet_margin_loss", anchor, *t);
    ops::check_same_device("triplet_margin_loss", anchor, *t);
  }
  EMBER_CHECK(anchor.dim() >= 1 && anchor.dim() <= 2 && positive.dim() == anchor.dim() &&
                  negative.dim() == anchor.dim(),
              "triplet_margin_loss: anchor, positive and negative shapes ",
              anchor.shape().to_string(), ", ", positive.shape().to_string(), ", ",
              negative.shape().to_string(), " (expected [N, D] or [D] each)");
  EMBER_CHECK(margin > 0.0, "triplet_margin_loss: margin ", margin, " (expected margin > 0)");
  Tensor d_ap = pairwise_distance(anchor, positive, p, eps);
  Tensor d_an = pairwise_distance(anchor, negative, p, eps);
  if (swap) d_an = minimum(d_an, pairwise_distance(positive, negative, p, eps));
  return reduce_loss(relu(d_ap - d_an + margin), reduction);
}

Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& y, double margin,
                             Reduction reduction) {
  if (const auto c = ops::autocast(Op::cosine_embedding_loss, {&x1, &x2, &y}))
    return cosine_embedding_loss(c[0], c[1], c[2], margin, reduction);
  const ops::OpScope op_scope(Op::cosine_embedding_loss, x1);
  ops::check_supported(Op::cosine_embedding_loss, x1);
  ops::check_defined("cosine_embedding_loss", x2, "input2");
  ops::check_defined("cosine_embedding_loss", y, "target");
  check_reduction(Op::cosine_embedding_loss, reduction);
  ops::check_same_dtype("cosine_embedding_loss", x1, x2);
  EMBER_CHECK(x1.shape() == x2.shape() && x1.dim() >= 1 && x1.dim() <= 2,
              "cosine_embedding_loss: input shapes ", x1.shape().to_string(), " and ",
              x2.shape().to_string(), " (expected equal shapes [N, D] or [D])");
  EMBER_CHECK(y.dim() == x1.dim() - 1 && (y.dim() == 0 || y.shape()[0] == x1.shape()[0]),
              "cosine_embedding_loss: target shape ", y.shape().to_string(), " for inputs ",
              x1.shape().to_string(), " (expected one ±1 per row)");
  constexpr double kEps = 1e-12;  // PyTorch's EPSILON in the magnitudes
  Tensor dot_ = sum(x1 * x2, {-1});
  Tensor cos = dot_ / sqrt((sum(x1 * x1, {-1}) + kEps) * (sum(x2 * x2, {-1}) + kEps));
  Tensor yf = y.to(x1.dtype());
  Tensor zero = scalar_like(cos, 0.0);
  Tensor per = where(eq(yf, 1.0), 1.0 - cos, zero) + where(eq(yf, -1.0), relu(cos - margin), zero);
  return reduce_loss(per, reduction);
}

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full,
                        double eps, Reduction reduction) {
  if (const auto c = ops::autocast(Op::poisson_nll_loss, {&input, &target}))
    return poisson_nll_loss(c[0], c[1], log_input, full, eps, reduction);
  check_pair(Op::poisson_nll_loss, input, target);
  check_reduction(Op::poisson_nll_loss, reduction);
  Tensor per = log_input ? exp(input) - target * input : input - target * log(input + eps);
  if (full) {
    // Stirling's term target·log(target) - target + ½·log(2π·target), where target > 1.
    Tensor big = gt(target, 1.0);
    Tensor safe = where(big, target, scalar_like(target, 1.0));
    Tensor stirling = safe * log(safe) - safe + log(safe * (2.0 * M_PI)) * 0.5;
    per = per + where(big, stirling, scalar_like(target, 0.0));
  }
  return reduce_loss(per, reduction);
}

// ---- CTC (issue 16): the forward variable recursion as a composite ----
//
// Note [CTC as a composite]
// The loss of each sample is -log Σ over the alignments of its label sequence l (length L) to
// its T_b frames. With the extended sequence l' = (blank, l1, blank, l2, ..., blank) of 2L + 1
// states, α_t(s) = logsumexp(α_{t-1}(s), α_{t-1}(s - 1), α_{t-1}(s - 2) where l'_s is not
// blank and differs from l'_{s-2}) + log_probs[t, l'_s], α_0 holding states 0 and 1, and the
// loss -logsumexp(α_{T_b - 1}(2L), α_{T_b - 1}(2L - 1)). Every step runs for the whole batch
// on the tensors' device (frames past a sample's length leave its α as it was), so autograd
// gives the gradient, which equals PyTorch's with respect to the logits under log_softmax.
// Unreachable states hold -inf; the three-way logsumexp is guarded so they pass a zero
// gradient, never NaN. The label sequences themselves (they decide the shapes) are read on
// the host, as PyTorch's CPU kernel does.

namespace {

// logsumexp of three tensors where any may be -inf (all three: -inf, with a zero gradient).
Tensor logsumexp3(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& neg_inf) {
  Tensor m = maximum(maximum(a, b), c).detach();
  Tensor dead = eq(m, -std::numeric_limits<double>::infinity());
  Tensor ms = where(dead, scalar_like(m, 0.0), m);
  Tensor total = exp(a - ms) + exp(b - ms) + exp(c - ms);
  return where(dead, neg_inf, log(where(dead, scalar_like(total, 1.0), total)) + ms);
}

// `x` [N, S] shifted right by k states along dim 1, -inf coming in.
Tensor shift_states(const Tensor& x, int64_t k, const Tensor& neg_inf) {
  const int64_t n = x.shape()[0], s = x.shape()[1];
  if (k >= s) return neg_inf.expand({n, s});
  return cat({neg_inf.expand({n, k}), x.narrow(1, 0, s - k)}, 1);
}

std::vector<int64_t> host_lengths(const Tensor& t, const char* what, int64_t n) {
  ops::check_defined("ctc_loss", t, what);
  ops::check_index_dtype("ctc_loss", t);
  EMBER_CHECK(t.dim() == 1 && t.shape()[0] == n, "ctc_loss: ", what, " shape ",
              t.shape().to_string(), " (expected one length per sample: [", n, "])");
  return t.to(DType::i64).to_vector<int64_t>();
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs_in, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank, Reduction reduction,
                bool zero_infinity) {
  if (const auto c = ops::autocast(Op::ctc_loss, {&log_probs_in}))
    return ctc_loss(c[0], targets, input_lengths, target_lengths, blank, reduction, zero_infinity);
  const ops::OpScope op_scope(Op::ctc_loss, log_probs_in);
  ops::check_supported(Op::ctc_loss, log_probs_in, "log_probs");
  check_reduction(Op::ctc_loss, reduction);
  EMBER_CHECK(log_probs_in.dim() == 3 || log_probs_in.dim() == 2, "ctc_loss: log_probs shape ",
              log_probs_in.shape().to_string(), " (expected [T, N, C], or [T, C] unbatched)");
  const bool unbatched = log_probs_in.dim() == 2;
  const Tensor log_probs = unbatched ? log_probs_in.unsqueeze(1) : log_probs_in;
  const int64_t frames = log_probs.shape()[0], n = log_probs.shape()[1], c = log_probs.shape()[2];
  EMBER_CHECK(blank >= 0 && blank < c, "ctc_loss: blank ", blank, " (expected a class in [0, ", c,
              "))");
  ops::check_defined("ctc_loss", targets, "targets");
  ops::check_index_dtype("ctc_loss", targets);
  const std::vector<int64_t> t_len = host_lengths(input_lengths, "input_lengths", n);
  const std::vector<int64_t> l_len = host_lengths(target_lengths, "target_lengths", n);
  const std::vector<int64_t> labels = targets.to(DType::i64).to_vector<int64_t>();
  // targets: [N, S] padded, or 1-D: every sample's labels one after another.
  const bool packed = targets.dim() == 1 && !unbatched;
  const int64_t stride = unbatched ? 0 : (packed ? 0 : targets.shape()[targets.dim() - 1]);
  int64_t longest = 0, offset = 0;
  std::vector<int64_t> starts(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) {
    EMBER_CHECK(t_len[b] >= 0 && t_len[b] <= frames, "ctc_loss: input_lengths[", b, "] is ",
                t_len[b], " (expected 0 <= length <= ", frames, " frames)");
    EMBER_CHECK(l_len[b] >= 0 && (packed || unbatched || l_len[b] <= stride),
                "ctc_loss: ", "target_lengths[", b, "] is ", l_len[b],
                " (expected 0 <= length <= ", stride, ", the targets' width)");
    starts[b] = packed ? offset : b * stride;
    offset += l_len[b];
    longest = std::max(longest, l_len[b]);
  }
  EMBER_CHECK(static_cast<int64_t>(labels.size()) >= (packed ? offset : 0),
              "ctc_loss: ", labels.size(), " target labels for target_lengths summing to ", offset);
  const int64_t states = 2 * longest + 1;
  std::vector<int64_t> ext(static_cast<size_t>(n * states), blank);
  std::vector<uint8_t> skip(static_cast<size_t>(n * states), 0);
  std::vector<int64_t> last(static_cast<size_t>(n)), second(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t j = 0; j < l_len[b]; ++j) {
      const int64_t label = labels[static_cast<size_t>(starts[b] + j)];
      EMBER_CHECK(label >= 0 && label < c && label != blank, "ctc_loss: target label ", label,
                  " of sample ", b, " (expected a class in [0, ", c, ") other than blank ", blank,
                  ")");
      const int64_t s = 2 * j + 1;
      ext[b * states + s] = label;
      skip[b * states + s] = j > 0 && labels[static_cast<size_t>(starts[b] + j - 1)] != label;
    }
    last[b] = b * states + 2 * l_len[b];
    second[b] = l_len[b] > 0 ? b * states + 2 * l_len[b] - 1 : last[b];
  }
  const Device dev = log_probs.device();
  const int64_t shape_ns[] = {n, states};
  Tensor ext_t = from_vector<int64_t>(ext, Shape(shape_ns)).to(dev);
  Tensor skip_t = from_vector<uint8_t>(skip, Shape(shape_ns)).to(DType::boolean).to(dev);
  Tensor neg_inf = full(Shape{}, -std::numeric_limits<double>::infinity(),
                        {.dtype = log_probs.dtype(), .device = dev});
  // Emissions of every state at every frame: [T, N, S'].
  Tensor emit = gather(log_probs, 2, ext_t.unsqueeze(0).expand({frames, n, states}));
  // α_0: states 0 and 1 (1 only when the sample has a label).
  std::vector<uint8_t> start_mask(static_cast<size_t>(n * states), 0);
  for (int64_t b = 0; b < n; ++b) {
    start_mask[b * states] = 1;
    if (l_len[b] > 0) start_mask[b * states + 1] = 1;
  }
  Tensor start = from_vector<uint8_t>(start_mask, Shape(shape_ns)).to(DType::boolean).to(dev);
  std::vector<int64_t> len_v = t_len;
  Tensor lengths = from_vector<int64_t>(len_v, Shape{n}).to(dev).reshape({n, 1});
  Tensor alpha = where(start, emit.select(0, 0), neg_inf);
  for (int64_t t = 1; t < frames; ++t) {
    Tensor stay = alpha, step = shift_states(alpha, 1, neg_inf);
    Tensor jump = where(skip_t, shift_states(alpha, 2, neg_inf), neg_inf);
    Tensor next = logsumexp3(stay, step, jump, neg_inf) + emit.select(0, t);
    alpha = where(gt(lengths, static_cast<double>(t)), next, alpha);
  }
  Tensor flat = alpha.reshape({n * states});
  Tensor a_last = index_select(flat, 0, from_vector<int64_t>(last, Shape{n}).to(dev));
  Tensor a_second = index_select(flat, 0, from_vector<int64_t>(second, Shape{n}).to(dev));
  std::vector<uint8_t> has_label(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) has_label[b] = l_len[b] > 0;
  a_second = where(from_vector<uint8_t>(has_label, Shape{n}).to(DType::boolean).to(dev), a_second,
                   neg_inf);
  // A sample with no frames has no alignment (unless it has no labels either).
  std::vector<uint8_t> no_frames(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) no_frames[b] = t_len[b] == 0;
  Tensor ll = logsumexp3(a_last, a_second, neg_inf.expand({n}), neg_inf);
  ll = where(from_vector<uint8_t>(no_frames, Shape{n}).to(DType::boolean).to(dev),
             scalar_like(ll, 0.0) + (longest > 0 ? neg_inf : scalar_like(ll, 0.0)), ll);
  Tensor loss = neg(ll);
  if (zero_infinity) loss = where(isinf(loss), scalar_like(loss, 0.0), loss);
  if (unbatched && reduction == Reduction::none) return loss.reshape(Shape{});
  if (reduction == Reduction::mean) {
    std::vector<double> div(static_cast<size_t>(n));
    for (int64_t b = 0; b < n; ++b) div[b] = static_cast<double>(std::max<int64_t>(l_len[b], 1));
    return mean(loss / from_vector<double>(div, Shape{n}).to(loss.dtype()).to(dev));
  }
  return reduce_loss(loss, reduction);
}

}  // namespace ember
