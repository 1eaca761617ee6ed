// src/nn/embedding.cpp — the Embedding module over ember::embedding (src/ops/index.cpp), and
// EmbeddingBag over ember::embedding_bag.
//
// The padding row gets no gradient (as PyTorch): positions that look it up take their value
// from a detached copy of the output, so the index_add of the backward adds zeros there.
#include "ember/nn/embedding.hpp"

#include "ember/autograd.hpp"
#include "ember/nn/init.hpp"

namespace ember::nn {

namespace {

// A padding_idx in [-n, n) as a row number; out of range is refused naming the module.
std::optional<int64_t> padding_row(std::optional<int64_t> p, int64_t n, const char* module) {
  if (!p) return p;
  EMBER_CHECK(*p >= -n && *p < n, module, ": padding_idx ", *p, " is out of range (expected -", n,
              " <= padding_idx < ", n, ")");
  return *p < 0 ? *p + n : *p;
}

}  // namespace

EmbeddingImpl::EmbeddingImpl(EmbeddingOptions o) : options_(o) {
  check_options(o, "Embedding");
  options_.padding_idx = padding_row(o.padding_idx, o.num_embeddings, "Embedding");
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

EmbeddingBagImpl::EmbeddingBagImpl(EmbeddingBagOptions o) : options_(std::move(o)) {
  check_options(options_, "EmbeddingBag");
  const EmbeddingBagOptions& c = options_;
  EMBER_CHECK(c.mode == "sum" || c.mode == "mean" || c.mode == "max", "EmbeddingBag: mode '",
              c.mode, "' (expected sum, mean or max)");
  options_.padding_idx = padding_row(c.padding_idx, c.num_embeddings, "EmbeddingBag");
  Tensor w = init::normal({c.num_embeddings, c.embedding_dim});
  if (options_.padding_idx) w.select(0, *options_.padding_idx).fill_(0.0);
  weight_ = register_parameter("weight", w);
}

Tensor EmbeddingBagImpl::forward(const Tensor& input) {
  EMBER_CHECK(input.defined() && input.dim() == 2, "EmbeddingBag: input ",
              input.defined() ? input.shape().to_string() : std::string("undefined"),
              " without offsets (expected a 2-D [bags, entries] index tensor; a 1-D input needs "
              "offsets: bag(input, offsets))");
  return forward(input, Tensor());
}

Tensor EmbeddingBagImpl::forward(const Tensor& input, const Tensor& offsets,
                                 const Tensor& per_sample_weights) {
  refresh_parametrizations();
  const EmbeddingBagOptions& o = options_;
  return embedding_bag(weight_, input, offsets, o.mode, per_sample_weights, o.include_last_offset,
                       o.padding_idx);
}

void EmbeddingBagImpl::rebind_parameter(const std::string&, const Tensor& param) {
  weight_ = param;  // its only parameter
}

json EmbeddingBagImpl::options() const { return options_json(options_); }

std::string EmbeddingBagImpl::extra_repr() const {
  // torch.nn.EmbeddingBag's repr: "EmbeddingBag(10, 3, mode=mean, padding_idx=2)".
  const EmbeddingBagOptions& o = options_;
  std::string s = std::to_string(o.num_embeddings) + ", " + std::to_string(o.embedding_dim) +
                  ", mode=" + o.mode;
  if (o.padding_idx) s += ", padding_idx=" + std::to_string(*o.padding_idx);
  return s;
}

}  // namespace ember::nn
