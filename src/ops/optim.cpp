// src/ops/optim.cpp — the optimizer ops (see optim.hpp): multi-tensor Adam/SGD steps and the
// gradient norm, on the backend's multi-tensor slots.
//
// Items are sorted into buckets of one (device, dtype, step, first_step); each bucket is one
// backend call (on a GPU one launch, chunked as PyTorch's multi_tensor_apply). The steady
// state allocates nothing; only a parameter or gradient that is neither contiguous nor
// channels_last (rare: optimizers see dense leaves) goes through contiguous temporaries,
// copied back into its own buffer.
#include "ops/optim.hpp"

#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "ops/common.hpp"

namespace ember::ops {
namespace {

// Parameters of one multi-tensor call.
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

// A parameter written back after its bucket ran (non-contiguous parameters only).
struct WriteBack {
  const Tensor* param;
  Tensor work;
};

// The slot of one item; a non-contiguous parameter or gradient gets contiguous copies (the
// parameter's is written back by `finish`). The state buffers are contiguous: optim makes them.
// A channels_last parameter (Note [Memory formats]) is walked as its flat buffer like a
// contiguous one: its gradient and state share its format (autograd and optim make them so),
// so element i of every buffer is the same logical element.
backend::OptimSlot slot_of(const Tensor& param, const Tensor& grad,
                           const std::array<const Tensor*, 3>& state,
                           std::vector<WriteBack>& write_back, std::vector<Tensor>& keep) {
  backend::OptimSlot s;
  const MemoryFormat format = format_of(param);
  Tensor p = param;
  if (!param.is_contiguous(format)) {
    p = param.detach().contiguous();
    write_back.push_back({&param, p});
  }
  // The layout every other buffer must have: p's strides (size-1 dims aside).
  const auto same_layout = [&](const Tensor& t) {
    for (int d = 0; d < p.dim(); ++d)
      if (p.size(d) != 1 && t.stride(d) != p.stride(d)) return false;
    return true;
  };
  Tensor g = same_layout(grad) ? grad : grad.contiguous(format_of(p));
  EMBER_ASSERT(same_layout(g), "optimizer: the gradient's layout differs from its parameter's");
  keep.push_back(g);
  s.param = p.data_ptr();
  s.grad = g.data_ptr();
  int i = 0;
  for (const Tensor* t : state) {
    EMBER_ASSERT(!t || same_layout(*t), "optimizer state must be laid out as its parameter");
    s.state[i++] = t ? t->data_ptr() : nullptr;
  }
  s.numel = param.numel();
  return s;
}

void finish(const std::vector<Bucket>& buckets, const std::vector<WriteBack>& write_back) {
  for (const WriteBack& w : write_back) Tensor(*w.param).detach().copy_(w.work);
  for (const Bucket& b : buckets)
    for (const Tensor* p : b.params) detail::StorageAccess::bump_version(*p->storage());
}

}  // namespace

namespace {

// Buckets `items` (bucket_key(item) -> {step, first_step}; slot_state(item) -> the state
// tensors), runs `call(bucket)` once per bucket and writes the results back.
template <typename Item, typename Key, typename State, typename Call>
void run_buckets(std::span<const Item> items, Key&& bucket_key, State&& slot_state, Call&& call) {
  NoGradGuard no_grad;
  // A ReadOnlyGuard's tensor is refused before any is written (finish bumps after the step).
  if (detail::read_only_guarded())
    for (const Item& it : items) detail::check_not_read_only(*it.param->storage());
  std::vector<Bucket> buckets;
  std::vector<WriteBack> write_back;
  std::vector<Tensor> keep;
  for (const Item& it : items) {
    const auto [step, first] = bucket_key(it);
    Bucket& b = bucket_for(buckets, *it.param, step, first);
    b.slots.push_back(slot_of(*it.param, it.grad, slot_state(it), write_back, keep));
    b.params.push_back(it.param);
  }
  for (const Bucket& b : buckets) call(b);
  finish(buckets, write_back);
}

}  // namespace

void adam_step_(std::span<const AdamItem> items, const backend::AdamArgs& group_args) {
  run_buckets(
      items, [](const AdamItem& it) { return std::pair<int64_t, bool>(it.step, false); },
      [](const AdamItem& it) {
        return std::array<const Tensor*, 3>{it.exp_avg, it.exp_avg_sq, it.max_exp_avg_sq};
      },
      [&](const Bucket& b) {
        backend::AdamArgs args = group_args;
        args.step = b.step;
        backend::backend_for(b.device).adam_step_multi(b.device.index, b.dtype, b.slots.data(),
                                                       static_cast<int64_t>(b.slots.size()), args);
      });
}

void sgd_step_(std::span<const SgdItem> items, const backend::SgdArgs& group_args) {
  // With skipped_steps the kernel decides the momentum buffer's first step from the step count.
  const bool by_step = group_args.skipped_steps != nullptr;
  run_buckets(
      items,
      [by_step](const SgdItem& it) {
        return std::pair<int64_t, bool>(by_step ? it.step : 0, it.first_step);
      },
      [](const SgdItem& it) {
        return std::array<const Tensor*, 3>{it.momentum_buffer, nullptr, nullptr};
      },
      [&](const Bucket& b) {
        backend::SgdArgs args = group_args;
        args.first_step = b.first_step;
        args.step = b.step;
        backend::backend_for(b.device).sgd_step_multi(b.device.index, b.dtype, b.slots.data(),
                                                      static_cast<int64_t>(b.slots.size()), args);
      });
}

void optim_step_(std::span<const OptimItem> items) {
  NoGradGuard no_grad;
  if (detail::read_only_guarded())  // refused before any is written, as in run_buckets
    for (const OptimItem& it : items) detail::check_not_read_only(*it.param->storage());
  struct ArgsBucket {
    Device device;
    DType dtype;
    backend::OptimArgs args;
    std::vector<backend::OptimSlot> slots;
  };
  std::vector<ArgsBucket> buckets;
  std::vector<WriteBack> write_back;
  std::vector<Tensor> keep;
  for (const OptimItem& it : items) {
    const Tensor& p = *it.param;
    ArgsBucket* bucket = nullptr;
    for (ArgsBucket& b : buckets)
      if (b.device == p.device() && b.dtype == p.dtype() && b.args == it.args) bucket = &b;
    if (!bucket) {
      buckets.push_back({p.device(), p.dtype(), it.args, {}});
      bucket = &buckets.back();
    }
    bucket->slots.push_back(slot_of(p, it.grad, it.state, write_back, keep));
  }
  for (const ArgsBucket& b : buckets)
    backend::backend_for(b.device).optim_step_multi(b.device.index, b.dtype, b.slots.data(),
                                                    static_cast<int64_t>(b.slots.size()), b.args);
  for (const WriteBack& w : write_back) Tensor(*w.param).detach().copy_(w.work);
  for (const OptimItem& it : items) detail::StorageAccess::bump_version(*it.param->storage());
}

// ---- gradient norm ----

namespace {

// The norm of one gradient as a 0-d tensor (f64 for accuracy, on the gradient's device).
Tensor one_norm(const Tensor& g, double norm_type) {
  const Tensor x = g.to(DType::f64).abs();
  if (std::isinf(norm_type)) return max(x);
  if (norm_type == 1.0) return sum(x);
  if (norm_type == 2.0) return sqrt(sum(square(x)));
  return pow(sum(pow(x, norm_type)), 1.0 / norm_type);
}

// All dense (contiguous or channels_last: the kernels read each buffer as a flat list), one
// device, one dtype: the two multi-tensor kernels apply.
bool fusable(const std::vector<Tensor>& grads) {
  for (const Tensor& g : grads)
    if (!is_dense(g) || g.device() != grads[0].device() || g.dtype() != grads[0].dtype())
      return false;
  return true;
}

struct Pointers {
  std::vector<void*> data;
  std::vector<int64_t> numels;
  explicit Pointers(const std::vector<Tensor>& grads) {
    for (const Tensor& g : grads) {
      data.push_back(g.data_ptr());
      numels.push_back(g.numel());
    }
  }
  int64_t count() const { return static_cast<int64_t>(data.size()); }
};

}  // namespace

Tensor total_grad_norm(const std::vector<Tensor>& grads, double norm_type) {
  NoGradGuard no_grad;
  EMBER_ASSERT(!grads.empty(), "total_grad_norm: no gradients");
  if (fusable(grads)) {
    const Tensor& g0 = grads[0];
    Tensor total = zeros({}, {.dtype = g0.dtype(), .device = g0.device()});
    const Pointers list(grads);
    backend_of(g0).grad_norm_multi(g0.device().index, g0.dtype(), list.data.data(),
                                   list.numels.data(), list.count(), norm_type, total.data_ptr());
    return total;
  }
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) {
    Tensor n = g.numel() == 0 ? zeros({}, {.dtype = DType::f64, .device = g.device()})
                              : one_norm(g, norm_type);
    norms.push_back(n.device() == grads[0].device() ? n : n.to(grads[0].device()));
  }
  const Tensor all = stack(norms);
  return (std::isinf(norm_type) ? max(all) : one_norm(all, norm_type)).to(grads[0].dtype());
}

void clip_grads_by_norm_(const std::vector<Tensor>& grads, const Tensor& total, double max_norm) {
  NoGradGuard no_grad;
  if (fusable(grads) && total.device() == grads[0].device() && total.dtype() == grads[0].dtype()) {
    const Pointers list(grads);
    backend_of(total).clip_grads_by_norm(total.device().index, total.dtype(), list.data.data(),
                                         list.numels.data(), list.count(), max_norm,
                                         total.data_ptr());
    for (const Tensor& g : grads) detail::StorageAccess::bump_version(*g.storage());
    return;
  }
  const Tensor coef = clamp(max_norm / (total.to(DType::f64) + 1e-6),
                            -std::numeric_limits<double>::infinity(), 1.0);
  for (const Tensor& g : grads) Tensor(g).mul_(coef.to(g.dtype()).to(g.device()));
}

// ---- loss scaling ----

void amp_unscale_(const std::vector<Tensor>& grads, const Tensor& scale, const Tensor& found_inf) {
  NoGradGuard no_grad;
  EMBER_ASSERT(scale.dtype() == DType::f32 && found_inf.dtype() == DType::f32 &&
                   scale.device() == found_inf.device(),
               "amp_unscale_: scale and found_inf must be f32 on one device");
  for (DType dtype : {DType::f32, DType::f64}) {
    std::vector<Tensor> work;
    std::vector<std::pair<Tensor, Tensor>> write_back;  // non-contiguous grad, its copy
    for (const Tensor& g : grads) {
      if (g.dtype() != dtype) continue;
      EMBER_ASSERT(g.device() == scale.device(), "amp_unscale_: a gradient on another device");
      if (is_dense(g)) {  // scaled element by element: any order will do
        work.push_back(g);
      } else {
        work.push_back(g.contiguous());
        write_back.emplace_back(g, work.back());
      }
    }
    if (work.empty()) continue;
    const Pointers list(work);
    backend_of(scale).amp_unscale(scale.device().index, dtype, list.data.data(), list.numels.data(),
                                  list.count(), scale.data_ptr(), found_inf.data_ptr());
    for (auto& [g, w] : write_back) Tensor(g).copy_(w);
    for (const Tensor& g : work) detail::StorageAccess::bump_version(*g.storage());
  }
}

void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker,
                       const Tensor& found_combined, const std::vector<Tensor>& found_infs,
                       const std::vector<Tensor>& skipped_steps, double growth_factor,
                       double backoff_factor, int64_t growth_interval) {
  EMBER_ASSERT(found_infs.size() == skipped_steps.size(),
               "amp_update_scale_: one skipped counter (or none) per found_inf");
  std::vector<const float*> found;
  std::vector<int64_t*> skipped;
  for (size_t i = 0; i < found_infs.size(); ++i) {
    found.push_back(static_cast<const float*>(found_infs[i].data_ptr()));
    skipped.push_back(
        skipped_steps[i].defined() ? static_cast<int64_t*>(skipped_steps[i].data_ptr()) : nullptr);
  }
  backend_of(found_combined)
      .amp_update_scale(found_combined.device().index, scale.defined() ? scale.data_ptr() : nullptr,
                        growth_tracker.defined() ? growth_tracker.data_ptr() : nullptr,
                        found_combined.data_ptr(), found.data(), skipped.data(),
                        static_cast<int64_t>(found.size()), growth_factor, backoff_factor,
                        growth_interval);
  for (const Tensor& t : {scale, growth_tracker, found_combined})
    if (t.defined()) detail::StorageAccess::bump_version(*t.storage());
  for (const Tensor& t : skipped_steps)
    if (t.defined()) detail::StorageAccess::bump_version(*t.storage());
}

}  // namespace ember::ops
