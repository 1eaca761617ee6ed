// ember/sampling.hpp — drawing from distributions on the CPU and the GPU: categories from logits
// (Gumbel-max) or weights (torch.multinomial), Bernoulli trials, and normal samples with the
// reparameterisation gradient. Every draw comes from ember's seeded generator
// (ember/random.hpp): manual_seed(s) repeats it, and the CPU and a GPU draw the same values
// for the same seed (docs/ops.md, "Sampling", says to what precision). Each op checks its
// parameters with one device read; inside a CapturedStep, which cannot read the device, the
// check is skipped and every replay draws new values (docs/capture.md).
#pragma once

#include <cstdint>

#include "ember/tensor.hpp"

namespace ember {

/// torch.distributions.Categorical(logits=...).sample(sample_shape), over any dim: index i is
/// drawn with probability softmax(logits, dim)[i], by the Gumbel-max trick argmax(logits + G),
/// G = -log(-log(u)), computed in f64. Returns i64 indices shaped sample_shape followed by
/// logits' shape without `dim` (independent draws for every entry of sample_shape). Logits
/// may be unnormalised or log-probabilities; a -inf logit masks its category (never drawn).
/// Not differentiable. ember::Error for floating logits that hold NaN or +inf, or a
/// distribution whose logits are all -inf.
///   Tensor a = sample_categorical(logits);              // [B] from logits [B, C]
///   Tensor s = sample_categorical(logits, -1, {100});   // [100, B]
///   Tensor c = sample_categorical(scores, 0);           // [batch] from ggmlR's [n, batch]
Tensor sample_categorical(const Tensor& logits, int64_t dim = -1, const Shape& sample_shape = {});

/// torch.multinomial: `num_samples` category indices (i64) per row of `probs` ([C] or [R, C],
/// non-negative weights, not necessarily normalised), drawn in proportion to the weights.
/// With replacement each draw is independent (inverse CDF: uses R·num_samples·C bytes of
/// scratch); without, the rows' draws are distinct (the exponential race: the num_samples
/// largest weight/Exp(1) keys, which is sequential sampling without replacement), and a
/// zero-weight category is never drawn. ember::Error for a negative, NaN or infinite
/// weight, a row of zeros, or more distinct draws than a row has non-zero weights.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);

/// torch.bernoulli: 1 with probability p, else 0, elementwise, in p's shape, dtype and device
/// (p floating, every element in [0, 1]: ember::Error for one outside, or NaN). Not
/// differentiable, as PyTorch. Example: Tensor mask = bernoulli(full({4, 4}, 0.9));
Tensor bernoulli(const Tensor& p);
/// Tensor.bernoulli(p): x's shape, dtype and device, every element 1 with probability p
/// (0 <= p <= 1), else 0. Example: Tensor coin = bernoulli(zeros({10}), 0.5);
Tensor bernoulli(const Tensor& x, double p);

/// torch.distributions.Normal(mean, std).rsample(sample_shape): mean + std · eps with eps ~ N(0,
/// 1), shaped sample_shape followed by the broadcast of mean and std. Differentiable in both
/// (the reparameterisation trick): d/dmean = 1, d/dstd = eps. std >= 0 (ember::Error for a
/// negative or NaN one). ggmlR's ag_sample_normal(mu, log_std) is
/// rsample_normal(mu, exp(log_std)).
///   Tensor a = rsample_normal(mu, exp(log_std));   // SAC's action, gradients to both
Tensor rsample_normal(const Tensor& mean, const Tensor& std, const Shape& sample_shape = {});

/// torch.normal(mean, std): the same draw as rsample_normal without a gradient (torch.normal's
/// is zero). Example: Tensor noisy = normal(x, full_like(x, 0.1));
Tensor normal(const Tensor& mean, const Tensor& std);
/// torch.normal(mean, std) with one std for every element.
Tensor normal(const Tensor& mean, double std);

}  // namespace ember
