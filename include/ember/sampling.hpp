// ember/sampling.hpp — drawing categories from probabilities (torch.multinomial), on the CPU
// and the GPU, from ember's seeded generator (ember/random.hpp): manual_seed(s) repeats a draw.
#pragma once

#include <cstdint>

#include "ember/tensor.hpp"

namespace ember {

/// torch.multinomial: `num_samples` category indices (i64) per row of `probs` ([C] or [R, C],
/// non-negative weights, not necessarily normalised), drawn in proportion to the weights.
/// With replacement each draw is independent (inverse CDF: uses R·num_samples·C bytes of
/// scratch); without, the rows' draws are distinct (the exponential race: the num_samples
/// largest weight/Exp(1) keys, which is sequential sampling without replacement), and a
/// zero-weight category is never drawn. ember::Error for a negative, NaN or infinite
/// weight, a row of zeros, or more distinct draws than a row has non-zero weights (checked
/// on the host: one device synchronisation).
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);

}  // namespace ember
