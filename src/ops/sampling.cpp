// src/ops/sampling.cpp — the sampling ops of include/ember/sampling.hpp: sample_categorical,
// multinomial, bernoulli, rsample_normal and normal. Each is composed from primitive ops, so it
// runs wherever they do, and draws from the global Philox generator through rand() and randn()
// (Note [Random streams] in src/kernels/random.hpp).
//
// Note [Sampling the same values on every device]
// Philox gives every device the same uniforms bit for bit; what a device computes from them
// with transcendental functions can differ in the last bit (CUDA's log and cos are not glibc's).
// So every draw here is built to round those differences away:
// - bernoulli compares the uniforms themselves with p: identical.
// - sample_categorical forms its Gumbel keys logits - log(-log(u)) in f64. A device's last-bit
//   difference (about 1e-16, relative) changes the argmax only when two keys of one
//   distribution are that close, which a draw meets with probability ~1e-15 per category.
// - Normal noise is drawn in f64 and rounded to f32 (then to f16/bf16): the f64 difference
//   decides the f32 value only when it straddles a rounding boundary (~1e-8 of elements).
//   f64 samples keep it: they agree to 1-2 ulp, not bit for bit.
// - multinomial with replacement sums weights with cumsum, whose rounding can differ between
//   devices; without replacement it races weight/Exp(1) keys in f32.
// tests/test_sampling.cpp checks the CPU against CUDA draw for draw.
//
// Note [Sampling checks under capture]
// The parameter checks (a NaN logit, p outside [0, 1], a negative std, ...) read the device
// once. A CapturedStep cannot read the device while it captures, so there the checks are
// skipped (its eager warm-up call still makes them), and a bad parameter gives what the
// arithmetic gives: a NaN logit is drawn (argmax takes NaN for the maximum), an all -inf
// distribution draws index 0, p < 0 never fires and p > 1 always, a negative std flips eps,
// a NaN std gives NaN, and multinomial draws some index from a row that is no distribution.
#include "ember/sampling.hpp"

#include <cmath>
#include <limits>

#include "core/capture.hpp"
#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/ops.hpp"
#include "ops/common.hpp"

namespace ember {
namespace {

using ops::kInf;

// Whether checks may read the device (Note [Sampling checks under capture]).
bool may_read_device() { return detail::active_capture() == nullptr; }

// The flat (row-major) position of the first true element of a bool tensor that has one.
int64_t first_true(const Tensor& mask) {
  return argmax(mask.reshape({mask.numel()}).to(DType::i32), 0).item<int64_t>();
}

// Element `i` (row-major) of `t`, as a double, for an error message.
double element(const Tensor& t, int64_t i) {
  return t.reshape({t.numel()}).narrow(0, i, 1).to(DType::f64).item<double>();
}

// sample_shape followed by `shape`; refuses negative sizes and ranks over kMaxRank.
Shape sampled_shape(const char* op, const Shape& sample_shape, const Shape& shape) {
  EMBER_CHECK(sample_shape.size() + shape.size() <= kMaxRank, op, ": sample_shape ",
              sample_shape.to_string(), " with batch shape ", shape.to_string(), " has rank ",
              sample_shape.size() + shape.size(), " (expected at most ", kMaxRank, ")");
  Shape out = sample_shape;
  for (int64_t s : sample_shape)
    EMBER_CHECK(s >= 0, op, ": sample_shape ", sample_shape.to_string(),
                " (expected non-negative sizes)");
  for (int64_t s : shape) out.push_back(s);
  return out;
}

// Standard normal noise in `dtype`, drawn in f64 (Note [Sampling the same values on every
// device]).
Tensor standard_normal(const Shape& shape, DType dtype, Device device) {
  Tensor eps = randn(shape, {.dtype = DType::f64, .device = device});
  if (dtype == DType::f64) return eps;
  eps = eps.to(DType::f32);
  return dtype == DType::f32 ? eps : eps.to(dtype);
}

// Refuses a negative or NaN standard deviation (one device read).
void check_std(const char* op, const Tensor& std) {
  if (!may_read_device()) return;
  const Tensor bad = logical_not(ge(std, 0.0));  // NaN compares false
  if (!any(bad).item<bool>()) return;
  const int64_t i = first_true(bad);
  EMBER_CHECK(false, op, ": std holds ", element(std, i), " at element ", i,
              " (expected std >= 0)");
}

// mean + std · eps, the draw of rsample_normal and normal.
Tensor draw_normal(const char* op, const Tensor& mean, const Tensor& std,
                   const Shape& sample_shape) {
  EMBER_CHECK(mean.defined() && std.defined(), op, ": undefined ", mean.defined() ? "std" : "mean");
  const ops::UserOp user(op, {&mean, &std});
  const DType dtype = result_type(mean, std);
  EMBER_CHECK(is_floating(dtype), op, ": mean ", dtype_name(mean.dtype()), " and std ",
              dtype_name(std.dtype()), " (expected floating parameters)");
  EMBER_CHECK(mean.device() == std.device(), op, ": mean on ", mean.device().str(), " and std on ",
              std.device().str(), " (expected one device)");
  const Shape batch = broadcast_shapes(mean.shape(), std.shape(), op);
  const Shape shape = sampled_shape(op, sample_shape, batch);
  check_std(op, std);
  Tensor eps;
  {
    NoGradGuard no_grad;
    eps = standard_normal(shape, dtype, mean.device());
  }
  return add(mean, mul(std, eps));  // d/dmean = 1, d/dstd = eps, summed over broadcasts
}

}  // namespace

// ---- categorical ----

Tensor sample_categorical(const Tensor& logits, int64_t dim, const Shape& sample_shape) {
  constexpr const char* kOp = "sample_categorical";
  EMBER_CHECK(logits.defined(), kOp, ": undefined logits");
  const ops::UserOp user(kOp, {&logits});
  EMBER_CHECK(logits.dim() >= 1 && is_floating(logits.dtype()), kOp, ": logits ",
              logits.shape().to_string(), " ", dtype_name(logits.dtype()),
              " (expected floating logits with at least one dim)");
  const int d = wrap_dim(dim, logits.dim(), kOp);
  EMBER_CHECK(logits.size(d) > 0, kOp, ": logits ", logits.shape().to_string(),
              " have no categories along dim ", d, " (expected at least one)");
  const Shape shape = sampled_shape(kOp, sample_shape, logits.shape());
  NoGradGuard no_grad;
  if (may_read_device()) {
    const Tensor nan_or_inf = logical_or(isnan(logits), eq(logits, kInf));
    const Tensor masked = eq(amax(logits, Shape{d}), -kInf);  // every logit -inf
    if (logical_or(any(nan_or_inf), any(masked)).item<bool>()) {
      if (any(nan_or_inf).item<bool>()) {
        const int64_t i = first_true(nan_or_inf);
        EMBER_CHECK(false, kOp, ": logits hold ", element(logits, i), " at element ", i,
                    " (expected finite logits, or -inf to mask a category)");
      }
      EMBER_CHECK(false, kOp, ": distribution ", first_true(masked), " of logits ",
                  logits.shape().to_string(), " (dim ", d,
                  ") has every logit -inf (expected a category that can be drawn)");
    }
  }
  // Gumbel-max: argmax(logits + G), G = -log(E), E = -log(u) ~ Exp(1); u = 0 gives a key of
  // -inf, never drawn. The logits broadcast over the leading sample dims.
  const Tensor u = rand(shape, {.dtype = DType::f64, .device = logits.device()});
  const Tensor keys = sub(logits.to(DType::f64), log(neg(log(u))));
  return argmax(keys, d + sample_shape.size());
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  EMBER_CHECK(probs.defined(), "multinomial: undefined probs (expected weights [C] or [R, C])");
  EMBER_CHECK((probs.dim() == 1 || probs.dim() == 2) && is_floating(probs.dtype()) &&
                  probs.shape().at(-1) > 0,
              "multinomial: probs ", probs.shape().to_string(), " ", dtype_name(probs.dtype()),
              " (expected floating weights [C] or [R, C], C at least 1)");
  const int64_t C = probs.shape().at(-1);
  EMBER_CHECK(num_samples >= 1, "multinomial: num_samples ", num_samples, " (expected >= 1)");
  EMBER_CHECK(replacement || num_samples <= C, "multinomial: ", num_samples,
              " distinct samples from ", C, " categories (expected at most ", C,
              ", or replacement = true)");
  NoGradGuard no_grad;
  const Tensor P = (probs.dim() == 1 ? probs.unsqueeze(0) : probs).to(DType::f32);
  const int64_t R = P.size(0);
  if (may_read_device()) {
    // The weights' validity in one read: each row's count of positive weights, then the
    // count of bad ones.
    const Tensor bad = logical_or(lt(P, 0.0), logical_not(isfinite(P)));
    const std::vector<int64_t> counts =
        cat({sum(gt(P, 0.0).to(DType::i64), Shape{1}), sum(bad.to(DType::i64)).reshape({1})})
            .to_vector<int64_t>();
    if (counts[static_cast<size_t>(R)] > 0) {
      const int64_t i = first_true(bad);
      EMBER_CHECK(false, "multinomial: probs hold ", element(P, i), " at element ", i,
                  " (expected no negative, NaN or infinite weight)");
    }
    for (int64_t r = 0; r < R; ++r) {
      const int64_t positive = counts[static_cast<size_t>(r)];
      EMBER_CHECK(positive > 0, "multinomial: row ", r,
                  " of probs has no positive weight (expected a distribution)");
      EMBER_CHECK(replacement || positive >= num_samples, "multinomial: ", num_samples,
                  " distinct samples from row ", r, " with ", positive, " positive weights");
    }
  }
  Tensor out;
  if (replacement) {
    // Inverse CDF: the count of cumulative weights below u·total is the drawn category.
    const Tensor cdf = cumsum(P, 1);                                          // [R, C]
    const Tensor total = cdf.narrow(1, C - 1, 1);                             // [R, 1]
    const Tensor u = rand({R, num_samples}, {.device = P.device()}) * total;  // [R, n]
    const Tensor below = le(cdf.unsqueeze(1), u.unsqueeze(2));                // [R, n, C]
    out = clamp_max(sum(below.to(DType::i64), Shape{2}), static_cast<double>(C - 1));
    // a category of zero weight has cdf equal to its predecessor's: `le` skips past it
  } else {
    // The exponential race: weight / Exp(1) keys, the largest num_samples win.
    const Tensor e = neg(log(rand({R, C}, {.device = P.device()}, 1e-38, 1.0)));
    out = topk(P / e, num_samples, 1).indices;
  }
  return probs.dim() == 1 ? out.reshape({num_samples}) : out;
}

// ---- Bernoulli ----

namespace {
// 1 where a uniform of `shape` is below p (p a tensor broadcasting to shape, or a double),
// in `dtype`. f64 draws 53-bit uniforms, every other dtype 24-bit ones.
template <typename P>
Tensor trials(const Shape& shape, DType dtype, Device device, const P& p) {
  const DType u = dtype == DType::f64 ? DType::f64 : DType::f32;
  return lt(rand(shape, {.dtype = u, .device = device}), p).to(dtype);
}
}  // namespace

Tensor bernoulli(const Tensor& p) {
  EMBER_CHECK(p.defined(), "bernoulli: undefined p");
  const ops::UserOp user("bernoulli", {&p});
  EMBER_CHECK(is_floating(p.dtype()), "bernoulli: p ", dtype_name(p.dtype()),
              " (expected floating probabilities)");
  NoGradGuard no_grad;
  if (may_read_device()) {
    const Tensor outside = logical_not(logical_and(ge(p, 0.0), le(p, 1.0)));  // NaN too
    if (any(outside).item<bool>()) {
      const int64_t i = first_true(outside);
      EMBER_CHECK(false, "bernoulli: p holds ", element(p, i), " at element ", i,
                  " (expected probabilities in [0, 1])");
    }
  }
  return trials(p.shape(), p.dtype(), p.device(), p);
}

Tensor bernoulli(const Tensor& x, double p) {
  EMBER_CHECK(x.defined(), "bernoulli: undefined x");
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "bernoulli: p ", p, " (expected 0 <= p <= 1)");
  NoGradGuard no_grad;
  return trials(x.shape(), x.dtype(), x.device(), p);
}

// ---- normal ----

Tensor rsample_normal(const Tensor& mean, const Tensor& std, const Shape& sample_shape) {
  return draw_normal("rsample_normal", mean, std, sample_shape);
}

Tensor normal(const Tensor& mean, const Tensor& std) {
  NoGradGuard no_grad;
  return draw_normal("normal", mean, std, {});
}

Tensor normal(const Tensor& mean, double std) {
  EMBER_CHECK(mean.defined(), "normal: undefined mean");
  EMBER_CHECK(std::isfinite(std) && std >= 0.0, "normal: std ", std,
              " (expected a finite std >= 0)");
  EMBER_CHECK(is_floating(mean.dtype()), "normal: mean ", dtype_name(mean.dtype()),
              " (expected a floating mean)");
  NoGradGuard no_grad;
  return add(mean, mul(standard_normal(mean.shape(), mean.dtype(), mean.device()), std));
}

}  // namespace ember
