// ember/nn/embedding.hpp — Embedding: a lookup table of learnable vectors (torch.nn.Embedding),
// and EmbeddingBag: their sums, means or maxima over bags (torch.nn.EmbeddingBag).
//
//   nn::Embedding emb(10000, 64, /*padding_idx=*/0);
//   Tensor v = emb(tokens);      // tokens i64 [B, T] -> v [B, T, 64]
//   nn::EmbeddingBag bag(10000, 64);            // mode "mean"
//   Tensor h = bag(tokens);                     // [B, T] -> [B, 64], one bag per row
#pragma once

#include <optional>
#include <string>

#include "ember/nn/module.hpp"

namespace ember::nn {

struct EmbeddingOptions {
  int64_t num_embeddings = 0;
  int64_t embedding_dim = 0;
  /// A row that stays out of training: initialised to zero and never given a gradient.
  /// Negative values count from the end, as in PyTorch.
  std::optional<int64_t> padding_idx = std::nullopt;
  static constexpr auto fields() {
    using O = EmbeddingOptions;
    return std::tuple{field("num_embeddings", &O::num_embeddings, opts::above(0)),
                      field("embedding_dim", &O::embedding_dim, opts::above(0)),
                      field("padding_idx", &O::padding_idx)};
  }
};

/// weight [num_embeddings, embedding_dim] ~ N(0, 1), the padding row zeroed. The forward takes
/// an integer index tensor (i64 or i32) of any shape and appends embedding_dim to it.
class EmbeddingImpl : public ModuleImpl {
 public:
  explicit EmbeddingImpl(EmbeddingOptions options);
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim,
                std::optional<int64_t> padding_idx = std::nullopt)
      : EmbeddingImpl(EmbeddingOptions{num_embeddings, embedding_dim, padding_idx}) {}
  Tensor forward(const Tensor& index) override;
  std::string type_name() const override { return "Embedding"; }
  json options() const override;
  std::string extra_repr() const override;
  const EmbeddingOptions& embedding_options() const { return options_; }
  Tensor& weight() { return param("weight"); }

 protected:
  void rebind_parameter(const std::string& name, const Tensor& param) override;

 private:
  EmbeddingOptions options_;  // padding_idx normalised to [0, num_embeddings)
  Tensor weight_;
};
class Embedding : public ModuleHolder<EmbeddingImpl> {
 public:
  using ModuleHolder::ModuleHolder;
};

struct EmbeddingBagOptions {
  int64_t num_embeddings = 0;
  int64_t embedding_dim = 0;
  /// "sum", "mean" or "max" over each bag.
  std::string mode = "mean";
  /// With offsets: the last offset is the input's length (CSR style), not a bag's start.
  bool include_last_offset = false;
  /// Entries equal to it are left out of their bag (and of the mean's count); its row is
  /// initialised to zero and gets no gradient. Negative values count from the end.
  std::optional<int64_t> padding_idx = std::nullopt;
  static constexpr auto fields() {
    using O = EmbeddingBagOptions;
    return std::tuple{field("num_embeddings", &O::num_embeddings, opts::above(0)),
                      field("embedding_dim", &O::embedding_dim, opts::above(0)),
                      field("mode", &O::mode),
                      field("include_last_offset", &O::include_last_offset),
                      field("padding_idx", &O::padding_idx)};
  }
};

/// torch.nn.EmbeddingBag over ember::embedding_bag: weight [num_embeddings, embedding_dim] ~
/// N(0, 1), the padding row zeroed. forward(input) takes a 2-D index tensor (one bag per row);
/// forward(input, offsets, per_sample_weights) a 1-D input cut into bags at `offsets`, each
/// entry scaled by its weight (mode "sum" only). PyTorch's max_norm, scale_grad_by_freq and
/// sparse are not options here.
class EmbeddingBagImpl : public ModuleImpl {
 public:
  explicit EmbeddingBagImpl(EmbeddingBagOptions options);
  EmbeddingBagImpl(int64_t num_embeddings, int64_t embedding_dim, std::string mode = "mean")
      : EmbeddingBagImpl(EmbeddingBagOptions{num_embeddings, embedding_dim, std::move(mode)}) {}
  Tensor forward(const Tensor& input) override;
  Tensor forward(const Tensor& input, const Tensor& offsets,
                 const Tensor& per_sample_weights = Tensor());
  std::string type_name() const override { return "EmbeddingBag"; }
  json options() const override;
  std::string extra_repr() const override;
  const EmbeddingBagOptions& embedding_bag_options() const { return options_; }
  Tensor& weight() { return param("weight"); }

 protected:
  void rebind_parameter(const std::string& name, const Tensor& param) override;

 private:
  EmbeddingBagOptions options_;  // padding_idx normalised to [0, num_embeddings)
  Tensor weight_;
};
class EmbeddingBag : public ModuleHolder<EmbeddingBagImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  using ModuleHolder::operator();
  /// bag(input, offsets[, per_sample_weights]): a 1-D input cut into bags at `offsets`.
  Tensor operator()(const Tensor& input, const Tensor& offsets,
                    const Tensor& per_sample_weights = Tensor()) const {
    return (*this)->forward(input, offsets, per_sample_weights);
  }
};

}  // namespace ember::nn
