// src/ops/nn.cpp — dropout and layer_norm. layer_norm is a composite of primitives (its
// backward comes from the primitives' rules); dropout keeps its mask. batch_norm has fused
// kernels: src/ops/norm.cpp.
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
  ops::backend_of(x).dropout(ops::view_of(out), ops::view_of(mask), ops::view_of(xc), p, rng.seed,
                             offset);
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
    EMBER_CHECK(bias.shape() == normalized_shape, "layer_norm: bias shape ",
                bias.shape().to_string(), " (expected ", normalized_shape.to_string(), ")");
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

}  // namespace ember
