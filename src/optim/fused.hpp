// src/optim/fused.hpp — the optimizers' side of a fused step: parameter checks, lazy state
// creation in the Persistent pool and the step counts; the update itself is an op
// (src/ops/optim.hpp). Shared by SGD, Adam, AdamW and the elementwise optimizers of
// adaptive.hpp (RMSprop ... RAdam).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "ember/optim/optimizer.hpp"
#include "ops/optim.hpp"

namespace ember::optim::detail {

/// A parameter of a group and its state.
struct ParamRef {
  const Tensor* param;
  ParamState* state;
};

/// The parameters of group `g` with their states; slot(g, i) is parameter i's ParamState
/// (the table is sized first, so the pointers stay valid).
template <typename Slot>
std::vector<ParamRef> param_refs(const std::vector<Tensor>& params, size_t g, Slot&& slot) {
  std::vector<ParamRef> refs;
  if (params.empty()) return refs;
  refs.reserve(params.size());
  slot(g, params.size() - 1);
  for (size_t i = 0; i < params.size(); ++i) refs.push_back({&params[i], &slot(g, i)});
  return refs;
}

/// One Adam/AdamW step of every parameter of `params` that has a .grad: increments its
/// state.step, creates exp_avg, exp_avg_sq (and max_exp_avg_sq with amsgrad) as zeros on first
/// use, and runs ops::adam_step_ (one multi-tensor kernel per device, dtype and step) with the
/// group's `args` (their step is each parameter's).
void adam_update_many(const std::string& who, const std::vector<ParamRef>& params,
                      const backend::AdamArgs& args);

/// One SGD step of every parameter with a .grad; creates momentum_buffer on first use when
/// momentum != 0.
void sgd_update_many(const std::string& who, const std::vector<ParamRef>& params,
                     const backend::SgdArgs& args);

/// The state of an elementwise optimizer (backend::OptimAlgo): the names of its OptimSlot
/// state buffers (nullptr where unused) and the value a new buffers[0] starts at.
struct ElementwiseState {
  std::array<const char*, 3> names = {nullptr, nullptr, nullptr};
  double initial_value = 0.0;  // Adagrad's initial_accumulator_value
};

/// One step of every parameter with a .grad: increments state.step, creates the named
/// state tensors on first use, (NAdam) advances the "mu_product" scalar, and runs
/// ops::optim_step_ with `args` (step and mu_product filled in per parameter).
void elementwise_update_many(const std::string& who, const std::vector<ParamRef>& params,
                             const backend::OptimArgs& args, const ElementwiseState& state);

}  // namespace ember::optim::detail
