// ember/nn/embedding.hpp — Embedding: a lookup table of learnable vectors (torch.nn.Embedding).
//
//   nn::Embedding emb(10000, 64, /*padding_idx=*/0);
//   Tensor v = emb(tokens);      // tokens i64 [B, T] -> v [B, T, 64]
#pragma once

#include <optional>

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

}  // namespace ember::nn
