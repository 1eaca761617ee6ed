// src/ops/nn.cpp — dropout, layer_norm and batch_norm. The norms are composites of
// primitives (their backward comes from the primitives' rules); dropout keeps its mask.
#include "ember/random.hpp"
#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

Tensor dropout(const Tensor& x, double p, bool training) {
  ops::check_defined("dropout", x);
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability ", p, " (expected 0 <= p <= 1)");
  if (!training || p == 0.0) return x;
  ops::check_float("dropout", x);
  if (p == 1.0) return mul(x, 0.0);
  Tensor xc = x.contiguous();
  Tensor out = ops::make_tensor(x.shape(), x.dtype(), x.device());
  Tensor mask = ops::make_tensor(x.shape(), x.dtype(), x.device());
  const RngState rng = get_rng_state();
  const uint64_t offset = advance_rng(static_cast<uint64_t>(x.numel()));
  ops::backend_of(x).dropout(ops::view_of(out), ops::view_of(mask), ops::view_of(xc), p, rng.seed, offset);
  if (autograd::needs_grad(x))
    autograd::record("dropout", out, {&x}, [sm = SavedTensor(mask)](const Tensor& g, GradList& gi) {
      gi[0] = mul(g, sm.get());
    });
  return out;
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  ops::check_defined("layer_norm", x);
  ops::check_float("layer_norm", x);
  const int k = normalized_shape.size();
  EMBER_CHECK(k >= 1 && k <= x.dim(), "layer_norm: normalized_shape ", normalized_shape.to_string(),
              " does not fit input shape ", x.shape().to_string());
  for (int i = 0; i < k; ++i)
    EMBER_CHECK(x.shape()[x.dim() - k + i] == normalized_shape[i], "layer_norm: input shape ",
                x.shape().to_string(), " does not end with normalized_shape ",
                normalized_shape.to_string());
  if (weight.defined())
    EMBER_CHECK(weight.shape() == normalized_shape, "layer_norm: weight shape ",
                weight.shape().to_string(), " (expected ", normalized_shape.to_string(), ")");
  if (bias.defined())
    EMBER_CHECK(bias.shape() == normalized_shape, "layer_norm: bias shape ", bias.shape().to_string(),
                " (expected ", normalized_shape.to_string(), ")");
  Shape dims;
  for (int i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  Tensor mu = mean(x, dims, true);
  Tensor centered = sub(x, mu);
  Tensor variance = mean(square(centered), dims, true);
  Tensor y = mul(centered, rsqrt(add(variance, eps)));
  if (weight.defined()) y = mul(y, weight);
  if (bias.defined()) y = add(y, bias);
  return y;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps) {
  ops::check_defined("batch_norm", x);
  ops::check_float("batch_norm", x);
  EMBER_CHECK(x.dim() >= 2, "batch_norm: input shape ", x.shape().to_string(),
              " (expected [N, C] or [N, C, ...])");
  const int64_t c = x.shape()[1];
  auto check_param = [&](const Tensor& t, const char* what) {
    if (!t.defined()) return;
    EMBER_CHECK(t.dim() == 1 && t.shape()[0] == c, "batch_norm: ", what, " shape ",
                t.shape().to_string(), " (expected [", c, "] for input shape ", x.shape().to_string(), ")");
    ops::check_same_dtype("batch_norm", x, t);
  };
  check_param(running_mean, "running_mean");
  check_param(running_var, "running_var");
  check_param(weight, "weight");
  check_param(bias, "bias");
  Shape channel_shape = Shape::filled(x.dim(), 1);
  channel_shape[1] = c;
  Shape dims;
  for (int i = 0; i < x.dim(); ++i)
    if (i != 1) dims.push_back(i);
  Tensor y;
  if (training) {
    const int64_t n = x.numel() / std::max<int64_t>(c, 1);
    EMBER_CHECK(n > 1, "batch_norm: expected more than 1 value per channel when training (got input shape ",
                x.shape().to_string(), ")");
    Tensor mu = mean(x, dims, true);
    Tensor centered = sub(x, mu);
    Tensor variance = mean(square(centered), dims, true);  // biased, as PyTorch normalises
    y = mul(centered, rsqrt(add(variance, eps)));
    if (running_mean.defined() && running_var.defined()) {
      NoGradGuard g;
      const double unbias = static_cast<double>(n) / static_cast<double>(n - 1);
      Tensor new_mean = add(mul(running_mean, 1.0 - momentum), mul(mu.reshape({c}), momentum));
      Tensor new_var = add(mul(running_var, 1.0 - momentum), mul(variance.reshape({c}), momentum * unbias));
      Tensor(running_mean).copy_(new_mean);
      Tensor(running_var).copy_(new_var);
    }
  } else {
    EMBER_CHECK(running_mean.defined() && running_var.defined(),
                "batch_norm: eval mode needs running_mean and running_var (got undefined tensors)");
    y = mul(sub(x, running_mean.reshape(channel_shape)), rsqrt(add(running_var.reshape(channel_shape), eps)));
  }
  if (weight.defined()) y = mul(y, weight.reshape(channel_shape));
  if (bias.defined()) y = add(y, bias.reshape(channel_shape));
  return y;
}

}  // namespace ember
