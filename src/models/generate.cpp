// src/models/generate.cpp — models::generate and sample_next (include/ember/models/generate.hpp).
//
// Note [One batch, left padded]
// Prompts of different lengths are padded on the left to the longest, with an attention mask
// of 0 over the padding (CausalLMImpl's forward then counts positions over real tokens and
// never attends to padding: Note [Positions and masks of a language model's forward]), so
// every row's next token sits in the last column and one forward per step serves the whole
// batch. Finished rows keep stepping (their tokens are not reported) until every row has
// stopped or max_new_tokens are out. The prompt is prefilled once into a KVCache sized for
// the longest prompt plus max_new_tokens; each step then feeds one token per row.
//
// With GenerationOptions::capture the decode step is a train::CapturedStep (Note [A captured
// decode step] in causal_lm.cpp): its one input packs the step's ids [B], positions [B] and
// cache position [1] (one copy to the device per token), and the key padding mask of a left-
// padded batch is the prompt's, fixed for the whole generation.
#include "ember/models/generate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/ops.hpp"
#include "ember/random.hpp"
#include "ember/sampling.hpp"
#include "ember/train/capture.hpp"

namespace ember::models {

namespace {

void check_options(const GenerationOptions& o) {
  EMBER_CHECK(o.max_new_tokens >= 1, "generate: max_new_tokens ", o.max_new_tokens,
              " (expected at least 1)");
  EMBER_CHECK(std::isfinite(o.temperature) && o.temperature > 0.0, "generate: temperature ",
              o.temperature, " (expected > 0; greedy decoding is do_sample = false)");
  EMBER_CHECK(o.top_k >= 0, "generate: top_k ", o.top_k, " (expected >= 0; 0 is off)");
  EMBER_CHECK(o.top_p > 0.0 && o.top_p <= 1.0, "generate: top_p ", o.top_p,
              " (expected 0 < top_p <= 1; 1 is off)");
  EMBER_CHECK(std::isfinite(o.repetition_penalty) && o.repetition_penalty > 0.0,
              "generate: repetition_penalty ", o.repetition_penalty, " (expected > 0; 1 is off)");
}

}  // namespace

Tensor sample_next(const Tensor& logits, const GenerationOptions& o) {
  check_options(o);
  EMBER_CHECK(logits.defined() && logits.dim() == 2 && is_floating(logits.dtype()),
              "sample_next: logits ", logits.defined() ? logits.shape().to_string() : "undefined",
              " (expected floating logits [B, vocab])");
  NoGradGuard no_grad;
  if (!o.do_sample) return argmax(logits, 1);
  // transformers' warpers, in its order: temperature, top-k, top-p.
  Tensor x = logits.to(DType::f32) / o.temperature;
  const double minus_inf = -std::numeric_limits<double>::infinity();
  const int64_t V = x.size(1);
  if (o.top_k > 0 && o.top_k < V) {
    const Tensor kth = topk(x, o.top_k, 1).values.narrow(1, o.top_k - 1, 1);  // [B, 1]
    x = where(lt(x, kth), full_like(x, minus_inf), x);
  }
  if (o.top_p < 1.0) {
    // Keep the fewest most likely tokens whose probabilities reach top_p: a token stays when
    // the mass before it is below top_p (the most likely one always stays).
    auto [sorted, order] = sort(x, 1, /*descending=*/true);
    const Tensor p = softmax(sorted, 1);
    const Tensor before = cumsum(p, 1) - p;
    const Tensor kept = sum(lt(before, o.top_p).to(DType::i64), Shape{1}, true);  // [B, 1] >= 1
    const Tensor threshold = gather(sorted, 1, kept - 1);                         // [B, 1]
    x = where(lt(x, threshold), full_like(x, minus_inf), x);
  }
  return multinomial(softmax(x, 1), 1, false).reshape({x.size(0)});
}

std::vector<std::vector<int64_t>> generate(const nn::CausalLM& model,
                                           const std::vector<std::vector<int64_t>>& prompts,
                                           const GenerationOptions& o) {
  EMBER_CHECK(model.ptr() != nullptr, "generate: an empty model handle");
  EMBER_CHECK(!prompts.empty(), "generate: no prompts (expected at least one list of token ids)");
  check_options(o);
  nn::CausalLMImpl& m = *model;
  const int64_t B = static_cast<int64_t>(prompts.size()), V = m.vocab_size();
  int64_t T = 0;
  for (size_t r = 0; r < prompts.size(); ++r) {
    EMBER_CHECK(!prompts[r].empty(), "generate: prompt ", r,
                " is empty (expected at least one token id, e.g. the tokenizer's bos)");
    for (int64_t id : prompts[r])
      EMBER_CHECK(id >= 0 && id < V, "generate: prompt ", r, " holds token id ", id,
                  " outside the vocabulary [0, ", V, ")");
    T = std::max<int64_t>(T, static_cast<int64_t>(prompts[r].size()));
  }
  EMBER_CHECK(T + o.max_new_tokens <= m.max_positions(), "generate: a prompt of ", T,
              " tokens and max_new_tokens ", o.max_new_tokens, " exceed the model's context of ",
              m.max_positions(), " positions");
  const Device device = m.parameters().front().device();
  EMBER_CHECK(!o.capture || device.is_cuda(), "generate: capture with a model on ", device.str(),
              " (expected a CUDA device: a captured decode step is a CUDA graph)");
  NoGradGuard no_grad;
  if (o.seed) manual_seed(*o.seed);

  // Note [One batch, left padded].
  std::vector<int64_t> ids(static_cast<size_t>(B * T), 0), mask(static_cast<size_t>(B * T), 0);
  std::vector<uint8_t> seen;  // [B, V]: tokens the repetition penalty applies to
  if (o.repetition_penalty != 1.0) seen.assign(static_cast<size_t>(B * V), 0);
  for (int64_t r = 0; r < B; ++r) {
    const auto& p = prompts[static_cast<size_t>(r)];
    const int64_t pad = T - static_cast<int64_t>(p.size());
    for (size_t j = 0; j < p.size(); ++j) {
      ids[static_cast<size_t>(r * T + pad) + j] = p[j];
      mask[static_cast<size_t>(r * T + pad) + j] = 1;
      if (!seen.empty()) seen[static_cast<size_t>(r * V + p[j])] = 1;
    }
  }
  const bool padded = std::find(mask.begin(), mask.end(), 0) != mask.end();
  Tensor attention = padded ? from_vector(mask, {B, T}, {.device = device}) : Tensor();
  nn::KVCache cache(T + o.max_new_tokens);
  Tensor logits = m.forward(from_vector(ids, {B, T}, {.device = device}),
                            {.cache = &cache, .attention_mask = attention, .last_only = true});

  std::vector<std::vector<int64_t>> out(static_cast<size_t>(B));
  std::vector<bool> done(static_cast<size_t>(B), false);
  std::vector<int64_t> real(static_cast<size_t>(B));  // each prompt's length: its next position
  for (int64_t r = 0; r < B; ++r)
    real[static_cast<size_t>(r)] = static_cast<int64_t>(prompts[static_cast<size_t>(r)].size());
  const Tensor ones_column =
      padded && !o.capture ? ones({B, 1}, {.dtype = DType::i64, .device = device}) : Tensor();
  std::optional<train::CapturedStep> graph;
  std::vector<int64_t> packed;  // the captured step's input: ids [B], positions [B], slot [1]
  if (o.capture) {
    const Tensor key_mask = padded ? attention.to(DType::boolean) : Tensor();
    graph.emplace([&m, &cache, key_mask, B, V](const std::vector<Tensor>& in) {
      const Tensor ids = in[0].narrow(0, 0, B).reshape({B, 1});
      const Tensor positions = in[0].narrow(0, B, B).reshape({B, 1});
      const Tensor slot = in[0].narrow(0, 2 * B, 1);
      return std::vector<Tensor>{m.forward(ids, {.cache = &cache,
                                                 .attention_mask = key_mask,
                                                 .cache_position = slot,
                                                 .position_ids = positions,
                                                 .last_only = true})
                                     .reshape({B, V})};
    });
    packed.resize(static_cast<size_t>(2 * B + 1));
  }
  for (int64_t step = 0; step < o.max_new_tokens; ++step) {
    Tensor last = logits.reshape({B, V});
    if (!seen.empty()) {  // CTRL's penalty on tokens the row already holds
      const Tensor s = from_vector(seen, {B, V}, {.device = device}).to(DType::boolean);
      const Tensor f = last.to(DType::f32);
      last = where(s, where(gt(f, 0.0), f / o.repetition_penalty, f * o.repetition_penalty), f);
    }
    const std::vector<int64_t> next = sample_next(last, o).to(Device::cpu()).to_vector<int64_t>();
    for (int64_t r = 0; r < B; ++r) {
      if (done[static_cast<size_t>(r)]) continue;
      const int64_t t = next[static_cast<size_t>(r)];
      out[static_cast<size_t>(r)].push_back(t);
      if (!seen.empty()) seen[static_cast<size_t>(r * V + t)] = 1;
      if (o.on_token) o.on_token(r, t);
      if (std::find(o.stop_tokens.begin(), o.stop_tokens.end(), t) != o.stop_tokens.end())
        done[static_cast<size_t>(r)] = true;
    }
    if (step + 1 == o.max_new_tokens ||
        std::all_of(done.begin(), done.end(), [](bool d) { return d; }))
      break;
    if (graph) {
      for (int64_t r = 0; r < B; ++r) {
        packed[static_cast<size_t>(r)] = next[static_cast<size_t>(r)];
        packed[static_cast<size_t>(B + r)] = real[static_cast<size_t>(r)] + step;
      }
      packed[static_cast<size_t>(2 * B)] = T + step;
      logits = (*graph)({from_vector(packed, {2 * B + 1})})[0];
      continue;
    }
    if (padded) attention = cat({attention, ones_column}, 1);
    logits = m.forward(from_vector(next, {B, 1}, {.device = device}),
                       {.cache = &cache, .attention_mask = attention, .last_only = true});
  }
  return out;
}

}  // namespace ember::models
