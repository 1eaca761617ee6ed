// tests/test_tokenizer.cpp — ember::text::Tokenizer against Hugging Face `tokenizers`.
//
// Tier 1: every case of tests/data/lm/tokenizer_cases.json (tests/gen_lm_fixtures.py: the
// lines of awkward.txt, the whole file and a few edge strings) gives the library's ids with
// and without special tokens, and its decoded text, for a GPT-2-style and a Llama-3-style
// tokenizer. Then: round trips, the lookups, the byte-level details on a small inline
// tokenizer (decoding broken UTF-8, both merge formats, ignore_merges, added-token flags,
// add_prefix_space), and every refusal with its message.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ember/error.hpp"
#include "ember/text/tokenizer.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "lm_test_util.hpp"
#include "text/bpe.hpp"
#include "text/pretokenize.hpp"

namespace {

using ember::test_util::error_of;
using ember::text::Tokenizer;
using json = nlohmann::json;
using ember_test::lm_dir;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "missing " << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Tokenizer fixture_tokenizer(const std::string& name) {
  return Tokenizer::from_file(lm_dir() + "/" + name + "/tokenizer.json");
}

// "ids differ at 3 of 12 (got 40, expected 41)", or "" when equal.
std::string first_difference(const std::vector<int64_t>& got, const std::vector<int64_t>& want) {
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (got[i] != want[i])
      return "ids differ at " + std::to_string(i) + " (got " + std::to_string(got[i]) +
             ", expected " + std::to_string(want[i]) + ")";
  if (got.size() != want.size())
    return "got " + std::to_string(got.size()) + " ids, expected " + std::to_string(want.size());
  return "";
}

void expect_matches_tokenizers_library(const std::string& name) {
  const Tokenizer tok = fixture_tokenizer(name);
  const json cases = json::parse(read_text(lm_dir() + "/tokenizer_cases.json"))[name];
  ASSERT_GT(cases.size(), 20u);
  for (const json& c : cases) {
    const std::string text = c["text"];
    const auto ids = c["ids"].get<std::vector<int64_t>>();
    const auto ids_special = c["ids_special"].get<std::vector<int64_t>>();
    EXPECT_EQ(first_difference(tok.encode(text, false), ids), "") << name << " on " << json(text);
    EXPECT_EQ(first_difference(tok.encode(text, true), ids_special), "")
        << name << " with special tokens on " << json(text);
    EXPECT_EQ(tok.decode(ids), c["decoded"].get<std::string>())
        << name << " decoding " << json(text);
  }
}

TEST(TokenizerFixture, Gpt2MatchesTokenizersLibrary) {
  expect_matches_tokenizers_library("gpt2_tok");
}

TEST(TokenizerFixture, LlamaMatchesTokenizersLibrary) {
  expect_matches_tokenizers_library("llama_tok");
}

TEST(Tokenizer, RoundTripsTheAwkwardText) {
  const std::string awkward = read_text(lm_dir() + "/awkward.txt");
  for (const char* name : {"gpt2_tok", "llama_tok"}) {
    const Tokenizer tok = fixture_tokenizer(name);
    EXPECT_EQ(tok.decode(tok.encode(awkward, false)), awkward) << name;
    // A long run of one letter and one of spaces: single huge words for the merge loop.
    const std::string runs = std::string(20000, 'a') + std::string(20000, ' ') + "b";
    EXPECT_EQ(tok.decode(tok.encode(runs, false)), runs) << name;
  }
}

TEST(Tokenizer, EncodesFromManyThreadsAtOnce) {
  const Tokenizer tok = fixture_tokenizer("llama_tok");
  const std::string awkward = read_text(lm_dir() + "/awkward.txt");
  const std::vector<int64_t> want = tok.encode(awkward);
  std::vector<std::vector<int64_t>> got(4);
  std::vector<std::thread> threads;
  for (auto& g : got) threads.emplace_back([&] { g = tok.encode(awkward); });
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(first_difference(g, want), "");
}

TEST(Tokenizer, SpecialTokensAreAddedSkippedAndLookedUp) {
  const Tokenizer llama = fixture_tokenizer("llama_tok");
  EXPECT_EQ(llama.vocab_size(), 720);
  const int64_t bos = llama.special_token_id("<|begin_of_text|>");
  const int64_t eos = llama.special_token_id("<|end_of_text|>");
  EXPECT_EQ(bos, 0);
  EXPECT_EQ(eos, 1);
  EXPECT_TRUE(llama.is_special(eos));
  EXPECT_EQ(llama.token_to_id("<|end_of_text|>"), eos);
  EXPECT_EQ(llama.id_to_token(bos), "<|begin_of_text|>");
  EXPECT_EQ(llama.id_to_token(720), std::nullopt);
  EXPECT_EQ(llama.token_to_id("no such token"), std::nullopt);
  ASSERT_EQ(llama.added_tokens().size(), 2u);
  EXPECT_TRUE(llama.added_tokens()[1].special);

  const std::string text = "Hi<|end_of_text|> there";
  const std::vector<int64_t> ids = llama.encode(text);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), bos);
  EXPECT_NE(std::find(ids.begin(), ids.end(), eos), ids.end());
  EXPECT_EQ(llama.decode(ids), "<|begin_of_text|>" + text);
  EXPECT_EQ(llama.decode(ids, true), "Hi there");

  const Tokenizer gpt2 = fixture_tokenizer("gpt2_tok");
  EXPECT_EQ(gpt2.vocab_size(), 640);
  EXPECT_EQ(gpt2.encode("x", true), gpt2.encode("x", false));  // ByteLevel adds nothing
  EXPECT_EQ(gpt2.token_to_id("Ġt"), gpt2.encode(" t", false).at(0));
  EXPECT_NE(error_of([&] {
              gpt2.special_token_id("<|begin_of_text|>");
            }).find("no special token \"<|begin_of_text|>\" (the special tokens: <|endoftext|>)"),
            std::string::npos);
}

// A byte-level tokenizer whose ids 0..255 are the bytes, then `extra` tokens (byte-level
// spelling) from id 256 on, with `merges`.
json small_tokenizer(const std::vector<std::string>& extra, const json& merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) {
    std::string c;
    ember::text::detail::append_utf8(ember::text::detail::byte_to_char(static_cast<uint8_t>(b)), c);
    vocab[c] = b;
  }
  for (std::size_t i = 0; i < extra.size(); ++i) vocab[extra[i]] = 256 + static_cast<int>(i);
  return json{
      {"version", "1.0"},
      {"added_tokens", json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", false}}}};
}

TEST(Tokenizer, DecodeReplacesBrokenUtf8AsTokenizersDoes) {
  const Tokenizer tok = Tokenizer::from_json(small_tokenizer({}, json::array()));
  auto decode = [&](std::vector<int64_t> ids) { return tok.decode(ids); };
  EXPECT_EQ(decode({0xF0, 0x9F, 0x98, 0x80}), "\xF0\x9F\x98\x80");  // 😀 from its bytes
  EXPECT_EQ(decode({0xE6, 0x97}), "\xEF\xBF\xBD");                  // one U+FFFD: a cut sequence
  EXPECT_EQ(decode({0xE6, 'a'}),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(decode({0xFF, 0xC0, 0x80}), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // one each
  EXPECT_EQ(decode({0xED, 0xA0, 0x80}), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(tok.encode("\xF0\x9F\x98\x80", false), (std::vector<int64_t>{0xF0, 0x9F, 0x98, 0x80}));
}

TEST(Tokenizer, BothMergeFormatsAndIgnoreMerges) {
  // Merges "a b" -> "ab" (256), "ab c" -> "abc" (257); "xyz" (258) is in the vocabulary with
  // no merges that reach it, so only ignore_merges emits it.
  const std::vector<std::string> extra = {"ab", "abc", "xyz"};
  const json legacy = json::array({"a b", "ab c"});
  const json pairs = json::array({json::array({"a", "b"}), json::array({"ab", "c"})});
  const Tokenizer a = Tokenizer::from_json(small_tokenizer(extra, legacy));
  const Tokenizer b = Tokenizer::from_json(small_tokenizer(extra, pairs));
  EXPECT_EQ(a.encode("abcaab", false), (std::vector<int64_t>{257, 'a', 256}));
  EXPECT_EQ(b.encode("abcaab", false), (std::vector<int64_t>{257, 'a', 256}));
  EXPECT_EQ(a.encode("xyz", false), (std::vector<int64_t>{'x', 'y', 'z'}));

  json ignoring = small_tokenizer(extra, legacy);
  ignoring["model"]["ignore_merges"] = true;
  const Tokenizer c = Tokenizer::from_json(ignoring);
  EXPECT_EQ(c.encode("xyz", false), (std::vector<int64_t>{258}));
  EXPECT_EQ(c.encode("xyzabc", false), (std::vector<int64_t>{'x', 'y', 'z', 257}));

  // GPT-2's own file writes "" for the subword prefix and suffix it does not use.
  json gpt2_style = small_tokenizer(extra, legacy);
  gpt2_style["model"]["continuing_subword_prefix"] = "";
  gpt2_style["model"]["end_of_word_suffix"] = "";
  EXPECT_EQ(Tokenizer::from_json(gpt2_style).encode("abc", false), (std::vector<int64_t>{257}));
}

TEST(Tokenizer, AddedTokenFlagsAndPrefixSpace) {
  json j = small_tokenizer({}, json::array());
  j["added_tokens"] = json::array(
      {{{"id", 300},
        {"content", "<sep>"},
        {"special", true},
        {"lstrip", true},
        {"rstrip", true},
        {"normalized", false}},
       {{"id", 301}, {"content", "<s"}, {"special", false}, {"normalized", true}},
       {{"id", 302}, {"content", "<sepx>"}, {"special", false}, {"normalized", false}}});
  const Tokenizer tok = Tokenizer::from_json(j);
  // lstrip and rstrip take the spaces around <sep>; the longest match wins; the
  // non-normalized pass runs before the normalized one ("<s" never splits "<sep>").
  EXPECT_EQ(tok.encode("a  <sep>  b", false), (std::vector<int64_t>{'a', 300, 'b'}));
  EXPECT_EQ(tok.encode("<sepx><s", false), (std::vector<int64_t>{302, 301}));
  EXPECT_EQ(tok.decode(std::vector<int64_t>{'a', 300, 'b'}, true), "ab");
  EXPECT_EQ(tok.decode(std::vector<int64_t>{'a', 301, 'b'}, true), "a<sb");

  json spaced = small_tokenizer({}, json::array());
  spaced["pre_tokenizer"]["add_prefix_space"] = true;
  spaced["added_tokens"] =
      json::array({{{"id", 300}, {"content", "<sep>"}, {"special", true}, {"normalized", false}}});
  const Tokenizer sp = Tokenizer::from_json(spaced);
  // Each piece between added tokens takes a space, unless it starts with one.
  EXPECT_EQ(sp.encode("a<sep> b", false), (std::vector<int64_t>{' ', 'a', 300, ' ', 'b'}));
}

TEST(Tokenizer, ScannersSplitAsTheRegexesDo) {
  using ember::text::detail::match_length;
  using ember::text::detail::SplitPattern;
  auto split = [](std::string_view s, SplitPattern p) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < s.size();) {
      const std::size_t n = match_length(s, i, p);
      out.emplace_back(s.substr(i, n));
      i += n;
    }
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split("I'm  fine\t\n  ok ", SplitPattern::kGpt2),
            (V{"I", "'m", " ", " fine", "\t\n ", " ok", " "}));
  EXPECT_EQ(split("x 12345 ...!", SplitPattern::kGpt2), (V{"x", " 12345", " ...!"}));
  EXPECT_EQ(split("HE'LL (int 12345\r\n\n  x", SplitPattern::kLlama3),
            (V{"HE", "'LL", " (", "int", " ", "123", "45", "\r\n\n", " ", " x"}));
  EXPECT_EQ(split("a.\n\nb \xC2\xA0"
                  "c",
                  SplitPattern::kLlama3),
            (V{"a", ".\n\n", "b", " ",
               "\xC2\xA0"
               "c"}));
}

// A small valid tokenizer.json with one field replaced, for the refusals below.
std::string refusal(const std::string& field, const json& value) {
  json j = small_tokenizer({}, json::array());
  if (field.rfind("model.", 0) == 0)
    j["model"][field.substr(6)] = value;
  else
    j[field] = value;
  return error_of([&] { Tokenizer::from_json(j); }, field);
}

bool has(const std::string& message, const std::string& part) {
  return message.find(part) != std::string::npos;
}

TEST(Tokenizer, RefusesWhatItDoesNotImplementByName) {
  EXPECT_PRED2(has, refusal("model.type", "WordPiece"),
               "Tokenizer::from_json: model.type: got \"WordPiece\", expected \"BPE\"");
  EXPECT_PRED2(has, refusal("model.type", "Unigram"), "got \"Unigram\", expected \"BPE\"");
  EXPECT_PRED2(has, refusal("model.byte_fallback", true),
               "model.byte_fallback: got true, expected null");
  EXPECT_PRED2(has, refusal("model.continuing_subword_prefix", "##"),
               "model.continuing_subword_prefix: got \"##\", expected null");
  EXPECT_PRED2(has, refusal("model.merges", json::array({"a zz"})),
               "model.merges[0] (\"a zz\"): the token \"zz\" is not in model.vocab");
  EXPECT_PRED2(has, refusal("model.merges", json::array({"a b c"})),
               "model.merges[0]: got \"a b c\", expected two tokens separated by one space");
  EXPECT_PRED2(has, refusal("normalizer", {{"type", "NFC"}}),
               "normalizer: got {\"type\":\"NFC\"}, expected null");
  EXPECT_PRED2(has, refusal("pre_tokenizer", {{"type", "Metaspace"}}),
               "pre_tokenizer.type: got \"Metaspace\", expected \"ByteLevel\", \"Split\" or "
               "\"Sequence\"");
  EXPECT_PRED2(has, refusal("pre_tokenizer", nullptr), "pre_tokenizer: got null");
  const json unknown_split = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}, {"behavior", "Isolated"}},
        {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  EXPECT_PRED2(has, refusal("pre_tokenizer", unknown_split),
               "pre_tokenizer.pretokenizers[0].pattern.Regex: got \"\\\\w+\", expected GPT-2's "
               "or Llama-3's split pattern");
  EXPECT_PRED2(has, refusal("post_processor", {{"type", "BertProcessing"}}),
               "post_processor.type: got \"BertProcessing\", expected \"TemplateProcessing\"");
  EXPECT_PRED2(has, refusal("decoder", {{"type", "WordPiece"}}),
               "decoder: got {\"type\":\"WordPiece\"}, expected {\"type\": \"ByteLevel\"}");
  EXPECT_PRED2(has, refusal("truncation", {{"max_length", 512}}),
               "tokenizer.json.truncation: got {\"max_length\":512}, expected null");
  EXPECT_PRED2(has,
               refusal("added_tokens",
                       json::array({{{"id", 300}, {"content", "<w>"}, {"single_word", true}}})),
               "added_tokens[0].single_word: got true, expected false (not supported)");
}

TEST(Tokenizer, BadFilesAndBadInputsThrowWithTheirReason) {
  EXPECT_PRED2(has, error_of([] { Tokenizer::from_file("/nonexistent/tokenizer.json"); }),
               "Tokenizer::from_file: /nonexistent/tokenizer.json: cannot open the file");
  EXPECT_PRED2(has, error_of([] { Tokenizer::from_string("{\"model\": [1, 2"); }),
               "Tokenizer::from_string: not valid JSON (");
  EXPECT_PRED2(has, error_of([] { Tokenizer::from_string("[1, 2]"); }),
               "tokenizer.json: got [1,2], expected an object");

  const Tokenizer gpt2 = fixture_tokenizer("gpt2_tok");
  EXPECT_PRED2(has, error_of([&] {
                 gpt2.decode(std::vector<int64_t>{5, 640});
               }),
               "Tokenizer::decode: id 640 at position 1 is out of range (expected 0 <= id < "
               "vocab_size 640)");
  EXPECT_PRED2(has, error_of([&] { gpt2.decode(std::vector<int64_t>{-1}); }),
               "id -1 at position 0 is out of range");
  EXPECT_PRED2(has, error_of([&] {
                 gpt2.encode(
                     "abc\xFF"
                     "def");
               }),
               "Tokenizer::encode: the text is not valid UTF-8 (byte 0xff at offset 3 of 7)");
  EXPECT_PRED2(has, error_of([&] { gpt2.encode("\xE6\x97"); }),
               "not valid UTF-8 (byte 0xe6 at offset 0 of 2)");
}

}  // namespace

namespace {

// Streaming: the pieces joined are the whole decoding, and a character split across tokens
// waits (an emoji's bytes are several byte-level tokens in the small vocabulary).
TEST(Tokenizer, TextStreamerHoldsBackUnfinishedCharacters) {
  const Tokenizer tok = Tokenizer::from_file(lm_dir() + "/gpt2_tok/tokenizer.json");
  const std::string text = "Emoji: 😀 👍🏽 and CJK: 日本語";
  const std::vector<int64_t> ids = tok.encode(text, false);
  ember::text::TextStreamer stream(tok);
  std::string joined;
  int held = 0;
  for (int64_t id : ids) {
    const std::string piece = stream.push(id);
    held += piece.empty();
    EXPECT_FALSE(piece.ends_with("\xEF\xBF\xBD")) << "an unfinished character was given out";
    joined += piece;
  }
  joined += stream.finish();
  EXPECT_EQ(joined, text);
  EXPECT_GT(held, 0);
}

}  // namespace
