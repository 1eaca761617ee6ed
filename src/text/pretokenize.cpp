// src/text/pretokenize.cpp — UTF-8 checks, Unicode classes and the two split-pattern scanners
// of byte-level BPE (Note [Split patterns as scanners] in pretokenize.hpp).
#include "text/pretokenize.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

namespace ember::text::detail {

namespace {

// One row of the generated table: code points [first, last] are all of class `cls`
// (1 = \p{L}, 2 = \p{N}).
struct CategoryRange {
  char32_t first;
  char32_t last;
  std::uint8_t cls;
};

constexpr CategoryRange kCategoryRanges[] = {
#include "text/unicode_tables.inc"
};

enum class CharClass : std::uint8_t { kOther, kLetter, kNumber, kSpace };

// White_Space outside ASCII (Rust's and Oniguruma's Unicode \s; Python's isspace() differs).
constexpr char32_t kWideSpaces[] = {0x85,   0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
                                    0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A,
                                    0x2028, 0x2029, 0x202F, 0x205F, 0x3000};

constexpr std::array<CharClass, 128> make_ascii_classes() {
  std::array<CharClass, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) t[c] = CharClass::kLetter;
    if (c >= '0' && c <= '9') t[c] = CharClass::kNumber;
    if ((c >= 0x09 && c <= 0x0D) || c == ' ') t[c] = CharClass::kSpace;
  }
  return t;
}
constexpr std::array<CharClass, 128> kAsciiClasses = make_ascii_classes();

CharClass class_of(char32_t cp) {
  if (cp < 128) return kAsciiClasses[cp];
  if (is_white_space(cp)) return CharClass::kSpace;
  const auto* end = std::end(kCategoryRanges);
  const auto* it = std::upper_bound(std::begin(kCategoryRanges), end, cp,
                                    [](char32_t v, const CategoryRange& r) { return v < r.first; });
  if (it == std::begin(kCategoryRanges)) return CharClass::kOther;
  --it;
  if (cp > it->last) return CharClass::kOther;
  return it->cls == 1 ? CharClass::kLetter : CharClass::kNumber;
}

// A step over UTF-8 at one offset: `valid` bytes of a well-formed sequence (0 when there is
// none), else `skip` bytes of its maximal subpart (at least 1).
struct Utf8Step {
  std::size_t valid;
  std::size_t skip;
};

Utf8Step step_utf8(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return {1, 1};
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range; later ones are 80..BF
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;  // no overlong forms
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return {0, 1};
  }
  for (std::size_t k = 0; k < need; ++k) {
    if (i + 1 + k >= s.size()) return {0, 1 + k};
    const auto c = static_cast<unsigned char>(s[i + 1 + k]);
    if (c < (k == 0 ? lo : 0x80) || c > (k == 0 ? hi : 0xBF)) return {0, 1 + k};
  }
  return {need + 1, need + 1};
}

CharClass class_at(std::string_view s, std::size_t i) { return class_of(decode_utf8(s, i).cp); }

// The end of the run of class `cls` that starts at `i`.
std::size_t run_end(std::string_view s, std::size_t i, CharClass cls) {
  while (i < s.size()) {
    const CodePoint c = decode_utf8(s, i);
    if (class_of(c.cp) != cls) break;
    i += c.len;
  }
  return i;
}

// `\s+(?!\S)|\s+` at a white-space code point: the whole run at the end of the text, else
// the run less its last code point (so that it can lead the next word), else one code point.
std::size_t whitespace_match(std::string_view s, std::size_t i) {
  std::size_t k = i, last = i;
  while (k < s.size()) {
    const CodePoint c = decode_utf8(s, k);
    if (class_of(c.cp) != CharClass::kSpace) break;
    last = k;
    k += c.len;
  }
  if (k == s.size() || last == i) return k - i;
  return last - i;
}

// `'s|'t|'re|'ve|'m|'ll|'d` at `i` (case-insensitively when `fold`, where U+017F LATIN SMALL
// LETTER LONG S folds to s as in Unicode simple case folding); 0 when none matches.
std::size_t contraction(std::string_view s, std::size_t i, bool fold) {
  if (s[i] != '\'') return 0;
  auto letter = [&](std::size_t j, std::size_t* len) -> char32_t {
    if (j >= s.size()) return 0;
    const CodePoint c = decode_utf8(s, j);
    *len = c.len;
    if (!fold) return c.cp;
    if (c.cp >= 'A' && c.cp <= 'Z') return c.cp - 'A' + 'a';
    return c.cp == 0x17F ? U's' : c.cp;
  };
  std::size_t len1 = 0, len2 = 0;
  const char32_t a = letter(i + 1, &len1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 1 + len1;
  if (a != 'r' && a != 'v' && a != 'l') return 0;
  const char32_t b = letter(i + 1 + len1, &len2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
    return 1 + len1 + len2;
  return 0;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::size_t gpt2_match(std::string_view s, std::size_t i) {
  if (const std::size_t n = contraction(s, i, false)) return n;
  const CodePoint c = decode_utf8(s, i);
  CharClass cls = class_of(c.cp);
  std::size_t run_start = i;
  if (c.cp == ' ' && i + 1 < s.size()) {
    const CharClass next = class_at(s, i + 1);
    if (next != CharClass::kSpace) {  // the optional space leads a letter, number or other run
      cls = next;
      run_start = i + 1;
    }
  }
  if (cls != CharClass::kSpace) return run_end(s, run_start, cls) - i;
  return whitespace_match(s, i);
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
std::size_t llama3_match(std::string_view s, std::size_t i) {
  if (const std::size_t n = contraction(s, i, true)) return n;
  const CodePoint c = decode_utf8(s, i);
  const CharClass cls = class_of(c.cp);
  if (cls == CharClass::kLetter) return run_end(s, i, CharClass::kLetter) - i;
  const std::size_t after = i + c.len;
  const CharClass next = after < s.size() ? class_at(s, after) : CharClass::kOther;
  const bool newline = c.cp == '\r' || c.cp == '\n';
  if (cls != CharClass::kNumber && !newline && after < s.size() && next == CharClass::kLetter)
    return run_end(s, after, CharClass::kLetter) - i;  // one non-letter leads the letters
  if (cls == CharClass::kNumber) {
    std::size_t j = i;
    for (int k = 0; k < 3 && j < s.size(); ++k) {
      const CodePoint d = decode_utf8(s, j);
      if (class_of(d.cp) != CharClass::kNumber) break;
      j += d.len;
    }
    return j - i;
  }
  std::size_t j = i;
  if (c.cp == ' ' && after < s.size() && next == CharClass::kOther) j = after;
  if (j > i || cls == CharClass::kOther) {
    j = run_end(s, j, CharClass::kOther);
    while (j < s.size() && (s[j] == '\r' || s[j] == '\n')) ++j;
    return j - i;
  }
  // White space: \s*[\r\n]+ ends after the run's last line break, when it has one.
  std::size_t k = i, newline_end = 0;
  while (k < s.size()) {
    const CodePoint d = decode_utf8(s, k);
    if (class_of(d.cp) != CharClass::kSpace) break;
    k += d.len;
    if (d.cp == '\r' || d.cp == '\n') newline_end = k;
  }
  if (newline_end > 0) return newline_end - i;
  return whitespace_match(s, i);
}

}  // namespace

bool is_white_space(char32_t cp) {
  if (cp < 128) return kAsciiClasses[cp] == CharClass::kSpace;
  return std::find(std::begin(kWideSpaces), std::end(kWideSpaces), cp) != std::end(kWideSpaces);
}

CodePoint decode_utf8(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  auto cont = [&](std::size_t k) { return static_cast<char32_t>(s[i + k] & 0x3F); };
  if (b < 0x80) return {b, 1};
  if (b < 0xE0) return {(static_cast<char32_t>(b & 0x1F) << 6) | cont(1), 2};
  if (b < 0xF0) return {(static_cast<char32_t>(b & 0x0F) << 12) | (cont(1) << 6) | cont(2), 3};
  return {(static_cast<char32_t>(b & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3), 4};
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::size_t first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const Utf8Step st = step_utf8(s, i);
    if (st.valid == 0) return i;
    i += st.valid;
  }
  return s.size();
}

void append_utf8_lossy(std::string_view bytes, std::string& out) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Utf8Step st = step_utf8(bytes, i);
    if (st.valid > 0) {
      out.append(bytes.substr(i, st.valid));
      i += st.valid;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      i += st.skip;
    }
  }
}

std::size_t match_length(std::string_view s, std::size_t pos, SplitPattern pattern) {
  return pattern == SplitPattern::kGpt2 ? gpt2_match(s, pos) : llama3_match(s, pos);
}

}  // namespace ember::text::detail
