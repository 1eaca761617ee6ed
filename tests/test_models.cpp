// tests/test_models.cpp — nn::GPT2 and nn::Llama against transformers' logits and greedy
// continuations of the same weights (tests/data/lm, written by tests/gen_lm_fixtures.py), the
// KV cache against the full forward, left padding, and their bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "ember/ember.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/models/gpt2.hpp"
#include "ember/models/llama.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"

namespace {

using namespace ember;
using ember::test_util::error_of;

std::string lm_dir() { return ember_test::data_dir() + "/lm"; }

nn::json expected() {
  std::ifstream in(lm_dir() + "/expected.json");
  return nn::json::parse(in);
}

// Every safetensors file of a Hugging Face folder into `model` by name; GPT-2's Conv1D
// weights ([in, out]) transposed. (models::from_pretrained does this for users.)
void load_folder(nn::ModuleImpl& model, const std::string& folder, bool conv1d) {
  NoGradGuard no_grad;
  auto params = model.named_parameters();
  size_t loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() != ".safetensors") continue;
    io::SafetensorsFile file(entry.path().string());
    for (const auto& e : file.entries()) {
      auto it = std::find_if(params.begin(), params.end(),
                             [&](const auto& p) { return p.first == e.name; });
      ASSERT_NE(it, params.end()) << "unexpected " << e.name;
      Tensor t = file.read(e.name).to(DType::f32);
      const bool transpose = conv1d && t.dim() == 2 && e.name.find(".h.") != std::string::npos;
      it->second.copy_(transpose ? t.t().contiguous() : t);
      ++loaded;
    }
  }
  EXPECT_EQ(loaded, params.size());
}

Tensor ids_of(const nn::json& row) {
  return from_vector(row["ids"].get<std::vector<int64_t>>(),
                     {1, static_cast<int64_t>(row["ids"].size())});
}

// Greedy continuation with a KV cache: the prompt once, then one token per step.
std::vector<int64_t> greedy(nn::CausalLMImpl& model, const Tensor& ids, int n) {
  NoGradGuard no_grad;
  nn::KVCache cache(ids.size(1) + n);
  Tensor logits = model.forward(ids, {.cache = &cache, .last_only = true});
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) {
    const int64_t next = argmax(logits.reshape({-1}), 0).item<int64_t>();
    out.push_back(next);
    if (i + 1 < n) logits = model.forward(from_vector<int64_t>({next}, {1, 1}), {.cache = &cache});
  }
  return out;
}

template <typename Model>
void check_against_transformers(Model& model, const std::string& name, double tol) {
  const nn::json rows = expected()[name];
  io::SafetensorsFile logits_file(lm_dir() + "/expected.safetensors");
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(name + " prompt " + std::to_string(i));
    const Tensor ids = ids_of(rows[i]);
    Tensor logits;
    {
      NoGradGuard no_grad;
      logits = model->forward(ids).reshape({ids.size(1), -1});
    }
    const Tensor want = logits_file.read(name + ".logits." + std::to_string(i));
    ASSERT_EQ(logits.shape(), want.shape());
    EXPECT_LT(max(abs(logits - want)).item<float>(),
              tol * std::max(1.0f, max(abs(want)).item<float>()))
        << "largest logit " << max(abs(want)).item<float>();
    EXPECT_EQ(greedy(*model, ids, 12), rows[i]["greedy"].get<std::vector<int64_t>>());
  }
}

nn::GPT2 tiny_gpt2() {
  nn::GPT2 model(nn::GPT2Config::from_file(lm_dir() + "/gpt2/config.json"));
  load_folder(*model, lm_dir() + "/gpt2", /*conv1d=*/true);
  return model;
}

nn::Llama tiny_llama(const std::string& folder) {
  nn::Llama model(nn::LlamaConfig::from_file(lm_dir() + "/" + folder + "/config.json"));
  load_folder(*model, lm_dir() + "/" + folder, /*conv1d=*/false);
  return model;
}

TEST(Models, GPT2MatchesTransformers) {
  nn::GPT2 model = tiny_gpt2();
  EXPECT_EQ(model->named_parameters().size(), 2u + 12u * 2u + 2u);  // lm_head tied: listed once
  check_against_transformers(model, "gpt2", 2e-4);
}

TEST(Models, LlamaMatchesTransformers) {  // bf16 sharded file, GQA, llama3 rope scaling
  nn::Llama model = tiny_llama("llama");
  EXPECT_EQ(model->model_config().rope_type, "llama3");
  EXPECT_EQ(model->model_config().kv_heads(), 2);
  check_against_transformers(model, "llama", 2e-4);
}

TEST(Models, TiedLlamaMatchesTransformers) {
  nn::Llama model = tiny_llama("llama_tied");
  EXPECT_EQ(model->named_parameters().size(), 1u + 9u + 1u);
  check_against_transformers(model, "llama_tied", 2e-4);
}

// The cache gives the full forward's logits: a prefix, then a chunk of several positions after
// it (the bottom-right causal mask), then single positions.
TEST(Models, KVCacheMatchesTheFullForward) {
  nn::Llama model = tiny_llama("llama");
  NoGradGuard no_grad;
  const Tensor ids = ids_of(expected()["llama"][0]);
  const int64_t T = ids.size(1);
  const Tensor full = model->forward(ids);
  nn::KVCache cache(T);
  const Tensor a = model->forward(ids.narrow(1, 0, 5), {.cache = &cache});
  const Tensor b = model->forward(ids.narrow(1, 5, 6), {.cache = &cache});
  const Tensor c = model->forward(ids.narrow(1, 11, T - 11), {.cache = &cache});
  EXPECT_EQ(cache.length(), T);
  const Tensor stitched = cat({a, b, c}, 1);
  EXPECT_LT(max(abs(stitched - full)).item<float>(), 2e-5);
}

// A left-padded batch computes what each row computes alone.
TEST(Models, LeftPaddingMatchesSeparateRows) {
  for (const std::string name : {"gpt2", "llama"}) {
    SCOPED_TRACE(name);
    nn::Module handle = name == "gpt2" ? nn::Module(tiny_gpt2()) : nn::Module(tiny_llama("llama"));
    auto& model = dynamic_cast<nn::CausalLMImpl&>(*handle);
    NoGradGuard no_grad;
    const nn::json rows = expected()[name];
    std::vector<int64_t> a = rows[0]["ids"].get<std::vector<int64_t>>();
    std::vector<int64_t> b = rows[1]["ids"].get<std::vector<int64_t>>();
    b.resize(b.size() - 4);  // shorter: padded on the left
    const int64_t T = static_cast<int64_t>(a.size()), pad = T - static_cast<int64_t>(b.size());
    std::vector<int64_t> batch = a, mask(static_cast<size_t>(2 * T), 1);
    for (int64_t j = 0; j < pad; ++j) batch.push_back(0), mask[static_cast<size_t>(T + j)] = 0;
    batch.insert(batch.end(), b.begin(), b.end());
    const Tensor am = from_vector(mask, {2, T});
    const Tensor both =
        model.forward(from_vector(batch, {2, T}), {.attention_mask = am, .last_only = true});
    const Tensor alone_a = model.forward(from_vector(a, {1, T}), {.last_only = true});
    const Tensor alone_b = model.forward(from_vector(b, {1, T - pad}), {.last_only = true});
    EXPECT_LT(max(abs(both.narrow(0, 0, 1) - alone_a)).item<float>(), 2e-5);
    EXPECT_LT(max(abs(both.narrow(0, 1, 1) - alone_b)).item<float>(), 2e-5);
    // and one more step through a cache, the mask growing by one real position
    nn::KVCache cache(T + 1);
    model.forward(from_vector(batch, {2, T}), {.cache = &cache, .attention_mask = am});
    const Tensor next = from_vector<int64_t>({7, 9}, {2, 1});
    const Tensor am2 = cat({am, ones({2, 1}, {.dtype = DType::i64})}, 1);
    const Tensor step = model.forward(next, {.cache = &cache, .attention_mask = am2});
    std::vector<int64_t> b2 = b;
    b2.push_back(9);
    const Tensor alone_b2 = model.forward(from_vector(b2, {1, T - pad + 1}), {.last_only = true});
    EXPECT_LT(max(abs(step.narrow(0, 1, 1) - alone_b2)).item<float>(), 2e-5);
  }
}

TEST(Models, ConfigErrorsNameTheField) {
  nn::json j = nn::GPT2Config{}.to_json();
  j["model_type"] = "bert";
  EXPECT_NE(error_of([&] { nn::GPT2Config::from_json(j); }).find("model_type \"bert\""),
            std::string::npos);
  j = nn::GPT2Config{}.to_json();
  j["n_head"] = "twelve";
  EXPECT_NE(error_of([&] { nn::GPT2Config::from_json(j); }).find("\"n_head\" is \"twelve\""),
            std::string::npos);
  j = nn::GPT2Config{}.to_json();
  j["activation_function"] = "relu";
  EXPECT_NE(error_of([&] { nn::GPT2Config::from_json(j); }).find("activation_function \"relu\""),
            std::string::npos);
  nn::json l = nn::LlamaConfig{}.to_json();
  l["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(error_of([&] { nn::LlamaConfig::from_json(l); }).find("rope type \"yarn\""),
            std::string::npos);
  l = nn::LlamaConfig{}.to_json();
  l["num_key_value_heads"] = 5;
  EXPECT_NE(error_of([&] { nn::LlamaConfig::from_json(l); }).find("not a multiple"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              nn::LlamaConfig::from_file("/nonexistent/config.json");
            }).find("cannot open /nonexistent/config.json"),
            std::string::npos);
  // the config round-trips
  const nn::LlamaConfig c = nn::LlamaConfig::from_file(lm_dir() + "/llama/config.json");
  const nn::LlamaConfig back = nn::LlamaConfig::from_json(c.to_json());
  EXPECT_EQ(back.inv_frequencies(), c.inv_frequencies());
  EXPECT_EQ(back.kv_heads(), 2);
}

TEST(Models, BadInputIsRefused) {
  nn::GPT2 model = tiny_gpt2();
  NoGradGuard no_grad;
  EXPECT_NE(error_of([&] {
              model->forward(from_vector<float>({1, 2}, {1, 2}));
            }).find("expected token ids [B, T], i64"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              model->forward(from_vector<int64_t>({1, 640}, {1, 2}));
            }).find("token id 640 is outside the vocabulary [0, 640)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              model->forward(zeros({1, 65}, {.dtype = DType::i64}));
            }).find("exceed the model's context of 64"),
            std::string::npos);
  nn::KVCache cache(4);
  EXPECT_NE(error_of([&] {
              model->forward(zeros({1, 5}, {.dtype = DType::i64}), {.cache = &cache});
            }).find("do not fit its capacity of 4"),
            std::string::npos);
  EXPECT_EQ(cache.length(), 0);
  EXPECT_NE(error_of([&] {
              model->forward(zeros({1, 2}, {.dtype = DType::i64}),
                             {.attention_mask = ones({1, 3}, {.dtype = DType::i64})});
            }).find("attention_mask [1, 3] (expected [1, 2]"),
            std::string::npos);
  {
    set_grad_mode(true);
    nn::KVCache c2(8);
    EXPECT_NE(error_of([&] {
                model->forward(zeros({1, 2}, {.dtype = DType::i64}), {.cache = &c2});
              }).find("while gradients are recorded"),
              std::string::npos);
    set_grad_mode(false);
  }
  EXPECT_NE(error_of([] { nn::KVCache bad(0); }).find("capacity 0"), std::string::npos);
}

}  // namespace
