// src/io/checkpoint.cpp — save_model / load_model / load_state / checkpoints / inspect on
// top of the safetensors layer. Metadata keys are listed in ARCHITECTURE §7.
#include "ember/io/checkpoint.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <exception>
#include <iomanip>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "backend/device_runtime.hpp"
#include "core/alloc_trace.hpp"
#include "core/make.hpp"
#include "ember/autograd.hpp"
#include "ember/nn/init.hpp"
#include "ember/optim/grad_scaler.hpp"
#include "ember/random.hpp"
#include "io/parallel_io.hpp"
#include "io/write_order.hpp"

namespace ember::io {

namespace {

using json = nn::json;
constexpr const char* kVersion = "0.1.0";
constexpr const char* kOptimPrefix = "optim.";

void settle_async_write();  // Note [Asynchronous checkpoints]

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  detail::throw_error(detail::concat("checkpoint: ", path, ": ", what));
}

// The model's tensors for saving: tied tensors (one TensorImpl under two names) once.
struct ModelTensors {
  std::vector<std::pair<std::string, Tensor>> tensors;
  json tied = json::object();  // alias name -> stored name
  json buffers = json::array();
  json dtypes = json::object();  // name -> original dtype when stored converted
};

ModelTensors collect(const nn::Module& model, std::optional<DType> storage) {
  ModelTensors out;
  std::map<const TensorImpl*, std::string> seen;
  for (auto& [name, t] : model->named_buffers()) out.buffers.push_back(name);
  NoGradGuard g;
  for (auto& [name, t] : model->state_dict()) {
    auto it = seen.find(detail::TensorAccess::impl(t));
    if (it != seen.end()) {
      out.tied[name] = it->second;
      continue;
    }
    seen.emplace(detail::TensorAccess::impl(t), name);
    Tensor v = t;
    if (storage && is_floating(t.dtype()) && t.dtype() != *storage) {
      out.dtypes[name] = std::string(dtype_name(t.dtype()));
      v = t.to(*storage);
    }
    out.tensors.emplace_back(name, v);
  }
  return out;
}

std::map<std::string, std::string> base_metadata(const nn::Module& model, const ModelTensors& mt,
                                                 const char* kind) {
  std::map<std::string, std::string> m;
  m["ember.kind"] = kind;
  // Note [Chunked checksum] (src/io/parallel_io.hpp); 1 only when asked for.
  m["ember.format_version"] = std::to_string(io::parallel::write_format_version());
  m["ember.architecture"] = model->config().dump();
  m["ember.buffers"] = mt.buffers.dump();
  m["ember.version"] = kVersion;
  m["ember.created"] = now_iso8601();
  if (!mt.tied.empty()) m["ember.tied"] = mt.tied.dump();
  if (!mt.dtypes.empty()) m["ember.dtypes"] = mt.dtypes.dump();
  return m;
}

json metadata_json(const SafetensorsFile& f, const std::string& key, json fallback) {
  auto it = f.metadata().find(key);
  if (it == f.metadata().end()) return fallback;
  try {
    return json::parse(it->second);
  } catch (const json::exception& e) {
    fail(f.path(), "metadata '" + key + "' is not valid JSON (" + e.what() + ")");
  }
}

// A metadata value that must be a JSON object whose values are all strings (ember.tied,
// ember.dtypes); an empty object when absent.
json metadata_string_map(const SafetensorsFile& f, const std::string& key) {
  const json j = metadata_json(f, key, json::object());
  bool ok = j.is_object();
  for (auto it = j.begin(); ok && it != j.end(); ++it) ok = it.value().is_string();
  if (!ok)
    fail(f.path(), "metadata '" + key + "' is not a JSON object of names to strings (got " +
                       j.dump().substr(0, 60) + ")");
  return j;
}

// A metadata value that must be a JSON object (checkpoint state); null when absent.
json metadata_object(const SafetensorsFile& f, const std::string& key) {
  const json j = metadata_json(f, key, json());
  if (f.metadata().count(key) && !j.is_object())
    fail(f.path(),
         "metadata '" + key + "' is not a JSON object (got " + j.dump().substr(0, 60) + ")");
  return j;
}

// Runs `fn`, turning any error it raises (from the registry, the optimizer, the scheduler, the
// loader, a JSON accessor or an allocation) into an ember::Error that names the file.
template <typename Fn>
auto with_file_context(const std::string& path, const std::string& what, Fn&& fn)
    -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    fail(path, what + ": " + e.what());
  }
}

// A decimal integer that fills the whole string (std::sto* accept "12abc" and throw
// std::invalid_argument/out_of_range, not ember::Error).
template <typename Int>
Int parse_integer(const std::string& path, const std::string& key, const std::string& text) {
  Int v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    fail(path, "metadata '" + key + "' is not an integer (got \"" + text.substr(0, 40) + "\")");
  return v;
}

// ember.dataloader: the loader's position and the options that fix its batches
// (Note [DataLoader state] in ember/data/dataloader.hpp). The seed is a decimal string, as
// in ember.rng, so 64-bit values survive JSON readers that hold numbers as doubles.
json dataloader_json(const data::DataLoaderState& s) {
  return {{"epoch", s.epoch},
          {"position", s.position},
          {"size", s.size},
          {"batch_size", s.batch_size},
          {"shuffle", s.shuffle},
          {"drop_last", s.drop_last},
          {"seed", std::to_string(s.seed)}};
}

// The full state from ember.dataloader (epoch and position already checked); unset for a
// file written before the options were recorded, which holds only epoch and position.
std::optional<data::DataLoaderState> dataloader_state(const std::string& path, const json& dl) {
  const char* option_keys[] = {"size", "batch_size", "shuffle", "drop_last", "seed"};
  size_t present = 0;
  for (const char* k : option_keys) present += dl.contains(k) ? 1 : 0;
  if (present == 0) return std::nullopt;
  const bool ok = present == std::size(option_keys) && dl["size"].is_number_integer() &&
                  dl["batch_size"].is_number_integer() && dl["shuffle"].is_boolean() &&
                  dl["drop_last"].is_boolean() && dl["seed"].is_string();
  if (!ok)
    fail(path,
         "metadata 'ember.dataloader' needs integer size and batch_size, boolean shuffle and "
         "drop_last and a string seed next to epoch and position (got " +
             dl.dump().substr(0, 120) + ")");
  return data::DataLoaderState{
      .epoch = dl["epoch"].get<int64_t>(),
      .position = dl["position"].get<int64_t>(),
      .size = dl["size"].get<int64_t>(),
      .batch_size = dl["batch_size"].get<int64_t>(),
      .shuffle = dl["shuffle"].get<bool>(),
      .drop_last = dl["drop_last"].get<bool>(),
      .seed = parse_integer<uint64_t>(path, "ember.dataloader", dl["seed"].get<std::string>())};
}

// How apply_state reads a file into a model.
struct ApplyOptions {
  bool strict = true;       // every missing, unexpected or mismatched tensor in one error
  bool skip_optim = true;   // leave the optimizer's tensors (ember.optim.*) out of the match
  bool check_only = false;  // everything but the copies (load_checkpoint checks the model
                            // before it touches the optimizer)
  bool verify = false;      // the checksum checked while reading, before anything changes
                            // (SafetensorsFile::load_into)
  bool fresh = false;       // the model is new (load_model): read into directly while hashing
};

// Copies the file's model tensors into `model` (names as state_dict; tied aliases resolved;
// dtypes converted back when the file recorded the original), as `o` says.
nn::LoadReport apply_state(const SafetensorsFile& f, const nn::Module& model,
                           const ApplyOptions& o) {
  const bool strict = o.strict, skip_optim = o.skip_optim;
  const json tied = metadata_string_map(f, "ember.tied");
  const json dtypes = metadata_string_map(f, "ember.dtypes");
  nn::LoadReport report;
  std::set<std::string> file_names;
  for (const TensorEntry& e : f.entries())
    if (!(skip_optim && e.name.rfind(kOptimPrefix, 0) == 0)) file_names.insert(e.name);
  std::vector<std::pair<Tensor, std::string>> plan;  // destination, stored name
  for (auto& [name, t] : model->state_dict()) {
    std::string stored = name;
    if (!f.contains(name) && tied.contains(name)) stored = tied[name].get<std::string>();
    const TensorEntry* e = f.find(stored);
    if (!e) {
      report.missing.push_back(name);
      continue;
    }
    file_names.erase(stored);
    const bool dtype_ok =
        e->dtype == t.dtype() ||
        (dtypes.contains(stored) && dtypes[stored].get<std::string>() == dtype_name(t.dtype()));
    if (e->shape != t.shape() || !dtype_ok) {
      std::ostringstream m;
      m << name << ": expected " << t.shape().to_string() << " " << dtype_name(t.dtype())
        << ", got " << e->shape.to_string() << " " << safetensors_dtype_name(e->dtype);
      report.mismatched.push_back(m.str());
      continue;
    }
    plan.emplace_back(t, stored);
    report.applied.push_back(name);
  }
  for (const std::string& n : file_names) report.unexpected.push_back(n);
  if (strict && !report.ok()) {
    std::ostringstream m;
    m << "the file does not match the model (strict)";
    auto list = [&](const char* what, const std::vector<std::string>& names) {
      if (names.empty()) return;
      m << "; " << what << " (" << names.size() << "):";
      for (size_t i = 0; i < names.size(); ++i) m << (i ? ", " : " ") << names[i];
    };
    list("missing", report.missing);
    list("unexpected", report.unexpected);
    list("mismatched", report.mismatched);
    fail(f.path(), m.str());
  }
  if (o.check_only) return report;
  std::vector<std::pair<std::string, Tensor>> items;
  for (auto& [dst, stored] : plan) items.emplace_back(stored, dst);
  f.load_into(items, o.verify, o.fresh);
  return report;
}

// Note [An architecture asking for more than its file holds]
// load_model builds the module its file's ember.architecture describes, and only then reads the
// tensors into it; a corrupt or hostile architecture (Linear(100000, 100000) over a file of a
// few kilobytes) would have the build allocate 40 GB on the device before the tensors' checks
// could say that no such weights exist. So the build runs under a budget (a per-thread
// allocation observer, core/alloc_trace.hpp, asked before each storage's allocation): the
// file's tensors as they would be loaded (at 4 bytes an element at least, so a file stored in
// f16 builds its f32 model), twice, plus kBuildSlack for buffers a file does not store (a
// causal mask). A request that would take the build past it, or one tensor larger than the
// file's tensors plus the slack, is refused before the allocator sees it; the error names the
// file, the innermost module path whose build alone breaks the budget (found by building the
// architecture's children again under the same budget: each attempt is refused as early), the
// bytes that build asked for and the bytes the file holds. The same goes for a builder passed
// to load_model. Every registered type is covered, since the budget sees allocations, not types.
constexpr uint64_t kBuildSlack = uint64_t{64} << 20;  // 64 MiB

class BuildBudget final : public core::AllocationObserver {
 public:
  explicit BuildBudget(uint64_t present) : present_(present), limit_(2 * present + kBuildSlack) {}
  void allocating(size_t bytes) override {
    asked_ += bytes;
    if (bytes > present_ + kBuildSlack || asked_ > limit_) {
      refused_ = true;
      detail::throw_error(detail::concat("the build asks for ", asked_, " bytes"));
    }
  }
  void allocated(const Storage*, size_t) override {}
  void freed(const Storage*) override {}
  bool refused() const { return refused_; }
  uint64_t asked() const { return asked_; }

 private:
  uint64_t present_, limit_, asked_ = 0;
  bool refused_ = false;
};

// Builds `config` under a budget of `present` bytes; true when the budget refused it (then
// *asked holds the bytes it asked for).
bool build_breaks_budget(const json& config, const std::function<nn::Module(const json&)>& builder,
                         uint64_t present, uint64_t* asked) {
  BuildBudget budget(present);
  core::AllocationObserver* previous = core::set_allocation_observer(&budget);
  try {
    nn::init::SkipInitGuard skip(Device::cpu());
    (void)(builder ? builder(config) : nn::build(config));
  } catch (...) {
  }
  core::set_allocation_observer(previous);
  *asked = budget.asked();
  return budget.refused();
}

// The innermost module path under `config` (at `where`) whose build alone breaks the budget.
std::string over_budget_path(const json& config, const std::string& where, uint64_t present,
                             uint64_t* asked) {
  if (!config.is_object() || !config.contains("children")) return where;
  const json& children = config["children"];
  auto visit = [&](const json& child, const std::string& name) -> std::optional<std::string> {
    uint64_t child_asked = 0;
    if (!build_breaks_budget(child, nullptr, present, &child_asked)) return std::nullopt;
    *asked = child_asked;
    return over_budget_path(child, where.empty() ? name : where + "." + name, present, asked);
  };
  if (children.is_array()) {
    for (size_t i = 0; i < children.size(); ++i)
      if (auto found = visit(children[i], std::to_string(i))) return *found;
  } else if (children.is_object()) {
    for (auto it = children.begin(); it != children.end(); ++it)
      if (auto found = visit(it.value(), it.key())) return *found;
  }
  return where;
}

// The bytes the file's tensors take once loaded (at least 4 per element: an f16 file builds f32).
uint64_t loaded_bytes(const SafetensorsFile& f) {
  uint64_t bytes = 0;
  for (const TensorEntry& e : f.entries())
    bytes += static_cast<uint64_t>(e.shape.numel()) *
             std::max<uint64_t>(4, static_cast<uint64_t>(element_size(e.dtype)));
  return bytes;
}

nn::Module build_from(const SafetensorsFile& f,
                      const std::function<nn::Module(const json&)>& builder, Device device) {
  auto it = f.metadata().find("ember.architecture");
  if (it == f.metadata().end())
    fail(f.path(),
         "no ember.architecture in the file (written by another tool?): build the module yourself "
         "and use load_state(), or pass a builder to load_model()");
  const json arch = metadata_json(f, "ember.architecture", json());
  if (!arch.is_object())
    fail(f.path(), "ember.architecture is not a module config object (got " +
                       arch.dump().substr(0, 60) + ")");
  // Note [No initialisation on load]
  // Every parameter's value comes from the file (apply_state is strict: a name the file
  // lacks is an error and the module is dropped), so the module is built under
  // nn::init::SkipInitGuard: its random initialisers allocate uninitialised tensors, on the
  // target device, instead of drawing values on the CPU that would be moved and then
  // overwritten (that work made load_model 0.49x torch::load on 2 cores). The RNG state is
  // restored anyway, for a builder that draws numbers itself.
  const RngState rng = get_rng_state();
  const uint64_t present = loaded_bytes(f);
  nn::Module model;
  BuildBudget budget(present);  // Note [An architecture asking for more than its file holds]
  core::AllocationObserver* previous = core::set_allocation_observer(&budget);
  try {
    nn::init::SkipInitGuard skip(device);
    model = with_file_context(f.path(), "cannot rebuild the module from ember.architecture",
                              [&] { return builder ? builder(arch) : nn::build(arch); });
  } catch (...) {
    core::set_allocation_observer(previous);
    if (budget.refused()) {
      uint64_t asked = budget.asked();
      const std::string where = over_budget_path(arch, "", present, &asked);
      set_rng_state(rng);
      fail(f.path(),
           detail::concat("ember.architecture asks for far more memory than the file's tensors "
                          "hold: building ",
                          where.empty() ? std::string("the model") : "module '" + where + "'",
                          " asked for ", asked, " bytes, but the file's tensors take ", present,
                          " bytes loaded (at most twice that plus ", kBuildSlack,
                          " bytes is allowed); refused before allocating — the architecture is "
                          "corrupt or does not belong to these weights"));
    }
    set_rng_state(rng);
    throw;
  }
  core::set_allocation_observer(previous);
  set_rng_state(rng);
  if (!model.defined()) fail(f.path(), "load_model: the builder returned an undefined module");
  model->to(device);
  return model;
}

// The first module type in `config` (what load_model hands to nn::build) that the registry
// does not know, with where it sits ("" for the root, else the dotted child path).
std::optional<std::pair<std::string, std::string>> unregistered_type(const json& config,
                                                                     const std::string& where) {
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
    return std::nullopt;
  const std::string type = config["type"].get<std::string>();
  if (!nn::module_type_registered(type)) return std::make_pair(type, where);
  if (!config.contains("children")) return std::nullopt;
  const json& children = config["children"];
  auto child_path = [&](const std::string& name) {
    return where.empty() ? name : where + "." + name;
  };
  if (children.is_array()) {
    for (size_t i = 0; i < children.size(); ++i)
      if (auto found = unregistered_type(children[i], child_path(std::to_string(i)))) return found;
  } else if (children.is_object()) {
    for (auto it = children.begin(); it != children.end(); ++it)
      if (auto found = unregistered_type(it.value(), child_path(it.key()))) return found;
  }
  return std::nullopt;
}

}  // namespace

void save_model(const nn::Module& model, const std::string& path, const SaveOptions& options) {
  EMBER_CHECK(model.defined(), "save_model: the model is undefined");
  if (options.storage_dtype)
    EMBER_CHECK(is_floating(*options.storage_dtype), "save_model: storage dtype ",
                dtype_name(*options.storage_dtype), " (expected f32, f64, f16 or bf16)");
  if (!options.allow_unregistered) {
    if (auto found = unregistered_type(model->config(), "")) {
      const auto& [type, where] = *found;
      detail::throw_error(
          detail::concat("save_model: module type '", type, "' (",
                         where.empty() ? std::string("the model itself") : "at '" + where + "'",
                         ") is not registered, so load_model could never rebuild it (expected a "
                         "type nn::build knows); register it once at startup with "
                         "nn::register_module_type(\"",
                         type,
                         "\", factory), or set "
                         "SaveOptions::allow_unregistered to save anyway and load with load_state "
                         "or load_model(path, builder); nothing was written to ",
                         path));
    }
  }
  ModelTensors mt = collect(model, options.storage_dtype);
  auto meta = base_metadata(model, mt, "model");
  for (auto& [k, v] : options.metadata) {
    EMBER_CHECK(k != "format" && k.rfind("ember.", 0) != 0, "save_model: metadata key '", k,
                "' is reserved (keys starting with 'ember.' and 'format' belong to ember)");
    meta[k] = v;
  }
  write_safetensors(path, mt.tensors, meta);
}

nn::Module load_model(const std::string& path, Device device) {
  return load_model(path, nullptr, device);
}

nn::Module load_model(const std::string& path,
                      const std::function<nn::Module(const json&)>& builder, Device device) {
  settle_async_write();
  SafetensorsFile f(path);
  // Verified while the file is read straight into the module built without initialisation
  // (one pass, on the CPU and onto a GPU); the module is dropped if the file is corrupt.
  nn::Module model = build_from(f, builder, device);
  apply_state(f, model, {.verify = true, .fresh = true});
  model->eval();
  return model;
}

nn::LoadReport load_state(const nn::Module& model, const std::string& path, bool strict) {
  EMBER_CHECK(model.defined(), "load_state: the model is undefined");
  settle_async_write();
  SafetensorsFile f(path);
  return apply_state(
      f, model,
      {.strict = strict, .skip_optim = f.metadata().count("ember.optimizer") != 0, .verify = true});
}

namespace {

// What save_checkpoint writes: the tensors (with `copy`, copies the caller may not change
// afterwards: save_checkpoint_async) and the metadata. `devices`: the GPUs whose copies into
// the pinned snapshot must finish before the tensors are read (Note [Asynchronous checkpoints]).
struct CheckpointSnapshot {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> meta;
  std::vector<int> devices;
  backend::PinnedStaging* staging = nullptr;  // the pinned arena the GPU tensors went into
};

// Pinned host memory the GPU tensors of an asynchronous checkpoint are copied into, kept and
// grown as needed. One snapshot lives at a time (save_checkpoint_async waits for the last
// write before taking the next), so reusing it is safe.
backend::PinnedStaging& pinned_arena(size_t bytes) {
  static auto* arena =
      new backend::PinnedStaging();  // intentionally leaked: the runtime may go first
  if (arena->size() < bytes) {
    *arena = backend::PinnedStaging();  // the old buffer first: both need not fit at once
    *arena = backend::PinnedStaging(DeviceType::cuda, bytes);
  }
  return *arena;
}

size_t aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

// GPU tensors copied into the pinned arena by device-to-host copies queued on their streams
// (ordered before every later kernel, so training may go on at once); CPU tensors cloned.
void copy_for_later(CheckpointSnapshot& snap,
                    const std::vector<std::pair<std::string, Tensor>>& tensors) {
  size_t total = 0;
  std::vector<Tensor> gpu(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].second;
    if (!t.device().is_cuda()) continue;
    gpu[i] = t.contiguous();
    total += aligned(static_cast<size_t>(gpu[i].numel()) * element_size(t.dtype()));
  }
  backend::PinnedStaging* arena = total ? &pinned_arena(total) : nullptr;
  snap.staging = arena;
  size_t at = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    if (!gpu[i].defined()) {
      snap.tensors.emplace_back(name, t.clone());
      continue;
    }
    const size_t bytes = static_cast<size_t>(gpu[i].numel()) * element_size(t.dtype());
    arena->copy_from_device(t.device().index, gpu[i].data_ptr(), at, bytes);
    char* host = static_cast<char*>(arena->data()) + at;
    snap.tensors.emplace_back(
        name, core::wrap_storage(std::shared_ptr<Storage>(Storage::wrap_external(host, bytes)),
                                 t.shape(), t.dtype()));
    if (std::find(snap.devices.begin(), snap.devices.end(), t.device().index) == snap.devices.end())
      snap.devices.push_back(t.device().index);
    at += aligned(bytes);
  }
}

CheckpointSnapshot snapshot(const nn::Module& model, const optim::Optimizer& optimizer,
                            const optim::LRScheduler* scheduler, int64_t step, const json& extra,
                            const data::DataLoader* loader, const optim::GradScaler* scaler,
                            bool copy, const char* who) {
  EMBER_CHECK(model.defined(), who, ": the model is undefined");
  ModelTensors mt = collect(model, std::nullopt);
  CheckpointSnapshot snap;
  snap.meta = base_metadata(model, mt, "checkpoint");
  optim::OptimizerState os = optimizer.state_dict();
  for (auto& [name, t] : os.tensors) mt.tensors.emplace_back(kOptimPrefix + name, t);
  snap.meta["ember.optimizer"] = os.meta.dump();
  if (scheduler) snap.meta["ember.scheduler"] = scheduler->state_dict().dump();
  if (scaler) snap.meta["ember.grad_scaler"] = scaler->state_dict().dump();
  const RngState rng = get_rng_state();
  snap.meta["ember.rng"] =
      json{{"seed", std::to_string(rng.seed)}, {"offset", std::to_string(rng.offset)}}.dump();
  snap.meta["ember.step"] = std::to_string(step);
  snap.meta["ember.extra"] = extra.dump();
  if (loader) snap.meta["ember.dataloader"] = dataloader_json(loader->state()).dump();
  NoGradGuard no_grad;
  if (copy)
    copy_for_later(snap, mt.tensors);
  else
    snap.tensors = mt.tensors;
  return snap;
}

// Note [Asynchronous checkpoints]
// save_checkpoint_async takes the snapshot on the caller's thread — every parameter, buffer
// and optimizer tensor on a GPU copied into pinned host memory by a device-to-host copy queued
// on its stream (ordered before the training kernels that follow, so they cannot change what
// is copied; the caller does not wait), CPU tensors cloned, and the metadata — then writes it
// on a background thread, which waits for those copies once and goes through
// write_safetensors (the chunked hashing and writing, fsync, rename). Training continues
// meanwhile. (A first version cloned on the device and copied out on the background thread,
// through the staged copies whose every piece waited behind the training queued meanwhile:
// each write took ~0.5 s and training, checkpointing every 50 steps of 10 ms, waited for it:
// +45% step time on the H200.) The pinned snapshot is kept for the next checkpoint: one copy
// of the state in pinned host memory. One write is in flight at a time in the process: a second
// call waits for the first (and rethrows its error). A crash at any moment leaves the old file or
// the new one (write_safetensors' guarantee). The write takes its place among the writes to its
// path at the call (Note [Writes land in issue order]): a later save of the same path, from
// any thread, waits for it rather than be replaced by it.
class AsyncWriter {
 public:
  static AsyncWriter& get() {
    static AsyncWriter w;  // joined at exit (a write still running is finished first)
    return w;
  }
  ~AsyncWriter() {
    try {
      wait();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ember: the last asynchronous checkpoint failed: %s\n", e.what());
    }
  }
  void start(std::string path, std::unique_ptr<write_order::Turn> turn, CheckpointSnapshot snap) {
    std::lock_guard<std::mutex> serial(start_mutex_);
    wait();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = true;  // before the thread exists, which clears it when done
    }
    thread_ = std::thread(
        [this, path = std::move(path), turn = std::move(turn), snap = std::move(snap)]() mutable {
          try {
            for (int d : snap.devices)  // the snapshot's copies out of device memory
              snap.staging->wait(d);
            write_order::write_safetensors_in_turn(*turn, path, snap.tensors, snap.meta);
          } catch (...) {
            std::lock_guard<std::mutex> lock(mutex_);
            error_ = std::current_exception();
          }
          turn.reset();  // the next write to the path may go
          snap = {};     // the clones go back to their pools here, not when the next save starts
          std::lock_guard<std::mutex> lock(mutex_);
          running_ = false;
        });
  }
  // Waits for the write in flight; its error stays for the next wait().
  void join() {
    std::lock_guard<std::mutex> serial(start_mutex_);
    if (thread_.joinable()) thread_.join();
  }
  void wait() {
    if (thread_.joinable()) thread_.join();
    std::exception_ptr e;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::swap(e, error_);
    }
    if (e) std::rethrow_exception(e);
  }
  bool running() {
    std::lock_guard<std::mutex> lock(mutex_);
    return running_;
  }

 private:
  std::mutex start_mutex_, mutex_;
  std::thread thread_;
  std::exception_ptr error_;
  bool running_ = false;
};

}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer& optimizer, const optim::LRScheduler* scheduler,
                     int64_t step, const json& extra, const data::DataLoader* loader,
                     const optim::GradScaler* scaler) {
  CheckpointSnapshot snap =
      snapshot(model, optimizer, scheduler, step, extra, loader, scaler, false, "save_checkpoint");
  write_safetensors(path, snap.tensors, snap.meta);
}

void save_checkpoint_async(const std::string& path, const nn::Module& model,
                           const optim::Optimizer& optimizer, const optim::LRScheduler* scheduler,
                           int64_t step, const json& extra, const data::DataLoader* loader,
                           const optim::GradScaler* scaler) {
  // Its place among the writes to `path` is taken now, at the call.
  auto turn = std::make_unique<write_order::Turn>(path);
  AsyncWriter& w = AsyncWriter::get();
  w.wait();  // the previous write first: its error belongs to the caller, before a new snapshot
  w.start(path, std::move(turn),
          snapshot(model, optimizer, scheduler, step, extra, loader, scaler, true,
                   "save_checkpoint_async"));
}

void wait_for_checkpoint() { AsyncWriter::get().wait(); }

namespace {
// A reader in this process sees the asynchronous checkpoint it started, never the file
// before it (a run that resumes right after fit() threw, for one).
void settle_async_write() { AsyncWriter::get().join(); }
}  // namespace

bool checkpoint_in_flight() { return AsyncWriter::get().running(); }

CheckpointInfo load_checkpoint(const std::string& path, const nn::Module& model,
                               optim::Optimizer& optimizer, optim::LRScheduler* scheduler,
                               data::DataLoader* loader, optim::GradScaler* scaler) {
  EMBER_CHECK(model.defined(), "load_checkpoint: the model is undefined");
  settle_async_write();
  SafetensorsFile f(path);
  auto kind = f.metadata().find("ember.kind");
  if (kind == f.metadata().end() || kind->second != "checkpoint")
    fail(path, "not an ember checkpoint (ember.kind is " +
                   (kind == f.metadata().end() ? std::string("absent") : "'" + kind->second + "'") +
                   "; model files load with load_model or load_state)");
  f.verify_checksum();
  // Parse and validate every piece before changing any object.
  optim::OptimizerState os;
  os.meta = metadata_object(f, "ember.optimizer");
  if (os.meta.is_null()) fail(path, "the checkpoint has no ember.optimizer state");
  for (const TensorEntry& e : f.entries())
    if (e.name.rfind(kOptimPrefix, 0) == 0)
      os.tensors.emplace_back(e.name.substr(6), f.read(e.name));
  const json sched = metadata_object(f, "ember.scheduler");
  if (scheduler && sched.is_null()) fail(path, "a scheduler was given but the checkpoint has none");
  const json scaler_state = metadata_object(f, "ember.grad_scaler");
  if (scaler && scaler_state.is_null())
    fail(path, "a GradScaler was given but the checkpoint has none");
  CheckpointInfo info;
  std::optional<RngState> rng;
  if (f.metadata().count("ember.rng")) {
    const json r = metadata_object(f, "ember.rng");
    if (!r.contains("seed") || !r.contains("offset") || !r["seed"].is_string() ||
        !r["offset"].is_string())
      fail(path, "metadata 'ember.rng' needs string fields seed and offset (got " +
                     r.dump().substr(0, 60) + ")");
    rng = RngState{parse_integer<uint64_t>(path, "ember.rng", r["seed"].get<std::string>()),
                   parse_integer<uint64_t>(path, "ember.rng", r["offset"].get<std::string>())};
  }
  auto step = f.metadata().find("ember.step");
  if (step != f.metadata().end())
    info.step = parse_integer<int64_t>(path, "ember.step", step->second);
  info.extra = metadata_json(f, "ember.extra", json::object());
  const json dl = metadata_object(f, "ember.dataloader");
  std::optional<data::DataLoaderState> loader_state;  // unset for files that hold only the position
  if (!dl.is_null()) {
    if (!dl.contains("epoch") || !dl.contains("position") || !dl["epoch"].is_number_integer() ||
        !dl["position"].is_number_integer())
      fail(path, "metadata 'ember.dataloader' needs integer fields epoch and position (got " +
                     dl.dump().substr(0, 60) + ")");
    info.loader_epoch = dl["epoch"].get<int64_t>();
    info.loader_position = dl["position"].get<int64_t>();
    if (info.loader_epoch < 0 || info.loader_position < 0 ||
        (loader && info.loader_position > loader->num_batches()))
      fail(path, detail::concat(
                     "metadata 'ember.dataloader' has epoch ", info.loader_epoch, " and position ",
                     info.loader_position, " (expected >= 0, position at most ",
                     loader ? loader->num_batches() : 0, ", the loader's batches per epoch)"));
    loader_state = dataloader_state(path, dl);
    if (loader && loader_state)
      with_file_context(path, "the DataLoader does not match the checkpoint",
                        [&] { loader->check_state(*loader_state); });
  }
  // The model's names, shapes and dtypes, and the scheduler's type, are checked first; the
  // optimizer validates its whole state and changes nothing on error.
  apply_state(f, model, {.check_only = true});
  if (scheduler && sched.contains("type") && sched["type"] != scheduler->type_name())
    fail(path, "the checkpoint's scheduler is " + sched["type"].dump() + ", not " +
                   scheduler->type_name());
  if (scaler)  // validated on a probe first: nothing changes when it does not fit
    with_file_context(path, "the GradScaler state does not fit", [&] {
      optim::GradScaler probe({.enabled = scaler->is_enabled()});
      probe.load_state_dict(scaler_state);
    });
  with_file_context(path, "the optimizer state does not fit",
                    [&] { optimizer.load_state_dict(os); });
  if (scaler) scaler->load_state_dict(scaler_state);
  if (scheduler)
    with_file_context(path, "the scheduler state does not fit",
                      [&] { scheduler->load_state_dict(sched); });
  apply_state(f, model, {});
  if (rng) set_rng_state(*rng);
  if (loader && loader_state)
    loader->load_state(*loader_state);
  else if (loader && !dl.is_null())
    loader->set_state(info.loader_epoch, info.loader_position);
  return info;
}

// ---- inspect ----

Inspection inspect(const std::string& path, bool verify_checksum) {
  SafetensorsFile f(path);
  Inspection r;
  if (!f.metadata().count("ember.data_checksum")) {
    r.checksum = "absent";
  } else if (verify_checksum) {
    f.verify_checksum();
    r.checksum = "verified";
  } else {
    r.checksum = "not checked";
  }
  r.path = path;
  r.metadata = f.metadata();
  r.file_bytes = f.file_size();
  auto get = [&](const char* k) {
    auto it = f.metadata().find(k);
    return it == f.metadata().end() ? std::string() : it->second;
  };
  r.kind = get("ember.kind");
  if (r.kind.empty()) r.kind = "safetensors (not written by ember)";
  r.format_version = get("ember.format_version");
  r.ember_version = get("ember.version");
  r.created = get("ember.created");
  r.architecture = metadata_json(f, "ember.architecture", json());
  const json buffers = metadata_json(f, "ember.buffers", json::array());
  std::set<std::string> buffer_names;
  bool names_ok = buffers.is_array();
  for (const json& b : buffers) names_ok = names_ok && b.is_string();
  if (!names_ok)
    fail(path, "metadata 'ember.buffers' is not a JSON list of names (got " +
                   buffers.dump().substr(0, 60) + ")");
  for (const json& b : buffers) buffer_names.insert(b.get<std::string>());
  for (const TensorEntry& e : f.entries()) {
    Inspection::Row row;
    row.name = e.name;
    row.dtype = safetensors_dtype_name(e.dtype);
    row.shape = e.shape;
    row.bytes = e.end - e.begin;
    row.role = e.name.rfind(kOptimPrefix, 0) == 0               ? "optimizer"
               : buffer_names.count(e.name)                     ? "buffer"
               : r.kind == "safetensors (not written by ember)" ? "tensor"
                                                                : "parameter";
    r.total_bytes += row.bytes;
    if (row.role == "parameter") r.parameter_count += static_cast<uint64_t>(e.shape.numel());
    r.tensors.push_back(row);
  }
  return r;
}

std::string Inspection::to_string() const {
  std::ostringstream o;
  o << path << "\n  kind: " << kind;
  if (!format_version.empty()) o << " (format version " << format_version << ")";
  o << "\n";
  if (!ember_version.empty())
    o << "  written by: ember " << ember_version << (created.empty() ? "" : " at " + created)
      << "\n";
  if (!checksum.empty()) o << "  data checksum: " << checksum << "\n";
  if (architecture.is_object() && architecture.contains("type") && architecture["type"].is_string())
    o << "  architecture: " << architecture["type"].get<std::string>() << " ("
      << architecture.dump().size() << " bytes of config JSON)\n";
  size_t w = 4;
  for (const Row& r : tensors) w = std::max(w, r.name.size());
  o << "\n  " << std::left << std::setw(static_cast<int>(w)) << "name"
    << "  " << std::setw(5) << "dtype"
    << "  " << std::setw(18) << "shape"
    << "  " << std::right << std::setw(12) << "bytes"
    << "  role\n";
  for (const Row& r : tensors)
    o << "  " << std::left << std::setw(static_cast<int>(w)) << r.name << "  " << std::setw(5)
      << r.dtype << "  " << std::setw(18) << r.shape.to_string() << "  " << std::right
      << std::setw(12) << r.bytes << "  " << r.role << "\n";
  o << "\n  " << tensors.size() << " tensors, " << total_bytes << " data bytes, " << parameter_count
    << " parameters, file " << file_bytes << " bytes\n";
  return o.str();
}

json Inspection::to_json() const {
  json t = json::array();
  for (const Row& r : tensors)
    t.push_back({{"name", r.name},
                 {"dtype", r.dtype},
                 {"shape", r.shape.vec()},
                 {"bytes", r.bytes},
                 {"role", r.role}});
  return {{"path", path},
          {"kind", kind},
          {"format_version", format_version},
          {"ember_version", ember_version},
          {"created", created},
          {"architecture", architecture},
          {"metadata", metadata},
          {"tensors", t},
          {"total_bytes", total_bytes},
          {"parameter_count", parameter_count},
          {"file_bytes", file_bytes},
          {"checksum", checksum}};
}

}  // namespace ember::io
