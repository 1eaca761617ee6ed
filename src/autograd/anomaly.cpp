// src/autograd/anomaly.cpp — AnomalyGuard's checks of the graph's results, and
// check_grad_anomaly's report on the parameters' gradients (ember/anomaly.hpp).
//
// Note [Anomaly checks at no cost when off]
// The guard's checks sit on two paths every training step already takes: attach() (each op that
// records a node, right after its forward computed the output) and run_backward() (each node's
// gradients, right after apply()). Both first read detail::g_anomaly_guards (one relaxed atomic
// load, as the profiler's hooks: Note [Profiling at no cost when off] in src/core/profiler.hpp)
// and do nothing more when no guard lives. On, a check is one reduction and one host read: a
// sum is finite only when every element is (a NaN, or an Inf of either sign, makes it NaN or
// Inf); a non-finite sum is confirmed by counting NaN and Inf, since finite elements can also
// sum past the dtype's range. The counts and the inputs' state are computed for the message
// once something was found.
//
// check_grad_anomaly computes, per gradient, max |g| over its finite elements and the NaN and Inf
// counts with tensor ops on the gradient's device, stacks every parameter's three numbers into
// one [P, 3] f64 tensor per device (f64: counts stay exact to 2^53, an f32 or f16 maximum
// converts exactly) and reads it with one copy.
#include "autograd/anomaly.hpp"

#include <cmath>
#include <iostream>
#include <limits>
#include <map>

#include "core/capture.hpp"
#include "ember/anomaly.hpp"
#include "ember/autocast.hpp"
#include "ember/ops.hpp"

namespace ember {

namespace detail {
std::atomic<int> g_anomaly_guards{0};
}  // namespace detail

AnomalyGuard::AnomalyGuard() noexcept {
  detail::g_anomaly_guards.fetch_add(1, std::memory_order_relaxed);
}
AnomalyGuard::~AnomalyGuard() { detail::g_anomaly_guards.fetch_sub(1, std::memory_order_relaxed); }

namespace {

// A non-empty floating tensor: the ones a NaN or an Inf can be in.
bool checkable(const Tensor& t) { return t.defined() && is_floating(t.dtype()) && t.numel() > 0; }

struct Counts {
  int64_t nan = 0, inf = 0;
};
Counts count_nonfinite(const Tensor& t) {
  if (!checkable(t)) return {};
  return {sum(isnan(t)).item<int64_t>(), sum(isinf(t)).item<int64_t>()};
}

// Whether `t` holds a NaN or an Inf: one reduction and one read (the note above).
bool has_nonfinite(const Tensor& t) {
  if (!checkable(t)) return false;
  if (std::isfinite(sum(t).to(DType::f32).item<float>())) return false;
  const Counts c = count_nonfinite(t);  // or only a sum past the dtype's range
  return c.nan + c.inf > 0;
}

std::string describe_counts(const Counts& c) {
  return detail::concat(c.nan, " NaN and ", c.inf, " Inf");
}

std::string describe_tensor(const Tensor& t) {
  return detail::concat(t.shape().to_string(), " (", dtype_name(t.dtype()), ", ", t.device().str(),
                        ")");
}

// Who made `t`: its grad_fn, "a leaf" (requires grad, no grad_fn) or "no graph".
std::string maker_of(const Tensor& t) {
  if (const auto fn = t.grad_fn()) return detail::concat("made by ", fn->name);
  return t.requires_grad() ? "a leaf" : "not recorded (requires no grad)";
}

// The node a gradient flows to, in the same words: its op, or a leaf's accumulator.
std::string maker_of(const autograd::Node* target) {
  if (!target) return "not recorded";
  return target->is_accumulator() ? "a leaf" : detail::concat("made by ", target->name);
}

// Every check runs its ops unrecorded, in the tensors' own dtypes, outside any capture.
struct CheckScope {
  explicit CheckScope(const char* what) { detail::check_no_host_transfer(what); }
  NoGradGuard no_grad;
  AutocastGuard no_autocast{DType::bf16, false};
};

}  // namespace

namespace autograd {

void check_forward_anomaly(const Node& node, const Tensor& out,
                           std::span<const Tensor* const> inputs) {
  const CheckScope scope("AnomalyGuard");
  if (!has_nonfinite(out)) return;
  std::string message = detail::concat("AnomalyGuard: ", node.name, " (forward) produced ",
                                       describe_counts(count_nonfinite(out)), " in its output ",
                                       describe_tensor(out));
  bool came_in = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = *inputs[i];
    if (!in.defined()) continue;
    message += detail::concat("; its input ", i, " ", in.shape().to_string(), " ", maker_of(in));
    if (has_nonfinite(in)) {
      came_in = true;
      message += detail::concat(", holding ", describe_counts(count_nonfinite(in)));
    } else if (checkable(in)) {
      message += ", finite";
    }
  }
  if (came_in)
    message +=
        " (the anomaly came in with an input that no checked op made: a leaf, a tensor computed "
        "without recording, or data)";
  throw Error(message);
}

void check_backward_anomaly(const Node& node, const Tensor& grad, const GradList& grad_inputs) {
  const CheckScope scope("AnomalyGuard");
  for (size_t i = 0; i < grad_inputs.size() && i < node.edges.size(); ++i) {
    const Tensor& g = grad_inputs[i];
    if (!has_nonfinite(g)) continue;
    std::string message =
        detail::concat("AnomalyGuard: the backward of ", node.name, " produced ",
                       describe_counts(count_nonfinite(g)), " in the gradient of its input ", i,
                       " ", describe_tensor(g), ", ", maker_of(node.edges[i].node.get()),
                       "; the gradient coming in to ", node.name, " ", grad.shape().to_string());
    if (has_nonfinite(grad))
      message += detail::concat(
          " already held ", describe_counts(count_nonfinite(grad)),
          " (made where the gradients of the output's several uses were summed, or the seed "
          "gradient passed to backward)");
    else
      message += " was finite";
    throw Error(message);
  }
}

}  // namespace autograd

// ---- check_grad_anomaly ----

const char* grad_status_name(GradStatus status) {
  switch (status) {
    case GradStatus::ok: return "ok";
    case GradStatus::nan: return "nan";
    case GradStatus::inf: return "inf";
    case GradStatus::nan_and_inf: return "nan+inf";
    case GradStatus::large: return "large";
    case GradStatus::no_grad: return "no grad";
  }
  return "?";
}

const GradAnomaly* GradAnomalyReport::first_anomaly() const {
  for (const GradAnomaly& p : params)
    if (p.anomalous()) return &p;
  return nullptr;
}

int64_t GradAnomalyReport::anomalies() const {
  int64_t n = 0;
  for (const GradAnomaly& p : params) n += p.anomalous() ? 1 : 0;
  return n;
}

namespace {

// [max |g| over the finite elements (0 when none), NaN count, Inf count] of one gradient, as
// f64 on its device: |g| once, then a mask and a reduction each (|g| < Inf leaves out NaN too).
Tensor gradient_row(const Tensor& g) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const Tensor a = abs(g);
  const Tensor zero = zeros({}, {.dtype = a.dtype(), .device = a.device()});
  return stack({amax(where(lt(a, kInf), a, zero)).to(DType::f64), sum(ne(a, a)).to(DType::f64),
                sum(eq(a, kInf)).to(DType::f64)});
}

std::string describe_entry(const GradAnomaly& p) {
  std::string s = detail::concat(p.nan_count, " NaN, ", p.inf_count, " Inf, max finite |g| ");
  s += std::isnan(p.max_abs) ? std::string("none") : detail::concat(p.max_abs);
  return s;
}

std::string prefix(const GradAnomalyOptions& o) {
  return o.context.empty() ? std::string("check_grad_anomaly: ")
                           : detail::concat("check_grad_anomaly: ", o.context, ": ");
}

}  // namespace

GradAnomalyReport check_grad_anomaly(const NamedGradTensors& params,
                                     const GradAnomalyOptions& options) {
  EMBER_CHECK(!options.max_abs || *options.max_abs >= 0.0,
              "check_grad_anomaly: invalid max_abs (got ", options.max_abs.value_or(0.0),
              "; expected a limit >= 0, or none)");
  const CheckScope scope("check_grad_anomaly");
  GradAnomalyReport report;
  report.params.resize(params.size());
  std::map<std::pair<int, int>, std::pair<std::vector<size_t>, std::vector<Tensor>>> devices;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, p] = params[i];
    GradAnomaly& e = report.params[i];
    e.name = name;
    EMBER_CHECK(p.defined(), "check_grad_anomaly: parameter '", name,
                "' is an undefined tensor (expected a parameter)");
    e.shape = p.shape();
    e.max_abs = std::nan("");
    const Tensor g = p.grad();
    if (!g.defined()) {
      e.status = GradStatus::no_grad;
      continue;
    }
    EMBER_CHECK(is_floating(g.dtype()), "check_grad_anomaly: parameter '", name,
                "' has a gradient of dtype ", dtype_name(g.dtype()),
                " (expected f32, f64, f16 or bf16)");
    if (g.numel() == 0) continue;
    auto& group = devices[{static_cast<int>(g.device().type), g.device().index}];
    group.first.push_back(i);
    group.second.push_back(gradient_row(g));
  }
  for (const auto& [device, group] : devices) {
    const std::vector<double> values = stack(group.second).to(Device::cpu()).to_vector<double>();
    for (size_t r = 0; r < group.first.size(); ++r) {
      GradAnomaly& e = report.params[group.first[r]];
      e.nan_count = static_cast<int64_t>(values[3 * r + 1]);
      e.inf_count = static_cast<int64_t>(values[3 * r + 2]);
      if (e.nan_count + e.inf_count < e.shape.numel()) e.max_abs = values[3 * r];
      e.status = e.nan_count > 0 && e.inf_count > 0                ? GradStatus::nan_and_inf
                 : e.nan_count > 0                                 ? GradStatus::nan
                 : e.inf_count > 0                                 ? GradStatus::inf
                 : options.max_abs && e.max_abs > *options.max_abs ? GradStatus::large
                                                                   : GradStatus::ok;
    }
  }
  apply_anomaly_action(report, options);
  return report;
}

void apply_anomaly_action(const GradAnomalyReport& report, const GradAnomalyOptions& options) {
  const GradAnomaly* first = report.first_anomaly();
  if (!first || options.action == AnomalyAction::silent) return;
  if (options.action == AnomalyAction::warn) {
    for (const GradAnomaly& p : report.params)
      if (p.anomalous())
        std::cerr << prefix(options) << "parameter '" << p.name << "' " << p.shape.to_string()
                  << " gradient " << grad_status_name(p.status) << ": " << describe_entry(p)
                  << "\n";
    return;
  }
  const std::string limit =
      first->status == GradStatus::large
          ? detail::concat(", over the limit max_abs = ", options.max_abs.value_or(0.0))
          : std::string(", expected finite values");
  throw Error(detail::concat(
      prefix(options), "parameter '", first->name, "' of shape ", first->shape.to_string(),
      " has a gradient of status ", grad_status_name(first->status), " (", describe_entry(*first),
      limit, "); ", report.anomalies(), " of ", report.params.size(), " parameters are anomalous"));
}

GradAnomalyReport check_grad_anomaly(const NamedGradTensors& params, AnomalyAction action) {
  return check_grad_anomaly(params, GradAnomalyOptions{.action = action});
}

GradAnomalyReport check_grad_anomaly(const std::vector<Tensor>& params,
                                     const GradAnomalyOptions& options) {
  NamedGradTensors named;
  named.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) named.emplace_back(detail::concat("#", i), params[i]);
  return check_grad_anomaly(named, options);
}

GradAnomalyReport check_grad_anomaly(const std::vector<Tensor>& params, AnomalyAction action) {
  return check_grad_anomaly(params, GradAnomalyOptions{.action = action});
}

}  // namespace ember
