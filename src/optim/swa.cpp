// src/optim/swa.cpp — torch.optim.swa_utils (PyTorch 1.13): AveragedModel (the copy, the
// running average or EMA of its tensors), SWALR (get_lr transcribed with PyTorch's branches and
// expressions) and update_bn.
#include "ember/optim/swa.hpp"

#include <algorithm>
#include <cmath>

#include "ember/autograd.hpp"
#include "ember/data/dataloader.hpp"
#include "ember/memory.hpp"
#include "ember/nn/init.hpp"
#include "ember/nn/norm.hpp"
#include "optim/scheduler_json.hpp"

namespace ember::optim {
namespace {

// Copies `src`'s values into the same-named tensors of `dst` (fresh Persistent storage: the copy
// shares nothing with the model).
void copy_tensors(const nn::NamedTensors& dst, const nn::NamedTensors& src, const char* what) {
  EMBER_CHECK(dst.size() == src.size(), "AveragedModel: the copy has ", dst.size(), " ", what,
              " but the model ", src.size(), " (expected the model's config() to rebuild it)");
  PoolGuard persistent(Pool::Persistent);
  for (size_t i = 0; i < dst.size(); ++i) {
    EMBER_CHECK(dst[i].first == src[i].first && dst[i].second.shape() == src[i].second.shape(),
                "AveragedModel: the copy's ", what, " '", dst[i].first, "' ",
                dst[i].second.shape().to_string(), " does not match the model's '", src[i].first,
                "' ", src[i].second.shape().to_string());
    Tensor t = dst[i].second;
    t.set_data_(src[i].second.detach().clone());
  }
}

// PyTorch's deepcopy(model), through the architecture: build(config()), then the tensors and
// each module's train/eval mode.
nn::Module copy_module(const nn::Module& model) {
  nn::Module copy;
  try {
    nn::init::SkipInitGuard skip;  // every value comes from the model
    copy = nn::build(model->config());
  } catch (const Error& e) {
    EMBER_CHECK(false, "AveragedModel: cannot copy the model (", e.what(),
                "); a custom module needs nn::register_module_type");
  }
  NoGradGuard no_grad;
  copy_tensors(copy->named_parameters(), model->named_parameters(), "parameters");
  copy_tensors(copy->named_buffers(), model->named_buffers(), "buffers");
  const auto from = model->named_modules(), to = copy->named_modules();
  for (size_t i = 0; i < from.size() && i < to.size(); ++i)
    to[i].second->train(from[i].second->is_training());  // parents first: children override
  return copy;
}

// avg_fn on integer buffers (num_batches_tracked): computed in f32, truncated back, as PyTorch's
// long tensors promote to the default dtype and copy_ truncates.
Tensor average(const AvgFn& fn, const Tensor& averaged, const Tensor& current, int64_t n) {
  if (is_floating(averaged.dtype())) return fn(averaged, current, n);
  return fn(averaged.to(DType::f32), current.to(DType::f32), n);
}

}  // namespace

// ---- AveragedModel ----

AveragedModelImpl::AveragedModelImpl(const nn::Module& model, AveragedModelOptions options)
    : options_(std::move(options)) {
  EMBER_CHECK(model.defined(), "AveragedModel: the model is an empty module handle");
  EMBER_CHECK(!(options_.decay && options_.avg_fn), "AveragedModel: got both decay ",
              *options_.decay, " and avg_fn (expected one of them, or neither)");
  if (options_.decay)
    EMBER_CHECK(*options_.decay >= 0.0 && *options_.decay <= 1.0, "AveragedModel: invalid decay ",
                *options_.decay, " (expected 0 <= decay <= 1)");
  if (!options_.avg_fn && options_.decay) {
    const double decay = *options_.decay;
    options_.avg_fn = [decay](const Tensor& a, const Tensor& p, int64_t) {
      return add(mul(a, decay), mul(p, 1.0 - decay));
    };
  } else if (!options_.avg_fn) {
    options_.avg_fn = [](const Tensor& a, const Tensor& p, int64_t n) {
      const Tensor count =
          full({}, static_cast<double>(n + 1), {.dtype = a.dtype(), .device = a.device()});
      return add(a, div(sub(p, a), count));
    };
  }
  module_ = copy_module(model);
  if (options_.device) module_->to(*options_.device);
  register_module("module", module_.ptr());
  n_averaged_ = register_buffer(
      "n_averaged",
      zeros({}, {.dtype = DType::i64, .device = options_.device.value_or(Device::cpu())}));
}

Tensor AveragedModelImpl::forward(const Tensor& input) { return module_(input); }

nn::json AveragedModelImpl::options() const {
  return {{"use_buffers", options_.use_buffers},
          {"decay", options_.decay ? nn::json(*options_.decay) : nn::json(nullptr)}};
}

int64_t AveragedModelImpl::n_averaged() const { return n_averaged_.item<int64_t>(); }

void AveragedModelImpl::update_parameters(const nn::Module& model) {
  EMBER_CHECK(model.defined(), "AveragedModel.update_parameters: the model is an empty handle");
  std::vector<Tensor> mine = module_->parameters(), theirs = model->parameters();
  if (options_.use_buffers) {
    for (const Tensor& b : module_->buffers()) mine.push_back(b);
    for (const Tensor& b : model->buffers()) theirs.push_back(b);
  }
  EMBER_CHECK(mine.size() == theirs.size(), "AveragedModel.update_parameters: the model has ",
              theirs.size(), " tensors to average, the averaged copy ", mine.size(),
              " (expected the model it was made from)");
  for (size_t i = 0; i < mine.size(); ++i)
    EMBER_CHECK(mine[i].shape() == theirs[i].shape(), "AveragedModel.update_parameters: tensor ", i,
                " has shape ", theirs[i].shape().to_string(), " in the model, ",
                mine[i].shape().to_string(), " in the averaged copy (expected the same)");
  NoGradGuard no_grad;
  const int64_t n = n_averaged();
  for (size_t i = 0; i < mine.size(); ++i) {
    Tensor swa = mine[i].detach();
    const Tensor current = theirs[i].detach().to(swa.device());
    if (n == 0)
      swa.copy_(current);
    else
      swa.copy_(average(options_.avg_fn, swa, current, n));
  }
  n_averaged_.add_(ones({}, {.dtype = DType::i64, .device = n_averaged_.device()}));
}

// ---- SWALR ----

SWALR::SWALR(Optimizer& optimizer, std::vector<double> swa_lr, int64_t anneal_epochs,
             AnnealStrategy anneal_strategy, int64_t last_epoch)
    : LRScheduler(optimizer, last_epoch),
      swa_lrs_(std::move(swa_lr)),
      anneal_epochs_(anneal_epochs),
      strategy_(anneal_strategy) {
  const size_t groups = optimizer.param_group_count();
  if (swa_lrs_.size() == 1) swa_lrs_.assign(groups, swa_lrs_[0]);
  EMBER_CHECK(swa_lrs_.size() == groups, "SWALR: swa_lr has ", swa_lrs_.size(),
              " values (expected one, or one per parameter group: ", groups, ")");
  for (size_t g = 0; g < swa_lrs_.size(); ++g)
    EMBER_CHECK(swa_lrs_[g] >= 0.0 && std::isfinite(swa_lrs_[g]), "SWALR: invalid swa_lr ",
                swa_lrs_[g], " for group ", g, " (expected a finite swa_lr >= 0)");
  EMBER_CHECK(anneal_epochs >= 0, "SWALR: invalid anneal_epochs ", anneal_epochs,
              " (expected anneal_epochs >= 0)");
  initial_step();
}

SWALR::SWALR(Optimizer& optimizer, double swa_lr, int64_t anneal_epochs,
             AnnealStrategy anneal_strategy, int64_t last_epoch)
    : SWALR(optimizer, std::vector<double>{swa_lr}, anneal_epochs, anneal_strategy, last_epoch) {}

double SWALR::anneal(double t) const {
  if (strategy_ == AnnealStrategy::linear) return t;
  return (1 - std::cos(detail::kPi * t)) / 2;
}

std::vector<double> SWALR::get_lr() {
  int64_t step = step_count_ - 1;
  if (anneal_epochs_ == 0) step = std::max<int64_t>(1, step);
  const auto epochs = static_cast<double>(std::max<int64_t>(1, anneal_epochs_));
  const double prev_t = std::max(0.0, std::min(1.0, static_cast<double>(step - 1) / epochs));
  const double prev_alpha = anneal(prev_t);
  const double t = std::max(0.0, std::min(1.0, static_cast<double>(step) / epochs));
  const double alpha = anneal(t);
  std::vector<double> lrs = group_lrs();
  for (size_t g = 0; g < lrs.size(); ++g) {
    // the lr before annealing, recovered from the current one (PyTorch's _get_initial_lr)
    const double prev =
        prev_alpha == 1 ? swa_lrs_[g] : (lrs[g] - prev_alpha * swa_lrs_[g]) / (1 - prev_alpha);
    lrs[g] = swa_lrs_[g] * alpha + prev * (1 - alpha);
  }
  return lrs;
}

void SWALR::save_extra(json& s) const {
  s["swa_lrs"] = detail::numbers_json(swa_lrs_);
  s["anneal_epochs"] = anneal_epochs_;
  s["anneal_strategy"] = strategy_ == AnnealStrategy::cos ? "cos" : "linear";
}

void SWALR::load_extra(const json& s) {
  const std::string who = type_name();
  std::vector<double> swa_lrs = swa_lrs_;
  int64_t anneal_epochs = anneal_epochs_;
  AnnealStrategy strategy = strategy_;
  detail::read(s, "swa_lrs", &swa_lrs, who);
  detail::read(s, "anneal_epochs", &anneal_epochs, who);
  if (s.contains("anneal_strategy")) {
    const json& a = s["anneal_strategy"];
    EMBER_CHECK(a == "cos" || a == "linear", who, ".load_state_dict: unknown anneal_strategy ",
                a.dump(), " (expected \"cos\" or \"linear\")");
    strategy = a == "cos" ? AnnealStrategy::cos : AnnealStrategy::linear;
  }
  EMBER_CHECK(swa_lrs.size() == swa_lrs_.size(), who, ".load_state_dict: swa_lrs has ",
              swa_lrs.size(), " entries (expected one per parameter group: ", swa_lrs_.size(), ")");
  EMBER_CHECK(anneal_epochs >= 0, who, ".load_state_dict: invalid anneal_epochs ", anneal_epochs,
              " (expected anneal_epochs >= 0)");
  swa_lrs_ = std::move(swa_lrs);
  anneal_epochs_ = anneal_epochs;
  strategy_ = strategy;
}

// ---- update_bn ----

namespace {

// Runs `pass(forward)` with every tracking BatchNorm of `model` reset and cumulative, the model
// in training mode and grad off; restores momenta and mode whatever happens.
void with_cumulative_bn(const nn::Module& model,
                        const std::function<void(const std::function<void(const Tensor&)>&)>& pass,
                        std::optional<Device> device) {
  EMBER_CHECK(model.defined(), "update_bn: the model is an empty module handle");
  std::vector<std::pair<nn::BatchNormImpl*, std::optional<double>>> momenta;
  for (const auto& [name, m] : model->named_modules())
    if (auto* bn = dynamic_cast<nn::BatchNormImpl*>(m.get());
        bn != nullptr && bn->norm_options().track_running_stats)
      momenta.emplace_back(bn, bn->norm_options().momentum);
  if (momenta.empty()) return;
  const bool was_training = model->is_training();
  struct Restore {
    const nn::Module& model;
    const std::vector<std::pair<nn::BatchNormImpl*, std::optional<double>>>& momenta;
    bool was_training;
    ~Restore() {
      for (const auto& [bn, momentum] : momenta) bn->set_momentum(momentum);
      model->train(was_training);
    }
  } restore{model, momenta, was_training};
  for (const auto& [bn, momentum] : momenta) {
    bn->reset_running_stats();
    bn->set_momentum(std::nullopt);
  }
  model->train();
  NoGradGuard no_grad;
  pass([&](const Tensor& input) {
    EMBER_CHECK(input.defined(), "update_bn: a batch has no input tensor");
    model(device ? input.to(*device) : input);
  });
}

}  // namespace

void update_bn(data::DataLoader& loader, const nn::Module& model, std::optional<Device> device) {
  with_cumulative_bn(
      model,
      [&](const std::function<void(const Tensor&)>& forward) {
        auto it = device ? loader.begin_on(*device) : loader.begin();
        for (; it != loader.end(); ++it) forward((*it).input);
      },
      std::nullopt);
}

void update_bn(const std::vector<Tensor>& inputs, const nn::Module& model,
               std::optional<Device> device) {
  with_cumulative_bn(
      model,
      [&](const std::function<void(const Tensor&)>& forward) {
        for (const Tensor& x : inputs) forward(x);
      },
      device);
}

}  // namespace ember::optim
