// tools/train_text.hpp — `ember train --model gpt2|llama --config CONFIG.json --text FILE -o
// FOLDER`: a language model trained from scratch on a text file, saved as a Hugging Face folder
// that `ember generate` reads (docs/language_models.md, "Training a language model from the
// command line").
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "cli_common.hpp"

namespace ember_cli {

/// The flags only text training has (the rest are TrainArgs).
struct TextArgs {
  std::string text;                // the file to train on
  std::string config;              // a Hugging Face config.json (model_type gpt2 or llama)
  std::string tokenizer;           // tokenizer.json; empty: the tokens are the text's bytes
  std::optional<int64_t> context;  // default: min(256, the config's context)
  std::optional<int64_t> steps;    // optimizer steps instead of --epochs
  double val_fraction = 0.05;      // the tail of the text held out for validation
};

/// Adds --text, --config, --tokenizer, --context, --steps and --val-fraction to `train`, with
/// the rules between them and the other flags (--steps excludes --epochs, --text the data
/// flags, the others need --text).
void add_text_options(CLI::App* train, TextArgs& x);

/// Trains the language model; `batch_size` is --batch-size when given (default: 16).
int cmd_train_text(const TrainArgs& t, const TextArgs& x, std::optional<int64_t> batch_size);

}  // namespace ember_cli
