// bench/bench_generate.cpp — text generation with GPT-2 124M (random weights, bf16) on the GPU:
// ember's models::generate against transformers' generate() in the same run (issue 33).
//
//   build/bench/bench_generate [--new 256] [--prompt 128] [--batches 1,16]
//
// Validation first: ember saves its f32 model with models::save_pretrained, transformers loads
// that folder with GPT2LMHeadModel.from_pretrained (so the saved layout is checked too), and the
// two f32 logits of the prompt must agree within 1e-3. Then both generate greedily in bf16,
// every run making all the new tokens (no stop token), batch 1 and 16: tokens/s counts new
// tokens (batch · new / seconds), per-token latency is the run's time / new (prefill included;
// the prefill alone is reported too). Prints a JSON line per batch and a table on stderr.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ember/ember.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/models/generate.hpp"
#include "ember/models/gpt2.hpp"
#include "ember/models/pretrained.hpp"
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
    std::fprintf(stderr, "\n%s (32 decode steps, wall %.2f ms, device %.2f ms)\n%s\n",
                 device_time ? "by device time" : "by host time", p.wall_ms(), p.device_ms(),
                 p.table({.sort_by = device_time ? ProfileSort::device_time : ProfileSort::host_time,
                          .row_limit = 40,
                          .group_by_module = false})
                     .c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t new_tokens = 256, prompt_len = 128;
  std::vector<int64_t> batches = {1, 16};
  bool profile = false;
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--profile") {
      profile = true;
      --i;
      continue;
    }
    const std::string v = i + 1 < argc ? argv[i + 1] : "";
    if (f == "--new")
      new_tokens = std::stoll(v);
    else if (f == "--prompt")
      prompt_len = std::stoll(v);
    else if (f == "--batches") {
      batches.clear();
      std::stringstream s(v);
      for (std::string b; std::getline(s, b, ',');) batches.push_back(std::stoll(b));
    } else {
      std::fprintf(stderr,
                   "usage: bench_generate [--new N] [--prompt N] [--batches 1,16] [--profile]\n");
      return 2;
    }
  }
  if (!cuda_available()) {
    std::fprintf(stderr, "bench_generate: no CUDA device; skipped\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  manual_seed(0);
  nn::GPT2 model{nn::GPT2Config{}};  // GPT-2 124M, N(0, 0.02)
  model->eval();
  std::vector<int64_t> prompt(static_cast<size_t>(prompt_len));
  for (int64_t i = 0; i < prompt_len; ++i) prompt[static_cast<size_t>(i)] = (i * 7919 + 13) % 50257;

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
               "batch  ember tok/s  ms/token  prefill ms  transformers tok/s  ms/token  ratio\n");
  for (size_t k = 0; k < batches.size(); ++k) {
    const int64_t B = batches[k];
    const std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(B), prompt);
    models::generate(model, prompts, {.max_new_tokens = 8});  // warm-up
    size_t made = 0;
    const double t = seconds_of(
        [&] { made = models::generate(model, prompts, {.max_new_tokens = new_tokens})[0].size(); });
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
    std::fprintf(stderr, "%5lld  %11.0f  %8.3f  %10.2f  %18.1f  %8.3f  %5.1fx\n",
                 static_cast<long long>(B), tps, 1e3 * t / static_cast<double>(new_tokens),
                 1e3 * prefill, ref_tps, ref["ms_per_token"].get<double>(), tps / ref_tps);
    std::printf("%s\n", nn::json{{"bench", "generate_gpt2_bf16"},
                                 {"batch", B},
                                 {"ember_tokens_per_s", tps},
                                 {"ember_ms_per_token", 1e3 * t / static_cast<double>(new_tokens)},
                                 {"ember_prefill_ms", 1e3 * prefill},
                                 {"transformers_tokens_per_s", ref_tps},
                                 {"speedup", tps / ref_tps},
                                 {"target_tokens_per_s", B == 1 ? 2000 : 0}}
                            .dump()
                            .c_str());
  }
  if (profile) profile_decode(model, prompt, gpu);
  return 0;
}
