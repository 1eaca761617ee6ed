// src/nn/module.cpp — ModuleImpl: registration, traversal, modes, device/dtype moves,
// state_dict / load_state_dict, config JSON, the printed summary, and the type registry.
#include "ember/nn/module.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "core/profiler.hpp"
#include "ember/autograd.hpp"
#include "ember/ops.hpp"

namespace ember::nn {

Tensor call_forward(ModuleImpl& m, const Tensor& x) {
  const core::profiler::ModuleFrame frame(&m, detail::profiling() ? m.type_name() : std::string());
  if (!m.has_forward_hooks()) return m.forward(x);
  // A copy: a hook may remove itself (or register another) while it runs.
  const ModuleHooks hooks = *m.hooks_;
  Tensor input = x;
  for (const auto& [id, pre] : hooks.pre)
    if (std::optional<Tensor> replaced = pre(m, input)) input = std::move(*replaced);
  Tensor output = m.forward(input);
  for (const auto& [id, post] : hooks.post)
    if (std::optional<Tensor> replaced = post(m, input, output)) output = std::move(*replaced);
  return output;
}

void ModuleHookHandle::remove() {
  const std::shared_ptr<ModuleHooks> hooks = hooks_.lock();
  if (!hooks) return;
  std::erase_if(hooks->pre, [&](auto& e) { return e.first == id_; });
  std::erase_if(hooks->post, [&](auto& e) { return e.first == id_; });
  hooks_.reset();
}

ModuleHookHandle ModuleImpl::register_forward_pre_hook(ForwardPreHook hook, bool prepend) {
  EMBER_CHECK(hook != nullptr, type_name(), ".register_forward_pre_hook: the hook is empty ",
              "(expected a callable)");
  if (!hooks_) hooks_ = std::make_shared<ModuleHooks>();
  const uint64_t id = hooks_->next_id++;
  hooks_->pre.emplace(prepend ? hooks_->pre.begin() : hooks_->pre.end(), id, std::move(hook));
  return ModuleHookHandle(hooks_, id);
}

ModuleHookHandle ModuleImpl::register_forward_hook(ForwardHook hook, bool prepend) {
  EMBER_CHECK(hook != nullptr, type_name(), ".register_forward_hook: the hook is empty ",
              "(expected a callable)");
  if (!hooks_) hooks_ = std::make_shared<ModuleHooks>();
  const uint64_t id = hooks_->next_id++;
  hooks_->post.emplace(prepend ? hooks_->post.begin() : hooks_->post.end(), id, std::move(hook));
  return ModuleHookHandle(hooks_, id);
}

void throw_empty_module_handle(const char* handle) {
  // Holders pass typeid(Impl).name(): demangle "ember::nn::LinearImpl" to "nn::Linear".
  std::string name = handle;
  int status = 0;
  if (char* plain = abi::__cxa_demangle(handle, nullptr, nullptr, &status)) {
    if (status == 0) name = plain;
    std::free(plain);
  }
  if (name.rfind("ember::", 0) == 0) name = name.substr(7);
  if (name.size() > 4 && name.compare(name.size() - 4, 4, "Impl") == 0)
    name.resize(name.size() - 4);
  ember::detail::throw_error(
      name +
      ": the module handle is empty (default-constructed or moved-from; expected a handle "
      "to a constructed module, e.g. nn::Linear fc(4, 3))");
}

namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

Tensor* find(NamedTensors& list, const std::string& name) {
  for (auto& [n, t] : list)
    if (n == name) return &t;
  return nullptr;
}

std::string with_commas(int64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// Replaces a tensor's storage in place, so every handle to it sees the new device/dtype.
// Its .grad moves with it (converted the same way, in the caller's pool), as in PyTorch's
// Module.to: a gradient accumulated before the move is not lost.
void retarget(Tensor& t, const Tensor& replacement) {
  const Tensor grad = t.grad();
  t.set_data_(replacement);
  if (grad.defined()) {
    // The gradient is laid out as its parameter (Note [Memory formats] in src/core/tensor.cpp).
    t.set_grad(grad.to(replacement.dtype())
                   .to(replacement.device())
                   .to(replacement.suggest_memory_format()));
  }
}

// Calls fn(module, path) for every module of the tree at `root` (paths under `prefix`),
// depth-first, each once (the first path of a reused module). Raw references: it also runs
// inside a module's constructor, before a shared_ptr owns it. M is ModuleImpl or its const.
template <typename M, typename Fn>
void for_each_module(M& root, Fn&& fn, const std::string& prefix = "") {
  std::set<const ModuleImpl*> seen;
  auto visit = [&](auto&& self, M& m, const std::string& path) -> void {
    if (!seen.insert(&m).second) return;
    fn(m, path);
    for (auto& [cn, c] : m.named_children()) self(self, *c, join(path, cn));
  };
  visit(visit, root, prefix);
}

}  // namespace

Tensor& ModuleImpl::register_parameter(const std::string& name, const Tensor& init) {
  Tensor copy = init;  // a second handle: parameter() copies
  return register_parameter(name, std::move(copy));
}

Tensor& ModuleImpl::register_parameter(const std::string& name, Tensor&& init) {
  EMBER_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name(),
              ": parameter name '", name, "' is empty or contains '.'");
  EMBER_CHECK(!find(params_, name) && !find(buffers_, name), type_name(), ": name '", name,
              "' is already registered");
  Tensor p = init.defined() ? parameter(std::move(init)) : Tensor();
  params_.emplace_back(name, p);
  return params_.back().second;
}

Tensor& ModuleImpl::register_buffer(const std::string& name, const Tensor& init) {
  EMBER_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name(), ": buffer name '",
              name, "' is empty or contains '.'");
  EMBER_CHECK(!find(params_, name) && !find(buffers_, name), type_name(), ": name '", name,
              "' is already registered");
  Tensor b;
  if (init.defined()) {
    PoolGuard pool(Pool::Persistent);
    NoGradGuard g;
    b = init.detach().clone();
  }
  buffers_.emplace_back(name, b);
  return buffers_.back().second;
}

ModulePtr ModuleImpl::register_module(const std::string& name, ModulePtr module) {
  EMBER_CHECK(module != nullptr, type_name(), ": child '", name, "' is null");
  for (auto& [n, m] : children_)
    EMBER_CHECK(n != name, type_name(), ": child name '", name, "' is already registered");
  // A tree, never a cycle: `module` must not be this module or hold it anywhere below.
  // (Sharing one child twice is fine: that is reuse, not a cycle.)
  for_each_module(*module, [&](const ModuleImpl& m, const std::string& path) {
    EMBER_CHECK(&m != this, type_name(), ": adding child '", name, "' (", module->type_name(),
                ") would make a cycle: ",
                path.empty() ? std::string("it is this ") + type_name() + " itself"
                             : "its submodule '" + path + "' is this " + type_name(),
                " (expected a tree of modules; reuse a module by adding it twice, not by "
                "nesting a container in itself)");
  });
  children_.emplace_back(name, module);
  return module;
}

namespace {

// Note [Shared modules and parameters]
// A module may appear twice in a tree (a reused block) and one tensor may be registered in
// two modules (tied weights). As PyTorch, parameters(), buffers() and named_modules() list
// each once, under the first name met depth-first, so an optimizer steps it once with the
// sum of its uses' gradients; state_dict() keeps every name (PyTorch's does too), a
// checkpoint stores the tensor once with the other names as aliases ("ember.tied"), and
// load_state_dict accepts a dict that names only one of them.

// Appends `list`'s defined tensors under `prefix`, skipping tensors already in `seen`.
void append_unique(NamedTensors& out, std::set<const TensorImpl*>& seen, const NamedTensors& list,
                   const std::string& prefix) {
  for (auto& [n, t] : list)
    if (t.defined() && seen.insert(detail::TensorAccess::impl(t)).second)
      out.emplace_back(join(prefix, n), t);
}

// The defined tensors of `list_of(module)` over the tree (or `root` alone), each tensor once.
template <typename ListOf>
NamedTensors unique_tensors(const ModuleImpl& root, bool recurse, ListOf&& list_of) {
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  if (!recurse) {
    append_unique(out, seen, list_of(root), "");
    return out;
  }
  for_each_module(root, [&](const ModuleImpl& m, const std::string& path) {
    append_unique(out, seen, list_of(m), path);
  });
  return out;
}

}  // namespace

NamedTensors ModuleImpl::named_parameters(bool recurse) const {
  return unique_tensors(*this, recurse,
                        [](const ModuleImpl& m) -> const NamedTensors& { return m.params_; });
}

std::vector<Tensor> ModuleImpl::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors ModuleImpl::named_buffers(bool recurse) const {
  return unique_tensors(*this, recurse,
                        [](const ModuleImpl& m) -> const NamedTensors& { return m.buffers_; });
}

std::vector<Tensor> ModuleImpl::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<ModulePtr> ModuleImpl::children() const {
  std::vector<ModulePtr> out;
  for (auto& [n, c] : children_) out.push_back(c);
  return out;
}

std::vector<std::pair<std::string, ModulePtr>> ModuleImpl::named_modules(
    const std::string& prefix) const {
  // Depth-first, each module once (a reused module under its first path), as PyTorch.
  std::vector<std::pair<std::string, ModulePtr>> out;
  for_each_module(
      *this,
      [&](const ModuleImpl& m, const std::string& path) {
        out.emplace_back(path, std::const_pointer_cast<ModuleImpl>(m.shared_from_this()));
      },
      prefix);
  return out;
}

void ModuleImpl::train(bool on) {
  training_ = on;
  on_mode_change();
  for (auto& [n, c] : children_) c->train(on);
}

void ModuleImpl::to(Device device) {
  NoGradGuard g;
  auto move = [&](NamedTensors& list) {
    for (auto& [n, t] : list) {
      if (!t.defined() || t.device() == device) continue;
      PoolGuard pool(t.storage()->pool());
      retarget(t, t.to(device));
    }
  };
  for_each_module(*this, [&](ModuleImpl& m, const std::string&) {  // each module once
    move(m.params_);
    move(m.buffers_);
  });
}

void ModuleImpl::to(DType dtype) {
  EMBER_CHECK(is_floating(dtype), type_name(), ".to: dtype ", dtype_name(dtype),
              " (expected a floating dtype for parameters)");
  NoGradGuard g;
  auto convert = [&](NamedTensors& list) {
    for (auto& [n, t] : list) {
      if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == dtype) continue;
      PoolGuard pool(t.storage()->pool());
      retarget(t, t.to(dtype));
    }
  };
  for_each_module(*this, [&](ModuleImpl& m, const std::string&) {  // each module once
    convert(m.params_);
    convert(m.buffers_);
  });
}

void ModuleImpl::to(MemoryFormat format) {
  EMBER_CHECK(format != MemoryFormat::preserve, type_name(),
              ".to: MemoryFormat::preserve names no layout (expected contiguous, channels_last or "
              "channels_last_3d)");
  // As torch's Module.to(memory_format=...): the parameters and buffers of the format's rank
  // (4 for channels_last, 5 for channels_last_3d; every 4-d and 5-d one for contiguous).
  const auto takes = [format](const Tensor& t) {
    if (format == MemoryFormat::channels_last) return t.dim() == 4;
    if (format == MemoryFormat::channels_last_3d) return t.dim() == 5;
    return t.dim() == 4 || t.dim() == 5;
  };
  NoGradGuard g;
  auto convert = [&](NamedTensors& list) {
    for (auto& [n, t] : list) {
      if (!t.defined() || !takes(t) || t.suggest_memory_format() == format) continue;
      PoolGuard pool(t.storage()->pool());
      retarget(t, t.to(format));
    }
  };
  for_each_module(*this, [&](ModuleImpl& m, const std::string&) {  // each module once
    convert(m.params_);
    convert(m.buffers_);
  });
}

void ModuleImpl::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) p.zero_grad(set_to_none);
}

StateDict ModuleImpl::state_dict() const {
  StateDict out;
  for (auto& [n, t] : params_)
    if (t.defined()) out.emplace_back(n, t);
  for (auto& [n, t] : buffers_)
    if (t.defined()) out.emplace_back(n, t);
  for (auto& [cn, c] : children_)
    for (auto& [n, t] : c->state_dict()) out.emplace_back(join(cn, n), t);
  return out;
}

LoadReport ModuleImpl::load_state_dict(const StateDict& sd, bool strict) {
  LoadReport report;
  StateDict mine = state_dict();
  std::map<std::string, const Tensor*> given;
  for (auto& [n, t] : sd) {
    EMBER_CHECK(given.emplace(n, &t).second, "load_state_dict: name '", n,
                "' appears twice in the state dict");
  }
  std::vector<std::pair<Tensor, const Tensor*>> to_copy;
  std::vector<std::pair<std::string, const TensorImpl*>> absent;
  std::set<const TensorImpl*> given_impls;
  for (auto& [n, t] : mine) {
    auto it = given.find(n);
    if (it == given.end()) {
      absent.emplace_back(n, detail::TensorAccess::impl(t));
      continue;
    }
    given_impls.insert(detail::TensorAccess::impl(t));
    const Tensor& src = *it->second;
    if (!src.defined() || src.shape() != t.shape() || src.dtype() != t.dtype()) {
      std::ostringstream m;
      m << n << ": expected " << t.shape().to_string() << " " << dtype_name(t.dtype()) << ", got ";
      if (src.defined())
        m << src.shape().to_string() << " " << dtype_name(src.dtype());
      else
        m << "an undefined tensor";
      report.mismatched.push_back(m.str());
    } else {
      to_copy.emplace_back(t, &src);
      report.applied.push_back(n);
    }
    given.erase(it);
  }
  // A tied tensor's other name may be absent: the dict names it once (Note [Shared modules
  // and parameters]).
  for (auto& [n, impl] : absent)
    if (!given_impls.count(impl)) report.missing.push_back(n);
  for (auto& [n, t] : given) report.unexpected.push_back(n);
  if (strict && !report.ok()) {
    std::ostringstream m;
    m << "load_state_dict: the state dict does not match " << type_name() << " (strict)";
    auto list = [&](const char* what, const std::vector<std::string>& names) {
      if (names.empty()) return;
      m << "; " << what << " (" << names.size() << "):";
      for (auto& s : names) m << " " << s << (&s == &names.back() ? "" : ",");
    };
    list("missing", report.missing);
    list("unexpected", report.unexpected);
    list("mismatched", report.mismatched);
    detail::throw_error(m.str());
  }
  NoGradGuard g;
  for (auto& [dst, src] : to_copy) Tensor(dst).assign_(*src);
  return report;
}

int64_t ModuleImpl::parameter_count() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

json ModuleImpl::config() const {
  json j = {{"type", type_name()}, {"options", options()}};
  if (parametrized_) j["parametrizations"] = ParametrizeAccess::config(*this);
  return j;
}

void ModuleImpl::print(std::ostream& out, int indent, const std::string& name) const {
  const std::string pad(static_cast<size_t>(indent), ' ');
  out << pad;
  if (!name.empty()) out << "(" << name << "): ";
  out << type_name() << "(" << extra_repr();
  if (children_.empty()) {
    out << ")";
    const int64_t n = parameter_count();
    if (n) out << "  # " << with_commas(n) << " params";
    out << "\n";
    return;
  }
  out << "\n";
  for (auto& [cn, c] : children_) c->print(out, indent + 2, cn);
  out << pad << ")";
  if (indent == 0) out << "  # " << with_commas(parameter_count()) << " params in total";
  out << "\n";
}

void ModuleImpl::tie(const std::string& name, const Tensor& param) {
  EMBER_CHECK(param.defined(), "tie: the tensor for '", name, "' is undefined (expected a ",
              "parameter of another module, e.g. wte->weight())");
  EMBER_CHECK(param.requires_grad() && param.is_leaf(), "tie: the tensor for '", name,
              "' is not a parameter (expected a leaf that requires grad, e.g. wte->weight())");
  ModuleImpl* owner = this;
  std::string leaf = name;
  for (size_t dot = leaf.find('.'); dot != std::string::npos; dot = leaf.find('.')) {
    owner = owner->child(leaf.substr(0, dot)).get();
    leaf = leaf.substr(dot + 1);
  }
  Tensor* slot = find(owner->params_, leaf);
  EMBER_CHECK(slot && slot->defined(), "tie: ", owner->type_name(), " has no parameter named '",
              leaf, "' (from '", name, "')");
  EMBER_CHECK(slot->shape() == param.shape() && slot->dtype() == param.dtype() &&
                  slot->device() == param.device(),
              "tie: '", name, "' is ", slot->shape().to_string(), " ", dtype_name(slot->dtype()),
              " on ", slot->device().str(), " but the tensor tied to it is ",
              param.shape().to_string(), " ", dtype_name(param.dtype()), " on ",
              param.device().str(), " (expected the same shape, dtype and device)");
  owner->rebind_parameter(leaf, param);  // may refuse: nothing has changed yet
  *slot = param;
}

void ModuleImpl::rebind_parameter(const std::string& name, const Tensor&) {
  detail::throw_error(detail::concat("tie: ", type_name(), " computes with its own handle to '",
                                     name, "' and cannot rebind it (Linear, Bilinear, ",
                                     "Embedding and the convolutions can; a custom module ",
                                     "overrides rebind_parameter)"));
}

Tensor& ModuleImpl::param(const std::string& name) {
  Tensor* t = find(params_, name);
  if (!t && parametrized_) return ParametrizeAccess::value(*this, name);
  EMBER_CHECK(t, type_name(), ": no parameter named '", name, "'");
  return *t;
}

Tensor& ModuleImpl::buffer(const std::string& name) {
  Tensor* t = find(buffers_, name);
  EMBER_CHECK(t, type_name(), ": no buffer named '", name, "'");
  return *t;
}

ModulePtr ModuleImpl::child(const std::string& name) const {
  for (auto& [n, c] : children_)
    if (n == name) return c;
  detail::throw_error(detail::concat(type_name(), ": no child module named '", name, "'"));
}

std::ostream& operator<<(std::ostream& out, const ModuleImpl& m) {
  m.print(out);
  return out;
}
std::ostream& operator<<(std::ostream& out, const Module& m) { return out << *m; }

// ---- registry ----

namespace {
struct Registry {
  std::mutex mutex;
  std::map<std::string, ModuleFactory> factories;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void register_module_type(const std::string& type_name, ModuleFactory factory) {
  EMBER_CHECK(!type_name.empty() && factory, "register_module_type: empty type name or factory");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.factories[type_name] = std::move(factory);
}

void register_builtin_modules();  // src/nn/registry.cpp

bool module_type_registered(const std::string& type_name) {
  register_builtin_modules();  // "Linear" is registered before any nn::build has run
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.factories.count(type_name) != 0;
}

Module build(const json& config) {
  register_builtin_modules();
  EMBER_CHECK(
      config.is_object() && config.contains("type") && config["type"].is_string(),
      "nn::build: config is not a module spec (expected an object with a string \"type\", got ",
      config.dump().substr(0, 200), ")");
  const std::string type = config["type"].get<std::string>();
  ModuleFactory f;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.factories.find(type);
    if (it == r.factories.end()) {
      std::string known;
      for (auto& [n, fn] : r.factories) known += (known.empty() ? "" : ", ") + n;
      detail::throw_error(
          detail::concat("nn::build: unknown module type '", type, "' (known types: ", known,
                         "; register custom modules with nn::register_module_type)"));
    }
    f = it->second;
  }
  try {
    Module m(f(config));
    // A parametrized module's config names its parametrizations (nn/parametrize.hpp).
    if (config.contains("parametrizations"))
      ParametrizeAccess::rebuild(*m, config["parametrizations"]);
    return m;
  } catch (const nlohmann::json::exception& e) {
    detail::throw_error(detail::concat("nn::build: bad options for '", type, "': ", e.what()));
  }
}

}  // namespace ember::nn
