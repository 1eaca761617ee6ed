// ember/optim/optimizer.hpp — the Optimizer base (ARCHITECTURE §6): parameter groups with
// their own options, step(), zero_grad(), and a state dict in PyTorch's layout.
//
//   optim::Adam opt(net->parameters(), {.lr = 1e-3});
//   opt.add_param_group({head->parameters(), optim::AdamOptions{.lr = 1e-2}});
//   for (...) { opt.zero_grad(); loss(net(x), y).backward(); opt.step(); }
//   optim::OptimizerState s = opt.state_dict();   // meta JSON + named tensors
//
// Updates are in place: every parameter keeps its buffer (data_ptr() never changes) and
// optimizer state lives in the Persistent pool next to its parameter (ARCHITECTURE §3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/optim/options_fields.hpp"
#include "ember/tensor.hpp"

namespace ember::optim {

using json = nlohmann::json;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// An optimizer's state in checkpoint form.
/// meta (PyTorch's layout, indices count parameters across groups in order):
///   {"type": "Adam",
///    "state": {"0": {"step": 10}, "3": {"step": 10}},
///    "param_groups": [{"lr": 0.001, "betas": [0.9, 0.999], ..., "params": [0, 1, 2]}]}
/// tensors: "state.<index>.<name>", e.g. "state.3.exp_avg" (safetensors-ready names).
/// Per-parameter scalars sit beside "step" in meta.state (NAdam's "mu_product"); with
/// gradient accumulation meta also holds {"accumulate": {"steps", "count", "mode"}}.
/// The tensors are the live state (not copies): serialise or clone them before stepping on.
struct OptimizerState {
  json meta{};
  NamedTensors tensors{};
};

/// State of one parameter: steps taken and its named state tensors (Persistent pool, on the
/// parameter's device, with its dtype and shape).
struct ParamState {
  int64_t step = 0;
  NamedTensors tensors{};
  /// Scalars of the state besides step, e.g. NAdam's {"mu_product", 0.87} (meta, not tensors).
  std::vector<std::pair<std::string, double>> scalars{};
  /// The tensor named `name`, or nullptr.
  Tensor* find(const std::string& name);
  const Tensor* find(const std::string& name) const;
  /// The scalar named `name`, or nullptr.
  double* find_scalar(const std::string& name);
  bool empty() const { return step == 0 && tensors.empty() && scalars.empty(); }
};

/// One group of parameters and the hyperparameters that apply to them.
/// Example: opt.add_param_group({head->parameters(), optim::SGDOptions{.lr = 0.1}});
template <typename Options>
struct ParamGroup {
  std::vector<Tensor> params{};
  Options options{};
  /// PyTorch's 'initial_lr': the lr the first LR scheduler saw (schedulers set and read it).
  std::optional<double> initial_lr = std::nullopt;
};

/// How accumulated gradients combine (Optimizer::set_accumulate_steps).
enum class GradAccumulation : uint8_t {
  mean,  // the update sees (g_1 + ... + g_k) / k: k micro-batches act as one k-times batch
  sum,   // the update sees g_1 + ... + g_k
};

/// Base of every optimizer. The generic view of the groups here is what schedulers, the
/// training loop and checkpoints use; typed access is on TypedOptimizer::param_groups().
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient (parameters without one are skipped).
  /// With accumulate_steps k > 1 only every k-th call updates (see set_accumulate_steps).
  void step();
  /// PyTorch's step(closure): `closure` clears the gradients, recomputes the loss, calls
  /// backward() and returns the loss. LBFGS calls it several times per step; the other
  /// optimizers call it once, then step(). Returns the first loss the closure gave.
  ///   double loss = opt.step([&] { opt.zero_grad(); Tensor l = f(x); l.backward();
  ///                                return l.item<double>(); });
  virtual double step(const std::function<double()>& closure);
  /// GradScaler::step's form of step(): the update is skipped on the device where
  /// *found_inf != 0 (f32 [1] on the parameters' device; no host read, so it can be captured)
  /// and not counted (Note [Skipped steps] in src/kernels/optim.hpp). Only for optimizers with
  /// skips_on_device(); others are refused (GradScaler reads found_inf on the host for them).
  void step_unless_found_inf(const Tensor& found_inf);
  /// Whether step_unless_found_inf is supported: the fused Adam, AdamW and SGD.
  virtual bool skips_on_device() const { return false; }
  /// Steps skipped on the device since the optimizer was made or its state loaded (i64 [1] on
  /// the parameters' device; undefined before the first step_unless_found_inf). state_dict()
  /// subtracts it from each parameter's step, as PyTorch counts.
  const Tensor& skipped_steps() const { return skipped_steps_; }
  /// Drops every parameter's gradient (set_to_none) or zeroes it in place. While gradients
  /// accumulate (the last step() call did not update) it does nothing, so the next
  /// backward() adds to them.
  void zero_grad(bool set_to_none = true);
  /// "SGD", "Adam", "AdamW" (stored in the state dict and checked on load).
  virtual std::string type_name() const = 0;
  /// A token that expires when the optimizer is destroyed. LR schedulers hold it weakly and
  /// refuse to touch a destroyed optimizer (LRScheduler::optimizer() throws then).
  std::weak_ptr<const void> alive_token() const { return alive_; }

  /// Gradient accumulation (ggmlR's): step() updates on every k-th call only; the calls in
  /// between keep the gradients (zero_grad() skips them) so backward() sums k micro-batches.
  /// The k-th call scales the summed .grad in place by 1/k (GradAccumulation::mean, the
  /// default) or leaves the sum (sum), then updates. k = 1 (default) updates every call.
  ///   opt.set_accumulate_steps(4);   // 4 micro-batches of 8 train as one batch of 32
  void set_accumulate_steps(int64_t k, GradAccumulation mode = GradAccumulation::mean);
  int64_t accumulate_steps() const { return accumulate_steps_; }
  GradAccumulation accumulate_mode() const { return accumulate_mode_; }
  /// step() calls since the last update (0 <= count < k; kept in the state dict).
  int64_t accumulate_count() const { return accumulate_count_; }

  /// PyTorch's repr: the type, then each group's hyperparameters, e.g.
  ///   Adam (
  ///   Parameter Group 0
  ///       amsgrad: false
  ///       betas: [0.9, 0.999]
  ///       ...
  ///   )
  std::string to_string() const;

  // ---- the groups, generically ----
  virtual size_t param_group_count() const = 0;
  virtual const std::vector<Tensor>& group_params(size_t group) const = 0;
  virtual double lr(size_t group) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;
  virtual std::optional<double> initial_lr(size_t group) const = 0;
  virtual void set_initial_lr(size_t group, std::optional<double> lr) = 0;
  /// Group `group`'s hyperparameters with PyTorch's keys, e.g. {"lr", "betas", "eps", ...}.
  virtual json group_options(size_t group) const = 0;
  /// Sets hyperparameters of group `group` from PyTorch keys (validated; keys absent keep
  /// their value), e.g. opt.update_group_options(0, {{"momentum", 0.85}}). Cyclic schedulers
  /// write momentum / betas through this.
  void update_group_options(size_t group, const json& options);
  /// The lr of every group, in order.
  std::vector<double> lrs() const;
  /// Every parameter, group by group.
  std::vector<Tensor> parameters() const;

  /// State of `param` (by identity), or nullptr before its first step.
  const ParamState* state(const Tensor& param) const;

  /// The state in checkpoint form (see OptimizerState).
  virtual OptimizerState state_dict() const;
  /// Restores hyperparameters and per-parameter state from `state`. The group and parameter
  /// counts and every tensor's shape must match this optimizer's; tensors are copied (cast
  /// to the parameter's dtype, moved to its device, Persistent pool). On any error it throws
  /// ember::Error and changes nothing.
  virtual void load_state_dict(const OptimizerState& state);

  /// State tensor names of a parameter: those every stepped parameter must have, and those
  /// it may have.
  struct StateSpec {
    std::vector<std::string> required;
    std::vector<std::string> optional;
    std::vector<std::string> scalars = {};  // meta scalars every state entry has
  };

 protected:
  Optimizer() = default;

  /// The update itself (step() decides when it runs).
  virtual void update() = 0;

  /// The state tensors a parameter of `group` has.
  virtual StateSpec state_spec(size_t group) const = 0;
  /// Validates `options` (keys absent keep the group's value) as group `group`'s
  /// hyperparameters; applies them when `apply`. Throws ember::Error naming the bad value.
  virtual void set_group_options(size_t group, const json& options, bool apply) = 0;

  /// Refuses undefined, non-floating or non-leaf tensors and parameters already optimized.
  void check_new_params(const std::vector<Tensor>& params) const;
  /// Refuses a constructor's parameter list with no tensor in it (PyTorch: "optimizer got an
  /// empty parameter list"): a module that forgot to register its layers trains nothing.
  void check_not_empty() const;
  /// Refuses a learning rate below 0 or NaN.
  void check_lr(double lr) const;
  /// The state of parameter `index` of group `group` (grows the table as groups grow).
  ParamState& state_slot(size_t group, size_t index);

  std::vector<std::vector<ParamState>> state_;  // [group][param]

  /// Loss scaling for the fused updates (backend::AdamArgs/SgdArgs): inside
  /// step_unless_found_inf its found_inf's data, else null; the skipped counter's data once it
  /// exists, else null.
  const float* amp_found_inf() const;
  const int64_t* amp_skipped_steps() const;

 private:
  void step_impl(const Tensor* found_inf);

  Tensor skipped_steps_;
  const Tensor* found_inf_ = nullptr;  // set during step_unless_found_inf
  // Expires with the optimizer: a captured step that replays step() refuses after that, and
  // so do the schedulers attached to it (alive_token()).
  std::shared_ptr<const void> alive_ = std::make_shared<int>(0);
  int64_t accumulate_steps_ = 1;
  int64_t accumulate_count_ = 0;
  GradAccumulation accumulate_mode_ = GradAccumulation::mean;
};

/// Prints opt.to_string().
std::ostream& operator<<(std::ostream& os, const Optimizer& opt);

/// Holds typed groups for an optimizer whose hyperparameters are `Options`: an options struct
/// with a fields() list (ember/optim/options_fields.hpp), which gives its JSON and its
/// validate_options(options, who).
template <typename Options>
class TypedOptimizer : public Optimizer {
 public:
  using Group = ParamGroup<Options>;

  /// Adds a group (options validated; a parameter may be in one group only).
  void add_param_group(Group group) {
    validate_options(group.options, type_name());
    check_new_params(group.params);
    groups_.push_back(std::move(group));
    state_.resize(groups_.size());
  }
  /// Adds a group that uses the constructor's default options.
  void add_param_group(std::vector<Tensor> params) {
    add_param_group(Group{std::move(params), defaults_});
  }
  std::vector<Group>& param_groups() { return groups_; }
  const std::vector<Group>& param_groups() const { return groups_; }
  const Options& defaults() const { return defaults_; }

  size_t param_group_count() const override { return groups_.size(); }
  const std::vector<Tensor>& group_params(size_t group) const override { return at(group).params; }
  double lr(size_t group) const override { return at(group).options.lr; }
  /// Refuses lr < 0 or NaN, as the constructors do (a scheduler writes through this too).
  void set_lr(size_t group, double lr) override {
    check_lr(lr);
    at(group).options.lr = lr;
  }
  std::optional<double> initial_lr(size_t group) const override { return at(group).initial_lr; }
  void set_initial_lr(size_t group, std::optional<double> lr) override {
    at(group).initial_lr = lr;
  }
  json group_options(size_t group) const override { return json(at(group).options); }

 protected:
  explicit TypedOptimizer(Options defaults) : defaults_(std::move(defaults)) {}

  /// A constructor's work: validates the defaults, adds every group, refuses an empty list.
  void init_groups(std::vector<Group> groups) {
    validate_options(defaults_, type_name());
    for (Group& g : groups) add_param_group(std::move(g));
    check_not_empty();
  }

  void set_group_options(size_t group, const json& options, bool apply) override {
    Options o = at(group).options;
    try {
      read_fields(options, o, type_name());
    } catch (const json::exception& e) {
      EMBER_CHECK(false, type_name(), ": bad options for group ", group, " (", e.what(), ")");
    }
    validate_options(o, type_name());
    if (apply) at(group).options = o;
  }

  Group& at(size_t group) {
    EMBER_CHECK(group < groups_.size(), type_name(), ": no parameter group ", group, " (got ",
                groups_.size(), " groups)");
    return groups_[group];
  }
  const Group& at(size_t group) const { return const_cast<TypedOptimizer*>(this)->at(group); }

  std::vector<Group> groups_;
  Options defaults_;
};

}  // namespace ember::optim
