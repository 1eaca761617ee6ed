// examples/language_model.cpp — a Hugging Face language model from start to end in C++: load
// GPT-2 and its tokenizer, continue a prompt greedily (streamed as it is written), fine-tune on
// a text file, save in transformers' layout and load it back, then sample.
//
//   language_model [MODEL_FOLDER TOKENIZER_JSON TEXT_FILE OUT_FOLDER]
//
// Without arguments (run from the repository root) it takes the tests' tiny GPT-2 (2 layers,
// 32 wide, a 640-token vocabulary, 64 positions), its tokenizer and the GNU GPL's text, and
// writes ./language_model_out; it runs in seconds on a CPU. It exits non-zero when training
// does not lower the loss or the reloaded model's logits differ from the trained model's.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/models/generate.hpp"
#include "ember/models/pretrained.hpp"
#include "ember/optim/adam.hpp"
#include "ember/optim/clip.hpp"
#include "ember/text/tokenizer.hpp"

using namespace ember;

namespace {

constexpr int64_t kBatch = 8;    // B: windows per step
constexpr int64_t kWindow = 32;  // T: tokens per window (the tiny model has 64 positions)
constexpr int kSteps = 30;
constexpr double kLearningRate = 3e-3;
constexpr double kMaxGradNorm = 1.0;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "language_model: cannot read ", path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// B windows of T + 1 tokens from `ids` at random offsets: inputs [B, T] and the next tokens
// they predict, flattened to [B·T] for cross_entropy.
std::pair<Tensor, Tensor> batch(const std::vector<int64_t>& ids, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> offset(0, ids.size() - kWindow - 1);
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < kBatch; ++b) {
    const auto start = ids.begin() + static_cast<std::ptrdiff_t>(offset(rng));
    x.insert(x.end(), start, start + kWindow);
    y.insert(y.end(), start + 1, start + kWindow + 1);
  }
  return {from_vector(x, {kBatch, kWindow}), from_vector(y, {kBatch * kWindow})};
}

// Mean next-token cross-entropy of `model` on inputs x [B, T] with targets y [B·T].
Tensor lm_loss(const nn::CausalLM& model, const Tensor& x, const Tensor& y) {
  const Tensor logits = model->forward(x);  // [B, T, V]
  return cross_entropy(logits.reshape({-1, model->vocab_size()}), y);
}

bool run(const std::string& model_dir, const std::string& tokenizer_json,
         const std::string& text_file, const std::string& out_dir) {
  nn::CausalLM model = models::from_pretrained(model_dir);
  const text::Tokenizer tokenizer = text::Tokenizer::from_file(tokenizer_json);
  std::vector<int64_t> stop;
  if (auto eos = tokenizer.token_to_id("<|endoftext|>")) stop.push_back(*eos);

  // 1. Greedy continuation, printed token by token.
  const std::vector<int64_t> prompt = tokenizer.encode("This License");
  text::TextStreamer greedy(tokenizer);
  std::cout << "greedy:  This License";
  models::generate(
      model, {prompt},
      {.max_new_tokens = 16, .stop_tokens = stop, .on_token = [&](int64_t, int64_t token) {
         std::cout << greedy.push(token) << std::flush;
       }});
  std::cout << greedy.finish();
  std::cout << "\n";

  // 2. Fine-tune on the text: next-token cross-entropy, AdamW, gradients clipped to norm 1.
  const std::vector<int64_t> ids = tokenizer.encode(read_file(text_file));
  EMBER_CHECK(static_cast<int64_t>(ids.size()) > kWindow + 1, "language_model: ", text_file,
              " has ", ids.size(), " tokens (expected more than ", kWindow + 1, ")");
  std::cout << text_file << ": " << ids.size() << " tokens\n";
  manual_seed(0);
  std::mt19937_64 rng(0);
  const std::pair<Tensor, Tensor> fixed = batch(ids, rng);  // measured before and after
  const Tensor& fixed_x = fixed.first;
  auto fixed_batch_loss = [&] {
    NoGradGuard no_grad;
    return lm_loss(model, fixed.first, fixed.second).item<float>();
  };
  const float before = fixed_batch_loss();
  model->train();
  optim::AdamW opt(model->parameters(), {.lr = kLearningRate});
  for (int step = 1; step <= kSteps; ++step) {
    const auto [x, y] = batch(ids, rng);
    opt.zero_grad();
    Tensor loss = lm_loss(model, x, y);
    loss.backward();
    optim::clip_grad_norm(model->parameters(), kMaxGradNorm);
    opt.step();
    if (step % 5 == 0 || step == 1)
      std::cout << "step " << step << "  loss " << loss.item<float>() << "\n";
  }
  model->eval();
  const float after = fixed_batch_loss();
  std::cout << "loss on a fixed batch: " << before << " before training, " << after << " after\n";
  if (!(after < before)) {
    std::cerr << "language_model: training did not lower the loss\n";
    return false;
  }

  // 3. Save in transformers' layout, load it back: the logits must be the same.
  models::save_pretrained(model, out_dir);
  nn::CausalLM reloaded = models::from_pretrained(out_dir);
  NoGradGuard no_grad;
  const float diff = max(abs(model->forward(fixed_x) - reloaded->forward(fixed_x))).item<float>();
  std::cout << "saved to " << out_dir << "; reloaded logits differ by at most " << diff << "\n";
  if (diff != 0.0f) {
    std::cerr << "language_model: the reloaded model's logits differ from the trained model's\n";
    return false;
  }

  // 4. Sampling: temperature and nucleus (top-p), reproducible with a seed.
  text::TextStreamer sampled(tokenizer);
  std::cout << "sampled: This License";
  models::generate(reloaded, {prompt},
                   {.max_new_tokens = 24,
                    .do_sample = true,
                    .temperature = 0.8,
                    .top_p = 0.9,
                    .stop_tokens = stop,
                    .seed = 7,
                    .on_token = [&](int64_t, int64_t token) {
                      std::cout << sampled.push(token) << std::flush;
                    }});
  std::cout << sampled.finish();
  std::cout << "\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 1 && argc != 5) {
    std::cerr << "usage: language_model [MODEL_FOLDER TOKENIZER_JSON TEXT_FILE OUT_FOLDER]\n";
    return 2;
  }
  const bool given = argc == 5;
  try {
    return run(given ? argv[1] : "tests/data/lm/gpt2",
               given ? argv[2] : "tests/data/lm/gpt2_tok/tokenizer.json",
               given ? argv[3] : "/usr/share/common-licenses/GPL-3",
               given ? argv[4] : "language_model_out")
               ? 0
               : 1;
  } catch (const std::exception& e) {
    std::cerr << "language_model: " << e.what() << "\n";
    return 1;
  }
}
