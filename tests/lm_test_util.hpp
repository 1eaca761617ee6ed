// tests/lm_test_util.hpp — the language-model fixtures of tests/data/lm (tests/gen_lm_fixtures.py)
// as the model and generation tests read them.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "ember/nn/module.hpp"
#include "fixtures.hpp"

namespace ember_test {

/// tests/data/lm.
inline std::string lm_dir() { return data_dir() + "/lm"; }

/// expected.json: per model, its prompts' ids and transformers' greedy continuations.
inline ember::nn::json lm_expected() {
  std::ifstream in(lm_dir() + "/expected.json");
  return ember::nn::json::parse(in);
}

/// The ids of prompt `row` of `model` in expected.json.
inline std::vector<int64_t> lm_prompt(const std::string& model, int row) {
  return lm_expected()[model][row]["ids"].get<std::vector<int64_t>>();
}

}  // namespace ember_test
