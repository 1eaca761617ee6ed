// ember/nn/transformer.hpp — TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer,
// TransformerDecoder and Transformer, with PyTorch's child names, so state dicts move both ways
// ("layers.0.self_attn.in_proj_weight", "layers.1.norm2.bias", "norm.weight").
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

// ---- decoder side and the full encoder-decoder (PyTorch's nn.TransformerDecoderLayer,
// nn.TransformerDecoder, nn.Transformer). T = target length, S = source (memory) length.

/// The decoder layer takes the encoder layer's options (same fields, same defaults).
using TransformerDecoderLayerOptions = TransformerEncoderLayerOptions;

/// Masks for a decoder forward (conventions as AttentionOptions).
struct DecoderMasks {
  /// [T, T] or [N·nhead, T, T]: self-attention mask over the target.
  Tensor tgt_mask{};
  /// [T, S] or [N·nhead, T, S]: cross-attention mask over the memory.
  Tensor memory_mask{};
  /// [N, T] and [N, S]: true (or -inf) = padding, ignored.
  Tensor tgt_key_padding_mask{};
  Tensor memory_key_padding_mask{};
  /// A causal target mask when tgt_mask is not given (PyTorch's tgt_is_causal).
  bool tgt_is_causal = false;
  /// A causal memory mask (T x S) when memory_mask is not given.
  bool memory_is_causal = false;
};

/// One decoder block. Children, in PyTorch's order: self_attn, multihead_attn, linear1,
/// dropout, linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3.
///   post-norm: x = norm1(x + sa(x)); x = norm2(x + mha(x, mem)); x = norm3(x + ff(x))
///   pre-norm:  x = x + sa(norm1(x)); x = x + mha(norm2(x), mem); x = x + ff(norm3(x))
class TransformerDecoderLayerImpl : public ModuleImpl {
 public:
  explicit TransformerDecoderLayerImpl(TransformerDecoderLayerOptions options);
  TransformerDecoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerDecoderLayerImpl(
            TransformerDecoderLayerOptions{.d_model = d_model, .nhead = nhead}) {}

  /// Throws: a decoder layer needs the memory (forward(tgt, memory)).
  Tensor forward(const Tensor& tgt) override;
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {});

  std::string type_name() const override { return "TransformerDecoderLayer"; }
  json options() const override;
  std::string extra_repr() const override;
  const TransformerDecoderLayerOptions& layer_options() const { return options_; }

 private:
  Tensor self_attention_block(const Tensor& x, const DecoderMasks& masks);
  Tensor cross_attention_block(const Tensor& x, const Tensor& memory, const DecoderMasks& masks);
  Tensor feed_forward_block(const Tensor& x);

  TransformerDecoderLayerOptions options_;
  std::shared_ptr<MultiheadAttentionImpl> self_attn_, multihead_attn_;
  ModulePtr linear1_, dropout_, linear2_, norm1_, norm2_, norm3_, dropout1_, dropout2_, dropout3_;
};

class TransformerDecoderLayer : public ModuleHolder<TransformerDecoderLayerImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Tensor operator()(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {}) const {
    return (*this)->forward(tgt, memory, masks);
  }
};

struct TransformerDecoderOptions {
  TransformerDecoderLayerOptions layer{};
  int64_t num_layers = 1;
  /// A final LayerNorm(d_model, eps = layer.layer_norm_eps) named "norm".
  bool final_norm = false;
};

/// A stack of decoder layers (children `layers`, `norm`), copies of one layer as PyTorch.
class TransformerDecoderImpl : public ModuleImpl {
 public:
  explicit TransformerDecoderImpl(TransformerDecoderOptions options);
  TransformerDecoderImpl(const TransformerDecoderLayer& layer, int64_t num_layers,
                         Module norm = Module());

  /// Throws: a decoder needs the memory.
  Tensor forward(const Tensor& tgt) override;
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {});

  std::string type_name() const override { return "TransformerDecoder"; }
  json options() const override;
  /// As TransformerEncoder: {"options": {"layer", "num_layers"}, "children": {"norm": ...}}.
  json config() const override;
  size_t num_layers() const { return layers_.size(); }
  const std::shared_ptr<TransformerDecoderLayerImpl>& layer(size_t i) const;
  const ModulePtr& norm() const { return norm_; }

 private:
  void init(const TransformerDecoderLayerImpl& prototype, int64_t num_layers, ModulePtr norm);

  std::shared_ptr<ModuleListImpl> layer_list_;
  std::vector<std::shared_ptr<TransformerDecoderLayerImpl>> layers_;
  ModulePtr norm_;
};

class TransformerDecoder : public ModuleHolder<TransformerDecoderImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Tensor operator()(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {}) const {
    return (*this)->forward(tgt, memory, masks);
  }
};

struct TransformerOptions {
  int64_t d_model = 512;
  int64_t nhead = 8;
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  /// "relu" or "gelu".
  std::string activation = "relu";
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;
};

/// Every mask of a Transformer forward (see EncoderMasks and DecoderMasks).
struct TransformerMasks {
  Tensor src_mask{};
  Tensor tgt_mask{};
  Tensor memory_mask{};
  Tensor src_key_padding_mask{};
  Tensor tgt_key_padding_mask{};
  Tensor memory_key_padding_mask{};
  bool src_is_causal = false;
  bool tgt_is_causal = false;
  bool memory_is_causal = false;
};

/// PyTorch's nn.Transformer: children `encoder` (TransformerEncoder with a final `norm`) and
/// `decoder` (TransformerDecoder with a final `norm`). As PyTorch's _reset_parameters, every
/// parameter of more than one dim is then re-drawn from xavier_uniform (independently per
/// layer); biases and norms keep their defaults.
///   nn::Transformer model(nn::TransformerOptions{.d_model = 32, .nhead = 4});
///   Tensor y = model(src, tgt, {.tgt_mask =
///   nn::TransformerImpl::generate_square_subsequent_mask(T)});
class TransformerImpl : public ModuleImpl {
 public:
  explicit TransformerImpl(TransformerOptions options);

  /// Throws: a Transformer needs src and tgt.
  Tensor forward(const Tensor& src) override;
  /// src [S, N, E], tgt [T, N, E] (batch_first: [N, S, E], [N, T, E]) -> [T, N, E].
  Tensor forward(const Tensor& src, const Tensor& tgt, const TransformerMasks& masks = {});

  std::string type_name() const override { return "Transformer"; }
  json options() const override;
  std::string extra_repr() const override;
  const std::shared_ptr<TransformerEncoderImpl>& encoder() const { return encoder_; }
  const std::shared_ptr<TransformerDecoderImpl>& decoder() const { return decoder_; }

  /// Float [n, n]: -inf above the diagonal, 0 on and below it (PyTorch's helper).
  static Tensor generate_square_subsequent_mask(int64_t n, Device device = default_device());

 private:
  TransformerOptions options_;
  std::shared_ptr<TransformerEncoderImpl> encoder_;
  std::shared_ptr<TransformerDecoderImpl> decoder_;
};

class Transformer : public ModuleHolder<TransformerImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Tensor operator()(const Tensor& src, const Tensor& tgt,
                    const TransformerMasks& masks = {}) const {
    return (*this)->forward(src, tgt, masks);
  }
};

/// The same mask as TransformerImpl::generate_square_subsequent_mask.
Tensor generate_square_subsequent_mask(int64_t n, Device device = default_device());

}  // namespace ember::nn
