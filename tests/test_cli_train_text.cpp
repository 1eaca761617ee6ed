// tests/test_cli_train_text.cpp — `ember train --model gpt2|llama --config C --text FILE -o DIR`
// (tools/train_text.cpp) run as a child process on the GNU GPL (Debian's base-files ships
// /usr/share/common-licenses/GPL-3): tiny models trained on the CPU in byte mode lose most of
// their validation loss within a few dozen steps; a checkpointed run resumed mid-epoch, at an
// epoch's end or mid-way through --steps ends exactly where the uninterrupted run does; the
// folder written is one `ember generate` continues a prompt from, with a byte tokenizer.json
// that encodes any text to its raw bytes; --tokenizer copies a tokenizer.json; bad input
// ends in one clear line before any work. --capture trains on a CUDA device only.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/text/tokenizer.hpp"
#include "fixtures.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::CliRun;
using ember_test::expect_cli_error;
using ember_test::run_cli;
using ember_test::ScratchDir;
using ember_test::write_text;
namespace fs = std::filesystem;

constexpr const char* kGpl = "/usr/share/common-licenses/GPL-3";

#define SKIP_WITHOUT_GPL()                                                               \
  SKIP_WITHOUT_CLI();                                                                    \
  if (!fs::is_regular_file(kGpl))                                                        \
  GTEST_SKIP() << kGpl                                                                   \
               << " is absent (Debian's base-files package ships it): no text to train " \
                  "on"

// A GPT-2 of 2 layers, 32 wide, 4 heads, 64 positions: about 30,000 parameters.
std::string gpt2_config(int64_t vocab = 256) {
  return R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 4, "n_positions": 64,
             "vocab_size": )" +
         std::to_string(vocab) + "}";
}

// A Llama of 2 layers, 32 wide, 4 query heads sharing 2 key/value heads, 64 positions.
std::string llama_config() {
  return R"({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "max_position_embeddings": 64, "vocab_size": 256, "tie_word_embeddings": false})";
}

// The number that follows the first `label` in `text`; NaN when there is none.
double number_after(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + at + label.size(), nullptr);
}

// The line of `text` that starts with `prefix` ("" when none).
std::string line_starting(const std::string& text, const std::string& prefix) {
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end == std::string::npos ? end : end - at);
    if (line.rfind(prefix, 0) == 0) return line;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The first `bytes` bytes of the GPL, as a file in `dir` (resume tests: a dozen batches).
std::string gpl_prefix(const ScratchDir& dir, size_t bytes) {
  const std::string path = dir.file("gpl_prefix.txt");
  write_text(path, read_file(kGpl).substr(0, bytes));
  return path;
}

// One GPT-2 trained on the GPL in byte mode, shared by the tests that read its folder.
struct Trained {
  ScratchDir dir;
  CliRun run;
  std::string folder;
};

const Trained& gpt2_on_gpl() {
  static const std::unique_ptr<Trained> trained = [] {
    auto t = std::make_unique<Trained>();
    write_text(t->dir.file("small.json"), gpt2_config());
    t->folder = t->dir.file("gpl-gpt2");
    t->run = run_cli(std::string("train --model gpt2 --config ") + t->dir.file("small.json") +
                     " --text " + kGpl +
                     " --context 32 --steps 60 --lr 3e-3 --optimizer adamw --progress lines -o " +
                     t->folder);
    return t;
  }();
  return *trained;
}

TEST(CliTrainText, BytesGpt2LossFallsOnTheGpl) {
  SKIP_WITHOUT_GPL();
  const Trained& t = gpt2_on_gpl();
  ASSERT_EQ(t.run.status, 0) << t.run.output;
  const std::string& out = t.run.output;
  EXPECT_NE(out.find("GPT2: 2 layers"), std::string::npos) << out;
  EXPECT_NE(out.find("vocabulary 256, context 32 of 64 positions"), std::string::npos) << out;
  EXPECT_NE(out.find("35,149 tokens (bytes)"), std::string::npos) << out;
  // Untrained, the model is close to uniform over 256 bytes: loss ln 256 = 5.545.
  const double before = number_after(out, "validation before training: loss ");
  EXPECT_NEAR(before, std::log(256.0), 0.15) << out;
  EXPECT_NEAR(number_after(line_starting(out, "validation before training: "), "perplexity "),
              std::exp(before), 0.01 * std::exp(before))
      << out;
  // 60 steps of 16 windows: past the letter frequencies (about 3 nats), well below uniform.
  const double after = number_after(out, "\nvalidation: loss ");
  EXPECT_LT(after, 3.45) << out;
  EXPECT_LT(after, before - 2.0) << out;
  EXPECT_NEAR(number_after(line_starting(out, "validation: loss "), "perplexity "), std::exp(after),
              0.01 * std::exp(after))
      << out;
  EXPECT_NE(out.find("epoch 1/1: loss "), std::string::npos) << out;
  EXPECT_NE(out.find("  perplexity "), std::string::npos) << out;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    EXPECT_TRUE(fs::is_regular_file(t.folder + "/" + f)) << f << "\n" << out;
  // transformers' layout: config.json names the architecture and the sizes given.
  const nn::json config = nn::json::parse(read_file(t.folder + "/config.json"));
  EXPECT_EQ(config["model_type"], "gpt2");
  EXPECT_EQ(config["vocab_size"], 256);
  EXPECT_EQ(config["n_embd"], 32);
}

TEST(CliTrainText, GenerateContinuesFromTheFolder) {
  SKIP_WITHOUT_GPL();
  const Trained& t = gpt2_on_gpl();
  ASSERT_EQ(t.run.status, 0) << t.run.output;
  const CliRun g =
      run_cli("generate " + t.folder + " --greedy -n 20 --prompt GNU", ember_test::Stderr::apart);
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_EQ(g.err, "");
  // 20 new bytes and the line end (a byte that ends no UTF-8 character prints as U+FFFD).
  EXPECT_GE(g.output.size(), 21u) << g.output;
  EXPECT_EQ(g.output.back(), '\n');
  // Greedy is deterministic.
  EXPECT_EQ(
      run_cli("generate " + t.folder + " --greedy -n 20 --prompt GNU", ember_test::Stderr::apart)
          .output,
      g.output);
}

// Note [The byte tokenizer] in tools/train_text.cpp: encode gives the raw bytes of any text,
// decode gives the text back.
TEST(CliTrainText, ByteTokenizerEncodesToTheRawBytes) {
  SKIP_WITHOUT_GPL();
  const Trained& t = gpt2_on_gpl();
  ASSERT_EQ(t.run.status, 0) << t.run.output;
  const text::Tokenizer tok = text::Tokenizer::from_file(t.folder + "/tokenizer.json");
  EXPECT_EQ(tok.vocab_size(), 256);
  // Every byte value valid UTF-8 holds: U+0000 .. U+07FF (all of ASCII, the lead bytes C2-DF,
  // every continuation byte 80-BF), a character for each 3-byte lead (E0-EF) and each 4-byte
  // lead (F0-F4).
  std::string all_bytes;
  auto append = [&](uint32_t cp) {
    if (cp < 0x80) {
      all_bytes += static_cast<char>(cp);
    } else if (cp < 0x800) {
      all_bytes += static_cast<char>(0xC0 | (cp >> 6));
      all_bytes += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      all_bytes += static_cast<char>(0xE0 | (cp >> 12));
      all_bytes += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      all_bytes += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      all_bytes += static_cast<char>(0xF0 | (cp >> 18));
      all_bytes += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      all_bytes += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      all_bytes += static_cast<char>(0x80 | (cp & 0x3F));
    }
  };
  for (uint32_t cp = 0; cp < 0x800; ++cp) append(cp);
  for (uint32_t lead = 0; lead < 16; ++lead) append(lead == 0 ? 0x800 : lead << 12);
  for (uint32_t lead = 0; lead < 5; ++lead) append(lead == 0 ? 0x10000 : lead << 18);
  const std::string samples[] = {
      all_bytes,
      "GNU GENERAL PUBLIC LICENSE\n  Version 3, 29 June 2007\r\n\t",
      "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82 "
      "\xc2\xa0\xc2\xad\xc3\xbf",  // é ï 日本語 🙂, NBSP, soft hyphen, ÿ
      " leading and  double  spaces ",
      "it's 1,234.5 <|endoftext|>",
      read_file(kGpl)};
  for (const std::string& s : samples) {
    const std::vector<int64_t> ids = tok.encode(s);
    ASSERT_EQ(ids.size(), s.size()) << s.substr(0, 60);
    for (size_t i = 0; i < s.size(); ++i)
      ASSERT_EQ(ids[i], static_cast<unsigned char>(s[i]))
          << "byte " << i << " of " << s.substr(0, 60);
    EXPECT_EQ(tok.decode(ids), s);
  }
  // Every byte is a token of its own, and the tokens are the ByteLevel characters.
  for (int b = 0; b < 256; ++b) ASSERT_TRUE(tok.id_to_token(b).has_value()) << b;
  EXPECT_EQ(tok.token_to_id("A"), 65);
  EXPECT_EQ(tok.token_to_id("\xc4\xa0"), 32);  // "Ġ" is the space
  EXPECT_EQ(tok.token_to_id("\xc4\x8a"), 10);  // "Ċ" is the line end
}

TEST(CliTrainText, LlamaLossFalls) {
  SKIP_WITHOUT_GPL();
  ScratchDir dir;
  write_text(dir.file("llama.json"), llama_config());
  const std::string folder = dir.file("gpl-llama");
  const CliRun r =
      run_cli("train --model llama --config " + dir.file("llama.json") + " --text " + kGpl +
              " --context 32 --steps 40 --lr 3e-3 --progress none -o " + folder);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("Llama: 2 layers"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("epoch 1/1"), std::string::npos) << "--progress none\n" << r.output;
  const double before = number_after(r.output, "validation before training: loss ");
  const double after = number_after(r.output, "\nvalidation: loss ");
  EXPECT_NEAR(before, std::log(256.0), 0.15) << r.output;
  EXPECT_LT(after, 3.4) << r.output;
  EXPECT_EQ(nn::json::parse(read_file(folder + "/config.json"))["model_type"], "llama");
  const CliRun g = run_cli("generate " + folder + " --greedy -n 12 --prompt GNU");
  EXPECT_EQ(g.status, 0) << g.output;
  EXPECT_GE(g.output.size(), 13u) << g.output;
  // --val-fraction 0: every token is trained on, and no validation loss is reported.
  const CliRun all = run_cli("train --model llama --config " + dir.file("llama.json") + " --text " +
                             kGpl + " --context 32 --steps 2 --val-fraction 0 -o " + folder);
  ASSERT_EQ(all.status, 0) << all.output;
  EXPECT_NE(all.output.find("1,098 training windows of 32 + 1 tokens"), std::string::npos)
      << all.output;
  EXPECT_NE(all.output.find("; no validation (--val-fraction 0)"), std::string::npos) << all.output;
  EXPECT_EQ(all.output.find("validation: "), std::string::npos) << all.output;
  EXPECT_EQ(all.output.find("val_loss"), std::string::npos) << all.output;
}

// A run checkpointed and resumed ends where the uninterrupted run ends: the same validation
// loss to the printed digits (the CPU adds in a fixed order) and the same step count.
TEST(CliTrainText, ResumeContinuesTheRun) {
  SKIP_WITHOUT_GPL();
  ScratchDir dir;
  write_text(dir.file("small.json"), gpt2_config());
  // 6,000 bytes: 178 windows of 32 + 1 for training, 12 batches of 16 an epoch.
  const std::string text = gpl_prefix(dir, 6000);
  const std::string base = "train --model gpt2 --config " + dir.file("small.json") + " --text " +
                           text + " --context 32 --lr 3e-3 --progress lines ";
  auto validation = [](const CliRun& r) { return line_starting(r.output, "validation: loss "); };
  auto step_of = [](const std::string& checkpoint) {
    return io::inspect(checkpoint).metadata.at("ember.step");
  };

  const CliRun whole = run_cli(base + "--epochs 2 -o " + dir.file("whole"));
  ASSERT_EQ(whole.status, 0) << whole.output;
  ASSERT_NE(validation(whole), "") << whole.output;

  struct Case {
    const char* what;
    std::string first, then;  // the interrupted run's length and checkpoints; the resumed run's
    std::string resumed_at;
  };
  const std::vector<Case> cases = {
      {"mid-epoch", "--epochs 1 --checkpoint-every 5", "--epochs 2", "at epoch 1, step 10"},
      {"at the epoch's end", "--epochs 1 --checkpoint-every 12", "--epochs 2",
       "at epoch 2, step 12"},
  };
  for (const Case& c : cases) {
    const std::string ckpt = dir.file("run.ckpt");
    const CliRun first =
        run_cli(base + c.first + " --checkpoint " + ckpt + " -o " + dir.file("first"));
    ASSERT_EQ(first.status, 0) << c.what << "\n" << first.output;
    const CliRun resumed =
        run_cli(base + c.then + " --resume " + ckpt + " --checkpoint-every 1 --checkpoint " +
                dir.file("end.ckpt") + " -o " + dir.file("resumed"));
    ASSERT_EQ(resumed.status, 0) << c.what << "\n" << resumed.output;
    EXPECT_NE(resumed.output.find("resumed from " + ckpt + " " + c.resumed_at), std::string::npos)
        << c.what << "\n"
        << resumed.output;
    EXPECT_EQ(validation(resumed), validation(whole)) << c.what << "\n" << resumed.output;
    EXPECT_EQ(step_of(dir.file("end.ckpt")), "24") << c.what;  // 2 epochs of 12 steps
    EXPECT_EQ(resumed.output.find("validation before training"), std::string::npos)
        << "a resumed model is not the untrained one\n"
        << resumed.output;
  }

  // --steps: one pass of N steps through shuffled passes over the windows, resumable mid-way.
  const CliRun steps = run_cli(base + "--steps 30 -o " + dir.file("steps"));
  ASSERT_EQ(steps.status, 0) << steps.output;
  EXPECT_NE(steps.output.find("30 steps of 16 windows (2.7 passes)"), std::string::npos)
      << steps.output;
  const CliRun cut = run_cli(base + "--steps 30 --checkpoint-every 7 --checkpoint " +
                             dir.file("s.ckpt") + " -o " + dir.file("cut"));
  ASSERT_EQ(cut.status, 0) << cut.output;
  EXPECT_EQ(step_of(dir.file("s.ckpt")), "28");
  const CliRun rest =
      run_cli(base + "--steps 30 --resume " + dir.file("s.ckpt") + " -o " + dir.file("rest"));
  ASSERT_EQ(rest.status, 0) << rest.output;
  EXPECT_NE(rest.output.find("at epoch 1, step 28"), std::string::npos) << rest.output;
  EXPECT_EQ(validation(rest), validation(steps)) << rest.output;
  // Another --steps makes other batches: refused, naming what differs.
  expect_cli_error(base + "--steps 40 --resume " + dir.file("s.ckpt") + " -o " + dir.file("x"),
                   "size");
}

// --tokenizer: the text encoded with a tokenizer.json (the tests' GPT-2 tokenizer, 640 ids),
// which the folder gets a copy of.
TEST(CliTrainText, TokenizerJsonIsUsedAndCopied) {
  SKIP_WITHOUT_GPL();
  ScratchDir dir;
  write_text(dir.file("small.json"), gpt2_config(640));
  const std::string tokenizer = ember_test::data_dir() + "/lm/gpt2_tok/tokenizer.json";
  const std::string folder = dir.file("bpe");
  const CliRun r =
      run_cli("train --model gpt2 --config " + dir.file("small.json") + " --text " + kGpl +
              " --tokenizer " + tokenizer + " --context 32 --steps 5 --progress none -o " + folder);
  ASSERT_EQ(r.status, 0) << r.output;
  const size_t tokens = text::Tokenizer::from_file(tokenizer).encode(read_file(kGpl)).size();
  std::string count = std::to_string(tokens);
  for (int i = static_cast<int>(count.size()) - 3; i > 0; i -= 3) count.insert(i, ",");
  EXPECT_NE(r.output.find(count + " tokens (" + tokenizer + ")"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(folder + "/tokenizer.json"), read_file(tokenizer));
  EXPECT_NEAR(number_after(r.output, "validation before training: loss "), std::log(640.0), 0.2)
      << r.output;
  EXPECT_EQ(run_cli("generate " + folder + " --greedy -n 8 --prompt GNU").status, 0);
}

TEST(CliTrainText, BadInputGivesAClearError) {
  SKIP_WITHOUT_GPL();
  ScratchDir dir;
  write_text(dir.file("small.json"), gpt2_config());
  write_text(dir.file("llama.json"), llama_config());
  write_text(dir.file("v100.json"), gpt2_config(100));
  write_text(dir.file("bad.json"), "{\"model_type\": ");
  write_text(dir.file("empty.txt"), "");
  write_text(dir.file("short.txt"), "GNU GENERAL PUBLIC LICENSE\n");
  write_text(dir.file("a_file"), "x");
  const std::string cfg = " --config " + dir.file("small.json");
  const std::string gpl = std::string(" --text ") + kGpl;
  const std::string out = " -o " + dir.file("out");
  const std::string tok = " --tokenizer " + ember_test::data_dir() + "/lm/gpt2_tok/tokenizer.json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--model bert" + cfg + gpl + out,
       "--model bert with --text (expected --model gpt2 or llama: a language model)"},
      {cfg + gpl + out, "--model mlp with --text (expected --model gpt2 or llama"},
      {"--model gpt2 --dataset " + dir.file("short.txt") + " --label 0" + out,
       "--model gpt2 is a language model (expected --text FILE and --config CONFIG.json"},
      {"--model gpt2" + gpl + out, "--text needs --config CONFIG.json"},
      {"--model gpt2 --config " + dir.file("none.json") + gpl + out,
       "--config " + dir.file("none.json") + ": no such file"},
      {"--model gpt2 --config " + dir.file("bad.json") + gpl + out, "is not a JSON object"},
      {"--model gpt2 --config " + dir.file("llama.json") + gpl + out,
       "--model gpt2 --config " + dir.file("llama.json") +
           ": GPT2Config::from_json: config model_type \"llama\" (expected \"gpt2\")"},
      {"--model gpt2" + cfg + " --text " + dir.file("none.txt") + out,
       "--text " + dir.file("none.txt") + ": no such file"},
      {"--model gpt2" + cfg + " --text " + dir.file("empty.txt") + out,
       "--text " + dir.file("empty.txt") + " is empty (expected some text to train on)"},
      {"--model gpt2" + cfg + " --text " + dir.file("short.txt") + " --context 32" + out,
       "is 27 bytes, shorter than 66 (one window of --context 32 + 1 tokens to train on and one "
       "to validate on"},
      {"--model gpt2 --config " + dir.file("v100.json") + gpl + out,
       "has vocab_size 100, fewer than the 256 byte tokens of --text without --tokenizer "
       "(expected vocab_size >= 256)"},
      {"--model gpt2" + cfg + gpl + tok + out,
       "has vocab_size 256, fewer than the 640 ids of --tokenizer"},
      {"--model gpt2" + cfg + gpl + " --context 65" + out,
       "--context 65 is longer than the model's context (64 positions in"},
      {"--model gpt2" + cfg + gpl + " --val-fraction 1" + out,
       "--val-fraction 1 (expected 0 <= f < 1"},
      {"--model gpt2" + cfg + gpl + " --val-fraction 0.999" + out,
       "are left to train on, fewer than one window"},
      {"--model gpt2" + cfg + gpl, "--text needs -o FOLDER"},
      {"--model gpt2" + cfg + gpl + " -o " + dir.file("a_file"),
       "--output " + dir.file("a_file") + " is a file (expected a folder"},
      {"--model gpt2" + cfg + gpl + " -o " + dir.file("no/such/out"),
       "the folder '" + dir.file("no/such") + "' does not exist"},
      {"--model gpt2" + cfg + gpl + " --capture" + out,
       "--capture on cpu (expected --device cuda:N"},
      {"--model gpt2" + cfg + gpl + " --bf16" + out, "--bf16 on cpu (expected --device cuda:N"},
      {"--model gpt2" + cfg + gpl + " --steps 5 --scheduler step" + out,
       "--scheduler step changes the rate once per epoch"},
      {"--model gpt2" + cfg + gpl + " --steps 5 --distributed" + out, "--steps with --distributed"},
      {"--model gpt2" + cfg + gpl + " --tokenizer " + dir.file("none.json") + out,
       "--tokenizer " + dir.file("none.json") + ": no such file"},
      {"--model gpt2" + cfg + gpl + " --resume " + dir.file("a_file") + out,
       "not a safetensors file"},
      // Parse errors: CLI11's usage messages.
      {"--model gpt2" + cfg + gpl + " --steps 5 --epochs 2" + out, "--epochs excludes --steps"},
      {"--model gpt2" + cfg + gpl + " --dataset x.csv" + out, "--dataset excludes --text"},
      {"--model gpt2" + cfg + out, "--config requires --text"},
      {"--model gpt2" + cfg + gpl + " --context 0" + out,
       "--context: '0' is not a whole number >= 1"},
      {"--model gpt2" + cfg + gpl + " --steps x" + out, "--steps: 'x' is not a whole number >= 1"},
  };
  for (const auto& [args, says] : cases) {
    expect_cli_error("train " + args, says, 3);
    EXPECT_FALSE(fs::exists(dir.file("out"))) << args << ": nothing is written";
  }
  // A text that is not UTF-8 trains as bytes but not through a tokenizer.json.
  write_text(dir.file("latin1.txt"), read_file(kGpl).substr(0, 2000) + "caf\xe9\n");
  write_text(dir.file("c640.json"), gpt2_config(640));
  expect_cli_error("train --model gpt2 --config " + dir.file("c640.json") + " --text " +
                       dir.file("latin1.txt") + tok + out,
                   "--text " + dir.file("latin1.txt") + ": Tokenizer::encode", 3);
}

// docs/language_models.md, "Training a language model from the command line": its config and
// its commands run as written (with --steps 3), and print the lines the page shows before
// training (the model and the untrained validation loss do not depend on the steps).
TEST(CliTrainText, TheDocumentedExampleRuns) {
  SKIP_WITHOUT_GPL();
  const std::string page = read_file(ember_test::data_dir() + "/../../docs/language_models.md");
  const size_t section = page.find("## Training a language model from the command line");
  ASSERT_NE(section, std::string::npos) << "the section has moved: update this test";
  auto block = [&](const std::string& fence) {
    const size_t open = page.find("\n```" + fence + "\n", section);
    if (open == std::string::npos) return std::string();
    const size_t begin = open + fence.size() + 5;
    return page.substr(begin, page.find("\n```\n", begin) - begin + 1);
  };
  const std::string config = block("json"), shell = block("sh");
  ASSERT_NE(config, "");
  ASSERT_NE(shell, "");
  // The commands: "$ ember ..." lines, joined across trailing backslashes; the rest is output.
  std::vector<std::string> commands;
  bool continued = false;
  for (size_t at = 0; at < shell.size();) {
    const size_t end = shell.find('\n', at);
    std::string line = shell.substr(at, end - at);
    at = end + 1;
    const bool more = !line.empty() && line.back() == '\\';
    if (more) line.pop_back();
    if (continued)
      commands.back() += line;
    else if (line.rfind("$ ember ", 0) == 0)
      commands.push_back(line.substr(8));
    continued = more;
  }
  ASSERT_EQ(commands.size(), 2u) << shell;
  ASSERT_EQ(commands[0].rfind("train ", 0), 0u) << commands[0];
  ASSERT_EQ(commands[1].rfind("generate ", 0), 0u) << commands[1];
  const size_t steps = commands[0].find("--steps ");
  ASSERT_NE(steps, std::string::npos) << commands[0];
  commands[0].replace(steps, commands[0].find(' ', steps + 8) - steps, "--steps 3");

  ScratchDir dir;
  write_text(dir.file("small.json"), config);
  const CliRun train = ember_test::run_command("cd " + dir.path + " && " + EMBER_CLI_PATH + " " +
                                               commands[0] + " --progress none");
  ASSERT_EQ(train.status, 0) << commands[0] << "\n" << train.output;
  for (const char* prefix : {"GPT2: ", "validation before training: "}) {
    const std::string documented = line_starting(page.substr(section), prefix);
    EXPECT_NE(documented, "") << prefix;
    EXPECT_EQ(line_starting(train.output, prefix), documented) << prefix;
  }
  const CliRun generate =
      ember_test::run_command("cd " + dir.path + " && " + EMBER_CLI_PATH + " " + commands[1]);
  ASSERT_EQ(generate.status, 0) << commands[1] << "\n" << generate.output;
  EXPECT_GE(generate.output.size(), 2u);
}

TEST(CliTrainText, CaptureTrainsOnCuda) {
  SKIP_WITHOUT_GPL();
  SKIP_WITHOUT_CUDA();
  ScratchDir dir;
  write_text(dir.file("small.json"), gpt2_config());
  const std::string base = "train --model gpt2 --config " + dir.file("small.json") + " --text " +
                           kGpl + " --context 64 --steps 60 --lr 3e-3 --device cuda:0 ";
  const CliRun captured = run_cli(base + "--capture -o " + dir.file("captured"));
  ASSERT_EQ(captured.status, 0) << captured.output;
  const double before = number_after(captured.output, "validation before training: loss ");
  const double after = number_after(captured.output, "\nvalidation: loss ");
  EXPECT_NEAR(before, std::log(256.0), 0.15) << captured.output;
  EXPECT_LT(after, 3.6) << captured.output;
  // The captured steps compute what eager steps do (up to the order of CUDA's atomic adds).
  const CliRun eager = run_cli(base + "-o " + dir.file("eager"));
  ASSERT_EQ(eager.status, 0) << eager.output;
  EXPECT_NEAR(number_after(eager.output, "\nvalidation: loss "), after, 0.05) << eager.output;
  EXPECT_EQ(
      run_cli("generate " + dir.file("captured") + " --greedy -n 8 -p GNU --device cuda:0").status,
      0);
}

// --bf16: the forward under bf16 autocast (the weights stay f32).
TEST(CliTrainText, Bf16TrainsOnCuda) {
  SKIP_WITHOUT_GPL();
  SKIP_WITHOUT_CUDA();
  ScratchDir dir;
  write_text(dir.file("small.json"), gpt2_config());
  const CliRun r =
      run_cli("train --model gpt2 --config " + dir.file("small.json") + " --text " + kGpl +
              " --context 64 --steps 60 --lr 3e-3 --device cuda:0 --bf16 -o " + dir.file("bf16"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_LT(number_after(r.output, "\nvalidation: loss "), 3.5) << r.output;
  EXPECT_EQ(run_cli("generate " + dir.file("bf16") + " --greedy -n 8 -p GNU").status, 0);
}

}  // namespace
