// ember/nn/module.hpp — modules (ARCHITECTURE §6): named parameters, buffers and children
// registered in order, PyTorch state_dict names, train/eval, device moves, config JSON.
//
// A module is used through a handle with reference semantics (copying a handle shares
// the module), as in libtorch:
//   nn::Linear fc(784, 256);            // handle to a LinearImpl
//   Tensor y = fc(x);                   // forward
//   for (auto& [name, p] : fc->named_parameters()) ...   // "weight", "bias"
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "ember/nn/options.hpp"
#include "ember/ops.hpp"
#include "ember/profiler.hpp"
#include "ember/tensor.hpp"

namespace ember::nn {

using json = nlohmann::json;

/// An ordered name → tensor list (the order of registration, as PyTorch's OrderedDict).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
/// A state dict: parameters and buffers by their PyTorch names.
using StateDict = NamedTensors;

/// What load_state_dict found: names applied, missing from the dict, unexpected in it, and
/// names whose shape or dtype differs ("name: expected [..] f32, got [..] f32").
struct LoadReport {
  std::vector<std::string> applied{}, missing{}, unexpected{}, mismatched{};
  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
};

class ModuleImpl;
using ModulePtr = std::shared_ptr<ModuleImpl>;

/// Internal: what nn/parametrize.hpp keeps on a parametrized module, and the hooks module.cpp calls
/// into it (src/nn/parametrize.cpp): the value of a parametrized name for param(), the
/// recomputation before forward, the config entry and its rebuild in nn::build.
struct ParametrizedState;
struct ParametrizeAccess {
  static Tensor& value(ModuleImpl& m, const std::string& name);
  static void recompute(ModuleImpl& m);
  static nlohmann::json config(const ModuleImpl& m);
  static void rebuild(ModuleImpl& m, const nlohmann::json& spec);
  static ParametrizedState* state(const ModuleImpl& m);
  static void set_state(ModuleImpl& m, std::shared_ptr<ParametrizedState> state);
  static NamedTensors& params(ModuleImpl& m);
  static std::vector<std::pair<std::string, ModulePtr>>& children(ModuleImpl& m);
  static void rebind(ModuleImpl& m, const std::string& name, const Tensor& value);
};

/// m.forward(x) the slow way, when a Profiler records or `m` has forward hooks: inside a
/// module range that charges the ops to the module's path, with the pre-hooks before and the
/// hooks after (module.cpp). Handles and containers call it; nothing of it runs otherwise.
Tensor call_forward(ModuleImpl& m, const Tensor& x);

/// A forward pre-hook (PyTorch's register_forward_pre_hook): runs before forward with the
/// module and its input; a returned tensor replaces the input.
using ForwardPreHook =
    std::function<std::optional<Tensor>(ModuleImpl& module, const Tensor& input)>;
/// A forward hook (register_forward_hook): runs after forward with the module, the input (as
/// the pre-hooks left it) and the output; a returned tensor replaces the output.
using ForwardHook = std::function<std::optional<Tensor>(ModuleImpl& module, const Tensor& input,
                                                        const Tensor& output)>;

/// A module's forward hooks, in running order, each with the id its handle removes.
struct ModuleHooks {
  std::vector<std::pair<uint64_t, ForwardPreHook>> pre;
  std::vector<std::pair<uint64_t, ForwardHook>> post;
  uint64_t next_id = 1;
  bool empty() const { return pre.empty() && post.empty(); }
};

/// What register_forward_(pre_)hook returns: remove() unregisters the hook (again: nothing).
/// Dropping the handle leaves the hook in place, as PyTorch's RemovableHandle.
class ModuleHookHandle {
 public:
  ModuleHookHandle() = default;
  void remove();

 private:
  friend class ModuleImpl;
  ModuleHookHandle(std::weak_ptr<ModuleHooks> hooks, uint64_t id)
      : hooks_(std::move(hooks)), id_(id) {}
  std::weak_ptr<ModuleHooks> hooks_;
  uint64_t id_ = 0;
};

/// Internal to the handles below: throws ember::Error saying a module handle of type
/// `handle` (a typeid name) is empty (default-constructed or moved-from).
[[noreturn]] void throw_empty_module_handle(const char* handle);

/// Base of every module. Subclasses register parameters, buffers and children in their
/// constructor (in forward order) and implement forward, type_name and options().
class ModuleImpl : public std::enable_shared_from_this<ModuleImpl> {
 public:
  virtual ~ModuleImpl() = default;

  /// The forward pass on one input.
  virtual Tensor forward(const Tensor& input) = 0;
  /// Type name used by the registry and config() ("Linear", "Conv2d", ...).
  virtual std::string type_name() const = 0;
  /// Constructor arguments as JSON (what the registry factory needs to rebuild the module).
  virtual json options() const { return json::object(); }
  /// One-line description for the summary, e.g. "Linear(in_features=784, out_features=256,
  /// bias=True)".
  virtual std::string extra_repr() const { return ""; }
  /// Called by train()/eval() after the flag changes (for modules with mode-dependent state).
  virtual void on_mode_change() {}

  // ---- fusion (Sequential): a module that is an activation a GEMM epilogue can apply, and
  // a module that can run its forward with such an epilogue ----
  /// The epilogue activation this module is equivalent to (ReLU: Activation::relu), if any.
  virtual std::optional<Activation> as_epilogue() const { return std::nullopt; }
  /// forward(x) followed by `activation` in one kernel, bitwise equal to running the two
  /// modules; an undefined tensor when this module cannot fuse (the default).
  virtual Tensor forward_with_epilogue(const Tensor& x, Activation activation) {
    (void)x;
    (void)activation;
    return Tensor();
  }

  /// Architecture: {"type": ..., "options": {...}, "children": {"name": {...}}}. Containers
  /// (Sequential) put their children in order; nn::build(config()) rebuilds the module.
  virtual json config() const;

  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, ModulePtr>>& named_children() const { return children_; }
  std::vector<ModulePtr> children() const;
  /// Every module in the tree, depth-first, with dotted names ("" for this one).
  std::vector<std::pair<std::string, ModulePtr>> named_modules(
      const std::string& prefix = "") const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Moves parameters and buffers to `device` in place: every handle to them sees the move.
  void to(Device device);
  /// Converts floating parameters and buffers to `dtype` in place.
  void to(DType dtype);
  /// Lays 4-d parameters and buffers out channels_last (5-d: channels_last_3d; contiguous:
  /// both back) in place, as torch's model.to(memory_format=...); convolutions then run NHWC
  /// when their input is channels_last too (docs/vision.md, "Memory format").
  void to(MemoryFormat format);
  /// Drops (or zeroes) the gradients of all parameters.
  void zero_grad(bool set_to_none = true);

  /// Parameters then buffers of each module, depth-first, with PyTorch names ("0.weight").
  StateDict state_dict() const;
  /// Copies values from `sd`. Strict: throws one ember::Error listing every missing and
  /// unexpected name and every shape/dtype mismatch, and changes nothing. Non-strict: applies
  /// what fits and returns the report.
  LoadReport load_state_dict(const StateDict& sd, bool strict = true);

  /// Total parameter count (recursive).
  int64_t parameter_count() const;
  /// PyTorch-style tree with parameter counts.
  void print(std::ostream& out, int indent = 0, const std::string& name = "") const;

  /// Ties parameters: makes the parameter `name` (dotted under this module, e.g.
  /// "lm_head.weight") the very tensor `param` — another module's parameter, such as a token
  /// embedding's weight for a language model's head. Both modules then compute with it, it
  /// has one gradient, parameters() and optimizers list it once, and a checkpoint stores it
  /// once with the other name as an alias (docs/modules.md, "Tied parameters"). `param` must
  /// be a parameter (requires grad) of the replaced one's shape, dtype and device; the module
  /// holding `name` must support rebinding it (Linear, Embedding); otherwise ember::Error and
  /// nothing changes. Assigning to param(name) instead does not tie: the module keeps
  /// computing with its own tensor.
  void tie(const std::string& name, const Tensor& param);

  /// Registers a hook that runs before every forward called through a handle or a container
  /// (not `->forward(x)` itself, as PyTorch's `forward` skips `__call__`'s hooks); prepend
  /// runs it before the ones already there. Modules' own children are called through
  /// containers, so a hook on `encoder_layer->linear1` fires. Register and remove hooks
  /// while no other thread runs this module. Guide: docs/modules.md, "Forward hooks".
  ///   auto h = conv->register_forward_pre_hook([](nn::ModuleImpl&, const Tensor& x) {
  ///     return std::optional<Tensor>(x * 0.5); });
  ModuleHookHandle register_forward_pre_hook(ForwardPreHook hook, bool prepend = false);
  /// Registers a hook that runs after every forward (as above): it sees the input and the
  /// output, and may replace the output. Feature extraction:
  ///   std::vector<Tensor> seen;
  ///   fc->register_forward_hook([&](nn::ModuleImpl&, const Tensor&, const Tensor& y) {
  ///     seen.push_back(y.detach()); return std::optional<Tensor>(); });
  ModuleHookHandle register_forward_hook(ForwardHook hook, bool prepend = false);
  /// Whether a forward hook or pre-hook is registered on this module (not its children).
  bool has_forward_hooks() const { return hooks_ && !hooks_->empty(); }

  /// Parameter / buffer / child by (non-dotted) name; throws when absent. A parametrized
  /// name (nn/parametrize.hpp) gives its value, computed now from the originals.
  Tensor& param(const std::string& name);
  Tensor& buffer(const std::string& name);
  ModulePtr child(const std::string& name) const;

 protected:
  /// Registers a trainable parameter (moved to the Persistent pool, requires_grad set).
  /// An undefined tensor registers an absent optional parameter (e.g. bias=false): skipped.
  Tensor& register_parameter(const std::string& name, const Tensor& init);
  /// The same; a temporary becomes the parameter without a copy (parameter(Tensor&&)).
  Tensor& register_parameter(const std::string& name, Tensor&& init);
  /// Registers state that is saved but not trained (e.g. running_mean), Persistent pool.
  Tensor& register_buffer(const std::string& name, const Tensor& init);
  ModulePtr register_module(const std::string& name, ModulePtr module);
  /// tie() replaced this module's parameter `name` with `param`: a module that keeps its own
  /// handle to that parameter points it at `param` here. The default refuses (ember::Error
  /// naming the module type): a module that cannot rebind is never left half tied.
  virtual void rebind_parameter(const std::string& name, const Tensor& param);
  /// A module that computes with its own handles to parameters (and so can rebind them)
  /// calls this first in forward: when a parametrization (nn/parametrize.hpp) replaced one,
  /// it recomputes the value from the originals and rebinds the handle to it. One pointer
  /// test when nothing is parametrized.
  void refresh_parametrizations() {
    if (parametrized_) [[unlikely]]
      ParametrizeAccess::recompute(*this);
  }

  bool training_ = true;

 private:
  friend struct ParametrizeAccess;
  friend Tensor call_forward(ModuleImpl& m, const Tensor& x);
  std::shared_ptr<ParametrizedState> parametrized_;
  std::shared_ptr<ModuleHooks> hooks_;
  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, ModulePtr>> children_;
};

std::ostream& operator<<(std::ostream& out, const ModuleImpl& m);

/// Type-erased handle to any module: Module m = nn::Linear(2, 3); m(x); m->parameters().
class Module {
 public:
  Module() = default;
  Module(ModulePtr impl) : impl_(std::move(impl)) {}  // NOLINT: handles convert freely
  template <typename Holder, typename = decltype(std::declval<Holder>().ptr())>
  Module(const Holder& h) : impl_(h.ptr()) {}  // NOLINT

  /// forward, ->, * on an empty handle (Module m; or moved-from) throw ember::Error.
  Tensor operator()(const Tensor& x) const;
  ModuleImpl* operator->() const { return &checked(); }
  ModuleImpl& operator*() const { return checked(); }
  const ModulePtr& ptr() const { return impl_; }
  bool defined() const { return impl_ != nullptr; }

 private:
  ModuleImpl& checked() const {
    if (!impl_) [[unlikely]]
      throw_empty_module_handle("nn::Module");
    return *impl_;
  }
  ModulePtr impl_;
};

std::ostream& operator<<(std::ostream& out, const Module& m);

inline Tensor Module::operator()(const Tensor& x) const {
  ModuleImpl& m = checked();
  if (detail::profiling() || m.has_forward_hooks()) [[unlikely]]
    return call_forward(m, x);
  return m.forward(x);
}

/// m.forward(x) with its hooks, inside a module range while a Profiler records: what
/// containers and modules call for their children.
inline Tensor run_forward(ModuleImpl& m, const Tensor& x) {
  if (detail::profiling() || m.has_forward_hooks()) [[unlikely]]
    return call_forward(m, x);
  return m.forward(x);
}

/// Typed handle base: class Linear : public ModuleHolder<LinearImpl> { using
/// ModuleHolder::ModuleHolder; };
template <typename Impl>
class ModuleHolder {
 public:
  explicit ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  /// Constructs the module: nn::Linear fc(784, 256) forwards to LinearImpl(784, 256).
  template <typename... Args>
  requires(!(sizeof...(Args) == 1 && (std::is_base_of_v<ModuleHolder, std::decay_t<Args>> &&
                                      ...))) explicit ModuleHolder(Args&&... args)
      : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {}
  /// forward, ->, * on an empty handle (a moved-from holder) throw ember::Error.
  Tensor operator()(const Tensor& x) const {
    Impl& m = checked();
    if (detail::profiling() || m.has_forward_hooks()) [[unlikely]]
      return call_forward(m, x);
    return m.forward(x);
  }
  Impl* operator->() const { return &checked(); }
  Impl& operator*() const { return checked(); }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool defined() const { return impl_ != nullptr; }
  operator Module() const { return Module(impl_); }  // NOLINT

 private:
  Impl& checked() const {
    if (!impl_) [[unlikely]]
      throw_empty_module_handle(typeid(Impl).name());
    return *impl_;
  }
  std::shared_ptr<Impl> impl_;
};

// ---- the registry: config JSON -> module, data only (no code from a file ever runs) ----

using ModuleFactory = std::function<ModulePtr(const json& config)>;
/// Registers a factory for `type_name`; user modules call this once (e.g. at startup).
/// The factory receives the whole config object ({"type", "options", "children"}).
void register_module_type(const std::string& type_name, ModuleFactory factory);
bool module_type_registered(const std::string& type_name);
/// Rebuilds a module from config() JSON; unknown types are a clear error listing known ones.
Module build(const json& config);

}  // namespace ember::nn
