// src/optim/lbfgs.cpp — L-BFGS, transcribed from torch/optim/lbfgs.py (PyTorch 1.13): the
// two-loop recursion over the curvature history, the fixed step or the strong-Wolfe line
// search with cubic interpolation, and the same stopping tests in the same order. Vectors
// are flat tensors over all parameters (on their device); the scalars the control flow
// reads (dot products, losses, step lengths) are read to the host in f64.
#include "ember/optim/lbfgs.hpp"

#include <algorithm>
#include <cmath>

#include "ember/autograd.hpp"
#include "ember/ops.hpp"

namespace ember::optim {
namespace {

constexpr double kWolfeC1 = 1e-4;  // sufficient decrease
constexpr double kWolfeC2 = 0.9;   // curvature
// _strong_wolfe's own tolerance_change (LBFGS.step does not pass the group's).
constexpr double kWolfeToleranceChange = 1e-9;
constexpr int kWolfeMaxSteps = 25;

double scalar(const Tensor& t) { return t.item<double>(); }
double dot_of(const Tensor& a, const Tensor& b) { return scalar(dot(a, b)); }
double abs_max(const Tensor& t) { return scalar(max(abs(t))); }

// The closure, with grad mode on (torch.enable_grad) whatever the caller's mode.
double call_closure(const std::function<double()>& closure) {
  const bool previous = grad_mode_enabled();
  set_grad_mode(true);
  double loss = 0.0;
  try {
    loss = closure();
  } catch (...) {
    set_grad_mode(previous);
    throw;
  }
  set_grad_mode(previous);
  return loss;
}

// PyTorch's _cubic_interpolate: the minimiser of the cubic through (x1, f1, g1), (x2, f2,
// g2), clamped to the bounds (default: between x1 and x2).
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                         std::optional<std::pair<double, double>> bounds = std::nullopt) {
  const auto [lo, hi] = bounds ? *bounds : (x1 <= x2 ? std::pair(x1, x2) : std::pair(x2, x1));
  const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const double d2_square = d1 * d1 - g1 * g2;
  if (d2_square >= 0) {
    const double d2 = std::sqrt(d2_square);
    const double min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                                    : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
    return std::min(std::max(min_pos, lo), hi);
  }
  return (lo + hi) / 2.;
}

struct Evaluation {
  double loss;
  Tensor grad;
};

struct WolfeResult {
  double loss;
  Tensor grad;
  double t;
  int64_t evals;
};

// PyTorch's _strong_wolfe. obj(t) evaluates the loss and flat gradient at x + t·d.
template <typename Obj>
WolfeResult strong_wolfe(Obj&& obj, double t, const Tensor& d, double f, const Tensor& g0,
                         double gtd) {
  const double d_norm = abs_max(d);
  const Tensor g = g0.clone();
  Evaluation e = obj(t);
  int64_t evals = 1;
  double gtd_new = dot_of(e.grad, d);
  double t_prev = 0, f_prev = f, gtd_prev = gtd;
  Tensor g_prev = g;
  bool done = false;
  int ls_iter = 0;
  std::vector<double> bracket, bracket_f, bracket_gtd;
  std::vector<Tensor> bracket_g;
  while (ls_iter < kWolfeMaxSteps) {
    if (e.loss > (f + kWolfeC1 * t * gtd) || (ls_iter > 1 && e.loss >= f_prev)) {
      bracket = {t_prev, t};
      bracket_f = {f_prev, e.loss};
      bracket_g = {g_prev, e.grad.clone()};
      bracket_gtd = {gtd_prev, gtd_new};
      break;
    }
    if (std::abs(gtd_new) <= -kWolfeC2 * gtd) {
      bracket = {t};
      bracket_f = {e.loss};
      bracket_g = {e.grad};
      done = true;
      break;
    }
    if (gtd_new >= 0) {
      bracket = {t_prev, t};
      bracket_f = {f_prev, e.loss};
      bracket_g = {g_prev, e.grad.clone()};
      bracket_gtd = {gtd_prev, gtd_new};
      break;
    }
    // Extrapolate.
    const double min_step = t + 0.01 * (t - t_prev);
    const double max_step = t * 10;
    const double tmp = t;
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, e.loss, gtd_new,
                          std::pair(min_step, max_step));
    t_prev = tmp;
    f_prev = e.loss;
    g_prev = e.grad.clone();
    gtd_prev = gtd_new;
    e = obj(t);
    evals += 1;
    gtd_new = dot_of(e.grad, d);
    ls_iter += 1;
  }
  if (ls_iter == kWolfeMaxSteps) {
    bracket = {0, t};
    bracket_f = {f, e.loss};
    bracket_g = {g, e.grad};
  }

  // Zoom: shrink the bracket until a point satisfies the strong Wolfe conditions.
  bool insuf_progress = false;
  size_t low = bracket_f[0] <= bracket_f.back() ? 0 : 1;
  size_t high = 1 - low;
  while (!done && ls_iter < kWolfeMaxSteps) {
    if (std::abs(bracket[1] - bracket[0]) * d_norm < kWolfeToleranceChange) break;
    t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1],
                          bracket_gtd[1]);
    const double b_max = std::max(bracket[0], bracket[1]);
    const double b_min = std::min(bracket[0], bracket[1]);
    const double eps = 0.1 * (b_max - b_min);
    if (std::min(b_max - t, t - b_min) < eps) {
      if (insuf_progress || t >= b_max || t <= b_min) {
        t = std::abs(t - b_max) < std::abs(t - b_min) ? b_max - eps : b_min + eps;
        insuf_progress = false;
      } else {
        insuf_progress = true;
      }
    } else {
      insuf_progress = false;
    }
    e = obj(t);
    evals += 1;
    gtd_new = dot_of(e.grad, d);
    ls_iter += 1;
    if (e.loss > (f + kWolfeC1 * t * gtd) || e.loss >= bracket_f[low]) {
      bracket[high] = t;
      bracket_f[high] = e.loss;
      bracket_g[high] = e.grad.clone();
      bracket_gtd[high] = gtd_new;
      low = bracket_f[0] <= bracket_f[1] ? 0 : 1;
      high = 1 - low;
    } else {
      if (std::abs(gtd_new) <= -kWolfeC2 * gtd) {
        done = true;
      } else if (gtd_new * (bracket[high] - bracket[low]) >= 0) {
        bracket[high] = bracket[low];
        bracket_f[high] = bracket_f[low];
        bracket_g[high] = bracket_g[low];
        bracket_gtd[high] = bracket_gtd[low];
      }
      bracket[low] = t;
      bracket_f[low] = e.loss;
      bracket_g[low] = e.grad.clone();
      bracket_gtd[low] = gtd_new;
    }
  }
  return {bracket_f[low], bracket_g[low], bracket[low], evals};
}

}  // namespace

// ---- options ----

void to_json(json& j, LineSearch l) {
  j = l == LineSearch::strong_wolfe ? json("strong_wolfe") : json(nullptr);
}

void from_json(const json& j, LineSearch& l) {
  EMBER_CHECK(j.is_null() || j == "strong_wolfe", "LBFGS options: unknown line_search_fn ",
              j.dump(), " (expected null or \"strong_wolfe\")");
  l = j.is_null() ? LineSearch::none : LineSearch::strong_wolfe;
}

void to_json(json& j, const LBFGSOptions& o) {
  LBFGSOptions resolved = o;
  resolved.max_eval = o.max_eval.value_or(o.max_iter * 5 / 4);
  j = fields_json(resolved);
}

// ---- LBFGS ----

LBFGS::LBFGS(std::vector<Tensor> params, LBFGSOptions options) : TypedOptimizer(options) {
  init_groups({Group{std::move(params), options}});
  const std::vector<Tensor>& ps = groups_[0].params;
  for (size_t i = 1; i < ps.size(); ++i)
    EMBER_CHECK(ps[i].device() == ps[0].device() && ps[i].dtype() == ps[0].dtype(), type_name(),
                ": parameter ", i, " is ", dtype_name(ps[i].dtype()), " on ", ps[i].device().str(),
                " (expected every parameter to match parameter 0: ", dtype_name(ps[0].dtype()),
                " on ", ps[0].device().str(), ")");
}

Optimizer::StateSpec LBFGS::state_spec(size_t) const { return {}; }

void LBFGS::update() {
  EMBER_CHECK(false, type_name(),
              ".step: needs a closure (got step() without one; L-BFGS re-evaluates the loss "
              "several times per step: call step(closure), where the closure zeroes the "
              "gradients, computes the loss, calls backward() and returns the loss)");
}

int64_t LBFGS::numel() const {
  int64_t n = 0;
  for (const Tensor& p : groups_[0].params) n += p.numel();
  return n;
}

Tensor LBFGS::flat_grad() const {
  std::vector<Tensor> views;
  for (const Tensor& p : groups_[0].params) {
    const Tensor g = p.grad();
    views.push_back(g.defined() ? g.reshape({p.numel()})
                                : zeros({p.numel()}, {.dtype = p.dtype(), .device = p.device()}));
  }
  return cat(views, 0);
}

void LBFGS::add_to_params(double t, const Tensor& d) {
  int64_t offset = 0;
  for (const Tensor& p : groups_[0].params) {
    const int64_t n = p.numel();
    Tensor(p).add_(d.slice(0, offset, offset + n).reshape(p.shape()), t);
    offset += n;
  }
}

double LBFGS::step(const std::function<double()>& closure) {
  const std::string who = type_name() + ".step";
  EMBER_CHECK(static_cast<bool>(closure), who,
              ": got an empty closure (expected a function that zeroes the gradients, computes "
              "the loss, calls backward() and returns the loss)");
  EMBER_CHECK(groups_.size() == 1, who, ": L-BFGS supports one parameter group (got ",
              groups_.size(), ")");
  EMBER_CHECK(accumulate_steps() == 1, who,
              ": gradient accumulation does not apply to L-BFGS (got accumulate_steps ",
              accumulate_steps(), ", expected 1)");
  const LBFGSOptions& o = groups_[0].options;
  const int64_t max_eval = o.max_eval.value_or(o.max_iter * 5 / 4);
  NoGradGuard no_grad;

  const double orig_loss = call_closure(closure);
  double loss = orig_loss;
  int64_t current_evals = 1;
  func_evals_ += 1;
  Tensor g = flat_grad();
  if (abs_max(g) <= o.tolerance_grad) return orig_loss;

  Tensor d = d_, prev_flat_grad = prev_flat_grad_;
  double t = t_, h_diag = h_diag_;
  std::optional<double> prev_loss = prev_loss_;
  std::vector<Tensor> old_dirs = old_dirs_, old_stps = old_stps_;
  std::vector<double> ro = ro_;
  int64_t n_iter = 0;
  while (n_iter < o.max_iter) {
    n_iter += 1;
    n_iter_ += 1;
    // Direction: steepest descent first, then the two-loop recursion.
    if (n_iter_ == 1) {
      d = -g;
      old_dirs.clear();
      old_stps.clear();
      ro.clear();
      h_diag = 1;
    } else {
      const Tensor y = g - prev_flat_grad;
      const Tensor s = d * t;
      const double ys = dot_of(y, s);
      if (ys > 1e-10) {
        if (static_cast<int64_t>(old_dirs.size()) == o.history_size) {
          old_dirs.erase(old_dirs.begin());
          old_stps.erase(old_stps.begin());
          ro.erase(ro.begin());
        }
        old_dirs.push_back(y);
        old_stps.push_back(s);
        ro.push_back(1. / ys);
        h_diag = ys / dot_of(y, y);
      }
      const size_t num_old = old_dirs.size();
      std::vector<double> al(num_old);
      Tensor q = -g;
      for (size_t k = num_old; k-- > 0;) {
        al[k] = dot_of(old_stps[k], q) * ro[k];
        q.add_(old_dirs[k], -al[k]);
      }
      d = q * h_diag;
      for (size_t k = 0; k < num_old; ++k) {
        const double be_k = dot_of(old_dirs[k], d) * ro[k];
        d.add_(old_stps[k], al[k] - be_k);
      }
    }
    if (!prev_flat_grad.defined()) {
      PoolGuard persistent(Pool::Persistent);
      prev_flat_grad = g.clone();
    } else {
      prev_flat_grad.copy_(g);
    }
    prev_loss = loss;

    // Step length.
    t = n_iter_ == 1 ? std::min(1., 1. / scalar(sum(abs(g)))) * o.lr : o.lr;
    const double gtd = dot_of(g, d);
    if (gtd > -o.tolerance_change) break;

    int64_t ls_func_evals = 0;
    bool opt_cond = false;
    if (o.line_search_fn == LineSearch::strong_wolfe) {
      std::vector<Tensor> x_init;
      for (const Tensor& p : groups_[0].params) x_init.push_back(p.clone());
      auto obj = [&](double step) {
        add_to_params(step, d);
        const double f = call_closure(closure);
        Evaluation e{f, flat_grad()};
        for (size_t k = 0; k < x_init.size(); ++k) Tensor(groups_[0].params[k]).copy_(x_init[k]);
        return e;
      };
      const WolfeResult r = strong_wolfe(obj, t, d, loss, g, gtd);
      loss = r.loss;
      g = r.grad;
      t = r.t;
      ls_func_evals = r.evals;
      add_to_params(t, d);
      opt_cond = abs_max(g) <= o.tolerance_grad;
    } else {
      add_to_params(t, d);
      if (n_iter != o.max_iter) {
        loss = call_closure(closure);
        g = flat_grad();
        opt_cond = abs_max(g) <= o.tolerance_grad;
        ls_func_evals = 1;
      }
    }
    current_evals += ls_func_evals;
    func_evals_ += ls_func_evals;

    if (n_iter == o.max_iter) break;
    if (current_evals >= max_eval) break;
    if (opt_cond) break;
    if (abs_max(d * t) <= o.tolerance_change) break;
    if (std::abs(loss - *prev_loss) < o.tolerance_change) break;
  }

  PoolGuard persistent(Pool::Persistent);
  d_ = d.clone();
  t_ = t;
  old_dirs_ = std::move(old_dirs);
  old_stps_ = std::move(old_stps);
  ro_ = std::move(ro);
  h_diag_ = h_diag;
  prev_flat_grad_ = prev_flat_grad;
  prev_loss_ = prev_loss;
  return orig_loss;
}

// ---- state dict ----

OptimizerState LBFGS::state_dict() const {
  OptimizerState out = Optimizer::state_dict();
  if (func_evals_ == 0 && n_iter_ == 0) return out;
  json s = {{"func_evals", func_evals_}, {"n_iter", n_iter_}};
  if (d_.defined()) {
    s["t"] = t_;
    s["H_diag"] = h_diag_;
    s["ro"] = ro_;
    if (prev_loss_) s["prev_loss"] = *prev_loss_;
    out.tensors.emplace_back("state.0.d", d_);
    out.tensors.emplace_back("state.0.prev_flat_grad", prev_flat_grad_);
    for (size_t k = 0; k < old_dirs_.size(); ++k) {
      out.tensors.emplace_back("state.0.old_dirs." + std::to_string(k), old_dirs_[k]);
      out.tensors.emplace_back("state.0.old_stps." + std::to_string(k), old_stps_[k]);
    }
  }
  out.meta["state"]["0"] = s;
  return out;
}

void LBFGS::load_state_dict(const OptimizerState& sd) {
  const std::string who = type_name() + ".load_state_dict";
  const json& meta = sd.meta;
  EMBER_CHECK(meta.is_object() && meta.contains("state") && meta["state"].is_object(), who,
              ": meta must be an object with 'state' and 'param_groups' (got ",
              meta.dump().substr(0, 80), ")");
  if (meta.contains("type"))
    EMBER_CHECK(meta["type"].is_string() && meta["type"].get<std::string>() == type_name(), who,
                ": the state is for another optimizer (got type ", meta["type"].dump(),
                ", expected \"", type_name(), "\")");
  const json& state = meta["state"];
  for (const auto& [key, v] : state.items())
    EMBER_CHECK(key == "0", who, ": state entry '", key,
                "' is not L-BFGS's (its state is global, under parameter 0)");
  const json s = state.contains("0") ? state["0"] : json::object();
  const int64_t n = numel();
  const Tensor& p0 = groups_[0].params[0];
  auto number = [&](const char* key, double fallback) {
    if (!s.contains(key)) return fallback;
    EMBER_CHECK(s[key].is_number(), who, ": state.0.", key, " is not a number (got ", s[key].dump(),
                ")");
    return s[key].get<double>();
  };
  const int64_t func_evals = static_cast<int64_t>(number("func_evals", 0));
  const int64_t n_iter = static_cast<int64_t>(number("n_iter", 0));
  std::vector<double> ro;
  if (s.contains("ro")) {
    EMBER_CHECK(s["ro"].is_array(), who, ": state.0.ro must be a list of numbers");
    ro = s["ro"].get<std::vector<double>>();
  }
  // Tensors: copies on the parameters' device and dtype, in the Persistent pool.
  Tensor d, prev;
  std::vector<Tensor> dirs(ro.size()), stps(ro.size());
  {
    NoGradGuard no_grad;
    PoolGuard persistent(Pool::Persistent);
    for (const auto& [name, t] : sd.tensors) {
      EMBER_CHECK(t.defined() && t.shape() == Shape{n}, who, ": tensor '", name, "' has shape ",
                  t.defined() ? t.shape().to_string() : "undefined", ", expected [", n,
                  "] (a flat vector over all parameters)");
      Tensor copy = empty({n}, {.dtype = p0.dtype(), .device = p0.device()});
      copy.copy_(t);
      size_t k = 0;
      const std::string& key = name;  // a structured binding clang 14 cannot capture
      auto index_of = [&](const std::string& prefix) {
        const std::string rest = key.substr(prefix.size());
        EMBER_CHECK(!rest.empty() && rest.find_first_not_of("0123456789") == std::string::npos, who,
                    ": tensor name '", key, "' has no index");
        k = std::stoul(rest);
        EMBER_CHECK(k < ro.size(), who, ": tensor '", key, "' is beyond the history (ro has ",
                    ro.size(), " entries)");
      };
      if (name == "state.0.d") {
        d = copy;
      } else if (name == "state.0.prev_flat_grad") {
        prev = copy;
      } else if (name.rfind("state.0.old_dirs.", 0) == 0) {
        index_of("state.0.old_dirs.");
        dirs[k] = copy;
      } else if (name.rfind("state.0.old_stps.", 0) == 0) {
        index_of("state.0.old_stps.");
        stps[k] = copy;
      } else {
        EMBER_CHECK(false, who, ": unexpected state tensor '", name, "' for LBFGS");
      }
    }
  }
  for (size_t k = 0; k < ro.size(); ++k)
    EMBER_CHECK(dirs[k].defined() && stps[k].defined(), who,
                ": missing state tensor "
                "'state.0.old_dirs.",
                k, "' or 'state.0.old_stps.", k, "'");
  EMBER_CHECK(n_iter == 0 || (d.defined() && prev.defined()), who,
              ": missing state tensor 'state.0.d' or 'state.0.prev_flat_grad' (n_iter is ", n_iter,
              ")");
  // Groups and hyperparameters through the base (which changes nothing on error).
  OptimizerState groups_only{meta, {}};
  groups_only.meta["state"] = json::object();
  Optimizer::load_state_dict(groups_only);
  func_evals_ = func_evals;
  n_iter_ = n_iter;
  d_ = d;
  prev_flat_grad_ = prev;
  t_ = number("t", 0.0);
  h_diag_ = number("H_diag", 1.0);
  prev_loss_ =
      s.contains("prev_loss") ? std::optional<double>(number("prev_loss", 0.0)) : std::nullopt;
  old_dirs_ = std::move(dirs);
  old_stps_ = std::move(stps);
  ro_ = std::move(ro);
}

}  // namespace ember::optim
