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
// Note [State follows its parameter]: a parameter moved to another device or dtype after a
// step (Module::to) takes its state along at its next step, converted into the Persistent
// pool there; the kernels never see a buffer of another device or dtype.
Tensor& state_tensor(ParamState& state, const Tensor& param, const char* name, bool* created) {
  if (Tensor* t = state.find(name)) {
    *created = false;
    EMBER_ASSERT(t->shape() == param.shape(), "optimizer state '", name, "' has shape ",
                 t->shape().to_string(), ", the parameter ", param.shape().to_string());
    if (t->device() != param.device() || t->dtype() != param.dtype()) {
      NoGradGuard no_grad;
      PoolGuard persistent(Pool::Persistent);
      *t = t->to(param.dtype()).to(param.device()).contiguous();
    }
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

namespace {

// Parameters of one multi-tensor call: same device, dtype and step arguments.
struct Bucket {
  Device device;
  DType dtype;
  int64_t step;
  bool first_step;
  std::vector<backend::OptimSlot> slots;
  std::vector<const Tensor*> params;
};

Bucket& bucket_for(std::vector<Bucket>& buckets, const Tensor& param, int64_t step,
                   bool first_step) {
  for (Bucket& b : buckets)
    if (b.device == param.device() && b.dtype == param.dtype() && b.step == step &&
        b.first_step == first_step)
      return b;
  buckets.push_back({param.device(), param.dtype(), step, first_step, {}, {}});
  return buckets.back();
}

bool fusable(const Tensor& param, const Tensor& grad) {
  return param.is_contiguous() && grad.is_contiguous();
}

void bump_versions(const Bucket& b) {
  for (const Tensor* p : b.params) p->storage()->bump_version();
}

// What an optimizer's `prepare` returns for one parameter: its state buffers, in slot order.
struct Prepared {
  void* state[3] = {nullptr, nullptr, nullptr};
  int64_t step = 0;
  bool first_step = false;
};

// Sorts the parameters that have a gradient into buckets, one multi-tensor call each.
// `prepare(param, state)` creates the state (lazily) and counts the step; a non-contiguous
// parameter or gradient goes to `single(param, grad, state)` instead.
template <typename Single, typename Prepare>
std::vector<Bucket> bucket_params(const std::string& who, const std::vector<ParamRef>& params,
                                  Single&& single, Prepare&& prepare) {
  std::vector<Bucket> buckets;
  for (const ParamRef& ref : params) {
    const Tensor& param = *ref.param;
    const Tensor grad = param.grad();
    if (!grad.defined()) continue;
    check_pair(who, param, grad);
    if (!fusable(param, grad)) {
      single(param, grad, *ref.state);
      continue;
    }
    const Prepared p = prepare(param, *ref.state);
    Bucket& b = bucket_for(buckets, param, p.step, p.first_step);
    b.slots.push_back(
        {param.data_ptr(), grad.data_ptr(), {p.state[0], p.state[1], p.state[2]}, param.numel()});
    b.params.push_back(ref.param);
  }
  return buckets;
}

}  // namespace

void adam_update_many(const std::string& who, const std::vector<ParamRef>& params,
                      backend::AdamArgs args) {
  const std::vector<Bucket> buckets = bucket_params(
      who, params,
      [&](const Tensor& param, const Tensor& grad, ParamState& state) {
        adam_update(who, param, grad, state, args);
      },
      [&](const Tensor& param, ParamState& state) {
        bool created = false;
        Prepared p;
        p.state[0] = state_tensor(state, param, "exp_avg", &created).data_ptr();
        p.state[1] = state_tensor(state, param, "exp_avg_sq", &created).data_ptr();
        if (args.amsgrad)
          p.state[2] = state_tensor(state, param, "max_exp_avg_sq", &created).data_ptr();
        p.step = ++state.step;
        return p;
      });
  for (const Bucket& b : buckets) {
    args.step = b.step;
    backend::backend_for(b.device).adam_step_multi(b.dtype, b.slots.data(),
                                                   static_cast<int64_t>(b.slots.size()), args);
    bump_versions(b);
  }
}

void sgd_update_many(const std::string& who, const std::vector<ParamRef>& params,
                     backend::SgdArgs args) {
  const std::vector<Bucket> buckets = bucket_params(
      who, params,
      [&](const Tensor& param, const Tensor& grad, ParamState& state) {
        sgd_update(who, param, grad, state, args);
      },
      [&](const Tensor& param, ParamState& state) {
        Prepared p;
        if (args.momentum != 0.0)
          p.state[0] = state_tensor(state, param, "momentum_buffer", &p.first_step).data_ptr();
        state.step += 1;
        return p;
      });
  for (const Bucket& b : buckets) {
    args.first_step = b.first_step;  // PyTorch: a missing buffer starts as a clone of the gradient
    backend::backend_for(b.device).sgd_step_multi(b.dtype, b.slots.data(),
                                                  static_cast<int64_t>(b.slots.size()), args);
    bump_versions(b);
  }
}

}  // namespace ember::optim::detail
