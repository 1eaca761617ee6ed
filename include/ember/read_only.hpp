// ember/read_only.hpp — ReadOnlyGuard: tensors promised unchanged while the guard lives, so that
// a GPU decode step's products may read them before the kernels ahead of them finish.
#pragma once

#include <vector>

#include "ember/tensor.hpp"

namespace ember {

/// While alive on this thread, `tensors` (their storages: every view of them) are read-only:
/// an in-place change of one — an op's `_` form, copy_, an optimizer step, a checkpoint load —
/// is an ember::Error naming it. In return, the few-rows products of a decode step on a GPU
/// (linear, rms_norm_linear, layer_norm_linear and rms_norm_swiglu with one to four rows) that
/// take one of them as their weight load it before the kernels ahead of them finish (Note
/// [Weights loaded before the wait] in src/cuda/gemv.cu): results are unchanged, the weights'
/// reads overlap the kernel before. Work queued before the guard is finished before any
/// kernel queued inside it starts. models::generate holds one over the model's parameters.
/// Guards nest. Example:
///   { ReadOnlyGuard weights(model->parameters()); logits = model->forward(ids, {.cache = &c}); }
class ReadOnlyGuard {
 public:
  explicit ReadOnlyGuard(const std::vector<Tensor>& tensors);
  ~ReadOnlyGuard();
  ReadOnlyGuard(const ReadOnlyGuard&) = delete;
  ReadOnlyGuard& operator=(const ReadOnlyGuard&) = delete;

 private:
  size_t count_;  // storages this guard added to the thread's read-only list
};

/// Whether `t`'s storage is read-only on this thread (an alive ReadOnlyGuard lists it).
bool is_read_only(const Tensor& t);

}  // namespace ember
