// ember/text/tokenizer.hpp — byte-level BPE tokenizers read from Hugging Face's
// tokenizer.json (GPT-2, Llama-3 and their kin), in C++: the ids are the ones the
// `tokenizers` library gives, for encoding and decoding alike.
//
//   auto tok = ember::text::Tokenizer::from_file("llama/tokenizer.json");
//   std::vector<int64_t> ids = tok.encode("Hello, world");  // <|begin_of_text|> Hello , world
//   std::string text = tok.decode(ids, /*skip_special_tokens=*/true);  // "Hello, world"
//
// What a tokenizer.json may hold (anything else is refused with an ember::Error naming the
// field, what came and what is supported):
//   model           BPE: vocab, merges ("a b" strings or ["a", "b"] pairs), ignore_merges,
//                   unk_token and fuse_unk; byte_fallback, dropout, continuing_subword_prefix
//                   and end_of_word_suffix must be off
//   added_tokens    special or not, normalized or not, lstrip, rstrip; not single_word
//   normalizer      null (or an empty Sequence)
//   pre_tokenizer   ByteLevel (GPT-2's split pattern when use_regex, add_prefix_space), or a
//                   Sequence of Split steps (GPT-2's or Llama-3's pattern, "Isolated") that
//                   ends in one ByteLevel
//   post_processor  null, ByteLevel, TemplateProcessing (its `single` template), or a
//                   Sequence of those
//   decoder         ByteLevel
//   truncation, padding  null
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ember::text {

/// A token of tokenizer.json's "added_tokens": matched in the text before pre-tokenisation.
struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool special = false;     // dropped by decode(..., skip_special_tokens = true)
  bool lstrip = false;      // the match takes the white space on its left
  bool rstrip = false;      // ... and on its right
  bool normalized = false;  // matched after the normalizer (ember supports none, so: the text)
};

/// A byte-level BPE tokenizer. Immutable once built; copies share it; encode and decode may
/// run from many threads at once.
class Tokenizer {
 public:
  /// Reads a tokenizer.json file. Example: Tokenizer::from_file("gpt2/tokenizer.json").
  static Tokenizer from_file(const std::string& tokenizer_json_path);
  /// Builds from the text of a tokenizer.json.
  static Tokenizer from_string(std::string_view tokenizer_json_text);
  /// Builds from a parsed tokenizer.json.
  static Tokenizer from_json(const nlohmann::json& tokenizer_json);

  /// The ids of `text` (valid UTF-8). `add_special_tokens` applies the post-processor, e.g.
  /// Llama-3's "<|begin_of_text|> $A"; GPT-2's ByteLevel post-processor adds nothing.
  /// Added tokens in the text ("<|endoftext|>") become their ids either way.
  std::vector<int64_t> encode(std::string_view text, bool add_special_tokens = true) const;

  /// The text of `ids`; bytes that do not form UTF-8 become U+FFFD, as in `tokenizers`.
  /// `skip_special_tokens` leaves out the special added tokens. An id with no token throws.
  std::string decode(std::span<const int64_t> ids, bool skip_special_tokens = false) const;

  /// One more than the largest id (the rows an embedding table needs).
  int64_t vocab_size() const;
  /// The id of a token as tokenizer.json spells it (added tokens first, then the model's
  /// vocabulary, whose tokens are in byte-level characters: " the" is "Ġthe").
  std::optional<int64_t> token_to_id(std::string_view token) const;
  /// The token of an id as tokenizer.json spells it; nullopt for an id with no token.
  std::optional<std::string> id_to_token(int64_t id) const;

  /// The added tokens, in tokenizer.json's order.
  const std::vector<AddedToken>& added_tokens() const;
  /// The id of the special added token `content`, e.g. special_token_id("<|end_of_text|>");
  /// throws when there is no such special token.
  int64_t special_token_id(std::string_view content) const;
  /// Whether `id` is a special added token's.
  bool is_special(int64_t id) const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/// Decoded text of ids as they come, for streaming generation (transformers' TextStreamer):
/// each push returns the text the new id completes. A token may end inside a multi-byte
/// character (the decoded text then ends in U+FFFD): that tail waits for the next id, or for
/// finish(), so the pieces joined are exactly decode(every id). Example:
///   text::TextStreamer stream(tok);
///   models::generate(model, {prompt}, {.on_token = [&](int64_t, int64_t t) {
///                                          std::cout << stream.push(t) << std::flush; }});
///   std::cout << stream.finish() << "\n";
class TextStreamer {
 public:
  /// `tokenizer` must outlive the streamer.
  explicit TextStreamer(const Tokenizer& tokenizer, bool skip_special_tokens = true)
      : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {}
  /// The new text `id` completes ("" while a character is unfinished).
  std::string push(int64_t id);
  /// The rest (an unfinished character as decode gives it).
  std::string finish();

 private:
  std::string take(bool last);
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int64_t> ids_;
  size_t given_ = 0;
};

}  // namespace ember::text
