// src/io/foreign.cpp — load_state / save_state for safetensors checkpoints of other tools:
// finding the files of a checkpoint (file, index, folder), mapping names and tensors, and
// writing Hugging Face's layout (one file, or shards with an index).
//
// Note [Foreign loads check everything first]
// A foreign load reads every tensor it will use, renamed, transformed and in its parameter's
// dtype, and checks names and shapes, before it writes a single parameter: the shape to check
// is the transformed one, so it is known only once the tensor is read and transformed. So a
// refused load (strict) or a failed read, index or transform leaves the module as it was, at
// the price of one extra copy of the model at the peak, where the module lives (Note [Foreign
// loads read where the module lives]). Tied names
// are resolved per tensor, not per name: state_dict lists a tied tensor under each of its
// names, and the tensor is missing only when the file has none of them.
#include "ember/io/foreign.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/io/safetensors.hpp"

namespace ember::io {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kIndexSuffix = ".safetensors.index.json";
constexpr const char* kSuffix = ".safetensors";

[[noreturn]] void fail(const char* op, const std::string& path, const std::string& what) {
  detail::throw_error(detail::concat(op, ": ", path, ": ", what));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ---------------------------------------------------------------- finding the files

// The open files of one checkpoint and every tensor in them: name → (file, entry).
struct Checkpoint {
  std::string path;  // the file or index read (a folder's is found in it)
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::vector<std::pair<const SafetensorsFile*, const TensorEntry*>> tensors;  // file order
};

// The tensors of `file`, refusing a name another shard has too.
void add_file(Checkpoint& c, std::unique_ptr<SafetensorsFile> file, const std::string& where) {
  std::set<std::string> known;
  for (auto& [f, e] : c.tensors) known.insert(e->name);
  for (const TensorEntry& e : file->entries())
    if (known.count(e.name))
      fail("load_state", where,
           detail::concat("tensor '", e.name, "' is in two shards (", file->path(),
                          " and an earlier one; expected each name in one shard)"));
  for (const TensorEntry& e : file->entries()) c.tensors.emplace_back(file.get(), &e);
  c.files.push_back(std::move(file));
}

// The shards of a model.safetensors.index.json: {"weight_map": {tensor name: shard file}}, the
// shards beside the index. Every shard is opened (validated) and must hold what the map says.
Checkpoint open_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("load_state", path, "cannot open the index file");
  std::stringstream text;
  text << in.rdbuf();
  json index;
  try {
    index = json::parse(text.str());
  } catch (const json::exception& e) {
    fail("load_state", path, std::string("the index is not valid JSON (") + e.what() + ")");
  }
  const bool map_ok = index.is_object() && index.contains("weight_map") &&
                      index["weight_map"].is_object() &&
                      std::all_of(index["weight_map"].begin(), index["weight_map"].end(),
                                  [](const json& v) { return v.is_string(); });
  if (!map_ok) {
    const std::string got = !index.is_object() ? index.dump().substr(0, 60)
                            : !index.contains("weight_map")
                                ? std::string("no weight_map")
                                : index["weight_map"].dump().substr(0, 60);
    fail("load_state", path,
         "the index has no weight_map of tensor names to shard file names (got " + got +
             "; expected {\"weight_map\": {\"name\": \"model-00001-of-00002.safetensors\", ...}})");
  }
  const fs::path folder = fs::path(path).parent_path();
  std::vector<std::string> shards;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    const std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      fail("load_state", path,
           detail::concat("tensor '", it.key(), "' is mapped to '", shard,
                          "' (expected the file name of a shard beside the index)"));
    if (std::find(shards.begin(), shards.end(), shard) == shards.end()) shards.push_back(shard);
  }
  std::sort(shards.begin(), shards.end());
  Checkpoint c{.path = path};
  for (const std::string& shard : shards) {
    const std::string shard_path = (folder / shard).string();
    if (!fs::is_regular_file(shard_path)) {
      std::string first;  // a tensor the index puts there, to name it
      for (auto it = index["weight_map"].begin(); first.empty(); ++it)
        if (it.value() == shard) first = it.key();
      fail("load_state", path,
           detail::concat("shard '", shard, "' (holding '", first, "') does not exist (expected ",
                          shard_path, ")"));
    }
    add_file(c, std::make_unique<SafetensorsFile>(shard_path), path);
  }
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    const std::string shard = it.value().get<std::string>();
    const auto file = std::find_if(c.files.begin(), c.files.end(), [&](const auto& f) {
      return fs::path(f->path()).filename() == shard;
    });
    if (!(*file)->contains(it.key()))
      fail("load_state", path,
           detail::concat("the index maps tensor '", it.key(), "' to shard '", shard,
                          "', which has no tensor of that name"));
  }
  return c;
}

// A file, an index, or a folder holding either (Hugging Face's preference: the single file).
Checkpoint open_checkpoint(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st))
    fail("load_state", path,
         "no such file or folder (expected a .safetensors file, a model.safetensors.index.json "
         "or a folder holding one of them)");
  if (fs::is_directory(st)) {
    const fs::path folder(path);
    if (fs::is_regular_file(folder / kSingleFile))
      return open_checkpoint((folder / kSingleFile).string());
    if (fs::is_regular_file(folder / kIndexFile)) return open_index((folder / kIndexFile).string());
    fail("load_state", path,
         "the folder holds neither model.safetensors nor model.safetensors.index.json (expected a "
         "Hugging Face model folder; pass the path of the .safetensors file otherwise)");
  }
  if (ends_with(path, ".json")) return open_index(path);
  Checkpoint c{.path = path};
  add_file(c, std::make_unique<SafetensorsFile>(path), path);
  return c;
}

// ---------------------------------------------------------------- loading

// One tensor of the file that a module name takes: read, transformed, in the parameter's dtype.
struct Incoming {
  size_t slot;  // index into the model's state_dict
  Tensor value;
};

std::string describe(const Shape& shape, DType dtype) {
  return shape.to_string() + " " + std::string(dtype_name(dtype));
}

}  // namespace

nn::LoadReport load_state(const nn::Module& model, const std::string& path,
                          const LoadStateOptions& options) {
  EMBER_CHECK(model.defined(),
              "load_state: the model is an empty module handle (expected a "
              "module to load ",
              path, " into)");
  const Checkpoint ckpt = open_checkpoint(path);
  for (const auto& f : ckpt.files) f->verify_checksum();  // files written by ember have one

  const nn::StateDict mine = model->state_dict();
  std::map<std::string, size_t> slot_of;
  for (size_t i = 0; i < mine.size(); ++i) slot_of.emplace(mine[i].first, i);

  nn::LoadReport report;
  std::vector<Incoming> incoming;
  std::map<std::string, std::string> source_of;  // module name → the file's name for it
  std::vector<std::string> unexpected_text;
  NoGradGuard no_grad;
  // The names first: which file tensors the module takes (nothing is read for the others).
  struct Pending {
    size_t slot;
    const SafetensorsFile* file;
    const TensorEntry* entry;
    std::string name, renamed;
    Tensor value;
  };
  std::vector<Pending> pending;
  for (auto& [file, entry] : ckpt.tensors) {
    const std::string name = options.rename ? options.rename(entry->name) : entry->name;
    if (name.empty()) continue;  // skipped on purpose
    const std::string renamed = name == entry->name ? "" : " (the file's '" + entry->name + "')";
    if (auto [it, fresh] = source_of.emplace(name, entry->name); !fresh)
      fail("load_state", ckpt.path,
           detail::concat("rename maps both '", it->second, "' and '", entry->name, "' to '", name,
                          "' (expected one file tensor per module name)"));
    auto slot = slot_of.find(name);
    if (slot == slot_of.end()) {
      report.unexpected.push_back(name);
      unexpected_text.push_back(name + renamed);
      continue;
    }
    pending.push_back({slot->second, file, entry, name, renamed, Tensor()});
  }
  // Note [Foreign loads read where the module lives]: each file's tensors are read in one
  // streamed pass into new tensors on their parameter's device, in the stored dtype (on a GPU
  // through pinned staging whose copies overlap the reading: the file at the storage's speed),
  // then transformed, converted and checked there. The module is written only after that.
  std::map<const SafetensorsFile*, std::vector<std::pair<std::string, Tensor>>> plans;
  for (Pending& p : pending) {
    p.value =
        empty(p.entry->shape, {.dtype = p.entry->dtype, .device = mine[p.slot].second.device()});
    plans[p.file].push_back({p.entry->name, p.value});
  }
  for (auto& [file, plan] : plans) file->load_into(plan, /*verify=*/false, /*fresh=*/true);
  for (Pending& p : pending) {
    const Tensor& dst = mine[p.slot].second;
    Tensor t = std::move(p.value);
    if (options.transform) {
      t = options.transform(p.name, t);
      EMBER_CHECK(t.defined(), "load_state: ", ckpt.path,
                  ": transform returned an undefined tensor for '", p.name,
                  "' (expected the tensor to load)");
    }
    const bool dtype_ok =
        t.dtype() == dst.dtype() || (is_floating(t.dtype()) && is_floating(dst.dtype()));
    if (t.shape() != dst.shape() || !dtype_ok) {
      report.mismatched.push_back(p.name + ": expected " + describe(dst.shape(), dst.dtype()) +
                                  ", got " + describe(t.shape(), t.dtype()) + p.renamed);
      continue;
    }
    if (t.device() != dst.device()) t = t.to(dst.device());  // a transform may move it
    incoming.push_back({p.slot, t.dtype() == dst.dtype() ? t : t.to(dst.dtype())});
    report.applied.push_back(p.name);
  }
  // Missing: names none of whose tensor's names the file has (Note [Foreign loads check
  // everything first]); a name whose tensor came mismatched is not missing.
  std::vector<Tensor> named;
  for (auto& [name, file_name] : source_of)
    if (auto slot = slot_of.find(name); slot != slot_of.end())
      named.push_back(mine[slot->second].second);
  for (auto& [name, t] : mine)
    if (std::none_of(named.begin(), named.end(), [&](const Tensor& n) { return n.is_same(t); }))
      report.missing.push_back(name);
  if (options.strict && !report.ok()) {
    std::ostringstream m;
    m << "the checkpoint does not match the module (strict; nothing was loaded)";
    auto list = [&](const char* what, const std::vector<std::string>& names) {
      if (names.empty()) return;
      m << "; " << what << " (" << names.size() << "):";
      for (size_t i = 0; i < names.size(); ++i) m << (i ? ", " : " ") << names[i];
    };
    list("missing", report.missing);
    list("unexpected", unexpected_text);
    list("mismatched", report.mismatched);
    fail("load_state", ckpt.path, m.str());
  }
  // In state_dict order, so of a tied tensor's names in the file the last one wins (PyTorch).
  std::stable_sort(incoming.begin(), incoming.end(),
                   [](const Incoming& a, const Incoming& b) { return a.slot < b.slot; });
  for (const Incoming& in : incoming) Tensor(mine[in.slot].second).assign_(in.value);
  return report;
}

// ---------------------------------------------------------------- saving

namespace {

// Where save_state writes: the folder, and NAME (the file's name without .safetensors).
struct Target {
  fs::path folder;
  std::string stem;
  std::string file(const std::string& name) const { return (folder / name).string(); }
  std::string single() const { return stem + kSuffix; }
  std::string index() const { return stem + kIndexSuffix; }
  std::string shard(size_t i, size_t n) const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "-%05zu-of-%05zu", i + 1, n);
    return stem + buf + kSuffix;
  }
};

Target target_of(const std::string& path) {
  if (ends_with(path, kSuffix)) {
    const fs::path p(path);
    const std::string name = p.filename().string();
    EMBER_CHECK(name.size() > std::string(kSuffix).size(), "save_state: '", path,
                "' has no file name before .safetensors (expected a folder or NAME.safetensors)");
    return {p.has_parent_path() ? p.parent_path() : fs::path("."),
            name.substr(0, name.size() - std::string(kSuffix).size())};
  }
  std::error_code ec;
  fs::create_directories(path, ec);
  EMBER_CHECK(fs::is_directory(path), "save_state: cannot create the folder '", path, "' (",
              ec ? ec.message() : "a file of that name exists",
              "; expected a folder or a "
              "NAME.safetensors file path)");
  return {fs::path(path), "model"};
}

// Removes NAME's checkpoint files in the folder that this save did not write.
void remove_other_layout(const Target& target, const std::set<std::string>& written) {
  const std::regex shard_name(
      std::regex_replace(target.stem, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
      R"(-\d{5}-of-\d{5}\.safetensors)");
  std::error_code ec;
  for (fs::directory_iterator it(target.folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool ours =
        name == target.single() || name == target.index() || std::regex_match(name, shard_name);
    std::error_code ignored;
    if (ours && !written.count(name)) fs::remove(it->path(), ignored);
  }
}

}  // namespace

void save_state(const nn::Module& model, const std::string& path, const SaveStateOptions& options) {
  EMBER_CHECK(model.defined(),
              "save_state: the model is an empty module handle (expected a "
              "module to save to ",
              path, ")");
  if (options.dtype)
    EMBER_CHECK(is_floating(*options.dtype), "save_state: dtype ", dtype_name(*options.dtype),
                " (expected f32, f64, f16 or bf16)");
  for (auto& [k, v] : options.metadata)
    EMBER_CHECK(k != "format" && k.rfind("ember.", 0) != 0, "save_state: metadata key '", k,
                "' is reserved (keys starting with 'ember.' and 'format' belong to ember)");

  // Each tensor once (a tied one under its first name), renamed, transformed, converted.
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> model_name_of;  // file name → module name
  std::vector<const Tensor*> seen;
  const nn::StateDict sd = model->state_dict();
  NoGradGuard no_grad;
  for (const auto& [name, t] : sd) {
    if (std::any_of(seen.begin(), seen.end(), [&](const Tensor* s) { return s->is_same(t); }))
      continue;
    seen.push_back(&t);
    const std::string file_name = options.rename ? options.rename(name) : name;
    if (file_name.empty()) continue;
    if (auto [it, fresh] = model_name_of.emplace(file_name, name); !fresh)
      detail::throw_error(detail::concat("save_state: rename maps both '", it->second, "' and '",
                                         name, "' to '", file_name,
                                         "' (expected one file name per tensor); nothing was "
                                         "written to ",
                                         path));
    Tensor v = options.transform ? options.transform(name, t) : t;
    EMBER_CHECK(v.defined(), "save_state: transform returned an undefined tensor for '", name,
                "' (expected the tensor to store); nothing was written to ", path);
    if (options.dtype && is_floating(v.dtype()) && v.dtype() != *options.dtype)
      v = v.to(*options.dtype);
    tensors.emplace_back(file_name, v);
  }

  std::map<std::string, std::string> metadata = options.metadata;
  metadata["format"] = "pt";
  const Target target = target_of(path);
  auto bytes_of = [](const Tensor& t) {
    return static_cast<uint64_t>(t.numel()) * element_size(t.dtype());
  };
  uint64_t total = 0, parameters = 0;
  for (auto& [n, t] : tensors) {
    total += bytes_of(t);
    parameters += static_cast<uint64_t>(t.numel());
  }
  if (options.max_shard_bytes == 0 || total <= options.max_shard_bytes) {
    write_safetensors(target.file(target.single()), tensors, metadata);
    remove_other_layout(target, {target.single()});
    return;
  }
  // Shards filled in state_dict order, a new one when the next tensor would not fit (as
  // transformers' split_torch_state_dict_into_shards).
  std::vector<std::vector<std::pair<std::string, Tensor>>> shards(1);
  uint64_t in_shard = 0;
  for (auto& item : tensors) {
    const uint64_t b = bytes_of(item.second);
    if (in_shard > 0 && in_shard + b > options.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(item);
    in_shard += b;
  }
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  std::set<std::string> written;
  std::vector<std::pair<std::string, std::string>> entries;  // name → shard, sorted below
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = target.shard(i, shards.size());
    write_safetensors(target.file(name), shards[i], metadata);
    written.insert(name);
    for (auto& [n, t] : shards[i]) entries.emplace_back(n, name);
  }
  std::sort(entries.begin(), entries.end());
  for (auto& [n, shard] : entries) weight_map[n] = shard;
  nlohmann::ordered_json index = {
      {"metadata", {{"total_parameters", parameters}, {"total_size", total}}},
      {"weight_map", weight_map}};
  write_file_atomically(target.file(target.index()), index.dump(2) + "\n");
  written.insert(target.index());
  remove_other_layout(target, written);
}

}  // namespace ember::io
