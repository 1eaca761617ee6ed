// tests/test_io_foreign.cpp — io::load_state / io::save_state with checkpoints of other tools:
// the transformers 5.17 fixtures in tests/data/lm (tests/gen_lm_fixtures.py: GPT-2 f32 with
// Conv1D weights and a tied head, Llama bf16 in three shards with an index, Llama f32 tied)
// loaded into modules built of ember's layers under the same names, saved back in Hugging
// Face's layout (one file or shards) and loaded again, and every refusal's message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/io/foreign.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/nn/embedding.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "io_test_util.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;
using ember_test::expect_error;
using ember_test::floats;
using ember_test::ScratchDir;
using ember_test::tensor_bytes;
namespace fs = std::filesystem;

std::string lm(const std::string& name) { return ember_test::data_dir() + "/lm/" + name; }

// A module of named children and nothing else: how a test gives ember's layers the dotted
// names of a transformers model ("model.layers.0.self_attn.q_proj").
class NodeImpl : public nn::ModuleImpl {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Node"; }
  // Puts `m` at the dotted `path`, making the nodes on the way.
  void put(const std::string& path, const nn::Module& m) {
    const size_t dot = path.find('.');
    if (dot == std::string::npos) {
      register_module(path, m.ptr());
      return;
    }
    const std::string head = path.substr(0, dot);
    std::shared_ptr<NodeImpl> node;
    for (auto& [n, c] : named_children())
      if (n == head) node = std::dynamic_pointer_cast<NodeImpl>(c);
    if (!node) {
      node = std::make_shared<NodeImpl>();
      register_module(head, node);
    }
    node->put(path.substr(dot + 1), m);
  }
};

struct LlamaShape {
  int64_t hidden, intermediate, heads, kv_heads, vocab, layers;
  bool tied;
};
constexpr LlamaShape kLlama{64, 96, 4, 2, 720, 2, false};     // tests/data/lm/llama
constexpr LlamaShape kLlamaTied{32, 64, 4, 4, 720, 1, true};  // tests/data/lm/llama_tied

// LlamaForCausalLM's parameter names and shapes, of ember's layers.
nn::Module llama_like(const LlamaShape& s) {
  auto root = std::make_shared<NodeImpl>();
  const int64_t kv = s.kv_heads * (s.hidden / s.heads);
  nn::Embedding embed(s.vocab, s.hidden);
  root->put("model.embed_tokens", embed);
  for (int64_t i = 0; i < s.layers; ++i) {
    const std::string at = "model.layers." + std::to_string(i) + ".";
    root->put(at + "self_attn.q_proj", nn::Linear(s.hidden, s.hidden, false));
    root->put(at + "self_attn.k_proj", nn::Linear(s.hidden, kv, false));
    root->put(at + "self_attn.v_proj", nn::Linear(s.hidden, kv, false));
    root->put(at + "self_attn.o_proj", nn::Linear(s.hidden, s.hidden, false));
    root->put(at + "mlp.gate_proj", nn::Linear(s.hidden, s.intermediate, false));
    root->put(at + "mlp.up_proj", nn::Linear(s.hidden, s.intermediate, false));
    root->put(at + "mlp.down_proj", nn::Linear(s.intermediate, s.hidden, false));
    root->put(at + "input_layernorm", nn::RMSNorm(s.hidden));
    root->put(at + "post_attention_layernorm", nn::RMSNorm(s.hidden));
  }
  root->put("model.norm", nn::RMSNorm(s.hidden));
  root->put("lm_head", nn::Linear(s.hidden, s.vocab, false));
  if (s.tied) root->tie("lm_head.weight", embed->weight());
  return nn::Module(root);
}

// GPT2LMHeadModel's names under `prefix` ("transformer." as in the file, or "" for a module
// named without it), the head tied to wte. Linear weights are [out, in]; the file's Conv1D
// weights are [in, out].
nn::Module gpt2_like(const std::string& prefix) {
  constexpr int64_t kEmbd = 32, kVocab = 640, kPositions = 64, kLayers = 2;
  auto root = std::make_shared<NodeImpl>();
  nn::Embedding wte(kVocab, kEmbd);
  root->put(prefix + "wte", wte);
  root->put(prefix + "wpe", nn::Embedding(kPositions, kEmbd));
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string at = prefix + "h." + std::to_string(i) + ".";
    root->put(at + "ln_1", nn::LayerNorm(kEmbd));
    root->put(at + "attn.c_attn", nn::Linear(kEmbd, 3 * kEmbd));
    root->put(at + "attn.c_proj", nn::Linear(kEmbd, kEmbd));
    root->put(at + "ln_2", nn::LayerNorm(kEmbd));
    root->put(at + "mlp.c_fc", nn::Linear(kEmbd, 4 * kEmbd));
    root->put(at + "mlp.c_proj", nn::Linear(4 * kEmbd, kEmbd));
  }
  root->put(prefix + "ln_f", nn::LayerNorm(kEmbd));
  root->put("lm_head", nn::Linear(kEmbd, kVocab, false));
  root->tie("lm_head.weight", wte->weight());
  return nn::Module(root);
}

bool is_conv1d_weight(const std::string& name) {
  for (const char* end : {".c_attn.weight", ".c_proj.weight", ".c_fc.weight"})
    if (name.ends_with(end)) return true;
  return false;
}

// GPT-2's Conv1D weights transposed into Linear's layout, the names without "transformer.".
io::LoadStateOptions gpt2_load_options() {
  io::LoadStateOptions o;
  o.rename = [](const std::string& n) { return n.starts_with("transformer.") ? n.substr(12) : n; };
  o.transform = [](const std::string& name, Tensor t) {
    return is_conv1d_weight(name) ? t.transpose(0, 1) : t;
  };
  return o;
}

// And back.
io::SaveStateOptions gpt2_save_options() {
  io::SaveStateOptions o;
  o.rename = [](const std::string& n) { return n == "lm_head.weight" ? n : "transformer." + n; };
  o.transform = [](const std::string& name, Tensor t) {
    return is_conv1d_weight(name) ? t.transpose(0, 1) : t;
  };
  return o;
}

// Every tensor of the given files, by name, as stored (host, the file's dtype).
std::map<std::string, Tensor> tensors_of(const std::vector<std::string>& files) {
  std::map<std::string, Tensor> out;
  for (const std::string& path : files) {
    io::SafetensorsFile f(path);
    for (const io::TensorEntry& e : f.entries()) out[e.name] = f.read(e.name);
  }
  return out;
}

std::vector<std::string> llama_shards() {
  std::vector<std::string> out;
  for (int i = 1; i <= 3; ++i)
    out.push_back(lm("llama/model-0000" + std::to_string(i) + "-of-00003.safetensors"));
  return out;
}

// The module's state (each name) against `want` by name, bitwise in f32.
void expect_state_equals(const nn::Module& model, const std::map<std::string, Tensor>& want,
                         const std::string& what) {
  for (auto& [name, t] : model->state_dict()) {
    auto it = want.find(name);
    if (it == want.end()) continue;
    EXPECT_EQ(floats(t), floats(it->second)) << what << ": " << name;
  }
}

}  // namespace

// The sharded bf16 Llama, through its index, into an f32 module: exactly the bf16 values
// upcast, each read against the shard that holds it; into a bf16 module: the stored bits.
TEST(IoForeign, ShardedBf16LlamaLoadsAsTheStoredValuesInF32OrBf16) {
  const std::map<std::string, Tensor> file = tensors_of(llama_shards());
  ASSERT_EQ(file.size(), 21u);
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    auto model = llama_like(kLlama);
    model->to(dtype);
    const nn::LoadReport report =
        io::load_state(model, lm("llama/model.safetensors.index.json"), io::LoadStateOptions{});
    EXPECT_TRUE(report.ok());
    EXPECT_EQ(report.applied.size(), 21u);
    for (auto& [name, t] : model->state_dict()) {
      ASSERT_TRUE(file.count(name)) << name;
      EXPECT_EQ(t.dtype(), dtype) << name;
      EXPECT_EQ(floats(t), floats(file.at(name))) << name;
      if (dtype == DType::bf16) {
        EXPECT_TRUE(tensor_bytes(t) == tensor_bytes(file.at(name))) << name << ": stored bits";
      }
    }
  }
}

// A folder holding model.safetensors.index.json or model.safetensors loads as its file would;
// a tied head the file leaves out (transformers' convention) is not missing.
TEST(IoForeign, AFolderFindsItsCheckpointAndATiedHeadIsNotMissing) {
  auto sharded = llama_like(kLlama);
  EXPECT_TRUE(io::load_state(sharded, lm("llama"), io::LoadStateOptions{}).ok());
  expect_state_equals(sharded, tensors_of(llama_shards()), "llama folder");

  auto tied = llama_like(kLlamaTied);
  const std::map<std::string, Tensor> file = tensors_of({lm("llama_tied/model.safetensors")});
  ASSERT_FALSE(file.count("lm_head.weight"));
  const nn::LoadReport report = io::load_state(tied, lm("llama_tied"), io::LoadStateOptions{});
  EXPECT_TRUE(report.ok()) << (report.missing.empty() ? "" : report.missing[0]);
  EXPECT_EQ(report.applied.size(), file.size());
  expect_state_equals(tied, file, "llama_tied folder");
  const Tensor head = tied->named_modules()[0].second->child("lm_head")->param("weight");
  EXPECT_EQ(floats(head), floats(file.at("model.embed_tokens.weight")));
}

// GPT-2 into a module named without "transformer." whose Conv1D layers are Linear: rename
// and transpose, checked against the file's tensors transposed.
TEST(IoForeign, Gpt2LoadsRenamedWithItsConv1DWeightsTransposed) {
  auto model = gpt2_like("");
  const nn::LoadReport report =
      io::load_state(model, lm("gpt2/model.safetensors"), gpt2_load_options());
  EXPECT_TRUE(report.ok());
  const std::map<std::string, Tensor> file = tensors_of({lm("gpt2/model.safetensors")});
  EXPECT_EQ(report.applied.size(), file.size());
  int transposed = 0;
  for (auto& [name, t] : model->state_dict()) {
    if (name == "lm_head.weight") {
      EXPECT_EQ(floats(t), floats(file.at("transformer.wte.weight")));
      continue;
    }
    const Tensor& stored = file.at("transformer." + name);
    if (is_conv1d_weight(name)) {
      ++transposed;
      EXPECT_EQ(t.shape(), Shape({stored.shape()[1], stored.shape()[0]})) << name;
      EXPECT_EQ(floats(t), floats(stored.transpose(0, 1))) << name;
    } else {
      EXPECT_EQ(floats(t), floats(stored)) << name;
    }
  }
  EXPECT_EQ(transposed, 8);
}

// Older GPT-2 checkpoints hold the attention's causal-mask buffers (attn.bias, attn.masked_bias)
// that no module has: rename returns "" for them and they are skipped; without that rename
// they are unexpected.
TEST(IoForeign, RenameReturningEmptySkipsATensor) {
  ScratchDir dir;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : tensors_of({lm("gpt2/model.safetensors")})) tensors.emplace_back(name, t);
  tensors.emplace_back("transformer.h.0.attn.bias", tril(ones({1, 1, 64, 64})));
  tensors.emplace_back("transformer.h.0.attn.masked_bias", full({}, -1e4));
  io::write_safetensors(dir.file("old.safetensors"), tensors, {});

  io::LoadStateOptions options = gpt2_load_options();
  expect_error([&] { io::load_state(gpt2_like(""), dir.file("old.safetensors"), options); },
               {"unexpected (2): h.0.attn.bias (the file's 'transformer.h.0.attn.bias'), "
                "h.0.attn.masked_bias"});
  const auto strip = options.rename;
  options.rename = [&](const std::string& n) {
    return n.ends_with(".attn.bias") || n.ends_with(".attn.masked_bias") ? "" : strip(n);
  };
  auto model = gpt2_like("");
  const nn::LoadReport report = io::load_state(model, dir.file("old.safetensors"), options);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.applied.size(), tensors.size() - 2);
}

namespace {

// Llama's names with three problems: layer 1's gate_proj is 80 wide (the file's is 96), the
// module has model.extra.weight (the file does not) and lacks model.norm (the file has it).
nn::Module misfit_llama() {
  auto model = std::make_shared<NodeImpl>();
  auto full_model = llama_like(kLlama);
  for (auto& [name, m] : full_model->named_modules()) {
    if (!m->named_children().empty() || name == "model.norm") continue;  // the layers only
    model->put(name, name == "model.layers.1.mlp.gate_proj" ? nn::Module(nn::Linear(64, 80, false))
                                                            : nn::Module(m));
  }
  model->put("model.extra", nn::Linear(4, 4, false));
  return nn::Module(model);
}

}  // namespace

// Strict: one error listing the missing, unexpected and mismatched names (shapes and dtypes of
// both sides), and not one value changes.
TEST(IoForeign, StrictRefusalListsEveryProblemAndChangesNothing) {
  manual_seed(3);
  auto model = misfit_llama();
  ASSERT_EQ(model->state_dict().size(), 21u);
  const nn::StateDict sd = model->state_dict();
  std::vector<std::vector<uint8_t>> before;
  for (auto& [n, t] : sd) before.push_back(tensor_bytes(t));
  const std::string msg = expect_error(
      [&] { io::load_state(model, lm("llama"), io::LoadStateOptions{}); },
      {"load_state: ", "model.safetensors.index.json", "strict; nothing was loaded",
       "missing (1): model.extra.weight", "unexpected (1): model.norm.weight",
       "mismatched (1): model.layers.1.mlp.gate_proj.weight: expected [80, 64] f32, got [96, 64] "
       "bf16"});
  for (size_t i = 0; i < sd.size(); ++i)
    EXPECT_TRUE(tensor_bytes(sd[i].second) == before[i]) << sd[i].first << " changed";
}

// Non-strict: what fits is loaded, the rest reported, the misfit left as it was.
TEST(IoForeign, NonStrictLoadsWhatFitsAndReportsTheRest) {
  manual_seed(4);
  auto model = misfit_llama();
  io::LoadStateOptions options;
  options.strict = false;
  const std::vector<uint8_t> misfit_before = tensor_bytes(model->child("model")
                                                              ->child("layers")
                                                              ->child("1")
                                                              ->child("mlp")
                                                              ->child("gate_proj")
                                                              ->param("weight"));
  const nn::LoadReport report = io::load_state(model, lm("llama"), options);
  EXPECT_EQ(report.missing, std::vector<std::string>{"model.extra.weight"});
  EXPECT_EQ(report.unexpected, std::vector<std::string>{"model.norm.weight"});
  ASSERT_EQ(report.mismatched.size(), 1u);
  EXPECT_EQ(report.applied.size(), 19u);
  std::map<std::string, Tensor> file = tensors_of(llama_shards());
  file.erase("model.layers.1.mlp.gate_proj.weight");
  expect_state_equals(model, file, "applied");
  EXPECT_TRUE(tensor_bytes(model->child("model")
                               ->child("layers")
                               ->child("1")
                               ->child("mlp")
                               ->child("gate_proj")
                               ->param("weight")) == misfit_before);
}

// A file holding both names of a tied tensor: each is loaded in state_dict order, so the last
// (lm_head.weight, after model.embed_tokens.weight) wins, as PyTorch's load_state_dict.
TEST(IoForeign, BothNamesOfATiedTensorInTheFileTheLastOneWins) {
  ScratchDir dir;
  std::map<std::string, Tensor> file = tensors_of({lm("llama_tied/model.safetensors")});
  const Tensor head = file.at("model.embed_tokens.weight") * 2.0;
  std::vector<std::pair<std::string, Tensor>> tensors(file.begin(), file.end());
  tensors.emplace_back("lm_head.weight", head);
  io::write_safetensors(dir.file("both.safetensors"), tensors, {});
  auto model = llama_like(kLlamaTied);
  const nn::LoadReport report =
      io::load_state(model, dir.file("both.safetensors"), io::LoadStateOptions{});
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.applied.size(), tensors.size());
  const Tensor embed = model->child("model")->child("embed_tokens")->param("weight");
  EXPECT_EQ(floats(embed), floats(head));
}

// GPT-2 loaded and saved back: the file holds the original's names (no lm_head.weight, tied),
// Conv1D layouts, format "pt", and bitwise the original's values; it loads back bitwise.
TEST(IoForeign, SaveThenLoadRoundTripsBitwiseInTheHuggingFaceLayout) {
  ScratchDir dir;
  auto model = gpt2_like("");
  io::load_state(model, lm("gpt2"), gpt2_load_options());
  io::save_state(model, dir.file("out"), gpt2_save_options());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.file("out")))
    names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"model.safetensors"});
  io::SafetensorsFile saved(dir.file("out/model.safetensors"));
  EXPECT_EQ(saved.metadata().at("format"), "pt");
  const std::map<std::string, Tensor> original = tensors_of({lm("gpt2/model.safetensors")});
  ASSERT_EQ(saved.entries().size(), original.size());
  for (auto& [name, t] : original) {
    ASSERT_TRUE(saved.contains(name)) << name;
    EXPECT_EQ(saved.find(name)->shape, t.shape()) << name;
    EXPECT_TRUE(tensor_bytes(saved.read(name)) == tensor_bytes(t)) << name;
  }
  auto back = gpt2_like("");
  EXPECT_TRUE(io::load_state(back, dir.file("out"), gpt2_load_options()).ok());
  ember_test::expect_same_state(model, back, std::nullopt, "gpt2 round trip");
}

namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<std::string> folder_list(const std::string& path) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// Over max_shard_bytes: shards filled in order (none over the limit), an index whose
// weight_map names every tensor's shard and whose total_size is the tensors' bytes; the single
// file of an earlier save is removed, and a later unsharded save removes the shards and index.
TEST(IoForeign, ShardedSaveWritesAnIndexCoveringEveryTensor) {
  ScratchDir dir;
  auto model = llama_like(kLlama);
  io::load_state(model, lm("llama"), io::LoadStateOptions{});
  io::save_state(model, dir.path, {});
  EXPECT_EQ(folder_list(dir.path), std::vector<std::string>{"model.safetensors"});

  constexpr uint64_t kMax = 200'000;  // f32: 615,680 bytes in all, the largest tensor 184,320
  io::save_state(model, dir.path, {.max_shard_bytes = kMax});
  EXPECT_EQ(folder_list(dir.path),
            (std::vector<std::string>{
                "model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors",
                "model.safetensors.index.json"}));
  const nlohmann::json index = read_json(dir.file("model.safetensors.index.json"));
  uint64_t total = 0, parameters = 0;
  std::set<std::string> covered;
  for (auto& [name, t] : model->state_dict()) {
    total += static_cast<uint64_t>(t.numel()) * 4;
    parameters += static_cast<uint64_t>(t.numel());
    ASSERT_TRUE(index["weight_map"].contains(name)) << name;
    io::SafetensorsFile shard(dir.file(index["weight_map"][name].get<std::string>()));
    EXPECT_TRUE(shard.contains(name)) << name;
    covered.insert(name);
  }
  EXPECT_EQ(index["weight_map"].size(), covered.size());
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(index["metadata"]["total_parameters"].get<uint64_t>(), parameters);
  for (int i = 1; i <= 4; ++i) {
    io::SafetensorsFile shard(dir.file("model-0000" + std::to_string(i) + "-of-00004.safetensors"));
    EXPECT_LE(shard.data_size(), kMax);
    EXPECT_EQ(shard.metadata().at("format"), "pt");
  }
  auto back = llama_like(kLlama);
  EXPECT_TRUE(io::load_state(back, dir.path, io::LoadStateOptions{}).ok());
  ember_test::expect_same_state(model, back, std::nullopt, "sharded round trip");

  io::save_state(model, dir.path, {});
  EXPECT_EQ(folder_list(dir.path), std::vector<std::string>{"model.safetensors"});
}

// dtype bf16: every tensor stored BF16 (the tied head once, as embed_tokens), and loaded back
// into an f32 module as the f32 values rounded to bf16. A NAME.safetensors path names the file.
TEST(IoForeign, SavingBf16StoresEachTensorOnceInBf16) {
  ScratchDir dir;
  auto model = llama_like(kLlamaTied);
  io::load_state(model, lm("llama_tied"), io::LoadStateOptions{});
  io::save_state(model, dir.file("half.safetensors"), {.dtype = DType::bf16});
  io::SafetensorsFile saved(dir.file("half.safetensors"));
  EXPECT_EQ(saved.entries().size(), 11u);
  EXPECT_FALSE(saved.contains("lm_head.weight"));
  for (const io::TensorEntry& e : saved.entries()) EXPECT_EQ(e.dtype, DType::bf16) << e.name;
  auto back = llama_like(kLlamaTied);
  EXPECT_TRUE(io::load_state(back, dir.file("half.safetensors"), io::LoadStateOptions{}).ok());
  ember_test::expect_same_state(model, back, DType::bf16, "bf16 round trip");
}

// Each bad input is an ember::Error naming what came and what was expected.
TEST(IoForeign, BadInputsAreErrorsNamingWhatCameAndWhatWasExpected) {
  ScratchDir dir;
  const io::LoadStateOptions plain;
  auto model = llama_like(kLlama);
  expect_error([&] { io::load_state(model, dir.file("nowhere"), plain); },
               {"load_state: ", "nowhere", "no such file or folder",
                "expected a .safetensors file, a model.safetensors.index.json or a folder"});
  expect_error([&] { io::load_state(model, dir.path, plain); },
               {dir.path, "holds neither model.safetensors nor model.safetensors.index.json"});
  expect_error([&] { io::load_state(nn::Module(), lm("llama"), plain); },
               {"load_state: the model is an empty module handle", "expected a module"});
  expect_error([&] { io::save_state(nn::Module(), dir.path); },
               {"save_state: the model is an empty module handle"});
  expect_error([&] { io::save_state(model, dir.path, {.dtype = DType::i32}); },
               {"save_state: dtype i32", "expected f32, f64, f16 or bf16"});

  // Indexes: a missing shard, a malformed weight_map, not JSON, a name the shard lacks.
  auto write_index = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  };
  for (int i = 1; i <= 3; ++i) {
    const std::string shard = "model-0000" + std::to_string(i) + "-of-00003.safetensors";
    fs::copy_file(lm("llama/" + shard), dir.file(shard));
  }
  nlohmann::json index = read_json(lm("llama/model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = "model-00009-of-00009.safetensors";
  expect_error([&] { io::load_state(model, write_index("a.index.json", index.dump()), plain); },
               {"a.index.json",
                "shard 'model-00009-of-00009.safetensors' (holding "
                "'model.norm.weight') does not exist (expected ",
                "/model-00009-of-00009.safetensors"});
  expect_error(
      [&] {
        io::load_state(model, write_index("b.index.json", R"({"weight_map": [1, 2]})"), plain);
      },
      {"b.index.json", "no weight_map of tensor names to shard file names (got [1,2]",
       "expected {\"weight_map\""});
  expect_error(
      [&] { io::load_state(model, write_index("c.index.json", R"({"metadata": {}})"), plain); },
      {"c.index.json", "(got no weight_map"});
  expect_error(
      [&] { io::load_state(model, write_index("d.index.json", "{\"weight_map\": "), plain); },
      {"d.index.json", "the index is not valid JSON"});
  index = read_json(lm("llama/model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = "model-00001-of-00003.safetensors";
  expect_error([&] { io::load_state(model, write_index("e.index.json", index.dump()), plain); },
               {"e.index.json",
                "maps tensor 'model.norm.weight' to shard "
                "'model-00001-of-00003.safetensors', which has no tensor of that name"});
  index["weight_map"]["model.norm.weight"] = "../model-00002-of-00003.safetensors";
  expect_error([&] { io::load_state(model, write_index("f.index.json", index.dump()), plain); },
               {"f.index.json",
                "is mapped to '../model-00002-of-00003.safetensors' (expected the "
                "file name of a shard beside the index)"});

  // Options that break the mapping.
  io::LoadStateOptions undefined;
  undefined.transform = [](const std::string& n, Tensor t) {
    return n == "model.norm.weight" ? Tensor() : t;
  };
  expect_error([&] { io::load_state(model, lm("llama"), undefined); },
               {"model.safetensors.index.json: transform returned an undefined tensor for "
                "'model.norm.weight'",
                "expected the tensor to load"});
  io::LoadStateOptions collide;
  collide.rename = [](const std::string& n) { return n.ends_with("layernorm.weight") ? "x" : n; };
  expect_error([&] { io::load_state(model, lm("llama"), collide); },
               {"rename maps both 'model.layers.0.input_layernorm.weight' and "
                "'model.layers.0.post_attention_layernorm.weight' to 'x'"});
  expect_error(
      [&] {
        io::save_state(model, dir.file("out"), {.rename = [](const std::string&) { return "w"; }});
      },
      {"save_state: rename maps both 'model.embed_tokens.weight' and", "nothing was written"});
  EXPECT_FALSE(fs::exists(dir.file("out/model.safetensors")));
}

// Onto a GPU module: the parameters keep their buffers (data_ptr) and take the file's values.
TEST(IoForeign, LoadsOntoAGpuModuleInPlace) {
  SKIP_WITHOUT_CUDA();
  auto model = llama_like(kLlama);
  model->to(Device::cuda(0));
  std::vector<void*> before;
  for (auto& [n, t] : model->state_dict()) before.push_back(t.data_ptr());
  EXPECT_TRUE(io::load_state(model, lm("llama"), io::LoadStateOptions{}).ok());
  size_t i = 0;
  for (auto& [n, t] : model->state_dict()) {
    EXPECT_TRUE(t.device().is_cuda()) << n;
    EXPECT_EQ(t.data_ptr(), before[i++]) << n;
  }
  expect_state_equals(model, tensors_of(llama_shards()), "on the GPU");
}
