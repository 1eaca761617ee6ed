// tools/cli_common.hpp — what the `ember` command's subcommands share (tools/ember.cpp, the
// subcommands' own files such as tools/generate.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ember/device.hpp"

namespace ember_cli {

/// `path` is a regular file this process can read; ember::Error naming `flag` otherwise.
void check_input_file(const char* flag, const std::string& path);
/// The device exists on this machine (Device::parse checks the spelling).
ember::Device check_device(const std::string& name);

/// `ember generate`'s flags (tools/generate.cpp).
struct GenerateArgs {
  std::string model;  // a Hugging Face folder: config.json and model.safetensors
  std::string prompt;
  std::string tokenizer;                  // default: MODEL/tokenizer.json
  std::optional<int64_t> max_new_tokens;  // default: 64, or what fits
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  double repetition_penalty = 1.0;
  std::optional<uint64_t> seed;  // default: a random seed
  bool greedy = false;
  std::string device = "cpu";
  bool bf16 = false;
};
/// Continues the prompt, writing only the new text to stdout as it comes (a line end follows).
int cmd_generate(GenerateArgs g);

}  // namespace ember_cli
