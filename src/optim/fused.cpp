// src/optim/fused.cpp — one parameter's fused optimizer update (see fused.hpp).
//
// The steady state allocates nothing: state tensors are made once (Persistent pool), views
// are built on the stack, and the kernel writes the parameter's own buffer. Only a
// non-contiguous parameter or gradient (rare: optimizers normally see contiguous leaves)
// goes through contiguous temporaries, copied back into the parameter's buffer.
#include "optim/fused.hpp"

#include "ember/autograd.hpp"

namespace ember::optim::detail {
namespace {

backend::View view_of(const Tensor& t) { return {t.data_ptr(), t.dtype(), t.shape(), t.strides()}; }

void check_pair(const std::string& who, const Tensor& param, const Tensor& grad) {
  EMBER_CHECK(param.dtype() == DType::f32 || param.dtype() == DType::f64, who,
              ": parameter dtype not supported (got ", dtype_name(param.dtype()),
              ", expected f32 or f64)");
  EMBER_CHECK(grad.dtype() == param.dtype(), who, ": gradient dtype ", dtype_name(grad.dtype()),
              " does not match the parameter's (expected ", dtype_name(param.dtype()), ")");
  EMBER_CHECK(grad.device() == param.device(), who, ": gradient on ", grad.device().str(),
              " but the parameter on ", param.device().str(), " (expected the same device)");
  EMBER_CHECK(grad.shape() == param.shape(), who, ": gradient shape ", grad.shape().to_string(),
              " does not match the parameter's (expected ", param.shape().to_string(), ")");
}

// A state tensor named `name`, created (zeros, Persistent pool, next to `param`) if absent.
Tensor& state_tensor(ParamState& state, const Tensor& param, const char* name, bool* created) {
  if (Tensor* t = state.find(name)) {
    *created = false;
    return *t;
  }
  PoolGuard persistent(Pool::Persistent);
  state.tensors.emplace_back(
      name, zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()}));
  *created = true;
  return state.tensors.back().second;
}

// Runs `kernel(param_view, grad_view)` on contiguous buffers and keeps the parameter's own.
template <typename Kernel>
void run_in_place(const Tensor& param, const Tensor& grad, Kernel&& kernel) {
  NoGradGuard no_grad;
  const Tensor g = grad.is_contiguous() ? grad : grad.contiguous();
  if (param.is_contiguous()) {
    kernel(view_of(param), view_of(g));
  } else {
    Tensor work = param.detach().contiguous();
    kernel(view_of(work), view_of(g));
    Tensor(param).detach().copy_(work);
  }
  param.storage()->bump_version();
}

}  // namespace

void adam_update(const std::string& who, const Tensor& param, const Tensor& grad, ParamState& state,
                 backend::AdamArgs args) {
  check_pair(who, param, grad);
  bool created = false;
  // Look up before creating: emplace_back may move the earlier handles (not their storage).
  state_tensor(state, param, "exp_avg", &created);
  state_tensor(state, param, "exp_avg_sq", &created);
  if (args.amsgrad) state_tensor(state, param, "max_exp_avg_sq", &created);
  const backend::View m = view_of(*state.find("exp_avg"));
  const backend::View v = view_of(*state.find("exp_avg_sq"));
  const backend::View vmax =
      args.amsgrad ? view_of(*state.find("max_exp_avg_sq")) : backend::View{};
  state.step += 1;
  args.step = state.step;
  const backend::Backend& be = backend::backend_for(param.device());
  run_in_place(param, grad, [&](const backend::View& p, const backend::View& g) {
    be.adam_step(p, g, m, v, vmax, args);
  });
}

void sgd_update(const std::string& who, const Tensor& param, const Tensor& grad, ParamState& state,
                backend::SgdArgs args) {
  check_pair(who, param, grad);
  backend::View buf{};
  args.first_step = false;
  if (args.momentum != 0.0) {
    bool created = false;
    buf = view_of(state_tensor(state, param, "momentum_buffer", &created));
    args.first_step = created;  // PyTorch: a missing buffer starts as a clone of the gradient
  }
  state.step += 1;
  const backend::Backend& be = backend::backend_for(param.device());
  run_in_place(param, grad, [&](const backend::View& p, const backend::View& g) {
    be.sgd_step(p, g, buf, args);
  });
}

}  // namespace ember::optim::detail
