// bench/bench_gpt2.cpp — GPT-2 124M training (issue 28) as a new user writes it from ember's
// docs, eager and as a train::CapturedStep, against PyTorch eager and torch.compile in the
// same run (bench/torch/gpt2_bench.py).
//
//   bench_gpt2 --data TOKENS.bin [--device cuda|cpu] [--mode eager|captured|both]
//              [--torch on|off] [--small] [--layers 12 --d 768 --heads 12 --B 16 --T 1024
//              --vocab 50304] [--steps 200] [--warmup-steps 20] [--time-steps 20]
//              [--time-warmup 5] [--split-steps 10] [--precision bf16|f32] [--profile]
//              [--checkpoint]
// --checkpoint recomputes every block in the backward (ember::checkpoint); --profile prints
// ember's Profiler tables of 3 eager steps (and writes a Chrome trace to $EMBER_PROFILE_TRACE).
//
// The model: pre-norm blocks x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)), nn::Embedding wte
// [vocab, d] and wpe [1024, d], fused QKV nn::Linear attn.c_attn (d -> 3d),
// scaled_dot_product_attention(q, k, v, {.is_causal = true}), attn.c_proj, mlp.c_fc (d -> 4d)
// with Activation::gelu_tanh, mlp.c_proj, ln_f, and the head tied to wte (logits =
// linear(h, wte.weight)). GPT-2's parameter names (transformer.wte.weight,
// transformer.h.0.ln_1.weight,
// ...), GPT-2's init (normal 0.02, c_proj weights 0.02/sqrt(2·layers), biases 0). Training:
// forward and loss under AutocastGuard(bf16), cross-entropy, clip_grad_norm_tensor(1.0), AdamW
// (lr 6e-4, betas 0.9/0.95, eps 1e-8) with weight decay 0.1 on the 2-D weights and 0 on biases
// and LayerNorm, LambdaLR linear warm-up over --warmup-steps then constant.
// Data: llm.c's token file (256 int32 header: 20240520, 1, count; then uint16 tokens; make one
// with bench/gpt2_data.py); step i reads window i (wrapping) of B·(T+1) consecutive tokens,
// inputs its first T of each row, targets shifted by one.
//
// Validation first: (1) on a GPU, the losses of 3 steps at a reduced batch (B 2, T 128, the full
// width) equal ember's CPU run of the same initial weights and batches within 2% (both under
// bf16 autocast: the CPU computes bf16 GEMMs by widening to f32, one rounding); the captured
// run's first 3 losses equal the eager run's within 2%. (2) Every run trains --steps steps from
// the same init: the loss must fall by at least 1 nat (ln 50304 = 10.8 at the start), and below
// 6 when it ran 200 steps or more. Then the timing: after --time-warmup steps, the peaks are
// reset (reset_peak_memory_stats) and --time-steps steps are timed one by one (synchronised
// before and after each); median ms/step, tokens/s, TFLOP/s. The forward / backward / optimizer
// split comes from a separate --split-steps steps that synchronise between phases (eager only:
// a graph has no phases), so the main timing is not perturbed.
//
// FLOPs per token: 6·N + 12·L·T·d, N the parameter count without wpe (nanoGPT's estimate_mfu
// with get_num_params(non_embedding=True): the tied wte/head counted once, wpe not).
//
// Output: one JSON line per measurement on stdout ({"bench": "gpt2", "impl": "ember_eager",
// "tokens_per_s", "ms_step", "fwd_ms", "bwd_ms", "opt_ms", "tflops", "peak_allocated_gb",
// "peak_reserved_gb", "loss_first", "loss_last", ...}; torch_eager and torch_compile from the
// PyTorch script), and a summary with ratios to PyTorch on stderr. Without --data (or
// EMBER_GPT2_DATA), or with --device cuda and no GPU, it says why and exits 0 (run_all.sh).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/ember.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/embedding.hpp"
#include "ember/nn/init.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/optim.hpp"
#include "ember/train/capture.hpp"
#include "nlohmann/json.hpp"
#include "torch_reference.hpp"

namespace {

using ember::Device;
using ember::DType;
using ember::Tensor;
namespace nn = ember::nn;
namespace optim = ember::optim;
using json = nlohmann::json;

constexpr int64_t kContext = 1024;  // rows of wpe (GPT-2's n_positions)

// ---- configuration ----

struct Config {
  int64_t layers = 12, d = 768, heads = 12, B = 16, T = 1024, vocab = 50304;
  int64_t steps = 200;        // training steps of each run's loss curve (validation 2)
  int64_t warmup_steps = 20;  // linear lr warm-up
  int64_t time_steps = 20, time_warmup = 5, split_steps = 10;
  int64_t val_B = 2, val_T = 128;  // validation 1 (GPU against CPU)
  std::string device = "cuda", mode = "both", precision = "bf16", data;
  bool torch = true, small = false, profile = false, checkpoint = false;
  int torch_threads = 0;  // 0: PyTorch's default
  uint64_t seed = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_gpt2: %s\nusage: bench_gpt2 --data TOKENS.bin [--device cuda|cpu] [--mode "
               "eager|captured|both] [--torch on|off] [--small] [--layers N] [--d N] [--heads N] "
               "[--B N] [--T N] [--vocab N] [--steps N] [--warmup-steps N] [--time-steps N] "
               "[--time-warmup N] [--split-steps N] [--precision bf16|f32] [--torch-threads N] "
               "[--seed N] [--profile] [--checkpoint]\n",
               why.c_str());
  std::exit(2);
}

Config parse(int argc, char** argv) {
  Config c;
  std::vector<std::string> a(argv + 1, argv + argc);
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] == "--small") {  // first, so explicit flags override it
      c.small = true;
      c.layers = 4, c.d = 256, c.T = 256, c.heads = 4, c.B = 8;
    }
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& f = a[i];
    if (f == "--small") continue;
    if (f == "--checkpoint") {
      c.checkpoint = true;
      continue;
    }
    if (f == "--profile") {
      c.profile = true;
      continue;
    }
    if (i + 1 >= a.size()) usage("flag " + f + " needs a value (or is unknown)");
    const std::string v = a[++i];
    auto integer = [&]() {
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (!end || *end || n < 0) usage("flag " + f + ": expected a whole number, got '" + v + "'");
      return static_cast<int64_t>(n);
    };
    if (f == "--layers")
      c.layers = integer();
    else if (f == "--d")
      c.d = integer();
    else if (f == "--heads")
      c.heads = integer();
    else if (f == "--B")
      c.B = integer();
    else if (f == "--T")
      c.T = integer();
    else if (f == "--vocab")
      c.vocab = integer();
    else if (f == "--steps")
      c.steps = integer();
    else if (f == "--warmup-steps")
      c.warmup_steps = integer();
    else if (f == "--time-steps")
      c.time_steps = integer();
    else if (f == "--time-warmup")
      c.time_warmup = integer();
    else if (f == "--split-steps")
      c.split_steps = integer();
    else if (f == "--torch-threads")
      c.torch_threads = static_cast<int>(integer());
    else if (f == "--seed")
      c.seed = static_cast<uint64_t>(integer());
    else if (f == "--data")
      c.data = v;
    else if (f == "--device" && (v == "cuda" || v == "cpu"))
      c.device = v;
    else if (f == "--mode" && (v == "eager" || v == "captured" || v == "both"))
      c.mode = v;
    else if (f == "--precision" && (v == "bf16" || v == "f32"))
      c.precision = v;
    else if (f == "--torch" && (v == "on" || v == "off"))
      c.torch = v == "on";
    else
      usage("unknown flag or value: " + f + " " + v);
  }
  if (c.d % c.heads != 0) usage("--d must be a multiple of --heads");
  if (c.T > kContext || c.val_T > kContext) usage("--T is at most 1024 (wpe's rows)");
  if (c.steps < 1 || c.time_steps < 1 || c.layers < 1)
    usage("--steps, --time-steps, --layers >= 1");
  return c;
}

// ---- data: llm.c's token file ----

struct Batch {
  Tensor x, y;  // i64 [B, T] on the host: inputs and next tokens
};

class Corpus {
 public:
  explicit Corpus(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open the token file " + path);
    int32_t header[256] = {};
    in.read(reinterpret_cast<char*>(header), sizeof header);
    if (!in || header[0] != 20240520 || header[1] != 1 || header[2] <= 0)
      throw std::runtime_error(path +
                               ": not an llm.c token file (expected the header 20240520, "
                               "1, count; make one with bench/gpt2_data.py)");
    tokens_.resize(static_cast<size_t>(header[2]));
    in.read(reinterpret_cast<char*>(tokens_.data()),
            static_cast<std::streamsize>(tokens_.size() * sizeof(uint16_t)));
    if (!in) throw std::runtime_error(path + ": fewer tokens than its header says");
  }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  int max_token() const { return *std::max_element(tokens_.begin(), tokens_.end()); }
  /// Window `step` (wrapping) of B·(T+1) consecutive tokens as inputs and shifted targets.
  Batch batch(int64_t step, int64_t B, int64_t T) const {
    const int64_t window = B * (T + 1);
    if (window > size()) throw std::runtime_error("the token file is shorter than one batch");
    const int64_t start = (step % (size() / window)) * window;
    std::vector<int64_t> x(static_cast<size_t>(B * T)), y(x.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t at = start + b * (T + 1) + t;
        x[static_cast<size_t>(b * T + t)] = tokens_[static_cast<size_t>(at)];
        y[static_cast<size_t>(b * T + t)] = tokens_[static_cast<size_t>(at + 1)];
      }
    return {ember::from_vector(x, {B, T}, {.device = Device::cpu()}),
            ember::from_vector(y, {B, T}, {.device = Device::cpu()})};
  }

 private:
  std::vector<uint16_t> tokens_;
};

// ---- the model, as custom modules with GPT-2's names (docs/modules.md) ----

class CausalSelfAttentionImpl : public nn::ModuleImpl {
 public:
  CausalSelfAttentionImpl(int64_t d, int64_t heads)
      : d_(d), heads_(heads), c_attn_(d, 3 * d), c_proj_(d, d) {
    register_module("c_attn", c_attn_.ptr());
    register_module("c_proj", c_proj_.ptr());
  }
  Tensor forward(const Tensor& x) override {  // x [B, T, d]
    const int64_t B = x.size(0), T = x.size(1), hd = d_ / heads_;
    const std::vector<Tensor> qkv = ember::split(c_attn_(x), d_, -1);  // 3 x [B, T, d] views
    auto heads = [&](const Tensor& t) { return t.reshape({B, T, heads_, hd}).transpose(1, 2); };
    const Tensor y = ember::scaled_dot_product_attention(heads(qkv[0]), heads(qkv[1]),
                                                         heads(qkv[2]), {.is_causal = true});
    return c_proj_(y.transpose(1, 2).reshape({B, T, d_}));  // [B, H, T, hd] -> [B, T, d]
  }
  std::string type_name() const override { return "CausalSelfAttention"; }
  nn::json options() const override { return {{"d", d_}, {"heads", heads_}}; }

 private:
  int64_t d_, heads_;
  nn::Linear c_attn_, c_proj_;
};

class MlpImpl : public nn::ModuleImpl {
 public:
  explicit MlpImpl(int64_t d) : d_(d), c_fc_(d, 4 * d), c_proj_(4 * d, d) {
    register_module("c_fc", c_fc_.ptr());
    register_module("c_proj", c_proj_.ptr());
  }
  Tensor forward(const Tensor& x) override {
    return c_proj_(c_fc_->forward(x, ember::Activation::gelu_tanh));
  }
  std::string type_name() const override { return "Mlp"; }
  nn::json options() const override { return {{"d", d_}}; }

 private:
  int64_t d_;
  nn::Linear c_fc_, c_proj_;
};

class BlockImpl : public nn::ModuleImpl {
 public:
  BlockImpl(int64_t d, int64_t heads)
      : d_(d),
        heads_(heads),
        ln_1_(d),
        attn_(std::make_shared<CausalSelfAttentionImpl>(d, heads)),
        ln_2_(d),
        mlp_(std::make_shared<MlpImpl>(d)) {
    register_module("ln_1", ln_1_.ptr());
    register_module("attn", attn_);
    register_module("ln_2", ln_2_.ptr());
    register_module("mlp", mlp_);
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = x + nn::Module(attn_)(ln_1_(x));
    return h + nn::Module(mlp_)(ln_2_(h));
  }
  std::string type_name() const override { return "Block"; }
  nn::json options() const override { return {{"d", d_}, {"heads", heads_}}; }

 private:
  int64_t d_, heads_;
  nn::LayerNorm ln_1_;
  std::shared_ptr<CausalSelfAttentionImpl> attn_;
  nn::LayerNorm ln_2_;
  std::shared_ptr<MlpImpl> mlp_;
};

// wte, wpe, h, ln_f: tokens [B, T] -> final hidden states [B, T, d].
class TransformerImpl : public nn::ModuleImpl {
 public:
  explicit TransformerImpl(const Config& c)
      : layers_(c.layers),
        checkpoint_(c.checkpoint),
        wte_(c.vocab, c.d),
        wpe_(kContext, c.d),
        ln_f_(c.d) {
    register_module("wte", wte_.ptr());
    register_module("wpe", wpe_.ptr());
    nn::ModuleList h;
    for (int64_t i = 0; i < c.layers; ++i) {
      blocks_.push_back(std::make_shared<BlockImpl>(c.d, c.heads));
      h->push_back(nn::Module(blocks_.back()));
    }
    register_module("h", h.ptr());
    register_module("ln_f", ln_f_.ptr());
  }
  Tensor forward(const Tensor& idx) override {
    const Tensor pos = ember::arange(0, static_cast<double>(idx.size(1)), 1.0,
                                     {.dtype = DType::i64, .device = idx.device()});
    Tensor x = wte_(idx) + wpe_(pos);  // [B, T, d] + [T, d]
    // Through handles (nn::Module(block)(x), not block->forward(x)): the profiler charges each
    // op to the module path of the handle call it ran in.
    for (const auto& block : blocks_)
      x = checkpoint_ ? ember::checkpoint(nn::Module(block), x) : nn::Module(block)(x);
    return ln_f_(x);
  }
  std::string type_name() const override { return "GPT2Transformer"; }
  nn::json options() const override { return {{"layers", layers_}}; }
  /// The token embedding, which is also the head's weight.
  Tensor& wte_weight() { return wte_->weight(); }

 private:
  int64_t layers_;
  bool checkpoint_;  // every block recomputed in the backward (--checkpoint)
  nn::Embedding wte_, wpe_;
  std::vector<std::shared_ptr<BlockImpl>> blocks_;
  nn::LayerNorm ln_f_;
};

// Builds a module whose values init_like_gpt2 writes afterwards: nothing is drawn twice.
std::shared_ptr<TransformerImpl> uninitialised_transformer(const Config& c) {
  nn::init::SkipInitGuard skip(Device::cpu());
  return std::make_shared<TransformerImpl>(c);
}

// transformer, then the head tied to transformer.wte.weight: tokens -> logits [B, T, vocab].
// The head is linear(h, wte.weight), the functional form; an nn::Linear head tied with
// tie("lm_head.weight", wte.weight) trains the same bits (tests/test_tie.cpp).
class Gpt2Impl : public nn::ModuleImpl {
 public:
  explicit Gpt2Impl(const Config& c) : config_(c), transformer_(uninitialised_transformer(c)) {
    register_module("transformer", transformer_);
    init_like_gpt2();
  }
  Tensor forward(const Tensor& idx) override {
    return ember::linear(transformer_->forward(idx), transformer_->wte_weight());
  }
  std::string type_name() const override { return "GPT2"; }
  nn::json options() const override {
    return {{"layers", config_.layers},
            {"d", config_.d},
            {"heads", config_.heads},
            {"vocab", config_.vocab}};
  }

 private:
  // GPT-2 (and nanoGPT): every Linear and Embedding weight ~ N(0, 0.02), the residual
  // projections' weights ~ N(0, 0.02/sqrt(2·layers)), biases 0, LayerNorm weights 1.
  void init_like_gpt2() {
    ember::NoGradGuard no_grad;
    const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.layers));
    for (auto& [name, p] : named_parameters()) {
      if (p.dim() == 2)
        p.assign_(nn::init::normal(p.shape(), name.ends_with("c_proj.weight") ? proj_std : 0.02));
      else if (name.ends_with(".bias"))
        p.zero_();
    }
  }

  Config config_;
  std::shared_ptr<TransformerImpl> transformer_;
};

class Gpt2 : public nn::ModuleHolder<Gpt2Impl> {
 public:
  using ModuleHolder::ModuleHolder;
};

// The names must be GPT-2's (a checkpoint maps one to one onto Hugging Face's and nanoGPT's).
bool check_names(const Gpt2& model, int64_t layers) {
  std::vector<std::string> names;
  for (const auto& [name, p] : model->named_parameters()) names.push_back(name);
  const std::vector<std::string> want = {"transformer.wte.weight",
                                         "transformer.wpe.weight",
                                         "transformer.h.0.ln_1.weight",
                                         "transformer.h.0.ln_1.bias",
                                         "transformer.h.0.attn.c_attn.weight",
                                         "transformer.h.0.attn.c_attn.bias",
                                         "transformer.h.0.attn.c_proj.weight",
                                         "transformer.h.0.attn.c_proj.bias",
                                         "transformer.h.0.ln_2.weight",
                                         "transformer.h.0.ln_2.bias",
                                         "transformer.h.0.mlp.c_fc.weight",
                                         "transformer.h.0.mlp.c_fc.bias",
                                         "transformer.h.0.mlp.c_proj.weight",
                                         "transformer.h.0.mlp.c_proj.bias"};
  const bool ok = names.size() == static_cast<size_t>(2 + 12 * layers + 2) &&
                  std::equal(want.begin(), want.end(), names.begin()) &&
                  names[names.size() - 2] == "transformer.ln_f.weight" &&
                  names.back() == "transformer.ln_f.bias";
  if (!ok) {
    std::fprintf(stderr, "bench_gpt2: VALIDATION FAILED: parameter names are not GPT-2's:");
    for (const auto& n : names) std::fprintf(stderr, " %s", n.c_str());
    std::fprintf(stderr, "\n");
  }
  return ok;
}

// ---- one training step, shared by the eager, split and captured runs ----

struct Trainer {
  Gpt2 model;
  std::vector<Tensor> params;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::LambdaLR> sched;
  bool bf16 = true;
};

Trainer make_trainer(const Config& c, Device device) {
  ember::manual_seed(c.seed);
  Trainer t{.model = Gpt2(c)};
  t.model->to(device);
  t.params = t.model->parameters();
  std::vector<Tensor> decay, no_decay;  // nanoGPT's groups: 2-D tensors decay, the rest not
  for (const Tensor& p : t.params) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  const optim::AdamWOptions o{.lr = 6e-4, .betas = {0.9, 0.95}, .eps = 1e-8, .weight_decay = 0.1};
  optim::AdamWOptions o_no_decay = o;
  o_no_decay.weight_decay = 0.0;
  t.opt = std::make_unique<optim::AdamW>(
      std::vector<optim::AdamW::Group>{{.params = decay, .options = o},
                                       {.params = no_decay, .options = o_no_decay}},
      o);
  const double warmup = static_cast<double>(std::max<int64_t>(c.warmup_steps, 1));
  t.sched = std::make_unique<optim::LambdaLR>(
      *t.opt, [warmup](int64_t step) { return std::min(1.0, (step + 1) / warmup); });
  t.bf16 = c.precision == "bf16";
  return t;
}

// zero_grad, forward + loss under autocast, backward, clip + AdamW + schedule. `mark(phase)`,
// when given, runs after the forward (0), the backward (1) and the optimizer (2).
Tensor train_step(Trainer& t, const Tensor& x, const Tensor& y,
                  const std::function<void(int)>* mark = nullptr) {
  t.opt->zero_grad();
  Tensor loss;
  {
    ember::AutocastGuard autocast(DType::bf16, t.bf16);
    const Tensor logits = t.model(x);  // [B, T, vocab]
    loss = ember::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
  }
  if (mark) (*mark)(0);
  loss.backward();
  if (mark) (*mark)(1);
  optim::clip_grad_norm_tensor(t.params, 1.0);
  t.opt->step();
  t.sched->step();
  if (mark) (*mark)(2);
  return loss;
}

// ---- the runs ----

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Result {
  std::string impl;
  std::vector<float> losses;  // the loss curve of --steps steps
  double ms_step = NAN, fwd_ms = NAN, bwd_ms = NAN, opt_ms = NAN;
  int64_t peak_allocated = 0, peak_reserved = 0, kernels_per_step = 0;
};

// Eager losses of `n` steps on batches 0..n-1 of shape B x T, from the seeded init on `device`.
std::vector<float> eager_losses(Config c, const Corpus& data, Device device, int64_t n) {
  Trainer t = make_trainer(c, device);
  std::vector<float> out;
  for (int64_t i = 0; i < n; ++i) {
    const Batch b = data.batch(i, c.B, c.T);
    out.push_back(train_step(t, b.x.to(device), b.y.to(device)).item<float>());
  }
  return out;
}

// --profile: 3 eager steps under ember's Profiler after the timing; prints the per-op table (all
// modules together, then the top rows per module path), the step's wall time with the profiler
// on beside `ms_off` (its overhead), and writes a Chrome trace to $EMBER_PROFILE_TRACE if set.
void profile_steps(const Config& c, Trainer& t, const Corpus& data, Device device, int64_t first,
                   double ms_off) {
  constexpr int kSteps = 3;
  std::vector<Batch> batches;
  for (int i = 0; i < kSteps; ++i) batches.push_back(data.batch(first + i, c.B, c.T));
  ember::synchronize(device);
  ember::Profiler prof;
  prof.name_modules(t.model);
  std::vector<double> ms;
  for (const Batch& b : batches) {
    const auto t0 = Clock::now();
    train_step(t, b.x.to(device), b.y.to(device));
    ember::synchronize(device);
    ms.push_back(ms_since(t0));
    prof.step();
  }
  prof.stop();
  std::fprintf(
      stderr, "bench_gpt2: profile of %d eager steps (per op, all modules together):\n%s\n", kSteps,
      prof.table({.row_limit = 45, .group_by_module = false, .kernels_shown = 3}).c_str());
  std::fprintf(stderr, "bench_gpt2: profile per module path (top 30):\n%s\n",
               prof.table({.row_limit = 30, .kernels_shown = 2}).c_str());
  std::fprintf(stderr,
               "bench_gpt2: profiler overhead: %.2f ms/step recorded (median of %d, synchronised) "
               "against %.2f ms/step unrecorded; device time %.2f ms/step\n",
               median(ms), kSteps, ms_off, prof.device_ms() / kSteps);
  if (const char* path = std::getenv("EMBER_PROFILE_TRACE")) {
    prof.export_chrome_trace(path);
    std::fprintf(stderr, "bench_gpt2: trace written to %s\n", path);
  }
}

Result run_ember(const Config& c, const Corpus& data, Device device, bool captured) {
  Result r{.impl = std::string(captured ? "ember_captured" : "ember_eager") +
                   (c.checkpoint ? "_checkpoint" : "")};
  ember::synchronize(device);
  ember::empty_cache(device);  // each run's reserved bytes are its own, not an earlier run's
  Trainer t = make_trainer(c, device);
  std::unique_ptr<ember::train::CapturedStep> graph;
  std::function<Tensor(const Batch&)> step;
  if (captured) {
    graph = std::make_unique<ember::train::CapturedStep>(
        [&t](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{train_step(t, in[0], in[1])};
        },
        ember::train::CaptureOptions{.device = device});
    step = [&](const Batch& b) { return (*graph)({b.x, b.y})[0]; };  // copies into the graph
  } else {
    step = [&](const Batch& b) { return train_step(t, b.x.to(device), b.y.to(device)); };
  }
  auto sync = [&] { ember::synchronize(device); };

  // The loss curve (validation 2), which also warms every cache up.
  for (int64_t i = 0; i < c.steps; ++i) {
    r.losses.push_back(step(data.batch(i, c.B, c.T)).item<float>());
    if (i == 0 || (i + 1) % 50 == 0 || i + 1 == c.steps)
      std::fprintf(stderr, "bench_gpt2: %s step %lld loss %.4f\n", r.impl.c_str(),
                   static_cast<long long>(i + 1), r.losses.back());
  }
  // The timing: batches made beforehand, peaks reset after the warm-up steps.
  std::vector<Batch> batches;
  for (int64_t i = 0; i < c.time_warmup + c.time_steps + c.split_steps; ++i)
    batches.push_back(data.batch(c.steps + i, c.B, c.T));
  size_t next = 0;
  for (int64_t i = 0; i < c.time_warmup; ++i) step(batches[next++]);
  sync();
  ember::reset_peak_memory_stats(device);
  std::vector<double> ms;
  for (int64_t i = 0; i < c.time_steps; ++i) {
    sync();
    const auto t0 = Clock::now();
    step(batches[next++]);
    sync();
    ms.push_back(ms_since(t0));
  }
  const ember::MemoryStats mem = ember::memory_stats(device);
  std::fprintf(stderr,
               "bench_gpt2: %s memory now (GB): persistent %.2f in use / %.2f reserved, pass "
               "%.2f / %.2f, captured %.2f / %.2f\n",
               r.impl.c_str(), mem.persistent_bytes / 1e9, mem.persistent_reserved / 1e9,
               mem.pass_in_use / 1e9, mem.pass_reserved / 1e9, mem.captured_in_use / 1e9,
               mem.captured_reserved / 1e9);
  r.peak_allocated = mem.peak_allocated;
  r.peak_reserved = mem.peak_reserved;
  r.ms_step = median(ms);
  if (graph) r.kernels_per_step = graph->kernels_per_step();

  if (c.profile && !captured)
    profile_steps(c, t, data, device, c.steps + c.time_warmup + c.time_steps + c.split_steps,
                  r.ms_step);

  if (!captured) {  // the split: synchronised between phases, separate steps
    std::vector<double> phase[3];
    Clock::time_point last;
    const std::function<void(int)> mark = [&](int p) {
      sync();
      phase[p].push_back(ms_since(last));
      last = Clock::now();
    };
    for (int64_t i = 0; i < c.split_steps; ++i) {
      const Batch& b = batches[next++];
      const Tensor x = b.x.to(device), y = b.y.to(device);
      sync();
      last = Clock::now();
      train_step(t, x, y, &mark);
    }
    r.fwd_ms = median(phase[0]);
    r.bwd_ms = median(phase[1]);
    r.opt_ms = median(phase[2]);
  }
  return r;
}

bool check_close(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                 double rtol) {
  double worst = 0.0;
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i) {
    const double rel = std::fabs(got[i] - want[i]) / std::max(1e-6, std::fabs(double{want[i]}));
    worst = std::max(worst, rel);
    ok = rel <= rtol;  // also false for NaN
  }
  std::string g, w;
  for (float v : got) g += " " + std::to_string(v);
  for (float v : want) w += " " + std::to_string(v);
  std::fprintf(stderr, "bench_gpt2: %s %s: losses%s vs%s (max rel. diff %.2e, tolerance %.0e)\n",
               ok ? "validated" : "VALIDATION FAILED for", what, g.c_str(), w.c_str(), worst, rtol);
  return ok;
}

bool check_falls(const Result& r) {
  const double first = r.losses.front(), last = r.losses.back();
  const bool long_run = r.losses.size() >= 200;
  const bool ok = std::isfinite(last) && last < first - 1.0 && (!long_run || last < 6.0);
  std::fprintf(stderr,
               "bench_gpt2: %s %s: loss %.4f -> %.4f over %zu steps (needs a fall of 1%s)\n",
               ok ? "validated" : "VALIDATION FAILED for", r.impl.c_str(), first, last,
               r.losses.size(), long_run ? " and < 6" : "");
  return ok;
}

// ---- output ----

struct Figures {
  int64_t params = 0, params_no_wpe = 0;
  double tokens_per_step = 0, flops_per_token = 0;
};

json result_line(const Config& c, const Figures& f, const Result& r, const json& torch_results) {
  const double tps = f.tokens_per_step / (r.ms_step * 1e-3);
  json j = {{"bench", "gpt2"},
            {"impl", r.impl},
            {"device", c.device},
            {"config", c.small ? "small" : "custom"},
            {"layers", c.layers},
            {"d", c.d},
            {"heads", c.heads},
            {"B", c.B},
            {"T", c.T},
            {"vocab", c.vocab},
            {"params", f.params},
            {"precision", c.precision},
            {"tokens_per_s", tps},
            {"ms_step", r.ms_step},
            {"fwd_ms", r.fwd_ms},
            {"bwd_ms", r.bwd_ms},
            {"opt_ms", r.opt_ms},
            {"tflops", f.flops_per_token * tps / 1e12},
            {"peak_allocated_gb", static_cast<double>(r.peak_allocated) / 1e9},
            {"peak_reserved_gb", static_cast<double>(r.peak_reserved) / 1e9},
            {"loss_first", r.losses.front()},
            {"loss_last", r.losses.back()},
            {"steps", r.losses.size()}};
  if (c.layers == 12 && c.d == 768 && c.heads == 12 && c.T == 1024 && c.vocab == 50304)
    j["config"] = "gpt2_124M";
  if (r.kernels_per_step) j["kernels_per_step"] = r.kernels_per_step;
  for (const json& t : torch_results) {  // ratios of tokens/s: > 1 means ember is faster
    if (!t.contains("tokens_per_s") || !t["tokens_per_s"].is_number()) continue;
    j["vs_" + t["impl"].get<std::string>()] = tps / t["tokens_per_s"].get<double>();
  }
  return j;
}

// A result line with its keys in a readable order (json sorts them): the common keys first.
nlohmann::ordered_json ordered(const json& j) {
  static const char* const kFirst[] = {"bench",
                                       "impl",
                                       "device",
                                       "config",
                                       "layers",
                                       "d",
                                       "heads",
                                       "B",
                                       "T",
                                       "vocab",
                                       "params",
                                       "precision",
                                       "tokens_per_s",
                                       "ms_step",
                                       "fwd_ms",
                                       "bwd_ms",
                                       "opt_ms",
                                       "tflops",
                                       "peak_allocated_gb",
                                       "peak_reserved_gb",
                                       "loss_first",
                                       "loss_last",
                                       "steps"};
  nlohmann::ordered_json out;
  for (const char* k : kFirst)
    if (j.contains(k)) out[k] = j[k];
  for (const auto& [k, v] : j.items())
    if (!out.contains(k)) out[k] = v;
  return out;
}

std::string fmt(const json& j, const char* key, const char* format) {
  if (!j.contains(key) || !j[key].is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, j[key].get<double>());
  return buf;
}

void summary(const std::vector<json>& lines) {
  std::fprintf(stderr,
               "\nbench_gpt2 summary (%s, B %lld, T %lld)\n%-15s %11s %9s %8s %8s %8s %8s "
               "%9s %9s %16s %16s\n",
               lines.empty() ? "" : lines[0].value("device", "").c_str(),
               lines.empty() ? 0LL : lines[0].value("B", 0LL),
               lines.empty() ? 0LL : lines[0].value("T", 0LL), "impl", "tokens/s", "ms/step", "fwd",
               "bwd", "opt", "TFLOP/s", "peak GB", "resv GB", "vs torch eager", "vs torch compile");
  for (const json& j : lines)
    std::fprintf(stderr, "%-15s %11s %9s %8s %8s %8s %8s %9s %9s %16s %16s\n",
                 j["impl"].get<std::string>().c_str(), fmt(j, "tokens_per_s", "%.0f").c_str(),
                 fmt(j, "ms_step", "%.2f").c_str(), fmt(j, "fwd_ms", "%.2f").c_str(),
                 fmt(j, "bwd_ms", "%.2f").c_str(), fmt(j, "opt_ms", "%.2f").c_str(),
                 fmt(j, "tflops", "%.2f").c_str(), fmt(j, "peak_allocated_gb", "%.2f").c_str(),
                 fmt(j, "peak_reserved_gb", "%.2f").c_str(),
                 fmt(j, "vs_torch_eager", "%.3fx").c_str(),
                 fmt(j, "vs_torch_compile", "%.3fx").c_str());
}

std::string torch_args(const Config& c) {
  std::string s = "gpt2_bench.py --combined --data '" + c.data + "' --device " + c.device;
  for (auto [flag, v] :
       std::vector<std::pair<const char*, int64_t>>{{"--layers", c.layers},
                                                    {"--d", c.d},
                                                    {"--heads", c.heads},
                                                    {"--B", c.B},
                                                    {"--T", c.T},
                                                    {"--vocab", c.vocab},
                                                    {"--steps", c.steps},
                                                    {"--warmup-steps", c.warmup_steps},
                                                    {"--time-steps", c.time_steps},
                                                    {"--time-warmup", c.time_warmup},
                                                    {"--split-steps", c.split_steps},
                                                    {"--threads", c.torch_threads}})
    s += std::string(" ") + flag + " " + std::to_string(v);
  return s + " --precision " + c.precision + (c.small ? " --small" : "");
}

int run(const Config& c) {
  const Device device = c.device == "cuda" ? Device::cuda(0) : Device::cpu();
  const Corpus data(c.data);
  if (data.max_token() >= c.vocab) {
    std::fprintf(stderr, "bench_gpt2: token %d is outside the vocabulary of %lld\n",
                 data.max_token(), static_cast<long long>(c.vocab));
    return 1;
  }
  Figures f;
  {
    ember::manual_seed(c.seed);
    const Gpt2 probe(c);  // the names, counted on the CPU
    if (!check_names(probe, c.layers)) return 1;
    f.params = probe->parameter_count();
    f.params_no_wpe = f.params - kContext * c.d;
  }
  f.tokens_per_step = static_cast<double>(c.B * c.T);
  f.flops_per_token =
      6.0 * static_cast<double>(f.params_no_wpe) + 12.0 * static_cast<double>(c.layers * c.T * c.d);
  std::fprintf(stderr,
               "bench_gpt2: GPT-2 %lld layers, d %lld, %lld heads, vocab %lld: %lld parameters "
               "(%lld without wpe); B %lld, T %lld on %s, %s; %lld tokens in %s; %.3g GFLOP per "
               "token\n",
               static_cast<long long>(c.layers), static_cast<long long>(c.d),
               static_cast<long long>(c.heads), static_cast<long long>(c.vocab),
               static_cast<long long>(f.params), static_cast<long long>(f.params_no_wpe),
               static_cast<long long>(c.B), static_cast<long long>(c.T), device.str().c_str(),
               c.precision.c_str(), static_cast<long long>(data.size()), c.data.c_str(),
               f.flops_per_token * 1e-9);

  json torch_results = json::array();
  if (c.torch) {
    const json py = bench::run_torch_script("bench_gpt2", torch_args(c));
    if (py.is_object() && py.contains("results"))
      torch_results = py["results"];
    else
      std::fprintf(stderr, "bench_gpt2: no PyTorch figures (see above)\n");
  }

  bool ok = true;
  const bool want_eager = c.mode != "captured";
  const bool want_captured = c.mode != "eager" && device.is_cuda();
  if (c.mode != "eager" && !device.is_cuda())
    std::fprintf(stderr, "bench_gpt2: captured mode needs a CUDA device; skipped on the CPU\n");
  if (device.is_cuda()) {  // validation 1: the GPU's first losses are the CPU's
    Config v = c;
    v.B = c.val_B;
    v.T = c.val_T;
    std::fprintf(stderr,
                 "bench_gpt2: validating 3 steps at B %lld, T %lld on the GPU against "
                 "the CPU (this takes a while on the CPU)\n",
                 static_cast<long long>(v.B), static_cast<long long>(v.T));
    const std::vector<float> cpu = eager_losses(v, data, Device::cpu(), 3);
    const std::vector<float> gpu = eager_losses(v, data, device, 3);
    ok = check_close("the GPU against the CPU (3 steps, bf16 tolerance)", gpu, cpu, 2e-2) && ok;
  } else {
    std::fprintf(stderr, "bench_gpt2: validation 1 (GPU against CPU) needs a GPU; skipped\n");
  }
  if (!ok) return 1;

  std::vector<Result> results;
  if (want_eager) results.push_back(run_ember(c, data, device, false));
  if (want_captured) results.push_back(run_ember(c, data, device, true));
  for (const Result& r : results) ok = check_falls(r) && ok;
  if (results.size() == 2) {
    const std::vector<float> eager(results[0].losses.begin(), results[0].losses.begin() + 3);
    const std::vector<float> graph(results[1].losses.begin(), results[1].losses.begin() + 3);
    ok = check_close("captured against eager (3 steps)", graph, eager, 2e-2) && ok;
  }
  for (const json& t : torch_results)
    std::fprintf(stderr, "bench_gpt2: %s loss %.4f -> %.4f over %lld steps\n",
                 t.value("impl", "?").c_str(), t.value("loss_first", NAN),
                 t.value("loss_last", NAN), t.value("steps", 0LL));
  if (!ok) return 1;

  std::vector<json> lines;
  for (const Result& r : results) lines.push_back(result_line(c, f, r, torch_results));
  for (const json& t : torch_results) lines.push_back(t);
  for (const json& j : lines) std::printf("%s\n", ordered(j).dump().c_str());
  std::fflush(stdout);
  summary(lines);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config c = parse(argc, argv);
  if (c.data.empty()) {
    if (const char* env = std::getenv("EMBER_GPT2_DATA")) c.data = env;
  }
  if (c.data.empty()) {
    std::fprintf(stderr,
                 "bench_gpt2: no token file (--data PATH or EMBER_GPT2_DATA; make one "
                 "with `python3 bench/gpt2_data.py TEXT OUT.bin`); skipped\n");
    return 0;
  }
  if (c.device == "cuda" && !ember::cuda_available()) {
    std::fprintf(stderr,
                 "bench_gpt2: no CUDA device; skipped (--device cpu --small runs the CPU "
                 "comparison)\n");
    return 0;
  }
  try {
    return run(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpt2: %s\n", e.what());
    return 1;
  }
}
