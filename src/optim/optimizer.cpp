// src/optim/optimizer.cpp — the Optimizer base: zero_grad, parameter checks, the state
// table, and state_dict / load_state_dict in PyTorch's layout (see OptimizerState).
#include "ember/optim/optimizer.hpp"

#include <algorithm>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "core/capture.hpp"
#include "ember/autograd.hpp"
#include "ember/profiler.hpp"

namespace ember::optim {

Tensor* ParamState::find(const std::string& name) {
  for (auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

const Tensor* ParamState::find(const std::string& name) const {
  return const_cast<ParamState*>(this)->find(name);
}

double* ParamState::find_scalar(const std::string& name) {
  for (auto& [n, v] : scalars)
    if (n == name) return &v;
  return nullptr;
}

void Optimizer::step() { step_impl(nullptr); }

void Optimizer::step_unless_found_inf(const Tensor& found_inf) {
  EMBER_CHECK(skips_on_device(), type_name(),
              ".step_unless_found_inf: this optimizer cannot skip a step on the device "
              "(expected Adam, AdamW or SGD; GradScaler::step reads found_inf on the host for it)");
  EMBER_CHECK(found_inf.defined() && found_inf.dtype() == DType::f32 && found_inf.numel() == 1,
              type_name(), ".step_unless_found_inf: found_inf must be an f32 tensor of 1 element");
  for (const Tensor& p : parameters())
    EMBER_CHECK(p.device() == found_inf.device(), type_name(),
                ".step_unless_found_inf: a parameter is on ", p.device().str(),
                " but found_inf on ", found_inf.device().str(), " (expected one device)");
  if (!skipped_steps_.defined() || skipped_steps_.device() != found_inf.device()) {
    NoGradGuard no_grad;
    PoolGuard persistent(Pool::Persistent);
    skipped_steps_ = zeros({1}, {.dtype = DType::i64, .device = found_inf.device()});
  }
  step_impl(&found_inf);
}

const float* Optimizer::amp_found_inf() const {
  return found_inf_ ? static_cast<const float*>(found_inf_->data_ptr()) : nullptr;
}

const int64_t* Optimizer::amp_skipped_steps() const {
  return skipped_steps_.defined() ? static_cast<const int64_t*>(skipped_steps_.data_ptr())
                                  : nullptr;
}

void Optimizer::step_impl(const Tensor* found_inf) {
  const detail::ProfileScope profile(ProfileKind::range, "optimizer.step");
  // Inside a captured step the replay runs this again on the host (train/capture.hpp).
  std::vector<const void*> captured;  // the parameters' buffers, when capturing
  if (ember::detail::active_capture())
    for (const Tensor& p : parameters()) captured.push_back(p.data_ptr());
  const Tensor found = found_inf ? *found_inf : Tensor();  // the replay's own handle
  const ember::detail::ReplayedHostStep replayed("optimizer", alive_, [this, captured, found] {
    std::vector<const void*> now;
    for (const Tensor& p : parameters()) now.push_back(p.data_ptr());
    EMBER_CHECK(now == captured, type_name(),
                ": the parameters changed since the step was "
                "captured (",
                captured.size(), " then, ", now.size(),
                " now, or one moved); capture the step again");
    step_impl(found.defined() ? &found : nullptr);
  });
  struct Reset {  // found_inf_ is set for this call only, even when update() throws
    const Tensor*& slot;
    ~Reset() { slot = nullptr; }
  } reset{found_inf_};
  found_inf_ = found_inf;
  EMBER_CHECK(accumulate_steps_ == 1 || ember::detail::active_capture() == nullptr, type_name(),
              ".step: gradient accumulation (accumulate_steps ", accumulate_steps_,
              ") cannot be captured; capture a step that accumulates by itself, or step eagerly");
  if (accumulate_steps_ > 1) {
    accumulate_count_ += 1;
    if (accumulate_count_ < accumulate_steps_) return;  // keep summing into .grad
    accumulate_count_ = 0;
    if (accumulate_mode_ == GradAccumulation::mean) {
      NoGradGuard no_grad;
      const double k = static_cast<double>(accumulate_steps_);
      for (size_t g = 0; g < param_group_count(); ++g)
        for (const Tensor& p : group_params(g)) {
          Tensor grad = p.grad();
          if (grad.defined()) grad.mul_(1.0 / k);
        }
    }
  }
  update();
}

double Optimizer::step(const std::function<double()>& closure) {
  EMBER_CHECK(static_cast<bool>(closure), type_name(),
              ".step: got an empty closure (expected a function that recomputes the loss)");
  const bool previous = grad_mode_enabled();
  set_grad_mode(true);  // as torch.enable_grad(): the closure records its graph
  double loss = 0.0;
  try {
    loss = closure();
  } catch (...) {
    set_grad_mode(previous);
    throw;
  }
  set_grad_mode(previous);
  step();
  return loss;
}

void Optimizer::set_accumulate_steps(int64_t k, GradAccumulation mode) {
  EMBER_CHECK(k >= 1, type_name(), ": invalid accumulate_steps ", k,
              " (expected k >= 1; 1 updates on every step)");
  accumulate_steps_ = k;
  accumulate_mode_ = mode;
  accumulate_count_ = 0;
}

void Optimizer::update_group_options(size_t group, const json& options) {
  EMBER_CHECK(group < param_group_count(), type_name(), ": no parameter group ", group, " (got ",
              param_group_count(), " groups)");
  EMBER_CHECK(options.is_object(), type_name(),
              ".update_group_options: expected a JSON object (got ", options.dump(), ")");
  set_group_options(group, options, /*apply=*/true);  // validates everything before applying
}

namespace {

// A JSON value as Python prints it: true -> True, [a, b] -> (a, b), null -> None.
std::string python_repr(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string out = "(";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_repr(v[i]);
    return out + ")";
  }
  return v.dump();
}

}  // namespace

std::string Optimizer::to_string() const {
  std::ostringstream out;
  out << type_name() << " (";
  for (size_t g = 0; g < param_group_count(); ++g) {
    out << "\nParameter Group " << g;
    json options = group_options(g);
    if (std::optional<double> initial = initial_lr(g)) options["initial_lr"] = *initial;
    // std::map order: sorted keys, as PyTorch's repr.
    std::map<std::string, json> sorted;
    for (const auto& [key, value] : options.items()) sorted[key] = value;
    for (const auto& [key, value] : sorted) out << "\n    " << key << ": " << python_repr(value);
  }
  if (accumulate_steps_ > 1)
    out << "\nAccumulate " << accumulate_steps_ << " steps ("
        << (accumulate_mode_ == GradAccumulation::mean ? "mean" : "sum") << ")";
  out << "\n)";
  return out.str();
}

std::ostream& operator<<(std::ostream& os, const Optimizer& opt) { return os << opt.to_string(); }

void Optimizer::zero_grad(bool set_to_none) {
  const detail::ProfileScope profile(ProfileKind::range, "optimizer.zero_grad");
  if (accumulate_count_ > 0) return;  // mid-accumulation: the next backward adds to .grad
  for (size_t g = 0; g < param_group_count(); ++g)
    for (const Tensor& p : group_params(g)) p.zero_grad(set_to_none);
}

std::vector<double> Optimizer::lrs() const {
  std::vector<double> out;
  for (size_t g = 0; g < param_group_count(); ++g) out.push_back(lr(g));
  return out;
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (size_t g = 0; g < param_group_count(); ++g)
    for (const Tensor& p : group_params(g)) out.push_back(p);
  return out;
}

const ParamState* Optimizer::state(const Tensor& param) const {
  if (!param.defined()) return nullptr;
  for (size_t g = 0; g < param_group_count() && g < state_.size(); ++g) {
    const std::vector<Tensor>& params = group_params(g);
    for (size_t i = 0; i < params.size() && i < state_[g].size(); ++i)
      if (params[i].is_same(param)) return state_[g][i].empty() ? nullptr : &state_[g][i];
  }
  return nullptr;
}

void Optimizer::check_new_params(const std::vector<Tensor>& params) const {
  const std::string who = type_name();
  std::set<const TensorImpl*> seen;
  for (size_t g = 0; g < param_group_count(); ++g)
    for (const Tensor& p : group_params(g)) seen.insert(detail::TensorAccess::impl(p));
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    EMBER_CHECK(p.defined(), who, ": parameter ", i, " of the new group is an undefined tensor");
    EMBER_CHECK(is_floating(p.dtype()), who, ": parameter ", i, " has dtype ",
                dtype_name(p.dtype()), " (expected a floating dtype)");
    EMBER_CHECK(p.is_leaf(), who, ": parameter ", i,
                " is not a leaf (got a tensor computed from others; optimize leaves only)");
    EMBER_CHECK(seen.insert(detail::TensorAccess::impl(p)).second, who, ": parameter ", i,
                " appears more than once (a parameter may be in one group only)");
  }
}

void Optimizer::check_not_empty() const {
  size_t count = 0;
  for (size_t g = 0; g < param_group_count(); ++g) count += group_params(g).size();
  EMBER_CHECK(count > 0, type_name(),
              ": optimizer got an empty parameter list (expected at least one tensor; a custom "
              "module must register its parameters and submodules, e.g. with register_module)");
}

void Optimizer::check_lr(double lr) const {
  EMBER_CHECK(lr >= 0.0, type_name(), ": invalid learning rate ", lr, " (expected lr >= 0)");
}

ParamState& Optimizer::state_slot(size_t group, size_t index) {
  if (state_.size() <= group) state_.resize(group + 1);
  if (state_[group].size() <= index) state_[group].resize(index + 1);
  return state_[group][index];
}

// ---- state dict ----

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  json state = json::object();
  // PyTorch does not count a step GradScaler skipped (Note [Skipped steps]): one host read.
  const int64_t skipped = skipped_steps_.defined() ? skipped_steps_.item<int64_t>() : 0;
  json groups = json::array();
  int64_t index = 0;
  for (size_t g = 0; g < param_group_count(); ++g) {
    json group = group_options(g);
    if (std::optional<double> initial = initial_lr(g)) group["initial_lr"] = *initial;
    json ids = json::array();
    const size_t count = group_params(g).size();
    for (size_t i = 0; i < count; ++i, ++index) {
      ids.push_back(index);
      if (g >= state_.size() || i >= state_[g].size() || state_[g][i].empty()) continue;
      const ParamState& s = state_[g][i];
      const std::string key = std::to_string(index);
      state[key] = {{"step", std::max<int64_t>(s.step - skipped, 0)}};
      for (const auto& [name, v] : s.scalars) state[key][name] = v;
      for (const auto& [name, t] : s.tensors)
        out.tensors.emplace_back("state." + key + "." + name, t);
    }
    group["params"] = ids;
    groups.push_back(group);
  }
  out.meta = {{"type", type_name()}, {"state", state}, {"param_groups", groups}};
  if (accumulate_steps_ > 1)
    out.meta["accumulate"] = {
        {"steps", accumulate_steps_},
        {"count", accumulate_count_},
        {"mode", accumulate_mode_ == GradAccumulation::mean ? "mean" : "sum"}};
  return out;
}

namespace {

// Parses a non-negative decimal integer; false for anything else.
bool parse_index(const std::string& text, int64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

}  // namespace

void Optimizer::load_state_dict(const OptimizerState& sd) {
  const std::string who = type_name() + ".load_state_dict";
  const json& meta = sd.meta;
  EMBER_CHECK(meta.is_object() && meta.contains("param_groups") && meta.contains("state"), who,
              ": meta must be an object with 'state' and 'param_groups' (got ",
              meta.dump().substr(0, 80), ")");
  if (meta.contains("type")) {
    EMBER_CHECK(meta["type"].is_string() && meta["type"].get<std::string>() == type_name(), who,
                ": the state is for another optimizer (got type ", meta["type"].dump(),
                ", expected \"", type_name(), "\")");
  }
  const json& groups = meta["param_groups"];
  EMBER_CHECK(groups.is_array() && groups.size() == param_group_count(), who,
              ": parameter group count mismatch (got ", groups.is_array() ? groups.size() : 0,
              " groups in the state, expected ", param_group_count(), ")");

  // Saved index -> (group, position); hyperparameters checked without applying.
  std::map<int64_t, std::pair<size_t, size_t>> where;
  for (size_t g = 0; g < groups.size(); ++g) {
    const json& group = groups[g];
    EMBER_CHECK(group.is_object() && group.contains("params") && group["params"].is_array(), who,
                ": param_groups[", g, "] must be an object with a 'params' list");
    const json& ids = group["params"];
    EMBER_CHECK(ids.size() == group_params(g).size(), who, ": group ", g,
                " parameter count mismatch (got ", ids.size(), " in the state, expected ",
                group_params(g).size(), ")");
    for (size_t i = 0; i < ids.size(); ++i) {
      EMBER_CHECK(ids[i].is_number_integer(), who, ": param_groups[", g, "].params[", i,
                  "] is not an integer (got ", ids[i].dump(), ")");
      const int64_t id = ids[i].get<int64_t>();
      EMBER_CHECK(where.emplace(id, std::make_pair(g, i)).second, who, ": parameter index ", id,
                  " appears twice in param_groups");
    }
    json options = group;
    options.erase("params");
    options.erase("initial_lr");
    set_group_options(g, options, /*apply=*/false);
    if (group.contains("initial_lr"))
      EMBER_CHECK(group["initial_lr"].is_number(), who, ": param_groups[", g,
                  "].initial_lr is not a number (got ", group["initial_lr"].dump(), ")");
  }

  // Gradient accumulation: steps, count and mode must form a valid counter.
  int64_t acc_steps = 1, acc_count = 0;
  GradAccumulation acc_mode = accumulate_mode_;
  if (meta.contains("accumulate")) {
    const json& a = meta["accumulate"];
    EMBER_CHECK(a.is_object() && a.contains("steps") && a["steps"].is_number_integer() &&
                    a.value("count", json(0)).is_number_integer(),
                who, ": 'accumulate' must be {\"steps\": k, \"count\": c, \"mode\": ...} (got ",
                a.dump(), ")");
    acc_steps = a["steps"].get<int64_t>();
    acc_count = a.value("count", json(0)).get<int64_t>();
    const std::string mode = a.value("mode", std::string("mean"));
    EMBER_CHECK(mode == "mean" || mode == "sum", who, ": unknown accumulate mode \"", mode,
                "\" (expected \"mean\" or \"sum\")");
    acc_mode = mode == "mean" ? GradAccumulation::mean : GradAccumulation::sum;
    EMBER_CHECK(acc_steps >= 1 && acc_count >= 0 && acc_count < acc_steps, who,
                ": invalid accumulate counter (got steps ", acc_steps, ", count ", acc_count,
                "; expected steps >= 1 and 0 <= count < steps)");
  }

  // Per-parameter steps.
  std::map<int64_t, int64_t> steps;
  std::map<int64_t, std::vector<std::pair<std::string, double>>> scalars;
  const json& state = meta["state"];
  EMBER_CHECK(state.is_object(), who, ": 'state' must be an object keyed by parameter index");
  for (const auto& [key, entry] : state.items()) {
    int64_t id = -1;
    EMBER_CHECK(parse_index(key, &id) && where.count(id), who, ": state entry '", key,
                "' names no parameter (expected an index in 0..", where.size() - 1, ")");
    int64_t step = 0;
    if (entry.is_object() && entry.contains("step")) {
      const json& s = entry["step"];
      EMBER_CHECK(s.is_number() && s.get<double>() >= 0 &&
                      s.get<double>() == static_cast<double>(s.get<int64_t>()),
                  who, ": state.", key, ".step must be a whole number >= 0 (got ", s.dump(), ")");
      step = s.get<int64_t>();
    }
    steps[id] = step;
    for (const std::string& name : state_spec(where.at(id).first).scalars) {
      EMBER_CHECK(entry.is_object() && entry.contains(name) && entry[name].is_number(), who,
                  ": state.", key, ".", name, " must be a number (got ",
                  entry.is_object() && entry.contains(name) ? entry[name].dump() : "nothing", ")");
      scalars[id].emplace_back(name, entry[name].get<double>());
    }
  }

  // Tensors: names, shapes, required entries.
  std::map<int64_t, NamedTensors> tensors;
  for (const auto& [name, t] : sd.tensors) {
    const size_t dot = name.find('.', 6);
    int64_t id = -1;
    EMBER_CHECK(name.rfind("state.", 0) == 0 && dot != std::string::npos &&
                    parse_index(name.substr(6, dot - 6), &id),
                who, ": tensor name '", name, "' is not of the form state.<index>.<name>");
    const std::string leaf = name.substr(dot + 1);
    EMBER_CHECK(steps.count(id), who, ": tensor '", name, "' names parameter ", id,
                ", which has no entry in meta.state");
    const auto [g, i] = where.at(id);
    const StateSpec spec = state_spec(g);
    EMBER_CHECK(contains(spec.required, leaf) || contains(spec.optional, leaf), who,
                ": unexpected state tensor '", name, "' for ", type_name());
    EMBER_CHECK(t.defined(), who, ": tensor '", name, "' is undefined");
    const Tensor& p = group_params(g)[i];
    EMBER_CHECK(t.shape() == p.shape(), who, ": tensor '", name, "' has shape ",
                t.shape().to_string(), ", expected ", p.shape().to_string(),
                " (the shape of parameter ", id, ")");
    EMBER_CHECK(is_floating(t.dtype()), who, ": tensor '", name, "' has dtype ",
                dtype_name(t.dtype()), " (expected a floating dtype)");
    tensors[id].emplace_back(leaf, t);
  }
  for (const auto& [id, step] : steps) {
    const auto [g, i] = where.at(id);
    for (const std::string& name : state_spec(g).required) {
      bool found = false;
      for (const auto& [n, t] : tensors[id]) found = found || n == name;
      EMBER_CHECK(found, who, ": missing state tensor 'state.", id, ".", name, "' (parameter ", id,
                  " has a state entry)");
    }
  }

  // Everything checked: build the new state, then apply.
  std::vector<std::vector<ParamState>> fresh(param_group_count());
  for (size_t g = 0; g < fresh.size(); ++g) fresh[g].resize(group_params(g).size());
  {
    NoGradGuard no_grad;
    PoolGuard persistent(Pool::Persistent);
    for (const auto& [id, step] : steps) {
      const auto [g, i] = where.at(id);
      const Tensor& p = group_params(g)[i];
      ParamState& s = fresh[g][i];
      s.step = step;
      s.scalars = scalars[id];
      for (const auto& [name, t] : tensors[id]) {
        Tensor copy = empty(p.shape(), {.dtype = p.dtype(), .device = p.device()});
        copy.copy_(t);
        s.tensors.emplace_back(name, copy);
      }
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    json options = groups[g];
    options.erase("params");
    options.erase("initial_lr");
    set_group_options(g, options, /*apply=*/true);
    set_initial_lr(g, groups[g].contains("initial_lr")
                          ? std::optional<double>(groups[g]["initial_lr"].get<double>())
                          : std::nullopt);
  }
  state_ = std::move(fresh);
  if (skipped_steps_.defined()) {  // the loaded steps count only the steps taken
    NoGradGuard no_grad;
    skipped_steps_.zero_();
  }
  accumulate_steps_ = acc_steps;
  accumulate_count_ = acc_count;
  accumulate_mode_ = acc_mode;
}

}  // namespace ember::optim
