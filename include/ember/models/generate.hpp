// ember/models/generate.hpp — text generation with a language model and its KV cache:
// greedy, temperature, top-k, top-p, repetition penalty, stop tokens, batched prompts with left
// padding, streaming (docs/language_models.md).
//
//   auto out = models::generate(model, {tok.encode("Once upon a time")},
//                               {.max_new_tokens = 64, .do_sample = true, .top_p = 0.9,
//                                .seed = 7, .stop_tokens = {eos}});
//   std::cout << tok.decode(out[0]);
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ember/models/causal_lm.hpp"

namespace ember::models {

/// transformers' GenerationConfig, the fields ember computes.
struct GenerationOptions {
  /// New tokens per prompt at most (a row also stops at one of stop_tokens).
  int64_t max_new_tokens = 32;
  /// false: greedy (the most likely token; temperature, top_k and top_p are ignored).
  bool do_sample = false;
  /// Logits divided by this before sampling (> 0).
  double temperature = 1.0;
  /// Sample among the k most likely tokens only; 0: all.
  int64_t top_k = 0;
  /// Sample among the fewest most likely tokens whose probabilities reach top_p; 1: all.
  double top_p = 1.0;
  /// CTRL's penalty on tokens already in the row (prompt and generated): a positive logit is
  /// divided by it, a negative one multiplied; 1: none.
  double repetition_penalty = 1.0;
  /// Ids that end a row (included in its output), e.g. the tokenizer's end-of-text.
  std::vector<int64_t> stop_tokens{};
  /// Seeds ember's generator before the first draw (unset: the stream continues).
  std::optional<uint64_t> seed = std::nullopt;
  /// Called with (row, token) for each new token, in order: streaming. The tokens are chosen
  /// on the device and read by the host a few steps behind (up to 8), so the device never
  /// waits for the host between tokens.
  std::function<void(int64_t row, int64_t token)> on_token{};
  /// Decode steps as one CUDA graph: the first step runs eagerly, the second is captured, and
  /// every later token replays it, reading its ids and positions from a buffer on the device
  /// (one graph launch per step instead of hundreds of kernel launches; the logits are those
  /// of the eager step). Needs a model on a CUDA device.
  bool capture = false;
};

/// New tokens for each prompt (prompts of different lengths are left padded and masked; the
/// whole batch is one forward per step). The model runs under NoGradGuard with a KVCache of
/// room for the longest prompt plus max_new_tokens, on the model's device and dtype (bf16
/// under an AutocastGuard), the prompt prefilled once. ember::Error on an empty prompt list
/// or prompt, an id outside the vocabulary, a prompt plus max_new_tokens longer than the
/// model's context, or options out of range.
std::vector<std::vector<int64_t>> generate(const nn::CausalLM& model,
                                           const std::vector<std::vector<int64_t>>& prompts,
                                           const GenerationOptions& options = {});

/// The next token of each row of `logits` [B, V] by `options` (temperature, top_k, top_p;
/// greedy when !do_sample), as i64 [B]: generate's sampling step, for custom decoding loops.
Tensor sample_next(const Tensor& logits, const GenerationOptions& options);

}  // namespace ember::models
