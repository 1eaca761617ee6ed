// src/io/pth_pickle.cpp — a restricted interpreter of the pickle protocol (0-5 framing, the
// opcodes torch.save's state dicts and checkpoints use) for torch.save's data.pkl.
//
// Note [A pickle that cannot run code]
// Python's unpickler imports any module.name a GLOBAL names and calls whatever REDUCE is given,
// which is how a .pth file can run code. This interpreter makes only plain values (None,
// booleans, integers, floats, strings, tuples, lists, dicts) and tensors: a GLOBAL must name one
// of the allow-listed objects of kGlobals (torch's tensor and parameter rebuild functions, its
// storage classes and dtypes, collections.OrderedDict, torch.device and torch.Size), and REDUCE
// calls only the callable ones, each implemented here on plain values. Any other global, any
// other opcode (NEWOBJ, INST, BINBYTES, EXT*, ...), BUILD on anything but a dict, and a
// persistent id that is not torch's ('storage', type, key, location, numel) is refused naming
// it and its offset in data.pkl. Objects live in an arena and refer to each other by index, so
// the memo's shared and cyclic references neither copy nor leak; every read is bounds-checked,
// so memory is bounded by the pickle's own size.
#include <bit>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "ember/error.hpp"
#include "io/pth_format.hpp"

namespace ember::io::pth {

namespace {

// Note [Torch dtypes]: ember has no int8 or int16, so those load widened to i32 (exact).
const TorchType kTypes[] = {
    {"float32", "FloatStorage", 4, DType::f32}, {"float64", "DoubleStorage", 8, DType::f64},
    {"float16", "HalfStorage", 2, DType::f16},  {"bfloat16", "BFloat16Storage", 2, DType::bf16},
    {"int64", "LongStorage", 8, DType::i64},    {"int32", "IntStorage", 4, DType::i32},
    {"int16", "ShortStorage", 2, DType::i32},   {"int8", "CharStorage", 1, DType::i32},
    {"uint8", "ByteStorage", 1, DType::u8},     {"bool", "BoolStorage", 1, DType::boolean},
};

enum Global : int64_t {
  kOrderedDict,
  kRebuildTensor,
  kRebuildTensorV2,
  kRebuildTensorV3,
  kRebuildParameter,
  kRebuildParameterWithState,
  kRebuildFromTypeV2,
  kDevice,
  kSize,
  kTensorType,
  kParameterType,
  kUntypedStorage,
  kStorageTypes = 100,
  kDTypes = 200,  // + index into kTypes
};

const std::unordered_map<std::string, int64_t>& globals() {
  static const std::unordered_map<std::string, int64_t> table = [] {
    std::unordered_map<std::string, int64_t> t = {
        {"collections.OrderedDict", kOrderedDict},
        {"torch._utils._rebuild_tensor", kRebuildTensor},
        {"torch._utils._rebuild_tensor_v2", kRebuildTensorV2},
        {"torch._utils._rebuild_tensor_v3", kRebuildTensorV3},
        {"torch._utils._rebuild_parameter", kRebuildParameter},
        {"torch._utils._rebuild_parameter_with_state", kRebuildParameterWithState},
        {"torch._tensor._rebuild_from_type_v2", kRebuildFromTypeV2},
        {"torch.device", kDevice},
        {"torch.Size", kSize},
        {"torch.Tensor", kTensorType},
        {"torch.nn.parameter.Parameter", kParameterType},
        {"torch.UntypedStorage", kUntypedStorage},
        {"torch.storage.UntypedStorage", kUntypedStorage},
    };
    for (int64_t i = 0; i < static_cast<int64_t>(std::size(kTypes)); ++i) {
      t[std::string("torch.") + kTypes[i].storage] = kStorageTypes + i;
      t[std::string("torch.") + kTypes[i].dtype] = kDTypes + i;
    }
    return t;
  }();
  return table;
}

// Every pickle opcode's name, for the message refusing one.
const char* opcode_name(uint8_t op) {
  // clang-format off
  static const std::pair<uint8_t, const char*> kNames[] = {
      {'(', "MARK"},               {'.', "STOP"},               {'0', "POP"},
      {'1', "POP_MARK"},           {'2', "DUP"},                {'F', "FLOAT"},
      {'I', "INT"},                {'J', "BININT"},             {'K', "BININT1"},
      {'L', "LONG"},               {'M', "BININT2"},            {'N', "NONE"},
      {'P', "PERSID"},             {'Q', "BINPERSID"},          {'R', "REDUCE"},
      {'S', "STRING"},             {'T', "BINSTRING"},          {'U', "SHORT_BINSTRING"},
      {'V', "UNICODE"},            {'X', "BINUNICODE"},         {'a', "APPEND"},
      {'b', "BUILD"},              {'c', "GLOBAL"},             {'d', "DICT"},
      {'}', "EMPTY_DICT"},         {'e', "APPENDS"},            {'g', "GET"},
      {'h', "BINGET"},             {'i', "INST"},               {'j', "LONG_BINGET"},
      {'l', "LIST"},               {']', "EMPTY_LIST"},         {'o', "OBJ"},
      {'p', "PUT"},                {'q', "BINPUT"},             {'r', "LONG_BINPUT"},
      {'s', "SETITEM"},            {'t', "TUPLE"},              {')', "EMPTY_TUPLE"},
      {'u', "SETITEMS"},           {'G', "BINFLOAT"},           {0x80, "PROTO"},
      {0x81, "NEWOBJ"},            {0x82, "EXT1"},              {0x83, "EXT2"},
      {0x84, "EXT4"},              {0x85, "TUPLE1"},            {0x86, "TUPLE2"},
      {0x87, "TUPLE3"},            {0x88, "NEWTRUE"},           {0x89, "NEWFALSE"},
      {0x8a, "LONG1"},             {0x8b, "LONG4"},             {'B', "BINBYTES"},
      {'C', "SHORT_BINBYTES"},     {0x8c, "SHORT_BINUNICODE"},  {0x8d, "BINUNICODE8"},
      {0x8e, "BINBYTES8"},         {0x8f, "EMPTY_SET"},         {0x90, "ADDITEMS"},
      {0x91, "FROZENSET"},         {0x92, "NEWOBJ_EX"},         {0x93, "STACK_GLOBAL"},
      {0x94, "MEMOIZE"},           {0x95, "FRAME"},             {0x96, "BYTEARRAY8"},
      {0x97, "NEXT_BUFFER"},       {0x98, "READONLY_BUFFER"},
  };
  // clang-format on
  for (const auto& [code, name] : kNames)
    if (code == op) return name;
  return nullptr;
}

using Kind = Object::Kind;

class Machine {
 public:
  Machine(const std::string& bytes, const std::string& path, const std::string& where,
          const FindStorage& find_storage)
      : b_(bytes), path_(path), where_(where), find_storage_(find_storage) {}

  Unpickled run();

 private:
  const std::string& b_;
  const std::string& path_;
  const std::string& where_;
  const FindStorage& find_storage_;
  size_t pos_ = 0, op_at_ = 0;  // the next byte; the current opcode's offset
  Unpickled out_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, uint32_t> memo_;
  std::unordered_map<std::string, uint32_t> storage_by_key_;

  [[noreturn]] void bad(const std::string& what) const {
    fail(path_, detail::concat(where_, ", offset ", op_at_, ": ", what));
  }
  const uint8_t* take(size_t n) {
    if (b_.size() - pos_ < n)
      bad(detail::concat("the pickle ends inside an opcode's argument (", n,
                         " bytes wanted; truncated or corrupt)"));
    const uint8_t* p = reinterpret_cast<const uint8_t*>(b_.data()) + pos_;
    pos_ += n;
    return p;
  }
  uint64_t le(size_t n) {
    const uint8_t* p = take(n);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{p[i]} << (8 * i);
    return v;
  }
  std::string text(uint64_t n) {
    if (n > b_.size() - pos_) bad(detail::concat("a string of ", n, " bytes runs past the pickle"));
    const char* p = reinterpret_cast<const char*>(take(static_cast<size_t>(n)));
    return std::string(p, static_cast<size_t>(n));
  }
  std::string line() {  // GLOBAL's "module\n" and "name\n"
    const size_t nl = b_.find('\n', pos_);
    if (nl == std::string::npos || nl - pos_ > 1000) bad("GLOBAL without a newline-ended name");
    std::string s = b_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return s;
  }

  uint32_t make(Object o) {
    out_.objects.push_back(std::move(o));
    return static_cast<uint32_t>(out_.objects.size() - 1);
  }
  uint32_t make_int(int64_t v, Kind k = Kind::integer) {
    Object o;
    o.kind = k;
    o.i = v;
    return make(std::move(o));
  }
  Object& at(uint32_t i) { return out_.objects[i]; }
  uint32_t pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back()))
      bad("the pickle pops an empty stack (corrupt)");
    const uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  uint32_t top() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back()))
      bad("the pickle reads an empty stack (corrupt)");
    return stack_.back();
  }
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) bad("the pickle closes a MARK it never opened (corrupt)");
    std::vector<uint32_t> items(stack_.begin() + static_cast<ptrdiff_t>(marks_.back()),
                                stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  uint32_t tuple(std::vector<uint32_t> items) {
    Object o;
    o.kind = Kind::tuple;
    o.items = std::move(items);
    return make(std::move(o));
  }
  std::string key_of(uint32_t k) {
    const Object& o = at(k);
    switch (o.kind) {
      case Kind::string: return "s" + o.s;
      case Kind::integer: return "i" + std::to_string(o.i);
      case Kind::boolean: return "b" + std::to_string(o.i);
      case Kind::none: return "n";
      default:
        bad(detail::concat("a dict key that is a ", kind_name(o.kind),
                           " (ember takes strings, "
                           "integers, booleans and None as keys)"));
    }
  }
  void set_item(uint32_t dict, uint32_t k, uint32_t v) {
    if (at(dict).kind != Kind::dict)
      bad(detail::concat("SETITEM(S) on a ", kind_name(at(dict).kind), ", not a dict"));
    const std::string key = key_of(k);
    Object& d = at(dict);
    auto [it, added] = d.index.emplace(key, static_cast<uint32_t>(d.items.size()));
    if (added) {
      d.items.push_back(k);
      d.items.push_back(v);
    } else {
      d.items[it->second + 1] = v;
    }
  }
  void append(uint32_t list, uint32_t v) {
    if (at(list).kind != Kind::list)
      bad(detail::concat("APPEND(S) on a ", kind_name(at(list).kind), ", not a list"));
    at(list).items.push_back(v);
  }
  uint32_t global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    auto it = globals().find(full);
    if (it == globals().end()) {
      const std::string storage = name.ends_with("Storage") && module == "torch"
                                      ? " (a storage type ember has no dtype for)"
                                      : "";
      bad("global '" + full + "'" + storage +
          " is not allowed: ember reads tensors, numbers, strings and containers from a .pth "
          "file and never imports or runs anything it names");
    }
    Object o;
    o.kind = Kind::global;
    o.i = it->second;
    o.s = full;
    return make(std::move(o));
  }
  uint32_t persistent(uint32_t pid);
  uint32_t reduce(uint32_t callable, uint32_t args);
  uint32_t rebuild_tensor(const std::vector<uint32_t>& a, const TorchType* dtype);
  int64_t integer(uint32_t i, const char* what) {
    if (at(i).kind != Kind::integer)
      bad(detail::concat(what, " is a ", kind_name(at(i).kind), ", not an integer"));
    return at(i).i;
  }
  std::vector<int64_t> int_tuple(uint32_t i, const char* what) {
    if (at(i).kind != Kind::tuple && at(i).kind != Kind::list)
      bad(detail::concat(what, " is a ", kind_name(at(i).kind), ", not a tuple of integers"));
    std::vector<int64_t> v;
    for (uint32_t x : at(i).items) v.push_back(integer(x, what));
    return v;
  }
};

uint32_t Machine::persistent(uint32_t pid) {
  // torch.save's persistent id of a storage: ('storage', type, key, location, numel).
  const Object& t = at(pid);
  if (t.kind != Kind::tuple || t.items.size() != 5 || at(t.items[0]).kind != Kind::string ||
      at(t.items[0]).s != "storage")
    bad("a persistent id that is not torch's ('storage', type, key, location, numel)");
  const Object& type = at(t.items[1]);
  const TorchType* tt = nullptr;
  if (type.kind == Kind::global && type.i >= kStorageTypes && type.i < kDTypes)
    tt = &kTypes[type.i - kStorageTypes];
  else if (type.kind == Kind::global && type.i == kUntypedStorage)
    tt = torch_byte_type();
  if (!tt) bad("a persistent id whose storage type is not a storage class");
  if (at(t.items[2]).kind != Kind::string) bad("a persistent id whose storage key is not a string");
  const std::string key = at(t.items[2]).s;
  const int64_t numel = integer(t.items[4], "a storage's element count");
  uint64_t bytes = 0;
  if (numel < 0 || __builtin_mul_overflow(static_cast<uint64_t>(numel), tt->size, &bytes))
    bad(detail::concat("storage '", key, "' has element count ", numel));
  auto known = storage_by_key_.find(key);
  if (known != storage_by_key_.end()) {
    const StorageRef& s = out_.storages[known->second];
    if (s.type != tt)
      bad(detail::concat("storage '", key, "' is named as both ", s.type->storage, " and ",
                         tt->storage));
    return make_int(known->second, Kind::storage);
  }
  const ZipEntry* entry = find_storage_(key);
  if (!entry)
    bad("storage '" + key + "' has no data entry in the archive (missing data/" + key + ")");
  if (entry->size != bytes)
    bad(detail::concat("storage '", key, "' (", tt->storage, " of ", numel, " elements, ", bytes,
                       " bytes) has a data entry of ", entry->size, " bytes"));
  out_.storages.push_back({key, tt, bytes, entry});
  storage_by_key_[key] = static_cast<uint32_t>(out_.storages.size() - 1);
  return make_int(static_cast<int64_t>(out_.storages.size() - 1), Kind::storage);
}

uint32_t Machine::rebuild_tensor(const std::vector<uint32_t>& a, const TorchType* dtype) {
  // (storage, storage_offset, size, stride, ...): the view is checked against its storage once
  // it has a name (pth.cpp).
  if (at(a[0]).kind != Kind::storage) bad("a tensor rebuilt from something that is not a storage");
  TensorRef t;
  t.storage = static_cast<uint32_t>(at(a[0]).i);
  t.type = dtype ? dtype : out_.storages[t.storage].type;
  t.offset = integer(a[1], "a tensor's storage offset");
  t.size = int_tuple(a[2], "a tensor's size");
  t.stride = int_tuple(a[3], "a tensor's stride");
  out_.tensors.push_back(std::move(t));
  return make_int(static_cast<int64_t>(out_.tensors.size() - 1), Kind::tensor);
}

uint32_t Machine::reduce(uint32_t callable, uint32_t args) {
  const Object& f = at(callable);
  if (f.kind != Kind::global) bad(detail::concat("REDUCE calls a ", kind_name(f.kind)));
  if (at(args).kind != Kind::tuple) bad("REDUCE with arguments that are not a tuple");
  const std::vector<uint32_t> a = at(args).items;
  const std::string name = f.s;
  auto need = [&](size_t lo, size_t hi) {
    if (a.size() < lo || a.size() > hi)
      bad(detail::concat(name, " called with ", a.size(), " arguments (expected ", lo,
                         lo == hi ? "" : detail::concat(" to ", hi), ")"));
  };
  switch (f.i) {
    case kOrderedDict: {  // OrderedDict() or OrderedDict([(key, value), ...])
      need(0, 1);
      Object d;
      d.kind = Kind::dict;
      const uint32_t out = make(std::move(d));
      if (a.size() == 1) {
        if (at(a[0]).kind != Kind::list && at(a[0]).kind != Kind::tuple)
          bad("OrderedDict called with something other than a list of pairs");
        const std::vector<uint32_t> pairs = at(a[0]).items;
        for (uint32_t p : pairs) {
          if (at(p).kind != Kind::tuple || at(p).items.size() != 2)
            bad("OrderedDict called with an item that is not a pair");
          set_item(out, at(p).items[0], at(p).items[1]);
        }
      }
      return out;
    }
    case kRebuildTensor: need(4, 4); return rebuild_tensor(a, nullptr);
    case kRebuildTensorV2: need(6, 7); return rebuild_tensor(a, nullptr);
    case kRebuildTensorV3: {  // (..., requires_grad, hooks, dtype[, metadata]), an untyped storage
      need(7, 8);
      const Object& d = at(a[6]);
      if (d.kind != Kind::global || d.i < kDTypes) bad("_rebuild_tensor_v3 without a dtype");
      return rebuild_tensor(a, &kTypes[d.i - kDTypes]);
    }
    case kRebuildParameter:
    case kRebuildParameterWithState:
      need(f.i == kRebuildParameter ? 3 : 4, f.i == kRebuildParameter ? 3 : 4);
      if (at(a[0]).kind != Kind::tensor) bad(name + " called with something other than a tensor");
      return a[0];
    case kRebuildFromTypeV2: {  // (func, type, args, state): func(*args) for Tensor/Parameter
      need(4, 4);
      const Object& type = at(a[1]);
      if (type.kind != Kind::global || (type.i != kTensorType && type.i != kParameterType))
        bad("_rebuild_from_type_v2 of a type other than torch.Tensor or torch.nn.Parameter");
      const uint32_t t = reduce(a[0], a[2]);
      if (at(t).kind != Kind::tensor) bad("_rebuild_from_type_v2 whose function makes no tensor");
      return t;
    }
    case kDevice: {  // torch.device('cuda', 0) → "cuda:0"
      need(1, 2);
      if (at(a[0]).kind != Kind::string) bad("torch.device called without a device type");
      Object s;
      s.kind = Kind::string;
      s.s = at(a[0]).s;
      if (a.size() == 2 && at(a[1]).kind == Kind::integer) s.s += ":" + std::to_string(at(a[1]).i);
      return make(std::move(s));
    }
    case kSize:  // torch.Size((2, 3)) → the tuple
      need(1, 1);
      if (at(a[0]).kind != Kind::tuple) bad("torch.Size called without a tuple");
      return a[0];
  }
  bad("global '" + name + "' cannot be called (it is a type ember only accepts as an argument)");
}

Unpickled Machine::run() {
  bool stopped = false;
  while (!stopped) {
    op_at_ = pos_;
    if (pos_ >= b_.size()) bad("the pickle ends without STOP (truncated)");
    const uint8_t op = *take(1);
    switch (op) {
      case 0x80: {  // PROTO
        const uint64_t v = le(1);
        if (v > 5) bad(detail::concat("pickle protocol ", v, " (ember reads protocols 0 to 5)"));
        break;
      }
      case 0x95: le(8); break;  // FRAME: a length hint; the bytes follow as usual
      case '.': stopped = true; break;
      case '(': marks_.push_back(stack_.size()); break;
      case '}':
      case ']': {
        Object o;
        o.kind = op == '}' ? Kind::dict : Kind::list;
        stack_.push_back(make(std::move(o)));
        break;
      }
      case ')': stack_.push_back(tuple({})); break;
      case 'N': stack_.push_back(make(Object{})); break;
      case 0x88:
      case 0x89: stack_.push_back(make_int(op == 0x88, Kind::boolean)); break;
      case 'J': stack_.push_back(make_int(static_cast<int32_t>(le(4)))); break;
      case 'K': stack_.push_back(make_int(static_cast<int64_t>(le(1)))); break;
      case 'M': stack_.push_back(make_int(static_cast<int64_t>(le(2)))); break;
      case 0x8a: {  // LONG1: n bytes, little-endian two's complement
        const uint64_t n = le(1);
        if (n > 8) bad(detail::concat("an integer of ", n, " bytes (ember takes 64-bit integers)"));
        uint64_t v = n ? le(static_cast<size_t>(n)) : 0;
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
        stack_.push_back(make_int(static_cast<int64_t>(v)));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        const uint8_t* p = take(8);
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
        Object o;
        o.kind = Kind::floating;
        o.f = std::bit_cast<double>(v);
        stack_.push_back(make(std::move(o)));
        break;
      }
      case 'X':
      case 0x8c:
      case 0x8d: {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
        Object o;
        o.kind = Kind::string;
        o.s = text(le(op == 'X' ? 4 : op == 0x8c ? 1 : 8));
        stack_.push_back(make(std::move(o)));
        break;
      }
      case 't': stack_.push_back(tuple(pop_mark())); break;
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1-3
        std::vector<uint32_t> items(op - 0x84);
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        stack_.push_back(tuple(std::move(items)));
        break;
      }
      case 'l':
      case 'd': {  // LIST, DICT from the items since MARK
        std::vector<uint32_t> items = pop_mark();
        Object o;
        o.kind = op == 'l' ? Kind::list : Kind::dict;
        const uint32_t c = make(std::move(o));
        if (op == 'l') at(c).items = std::move(items);
        if (op == 'd' && items.size() % 2) bad("DICT with an odd number of items");
        for (size_t i = 0; op == 'd' && i < items.size(); i += 2)
          set_item(c, items[i], items[i + 1]);
        stack_.push_back(c);
        break;
      }
      case 's': {
        const uint32_t v = pop(), k = pop();
        set_item(top(), k, v);
        break;
      }
      case 'u': {
        const std::vector<uint32_t> items = pop_mark();
        if (items.size() % 2) bad("SETITEMS with an odd number of items");
        const uint32_t d = top();
        for (size_t i = 0; i < items.size(); i += 2) set_item(d, items[i], items[i + 1]);
        break;
      }
      case 'a': {
        const uint32_t v = pop();
        append(top(), v);
        break;
      }
      case 'e': {
        const std::vector<uint32_t> items = pop_mark();
        const uint32_t l = top();
        for (uint32_t v : items) append(l, v);
        break;
      }
      case 'q':
      case 'r': memo_[static_cast<uint32_t>(le(op == 'q' ? 1 : 4))] = top(); break;
      case 0x94: memo_[static_cast<uint32_t>(memo_.size())] = top(); break;  // MEMOIZE
      case 'h':
      case 'j': {
        const uint32_t k = static_cast<uint32_t>(le(op == 'h' ? 1 : 4));
        auto it = memo_.find(k);
        if (it == memo_.end())
          bad(detail::concat("memo entry ", k, " is read before it is written"));
        stack_.push_back(it->second);
        break;
      }
      case '0': pop(); break;
      case '1': pop_mark(); break;
      case '2': stack_.push_back(top()); break;
      case 'c': {
        const std::string module = line();
        const std::string name = line();
        stack_.push_back(global(module, name));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        const uint32_t name = pop(), module = pop();
        if (at(name).kind != Kind::string || at(module).kind != Kind::string)
          bad("STACK_GLOBAL without a module and a name");
        stack_.push_back(global(at(module).s, at(name).s));
        break;
      }
      case 'R': {
        const uint32_t args = pop(), f = pop();
        stack_.push_back(reduce(f, args));
        break;
      }
      case 'b': {  // BUILD: only OrderedDict's __dict__ (state_dict's _metadata), which is dropped
        pop();
        if (at(top()).kind != Kind::dict)
          bad(detail::concat("BUILD on a ", kind_name(at(top()).kind),
                             " (ember builds no objects but OrderedDicts)"));
        break;
      }
      case 'Q': stack_.push_back(persistent(pop())); break;
      default: {
        const char* name = opcode_name(op);
        bad(name ? detail::concat("pickle opcode ", name, " (0x", "0123456789abcdef"[op >> 4],
                                  "0123456789abcdef"[op & 15],
                                  ") is not one ember reads (it reads the opcodes torch.save "
                                  "writes for tensors, numbers, strings and containers)")
                 : detail::concat("unknown pickle opcode 0x", "0123456789abcdef"[op >> 4],
                                  "0123456789abcdef"[op & 15], " (corrupt data.pkl?)"));
      }
    }
  }
  if (stack_.size() != 1 || !marks_.empty())
    bad(detail::concat("STOP with ", stack_.size(), " values on the stack (expected 1; corrupt)"));
  out_.root = stack_.back();
  return std::move(out_);
}

}  // namespace

const TorchType* torch_type_by_dtype(const std::string& name) {
  for (const TorchType& t : kTypes)
    if (name == t.dtype) return &t;
  return nullptr;
}

const TorchType* torch_type_by_storage(const std::string& name) {
  for (const TorchType& t : kTypes)
    if (name == t.storage) return &t;
  return nullptr;
}

const TorchType* torch_byte_type() { return torch_type_by_dtype("uint8"); }

const char* kind_name(Object::Kind k) {
  switch (k) {
    case Kind::none: return "None";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::tuple: return "tuple";
    case Kind::list: return "list";
    case Kind::dict: return "dict";
    case Kind::global: return "global";
    case Kind::storage: return "storage";
    case Kind::tensor: return "tensor";
  }
  return "?";
}

Unpickled unpickle(const std::string& bytes, const std::string& path, const std::string& where,
                   const FindStorage& find_storage) {
  return Machine(bytes, path, where, find_storage).run();
}

}  // namespace ember::io::pth
