// ember/nn/transformer.hpp — TransformerEncoderLayer and TransformerEncoder, with PyTorch's
// child names, so state dicts move both ways ("layers.0.self_attn.in_proj_weight",
// "layers.1.norm2.bias", "norm.weight").
//
// Shape letters: S = sequence length, N = batch, E = d_model. Inputs are [S, N, E], or
// [N, S, E] with batch_first.
//
//   nn::TransformerEncoder enc(nn::TransformerEncoderOptions{
//       .layer = {.d_model = 64, .nhead = 4, .dim_feedforward = 256, .dropout = 0.1},
//       .num_layers = 2, .final_norm = true});
//   Tensor y = enc(x, {.src_key_padding_mask = pad, .is_causal = true});
#pragma once

#include <memory>
#include <string>

#include "ember/nn/attention.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

struct TransformerEncoderLayerOptions {
  int64_t d_model = 0;
  int64_t nhead = 1;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  /// "relu" or "gelu" (exact erf GELU).
  std::string activation = "relu";
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  /// Pre-norm (x + sa(norm1(x))) instead of post-norm (norm1(x + sa(x))).
  bool norm_first = false;
  /// Biases of the linear layers, the attention and the LayerNorms.
  bool bias = true;
};

/// Masks for an encoder forward (see AttentionOptions for the conventions).
struct EncoderMasks {
  /// [S, S] or [N·nhead, S, S]: bool (true = blocked) or float (added).
  Tensor src_mask{};
  /// [N, S]: bool (true = padding, ignored) or float (added).
  Tensor src_key_padding_mask{};
  /// Causal self-attention when src_mask is not given.
  bool is_causal = false;
};

/// One encoder block, PyTorch's nn.TransformerEncoderLayer. Children, in PyTorch's order:
/// self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
///   post-norm: x = norm1(x + dropout1(sa(x)));  x = norm2(x + dropout2(ff(x)))
///   pre-norm:  x = x + dropout1(sa(norm1(x)));  x = x + dropout2(ff(norm2(x)))
/// with ff(x) = linear2(dropout(activation(linear1(x)))).
class TransformerEncoderLayerImpl : public ModuleImpl {
 public:
  explicit TransformerEncoderLayerImpl(TransformerEncoderLayerOptions options);
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerEncoderLayerImpl(
            TransformerEncoderLayerOptions{.d_model = d_model, .nhead = nhead}) {}

  Tensor forward(const Tensor& src) override { return forward(src, EncoderMasks{}); }
  Tensor forward(const Tensor& src, const EncoderMasks& masks);

  std::string type_name() const override { return "TransformerEncoderLayer"; }
  json options() const override;
  std::string extra_repr() const override;
  const TransformerEncoderLayerOptions& layer_options() const { return options_; }
  const std::shared_ptr<MultiheadAttentionImpl>& self_attn() const { return self_attn_; }

 private:
  Tensor self_attention_block(const Tensor& x, const EncoderMasks& masks);
  Tensor feed_forward_block(const Tensor& x);

  TransformerEncoderLayerOptions options_;
  std::shared_ptr<MultiheadAttentionImpl> self_attn_;
  ModulePtr linear1_, dropout_, linear2_, norm1_, norm2_, dropout1_, dropout2_;
};

class TransformerEncoderLayer : public ModuleHolder<TransformerEncoderLayerImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Tensor operator()(const Tensor& src, const EncoderMasks& masks) const {
    return (*this)->forward(src, masks);
  }
};

struct TransformerEncoderOptions {
  TransformerEncoderLayerOptions layer{};
  int64_t num_layers = 1;
  /// A final LayerNorm(d_model, eps = layer.layer_norm_eps) named "norm".
  bool final_norm = false;
};

/// A stack of encoder layers, PyTorch's nn.TransformerEncoder: children `layers` (a
/// ModuleList, "layers.0", "layers.1", ...) and, when present, `norm`. As in PyTorch the
/// layers start as copies of one layer (identical initial weights).
class TransformerEncoderImpl : public ModuleImpl {
 public:
  explicit TransformerEncoderImpl(TransformerEncoderOptions options);
  /// num_layers copies of `layer` (its current weights), then `norm` when defined (any
  /// module mapping [.., E] to [.., E], e.g. a LayerNorm).
  TransformerEncoderImpl(const TransformerEncoderLayer& layer, int64_t num_layers,
                         Module norm = Module());

  Tensor forward(const Tensor& src) override { return forward(src, EncoderMasks{}); }
  Tensor forward(const Tensor& src, const EncoderMasks& masks);

  std::string type_name() const override { return "TransformerEncoder"; }
  json options() const override;
  /// {"type", "options": {"layer": {...}, "num_layers": n}, "children": {"norm": config}}:
  /// the norm's config is kept whole, so any registered norm module round-trips.
  json config() const override;
  size_t num_layers() const { return layers_.size(); }
  const std::shared_ptr<TransformerEncoderLayerImpl>& layer(size_t i) const;
  /// The final norm, or null.
  const ModulePtr& norm() const { return norm_; }

 private:
  void init(const TransformerEncoderLayerImpl& prototype, int64_t num_layers, ModulePtr norm);

  std::shared_ptr<ModuleListImpl> layer_list_;
  std::vector<std::shared_ptr<TransformerEncoderLayerImpl>> layers_;
  ModulePtr norm_;
};

class TransformerEncoder : public ModuleHolder<TransformerEncoderImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Tensor operator()(const Tensor& src, const EncoderMasks& masks) const {
    return (*this)->forward(src, masks);
  }
};

}  // namespace ember::nn
