// bench/bench_generate.cpp — text generation with GPT-2 124M (random weights, bf16) on the GPU:
// ember's models::generate against transformers' generate() in the same run (issue 33).
//
//   build/bench/bench_generate [--new 256] [--prompt 128] [--batches 1,16] [--profile]
//   build/bench/bench_generate --hf gpt2|llama1b [--new 256] [--prompt 128]
//   build/bench/bench_generate --ember-only [--model gpt2|llama1b] [--new 256] [--prompt 128]
//                              [--batches 1]
//
// --ember-only times ember alone (for comparing builds of ember: no transformers, no
// validation against it; captured tokens must still equal eager ones): the median of five
// generations, eager and captured, per batch. --model llama1b makes the Llama 3.2 1B shape of
// --hf llama1b in ember itself (random bf16 weights drawn on the GPU, no transformers).
//
// Validation first: ember saves its f32 model with models::save_pretrained, transformers loads
// that folder with GPT2LMHeadModel.from_pretrained (so the saved layout is checked too), and the
// two f32 logits of the prompt must agree within 1e-3. Then both generate greedily in bf16,
// every run making all the new tokens (no stop token), batch 1 and 16: tokens/s counts new
// tokens (batch · new / seconds), per-token latency is the run's time / new (prefill included;
// the prefill alone is reported too), eagerly and with the decode step captured (its tokens must
// equal the eager ones). Prints a JSON line per batch and a table on stderr.
//
// --hf: a full-size model made by transformers (bench/torch/pretrained_bench.py: GPT-2 124M in
// f32, or a Llama 3.2 1B shaped model in bf16, random weights): ember loads the folder with
// models::from_pretrained (timed again warm: GB/s), its logits of the prompt must match
// transformers' (f32: every logit within 1e-3; bf16, against transformers' model loaded in bf16:
// relative RMS under 5%, the same top token at 85% of the positions), then greedy decoding at
// batch 1, eager and captured, against transformers' generate() and the memory-bandwidth bound
// (the bf16 weights read once per token at 4.8 TB/s).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "ember/ember.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/models/generate.hpp"
#include "ember/models/gpt2.hpp"
#include "ember/models/llama.hpp"
#include "ember/models/pretrained.hpp"
#include "ember/nn/init.hpp"
#include "ember/train/capture.hpp"
#include "torch_reference.hpp"

using namespace ember;

namespace {

double seconds_of(const std::function<void()>& fn) {
  synchronize(Device::cuda(0));
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  synchronize(Device::cuda(0));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --hf: a full-size model made by transformers (see the top of this file).
int run_hf(const std::string& arch, int64_t prompt_len, int64_t new_tokens) {
  const Device gpu = Device::cuda(0);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("ember_bench_hf_" + arch)).string();
  const nn::json ref = bench::run_torch_script(
      "bench_generate", "pretrained_bench.py --arch " + arch + " --out " + dir + " --prompt " +
                            std::to_string(prompt_len) + " --new " + std::to_string(new_tokens));
  if (ref.is_null()) return 1;
  const bool bf16 = arch != "gpt2";
  std::vector<int64_t> prompt(static_cast<size_t>(prompt_len));
  const io::SafetensorsFile ref_logits(dir + "/hf_logits.safetensors");
  // ember's logits of the prompt against transformers': max |diff|, relative RMS, and the share
  // of positions with the same top token.
  struct Match {
    double max_diff, rel_rms, agree;
  };
  auto compare = [&](nn::CausalLM& m, const char* name) {
    NoGradGuard no_grad;
    const int64_t V = m->vocab_size();
    for (int64_t i = 0; i < prompt_len; ++i) prompt[static_cast<size_t>(i)] = (i * 7919 + 13) % V;
    const Tensor mine = m->forward(from_vector(prompt, {1, prompt_len}, {.device = gpu}))
                            .reshape({prompt_len, V})
                            .to(DType::f32)
                            .to(Device::cpu());
    const Tensor theirs = ref_logits.read(name);
    return Match{
        max(abs(mine - theirs)).item<double>(),
        std::sqrt(mean(square(mine - theirs)).item<double>() / mean(square(theirs)).item<double>()),
        mean(eq(argmax(mine, 1), argmax(theirs, 1)).to(DType::f64)).item<double>()};
  };
  // f32: the same weights computed in f32 on both sides, every logit within 1e-3 (GPT-2's file
  // is f32; the Llama's bf16 values are widened exactly).
  Match tight{};
  {
    nn::CausalLM f32_model = models::from_pretrained(dir, {.device = gpu, .dtype = DType::f32});
    f32_model->eval();
    tight = compare(f32_model, bf16 ? "logits_f32" : "logits");
  }
  // The model in the file's dtype, loaded warm and timed.
  const models::PretrainedOptions load{.device = gpu, .dtype = bf16 ? DType::bf16 : DType::f32};
  std::optional<nn::CausalLM> loaded;
  const double load_s = seconds_of([&] { loaded.emplace(models::from_pretrained(dir, load)); });
  nn::CausalLM model = *loaded;
  int64_t file_bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".safetensors" && e.path().filename() != "hf_logits.safetensors")
      file_bytes += static_cast<int64_t>(e.file_size());
  model->eval();
  if (!bf16) model->to(DType::bf16);  // GPT-2's f32 file: generation runs in bf16
  // bf16 against transformers' model loaded in bf16 (both sides round activations to bf16, in
  // different places): reported, and checked loosely (relative RMS under 5%, the same top token
  // at 85% of the positions).
  const Match half = compare(model, "logits_bf16");
  const bool ok = tight.max_diff <= 1e-3 && half.rel_rms < 0.05 && half.agree >= 0.85;
  std::fprintf(stderr,
               "bench_generate --hf %s: %lld parameters; f32 logits differ from transformers' by "
               "at most %.3g (needs <= 1e-3); bf16: relative RMS %.3g, max %.3g, same top token "
               "at %.1f%% of positions; loaded %.2f GB warm in %.3f s: %.1f GB/s\n",
               arch.c_str(), static_cast<long long>(ref["params"].get<int64_t>()), tight.max_diff,
               half.rel_rms, half.max_diff, 100.0 * half.agree,
               static_cast<double>(file_bytes) / 1e9, load_s,
               static_cast<double>(file_bytes) / 1e9 / load_s);
  if (!ok) {
    std::fprintf(stderr, "bench_generate: VALIDATION FAILED\n");
    return 1;
  }
  models::generate(model, {prompt}, {.max_new_tokens = 8});
  models::generate(model, {prompt}, {.max_new_tokens = 8, .capture = true});
  std::vector<std::vector<int64_t>> eager, captured;
  const double t = seconds_of(
      [&] { eager = models::generate(model, {prompt}, {.max_new_tokens = new_tokens}); });
  const double tc = seconds_of([&] {
    captured = models::generate(model, {prompt}, {.max_new_tokens = new_tokens, .capture = true});
  });
  if (captured != eager || eager[0].size() != static_cast<size_t>(new_tokens)) {
    std::fprintf(stderr, "bench_generate: VALIDATION FAILED: captured or short decode\n");
    return 1;
  }
  const double bytes = 2.0 * static_cast<double>(ref["params"].get<int64_t>());
  const double bound = 4.8e12 / bytes;  // tokens/s if each token reads the weights once
  const double tps = static_cast<double>(new_tokens) / t,
               ctps = static_cast<double>(new_tokens) / tc;
  const double ref_tps = ref["tokens_per_s"].get<double>();
  std::fprintf(stderr,
               "bench_generate --hf %s (bf16, batch 1, prompt %lld, %lld new, greedy): ember "
               "%.0f tok/s (%.3f ms), captured %.0f tok/s (%.3f ms, %.0f%% of the %.0f tok/s "
               "bandwidth bound), transformers %.1f tok/s (%.1fx, captured %.1fx)\n",
               arch.c_str(), static_cast<long long>(prompt_len), static_cast<long long>(new_tokens),
               tps, 1e3 / tps, ctps, 1e3 / ctps, 100.0 * ctps / bound, bound, ref_tps,
               tps / ref_tps, ctps / ref_tps);
  std::printf("%s\n", nn::json{{"bench", "generate_hf_" + arch},
                               {"params", ref["params"]},
                               {"f32_logits_max_abs_diff", tight.max_diff},
                               {"bf16_logits_relative_rms", half.rel_rms},
                               {"bf16_top_token_agreement", half.agree},
                               {"load_gb_per_s", static_cast<double>(file_bytes) / 1e9 / load_s},
                               {"ember_tokens_per_s", tps},
                               {"ember_captured_tokens_per_s", ctps},
                               {"bandwidth_bound_tokens_per_s", bound},
                               {"captured_fraction_of_bound", ctps / bound},
                               {"transformers_tokens_per_s", ref_tps}}
                          .dump()
                          .c_str());
  return 0;
}

// --profile also times single kernels of a decode step inside a CUDA graph (kReps calls of one
// op captured, the replay's time divided by kReps: the op's device time with no host in it).
void time_decode_kernels(Device gpu) {
  NoGradGuard no_grad;
  constexpr int kReps = 50;
  const TensorOptions bf{.dtype = DType::bf16, .device = gpu};
  const Tensor x = randn({1, 1, 768}).to(DType::bf16).to(gpu);
  const Tensor w_qkv = randn({2304, 768}).to(DType::bf16).to(gpu), b_qkv = zeros({2304}, bf),
               w_fc = randn({3072, 768}).to(DType::bf16).to(gpu),
               w_head = randn({50257, 768}).to(DType::bf16).to(gpu), g = ones({768}, bf),
               h = randn({1, 1, 3072}).to(DType::bf16).to(gpu),
               w_proj = randn({768, 3072}).to(DType::bf16).to(gpu), z = zeros({768}, bf);
  const Tensor q = randn({1, 12, 1, 64}).to(DType::bf16).to(gpu),
               k = randn({1, 12, 1, 64}).to(DType::bf16).to(gpu);
  Tensor kc = randn({1, 12, 384, 64}).to(DType::bf16).to(gpu),
         vc = randn({1, 12, 384, 64}).to(DType::bf16).to(gpu);
  const Tensor len = full({1}, 200.0, {.dtype = DType::i64, .device = gpu});
  const Tensor len16 = full({1}, 16.0, {.dtype = DType::i64, .device = gpu});
  const Tensor len380 = full({1}, 380.0, {.dtype = DType::i64, .device = gpu});
  const std::vector<std::pair<const char*, std::function<Tensor()>>> ops = {
      {"linear 768->2304 +bias", [&] { return linear(x, w_qkv, b_qkv); }},
      {"linear 768->3072 gelu", [&] { return linear(x, w_fc, Tensor(), Activation::gelu_tanh); }},
      {"linear 768->50257 (head)", [&] { return linear(x, w_head); }},
      {"layer_norm, then the head", [&] { return linear(layer_norm(x, {768}, g, z), w_head); }},
      {"layer_norm_linear 768->50257", [&] { return layer_norm_linear(x, g, z, 1e-5, w_head); }},
      {"layer_norm_linear 768->2304",
       [&] { return layer_norm_linear(x, g, z, 1e-5, w_qkv, b_qkv); }},
      {"linear 3072->768 +residual", [&] { return linear(h, w_proj, Tensor(), x); }},
      {"attention_with_kv_cache S=16",
       [&] { return attention_with_kv_cache(q, kc, vc, k, k, len16); }},
      {"attention_with_kv_cache S=200",
       [&] { return attention_with_kv_cache(q, kc, vc, k, k, len); }},
      {"attention_with_kv_cache S=380",
       [&] { return attention_with_kv_cache(q, kc, vc, k, k, len380); }},
      {"layer_norm bf16 768", [&] { return layer_norm(x, {768}, g, z); }},
      {"add bf16 768", [&] { return x + x; }},
  };
  for (const auto& [name, op] : ops) {
    train::CapturedStep step([&](const std::vector<Tensor>&) {
      Tensor y;
      for (int r = 0; r < kReps; ++r) y = op();
      return std::vector<Tensor>{y};
    });
    const Tensor dummy = zeros({1}, {.device = gpu});
    for (int i = 0; i < 3; ++i) step({dummy});
    const double t = seconds_of([&] {
      for (int i = 0; i < 20; ++i) step({dummy});
    });
    std::fprintf(stderr, "bench_generate --profile: %-32s %7.2f us per call in a graph\n", name,
                 1e6 * t / (20.0 * kReps));
  }
}

// --profile: the profiler's tables of 32 eager decode steps at batch 1 (host time, then device
// time), and the plain time of a decode step's forward and of its greedy pick.
void profile_decode(const nn::GPT2& model, const std::vector<int64_t>& prompt, Device gpu) {
  NoGradGuard no_grad;
  const int64_t T = static_cast<int64_t>(prompt.size()), steps = 32;
  const Tensor next = from_vector(std::vector<int64_t>{5}, {1, 1}, {.device = gpu});
  auto decode = [&](nn::KVCache& cache, bool pick) {
    const Tensor logits = model->forward(next, {.cache = &cache, .last_only = true});
    if (pick) (void)argmax(logits.reshape({1, -1}), 1).to(Device::cpu()).item<int64_t>();
  };
  for (const bool pick : {false, true}) {
    nn::KVCache cache(T + 2 * steps);
    model->forward(from_vector(prompt, {1, T}, {.device = gpu}), {.cache = &cache});
    for (int i = 0; i < 4; ++i) decode(cache, pick);
    const double t = seconds_of([&] {
      for (int i = 0; i < steps; ++i) decode(cache, pick);
    });
    std::fprintf(stderr, "bench_generate --profile: decode step %s: %.3f ms\n",
                 pick ? "with argmax and its host read" : "forward only",
                 1e3 * t / static_cast<double>(steps));
  }
  for (const bool device_time : {false, true}) {
    nn::KVCache cache(T + 2 * steps);
    model->forward(from_vector(prompt, {1, T}, {.device = gpu}), {.cache = &cache});
    decode(cache, true);
    Profiler p({.device_time = device_time});
    for (int i = 0; i < steps; ++i) {
      decode(cache, true);
      p.step();
    }
    p.stop();
    std::fprintf(
        stderr, "\n%s (32 decode steps, wall %.2f ms, device %.2f ms)\n%s\n",
        device_time ? "by device time" : "by host time", p.wall_ms(), p.device_ms(),
        p.table({.sort_by = device_time ? ProfileSort::device_time : ProfileSort::host_time,
                 .row_limit = 40,
                 .group_by_module = false})
            .c_str());
  }
}

// --ember-only: the median of five generations of each kind, per batch.
int run_ember_only(nn::CausalLM model, const std::vector<int64_t>& prompt,
                   const std::vector<int64_t>& batches, int64_t new_tokens, Device gpu) {
  model->to(gpu);
  model->to(DType::bf16);
  for (const int64_t B : batches) {
    const std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(B), prompt);
    models::generate(model, prompts, {.max_new_tokens = 8});  // warm-up
    models::generate(model, prompts, {.max_new_tokens = 8, .capture = true});
    std::vector<double> eager_s, captured_s;
    std::vector<std::vector<int64_t>> eager, captured;
    for (int r = 0; r < 5; ++r) {
      eager_s.push_back(seconds_of(
          [&] { eager = models::generate(model, prompts, {.max_new_tokens = new_tokens}); }));
      captured_s.push_back(seconds_of([&] {
        captured =
            models::generate(model, prompts, {.max_new_tokens = new_tokens, .capture = true});
      }));
      if (captured != eager || eager[0].size() != static_cast<size_t>(new_tokens)) {
        std::fprintf(stderr, "bench_generate: VALIDATION FAILED: captured or short decode\n");
        return 1;
      }
    }
    std::sort(eager_s.begin(), eager_s.end());
    std::sort(captured_s.begin(), captured_s.end());
    const double n = static_cast<double>(B * new_tokens);
    std::fprintf(stderr,
                 "bench_generate --ember-only batch %lld: eager %.0f tok/s (%.3f ms a token), "
                 "captured %.0f tok/s (%.3f ms a token); medians of 5, prefill included\n",
                 static_cast<long long>(B), n / eager_s[2],
                 1e3 * eager_s[2] / static_cast<double>(new_tokens), n / captured_s[2],
                 1e3 * captured_s[2] / static_cast<double>(new_tokens));
  }
  return 0;
}

// --ember-only --model llama1b: the Llama 3.2 1B shape of bench/torch/pretrained_bench.py made
// by ember, its bf16 weights drawn on the GPU (N(0, 0.02); norms 1).
int run_llama_shape(int64_t prompt_len, const std::vector<int64_t>& batches, int64_t new_tokens) {
  const Device gpu = Device::cuda(0);
  const nn::LlamaConfig c{.vocab_size = 128256,
                          .hidden_size = 2048,
                          .intermediate_size = 8192,
                          .num_hidden_layers = 16,
                          .num_attention_heads = 32,
                          .num_key_value_heads = 8,
                          .head_dim = 64,
                          .max_position_embeddings = 131072,
                          .rope_theta = 500000.0,
                          .rope_type = "llama3",
                          .rope_factor = 32.0,
                          .tie_word_embeddings = true};
  std::optional<nn::Llama> made;
  {
    nn::init::SkipInitGuard skip(gpu);
    made.emplace(c);
  }
  nn::Llama model = *made;
  model->to(DType::bf16);
  {
    NoGradGuard no_grad;
    manual_seed(0);
    for (auto& [name, p] : model->named_parameters())
      p.copy_(p.dim() == 2 ? randn(p.shape(), {.device = gpu}) * 0.02
                           : ones(p.shape(), {.device = gpu}));
  }
  std::vector<int64_t> prompt(static_cast<size_t>(prompt_len));
  for (int64_t i = 0; i < prompt_len; ++i)
    prompt[static_cast<size_t>(i)] = (i * 7919 + 13) % c.vocab_size;
  return run_ember_only(model, prompt, batches, new_tokens, gpu);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t new_tokens = 256, prompt_len = 128;
  std::vector<int64_t> batches = {1, 16};
  bool profile = false, ember_only = false;
  std::string hf, model_name = "gpt2";
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--profile" || f == "--ember-only") {
      (f == "--profile" ? profile : ember_only) = true;
      --i;
      continue;
    }
    const std::string v = i + 1 < argc ? argv[i + 1] : "";
    if (f == "--new")
      new_tokens = std::stoll(v);
    else if (f == "--hf")
      hf = v;
    else if (f == "--model")
      model_name = v;
    else if (f == "--prompt")
      prompt_len = std::stoll(v);
    else if (f == "--batches") {
      batches.clear();
      std::stringstream s(v);
      for (std::string b; std::getline(s, b, ',');) batches.push_back(std::stoll(b));
    } else {
      std::fprintf(stderr,
                   "usage: bench_generate [--new N] [--prompt N] [--batches 1,16] [--profile] "
                   "[--ember-only [--model gpt2|llama1b]]\n");
      return 2;
    }
  }
  if (!cuda_available()) {
    std::fprintf(stderr, "bench_generate: no CUDA device; skipped\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  if (!hf.empty()) return run_hf(hf, prompt_len, new_tokens);
  if (ember_only && model_name == "llama1b")
    return run_llama_shape(prompt_len, batches, new_tokens);
  if (model_name != "gpt2") {
    std::fprintf(stderr, "bench_generate: --model %s (expected gpt2 or llama1b)\n",
                 model_name.c_str());
    return 2;
  }
  manual_seed(0);
  nn::GPT2 model{nn::GPT2Config{}};  // GPT-2 124M, N(0, 0.02)
  model->eval();
  std::vector<int64_t> prompt(static_cast<size_t>(prompt_len));
  for (int64_t i = 0; i < prompt_len; ++i) prompt[static_cast<size_t>(i)] = (i * 7919 + 13) % 50257;

  if (ember_only) return run_ember_only(model, prompt, batches, new_tokens, gpu);

  // Validation: transformers loads ember's saved model and computes the same logits.
  const std::string dir =
      (std::filesystem::temp_directory_path() / "ember_bench_generate").string();
  models::save_pretrained(model, dir);
  model->to(gpu);
  {
    NoGradGuard no_grad;
    const Tensor logits = model->forward(from_vector(prompt, {1, prompt_len}, {.device = gpu}))
                              .reshape({prompt_len, -1});
    io::write_safetensors(dir + "/ember_logits.safetensors", {{"logits", logits.to(Device::cpu())}},
                          {});
  }
  std::ofstream(dir + "/prompt.json") << nn::json(prompt).dump();
  std::string batch_list;
  for (int64_t b : batches) batch_list += (batch_list.empty() ? "" : ",") + std::to_string(b);
  const nn::json torch = bench::run_torch_script(
      "bench_generate", "generate_bench.py --model " + dir + " --new " +
                            std::to_string(new_tokens) + " --batches " + batch_list);
  if (torch.is_null()) return 1;
  const double diff = torch["logits_max_abs_diff"].get<double>();
  std::fprintf(stderr,
               "bench_generate: transformers loaded ember's save_pretrained folder; f32 logits "
               "differ by at most %.3g (needs < 1e-3)\n",
               diff);
  if (!(diff < 1e-3)) {
    std::fprintf(stderr, "bench_generate: VALIDATION FAILED\n");
    return 1;
  }

  model->to(DType::bf16);
  std::fprintf(stderr, "\nbench_generate (GPT-2 124M bf16, prompt %lld, %lld new tokens, greedy)\n",
               static_cast<long long>(prompt_len), static_cast<long long>(new_tokens));
  std::fprintf(stderr,
               "batch  ember tok/s  ms/token  captured tok/s  ms/token  prefill ms  transformers "
               "tok/s  ms/token  ratio  captured ratio\n");
  for (size_t k = 0; k < batches.size(); ++k) {
    const int64_t B = batches[k];
    const std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(B), prompt);
    models::generate(model, prompts, {.max_new_tokens = 8});  // warm-up
    models::generate(model, prompts, {.max_new_tokens = 8, .capture = true});
    size_t made = 0;
    std::vector<std::vector<int64_t>> eager, captured;
    const double t = seconds_of([&] {
      eager = models::generate(model, prompts, {.max_new_tokens = new_tokens});
      made = eager[0].size();
    });
    const double tc = seconds_of([&] {
      captured = models::generate(model, prompts, {.max_new_tokens = new_tokens, .capture = true});
    });
    // The decode steps alone: a generation of one token is the prefill and the first pick.
    const double t1 = seconds_of([&] { models::generate(model, prompts, {.max_new_tokens = 1}); });
    const double tc1 = seconds_of(
        [&] { models::generate(model, prompts, {.max_new_tokens = 1, .capture = true}); });
    const double steps = static_cast<double>(new_tokens - 1);
    const double decode_ms = new_tokens > 1 ? 1e3 * (t - t1) / steps : 0.0;
    const double decode_captured_ms = new_tokens > 1 ? 1e3 * (tc - tc1) / steps : 0.0;
    if (captured != eager) {
      std::fprintf(stderr, "bench_generate: VALIDATION FAILED: the captured decode differs\n");
      return 1;
    }
    const double prefill = seconds_of([&] {
      NoGradGuard no_grad;
      nn::KVCache cache(prompt_len);
      model->forward(from_vector(std::vector<int64_t>(static_cast<size_t>(B * prompt_len), 5),
                                 {B, prompt_len}, {.device = gpu}),
                     {.cache = &cache, .last_only = true});
    });
    if (made != static_cast<size_t>(new_tokens)) {
      std::fprintf(stderr, "bench_generate: VALIDATION FAILED: %zu tokens made\n", made);
      return 1;
    }
    const double tps = static_cast<double>(B * new_tokens) / t;
    const nn::json ref = torch["results"][k];
    const double ref_tps = ref["tokens_per_s"].get<double>();
    const double ctps = static_cast<double>(B * new_tokens) / tc;
    std::fprintf(stderr,
                 "%5lld  %11.0f  %8.3f  %14.0f  %8.3f  %10.2f  %18.1f  %8.3f  %5.1fx  %6.1fx\n",
                 static_cast<long long>(B), tps, 1e3 * t / static_cast<double>(new_tokens), ctps,
                 1e3 * tc / static_cast<double>(new_tokens), 1e3 * prefill, ref_tps,
                 ref["ms_per_token"].get<double>(), tps / ref_tps, ctps / ref_tps);
    std::fprintf(stderr,
                 "       decode steps alone (generation minus a 1-token one): eager %.3f ms "
                 "(%.0f tok/s a row), captured %.3f ms (%.0f tok/s a row)\n",
                 decode_ms, decode_ms > 0 ? 1e3 / decode_ms : 0.0, decode_captured_ms,
                 decode_captured_ms > 0 ? 1e3 / decode_captured_ms : 0.0);
    std::printf("%s\n", nn::json{{"bench", "generate_gpt2_bf16"},
                                 {"batch", B},
                                 {"ember_tokens_per_s", tps},
                                 {"ember_ms_per_token", 1e3 * t / static_cast<double>(new_tokens)},
                                 {"ember_prefill_ms", 1e3 * prefill},
                                 {"ember_captured_tokens_per_s", ctps},
                                 {"ember_captured_ms_per_token",
                                  1e3 * tc / static_cast<double>(new_tokens)},
                                 {"ember_decode_step_ms", decode_ms},
                                 {"ember_captured_decode_step_ms", decode_captured_ms},
                                 {"transformers_tokens_per_s", ref_tps},
                                 {"speedup", tps / ref_tps},
                                 {"target_tokens_per_s", B == 1 ? 2000 : 0},
                                 {"target_captured_tokens_per_s", B == 1 ? 6000 : 0}}
                            .dump()
                            .c_str());
  }
  if (profile) {
    profile_decode(model, prompt, gpu);
    time_decode_kernels(gpu);
  }
  return 0;
}
