// ember/models/pretrained.hpp — Hugging Face model folders in one call: config.json and
// model.safetensors (or a sharded model.safetensors.index.json) into nn::GPT2 / nn::Llama,
// and back in transformers' layout (docs/language_models.md).
//
//   nn::CausalLM model = models::from_pretrained("gpt2/", {.device = Device::cuda(0)});
//   ... fine-tune ...
//   models::save_pretrained(model, "gpt2-tuned/");    // transformers' from_pretrained reads it
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ember/device.hpp"
#include "ember/dtype.hpp"
#include "ember/models/causal_lm.hpp"

namespace ember::models {

struct PretrainedOptions {
  /// Where the model is built and loaded (its parameters are allocated there once; nothing
  /// is drawn at random).
  Device device = Device::cpu();
  /// The parameters' dtype (f32 or bf16; the file's bf16/f16/f32 values are converted).
  DType dtype = DType::f32;
};

/// The model config.json names (model_type "gpt2" or "llama"), with the folder's weights:
/// GPT-2's Conv1D weights transposed into nn::Linear's [out, in], its attn.bias mask buffers
/// skipped, names with or without the "transformer." prefix (GPT2Model or GPT2LMHeadModel
/// files), a tied lm_head absent from the file. Strict: an unknown architecture, or any
/// missing, unexpected or mismatched tensor, is one ember::Error listing every name, and no
/// model is returned.
nn::CausalLM from_pretrained(const std::string& folder, const PretrainedOptions& options = {});

struct SavePretrainedOptions {
  /// Store the weights in this dtype (unset: the parameters' own).
  std::optional<DType> dtype = std::nullopt;
  /// Shard above this many bytes (model-0000i-of-0000N.safetensors and the index); 0: one file.
  uint64_t max_shard_bytes = 0;
};

/// Writes config.json and the weights in transformers' layout (GPT-2's Conv1D weights
/// transposed back; a tied lm_head left out), so that transformers' from_pretrained on the
/// folder gives the same model. The folder is created when absent. `model` is an nn::GPT2,
/// nn::Llama or the nn::CausalLM from_pretrained returned (another module: ember::Error).
void save_pretrained(const nn::Module& model, const std::string& folder,
                     const SavePretrainedOptions& options = {});

}  // namespace ember::models
