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
// decode step] in causal_lm.cpp) with no inputs: it reads the step's ids [B], positions [B] and
// cache position [1] from one i64 buffer on the device and moves the positions on itself, and
// the host writes each step's chosen ids into it with a device copy (Note [Decoding ahead of
// the host]) — or, decoding greedily with no repetition penalty, the graph picks them and
// writes them there itself; the key padding mask of a left-padded batch is the prompt's, fixed
// for the whole generation.
#include "ember/models/generate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/device_runtime.hpp"
#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/ops.hpp"
#include "ember/random.hpp"
#include "ember/read_only.hpp"
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

// Note [Decoding ahead of the host]
// Each step's tokens are chosen on the device and feed the next step there (the eager forward
// takes them as its ids; the captured step's state gets them by a device copy), so the host
// queues step after step without waiting for a token: the device never idles between tokens
// for a round trip (a wait, a copy to the host, the next launch). The host learns the tokens
// kReadAhead steps late: each step's tokens are copied into a pinned buffer of a ring, queued
// behind the step, and the host reads the oldest buffer only when the ring is full or no step
// is left to queue. Stop tokens and on_token act on what is read, in order, so the output and
// the stream are those of a decoder that waits each step; a batch whose rows have all stopped
// has run at most kReadAhead - 1 steps past the last stop, whose tokens are dropped (the cache
// has room: no more than max_new_tokens - 1 decode steps ever run). The generator has drawn
// for those steps too. A sampled step still waits once: multinomial's check of its weights.
constexpr int64_t kReadAhead = 8;

class TokenReader {
 public:
  TokenReader(Device device, int64_t rows) : device_(device), rows_(rows) {
    for (int64_t i = 0; i < kReadAhead; ++i)
      ring_.emplace_back(device.type, static_cast<size_t>(rows) * sizeof(int64_t));
  }
  int64_t pending() const { return count_; }
  /// Queues the copy of `tokens` (i64 [rows] on the device) into the next buffer.
  void push(const Tensor& tokens) {
    EMBER_CHECK(count_ < kReadAhead, "generate: the token ring is full (an internal error)");
    const Tensor t = tokens.contiguous();
    ring_[static_cast<size_t>((first_ + count_) % kReadAhead)].copy_from_device(
        device_.index, t.data_ptr(), 0, static_cast<size_t>(rows_) * sizeof(int64_t));
    ++count_;
  }
  /// The oldest step's tokens, once their copy is done.
  std::vector<int64_t> pop() {
    backend::PinnedStaging& b = ring_[static_cast<size_t>(first_)];
    b.wait(device_.index);
    const auto* p = static_cast<const int64_t*>(b.data());
    first_ = (first_ + 1) % kReadAhead;
    --count_;
    return {p, p + rows_};
  }

 private:
  Device device_;
  int64_t rows_;
  std::vector<backend::PinnedStaging> ring_;
  int64_t first_ = 0, count_ = 0;
};

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
  // The weights stay as they are until generate returns (a callback or hook that changes one
  // is an ember::Error), so the decode step's products may load them early (Note [Weights
  // loaded before the wait] in src/cuda/gemv.cu).
  const ReadOnlyGuard weights(m.parameters());
  if (o.seed) manual_seed(*o.seed);

  // Note [One batch, left padded].
  std::vector<int64_t> ids(static_cast<size_t>(B * T), 0), mask(static_cast<size_t>(B * T), 0);
  std::vector<uint8_t> seen_rows;  // [B, V]: the prompt's tokens, for the repetition penalty
  if (o.repetition_penalty != 1.0) seen_rows.assign(static_cast<size_t>(B * V), 0);
  std::vector<int64_t> real(static_cast<size_t>(B));  // each prompt's length: its next position
  for (int64_t r = 0; r < B; ++r) {
    const auto& p = prompts[static_cast<size_t>(r)];
    const int64_t pad = T - static_cast<int64_t>(p.size());
    real[static_cast<size_t>(r)] = static_cast<int64_t>(p.size());
    for (size_t j = 0; j < p.size(); ++j) {
      ids[static_cast<size_t>(r * T + pad) + j] = p[j];
      mask[static_cast<size_t>(r * T + pad) + j] = 1;
      if (!seen_rows.empty()) seen_rows[static_cast<size_t>(r * V + p[j])] = 1;
    }
  }
  const bool padded = std::find(mask.begin(), mask.end(), 0) != mask.end();
  Tensor attention = padded ? from_vector(mask, {B, T}, {.device = device}) : Tensor();
  Tensor seen = seen_rows.empty()
                    ? Tensor()
                    : from_vector(seen_rows, {B, V}, {.device = device}).to(DType::i32);
  nn::KVCache cache(T + o.max_new_tokens);
  Tensor logits = m.forward(from_vector(ids, {B, T}, {.device = device}),
                            {.cache = &cache, .attention_mask = attention, .last_only = true});

  // The step's tokens [B] from its logits, and the repetition penalty's record of them.
  auto pick = [&](const Tensor& step_logits) {
    Tensor last = step_logits.reshape({B, V});
    if (seen.defined()) {  // CTRL's penalty on tokens the row already holds
      const Tensor f = last.to(DType::f32);
      last = where(gt(seen, 0.0),
                   where(gt(f, 0.0), f / o.repetition_penalty, f * o.repetition_penalty), f);
    }
    Tensor next = sample_next(last, o);
    if (seen.defined()) seen = scatter(seen, 1, next.reshape({B, 1}), 1.0);
    return next;
  };

  // Note [A captured decode step] in causal_lm.cpp: the graph reads the step's ids, positions
  // and cache position from `state` on the device and moves the positions on by one itself.
  Tensor state;  // i64 [2B + 1]: ids [B], positions [B], cache position [1]
  std::optional<train::CapturedStep> graph;
  // Greedy decoding with no repetition penalty picks inside the graph too: the step's argmax
  // is written into the state's ids there and returned, so a token costs one replay and one
  // copy to the host (the first replay's ids, the prefill's pick, are copied in once).
  const bool pick_inside = o.capture && !o.do_sample && !seen.defined();
  if (o.capture) {
    std::vector<int64_t> start(static_cast<size_t>(2 * B + 1), 0);
    for (int64_t r = 0; r < B; ++r)
      start[static_cast<size_t>(B + r)] = real[static_cast<size_t>(r)];
    start[static_cast<size_t>(2 * B)] = T;
    state = from_vector(start, {2 * B + 1}, {.device = device});
    const Tensor key_mask = padded ? attention.to(DType::boolean) : Tensor();
    graph.emplace([&m, &cache, &state, key_mask, B, V, pick_inside](const std::vector<Tensor>&) {
      const Tensor logits = m.forward(state.narrow(0, 0, B).reshape({B, 1}),
                                      {.cache = &cache,
                                       .attention_mask = key_mask,
                                       .cache_position = state.narrow(0, 2 * B, 1),
                                       .position_ids = state.narrow(0, B, B).reshape({B, 1}),
                                       .last_only = true});
      state.narrow(0, B, B + 1).add_(1.0);  // the next step's positions and cache position
      if (!pick_inside) return std::vector<Tensor>{logits.reshape({B, V})};
      const Tensor next = argmax(logits.reshape({B, V}), 1);  // sample_next's greedy pick
      state.narrow(0, 0, B).copy_(next);
      return std::vector<Tensor>{next};
    });
  }
  // An eager padded batch: the positions on the device too (forward would otherwise count
  // them from the mask on the host, a read each step).
  Tensor positions =
      padded && !o.capture ? from_vector(real, {B, 1}, {.device = device}) : Tensor();
  const Tensor ones_column =
      padded && !o.capture ? ones({B, 1}, {.dtype = DType::i64, .device = device}) : Tensor();

  // Note [Decoding ahead of the host].
  TokenReader reader(device, B);
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(B));
  std::vector<bool> done(static_cast<size_t>(B), false);
  int64_t live = B;  // rows not stopped, as far as the host has read
  Tensor next = pick(logits);
  reader.push(next);
  for (int64_t queued = 1;;) {
    bool more = queued < o.max_new_tokens && live > 0;
    while (reader.pending() > 0 && (reader.pending() >= kReadAhead || !more)) {
      const std::vector<int64_t> tokens = reader.pop();
      for (int64_t r = 0; r < B; ++r) {
        if (done[static_cast<size_t>(r)]) continue;
        const int64_t t = tokens[static_cast<size_t>(r)];
        out[static_cast<size_t>(r)].push_back(t);
        if (o.on_token) o.on_token(r, t);
        if (std::find(o.stop_tokens.begin(), o.stop_tokens.end(), t) != o.stop_tokens.end()) {
          done[static_cast<size_t>(r)] = true;
          --live;
        }
      }
      more = queued < o.max_new_tokens && live > 0;
    }
    if (!more) break;
    if (graph && pick_inside) {
      if (queued == 1) state.narrow(0, 0, B).copy_(next);  // the prefill's pick
      next = (*graph)({})[0];
      reader.push(next);
      ++queued;
      continue;
    }
    if (graph) {
      state.narrow(0, 0, B).copy_(next);
      logits = (*graph)({})[0];
    } else {
      if (padded) attention = cat({attention, ones_column}, 1);
      logits = m.forward(next.reshape({B, 1}), {.cache = &cache,
                                                .attention_mask = attention,
                                                .position_ids = positions,
                                                .last_only = true});
      if (positions.defined()) positions = positions + ones_column;
    }
    next = pick(logits);
    reader.push(next);
    ++queued;
  }
  return out;
}

}  // namespace ember::models
