// src/optim/fused.hpp — one parameter's fused update: checks, lazy state creation in the
// Persistent pool, the backend kernel, and the version bump. Shared by SGD, Adam, AdamW.
#pragma once

#include <string>

#include "backend/backend.hpp"
#include "ember/optim/optimizer.hpp"

namespace ember::optim::detail {

/// Adam/AdamW step of `param` from its .grad (caller skips parameters without one).
/// Increments state.step and sets args.step from it; creates exp_avg, exp_avg_sq (and
/// max_exp_avg_sq with amsgrad) as zeros on first use.
void adam_update(const std::string& who, const Tensor& param, const Tensor& grad, ParamState& state,
                 backend::AdamArgs args);

/// SGD step of `param`; creates momentum_buffer on first use when momentum != 0.
void sgd_update(const std::string& who, const Tensor& param, const Tensor& grad, ParamState& state,
                backend::SgdArgs args);

}  // namespace ember::optim::detail
