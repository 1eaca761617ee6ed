// src/text/bpe.hpp — the byte-level BPE model behind ember::text::Tokenizer: GPT-2's map
// between bytes and the printable characters vocabularies are written in, and the merge loop.
//
// Note [BPE on raw bytes]
// tokenizer.json spells every token in GPT-2's byte-level characters (byte 0x20 is "Ġ"). The
// model here keys its vocabulary by the raw bytes those characters stand for instead, so a
// pre-token word is merged as it stands in the input, with no mapping pass. A vocabulary
// entry holding a character outside the 256 of the map can never come out of byte-level
// merging, in `tokenizers` as here, so it stays out of the byte-keyed table (token_to_id and
// decoding still see it).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ember::text::detail {

/// GPT-2's bytes_to_unicode: the printable character that stands for byte `b`.
char32_t byte_to_char(std::uint8_t b);
/// The byte that the byte-level character `c` stands for, or -1 when `c` stands for none.
int char_to_byte(char32_t c);
/// The raw bytes a byte-level token spells, or nullopt when one of its characters is not in
/// the byte map (the ByteLevel decoder then keeps such a token's own UTF-8 bytes).
std::optional<std::string> bytes_of_token(std::string_view token);

/// How the model treats a word (tokenizer.json "model").
struct BpeOptions {
  bool ignore_merges = false;     // a word that is itself in the vocabulary is one token
  std::optional<int32_t> unk_id;  // stands for bytes with no token; none: they are dropped
  bool fuse_unk = false;          // consecutive unknown bytes make one unk token
};

class BytePairModel {
 public:
  /// `vocab`: token (byte-level characters) -> id; `merges`: the pairs in rank order, each
  /// part and their concatenation in `vocab`. `where` opens error messages.
  BytePairModel(const std::unordered_map<std::string, int32_t>& vocab,
                const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
                const std::string& where);

  /// Appends the ids of one pre-token `word` (raw bytes) to `out`.
  void encode(std::string_view word, std::vector<int64_t>& out) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static std::uint64_t key(int32_t a, int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }

  BpeOptions options_;
  std::vector<std::string> word_bytes_;  // raw bytes of each byte-level token (the map's keys)
  std::unordered_map<std::string_view, int32_t> by_bytes_;
  std::array<int32_t, 256> byte_id_{};  // the token of each single byte, -1 for none
  std::unordered_map<std::uint64_t, Merge> merges_;
};

}  // namespace ember::text::detail
