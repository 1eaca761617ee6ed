// tools/generate.cpp — `ember generate MODEL_FOLDER --prompt ...`: a Hugging Face language
// model continues a prompt, streaming the text (docs/language_models.md).
#include "ember/models/generate.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>

#include "cli_common.hpp"
#include "ember/error.hpp"
#include "ember/models/pretrained.hpp"
#include "ember/text/tokenizer.hpp"

namespace ember_cli {

using namespace ember;
namespace fs = std::filesystem;

namespace {

// New tokens when --max-new-tokens is not given (fewer when the context has less room).
constexpr int64_t kDefaultNewTokens = 64;

// The ids that end a generation: the tokenizer's end-of-text tokens, under the names the common
// families give them, and the eos_token_id (a number or a list) of config.json and
// generation_config.json.
std::vector<int64_t> stop_tokens(const text::Tokenizer& tokenizer, const std::string& folder) {
  std::set<int64_t> ids;
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "</s>"})
    if (const auto id = tokenizer.token_to_id(name)) ids.insert(*id);
  for (const char* file : {"config.json", "generation_config.json"}) {
    std::ifstream f(fs::path(folder) / file);
    if (!f.good()) continue;
    const nn::json j = nn::json::parse(f, nullptr, /*allow_exceptions=*/false);
    const nn::json eos = j.is_object() ? j.value("eos_token_id", nn::json()) : nn::json();
    for (const nn::json& id : eos.is_array() ? eos : nn::json::array({eos}))
      if (id.is_number_integer() && id.get<int64_t>() >= 0) ids.insert(id.get<int64_t>());
  }
  return {ids.begin(), ids.end()};
}

}  // namespace

int cmd_generate(GenerateArgs g) {
  const Device device = check_device(g.device);
  std::error_code ec;
  EMBER_CHECK(fs::is_directory(g.model, ec), "ember generate: ", g.model,
              ": no such folder (expected a Hugging Face model folder: config.json and "
              "model.safetensors)");
  EMBER_CHECK(fs::is_regular_file(fs::path(g.model) / "config.json", ec),
              "ember generate: ", g.model,
              " has no config.json (expected a Hugging Face model folder)");
  const bool default_tokenizer = g.tokenizer.empty();
  if (default_tokenizer) g.tokenizer = (fs::path(g.model) / "tokenizer.json").string();
  EMBER_CHECK(!default_tokenizer || fs::is_regular_file(g.tokenizer, ec),
              "ember generate: ", g.tokenizer,
              ": no such file (the model folder has no tokenizer.json; pass "
              "--tokenizer PATH)");
  check_input_file("--tokenizer", g.tokenizer);
  EMBER_CHECK(!g.bf16 || device.is_cuda(), "ember generate: --bf16 on ", device.str(),
              " (expected --device cuda:N; the CPU computes language models in f32)");
  EMBER_CHECK(g.top_p <= 1.0, "ember generate: --top-p ", g.top_p, " (expected 0 < p <= 1)");
  EMBER_CHECK(!g.prompt.empty(), "ember generate: --prompt is empty (expected some text)");

  const text::Tokenizer tokenizer = text::Tokenizer::from_file(g.tokenizer);
  const std::vector<int64_t> prompt = tokenizer.encode(g.prompt);
  EMBER_CHECK(!prompt.empty(), "ember generate: the prompt encodes to no tokens");
  nn::CausalLM model = models::from_pretrained(
      g.model, {.device = device, .dtype = g.bf16 ? DType::bf16 : DType::f32});
  const int64_t prompt_length = static_cast<int64_t>(prompt.size());
  const int64_t room = model->max_positions() - prompt_length;
  EMBER_CHECK(room >= 1, "ember generate: the prompt is ", prompt_length,
              " tokens, and the model's context ", model->max_positions(),
              " positions (expected a shorter prompt, leaving room for new tokens)");
  const int64_t new_tokens = g.max_new_tokens.value_or(std::min(kDefaultNewTokens, room));
  EMBER_CHECK(new_tokens <= room, "ember generate: the prompt (", prompt_length,
              " tokens) and --max-new-tokens ", new_tokens, " need ", prompt_length + new_tokens,
              " positions, more than the model's context of ", model->max_positions(),
              " (expected --max-new-tokens ", room, " or fewer)");

  text::TextStreamer out(tokenizer);
  models::generate(
      model, {prompt},
      {.max_new_tokens = new_tokens,
       .do_sample = !g.greedy,
       .temperature = g.temperature,
       .top_k = g.top_k,
       .top_p = g.top_p,
       .repetition_penalty = g.repetition_penalty,
       .stop_tokens = stop_tokens(tokenizer, g.model),
       .seed = g.seed ? *g.seed : std::random_device{}(),
       .on_token = [&](int64_t, int64_t token) { std::cout << out.push(token) << std::flush; }});
  std::cout << out.finish();
  std::cout << "\n";
  return 0;
}

}  // namespace ember_cli
