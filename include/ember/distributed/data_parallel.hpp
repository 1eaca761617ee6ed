// ember/distributed/data_parallel.hpp — DistributedDataParallel: one replica of a module per
// rank, gradients averaged across ranks during backward (docs/distributed.md).
//
//   distributed::init();                               // under mpirun -np N
//   nn::Sequential net(...);                           // on its final device and dtype
//   distributed::DistributedDataParallel ddp(net);     // rank 0's weights on every rank
//   optim::Adam opt(net->parameters(), {.lr = 1e-3});
//   for (auto& batch : loader) {                       // each rank: its shard of the data
//     opt.zero_grad();
//     mse_loss(ddp(batch.input), batch.target).backward();  // gradients averaged here
//     opt.step();                                      // the same step on every rank
//   }
//
// Note [DDP buckets]
// Parameters are grouped, in reverse registration order (about the order backward produces
// their gradients) and by dtype and device, into buckets of at most bucket_cap_mb. A
// post-accumulate-grad hook (ember/hooks.hpp) on each parameter copies its gradient into its
// bucket's flat buffer; when a bucket is complete its all-reduce starts (non-blocking), in
// bucket order, so every rank issues the same collectives in the same order. When the last
// bucket has started, backward waits for all of them and writes the averages back into each
// `.grad` (in place). Averaging is sum / world_size: with equal shards and a mean loss this
// is the gradient of one process on the combined batch. Under no_sync() the hooks do nothing
// and gradients accumulate locally; the next synchronised backward reduces the sums. In a
// world of one no hook is registered at all (the average is the gradient itself), unless
// reduce_in_world_of_one asks for the machinery anyway.
//
// On CUDA with NCCL a bucket's all-reduce runs on the device's communication stream, after an
// event behind the kernels that wrote the bucket (the gradient copies), so it overlaps the
// rest of backward; when the last bucket has started, the compute stream waits for the
// communication stream (no host synchronisation) before the averages are copied back, so the
// optimizer's kernels read them after the reduction (Note [The communication stream] in
// src/cuda/comm_stream.hpp). Staged over MPI instead, a bucket's copy to host memory waits for
// the compute stream, and only the MPI all-reduce overlaps backward.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/distributed.hpp"
#include "ember/hooks.hpp"
#include "ember/nn/module.hpp"

namespace ember::distributed {

/// What happens to module buffers (BatchNorm's running statistics) across ranks.
enum class BufferSync {
  per_rank,   // each rank keeps its own (the default; PyTorch BatchNorm without SyncBatchNorm)
  broadcast,  // rank 0's are copied to every rank before each training forward
  average,    // floating buffers are averaged across ranks before each training forward
};

struct DistributedDataParallelOptions {
  /// Upper bound of one bucket's gradients, in MiB (a larger parameter gets a bucket alone).
  double bucket_cap_mb = 25.0;
  BufferSync buffers = BufferSync::per_rank;
  /// Keep the hooks, the bucket copies and the all-reduces in a world of one too (where the
  /// average is the gradient itself and DDP otherwise does nothing): for measuring or testing
  /// the machinery on one process. With InitOptions::cuda_collectives = CudaCollectives::nccl
  /// the buckets of CUDA parameters then go through a one-rank NCCL communicator.
  bool reduce_in_world_of_one = false;
};

class DistributedDataParallelImpl : public nn::ModuleImpl {
 public:
  /// Broadcasts `module`'s parameters and buffers from rank 0 (after checking that every rank
  /// holds the same parameter names and shapes) and registers the gradient hooks. Throws
  /// before distributed::init(), for an empty module handle, or a bad bucket_cap_mb.
  explicit DistributedDataParallelImpl(nn::Module module,
                                       DistributedDataParallelOptions options = {});
  ~DistributedDataParallelImpl() override;

  /// The wrapped module's forward (after syncing buffers when asked). Throws when the last
  /// synchronised backward left gradients unreduced (see finish_gradient_sync()).
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "DistributedDataParallel"; }
  std::string extra_repr() const override;

  /// The wrapped module (save its state_dict() for checkpoints: names without "module.").
  const nn::Module& module() const { return module_; }

  /// While alive, backward accumulates gradients locally without communicating. Example:
  ///   { auto guard = ddp->no_sync(); loss_a.backward(); }   loss_b.backward();  // reduced
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallelImpl& ddp);
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallelImpl& ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  /// Completes a reduction that backward left open because some parameters received no
  /// gradient (they were not used in this forward): their share counts as zeros, and a
  /// parameter with no gradient on this rank gets the averaged one. Call it after backward
  /// when a model has parameters some steps do not use. Nothing to do otherwise.
  void finish_gradient_sync();
  /// Applies options().buffers now (broadcast or average; nothing for per_rank).
  void sync_buffers();

  const DistributedDataParallelOptions& ddp_options() const { return options_; }
  /// The parameter names of each bucket, in the order the buckets are reduced.
  std::vector<std::vector<std::string>> bucket_parameter_names() const;
  /// Collectives issued for gradients so far (one per bucket per synchronised step).
  int64_t reductions_started() const { return reductions_started_; }

 private:
  struct Bucket;
  static Tensor slot(Bucket& bucket, size_t param);
  void on_gradient(size_t param);
  void launch_ready_buckets();
  void finish_reduction();
  void reset_step();

  nn::Module module_;
  DistributedDataParallelOptions options_;
  std::vector<std::string> names_;  // parameters that require grad, registration order
  std::vector<Tensor> params_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<size_t> bucket_of_;  // per parameter
  std::vector<bool> ready_;
  size_t next_launch_ = 0;
  bool any_ready_ = false;
  bool sync_ = true;
  int64_t reductions_started_ = 0;
  std::vector<autograd::HookHandle> hooks_;
};

/// The handle: distributed::DistributedDataParallel ddp(net, {.bucket_cap_mb = 5});
class DistributedDataParallel : public nn::ModuleHolder<DistributedDataParallelImpl> {
 public:
  using ModuleHolder::ModuleHolder;
  DistributedDataParallel(nn::Module module, DistributedDataParallelOptions options)
      : ModuleHolder(std::make_shared<DistributedDataParallelImpl>(std::move(module), options)) {}
};

}  // namespace ember::distributed
