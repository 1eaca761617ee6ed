// src/distributed/data_parallel.cpp — DistributedDataParallel (Note [DDP buckets] in
// include/ember/distributed/data_parallel.hpp).
#include "ember/distributed/data_parallel.hpp"

#include <sstream>

#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/memory.hpp"

namespace ember::distributed {

struct DistributedDataParallelImpl::Bucket {
  DType dtype = DType::f32;
  Device device = Device::cpu();
  std::vector<size_t> params;   // indices into params_
  std::vector<int64_t> offset;  // element offset of each in `flat`
  int64_t numel = 0;
  Tensor flat;     // the gradients, back to back (allocated at the first reduction)
  size_t pending;  // parameters whose gradient has not arrived this step
  Work work;
  bool launched = false;
};

namespace {

std::string names_of(const std::vector<std::string>& all, const std::vector<size_t>& which) {
  std::string s;
  for (size_t i = 0; i < which.size() && i < 8; ++i) s += (i ? ", '" : "'") + all[which[i]] + "'";
  if (which.size() > 8) s += detail::concat(" and ", which.size() - 8, " more");
  return s;
}

// Every rank must wrap the same model: same parameter and buffer counts, same total size.
void check_same_model(const nn::NamedTensors& params, const nn::NamedTensors& buffers) {
  int64_t numel = 0;
  for (const auto& [n, t] : params) numel += t.numel();
  for (const auto& [n, t] : buffers) numel += t.defined() ? t.numel() : 0;
  Tensor mine = from_vector<int64_t>({int64_t(params.size()), int64_t(buffers.size()), numel}, {3});
  Tensor all = all_gather(mine);
  std::vector<int64_t> v = all.to_vector<int64_t>();
  bool same = true;
  std::string ranks;
  for (int r = 0; r < world_size(); ++r) {
    same = same && v[3 * r] == v[0] && v[3 * r + 1] == v[1] && v[3 * r + 2] == v[2];
    ranks += detail::concat(r ? ", " : "", "rank ", r, ": ", v[3 * r], " parameters, ",
                            v[3 * r + 1], " buffers, ", v[3 * r + 2], " elements");
  }
  EMBER_CHECK(same, "DistributedDataParallel: the ranks wrap different models (", ranks,
              "); expected the same architecture on every rank");
}

}  // namespace

DistributedDataParallelImpl::DistributedDataParallelImpl(nn::Module module,
                                                         DistributedDataParallelOptions options)
    : module_(std::move(module)), options_(options) {
  EMBER_CHECK(is_initialized(),
              "DistributedDataParallel: distributed::init() has not been called "
              "(expected init() before wrapping the model)");
  EMBER_CHECK(module_.defined(), "DistributedDataParallel: the module handle is empty");
  EMBER_CHECK(options_.bucket_cap_mb > 0,
              "DistributedDataParallel: bucket_cap_mb must be positive (got ",
              options_.bucket_cap_mb, ")");
  register_module("module", module_.ptr());
  const nn::NamedTensors named = module_->named_parameters();
  const nn::NamedTensors buffers = module_->named_buffers();
  check_same_model(named, buffers);

  // Rank 0's values everywhere (each broadcast compares shapes and dtypes across ranks).
  {
    NoGradGuard no_grad;
    for (auto [n, t] : named) broadcast(t, 0);
    for (auto [n, t] : buffers)
      if (t.defined()) broadcast(t, 0);
  }

  for (const auto& [n, t] : named)
    if (t.requires_grad()) {
      names_.push_back(n);
      params_.push_back(t);
    }
  // Buckets: reverse registration order, split by dtype/device and at the size cap.
  const double cap_bytes = options_.bucket_cap_mb * 1024.0 * 1024.0;
  bucket_of_.assign(params_.size(), 0);
  Bucket* current = nullptr;
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    const double bytes = double(p.numel()) * double(element_size(p.dtype()));
    const bool fits =
        current && current->dtype == p.dtype() && current->device == p.device() &&
        double(current->numel) * double(element_size(current->dtype)) + bytes <= cap_bytes;
    if (!fits) {
      buckets_.push_back(std::make_unique<Bucket>());
      current = buckets_.back().get();
      current->dtype = p.dtype();
      current->device = p.device();
    }
    current->params.push_back(k);
    current->offset.push_back(current->numel);
    current->numel += p.numel();
    bucket_of_[k] = buckets_.size() - 1;
  }
  reset_step();
  // In a world of one the average is the gradient itself: no hooks, no copies, no cost.
  if (world_size() == 1 && !options_.reduce_in_world_of_one) return;
  for (size_t k = 0; k < params_.size(); ++k)
    hooks_.push_back(autograd::register_post_accumulate_grad_hook(
        params_[k], [this, k](const Tensor&) { on_gradient(k); }));
}

DistributedDataParallelImpl::~DistributedDataParallelImpl() {
  hooks_.clear();
  for (auto& b : buckets_) {
    try {
      b->work.wait();
    } catch (...) {  // destructors do not throw; a failing job is reported elsewhere
    }
  }
}

std::string DistributedDataParallelImpl::extra_repr() const {
  return detail::concat("world_size=", world_size(), ", buckets=", buckets_.size(),
                        ", bucket_cap_mb=", options_.bucket_cap_mb);
}

void DistributedDataParallelImpl::reset_step() {
  ready_.assign(params_.size(), false);
  for (auto& b : buckets_) {
    b->pending = b->params.size();
    b->launched = false;
  }
  next_launch_ = 0;
  any_ready_ = false;
}

Tensor DistributedDataParallelImpl::forward(const Tensor& input) {
  if (any_ready_) {
    std::vector<size_t> missing;
    for (size_t k = 0; k < params_.size(); ++k)
      if (!ready_[k]) missing.push_back(k);
    detail::throw_error(detail::concat(
        "DistributedDataParallel: the last backward produced no gradient for ", missing.size(),
        " parameter(s) (", names_of(names_, missing),
        "), so their buckets were never reduced; call ddp->finish_gradient_sync() after backward "
        "when some parameters are unused in a step"));
  }
  if (is_training()) sync_buffers();
  return module_(input);
}

void DistributedDataParallelImpl::sync_buffers() {
  if (options_.buffers == BufferSync::per_rank || world_size() == 1) return;
  NoGradGuard no_grad;
  for (auto [n, t] : module_->named_buffers()) {
    if (!t.defined()) continue;
    if (options_.buffers == BufferSync::average && is_floating(t.dtype()))
      all_reduce(t, ReduceOp::avg);
    else
      broadcast(t, 0);
  }
}

// Parameter k's place in its bucket's flat buffer (allocated, Persistent, at first use).
Tensor DistributedDataParallelImpl::slot(Bucket& b, size_t k) {
  if (!b.flat.defined()) {
    PoolGuard pool(Pool::Persistent);
    b.flat = empty({b.numel}, {.dtype = b.dtype, .device = b.device});
  }
  size_t i = 0;
  while (b.params[i] != k) ++i;
  const int64_t n = (i + 1 < b.params.size() ? b.offset[i + 1] : b.numel) - b.offset[i];
  return b.flat.narrow(0, b.offset[i], n);
}

void DistributedDataParallelImpl::on_gradient(size_t k) {
  if (!sync_) return;
  EMBER_CHECK(!ready_[k], "DistributedDataParallel: parameter '", names_[k],
              "' received a second gradient before the reduction finished (expected one "
              "backward per step; accumulate the others under no_sync())");
  Bucket& b = *buckets_[bucket_of_[k]];
  const Tensor g = params_[k].grad();
  EMBER_CHECK(g.defined() && g.dtype() == b.dtype && g.device() == b.device,
              "DistributedDataParallel: parameter '", names_[k], "' now has a ",
              g.defined() ? dtype_name(g.dtype()) : "missing", " gradient on ",
              g.defined() ? g.device().str() : "no device", " (expected ", dtype_name(b.dtype),
              " on ", b.device.str(),
              "; move the module to its final device and dtype before wrapping it)");
  slot(b, k).copy_(g.reshape({g.numel()}));
  ready_[k] = true;
  any_ready_ = true;
  --b.pending;
  launch_ready_buckets();
  if (next_launch_ == buckets_.size()) finish_reduction();
}

void DistributedDataParallelImpl::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->pending == 0) {
    Bucket& b = *buckets_[next_launch_++];
    b.work = start_all_reduce(b.flat, ReduceOp::avg, false);
    b.launched = true;
    ++reductions_started_;
  }
  for (size_t i = 0; i < next_launch_; ++i) buckets_[i]->work.test();  // lets MPI progress
}

void DistributedDataParallelImpl::finish_reduction() {
  NoGradGuard no_grad;
  for (auto& bp : buckets_) {
    Bucket& b = *bp;
    b.work.wait();
    for (size_t s = 0; s < b.params.size(); ++s) {
      Tensor& p = params_[b.params[s]];
      Tensor avg = b.flat.narrow(0, b.offset[s], p.numel()).view(p.shape());
      if (p.grad().defined()) {
        p.grad().copy_(avg);
      } else {
        PoolGuard pool(Pool::Persistent);
        p.set_grad(avg.clone());
      }
    }
  }
  reset_step();
}

void DistributedDataParallelImpl::finish_gradient_sync() {
  if (!any_ready_) return;
  for (size_t k = 0; k < params_.size(); ++k) {
    if (ready_[k]) continue;
    Bucket& b = *buckets_[bucket_of_[k]];
    const Tensor g = params_[k].grad();
    Tensor dst = slot(b, k);
    NoGradGuard no_grad;
    if (g.defined())
      dst.copy_(g.reshape({g.numel()}));
    else
      dst.zero_();
    ready_[k] = true;
    --b.pending;
  }
  launch_ready_buckets();
  finish_reduction();
}

std::vector<std::vector<std::string>> DistributedDataParallelImpl::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : buckets_) {
    out.emplace_back();
    for (size_t k : b->params) out.back().push_back(names_[k]);
  }
  return out;
}

DistributedDataParallelImpl::NoSyncGuard::NoSyncGuard(DistributedDataParallelImpl& ddp)
    : ddp_(ddp), previous_(ddp.sync_) {
  ddp_.sync_ = false;
}
DistributedDataParallelImpl::NoSyncGuard::~NoSyncGuard() { ddp_.sync_ = previous_; }

}  // namespace ember::distributed
