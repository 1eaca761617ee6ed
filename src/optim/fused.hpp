// src/optim/fused.hpp — one parameter's fused update: checks, lazy state creation in the
// Persistent pool, the backend kernel, and the version bump. Shared by SGD, Adam, AdamW.
#pragma once

#include <string>
#include <vector>

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

/// A parameter of a group and its state, for the multi-tensor forms below.
struct ParamRef {
  const Tensor* param;
  ParamState* state;
};

/// adam_update for every parameter of `params` that has a .grad, with one multi-tensor kernel
/// call per (device, dtype, step) — normally one per group; non-contiguous parameters or
/// gradients take the single-tensor path.
void adam_update_many(const std::string& who, const std::vector<ParamRef>& params,
                      backend::AdamArgs args);

/// sgd_update for every parameter of `params` that has a .grad, likewise batched.
void sgd_update_many(const std::string& who, const std::vector<ParamRef>& params,
                     backend::SgdArgs args);

}  // namespace ember::optim::detail
