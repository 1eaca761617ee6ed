// tests/deterministic_worker.cpp — the program tests/test_deterministic.cpp starts as separate
// processes to check deterministic mode (set_deterministic, EMBER_DETERMINISTIC) across runs:
//   flag                   prints "deterministic 0|1": what the process read from
//                          EMBER_DETERMINISTIC at start (any machine)
//   train [options]        (CUDA) trains a small GPT-style causal transformer under bf16
//                          autocast — token and position embeddings, pre-norm encoder layers with
//                          causal self-attention (cuDNN's fused attention when it takes the
//                          graph), a final LayerNorm, a linear head, cross-entropy, AdamW — on a
//                          fixed random batch of tokens from a small vocabulary (many repeated
//                          tokens, so the embedding backward adds many rows into each one), and
//                          prints the attention path, every step's loss (with its bits in hex) and
//                          an FNV-1a checksum of every parameter's bytes after the last step.
//                          Two runs with the switch on must print the same text.
//     --api                set_deterministic(true) in code (the default)
//     --env                leave the switch as EMBER_DETERMINISTIC set it
//     --off                set_deterministic(false): the default kernels, for comparison by hand
//     --steps N            training steps (default 20)
//     --dropout P          dropout of the layers and of the attention weights (default 0)
// Exit status: 0, 2 for bad arguments, 77 without a CUDA device (train), 1 on an error.
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "ember/attention.hpp"
#include "ember/autocast.hpp"
#include "ember/ember.hpp"
#include "ember/nn/embedding.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/transformer.hpp"
#include "ember/optim.hpp"
#include "ember/runtime.hpp"

namespace {

using namespace ember;  // NOLINT: test program

// Shape letters: B batch, T sequence length, V vocabulary, D model width.
constexpr int64_t kB = 8, kT = 64, kV = 48, kD = 128, kHeads = 4, kLayers = 2;

// A GPT-2-like stack: wte, wpe, h (pre-norm causal encoder layers with a final norm), lm_head.
class TinyGptImpl : public nn::ModuleImpl {
 public:
  explicit TinyGptImpl(double dropout)
      : wte_(kV, kD),
        wpe_(kT, kD),
        h_(nn::TransformerEncoderOptions{.layer = {.d_model = kD,
                                                   .nhead = kHeads,
                                                   .dim_feedforward = 4 * kD,
                                                   .dropout = dropout,
                                                   .activation = "gelu",
                                                   .batch_first = true,
                                                   .norm_first = true},
                                         .num_layers = kLayers,
                                         .final_norm = true}),
        lm_head_(kD, kV, false) {
    register_module("wte", wte_.ptr());
    register_module("wpe", wpe_.ptr());
    register_module("h", h_.ptr());
    register_module("lm_head", lm_head_.ptr());
  }

  // tokens [B, T] (i64) → logits [B, T, V]
  Tensor forward(const Tensor& tokens) override {
    const Tensor positions = arange(0.0, static_cast<double>(tokens.size(1)), 1.0,
                                    {.dtype = DType::i64, .device = tokens.device()});
    const Tensor x = add(wte_(tokens), wpe_(positions));
    return lm_head_(h_(x, nn::EncoderMasks{.is_causal = true}));
  }
  std::string type_name() const override { return "TinyGpt"; }

 private:
  nn::Embedding wte_, wpe_;
  nn::TransformerEncoder h_;
  nn::Linear lm_head_;
};

// FNV-1a, 64 bits, over `n` bytes, continuing from `h`.
uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

int train(int argc, char** argv) {
  std::string switch_mode = "api";
  int steps = 20;
  double dropout = 0.0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--api" || a == "--env" || a == "--off") {
      switch_mode = a.substr(2);
    } else if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--dropout" && i + 1 < argc) {
      dropout = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "deterministic_worker train: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (!cuda_available()) {
    std::printf("no CUDA device available\n");
    return 77;
  }
  if (switch_mode == "api") set_deterministic(true);
  if (switch_mode == "off") set_deterministic(false);
  std::printf("deterministic %d\n", deterministic() ? 1 : 0);

  const Device gpu = Device::cuda();
  manual_seed(1234);
  auto model = std::make_shared<TinyGptImpl>(dropout);
  model->to(gpu);
  model->train();
  const Tensor data = randint(0, kV, {kB, kT + 1}).to(gpu);
  const Tensor inputs = data.narrow(1, 0, kT).contiguous();
  const Tensor targets = data.narrow(1, 1, kT).contiguous().reshape({kB * kT});
  optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(DType::bf16);
      const Tensor logits = model->forward(inputs);
      if (step == 0) {
        const bool fused = sdpa_last_backend() == SdpaBackend::cudnn;
        std::printf("attention %s%s%s\n", fused ? "cudnn" : "composed", fused ? "" : ": ",
                    fused ? "" : sdpa_fallback_reason().c_str());
      }
      loss = cross_entropy(logits.reshape({kB * kT, kV}), targets);
    }
    loss.backward();
    opt.step();
    const float value = loss.item<float>();
    std::printf("step %d loss %.6f bits %08x\n", step, static_cast<double>(value),
                std::bit_cast<uint32_t>(value));
  }
  uint64_t h = 0xcbf29ce484222325ull;
  int64_t count = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    const Tensor host = p.detach().to(Device::cpu()).contiguous();
    h = fnv1a(h, name.data(), name.size());
    h = fnv1a(h, host.data_ptr(), static_cast<size_t>(host.numel()) * element_size(host.dtype()));
    count += host.numel();
  }
  std::printf("weights %016llx (%lld values)\n", static_cast<unsigned long long>(h),
              static_cast<long long>(count));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ember_deterministic_worker flag | train [options]\n");
    return 2;
  }
  try {
    if (std::strcmp(argv[1], "flag") == 0) {
      std::printf("deterministic %d\n", deterministic() ? 1 : 0);
      return 0;
    }
    if (std::strcmp(argv[1], "train") == 0) return train(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deterministic_worker: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "deterministic_worker: unknown mode %s\n", argv[1]);
  return 2;
}
