// src/text/bpe.cpp — the byte-level BPE model: GPT-2's byte map and the merge loop that
// `tokenizers` runs (lowest rank first, leftmost among equal ranks), over raw bytes
// (Note [BPE on raw bytes] in bpe.hpp).
#include "text/bpe.hpp"

#include <algorithm>
#include <functional>

#include "ember/error.hpp"
#include "text/pretokenize.hpp"

namespace ember::text::detail {

namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68
// bytes for U+0100.. in byte order.
struct ByteMap {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // indexed by character, U+0000..U+0143
  ByteMap() {
    to_byte.fill(-1);
    char32_t extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_char[b] = printable ? static_cast<char32_t>(b) : extra++;
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

char32_t byte_to_char(std::uint8_t b) { return byte_map().to_char[b]; }

int char_to_byte(char32_t c) { return c < 324 ? byte_map().to_byte[c] : -1; }

std::optional<std::string> bytes_of_token(std::string_view token) {
  if (first_invalid_utf8(token) != token.size()) return std::nullopt;
  std::string bytes;
  for (std::size_t i = 0; i < token.size();) {
    const CodePoint c = decode_utf8(token, i);
    const int b = char_to_byte(c.cp);
    if (b < 0) return std::nullopt;
    bytes += static_cast<char>(b);
    i += c.len;
  }
  return bytes;
}

BytePairModel::BytePairModel(const std::unordered_map<std::string, int32_t>& vocab,
                             const std::vector<std::pair<std::string, std::string>>& merges,
                             BpeOptions options, const std::string& where)
    : options_(options) {
  byte_id_.fill(-1);
  word_bytes_.reserve(vocab.size());
  std::vector<int32_t> ids;
  for (const auto& [token, id] : vocab) {
    if (std::optional<std::string> bytes = bytes_of_token(token)) {
      word_bytes_.push_back(std::move(*bytes));
      ids.push_back(id);
    }
  }
  // word_bytes_ no longer grows: its strings' storage is stable for the views below.
  by_bytes_.reserve(word_bytes_.size());
  for (std::size_t i = 0; i < word_bytes_.size(); ++i) {
    by_bytes_.emplace(word_bytes_[i], ids[i]);
    if (word_bytes_[i].size() == 1) byte_id_[static_cast<std::uint8_t>(word_bytes_[i][0])] = ids[i];
  }
  merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto id_of = [&](const std::string& token) {
      auto it = vocab.find(token);
      EMBER_CHECK(it != vocab.end(), where, ": model.merges[", rank, "] (\"", a, " ", b,
                  "\"): the token \"", token, "\" is not in model.vocab");
      return it->second;
    };
    const int32_t ia = id_of(a), ib = id_of(b), merged = id_of(a + b);
    // A repeated pair takes its last rank, as in `tokenizers` (its map keeps the last insert).
    merges_[key(ia, ib)] = Merge{static_cast<int32_t>(rank), merged};
  }
}

void BytePairModel::encode(std::string_view word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    auto it = by_bytes_.find(word);
    if (it != by_bytes_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // The symbols: a doubly linked list over a vector (merged-away symbols have id -1).
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto push = [&](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1});
  };
  bool pending_unk = false;  // an unk whose bytes may still grow (fuse_unk)
  for (const char ch : word) {
    const int32_t id = byte_id_[static_cast<std::uint8_t>(ch)];
    if (id >= 0) {
      if (pending_unk) push(*options_.unk_id);
      pending_unk = false;
      push(id);
    } else if (options_.unk_id) {
      if (pending_unk && !options_.fuse_unk) push(*options_.unk_id);
      pending_unk = true;
    }
  }
  if (pending_unk) push(*options_.unk_id);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  // Candidate merges ordered by (rank, position): the front is the lowest rank, leftmost.
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Candidate> heap;
  auto consider = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    auto it = merges_.find(key(symbols[pos].id, symbols[next].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, it->second.new_id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (left.id < 0 || left.next < 0) continue;
    // A stale candidate: its pair changed since it was queued.
    auto it = merges_.find(key(left.id, symbols[left.next].id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    Symbol& right = symbols[left.next];
    left.id = top.new_id;
    left.next = right.next;
    right.id = -1;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (const Symbol& s : symbols)
    if (s.id >= 0) out.push_back(s.id);
}

}  // namespace ember::text::detail
