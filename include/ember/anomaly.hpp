// ember/anomaly.hpp — finding where a NaN or an Inf comes from: a check of the parameters'
// gradients after backward (ggmlR's check_grad_anomaly) and a guard that checks every result
// of the graph while it lives (PyTorch's torch.autograd.detect_anomaly). docs/autograd.md.
//
//   loss.backward();
//   check_grad_anomaly(model->named_parameters(), AnomalyAction::error);  // before step()
//
//   {
//     AnomalyGuard guard;  // slow: a host read per op; for finding the op, not for training
//     model(x).sum().backward();  // throws naming the op that made the first NaN/Inf
//   }
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/tensor.hpp"

namespace ember {

/// What check_grad_anomaly does about an anomalous gradient: nothing (the report only), one
/// line per parameter on stderr, or an ember::Error naming the first one.
enum class AnomalyAction : uint8_t { silent, warn, error };

/// A parameter's gradient, as ggmlR's statuses: finite (ok), holding NaN, Inf or both, finite
/// but with some |g| over GradAnomalyOptions::max_abs (large), or no gradient at all.
enum class GradStatus : uint8_t { ok, nan, inf, nan_and_inf, large, no_grad };
/// "ok", "nan", "inf", "nan+inf", "large", "no grad".
const char* grad_status_name(GradStatus status);

/// One parameter's line of the report.
struct GradAnomaly {
  std::string name;  // the name given, or "#i" (its position) for an unnamed list
  Shape shape{};
  GradStatus status = GradStatus::ok;
  /// The largest |g| over the gradient's finite elements; NaN when it has none (all NaN/Inf,
  /// empty, or no gradient).
  double max_abs = 0.0;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  /// nan, inf, nan_and_inf or large (a parameter without a gradient is not an anomaly).
  bool anomalous() const { return status != GradStatus::ok && status != GradStatus::no_grad; }
};

struct GradAnomalyReport {
  std::vector<GradAnomaly> params;  // in the order given
  /// The first anomalous parameter, or nullptr when there is none.
  const GradAnomaly* first_anomaly() const;
  int64_t anomalies() const;
  bool ok() const { return first_anomaly() == nullptr; }
};

struct GradAnomalyOptions {
  AnomalyAction action = AnomalyAction::warn;
  /// A finite gradient with some |g| above this is reported as `large` (ggmlR's max_abs).
  std::optional<double> max_abs = std::nullopt;
  /// Put before each warning and in the error, e.g. "step 12 (epoch 0, batch 12)".
  std::string context{};
};

using NamedGradTensors = std::vector<std::pair<std::string, Tensor>>;

/// Per parameter: the status of its gradient, max |g| and the counts of NaN and Inf. Computed
/// where the gradients live, stacked into one small tensor per device and read with one copy
/// (no read per parameter). Then, per `options.action`, nothing, a line on stderr per
/// anomalous parameter, or an ember::Error naming the first (name, shape and counts).
/// Example (after backward, before the optimizer's step):
///   GradAnomalyReport r = check_grad_anomaly(net->named_parameters(), AnomalyAction::silent);
///   if (!r.ok()) opt.zero_grad();  // skip this step
GradAnomalyReport check_grad_anomaly(const NamedGradTensors& params,
                                     AnomalyAction action = AnomalyAction::warn);
GradAnomalyReport check_grad_anomaly(const NamedGradTensors& params,
                                     const GradAnomalyOptions& options);
/// The same for unnamed parameters (net->parameters()): each is named "#i", its position.
GradAnomalyReport check_grad_anomaly(const std::vector<Tensor>& params,
                                     AnomalyAction action = AnomalyAction::warn);
GradAnomalyReport check_grad_anomaly(const std::vector<Tensor>& params,
                                     const GradAnomalyOptions& options);

/// What check_grad_anomaly does with its report after computing it (options.action,
/// options.context; max_abs was used by the computation): for a report already in hand.
void apply_anomaly_action(const GradAnomalyReport& report, const GradAnomalyOptions& options);

namespace detail {
extern std::atomic<int> g_anomaly_guards;
/// True while an AnomalyGuard lives (any thread): one relaxed atomic load, the only cost of
/// the checks when off (Note [Anomaly checks at no cost when off] in src/autograd/anomaly.cpp).
inline bool anomaly_checking() noexcept {
  return g_anomaly_guards.load(std::memory_order_relaxed) > 0;
}
}  // namespace detail

/// While alive (on any thread: the mode is process-wide, as PyTorch's), every floating result
/// of an op that records a graph node (an input requires grad, grad mode on) and every gradient
/// a backward node produces is checked for NaN and Inf. The first one found throws an
/// ember::Error naming the op (its catalogue name; forward or backward), the op that made its
/// input (the input's grad_fn, "a leaf" or "no graph"), and the shapes, e.g.
///   "AnomalyGuard: log (forward) produced 1 NaN and 0 Inf in its output [4] (f32, cpu); its
///    input 0 [4] made by sub, finite"
/// Each check reads one value from the device (a synchronisation per op): use it to find an
/// anomaly, not to train. Refused inside a captured step. Guards nest. Off by default; off it
/// costs one relaxed atomic load per recorded op and per backward node.
class AnomalyGuard {
 public:
  AnomalyGuard() noexcept;
  ~AnomalyGuard();
  AnomalyGuard(const AnomalyGuard&) = delete;
  AnomalyGuard& operator=(const AnomalyGuard&) = delete;
};

/// True while an AnomalyGuard lives (torch.is_anomaly_enabled).
inline bool anomaly_mode_enabled() noexcept { return detail::anomaly_checking(); }

}  // namespace ember
