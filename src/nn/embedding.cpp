// src/nn/embedding.cpp — the Embedding module over ember::embedding (src/ops/index.cpp).
//
// The padding row gets no gradient (as PyTorch): positions that look it up take their value
// from a detached copy of the output, so the index_add of the backward adds zeros there.
#include "ember/nn/embedding.hpp"

#include "ember/autograd.hpp"
#include "ember/nn/init.hpp"

namespace ember::nn {

EmbeddingImpl::EmbeddingImpl(EmbeddingOptions o) : options_(o) {
  check_options(o, "Embedding");
  if (o.padding_idx) {
    const int64_t p = *o.padding_idx;
    EMBER_CHECK(p >= -o.num_embeddings && p < o.num_embeddings, "Embedding: padding_idx ", p,
                " is out of range (expected -", o.num_embeddings, " <= padding_idx < ",
                o.num_embeddings, ")");
    if (p < 0) options_.padding_idx = p + o.num_embeddings;
  }
  Tensor w = init::normal({o.num_embeddings, o.embedding_dim});
  if (options_.padding_idx) w.select(0, *options_.padding_idx).fill_(0.0);
  weight_ = register_parameter("weight", w);
}

Tensor EmbeddingImpl::forward(const Tensor& index) {
  refresh_parametrizations();
  Tensor out = embedding(weight_, index);
  if (!options_.padding_idx || !grad_mode_enabled() || !weight_.requires_grad()) return out;
  Tensor is_pad = eq(index, static_cast<double>(*options_.padding_idx)).unsqueeze(-1);
  return where(is_pad, out.detach(), out);
}

void EmbeddingImpl::rebind_parameter(const std::string&, const Tensor& param) {
  weight_ = param;  // its only parameter; tie() checked the name and the shape
}

json EmbeddingImpl::options() const { return options_json(options_); }

std::string EmbeddingImpl::extra_repr() const {
  const EmbeddingOptions& o = options_;
  std::string s = std::to_string(o.num_embeddings) + ", " + std::to_string(o.embedding_dim);
  if (o.padding_idx) s += ", padding_idx=" + std::to_string(*o.padding_idx);
  return s;
}

}  // namespace ember::nn
