// ember/io/foreign.hpp — safetensors checkpoints written by other tools (Hugging Face
// transformers, safetensors.torch) into and out of ember modules (ARCHITECTURE §7, "Foreign
// files"): one file, a sharded folder with model.safetensors.index.json, names mapped and
// tensors transformed on the way, any floating dtype into the module's.
//
//   io::LoadStateOptions gpt2;
//   gpt2.transform = [](const std::string& name, Tensor t) {      // Conv1D [in, out] → [out, in]
//     return name.ends_with("c_attn.weight") ? t.transpose(0, 1) : t;
//   };
//   io::load_state(model, "gpt2/", gpt2);                        // folder, index or file
//   io::save_state(model, "out/", {.dtype = DType::bf16, .max_shard_bytes = 2'000'000'000});
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "ember/nn/module.hpp"
#include "ember/tensor.hpp"

namespace ember::io {

/// How a foreign checkpoint's tensors become the module's (load_state below).
struct LoadStateOptions {
  /// The file's name → the module's state_dict name; "" skips the tensor (GPT-2's
  /// `attn.bias` causal-mask buffers, say). Unset: names are kept.
  std::function<std::string(const std::string& file_name)> rename{};
  /// Called with the module's name and the tensor as read (host memory, the file's dtype;
  /// after rename, before the shape check); returns the tensor to load (a transposed Conv1D
  /// weight, say). Unset: tensors are loaded as read.
  std::function<Tensor(const std::string& name, Tensor t)> transform{};
  /// Strict: one ember::Error listing every missing, unexpected and mismatched name, and
  /// nothing changes. Non-strict: what fits is loaded and the report says the rest.
  bool strict = true;
};

/// Loads a safetensors checkpoint written by any tool into `model`'s parameters and buffers,
/// where they are (CPU or GPU; their data_ptr() is kept). `path` is a .safetensors file, a
/// model.safetensors.index.json (its shards beside it), or a folder holding model.safetensors
/// or else model.safetensors.index.json (Hugging Face's layout, the single file preferred as
/// transformers prefers it). A floating tensor is converted to its parameter's dtype (bf16,
/// f16 or f32 files into f32 or bf16 modules); other dtypes must match. Every tensor is read,
/// transformed and checked before any parameter changes (peak memory: one extra host copy
/// of the model). Tied parameters (ModuleImpl::tie) are one tensor under several names: it
/// is missing only when the file has none of them, and when the file has several, each is
/// loaded in state_dict order so the last one wins (as PyTorch's load_state_dict). Files
/// with ember's checksum are verified first. The report's names are the module's. Pass an
/// options object (LoadStateOptions{} or designated fields): a bare {} picks the overload of
/// checkpoint.hpp, load_state(model, path, bool strict), with strict = false.
///   io::load_state(llama, "Llama-3.2-1B/", {.strict = true});
nn::LoadReport load_state(const nn::Module& model, const std::string& path,
                          const LoadStateOptions& options);

/// How a module's tensors are written for other tools (save_state below).
struct SaveStateOptions {
  /// The module's name → the file's; "" leaves the tensor out. Unset: names are kept.
  std::function<std::string(const std::string& model_name)> rename{};
  /// Called with the module's name and its tensor (no gradient recorded); returns the tensor
  /// to store (a Linear weight transposed back to a Conv1D one, say).
  std::function<Tensor(const std::string& name, Tensor t)> transform{};
  /// Store floating tensors in this dtype (bf16 halves an f32 model); unset: as they are.
  std::optional<DType> dtype = std::nullopt;
  /// Split into shards of at most this many bytes of tensor data (one tensor larger than that
  /// gets a shard of its own) when the tensors need more; 0: always one file.
  uint64_t max_shard_bytes = 0;
  /// Extra string metadata in every file (keys must not start with "ember." or be "format").
  std::map<std::string, std::string> metadata{};
};

/// Writes `model`'s state_dict in Hugging Face's layout: safetensors with metadata
/// {"format": "pt"} (plus ember's checksum keys, which other readers ignore). A tied tensor
/// is written once, under its first name in state_dict order (transformers' convention:
/// lm_head.weight is left out when tied to the embedding). `path` is a folder (created when
/// absent; the file is model.safetensors) or a NAME.safetensors file. When the tensors exceed
/// options.max_shard_bytes they go to NAME-00001-of-0000N.safetensors ... and
/// NAME.safetensors.index.json ({"metadata": {"total_size": bytes, "total_parameters": count},
/// "weight_map": {tensor name: shard}}), written last. Each file is written atomically; then
/// the other layout's files of NAME left by an earlier save (NAME.safetensors, its index, shards
/// not written now) are removed, as transformers' save_pretrained does, so a folder holds
/// one checkpoint.
///   io::save_state(model, "out/", {.max_shard_bytes = 5'000'000'000});
void save_state(const nn::Module& model, const std::string& path,
                const SaveStateOptions& options = {});

}  // namespace ember::io
