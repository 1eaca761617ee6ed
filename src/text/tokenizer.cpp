// src/text/tokenizer.cpp — ember::text::Tokenizer: reads tokenizer.json, takes the added
// tokens out of the text, pre-tokenizes the rest (pretokenize.cpp), merges each word with the
// BPE model (bpe.cpp) and applies the post-processor; decodes ids back to text.
//
// The pipeline is the one of Hugging Face `tokenizers` (tokenizer/mod.rs, encode_single_sequence
// then post_process), restricted to what byte-level BPE tokenizers use; see the header for
// what is read and what is refused.
#include "ember/text/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ember/error.hpp"
#include "text/bpe.hpp"
#include "text/pretokenize.hpp"

namespace ember::text {

namespace {

using json = nlohmann::json;

constexpr int64_t kMaxId = 0x7FFFFFFE;  // ids are int32 inside the model

// A JSON value, shortened, for messages.
std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// Reads fields of one tokenizer.json; every failure names the source and the field.
struct Reader {
  std::string source;  // "Tokenizer::from_file: <path>" or "Tokenizer::from_json"

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    ember::detail::throw_error(source + ": " + field + ": " + what);
  }
  const json& need(const json& obj, const char* key, const std::string& field) const {
    if (!obj.is_object()) fail(field, "got " + shown(obj) + ", expected an object");
    auto it = obj.find(key);
    if (it == obj.end()) fail(field + "." + key, "missing");
    return *it;
  }
  bool flag(const json& obj, const char* key, bool otherwise, const std::string& field) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return otherwise;
    if (!it->is_boolean())
      fail(field + "." + key, "got " + shown(*it) + ", expected true or false");
    return it->get<bool>();
  }
  std::string text(const json& v, const std::string& field) const {
    if (!v.is_string()) fail(field, "got " + shown(v) + ", expected a string");
    return v.get<std::string>();
  }
  int64_t id(const json& v, const std::string& field) const {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxId)
      fail(field, "got " + shown(v) + ", expected a token id from 0 to " + std::to_string(kMaxId));
    return v.get<int64_t>();
  }
  std::string type(const json& obj, const std::string& field) const {
    return text(need(obj, "type", field), field + ".type");
  }
  // A field that ember supports only when off (null, false, 0 or "").
  void require_off(const json& obj, const char* key, const std::string& field,
                   const std::string& why) const {
    auto it = obj.find(key);
    // GPT-2's own tokenizer.json writes "" for an absent continuing_subword_prefix.
    if (it == obj.end() || it->is_null() || (it->is_boolean() && !it->get<bool>()) ||
        (it->is_number() && it->get<double>() == 0.0) ||
        (it->is_string() && it->get<std::string>().empty()))
      return;
    fail(field + "." + key, "got " + shown(*it) + ", expected null (" + why + ")");
  }
};

// The added tokens of one matching pass as a byte trie; longest match at a position.
class AddedMatcher {
 public:
  void add(std::string_view content, int32_t index) {
    int32_t node = 0;
    for (const char ch : content) {
      const auto b = static_cast<unsigned char>(ch);
      int32_t child = -1;
      for (const auto& [edge, to] : nodes_[node].next)
        if (edge == b) child = to;
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[node].next.emplace_back(b, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    nodes_[node].token = index;
    first_[static_cast<unsigned char>(content[0])] = true;
    empty_ = false;
  }
  bool empty() const { return empty_; }
  // The longest token starting at `pos`: {its length, its index}; length 0 when none.
  std::pair<std::size_t, int32_t> longest_at(std::string_view s, std::size_t pos) const {
    std::pair<std::size_t, int32_t> best{0, -1};
    if (!first_[static_cast<unsigned char>(s[pos])]) return best;
    int32_t node = 0;
    for (std::size_t i = pos; i < s.size(); ++i) {
      int32_t child = -1;
      for (const auto& [edge, to] : nodes_[node].next)
        if (edge == static_cast<unsigned char>(s[i])) child = to;
      if (child < 0) break;
      node = child;
      if (nodes_[node].token >= 0) best = {i + 1 - pos, nodes_[node].token};
    }
    return best;
  }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> next;
    int32_t token = -1;
  };
  std::vector<Node> nodes_{1};
  std::array<bool, 256> first_{};
  bool empty_ = true;
};

// One pre-tokenizer step: a Split by a pattern, or the ByteLevel step (optional prefix space,
// optional split by GPT-2's pattern; the byte mapping itself is the model's, Note [BPE on raw
// bytes]).
struct PreStep {
  bool byte_level = false;
  bool split = true;
  detail::SplitPattern pattern = detail::SplitPattern::kGpt2;
  bool add_prefix_space = false;
};

// One piece of a TemplateProcessing template: the sequence ($A), or special tokens' ids.
struct TemplatePiece {
  bool sequence = false;
  std::vector<int64_t> ids;
};

// A piece of the text once the added tokens are out: an added token's id, or text (id -1).
struct Segment {
  std::string_view text;
  int64_t id;
};

// The start of the white space that ends s[..end] (end itself when there is none).
std::size_t white_space_start_before(std::string_view s, std::size_t end) {
  std::size_t i = end;
  while (i > 0) {
    std::size_t j = i - 1;
    while (j > 0 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) --j;
    if (!detail::is_white_space(detail::decode_utf8(s, j).cp)) break;
    i = j;
  }
  return i;
}

// The end of the white space that starts s[begin..].
std::size_t white_space_end_after(std::string_view s, std::size_t begin) {
  std::size_t i = begin;
  while (i < s.size()) {
    const detail::CodePoint c = detail::decode_utf8(s, i);
    if (!detail::is_white_space(c.cp)) break;
    i += c.len;
  }
  return i;
}

}  // namespace

struct Tokenizer::Impl {
  std::optional<detail::BytePairModel> model;
  std::unordered_map<std::string, int64_t> model_vocab;
  std::vector<AddedToken> added;
  std::unordered_map<std::string, int64_t> added_ids;  // content -> id
  AddedMatcher raw_matcher;                            // added tokens with normalized false
  AddedMatcher normalized_matcher;                     // ... and true
  std::vector<PreStep> steps;
  std::vector<std::vector<TemplatePiece>> templates;  // post-processors in order
  std::vector<std::string> id_token;                  // "" where `has_token` is false
  std::vector<std::string> id_bytes;                  // what the ByteLevel decoder makes of it
  std::vector<std::uint8_t> has_token, special;

  void read(const json& j, const Reader& r);
  void read_model(const json& m, const Reader& r);
  void read_added(const json& list, const Reader& r);
  void read_pre_step(const json& p, const std::string& field, const Reader& r);
  void read_post(const json& p, const std::string& field, const Reader& r);
  void build_id_tables();

  void split_added(std::string_view s, const AddedMatcher& m, std::vector<Segment>& out) const;
  void pretokenize(std::string_view piece, std::size_t step, std::vector<int64_t>& out) const;
};

void Tokenizer::Impl::read(const json& j, const Reader& r) {
  if (!j.is_object()) r.fail("tokenizer.json", "got " + shown(j) + ", expected an object");
  r.require_off(j, "truncation", "tokenizer.json", "truncation is not supported");
  r.require_off(j, "padding", "tokenizer.json", "padding is not supported");
  const json norm = j.value("normalizer", json());
  const bool empty_sequence = norm.is_object() && norm.value("type", "") == "Sequence" &&
                              norm.value("normalizers", json::array()) == json::array();
  if (!norm.is_null() && !empty_sequence)
    r.fail("normalizer", "got " + shown(norm) +
                             ", expected null (ember applies no normalizer: NFC, NFKC, "
                             "Lowercase, Prepend... are not supported)");
  read_model(r.need(j, "model", "tokenizer.json"), r);
  read_added(j.value("added_tokens", json::array()), r);

  const json pre = j.value("pre_tokenizer", json());
  if (pre.is_null())
    r.fail("pre_tokenizer",
           "got null, expected ByteLevel or a Sequence ending in ByteLevel "
           "(ember reads byte-level BPE tokenizers)");
  read_pre_step(pre, "pre_tokenizer", r);
  const auto byte_levels =
      std::count_if(steps.begin(), steps.end(), [](const PreStep& s) { return s.byte_level; });
  if (byte_levels != 1 || !steps.back().byte_level)
    r.fail("pre_tokenizer", "got " + shown(pre) +
                                ", expected exactly one ByteLevel step, the last one (byte-level "
                                "BPE maps bytes to characters after every split)");

  read_post(j.value("post_processor", json()), "post_processor", r);
  const json dec = j.value("decoder", json());
  if (!dec.is_object() || dec.value("type", "") != "ByteLevel")
    r.fail("decoder", "got " + shown(dec) + ", expected {\"type\": \"ByteLevel\"}");
  build_id_tables();
}

void Tokenizer::Impl::read_model(const json& m, const Reader& r) {
  const std::string type =
      m.is_object() && !m.contains("type") && m.contains("merges") ? "BPE" : r.type(m, "model");
  if (type != "BPE")
    r.fail("model.type", "got \"" + type +
                             "\", expected \"BPE\" (ember reads byte-level BPE; WordPiece, "
                             "WordLevel and Unigram are not supported)");
  r.require_off(m, "byte_fallback", "model", "byte fallback is SentencePiece-style BPE");
  r.require_off(m, "dropout", "model", "BPE dropout is for training");
  r.require_off(m, "continuing_subword_prefix", "model", "byte-level BPE uses none");
  r.require_off(m, "end_of_word_suffix", "model", "byte-level BPE uses none");

  const json& vocab = r.need(m, "vocab", "model");
  if (!vocab.is_object()) r.fail("model.vocab", "got " + shown(vocab) + ", expected an object");
  std::unordered_map<std::string, int32_t> by_token;
  by_token.reserve(vocab.size());
  model_vocab.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    const int64_t v = r.id(id, "model.vocab[\"" + token + "\"]");
    by_token.emplace(token, static_cast<int32_t>(v));
    model_vocab.emplace(token, v);
  }

  const json& merges = r.need(m, "merges", "model");
  if (!merges.is_array()) r.fail("model.merges", "got " + shown(merges) + ", expected a list");
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const json& e = merges[i];
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    if (e.is_string()) {  // "a b", as in merges.txt
      const std::string line = e.get<std::string>();
      if (line.rfind("#version", 0) == 0) continue;
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        r.fail(field, "got " + shown(e) + ", expected two tokens separated by one space");
      pairs.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      pairs.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      r.fail(field, "got " + shown(e) + ", expected \"a b\" or [\"a\", \"b\"]");
    }
  }

  detail::BpeOptions options;
  options.ignore_merges = r.flag(m, "ignore_merges", false, "model");
  options.fuse_unk = r.flag(m, "fuse_unk", false, "model");
  const json unk = m.value("unk_token", json());
  if (!unk.is_null()) {
    const std::string name = r.text(unk, "model.unk_token");
    auto it = by_token.find(name);
    if (it == by_token.end())
      r.fail("model.unk_token", "got \"" + name + "\", which is not in model.vocab");
    options.unk_id = it->second;
  }
  model.emplace(by_token, pairs, options, r.source);
}

void Tokenizer::Impl::read_added(const json& list, const Reader& r) {
  if (!list.is_array()) r.fail("added_tokens", "got " + shown(list) + ", expected a list");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    const json& e = list[i];
    AddedToken t;
    t.id = r.id(r.need(e, "id", field), field + ".id");
    t.content = r.text(r.need(e, "content", field), field + ".content");
    if (t.content.empty() || detail::first_invalid_utf8(t.content) != t.content.size())
      r.fail(field + ".content", "got " + shown(e["content"]) + ", expected non-empty text");
    t.special = r.flag(e, "special", false, field);
    t.lstrip = r.flag(e, "lstrip", false, field);
    t.rstrip = r.flag(e, "rstrip", false, field);
    t.normalized = r.flag(e, "normalized", !t.special, field);
    if (r.flag(e, "single_word", false, field))
      r.fail(field + ".single_word", "got true, expected false (not supported)");
    const auto index = static_cast<int32_t>(added.size());
    (t.normalized ? normalized_matcher : raw_matcher).add(t.content, index);
    added_ids[t.content] = t.id;
    added.push_back(std::move(t));
  }
}

void Tokenizer::Impl::read_pre_step(const json& p, const std::string& field, const Reader& r) {
  const std::string type = r.type(p, field);
  if (type == "Sequence") {
    const json& list = r.need(p, "pretokenizers", field);
    if (!list.is_array())
      r.fail(field + ".pretokenizers", "got " + shown(list) + ", expected a list");
    for (std::size_t i = 0; i < list.size(); ++i)
      read_pre_step(list[i], field + ".pretokenizers[" + std::to_string(i) + "]", r);
    return;
  }
  PreStep step;
  if (type == "ByteLevel") {
    step.byte_level = true;
    step.add_prefix_space = r.flag(p, "add_prefix_space", true, field);
    step.split = r.flag(p, "use_regex", true, field);
  } else if (type == "Split") {
    const json& pattern = r.need(p, "pattern", field);
    if (!pattern.is_object() || !pattern.contains("Regex"))
      r.fail(field + ".pattern", "got " + shown(pattern) + ", expected {\"Regex\": ...}");
    const std::string regex = r.text(pattern["Regex"], field + ".pattern.Regex");
    if (regex == detail::kGpt2Pattern) {
      step.pattern = detail::SplitPattern::kGpt2;
    } else if (regex == detail::kLlama3Pattern) {
      step.pattern = detail::SplitPattern::kLlama3;
    } else {
      r.fail(field + ".pattern.Regex",
             "got " + shown(pattern["Regex"]) + ", expected GPT-2's or Llama-3's split pattern " +
                 "(ember runs those two as scanners and has no general regex engine)");
    }
    const json behavior = p.value("behavior", json());
    if (behavior != "Isolated")
      r.fail(field + ".behavior", "got " + shown(behavior) + ", expected \"Isolated\"");
    if (r.flag(p, "invert", false, field)) r.fail(field + ".invert", "got true, expected false");
  } else {
    r.fail(field + ".type", "got \"" + type +
                                "\", expected \"ByteLevel\", \"Split\" or \"Sequence\" (Metaspace, "
                                "Whitespace, Digits... are not supported)");
  }
  steps.push_back(step);
}

void Tokenizer::Impl::read_post(const json& p, const std::string& field, const Reader& r) {
  if (p.is_null()) return;
  const std::string type = r.type(p, field);
  if (type == "ByteLevel") return;  // it trims offsets only; ids are unchanged
  if (type == "Sequence") {
    const json& list = r.need(p, "processors", field);
    if (!list.is_array()) r.fail(field + ".processors", "got " + shown(list) + ", expected a list");
    for (std::size_t i = 0; i < list.size(); ++i)
      read_post(list[i], field + ".processors[" + std::to_string(i) + "]", r);
    return;
  }
  if (type != "TemplateProcessing")
    r.fail(field + ".type",
           "got \"" + type +
               "\", expected \"TemplateProcessing\", \"ByteLevel\" or \"Sequence\" "
               "(BertProcessing and RobertaProcessing are not supported)");
  const json& single = r.need(p, "single", field);
  const json specials = p.value("special_tokens", json::object());
  if (!single.is_array()) r.fail(field + ".single", "got " + shown(single) + ", expected a list");
  std::vector<TemplatePiece> pieces;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const std::string at = field + ".single[" + std::to_string(i) + "]";
    const json& e = single[i];
    TemplatePiece piece;
    if (e.is_object() && e.contains("Sequence") && e["Sequence"].is_object()) {
      const json seq_id = e["Sequence"].value("id", json());
      if (seq_id != "A") r.fail(at, "got " + shown(e) + ", expected the sequence $A");
      piece.sequence = true;
    } else if (e.is_object() && e.contains("SpecialToken") && e["SpecialToken"].is_object()) {
      const std::string name = r.text(r.need(e["SpecialToken"], "id", at), at + ".id");
      if (!specials.contains(name))
        r.fail(at, "the special token \"" + name + "\" is not in " + field + ".special_tokens");
      const json& ids = r.need(specials[name], "ids", field + ".special_tokens");
      if (!ids.is_array()) r.fail(field + ".special_tokens", "got " + shown(ids) + " for ids");
      for (const json& v : ids) piece.ids.push_back(r.id(v, field + ".special_tokens." + name));
    } else {
      r.fail(at, "got " + shown(e) + ", expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    pieces.push_back(std::move(piece));
  }
  templates.push_back(std::move(pieces));
}

void Tokenizer::Impl::build_id_tables() {
  int64_t size = 0;
  for (const auto& [token, id] : model_vocab) size = std::max(size, id + 1);
  for (const AddedToken& t : added) size = std::max(size, t.id + 1);
  id_token.assign(size, std::string());
  has_token.assign(size, 0);
  special.assign(size, 0);
  for (const auto& [token, id] : model_vocab) {
    id_token[id] = token;
    has_token[id] = 1;
  }
  std::unordered_set<std::string> special_contents;
  for (const AddedToken& t : added) {  // an added token wins over the model's at its id
    id_token[t.id] = t.content;
    has_token[t.id] = 1;
    if (t.special) special_contents.insert(t.content);
  }
  id_bytes.assign(size, std::string());
  for (int64_t id = 0; id < size; ++id) {
    if (!has_token[id]) continue;
    // `tokenizers` skips a special token by its text, whichever id spells it.
    special[id] = special_contents.count(id_token[id]) ? 1 : 0;
    std::optional<std::string> bytes = detail::bytes_of_token(id_token[id]);
    id_bytes[id] = bytes ? std::move(*bytes) : id_token[id];
  }
}

void Tokenizer::Impl::split_added(std::string_view s, const AddedMatcher& m,
                                  std::vector<Segment>& out) const {
  // `tokenizers`' AddedVocabulary::find_matches: leftmost-longest matches; lstrip and rstrip
  // widen a match over neighbouring white space, never back into the previous match.
  if (m.empty()) {
    out.push_back({s, -1});
    return;
  }
  std::size_t start_offset = 0, pos = 0;
  while (pos < s.size()) {
    const auto [len, index] = m.longest_at(s, pos);
    if (len == 0) {
      ++pos;
      continue;
    }
    std::size_t start = pos, stop = pos + len;
    pos = stop;
    const AddedToken& t = added[index];
    if (t.lstrip) start = std::max(white_space_start_before(s, start), start_offset);
    if (t.rstrip) stop = white_space_end_after(s, stop);
    if (start_offset < start) out.push_back({s.substr(start_offset, start - start_offset), -1});
    out.push_back({s.substr(start, stop - start), t.id});
    start_offset = stop;
  }
  if (start_offset < s.size()) out.push_back({s.substr(start_offset), -1});
}

void Tokenizer::Impl::pretokenize(std::string_view piece, std::size_t step,
                                  std::vector<int64_t>& out) const {
  if (piece.empty()) return;
  if (step == steps.size()) {
    model->encode(piece, out);
    return;
  }
  const PreStep& st = steps[step];
  std::string spaced;  // the piece with ByteLevel's prefix space, when it takes one
  if (st.byte_level && st.add_prefix_space && piece[0] != ' ') {
    spaced = " " + std::string(piece);
    piece = spaced;
  }
  for (std::size_t i = 0; i < piece.size();) {
    const std::size_t n = st.split ? detail::match_length(piece, i, st.pattern) : piece.size();
    pretokenize(piece.substr(i, n), step + 1, out);
    i += n;
  }
}

Tokenizer Tokenizer::from_file(const std::string& tokenizer_json_path) {
  const std::string source = "Tokenizer::from_file: " + tokenizer_json_path;
  std::ifstream in(tokenizer_json_path, std::ios::binary);
  EMBER_CHECK(in, source, ": cannot open the file (expected a tokenizer.json)");
  std::ostringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::parse_error& e) {
    ember::detail::throw_error(source + ": not valid JSON (" + e.what() + ")");
  }
  auto impl = std::make_shared<Impl>();
  impl->read(j, Reader{source});
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_string(std::string_view tokenizer_json_text) {
  json j;
  try {
    j = json::parse(tokenizer_json_text);
  } catch (const json::parse_error& e) {
    ember::detail::throw_error(std::string("Tokenizer::from_string: not valid JSON (") + e.what() +
                               ")");
  }
  auto impl = std::make_shared<Impl>();
  impl->read(j, Reader{"Tokenizer::from_string"});
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_json(const nlohmann::json& tokenizer_json) {
  auto impl = std::make_shared<Impl>();
  impl->read(tokenizer_json, Reader{"Tokenizer::from_json"});
  return Tokenizer(std::move(impl));
}

std::vector<int64_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const std::size_t bad = detail::first_invalid_utf8(text);
  if (bad != text.size()) {
    std::ostringstream msg;
    msg << "Tokenizer::encode: the text is not valid UTF-8 (byte 0x" << std::hex
        << static_cast<int>(static_cast<unsigned char>(text[bad])) << std::dec << " at offset "
        << bad << " of " << text.size() << ")";
    ember::detail::throw_error(msg.str());
  }
  const Impl& m = *impl_;
  // Non-normalized added tokens first, then the normalized ones in what is left (with no
  // normalizer the text is the same; the order of the passes still decides overlaps).
  std::vector<Segment> raw, segments;
  m.split_added(text, m.raw_matcher, raw);
  for (const Segment& s : raw) {
    if (s.id >= 0 || s.text.empty())
      segments.push_back(s);
    else
      m.split_added(s.text, m.normalized_matcher, segments);
  }
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const Segment& s : segments) {
    if (s.id >= 0)
      ids.push_back(s.id);
    else
      m.pretokenize(s.text, 0, ids);
  }
  if (!add_special_tokens) return ids;
  for (const std::vector<TemplatePiece>& pieces : m.templates) {
    std::vector<int64_t> wrapped;
    for (const TemplatePiece& p : pieces) {
      const std::vector<int64_t>& part = p.sequence ? ids : p.ids;
      wrapped.insert(wrapped.end(), part.begin(), part.end());
    }
    ids = std::move(wrapped);
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int64_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  const auto size = static_cast<int64_t>(m.id_token.size());
  std::string bytes;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    EMBER_CHECK(id >= 0 && id < size, "Tokenizer::decode: id ", id, " at position ", i,
                " is out of range (expected 0 <= id < vocab_size ", size, ")");
    EMBER_CHECK(m.has_token[id], "Tokenizer::decode: id ", id, " at position ", i,
                " has no token in this vocabulary");
    if (skip_special_tokens && m.special[id]) continue;
    bytes += m.id_bytes[id];
  }
  std::string text;
  text.reserve(bytes.size());
  detail::append_utf8_lossy(bytes, text);
  return text;
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->id_token.size()); }

std::optional<int64_t> Tokenizer::token_to_id(std::string_view token) const {
  const std::string key(token);
  if (auto it = impl_->added_ids.find(key); it != impl_->added_ids.end()) return it->second;
  if (auto it = impl_->model_vocab.find(key); it != impl_->model_vocab.end()) return it->second;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::id_to_token(int64_t id) const {
  if (id < 0 || id >= vocab_size() || !impl_->has_token[id]) return std::nullopt;
  return impl_->id_token[id];
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }

int64_t Tokenizer::special_token_id(std::string_view content) const {
  std::string names;
  for (const AddedToken& t : impl_->added) {
    if (!t.special) continue;
    if (t.content == content) return t.id;
    names += (names.empty() ? "" : ", ") + t.content;
  }
  ember::detail::throw_error("Tokenizer::special_token_id: no special token \"" +
                             std::string(content) +
                             "\" (the special tokens: " + (names.empty() ? "none" : names) + ")");
}

bool Tokenizer::is_special(int64_t id) const {
  return id >= 0 && id < vocab_size() && impl_->special[id];
}

std::string TextStreamer::push(int64_t id) {
  ids_.push_back(id);
  return take(/*last=*/false);
}

std::string TextStreamer::finish() { return take(/*last=*/true); }

std::string TextStreamer::take(bool last) {
  const std::string text = tokenizer_.decode(ids_, skip_special_);
  if ((!last && text.ends_with("\xEF\xBF\xBD")) || text.size() <= given_) return "";
  std::string piece = text.substr(given_);
  given_ = text.size();
  return piece;
}

}  // namespace ember::text
