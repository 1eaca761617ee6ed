// tests/test_models.cpp — nn::GPT2 and nn::Llama against transformers' logits and greedy
// continuations of the same weights (tests/data/lm, written by tests/gen_lm_fixtures.py), the
// KV cache against the full forward, left padding, and their bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/models/gpt2.hpp"
#include "ember/models/llama.hpp"
#include "ember/models/pretrained.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "io_test_util.hpp"
#include "lm_test_util.hpp"

namespace {

using namespace ember;
using ember::test_util::error_of;

using ember_test::lm_dir;
using ember_test::lm_expected;

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
    if (i + 1 < n)
      logits =
          model.forward(from_vector<int64_t>({next}, {1, 1}).to(ids.device()), {.cache = &cache});
  }
  return out;
}

template <typename Model>
void check_against_transformers(Model& model, const std::string& name, double tol,
                                Device device = Device::cpu()) {
  const nn::json rows = lm_expected()[name];
  io::SafetensorsFile logits_file(lm_dir() + "/expected.safetensors");
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(name + " prompt " + std::to_string(i));
    const Tensor ids = ids_of(rows[i]).to(device);
    Tensor logits;
    {
      NoGradGuard no_grad;
      logits = model->forward(ids).reshape({ids.size(1), -1}).to(Device::cpu());
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
  nn::CausalLM model = models::from_pretrained(lm_dir() + "/gpt2");
  return nn::GPT2(std::dynamic_pointer_cast<nn::GPT2Impl>(model.ptr()));
}

nn::Llama tiny_llama(const std::string& folder) {
  nn::CausalLM model = models::from_pretrained(lm_dir() + "/" + folder);
  return nn::Llama(std::dynamic_pointer_cast<nn::LlamaImpl>(model.ptr()));
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
  const Tensor ids = ids_of(lm_expected()["llama"][0]);
  const int64_t T = ids.size(1);
  const Tensor full = model->forward(ids);
  nn::KVCache cache(T);
  const Tensor a = model->forward(ids.narrow(1, 0, 5), {.cache = &cache});
  const Tensor b = model->forward(ids.narrow(1, 5, 6), {.cache = &cache});
  const Tensor c = model->forward(ids.narrow(1, 11, T - 11), {.cache = &cache});
  EXPECT_EQ(cache.length(), T);
  const Tensor stitched = cat({a, b, c}, 1);
  EXPECT_LT(max(abs(stitched - full)).item<float>(), 2e-5);
  // the first chunk attends over its own k and v (a layout independent of the capacity); later
  // chunks over the cache's views, which hold the first chunk's rows
  nn::KVCache fresh(40);
  const Tensor k = randn({1, 2, 3, 4}), v = randn({1, 2, 3, 4});
  const auto [k0, v0] = fresh.append(0, k, v);
  EXPECT_TRUE(k0.is_same(k));
  EXPECT_TRUE(v0.is_same(v));
  fresh.advance(3);
  const auto [k1, v1] = fresh.append(0, randn({1, 2, 1, 4}), randn({1, 2, 1, 4}));
  EXPECT_EQ(k1.shape(), (Shape{1, 2, 4, 4}));
  EXPECT_EQ(max(abs(k1.narrow(2, 0, 3) - k)).item<float>(), 0.f);
  EXPECT_EQ(max(abs(v1.narrow(2, 0, 3) - v)).item<float>(), 0.f);
}

// A left-padded batch computes what each row computes alone.
TEST(Models, LeftPaddingMatchesSeparateRows) {
  for (const std::string name : {"gpt2", "llama"}) {
    SCOPED_TRACE(name);
    nn::Module handle = name == "gpt2" ? nn::Module(tiny_gpt2()) : nn::Module(tiny_llama("llama"));
    auto& model = dynamic_cast<nn::CausalLMImpl&>(*handle);
    NoGradGuard no_grad;
    const nn::json rows = lm_expected()[name];
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

// A step told its positions on the device (cache_position, position_ids: what a captured
// decode step uses) computes what the step that reads the cache's length computes, for a
// plain and a left-padded batch, and leaves the cache's host length alone.
TEST(Models, DevicePositionsMatchTheCachesLength) {
  for (const std::string name : {"gpt2", "llama"}) {
    SCOPED_TRACE(name);
    nn::Module handle = name == "gpt2" ? nn::Module(tiny_gpt2()) : nn::Module(tiny_llama("llama"));
    auto& model = dynamic_cast<nn::CausalLMImpl&>(*handle);
    NoGradGuard no_grad;
    std::vector<int64_t> ids = lm_expected()[name][0]["ids"].get<std::vector<int64_t>>();
    const int64_t T = static_cast<int64_t>(ids.size());
    std::vector<int64_t> mask(static_cast<size_t>(2 * T), 1);
    mask[static_cast<size_t>(T)] = mask[static_cast<size_t>(T + 1)] = 0;  // row 1: 2 pads
    std::vector<int64_t> batch = ids;
    batch.insert(batch.end(), ids.begin(), ids.end());
    const Tensor am = from_vector(mask, {2, T});
    nn::KVCache host(T + 3), device(T + 3);
    model.forward(from_vector(batch, {2, T}), {.cache = &host, .attention_mask = am});
    model.forward(from_vector(batch, {2, T}), {.cache = &device, .attention_mask = am});
    Tensor grown = am;
    for (int64_t s = 0; s < 3; ++s) {
      const Tensor next = from_vector<int64_t>({11 + s, 5 + s}, {2, 1});
      grown = cat({grown, ones({2, 1}, {.dtype = DType::i64})}, 1);
      const Tensor want = model.forward(next, {.cache = &host, .attention_mask = grown});
      const Tensor got =
          model.forward(next, {.cache = &device,
                               .attention_mask = am,  // the prompt's: later keys count as real
                               .cache_position = from_vector<int64_t>({T + s}, {1}),
                               .position_ids = from_vector<int64_t>({T + s, T - 2 + s}, {2, 1})});
      EXPECT_LT(max(abs(got - want)).item<float>(), 1e-5) << "step " << s;
    }
    EXPECT_EQ(device.length(), T);  // written, not advanced
    EXPECT_EQ(host.length(), T + 3);
    EXPECT_NE(error_of([&] {
                model.forward(from_vector<int64_t>({1, 2}, {2, 1}),
                              {.cache = &device,
                               .attention_mask = am,
                               .cache_position = from_vector<int64_t>({T}, {1})});
              }).find("no position_ids"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                model.forward(from_vector<int64_t>({1, 2}, {2, 1}),
                              {.cache_position = from_vector<int64_t>({T}, {1})});
              }).find("cache_position without a cache"),
              std::string::npos);
  }
}

// save_pretrained writes transformers' layout (Conv1D weights, no tied head, config.json) and
// from_pretrained reads it back to the same logits, bitwise; a bf16 model stays within bf16.
TEST(Models, SavePretrainedRoundTrips) {
  nn::GPT2 model = tiny_gpt2();
  ember_test::ScratchDir dir;
  models::save_pretrained(model, dir.file("tuned"));
  io::SafetensorsFile file(dir.file("tuned/model.safetensors"));
  EXPECT_FALSE(file.contains("lm_head.weight"));
  ASSERT_TRUE(file.contains("transformer.h.0.attn.c_attn.weight"));
  EXPECT_EQ(file.find("transformer.h.0.attn.c_attn.weight")->shape, (Shape{32, 96}));
  EXPECT_EQ(nn::GPT2Config::from_file(dir.file("tuned/config.json")).to_json(),
            model->model_config().to_json());
  nn::CausalLM back = models::from_pretrained(dir.file("tuned"));
  NoGradGuard no_grad;
  const Tensor ids = ids_of(lm_expected()["gpt2"][0]);
  EXPECT_EQ(max(abs(back->forward(ids) - model->forward(ids))).item<float>(), 0.0f);
  // bf16 parameters hold the bf16 file's values exactly
  nn::CausalLM half = models::from_pretrained(lm_dir() + "/llama", {.dtype = DType::bf16});
  const Tensor embed = half->named_parameters().front().second;  // a copy: the list is a temporary
  EXPECT_EQ(embed.dtype(), DType::bf16);
  io::SafetensorsFile shard(lm_dir() + "/llama/model-00001-of-00003.safetensors");
  ASSERT_TRUE(shard.contains("model.embed_tokens.weight"));
  EXPECT_EQ(max(abs(embed.to(DType::f32) - shard.read("model.embed_tokens.weight").to(DType::f32)))
                .item<float>(),
            0.0f);
}

// On the GPU: f32 logits and greedy continuations as on the CPU; bf16 within bf16's reach.
TEST(Models, CudaMatchesTransformers) {
  SKIP_WITHOUT_CUDA();
  for (const std::string name : {"gpt2", "llama"}) {
    SCOPED_TRACE(name);
    nn::CausalLM model =
        models::from_pretrained(lm_dir() + "/" + name, {.device = Device::cuda(0)});
    check_against_transformers(model, name, 2e-4, Device::cuda(0));
    nn::CausalLM half = models::from_pretrained(lm_dir() + "/" + name,
                                                {.device = Device::cuda(0), .dtype = DType::bf16});
    NoGradGuard no_grad;
    const Tensor ids = ids_of(lm_expected()[name][0]).to(Device::cuda(0));
    const Tensor want =
        io::SafetensorsFile(lm_dir() + "/expected.safetensors").read(name + ".logits.0");
    const Tensor got =
        half->forward(ids).reshape({ids.size(1), -1}).to(DType::f32).to(Device::cpu());
    EXPECT_LT(max(abs(got - want)).item<float>(), 0.1f * max(abs(want)).item<float>());
  }
}

TEST(Models, FromPretrainedRefusesWhatItCannotLoad) {
  ember_test::ScratchDir dir;
  std::filesystem::create_directories(dir.file("bert"));
  std::ofstream(dir.file("bert/config.json")) << R"({"model_type": "bert"})";
  EXPECT_NE(error_of([&] {
              models::from_pretrained(dir.file("bert"));
            }).find("model_type \"bert\" (expected gpt2 or llama)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { models::from_pretrained(dir.file("none")); }).find("is not a folder"),
            std::string::npos);
  // a GPT-2 config wider than its weights: every mismatched name listed, no model returned
  std::filesystem::create_directories(dir.file("wide"));
  nn::json c = nn::GPT2Config::from_file(lm_dir() + "/gpt2/config.json").to_json();
  c["n_layer"] = 3;
  std::ofstream(dir.file("wide/config.json")) << c.dump();
  std::filesystem::copy_file(lm_dir() + "/gpt2/model.safetensors",
                             dir.file("wide/model.safetensors"));
  const std::string e = error_of([&] { models::from_pretrained(dir.file("wide")); });
  EXPECT_NE(e.find("transformer.h.2.attn.c_attn.weight"), std::string::npos) << e;
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
