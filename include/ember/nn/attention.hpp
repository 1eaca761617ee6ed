// ember/nn/attention.hpp — MultiheadAttention (PyTorch's nn.MultiheadAttention: same
// parameter names, initialisation, mask conventions and layouts) and causal_mask.
//
// Shape letters: L = target (query) length, S = source (key/value) length, N = batch,
// E = embed_dim, H = num_heads, Dh = E / H. Sequence-first [L, N, E] unless batch_first
// ([N, L, E]); an unbatched [L, E] query is accepted too.
//
//   nn::MultiheadAttention attn(nn::MultiheadAttentionOptions{.embed_dim = 64, .num_heads = 8});
//   Tensor y = attn(x);                                          // self-attention, [L, N, E]
//   auto [out, w] = attn(q, kv, kv, {.attn_mask = nn::causal_mask(L)});   // w: [N, L, S]
#pragma once

#include "ember/nn/linear.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

struct MultiheadAttentionOptions {
  int64_t embed_dim = 0;
  int64_t num_heads = 1;
  /// Dropout on the attention weights, applied in training mode only.
  double dropout = 0.0;
  /// in_proj_bias and out_proj.bias.
  bool bias = true;
  /// [N, L, E] inputs and outputs instead of [L, N, E].
  bool batch_first = false;
  /// Key and value feature sizes; 0 means embed_dim (other sizes are not supported).
  int64_t kdim = 0;
  int64_t vdim = 0;
  static constexpr auto fields() {
    using O = MultiheadAttentionOptions;
    return std::tuple{field("embed_dim", &O::embed_dim, opts::above(0)),
                      field("num_heads", &O::num_heads, opts::above(0)),
                      field("dropout", &O::dropout, opts::closed(0, 1)),
                      field("bias", &O::bias),
                      field("batch_first", &O::batch_first),
                      field("kdim", &O::kdim),
                      field("vdim", &O::vdim)};
  }
};

/// Per-call arguments of MultiheadAttention::forward.
struct AttentionOptions {
  /// [N, S] (or [S] unbatched): bool, true = this key is padding and is ignored; or a float
  /// mask added to the scores.
  Tensor key_padding_mask{};
  /// [L, S] or [N·H, L, S]: bool, true = this position may not be attended to; or a float
  /// mask added to the scores (use -inf to block).
  Tensor attn_mask{};
  /// Applies causal_mask(L, S) when attn_mask is not given. When attn_mask is given it wins
  /// and is_causal is only a hint (as in PyTorch).
  bool is_causal = false;
  /// Return the attention weights (after dropout, as PyTorch).
  bool need_weights = true;
  /// Weights averaged over heads [N, L, S]; otherwise per head [N, H, L, S].
  bool average_attn_weights = true;
};

/// output [L, N, E] (or [N, L, E], [L, E]); weights as chosen by AttentionOptions, or undefined
/// when need_weights is false.
struct AttentionOutput {
  Tensor output{};
  Tensor weights{};
};

/// Bool mask [size, source_size] that is true above the diagonal (j > i): position i may
/// attend to positions 0..i only. source_size <= 0 means size.
/// Example: causal_mask(3) = [[F, T, T], [F, F, T], [F, F, F]].
Tensor causal_mask(int64_t size, int64_t source_size = 0, Device device = default_device());

/// softmax(Q·Kᵀ/√Dh + masks)·V per head, heads batched in one matmul (no per-head loop).
/// Parameters: in_proj_weight [3E, E] (xavier_uniform), in_proj_bias [3E] (zeros), out_proj
/// (Linear E → E, default weight init, bias zeros). Rows whose keys are all masked produce
/// NaN (softmax over only -inf), exactly as PyTorch does.
class MultiheadAttentionImpl : public ModuleImpl {
 public:
  explicit MultiheadAttentionImpl(MultiheadAttentionOptions options);
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttentionImpl(
            MultiheadAttentionOptions{.embed_dim = embed_dim, .num_heads = num_heads}) {}

  /// Self-attention without masks; returns the output only.
  Tensor forward(const Tensor& x) override;
  /// Self or cross attention (key and value share S; query may differ in length).
  AttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const AttentionOptions& options = {});

  std::string type_name() const override { return "MultiheadAttention"; }
  json options() const override;
  std::string extra_repr() const override;
  const MultiheadAttentionOptions& attention_options() const { return options_; }
  Tensor& in_proj_weight() { return param("in_proj_weight"); }
  /// Undefined when bias is false.
  Tensor in_proj_bias() const { return in_proj_bias_; }
  const std::shared_ptr<LinearImpl>& out_proj() const { return out_proj_; }

 private:
  MultiheadAttentionOptions options_;
  Tensor in_proj_weight_, in_proj_bias_;
  std::shared_ptr<LinearImpl> out_proj_;
};

class MultiheadAttention : public ModuleHolder<MultiheadAttentionImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  AttentionOutput operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                             const AttentionOptions& options = {}) const {
    return (*this)->forward(query, key, value, options);
  }
};

}  // namespace ember::nn
