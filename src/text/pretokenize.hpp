// src/text/pretokenize.hpp — the text pieces of byte-level BPE (ember/text/tokenizer.hpp):
// UTF-8 checks, the Unicode classes the split patterns use, and GPT-2's and Llama-3's split
// patterns as hand-written scanners over code points.
//
// Note [Split patterns as scanners]
// Hugging Face `tokenizers` splits text with a regular expression from tokenizer.json, run by
// Oniguruma. Byte-level BPE tokenizers use one of two patterns in practice: GPT-2's (inside
// the ByteLevel pre-tokenizer, also GPT-J, RoBERTa, Falcon's ancestors) and Llama-3's (a Split
// pre-tokenizer, tiktoken's cl100k_base pattern). Rather than carry a regex engine, ember
// recognises those two pattern strings exactly and runs each as a scanner that returns the
// length of the match at a position, reproducing the leftmost-first alternation and the
// backtracking of `\s+(?!\S)` and `\s*[\r\n]+`; any other pattern is refused by name.
// Classes follow Oniguruma's Unicode definitions: \p{L} = Lu Ll Lt Lm Lo, \p{N} = Nd Nl No
// (tools/gen_unicode_tables.py), \s = White_Space. Every position starts a match of both
// patterns, so the matches tile the text and the "isolated" split is the list of matches.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ember::text::detail {

/// GPT-2's split pattern, as tokenizer.json's ByteLevel pre-tokenizer implies it.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
/// Llama-3's split pattern (tiktoken cl100k_base), as a Split pre-tokenizer's Regex.
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

enum class SplitPattern { kGpt2, kLlama3 };

/// One code point decoded from UTF-8 and its length in bytes.
struct CodePoint {
  char32_t cp;
  std::size_t len;
};

/// The code point starting at byte `i` of the valid UTF-8 text `s` (i < s.size()).
CodePoint decode_utf8(std::string_view s, std::size_t i);

/// Appends the UTF-8 bytes of `cp` (at most U+10FFFF) to `out`.
void append_utf8(char32_t cp, std::string& out);

/// Whether `cp` has the Unicode White_Space property (regex \s).
bool is_white_space(char32_t cp);

/// The offset of the first byte that is not part of valid UTF-8 in `s`, or `s.size()` when
/// all of `s` is valid (overlong forms, surrogates and code points past U+10FFFF are invalid).
std::size_t first_invalid_utf8(std::string_view s);

/// Appends `bytes` to `out` as UTF-8 text, each maximal invalid subsequence replaced by one
/// U+FFFD, as Rust's String::from_utf8_lossy does (the Unicode "maximal subpart" practice).
void append_utf8_lossy(std::string_view bytes, std::string& out);

/// The length in bytes of `pattern`'s match starting at `pos` of the valid UTF-8 text `s`
/// (pos < s.size(); the result is at least one code point). See Note [Split patterns as
/// scanners].
std::size_t match_length(std::string_view s, std::size_t pos, SplitPattern pattern);

}  // namespace ember::text::detail
