// tests/test_cli_generate.cpp — `ember generate` (tools/ember.cpp) run as a child process on the
// tiny GPT-2 fixture (tests/data/lm/gpt2 with gpt2_tok/tokenizer.json): greedy output is the
// decoding of transformers' greedy ids, a seed repeats a sample, and bad input (a missing
// folder or tokenizer, a prompt longer than the context, an unknown or conflicting flag) ends
// with a short message and a non-zero status, printing nothing on stdout.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "ember/ember.hpp"
#include "ember/text/tokenizer.hpp"
#include "fixtures.hpp"
#include "io_test_util.hpp"
#include "lm_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::CliRun;
using ember_test::lm_dir;
using ember_test::ScratchDir;
using ember_test::Stderr;
namespace fs = std::filesystem;

// `ember <args>` with stdout (the generated text) and stderr (errors) apart.
CliRun run_cli_apart(const std::string& args) { return ember_test::run_cli(args, Stderr::apart); }

// A model folder as Hugging Face ships one: the fixture's config and weights with the
// tokenizer beside them.
std::string model_folder(const ScratchDir& scratch) {
  const fs::path dir = scratch.file("gpt2");
  fs::create_directory(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(lm_dir() + "/gpt2/" + f, dir / f);
  fs::copy_file(lm_dir() + "/gpt2_tok/tokenizer.json", dir / "tokenizer.json");
  return dir.string();
}

// Fails with a non-zero status (not a signal), `says` on stderr, a short message, no trace,
// and nothing generated on stdout.
void expect_usage_error(const std::string& args, const std::string& says) {
  const CliRun r = ember_test::expect_cli_error(args, says, 3, Stderr::apart);
  EXPECT_EQ(r.output, "") << args;
}

TEST(CliGenerate, GreedyPrintsTheDecodedReferenceContinuation) {
  SKIP_WITHOUT_CLI();
  ScratchDir scratch;
  const std::string folder = model_folder(scratch);
  std::ifstream in(lm_dir() + "/expected.json");
  const nn::json row = nn::json::parse(in)["gpt2"][0];
  ASSERT_EQ(row["prompt"], "The quick brown fox");
  const auto greedy = row["greedy"].get<std::vector<int64_t>>();
  ASSERT_EQ(greedy.size(), 12u);
  const auto tokenizer = text::Tokenizer::from_file(folder + "/tokenizer.json");

  const CliRun r = run_cli_apart("generate " + folder +
                                 " --prompt 'The quick brown fox' --max-new-tokens 12 --greedy");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.output, tokenizer.decode(greedy, /*skip_special_tokens=*/true) + "\n");
  EXPECT_EQ(r.err, "");

  // --tokenizer names one elsewhere: the same text.
  fs::remove(folder + "/tokenizer.json");
  const CliRun t =
      run_cli_apart("generate " + folder + " -p 'The quick brown fox' -n 12 --greedy " +
                    "--tokenizer " + lm_dir() + "/gpt2_tok/tokenizer.json");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_EQ(t.output, r.output);
}

TEST(CliGenerate, ASeedRepeatsASample) {
  SKIP_WITHOUT_CLI();
  ScratchDir scratch;
  const std::string folder = model_folder(scratch);
  const std::string args =
      "generate " + folder + " -p 'The quick brown fox' -n 20 --temperature 0.8 --top-p 0.9 ";
  const CliRun a = run_cli_apart(args + "--seed 7");
  const CliRun b = run_cli_apart(args + "--seed 7");
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_EQ(a.output, b.output);
  EXPECT_GT(a.output.size(), 1u);
}

TEST(CliGenerate, BadInputGivesAClearError) {
  SKIP_WITHOUT_CLI();
  ScratchDir scratch;
  const std::string folder = model_folder(scratch);
  expect_usage_error("generate " + scratch.file("absent") + " -p hi", "absent: no such folder");
  expect_usage_error("generate " + lm_dir() + "/gpt2 -p hi",
                     "tokenizer.json: no such file (the model folder has no tokenizer.json; pass "
                     "--tokenizer PATH)");
  expect_usage_error("generate " + folder + " -p hi --tokenizer " + scratch.file("none.json"),
                     "--tokenizer " + scratch.file("none.json") + ": no such file");
  expect_usage_error("generate " + folder, "--prompt is required");
  expect_usage_error("generate " + folder + " -p ''", "--prompt is empty");
  expect_usage_error("generate " + folder + " -p hi --frobnicate", "--frobnicate");
  expect_usage_error("generate " + folder + " -p hi --greedy --top-p 0.5",
                     "--greedy excludes --top-p");
  expect_usage_error("generate " + folder + " -p hi --top-p 1.5",
                     "--top-p 1.5 (expected 0 < p <= 1)");
  expect_usage_error("generate " + folder + " -p hi -n 0",
                     "--max-new-tokens: '0' is not a whole number >= 1");
  std::string long_prompt;
  for (int i = 0; i < 20; ++i) long_prompt += "The quick brown fox ";
  expect_usage_error("generate " + folder + " -p '" + long_prompt + "'",
                     "the model's context 64 positions (expected a shorter prompt");
  expect_usage_error("generate " + folder + " -p 'The quick brown fox' -n 60",
                     "need 74 positions, more than the model's context of 64 (expected "
                     "--max-new-tokens 50 or fewer)");
}

}  // namespace
