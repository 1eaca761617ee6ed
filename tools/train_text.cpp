// tools/train_text.cpp — `ember train --model gpt2|llama --config CONFIG.json --text FILE -o
// FOLDER` (tools/train_text.hpp; docs/language_models.md).
//
// The text is encoded once (its bytes, or --tokenizer's ids), its tail held out for validation,
// and the rest cut into windows of context + 1 tokens; the model learns to predict each
// window's next tokens (cross-entropy). The run itself is `ember train`'s (run_training:
// optimizer, scheduler, clipping, checkpoints and --resume, progress, --capture, --bf16), and
// the result is a Hugging Face folder: config.json and model.safetensors (save_pretrained) and
// the tokenizer.json that `ember generate FOLDER` needs.
#include "train_text.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>

#include "ember/data/dataset.hpp"
#include "ember/distributed.hpp"
#include "ember/error.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/models/gpt2.hpp"
#include "ember/models/llama.hpp"
#include "ember/models/pretrained.hpp"
#include "ember/ops.hpp"
#include "ember/random.hpp"
#include "ember/text/tokenizer.hpp"

namespace ember_cli {

using namespace ember;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kDefaultContext = 256;   // --context when the config allows as much
constexpr int64_t kDefaultTextBatch = 16;  // --batch-size with --text
constexpr int64_t kByteVocabulary = 256;   // the token ids of byte mode: 0 .. 255

// ---- the byte tokenizer ----
//
// Note [The byte tokenizer]
// Without --tokenizer the tokens are the text's bytes: id b is byte b. The folder still needs a
// tokenizer.json, so that `ember generate` (and Hugging Face's tokenizers) turn a prompt into
// those ids and ids back into text: a byte-level BPE with no merges, whose vocabulary maps the
// ByteLevel character of byte b (GPT-2's bytes_to_unicode: printable bytes stand for
// themselves, the other 68 are shifted to U+0100 onwards) to id b. With no merges every byte
// stays one token, so encode(text) is exactly the text's bytes, whatever the pre-tokenizer
// splits (GPT-2's pattern keeps pre-tokens short), and decode gives the bytes back.

// The code point GPT-2's bytes_to_unicode gives byte b.
uint32_t byte_level_char(int b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
  if (printable) return static_cast<uint32_t>(b);
  uint32_t shifted = 0;  // the bytes before b that are not printable
  for (int c = 0; c < b; ++c)
    if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE))) ++shifted;
  return 256 + shifted;
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// tokenizer.json of the byte tokenizer (Note [The byte tokenizer]), as `tokenizers` writes one.
nn::json byte_tokenizer_json() {
  nn::json vocab = nn::json::object();
  for (int b = 0; b < kByteVocabulary; ++b) vocab[utf8(byte_level_char(b))] = b;
  const nn::json byte_level = {{"type", "ByteLevel"},
                               {"add_prefix_space", false},
                               {"trim_offsets", true},
                               {"use_regex", true}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", nn::json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"post_processor", nullptr},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", nn::json::array()}}}};
}

// ---- the data ----

using Tokens = std::shared_ptr<const std::vector<int64_t>>;

// Note [Text windows]
// Windows of T + 1 tokens at stride T over tokens[begin, end): window w starts at
// begin + w·T, its input is its first T tokens and its target the T after each (the window
// shifted by one), so every token but the first is predicted once per pass. Example i is
// window i; after stream(n, seed) (--steps) the dataset is n examples long and example i is
// window order_p[i mod W] of pass p = i / W, each pass a new permutation
// (data::shuffled_indices(W, seed, p), the order a shuffling DataLoader gives epoch p), so N
// steps of B windows go through the text pass after shuffled pass, resumable mid-way.
class TextWindows final : public data::Dataset {
 public:
  TextWindows(Tokens tokens, int64_t begin, int64_t end, int64_t context)
      : tokens_(std::move(tokens)),
        begin_(begin),
        context_(context),
        windows_(end - begin > context ? (end - begin - 1) / context : 0) {}

  int64_t windows() const { return windows_; }
  void stream(int64_t examples, uint64_t seed) {
    examples_ = examples;
    seed_ = seed;
  }
  int64_t size() const override { return examples_ ? *examples_ : windows_; }

  data::Example get(int64_t index) const override {
    const int64_t one[] = {index};
    data::Example e = get_batch(one);
    return {e.input.reshape({context_}), e.target.reshape({context_})};
  }

  data::Example get_batch(std::span<const int64_t> indices) const override {
    const int64_t B = static_cast<int64_t>(indices.size()), T = context_;
    std::vector<int64_t> input(static_cast<size_t>(B * T)), target(input.size());
    for (int64_t r = 0; r < B; ++r) {
      EMBER_CHECK(indices[r] >= 0 && indices[r] < size(), "TextWindows: example ", indices[r],
                  " (expected 0 to ", size() - 1, ")");
      const int64_t* w = tokens_->data() + begin_ + window_of(indices[r]) * T;
      std::copy(w, w + T, input.begin() + r * T);
      std::copy(w + 1, w + T + 1, target.begin() + r * T);
    }
    return {from_vector(input, {B, T}), from_vector(target, {B, T})};
  }

 private:
  int64_t window_of(int64_t i) const {
    if (!examples_) return i;
    const int64_t pass = i / windows_;
    std::lock_guard<std::mutex> lock(mutex_);
    if (pass != pass_) {
      order_ = data::shuffled_indices(windows_, seed_, pass);
      pass_ = pass;
    }
    return order_[static_cast<size_t>(i % windows_)];
  }

  Tokens tokens_;
  int64_t begin_, context_, windows_;
  std::optional<int64_t> examples_;
  uint64_t seed_ = 0;
  mutable std::mutex mutex_;  // the pass's order (get_batch runs on the prefetch thread)
  mutable int64_t pass_ = -1;
  mutable std::vector<int64_t> order_;
};

// Next-token cross-entropy: logits [B, T, V] against targets [B, T], averaged over the tokens.
train::LossFn next_token_loss() {
  return [](const Tensor& logits, const Tensor& targets) {
    return cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  };
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  EMBER_CHECK(in.good() || in.eof(), "ember train: --text ", path, ": cannot read it");
  return s.str();
}

std::string thousands(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > (v < 0 ? 1 : 0); i -= 3)
    s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string loss_and_perplexity(double loss) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(4) << "loss " << loss << ", perplexity "
    << std::setprecision(2) << std::exp(loss);
  return o.str();
}

// -o: a folder that exists (and is writable) or can be created in a writable folder.
void check_output_folder(const std::string& path) {
  EMBER_CHECK(!path.empty(),
              "ember train: --text needs -o FOLDER (where config.json, "
              "model.safetensors and tokenizer.json are written)");
  std::error_code ec;
  if (fs::exists(path, ec)) {
    EMBER_CHECK(fs::is_directory(path, ec), "ember train: --output ", path,
                " is a file (expected a folder, created when absent)");
    EMBER_CHECK(::access(path.c_str(), W_OK) == 0, "ember train: --output ", path,
                ": the folder is not writable");
    return;
  }
  fs::path parent = fs::path(path).lexically_normal().parent_path();
  if (parent.empty()) parent = ".";
  EMBER_CHECK(fs::is_directory(parent, ec), "ember train: --output ", path, ": the folder '",
              parent.string(), "' does not exist (expected an existing folder to create ", path,
              " in)");
  EMBER_CHECK(::access(parent.c_str(), W_OK) == 0, "ember train: --output ", path, ": the folder '",
              parent.string(), "' is not writable");
}

// What --config describes: the sizes checked before any work, and the model, its weights
// drawn as its architecture draws them. Errors name the flags.
struct LanguageModelConfig {
  std::string kind, path;
  std::optional<nn::GPT2Config> gpt2;
  std::optional<nn::LlamaConfig> llama;

  int64_t vocab_size() const { return gpt2 ? gpt2->vocab_size : llama->vocab_size; }
  int64_t positions() const { return gpt2 ? gpt2->n_positions : llama->max_position_embeddings; }

  static LanguageModelConfig read(const std::string& kind, const std::string& path) {
    LanguageModelConfig c{kind, path, std::nullopt, std::nullopt};
    c.named([&] {
      if (kind == "gpt2")
        c.gpt2 = nn::GPT2Config::from_file(path);
      else
        c.llama = nn::LlamaConfig::from_file(path);
    });
    return c;
  }

  nn::CausalLM build() const {
    std::shared_ptr<nn::CausalLMImpl> model;
    named([&] {
      if (gpt2)
        model = nn::GPT2(*gpt2).ptr();
      else
        model = nn::Llama(*llama).ptr();
    });
    return nn::CausalLM(model);
  }

 private:
  // Runs `f`, naming the flags in its error.
  template <typename F>
  void named(F f) const {
    try {
      f();
    } catch (const Error& e) {
      detail::throw_error(
          detail::concat("ember train: --model ", kind, " --config ", path, ": ", e.what()));
    }
  }
};

int64_t parameter_count(const nn::Module& model) {
  int64_t n = 0;
  for (const Tensor& p : model->parameters()) n += p.numel();
  return n;
}

}  // namespace

void add_text_options(CLI::App* train, TextArgs& x) {
  CLI::Option* text = train->add_option(
      "--text", x.text, "train a language model (--model gpt2 or llama) on this text file");
  for (const char* data_flag : {"--dataset", "--label", "--data-dir", "--test-csv", "--standardize",
                                "--header", "--no-header"})
    text->excludes(train->get_option(data_flag));
  const std::vector<CLI::Option*> with_text = {
      train->add_option("--config", x.config,
                        "the language model's Hugging Face config.json (with --text)"),
      train->add_option(
          "--tokenizer", x.tokenizer,
          "tokenizer.json to encode --text with (default: its bytes, vocabulary 256)"),
      train
          ->add_option("--context", x.context,
                       "tokens per training window (default: 256, or the model's context if "
                       "shorter)")
          ->check(whole_number<int64_t>(1)),
      train->add_option("--steps", x.steps, "optimizer steps (instead of --epochs)")
          ->check(whole_number<int64_t>(1))
          ->excludes(train->get_option("--epochs")),
      train
          ->add_option("--val-fraction", x.val_fraction,
                       "the text's tail held out for validation (0 <= f < 1)")
          ->capture_default_str()
          ->check(number(0.0, true))};
  for (CLI::Option* o : with_text) o->needs(text);
}

int cmd_train_text(const TrainArgs& t, const TextArgs& x, std::optional<int64_t> batch_size) {
  // ---- every check before any work (Note [Argument checks] in tools/ember.cpp) ----
  EMBER_CHECK(t.model == "gpt2" || t.model == "llama", "ember train: --model ", t.model,
              " with --text (expected --model gpt2 or llama: a language model)");
  EMBER_CHECK(!x.config.empty(), "ember train: --text needs --config CONFIG.json (the ", t.model,
              " model's Hugging Face config.json)");
  check_input_file("--text", x.text);
  check_input_file("--config", x.config);
  if (!x.tokenizer.empty()) check_input_file("--tokenizer", x.tokenizer);
  EMBER_CHECK(x.val_fraction < 1.0, "ember train: --val-fraction ", x.val_fraction,
              " (expected 0 <= f < 1: the rest of the text is trained on)");
  EMBER_CHECK(!x.steps || !t.distributed,
              "ember train: --steps with --distributed (expected --epochs N: each rank trains "
              "on its shard of every epoch)");
  EMBER_CHECK(!x.steps || t.scheduler == "none" || t.scheduler == "cosine",
              "ember train: --scheduler ", t.scheduler,
              " changes the rate once per epoch, and --steps N trains one pass of N steps "
              "(expected --scheduler cosine or none, or --epochs)");
  check_train_args(t);
  check_output_folder(t.output);
  const LanguageModelConfig config = LanguageModelConfig::read(t.model, x.config);
  const int64_t vocab = config.vocab_size(), positions = config.positions();
  std::optional<text::Tokenizer> tokenizer;
  if (!x.tokenizer.empty()) tokenizer = text::Tokenizer::from_file(x.tokenizer);
  const int64_t needed = tokenizer ? tokenizer->vocab_size() : kByteVocabulary;
  EMBER_CHECK(vocab >= needed, "ember train: --config ", x.config, " has vocab_size ", vocab,
              ", fewer than the ", needed,
              tokenizer ? " ids of --tokenizer " + x.tokenizer
                        : std::string(" byte tokens of --text without --tokenizer"),
              " (expected vocab_size >= ", needed, ")");
  const int64_t T = x.context.value_or(std::min(kDefaultContext, positions));
  EMBER_CHECK(T <= positions, "ember train: --context ", T, " is longer than the model's context (",
              positions, " positions in ", x.config, "; expected --context ", positions,
              " or fewer)");

  // ---- the text: encoded once, the tail held out ----
  const std::string raw = read_text(x.text);
  EMBER_CHECK(!raw.empty(), "ember train: --text ", x.text,
              " is empty (expected some text to train on)");
  auto ids = std::make_shared<std::vector<int64_t>>();
  if (tokenizer) {
    try {
      *ids = tokenizer->encode(raw);
    } catch (const Error& e) {
      detail::throw_error(detail::concat("ember train: --text ", x.text, ": ", e.what()));
    }
  } else {
    ids->assign(raw.begin(), raw.end());
    for (int64_t& b : *ids) b &= 0xFF;  // char may be signed
  }
  const int64_t n = static_cast<int64_t>(ids->size());
  const int64_t held =
      x.val_fraction > 0.0
          ? std::max<int64_t>(static_cast<int64_t>(std::ceil(n * x.val_fraction)), T + 1)
          : 0;
  const int64_t need = (T + 1) + (held > 0 ? T + 1 : 0);
  EMBER_CHECK(n >= need, "ember train: --text ", x.text, " is ", n,
              tokenizer ? " tokens" : " bytes", ", shorter than ", need,
              " (one window of --context ", T, " + 1 tokens to train on",
              held > 0 ? " and one to validate on" : "",
              "; expected a longer text or a smaller --context)");
  EMBER_CHECK(n - held >= T + 1, "ember train: --text ", x.text, ": after the ", held,
              " validation tokens (--val-fraction ", x.val_fraction, "), ", n - held,
              " are left to train on, fewer than one window of ", T + 1,
              " (expected a smaller --val-fraction or --context)");
  auto train_windows = std::make_shared<TextWindows>(ids, 0, n - held, T);
  auto val_windows = std::make_shared<TextWindows>(ids, n - held, n, T);
  const int64_t B = batch_size.value_or(kDefaultTextBatch);
  if (x.steps) train_windows->stream(*x.steps * B, t.seed);

  // ---- the model ----
  if (t.distributed) join_job();
  const bool lead = !t.distributed || distributed::rank() == 0;  // prints and writes files
  manual_seed(t.seed);
  nn::CausalLM model = config.build();
  model->to(Device::parse(t.device));
  const train::LossFn loss = next_token_loss();
  data::DataLoader val_loader(val_windows, {.batch_size = B});
  if (lead) {
    std::cout << model->type_name() << ": " << model->num_layers() << " layers, "
              << thousands(parameter_count(model)) << " parameters, vocabulary " << vocab
              << ", context " << T << " of " << positions << " positions, on " << t.device << "\n"
              << "text: " << x.text << ", " << thousands(n)
              << (tokenizer ? " tokens (" + x.tokenizer + ")" : std::string(" tokens (bytes)"))
              << "; " << thousands(train_windows->windows()) << " training windows of " << T
              << " + 1 tokens";
    if (x.steps) {
      std::ostringstream passes;
      passes << std::setprecision(3)
             << static_cast<double>(*x.steps * B) / static_cast<double>(train_windows->windows());
      std::cout << ", " << *x.steps << " steps of " << B << " windows (" << passes.str()
                << " passes)";
    } else {
      std::cout << ", " << t.epochs << " epochs, " << B << " windows a step";
    }
    if (held > 0)
      std::cout << "; validation: the last " << thousands(held) << " tokens ("
                << val_windows->windows() << " windows)\n";
    else
      std::cout << "; no validation (--val-fraction 0)\n";
    if (held > 0 && t.resume.empty())
      std::cout << "validation before training: "
                << loss_and_perplexity(train::evaluate(model, val_loader, loss).loss) << "\n";
  }

  // ---- the run: ember train's ----
  TrainJob job{.model = model,
               .train = train_windows,
               .batch_size = B,
               .epochs = x.steps ? 1 : t.epochs,
               .shuffle = !x.steps,  // a stream orders itself (Note [Text windows])
               .val_loader = held > 0 ? &val_loader : nullptr,
               .loss = loss,
               .lead = lead};
  if (lead && t.progress != "none")
    job.fit.on_epoch = [](const train::EpochLog& log) {
      std::cout << std::fixed << std::setprecision(2) << "  perplexity "
                << std::exp(log.train.loss);
      if (log.val) std::cout << " | val_perplexity " << std::exp(log.val->loss);
      std::cout << std::defaultfloat << "\n";
    };
  const train::History history = run_training(t, std::move(job));

  if (lead) {
    if (!history.epochs.empty() && history.epochs.back().train.samples > 0)
      std::cout << "training: " << loss_and_perplexity(history.epochs.back().train.loss)
                << " (the last epoch's mean)\n";
    if (held > 0)
      std::cout << "validation: "
                << loss_and_perplexity(train::evaluate(model, val_loader, loss).loss) << " ("
                << val_windows->windows() << " windows of " << T << " tokens)\n";
    models::save_pretrained(model, t.output);
    const std::string tokenizer_out = (fs::path(t.output) / "tokenizer.json").string();
    if (tokenizer)
      fs::copy_file(x.tokenizer, tokenizer_out, fs::copy_options::overwrite_existing);
    else
      io::write_file_atomically(tokenizer_out, byte_tokenizer_json().dump(2) + "\n");
    std::cout << "saved " << t.output << " (config.json, model.safetensors, tokenizer.json: "
              << (tokenizer ? "copied from " + x.tokenizer : std::string("bytes"))
              << "); continue a prompt with: ember generate " << t.output << " --prompt TEXT\n";
  }
  if (t.distributed) {
    distributed::barrier();  // the files are complete before any rank leaves
    distributed::finalize();
  }
  return 0;
}

}  // namespace ember_cli
