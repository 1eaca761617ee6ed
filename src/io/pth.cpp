// src/io/pth.cpp — load_pth and pth_catalogue: a torch.save archive's zip (pth_zip.cpp) and
// pickle (pth_pickle.cpp) made into named tensors: the saved object flattened to dotted names,
// each view checked inside its storage, each storage read once.
//
// Note [Names of a .pth file's tensors]
// torch.save pickles any object; a state dict is the common case, a dict holding one
// ({'model': sd, 'optimizer': osd, 'epoch': 3}) the next. ember flattens whatever dicts, lists
// and tuples it finds: a tensor is named by the path of keys and indices that reach it, joined
// with dots ("model.0.weight", "optimizer.state.0.exp_avg"), so a plain state dict keeps its
// own names and PthOptions::key picks one of a checkpoint's parts ("model") with its prefix
// taken off. Integer keys are written in decimal, booleans and None as Python spells them; a
// bare tensor saved alone is named "". The other leaves (numbers, strings, booleans, None) go
// to PthCatalogue::values under the same names. Two leaves with one name ({'a.b': t,
// 'a': {'b': u}}) are refused, as are objects nested deeper than 64 levels (a cycle through the
// memo is one) or shared so often that their paths exceed 16 million.
//
// Note [Reading shared storages once]
// Tensors are views (offset, sizes, strides in elements) of storages; a storage's bytes are
// its zip entry ARCHIVE/data/KEY, whose size must be the persistent id's element count times
// the element size. Views equal in storage, dtype, offset, sizes and strides become one
// ember Tensor (state_dict's tied weights stay tied). A storage with one view that is all of
// it, contiguous and not widened is read straight into the new tensor; any other storage is
// read once into a buffer and each view copied out of it, contiguous (a transposed weight, a
// narrowed or offset view, several tensors over one storage) until the copies of a storage
// reach four times its elements. A view that would pass that (a zero stride, as torch.expand
// makes; overlapping strides; thousands of views of one storage) is returned as a view of the
// storage instead, as torch returns it, so the memory a file can ask for is bounded by a few
// times its own size (a 4-byte storage viewed as [2^30, 2^30] costs 4 bytes).
#include "ember/io/pth.hpp"

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_set>

#include "core/make.hpp"
#include "ember/autograd.hpp"
#include "io/pth_format.hpp"

namespace ember::io {

namespace {

using pth::Object;
using pth::TensorRef;
using Kind = Object::Kind;

constexpr uint64_t kMaxPickleBytes = uint64_t{1} << 30;  // 1 GiB of data.pkl
constexpr int kMaxDepth = 64;
constexpr uint64_t kMaxPaths = uint64_t{1} << 24;

struct Leaf {
  std::string name;
  uint32_t tensor;  // index into Unpickled::tensors
};

// An open, unpickled, flattened and checked file (everything but the tensor data).
struct Opened {
  std::unique_ptr<pth::ZipArchive> zip;
  std::string archive;
  pth::Unpickled pickle;
  std::vector<Leaf> leaves;
  nn::json values = nn::json::object();
};

std::string key_text(const Object& k) {
  switch (k.kind) {
    case Kind::string: return k.s;
    case Kind::integer: return std::to_string(k.i);
    case Kind::boolean: return k.i ? "True" : "False";
    default: return "None";  // the interpreter takes no other key kinds
  }
}

class Flattener {
 public:
  Flattener(Opened& o, const std::string& path) : o_(o), path_(path) {}
  void visit(uint32_t index, const std::string& name, int depth) {
    if (++paths_ > kMaxPaths)
      pth::fail(path_, detail::concat("the saved object's containers are shared so often that it "
                                      "has over ",
                                      kMaxPaths, " paths to flatten"));
    if (depth > kMaxDepth)
      pth::fail(path_, detail::concat("the saved object nests deeper than ", kMaxDepth,
                                      " levels at '", name, "' (or a container holds itself)"));
    const Object& obj = o_.pickle.objects[index];
    auto child = [&](const std::string& part) { return name.empty() ? part : name + "." + part; };
    switch (obj.kind) {
      case Kind::tensor:
        claim(name);
        o_.leaves.push_back({name, static_cast<uint32_t>(obj.i)});
        return;
      case Kind::dict:
        for (size_t i = 0; i < obj.items.size(); i += 2) {
          const uint32_t key = o_.pickle.objects[index].items[i];
          const uint32_t value = o_.pickle.objects[index].items[i + 1];
          visit(value, child(key_text(o_.pickle.objects[key])), depth + 1);
        }
        return;
      case Kind::list:
      case Kind::tuple:
        for (size_t i = 0; i < obj.items.size(); ++i)
          visit(o_.pickle.objects[index].items[i], child(std::to_string(i)), depth + 1);
        return;
      case Kind::none: value(name, nullptr); return;
      case Kind::boolean: value(name, obj.i != 0); return;
      case Kind::integer: value(name, obj.i); return;
      case Kind::floating: value(name, obj.f); return;
      case Kind::string: value(name, obj.s); return;
      case Kind::global:
      case Kind::storage: return;  // a bare storage or a type: no tensor, no value
    }
  }

 private:
  Opened& o_;
  const std::string& path_;
  uint64_t paths_ = 0;
  std::unordered_set<std::string> names_;
  void claim(const std::string& name) {
    if (!names_.insert(name).second)
      pth::fail(path_, "two values flatten to the name '" + name +
                           "' (a key with a dot beside a nested dict of the same path)");
  }
  void value(const std::string& name, nn::json v) {
    claim(name);
    o_.values[name] = std::move(v);
  }
};

int64_t numel_of(const std::vector<int64_t>& size) {
  int64_t n = 1;
  for (int64_t s : size) n *= s;  // checked against overflow by check_view first
  return n;
}

bool contiguous(const TensorRef& t) {
  int64_t expected = 1;
  for (size_t i = t.size.size(); i-- > 0;) {
    if (t.size[i] != 1 && t.stride[i] != expected) return false;
    expected *= t.size[i];
  }
  return true;
}

// Note [Reading shared storages once]: the view must lie inside its storage.
void check_view(const Opened& o, const std::string& path, const Leaf& leaf) {
  const TensorRef& t = o.pickle.tensors[leaf.tensor];
  const pth::StorageRef& s = o.pickle.storages[t.storage];
  const std::string what = "tensor '" + leaf.name + "'";
  if (t.size.size() > static_cast<size_t>(kMaxRank))
    pth::fail(path, detail::concat(what, " has rank ", t.size.size(), " (ember takes at most ",
                                   kMaxRank, ")"));
  if (t.size.size() != t.stride.size())
    pth::fail(path, detail::concat(what, " has ", t.size.size(), " sizes but ", t.stride.size(),
                                   " strides"));
  if (t.offset < 0) pth::fail(path, detail::concat(what, " has storage offset ", t.offset));
  int64_t numel = 1, last = t.offset;
  for (size_t i = 0; i < t.size.size(); ++i) {
    if (t.size[i] < 0 || t.stride[i] < 0)
      pth::fail(path, detail::concat(what, " has a negative size or stride (size ",
                                     Shape(t.size).to_string(), ", stride ",
                                     Shape(t.stride).to_string(), ")"));
    if (__builtin_mul_overflow(numel, t.size[i], &numel))
      pth::fail(path, what + "'s element count overflows");
  }
  for (size_t i = 0; i < t.size.size() && numel > 0; ++i) {
    int64_t reach = 0;
    if (__builtin_mul_overflow(t.size[i] - 1, t.stride[i], &reach) ||
        __builtin_add_overflow(last, reach, &last))
      pth::fail(path, what + "'s view overflows (corrupt size or stride)");
  }
  const uint64_t elements = s.bytes / t.type->size;
  if (numel > 0 && static_cast<uint64_t>(last) >= elements)
    pth::fail(path,
              detail::concat(what, " (size ", Shape(t.size).to_string(), ", stride ",
                             Shape(t.stride).to_string(), ", offset ", t.offset,
                             ") reaches element ", last, " of storage '", s.key, "', which has ",
                             elements, " ", t.type->dtype, " elements (out of range)"));
}

Opened open_pth(const std::string& path, bool verify_crc) {
  Opened o;
  o.zip = std::make_unique<pth::ZipArchive>(path);
  const pth::ZipEntry* pkl = nullptr;
  for (const pth::ZipEntry& e : o.zip->entries()) {
    const size_t slash = e.name.find('/');
    if (slash == std::string::npos) continue;
    if (e.name.compare(slash, std::string::npos, "/constants.pkl") == 0)
      pth::fail(path,
                "a TorchScript archive (torch.jit.save), not a torch.save file: save the "
                "module's state_dict() with torch.save instead");
    if (e.name.compare(slash, std::string::npos, "/data.pkl") != 0) continue;
    if (pkl) pth::fail(path, "two data.pkl entries ('" + pkl->name + "' and '" + e.name + "')");
    pkl = &e;
    o.archive = e.name.substr(0, slash);
  }
  if (!pkl) pth::fail(path, "a zip archive without ARCHIVE/data.pkl (not a torch.save file)");
  if (const pth::ZipEntry* order = o.zip->find(o.archive + "/byteorder")) {
    if (order->size > 16) pth::fail(path, "the byteorder entry is too long (corrupt)");
    std::string text(order->size, '\0');
    o.zip->read(*order, text.data(), true);
    if (text != "little")
      pth::fail(path, "the tensors are stored '" + text.substr(0, 16) +
                          "'-endian (ember reads little-endian files)");
  }
  if (pkl->size > kMaxPickleBytes)
    pth::fail(path, detail::concat(pkl->name, " has ", pkl->size,
                                   " bytes, over the 1 GiB limit (corrupt?)"));
  std::string bytes(pkl->size, '\0');
  o.zip->read(*pkl, bytes.data(), verify_crc);
  const std::string data_folder = o.archive + "/data/";
  o.pickle = pth::unpickle(bytes, path, pkl->name,
                           [&](const std::string& key) { return o.zip->find(data_folder + key); });
  Flattener(o, path).visit(o.pickle.root, "", 0);
  for (const Leaf& leaf : o.leaves) check_view(o, path, leaf);
  return o;
}

// Copies view `t` out of its storage's bytes `src` into contiguous `dst`, widening int8/int16.
void gather(const uint8_t* src, const TensorRef& t, void* dst) {
  const size_t in = t.type->size, out = element_size(t.type->ember);
  const int64_t numel = numel_of(t.size);
  if (numel == 0) return;
  const size_t rank = t.size.size();
  const int64_t inner = rank ? t.size[rank - 1] : 1, step = rank ? t.stride[rank - 1] : 1;
  std::vector<int64_t> index(rank, 0);
  auto* o = static_cast<uint8_t*>(dst);
  for (int64_t row = 0; row < numel / inner; ++row) {
    int64_t base = t.offset;
    for (size_t d = 0; d + 1 < rank; ++d) base += index[d] * t.stride[d];
    if (in == out && step == 1) {
      std::memcpy(o, src + base * in, inner * in);
      o += inner * in;
    } else {
      for (int64_t j = 0; j < inner; ++j, o += out) {
        const uint8_t* p = src + (base + j * step) * in;
        if (in == out) {
          std::memcpy(o, p, in);
        } else {  // int8 or int16 → int32
          const int32_t v = in == 1 ? int32_t{static_cast<int8_t>(*p)}
                                    : int32_t{static_cast<int16_t>(p[0] | (p[1] << 8))};
          std::memcpy(o, &v, 4);
        }
      }
    }
    for (size_t d = rank >= 2 ? rank - 1 : 0; d-- > 0;) {
      if (++index[d] < t.size[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

PthCatalogue pth_catalogue(const std::string& path) {
  const Opened o = open_pth(path, true);
  PthCatalogue c;
  c.path = path;
  c.archive = o.archive;
  c.values = o.values;
  std::set<uint32_t> storages;
  for (const Leaf& leaf : o.leaves) {
    const TensorRef& t = o.pickle.tensors[leaf.tensor];
    const pth::StorageRef& s = o.pickle.storages[t.storage];
    c.tensors.push_back({.name = leaf.name,
                         .dtype = t.type->ember,
                         .torch_dtype = t.type->dtype,
                         .shape = Shape(t.size),
                         .stride = t.stride,
                         .storage_offset = t.offset,
                         .storage = s.key,
                         .storage_bytes = s.bytes});
    if (storages.insert(t.storage).second) c.data_bytes += s.bytes;
  }
  c.storage_count = storages.size();
  return c;
}

nn::StateDict load_pth(const std::string& path, const PthOptions& options) {
  const Opened o = open_pth(path, options.verify_crc);
  std::vector<Leaf> leaves;
  if (options.key.empty()) {
    leaves = o.leaves;
  } else {
    const std::string prefix = options.key + ".";
    for (const Leaf& leaf : o.leaves)
      if (leaf.name.starts_with(prefix))
        leaves.push_back({leaf.name.substr(prefix.size()), leaf.tensor});
    if (leaves.empty()) {
      std::set<std::string> tops;
      for (const Leaf& leaf : o.leaves) tops.insert(leaf.name.substr(0, leaf.name.find('.')));
      std::string known;
      for (const std::string& t : tops) known += (known.empty() ? "'" : ", '") + t + "'";
      pth::fail(path, "no tensors under key '" + options.key + "' (tensors are under " +
                          (known.empty() ? std::string("no key: the file has none") : known) + ")");
    }
  }
  // Note [Reading shared storages once]: one Tensor per distinct view, grouped by storage.
  using ViewKey = std::tuple<uint32_t, const pth::TorchType*, int64_t, std::vector<int64_t>,
                             std::vector<int64_t>>;
  std::map<ViewKey, size_t> view_of;
  std::vector<uint32_t> views;  // a tensor index per distinct view
  std::vector<size_t> leaf_view;
  std::map<uint32_t, std::vector<size_t>> by_storage;  // storage → its views
  for (const Leaf& leaf : leaves) {
    const TensorRef& t = o.pickle.tensors[leaf.tensor];
    auto [it, added] =
        view_of.emplace(ViewKey{t.storage, t.type, t.offset, t.size, t.stride}, views.size());
    if (added) {
      views.push_back(leaf.tensor);
      by_storage[t.storage].push_back(it->second);
    }
    leaf_view.push_back(it->second);
  }
  NoGradGuard no_grad;
  std::vector<Tensor> made(views.size());
  for (const auto& [storage, its_views] : by_storage) {
    const pth::StorageRef& s = o.pickle.storages[storage];
    const TensorRef& first = o.pickle.tensors[views[its_views[0]]];
    auto make = [&](const TensorRef& t) {
      return core::make_tensor(Shape(t.size), t.type->ember, Device::cpu());
    };
    const bool whole = its_views.size() == 1 && first.offset == 0 && contiguous(first) &&
                       element_size(first.type->ember) == first.type->size &&
                       static_cast<uint64_t>(numel_of(first.size)) * first.type->size == s.bytes;
    if (whole) {  // straight into the tensor
      made[its_views[0]] = make(first);
      o.zip->read(*s.entry, made[its_views[0]].data_ptr(), options.verify_crc);
      continue;
    }
    std::unique_ptr<uint8_t[]> buffer(new uint8_t[std::max<uint64_t>(s.bytes, 1)]);
    o.zip->read(*s.entry, buffer.get(), options.verify_crc);
    // The whole storage, for the views not copied out (Note [Reading shared storages once]).
    Tensor all;
    int64_t copied = 0;  // elements copied out of it
    for (size_t v : its_views) {
      const TensorRef& t = o.pickle.tensors[views[v]];
      const int64_t elements = static_cast<int64_t>(s.bytes / t.type->size);
      if (numel_of(t.size) <= 4 * elements - copied) {
        copied += numel_of(t.size);
        made[v] = make(t);
        gather(buffer.get(), t, made[v].data_ptr());
        continue;
      }
      const TensorRef whole{
          .storage = storage, .type = t.type, .offset = 0, .size = {elements}, .stride = {1}};
      if (!all.defined() || all.dtype() != t.type->ember) {
        all = make(whole);
        gather(buffer.get(), whole, all.data_ptr());
      }
      made[v] = core::make_view(all, Shape(t.size), Shape(t.stride), t.offset);
    }
  }
  if (!options.device.is_cpu())
    for (Tensor& t : made) t = t.to(options.device);
  nn::StateDict out;
  out.reserve(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) out.emplace_back(leaves[i].name, made[leaf_view[i]]);
  return out;
}

}  // namespace ember::io
