// src/models/pretrained.cpp — models::from_pretrained / save_pretrained
// (include/ember/models/pretrained.hpp).
//
// Note [GPT-2's checkpoint layout]
// Hugging Face's GPT-2 keeps OpenAI's Conv1D modules: c_attn, c_proj and c_fc weights are
// [in, out], the transpose of nn::Linear's [out, in]; the two LayerNorm-free "attn.bias" /
// "attn.masked_bias" entries of older files are the causal mask, a buffer ember does not keep.
// GPT2LMHeadModel files prefix every name with "transformer." and leave out the tied
// lm_head.weight; GPT2Model files (openai-community/gpt2's own) have no prefix. Loading maps
// all of these onto nn::GPT2's names; saving writes GPT2LMHeadModel's.
#include "ember/models/pretrained.hpp"

#include <filesystem>

#include "ember/error.hpp"
#include "ember/io/foreign.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/models/gpt2.hpp"
#include "ember/models/llama.hpp"
#include "ember/nn/init.hpp"
#include "models/config_json.hpp"

namespace ember::models {

namespace {

// Note [GPT-2's checkpoint layout].
bool is_conv1d_weight(const std::string& name) {
  return name.find(".h.") != std::string::npos &&
         (name.ends_with("c_attn.weight") || name.ends_with("c_proj.weight") ||
          name.ends_with("c_fc.weight"));
}

std::string gpt2_name(const std::string& file_name) {
  if (file_name.ends_with(".attn.bias") || file_name.ends_with(".attn.masked_bias")) return "";
  if (file_name == "lm_head.weight" || file_name.starts_with("transformer.")) return file_name;
  return "transformer." + file_name;
}

Tensor transpose_conv1d(const std::string& name, Tensor t) {
  return is_conv1d_weight(name) && t.dim() == 2 ? t.transpose(0, 1).contiguous() : t;
}

}  // namespace

nn::CausalLM from_pretrained(const std::string& folder, const PretrainedOptions& options) {
  const std::string op = "models::from_pretrained";
  EMBER_CHECK(std::filesystem::is_directory(folder), op, ": ", folder,
              " is not a folder (expected a Hugging Face model folder with config.json)");
  EMBER_CHECK(options.dtype == DType::f32 || options.dtype == DType::bf16, op, ": dtype ",
              dtype_name(options.dtype), " (expected f32 or bf16)");
  const std::string config_path = (std::filesystem::path(folder) / "config.json").string();
  const nn::json config = detail::read_json_file(config_path, op);
  const std::string type = detail::string_field(config, "model_type", "", op);
  io::LoadStateOptions load;
  nn::CausalLM model{std::shared_ptr<nn::CausalLMImpl>()};
  {
    nn::init::SkipInitGuard skip(options.device);  // every value comes from the file
    if (type == "gpt2") {
      model = nn::CausalLM(std::shared_ptr<nn::CausalLMImpl>(
          std::make_shared<nn::GPT2Impl>(nn::GPT2Config::from_json(config))));
      load.rename = gpt2_name;
      load.transform = transpose_conv1d;
    } else if (type == "llama") {
      model = nn::CausalLM(std::shared_ptr<nn::CausalLMImpl>(
          std::make_shared<nn::LlamaImpl>(nn::LlamaConfig::from_json(config))));
      load.rename = [](const std::string& name) {
        return name.ends_with("rotary_emb.inv_freq") ? std::string() : name;
      };
    } else {
      ember::detail::throw_error(op + ": " + config_path + " names model_type \"" + type +
                                 "\" (expected gpt2 or llama)");
    }
  }
  // Parameters a module fills with constants (LayerNorm's ones) are made on the CPU even
  // under the guard: everything moves to the device before it is loaded in place.
  model->to(options.device);
  if (options.dtype != DType::f32) model->to(options.dtype);
  model->eval();
  io::load_state(nn::Module(model), folder, load);
  return model;
}

void save_pretrained(const nn::Module& model, const std::string& folder,
                     const SavePretrainedOptions& options) {
  const std::string op = "models::save_pretrained";
  EMBER_CHECK(model.defined(), op, ": an empty model handle (expected an nn::GPT2 or nn::Llama)");
  EMBER_CHECK(dynamic_cast<const nn::GPT2Impl*>(model.ptr().get()) ||
                  dynamic_cast<const nn::LlamaImpl*>(model.ptr().get()),
              op, ": a ", model->type_name(),
              " (expected an nn::GPT2 or nn::Llama: config.json is written from its config)");
  nn::json config = model->options();
  io::SaveStateOptions save{.dtype = options.dtype, .max_shard_bytes = options.max_shard_bytes};
  if (dynamic_cast<const nn::GPT2Impl*>(model.ptr().get())) save.transform = transpose_conv1d;
  std::filesystem::create_directories(folder);
  const DType stored = options.dtype.value_or(model->parameters().front().dtype());
  config["torch_dtype"] = config["dtype"] = stored == DType::bf16 ? "bfloat16" : "float32";
  io::save_state(model, folder, save);
  io::write_file_atomically((std::filesystem::path(folder) / "config.json").string(),
                            config.dump(2) + "\n");
}

}  // namespace ember::models
