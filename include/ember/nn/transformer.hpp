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

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "ember/nn/attention.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

/// The fields of a transformer layer's options (TransformerOptions has them too).
template <typename O>
constexpr auto transformer_layer_fields_of() {
  return std::tuple{field("d_model", &O::d_model),
                    field("nhead", &O::nhead),
                    field("dim_feedforward", &O::dim_feedforward),
                    field("dropout", &O::dropout),
                    field("activation", &O::activation),
                    field("layer_norm_eps", &O::layer_norm_eps),
                    field("batch_first", &O::batch_first),
                    field("norm_first", &O::norm_first),
                    field("bias", &O::bias)};
}

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
  static constexpr auto fields() {
    return transformer_layer_fields_of<TransformerEncoderLayerOptions>();
  }
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

/// What the encoder and decoder layers share: the options (checked, saved and printed), the
/// feed-forward block ff(x) = linear2(dropout(activation(linear1(x)))) and the residual
/// blocks. A layer of k attentions has, in PyTorch's order: the attentions, linear1, dropout,
/// linear2, norm1 .. norm(k+1), dropout1 .. dropout(k+1); residual block i is
///   post-norm: x = norm_i(x + dropout_i(block_i(x)))
///   pre-norm:  x = x + dropout_i(block_i(norm_i(x)))
class TransformerLayerBase : public ModuleImpl {
 public:
  json options() const override;
  std::string extra_repr() const override;
  const TransformerEncoderLayerOptions& layer_options() const { return options_; }

 protected:
  /// Checks the options (errors start with `name`) and registers the children, one
  /// MultiheadAttention per name in `attentions`.
  TransformerLayerBase(const char* name, TransformerEncoderLayerOptions options,
                       std::initializer_list<const char*> attentions);

  /// Residual block i (0-based) around `block`.
  Tensor residual(size_t i, const Tensor& x, const std::function<Tensor(const Tensor&)>& block);
  /// attentions[i](x, kv, kv) under `a`, without the weights.
  Tensor attend(size_t i, const Tensor& x, const Tensor& kv, AttentionOptions a);
  Tensor feed_forward(const Tensor& x);

  TransformerEncoderLayerOptions options_;
  std::vector<std::shared_ptr<MultiheadAttentionImpl>> attentions_;

 private:
  ModulePtr linear1_, dropout_, linear2_;
  std::vector<ModulePtr> norms_, dropouts_;
};

/// One encoder block, PyTorch's nn.TransformerEncoderLayer. Children, in PyTorch's order:
/// self_attn, linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
///   post-norm: x = norm1(x + dropout1(sa(x)));  x = norm2(x + dropout2(ff(x)))
///   pre-norm:  x = x + dropout1(sa(norm1(x)));  x = x + dropout2(ff(norm2(x)))
/// with ff(x) = linear2(dropout(activation(linear1(x)))).
class TransformerEncoderLayerImpl : public TransformerLayerBase {
 public:
  explicit TransformerEncoderLayerImpl(TransformerEncoderLayerOptions options);
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerEncoderLayerImpl(
            TransformerEncoderLayerOptions{.d_model = d_model, .nhead = nhead}) {}

  Tensor forward(const Tensor& src) override { return forward(src, EncoderMasks{}); }
  Tensor forward(const Tensor& src, const EncoderMasks& masks);

  std::string type_name() const override { return "TransformerEncoderLayer"; }
  const std::shared_ptr<MultiheadAttentionImpl>& self_attn() const { return attentions_[0]; }
};

class TransformerEncoderLayer : public ModuleHolder<TransformerEncoderLayerImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Tensor operator()(const Tensor& src, const EncoderMasks& masks) const {
    return (*this)->forward(src, masks);
  }
};

/// A stack of layers: TransformerEncoderOptions and TransformerDecoderOptions.
struct TransformerStackOptions {
  TransformerEncoderLayerOptions layer{};
  int64_t num_layers = 1;
  /// A final LayerNorm(d_model, eps = layer.layer_norm_eps) named "norm".
  bool final_norm = false;
  /// config() writes layer and num_layers; the final norm is the child "norm".
  static constexpr auto fields() {
    using O = TransformerStackOptions;
    return std::tuple{field("layer", &O::layer), field("num_layers", &O::num_layers),
                      field("final_norm", &O::final_norm)};
  }
};
using TransformerEncoderOptions = TransformerStackOptions;

/// What the encoder and decoder stacks share: children `layers` (a ModuleList, "layers.0",
/// "layers.1", ...) and, when present, `norm`; their options, config and the copying of one
/// layer into all (as PyTorch, the layers start with identical weights).
class TransformerStackBase : public ModuleImpl {
 public:
  json options() const override;
  /// {"type", "options": {"layer": {...}, "num_layers": n}, "children": {"norm": config}}:
  /// the norm's config is kept whole, so any registered norm module round-trips.
  json config() const override;
  size_t num_layers() const { return layer_list_->size(); }
  /// The final norm, or null.
  const ModulePtr& norm() const { return norm_; }

 protected:
  /// Registers `num_layers` copies of `prototype` (same weights, dtype, device and mode), each
  /// made by `make` from the prototype's options, then `norm` when given.
  void init(const TransformerLayerBase& prototype, int64_t num_layers, ModulePtr norm,
            const std::function<ModulePtr(const TransformerEncoderLayerOptions&)>& make);
  /// Refuses a layer index past the end.
  void check_layer_index(size_t i) const;

  ModulePtr norm_;

 private:
  std::shared_ptr<ModuleListImpl> layer_list_;
};

/// A stack of encoder layers, PyTorch's nn.TransformerEncoder (see TransformerStackBase).
class TransformerEncoderImpl : public TransformerStackBase {
 public:
  explicit TransformerEncoderImpl(TransformerEncoderOptions options);
  /// num_layers copies of `layer` (its current weights), then `norm` when defined (any
  /// module mapping [.., E] to [.., E], e.g. a LayerNorm).
  TransformerEncoderImpl(const TransformerEncoderLayer& layer, int64_t num_layers,
                         Module norm = Module());

  Tensor forward(const Tensor& src) override { return forward(src, EncoderMasks{}); }
  Tensor forward(const Tensor& src, const EncoderMasks& masks);

  std::string type_name() const override { return "TransformerEncoder"; }
  const std::shared_ptr<TransformerEncoderLayerImpl>& layer(size_t i) const;

 private:
  void init(const TransformerEncoderLayerImpl& prototype, int64_t num_layers, ModulePtr norm);

  std::vector<std::shared_ptr<TransformerEncoderLayerImpl>> layers_;
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
class TransformerDecoderLayerImpl : public TransformerLayerBase {
 public:
  explicit TransformerDecoderLayerImpl(TransformerDecoderLayerOptions options);
  TransformerDecoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerDecoderLayerImpl(
            TransformerDecoderLayerOptions{.d_model = d_model, .nhead = nhead}) {}

  /// Throws: a decoder layer needs the memory (forward(tgt, memory)).
  Tensor forward(const Tensor& tgt) override;
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {});

  std::string type_name() const override { return "TransformerDecoderLayer"; }
};

class TransformerDecoderLayer : public ModuleHolder<TransformerDecoderLayerImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  Tensor operator()(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {}) const {
    return (*this)->forward(tgt, memory, masks);
  }
};

using TransformerDecoderOptions = TransformerStackOptions;

/// A stack of decoder layers (children `layers`, `norm`), copies of one layer as PyTorch.
class TransformerDecoderImpl : public TransformerStackBase {
 public:
  explicit TransformerDecoderImpl(TransformerDecoderOptions options);
  TransformerDecoderImpl(const TransformerDecoderLayer& layer, int64_t num_layers,
                         Module norm = Module());

  /// Throws: a decoder needs the memory.
  Tensor forward(const Tensor& tgt) override;
  Tensor forward(const Tensor& tgt, const Tensor& memory, const DecoderMasks& masks = {});

  std::string type_name() const override { return "TransformerDecoder"; }
  const std::shared_ptr<TransformerDecoderLayerImpl>& layer(size_t i) const;

 private:
  void init(const TransformerDecoderLayerImpl& prototype, int64_t num_layers, ModulePtr norm);

  std::vector<std::shared_ptr<TransformerDecoderLayerImpl>> layers_;
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
  static constexpr auto fields() {
    using O = TransformerOptions;
    return std::tuple_cat(transformer_layer_fields_of<O>(),
                          std::tuple{field("num_encoder_layers", &O::num_encoder_layers),
                                     field("num_decoder_layers", &O::num_decoder_layers)});
  }
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
