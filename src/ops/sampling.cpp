// src/ops/sampling.cpp — multinomial (include/ember/sampling.hpp), composed from primitive
// ops so it runs wherever they do, drawing from the global Philox generator through rand().
#include "ember/sampling.hpp"

#include <cmath>

#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/ops.hpp"

namespace ember {

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
  // The weights' validity, on the host: one synchronisation.
  const Tensor bad = logical_or(lt(P, 0.0), logical_not(isfinite(P)));
  EMBER_CHECK(!any(bad).item<bool>(), "multinomial: probs hold a negative, NaN or infinite weight");
  const std::vector<int64_t> nonzero =
      sum(gt(P, 0.0).to(DType::i64), Shape{1}).to_vector<int64_t>();
  for (int64_t r = 0; r < R; ++r) {
    EMBER_CHECK(nonzero[static_cast<size_t>(r)] > 0, "multinomial: row ", r,
                " of probs has no positive weight (expected a distribution)");
    EMBER_CHECK(replacement || nonzero[static_cast<size_t>(r)] >= num_samples,
                "multinomial: ", num_samples, " distinct samples from row ", r, " with ",
                nonzero[static_cast<size_t>(r)], " positive weights");
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

}  // namespace ember
