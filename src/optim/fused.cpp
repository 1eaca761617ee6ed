// src/optim/fused.cpp — the optimizers' side of a fused step (see fused.hpp).
#include "optim/fused.hpp"

#include "ember/autograd.hpp"

namespace ember::optim::detail {
namespace {

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
    // A parameter made channels_last after a step (Module::to) takes its state along.
    const MemoryFormat format = param.suggest_memory_format();
    if (!t->is_contiguous(format)) {
      NoGradGuard no_grad;
      PoolGuard persistent(Pool::Persistent);
      *t = t->contiguous(format);
    }
    return *t;
  }
  PoolGuard persistent(Pool::Persistent);
  // Laid out as its parameter (Note [Memory formats]): the kernels walk both flat.
  state.tensors.emplace_back(
      name, zeros(param.shape(), {.dtype = param.dtype(), .device = param.device()})
                .to(param.suggest_memory_format()));
  *created = true;
  return state.tensors.back().second;
}

}  // namespace

void adam_update_many(const std::string& who, const std::vector<ParamRef>& params,
                      const backend::AdamArgs& args) {
  std::vector<ops::AdamItem> items;
  items.reserve(params.size());
  bool created = false;
  for (const ParamRef& ref : params) {
    const Tensor& param = *ref.param;
    Tensor grad = param.grad();
    if (!grad.defined()) continue;
    check_pair(who, param, grad);
    ParamState& state = *ref.state;
    // Look every tensor up after creating them all: emplace_back may move the earlier handles
    // (not their storage).
    state_tensor(state, param, "exp_avg", &created);
    state_tensor(state, param, "exp_avg_sq", &created);
    if (args.amsgrad) state_tensor(state, param, "max_exp_avg_sq", &created);
    state.step += 1;
    items.push_back({&param, grad, state.find("exp_avg"), state.find("exp_avg_sq"),
                     args.amsgrad ? state.find("max_exp_avg_sq") : nullptr, state.step});
  }
  ops::adam_step_(items, args);
}

void sgd_update_many(const std::string& who, const std::vector<ParamRef>& params,
                     const backend::SgdArgs& args) {
  std::vector<ops::SgdItem> items;
  items.reserve(params.size());
  for (const ParamRef& ref : params) {
    const Tensor& param = *ref.param;
    Tensor grad = param.grad();
    if (!grad.defined()) continue;
    check_pair(who, param, grad);
    ParamState& state = *ref.state;
    bool first = false;
    const Tensor* buf = nullptr;
    if (args.momentum != 0.0) buf = &state_tensor(state, param, "momentum_buffer", &first);
    state.step += 1;
    // PyTorch: a missing buffer starts as a clone of the gradient.
    items.push_back({&param, grad, buf, first, state.step});
  }
  ops::sgd_step_(items, args);
}

void elementwise_update_many(const std::string& who, const std::vector<ParamRef>& params,
                             const backend::OptimArgs& args, const ElementwiseState& names) {
  std::vector<ops::OptimItem> items;
  items.reserve(params.size());
  bool created = false;
  for (const ParamRef& ref : params) {
    const Tensor& param = *ref.param;
    Tensor grad = param.grad();
    if (!grad.defined()) continue;
    check_pair(who, param, grad);
    ParamState& state = *ref.state;
    for (int k = 0; k < 3; ++k) {
      if (!names.names[k]) continue;
      Tensor& t = state_tensor(state, param, names.names[k], &created);
      if (created && k == 0 && names.initial_value != 0.0) {
        NoGradGuard no_grad;
        t.fill_(names.initial_value);
      }
    }
    state.step += 1;
    ops::OptimItem item{&param, grad, {nullptr, nullptr, nullptr}, args};
    for (int k = 0; k < 3; ++k)
      item.state[k] = names.names[k] ? state.find(names.names[k]) : nullptr;
    item.args.step = state.step;
    if (args.algo == backend::OptimAlgo::nadam) {
      // torch: mu_product is a float32 0-d tensor and mu_product *= mu rounds to float.
      if (!state.find_scalar("mu_product")) state.scalars.emplace_back("mu_product", 1.0);
      double* product = state.find_scalar("mu_product");
      const double mu =
          backend::nadam_mu(args.alpha, args.momentum_decay, static_cast<double>(state.step));
      *product = static_cast<double>(static_cast<float>(*product) * static_cast<float>(mu));
      item.args.mu_product = *product;
    }
    items.push_back(item);
  }
  ops::optim_step_(items);
}

}  // namespace ember::optim::detail
