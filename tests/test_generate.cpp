// tests/test_generate.cpp — models::generate against transformers' greedy continuations
// (tests/data/lm), left-padded batches against single rows, the sampling controls, and
// multinomial's distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/models/generate.hpp"
#include "ember/models/pretrained.hpp"
#include "ember/sampling.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "lm_test_util.hpp"

namespace {

using namespace ember;
using ember::test_util::error_of;

using ember_test::lm_dir;
using ember_test::lm_expected;

std::vector<int64_t> row_ids(const std::string& model, int row) {
  return ember_test::lm_prompt(model, row);
}

TEST(Generate, GreedyEqualsTransformers) {
  for (const std::string name : {"gpt2", "llama", "llama_tied"}) {
    SCOPED_TRACE(name);
    nn::CausalLM model = models::from_pretrained(lm_dir() + "/" + name);
    const nn::json rows = lm_expected()[name];
    for (const auto& row : rows) {
      const auto out =
          models::generate(model, {row["ids"].get<std::vector<int64_t>>()}, {.max_new_tokens = 12});
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0], row["greedy"].get<std::vector<int64_t>>());
    }
  }
}

// Rows of different lengths, left padded into one batch, continue as they do alone.
TEST(Generate, LeftPaddedBatchEqualsSingleRows) {
  for (const std::string name : {"gpt2", "llama"}) {
    SCOPED_TRACE(name);
    nn::CausalLM model = models::from_pretrained(lm_dir() + "/" + name);
    std::vector<int64_t> a = row_ids(name, 0), b = row_ids(name, 1);
    b.resize(b.size() - 5);
    const auto batch = models::generate(model, {a, b}, {.max_new_tokens = 10});
    EXPECT_EQ(batch[0], models::generate(model, {a}, {.max_new_tokens = 10})[0]);
    EXPECT_EQ(batch[1], models::generate(model, {b}, {.max_new_tokens = 10})[0]);
  }
}

TEST(Generate, StopTokensAndStreaming) {
  nn::CausalLM model = models::from_pretrained(lm_dir() + "/gpt2");
  const auto greedy = lm_expected()["gpt2"][0]["greedy"].get<std::vector<int64_t>>();
  std::vector<int64_t> streamed;
  const auto out = models::generate(
      model, {row_ids("gpt2", 0)},
      {.max_new_tokens = 12, .stop_tokens = {greedy[2]}, .on_token = [&](int64_t row, int64_t t) {
         EXPECT_EQ(row, 0);
         streamed.push_back(t);
       }});
  const std::vector<int64_t> want(greedy.begin(), greedy.begin() + 3);  // the stop token included
  EXPECT_EQ(out[0], want);
  EXPECT_EQ(streamed, want);
}

// Rows that stop at different steps: each row's tokens and stream end at its own stop, while
// the device decodes ahead of the host (Note [Decoding ahead of the host]).
TEST(Generate, RowsStopApartWhileDecodingAhead) {
  nn::CausalLM model = models::from_pretrained(lm_dir() + "/gpt2");
  const std::vector<int64_t> a = row_ids("gpt2", 0), b = row_ids("gpt2", 1);
  const auto alone_a = models::generate(model, {a}, {.max_new_tokens = 20})[0];
  const auto alone_b = models::generate(model, {b}, {.max_new_tokens = 20})[0];
  ASSERT_EQ(alone_a.size(), 20u);
  const int64_t stop = alone_a[1];
  auto until_stop = [&](const std::vector<int64_t>& row) {
    const auto it = std::find(row.begin(), row.end(), stop);
    return std::vector<int64_t>(row.begin(), it == row.end() ? row.end() : it + 1);
  };
  std::vector<std::vector<int64_t>> streamed(2);
  const auto out = models::generate(
      model, {a, b},
      {.max_new_tokens = 20, .stop_tokens = {stop}, .on_token = [&](int64_t row, int64_t t) {
         streamed[static_cast<size_t>(row)].push_back(t);
       }});
  EXPECT_EQ(out[0], until_stop(alone_a));
  EXPECT_EQ(out[0].size(), 2u);
  EXPECT_EQ(out[1], until_stop(alone_b));
  EXPECT_EQ(streamed, out);
}

// The repetition penalty kept on the device equals a plain loop that applies it on the host
// to the logits of the whole sequence, step by step.
TEST(Generate, RepetitionPenaltyEqualsAHostLoop) {
  nn::CausalLM model = models::from_pretrained(lm_dir() + "/gpt2");
  std::vector<int64_t> seq = row_ids("gpt2", 0);
  const size_t prompt = seq.size();
  const double penalty = 1.5;
  const auto got =
      models::generate(model, {seq}, {.max_new_tokens = 30, .repetition_penalty = penalty})[0];
  NoGradGuard no_grad;
  for (int step = 0; step < 30; ++step) {
    const Tensor all = model->forward(from_vector(seq, {1, static_cast<int64_t>(seq.size())}));
    std::vector<float> last =
        all.narrow(1, all.size(1) - 1, 1).reshape({-1}).to(DType::f32).to_vector<float>();
    for (int64_t t : std::set<int64_t>(seq.begin(), seq.end())) {
      float& v = last[static_cast<size_t>(t)];
      v = v > 0.f ? static_cast<float>(v / penalty) : static_cast<float>(v * penalty);
    }
    seq.push_back(std::max_element(last.begin(), last.end()) - last.begin());
  }
  EXPECT_EQ(got, std::vector<int64_t>(seq.begin() + static_cast<int64_t>(prompt), seq.end()));
  // the penalty changed the continuation (else this test would not see it)
  EXPECT_NE(got, models::generate(model, {row_ids("gpt2", 0)}, {.max_new_tokens = 30})[0]);
}

TEST(Generate, SamplingControls) {
  nn::CausalLM model = models::from_pretrained(lm_dir() + "/llama");
  const auto prompt = row_ids("llama", 0);
  const auto greedy = lm_expected()["llama"][0]["greedy"].get<std::vector<int64_t>>();
  // top_k = 1 and a vanishing top_p leave only the most likely token: greedy
  EXPECT_EQ(models::generate(model, {prompt},
                             {.max_new_tokens = 12, .do_sample = true, .top_k = 1, .seed = 3})[0],
            greedy);
  EXPECT_EQ(
      models::generate(model, {prompt},
                       {.max_new_tokens = 12, .do_sample = true, .top_p = 1e-9, .seed = 3})[0],
      greedy);
  // a seed repeats a draw; the draw is not greedy at a high temperature
  const models::GenerationOptions hot{
      .max_new_tokens = 12, .do_sample = true, .temperature = 3.0, .seed = 11};
  const auto s1 = models::generate(model, {prompt}, hot)[0];
  EXPECT_EQ(models::generate(model, {prompt}, hot)[0], s1);
  EXPECT_NE(s1, greedy);
  // a heavy repetition penalty: no token of the prompt or of the output comes twice
  const auto fresh =
      models::generate(model, {prompt}, {.max_new_tokens = 12, .repetition_penalty = 1e6})[0];
  std::set<int64_t> seen(prompt.begin(), prompt.end());
  for (int64_t t : fresh) EXPECT_TRUE(seen.insert(t).second) << t;
  // top_k = 2: every sampled step is one of the two most likely tokens
  const Tensor logits = from_vector<float>({0.f, 5.f, 4.f, -1.f, 3.f}, {1, 5});
  manual_seed(5);
  for (int i = 0; i < 200; ++i) {
    const int64_t t =
        models::sample_next(logits, {.do_sample = true, .temperature = 10.0, .top_k = 2})
            .item<int64_t>();
    EXPECT_TRUE(t == 1 || t == 2) << t;
  }
}

TEST(Generate, BadInputIsRefused) {
  nn::CausalLM model = models::from_pretrained(lm_dir() + "/gpt2");
  EXPECT_NE(error_of([&] { models::generate(model, {}); }).find("no prompts"), std::string::npos);
  EXPECT_NE(error_of([&] { models::generate(model, {{}}); }).find("prompt 0 is empty"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              models::generate(model, {{1, 2, 640}});
            }).find("token id 640 outside the vocabulary [0, 640)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              models::generate(model, {{1, 2}}, {.max_new_tokens = 63});
            }).find("exceed the model's context of 64"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              models::generate(model, {{1}}, {.do_sample = true, .temperature = 0.0});
            }).find("temperature 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { models::generate(model, {{1}}, {.top_p = 0.0}); }).find("top_p 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              models::generate(nn::CausalLM(std::shared_ptr<nn::CausalLMImpl>()), {{1}});
            }).find("empty model handle"),
            std::string::npos);
}

// On the GPU: greedy as transformers, a padded batch as single rows, bf16 under autocast and
// with bf16 weights, seeded sampling repeated.
TEST(Generate, CudaGreedyBatchAndBf16) {
  SKIP_WITHOUT_CUDA();
  for (const std::string name : {"gpt2", "llama"}) {
    SCOPED_TRACE(name);
    nn::CausalLM model =
        models::from_pretrained(lm_dir() + "/" + name, {.device = Device::cuda(0)});
    const auto row = lm_expected()[name][0];
    EXPECT_EQ(models::generate(model, {row["ids"].get<std::vector<int64_t>>()},
                               {.max_new_tokens = 12})[0],
              row["greedy"].get<std::vector<int64_t>>());
    std::vector<int64_t> a = row_ids(name, 0), b = row_ids(name, 1);
    b.resize(b.size() - 5);
    const auto batch = models::generate(model, {a, b}, {.max_new_tokens = 10});
    EXPECT_EQ(batch[1], models::generate(model, {b}, {.max_new_tokens = 10})[0]);
    const models::GenerationOptions hot{
        .max_new_tokens = 12, .do_sample = true, .top_p = 0.9, .seed = 4};
    EXPECT_EQ(models::generate(model, {a}, hot)[0], models::generate(model, {a}, hot)[0]);
    {
      AutocastGuard autocast(DType::bf16);
      EXPECT_EQ(models::generate(model, {a}, {.max_new_tokens = 12})[0].size(), 12u);
    }
    nn::CausalLM half = models::from_pretrained(lm_dir() + "/" + name,
                                                {.device = Device::cuda(0), .dtype = DType::bf16});
    EXPECT_EQ(models::generate(half, {a, b}, {.max_new_tokens = 12})[0].size(), 12u);
  }
  manual_seed(2);
  const Tensor p = from_vector<float>({0.1f, 0.f, 0.6f, 0.3f}, {4});
  const std::vector<int64_t> cpu = multinomial(p, 64, true).to_vector<int64_t>();
  manual_seed(2);
  EXPECT_EQ(multinomial(p.to(Device::cuda(0)), 64, true).to(Device::cpu()).to_vector<int64_t>(),
            cpu);
}

// A captured decode step generates what the eager one does: greedy, a left-padded batch, bf16
// weights, and sampling with a seed.
TEST(Generate, CudaCapturedDecodeEqualsEager) {
  SKIP_WITHOUT_CUDA();
  for (const std::string name : {"gpt2", "llama"}) {
    SCOPED_TRACE(name);
    for (const DType dtype : {DType::f32, DType::bf16}) {
      nn::CausalLM model = models::from_pretrained(lm_dir() + "/" + name,
                                                   {.device = Device::cuda(0), .dtype = dtype});
      std::vector<int64_t> a = row_ids(name, 0), b = row_ids(name, 1);
      b.resize(b.size() - 5);
      // Greedy picks inside the graph (and stops on a token it made, read ahead); with a
      // repetition penalty or sampling, outside it.
      const int64_t made = models::generate(model, {a}, {.max_new_tokens = 4})[0][3];
      for (const models::GenerationOptions& o :
           {models::GenerationOptions{.max_new_tokens = 12},
            models::GenerationOptions{.max_new_tokens = 12, .stop_tokens = {made}},
            models::GenerationOptions{.max_new_tokens = 12, .repetition_penalty = 1.3},
            models::GenerationOptions{
                .max_new_tokens = 12, .do_sample = true, .top_k = 20, .seed = 4}}) {
        models::GenerationOptions captured = o;
        captured.capture = true;
        EXPECT_EQ(models::generate(model, {a, b}, captured), models::generate(model, {a, b}, o))
            << dtype_name(dtype);
        EXPECT_EQ(models::generate(model, {a}, captured), models::generate(model, {a}, o));
      }
    }
  }
  nn::CausalLM cpu = models::from_pretrained(lm_dir() + "/gpt2");
  EXPECT_NE(error_of([&] {
              models::generate(cpu, {row_ids("gpt2", 0)}, {.capture = true});
            }).find("expected a CUDA device"),
            std::string::npos);
}

TEST(Multinomial, DrawsInProportion) {
  manual_seed(1);
  const Tensor p = from_vector<float>({0.1f, 0.f, 0.6f, 0.3f}, {4});
  const std::vector<int64_t> draws = multinomial(p, 20000, true).to_vector<int64_t>();
  std::vector<double> freq(4, 0.0);
  for (int64_t d : draws) freq[static_cast<size_t>(d)] += 1.0 / 20000.0;
  EXPECT_NEAR(freq[0], 0.1, 0.015);
  EXPECT_EQ(freq[1], 0.0);
  EXPECT_NEAR(freq[2], 0.6, 0.015);
  EXPECT_NEAR(freq[3], 0.3, 0.015);
  // without replacement: distinct, never the zero weight, the heavy one first most often
  int first_heavy = 0;
  for (int i = 0; i < 400; ++i) {
    const std::vector<int64_t> d = multinomial(p.unsqueeze(0), 3, false).to_vector<int64_t>();
    EXPECT_EQ(std::set<int64_t>(d.begin(), d.end()).size(), 3u);
    EXPECT_EQ(std::count(d.begin(), d.end(), 1), 0);
    first_heavy += d[0] == 2;
  }
  EXPECT_NEAR(first_heavy / 400.0, 0.6, 0.08);
  // a seed repeats the draw
  manual_seed(9);
  const std::vector<int64_t> a = multinomial(p, 50, true).to_vector<int64_t>();
  manual_seed(9);
  EXPECT_EQ(multinomial(p, 50, true).to_vector<int64_t>(), a);
}

TEST(Multinomial, BadWeightsAreRefused) {
  EXPECT_NE(error_of([] {
              multinomial(from_vector<float>({0.5f, -0.1f}, {2}), 1);
            }).find("negative, NaN or infinite"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              multinomial(zeros({2, 3}), 1);
            }).find("row 0 of probs has no positive weight"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              multinomial(from_vector<float>({0.5f, 0.f, 0.5f}, {3}), 3);
            }).find("3 distinct samples from row 0 with 2 positive weights"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              multinomial(from_vector<float>({1.f}, {1}), 2);
            }).find("2 distinct samples from 1 categories"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              multinomial(from_vector<int64_t>({1}, {1}), 1);
            }).find("expected floating weights"),
            std::string::npos);
}

}  // namespace
