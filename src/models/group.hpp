// src/models/group.hpp — a named level of a model's module tree with no forward of its own
// ("transformer", "h", "attn", "model", "layers" in Hugging Face's parameter names): the
// model computes through its children directly.
#pragma once

#include <string>
#include <utility>

#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/nn/module.hpp"
#include "ember/ops.hpp"

namespace ember::models::detail {

class GroupImpl : public nn::ModuleImpl {
 public:
  explicit GroupImpl(std::string type) : type_(std::move(type)) {}
  void add(const std::string& name, nn::ModulePtr module) {
    register_module(name, std::move(module));
  }
  Tensor forward(const Tensor&) override {
    ember::detail::throw_error(
        type_ +
        ".forward: this part of a language model has no forward of its own (call "
        "the model)");
  }
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
};

/// A decode step's input that layer_norm_linear / rms_norm_linear fuse (Note [A norm in front
/// of a few rows] in src/cuda/gemv.cu): at most 4 rows of a 16-bit dtype on a GPU, with no
/// gradient recorded. Elsewhere the models run their norm and linear modules (the fused ops
/// would compose there, normalising once per projection).
inline bool fusable_decode_rows(const Tensor& x) {
  return x.device().is_cuda() && x.dim() >= 1 && x.numel() <= 4 * x.size(-1) &&
         (x.dtype() == DType::bf16 || x.dtype() == DType::f16) && !grad_mode_enabled();
}

/// The rows of an embedding table for `ids` ([B, T] -> [B, T, d]): nn::Embedding's lookup
/// through index_select, which takes every dtype (a bf16 model's tables too; the embedding op
/// computes f32 and f64 only) and gives the same rows and gradient.
inline Tensor rows_of(const Tensor& weight, const Tensor& ids) {
  Shape shape = ids.shape();
  shape.push_back(weight.size(1));
  return index_select(weight, 0, ids.reshape({ids.numel()})).reshape(shape);
}

}  // namespace ember::models::detail
