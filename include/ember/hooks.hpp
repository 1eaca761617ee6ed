// ember/hooks.hpp — autograd hooks: code that runs when a leaf's gradient is ready.
//
// A post-accumulate-grad hook (PyTorch's Tensor.register_post_accumulate_grad_hook) runs
// during backward, right after the engine has accumulated a leaf's gradient into `.grad`:
// once per backward for each leaf the backward reaches (a leaf used several times gets one
// call, with the summed gradient). It runs on the thread running backward, with grad mode
// off; it may read and change `leaf.grad()` in place. autograd::grad(), which does not
// accumulate, runs no hooks. DistributedDataParallel uses it to start a bucket's all-reduce
// while the rest of backward is still running.
//
//   Tensor w = parameter(randn({3}));
//   autograd::HookHandle h = autograd::register_post_accumulate_grad_hook(
//       w, [](const Tensor& leaf) { std::cout << leaf.grad() << "\n"; });
//   (w * w).sum().backward();   // prints 2 * w
//   h.remove();                 // or let the handle go out of scope
#pragma once

#include <cstdint>
#include <functional>

#include "ember/tensor.hpp"

namespace ember::autograd {

using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

/// Owns one registered hook: remove() (or the destructor) unregisters it. Move-only.
class HookHandle {
 public:
  HookHandle() = default;
  ~HookHandle() { remove(); }
  HookHandle(HookHandle&& other) noexcept : id_(other.id_) { other.id_ = 0; }
  HookHandle& operator=(HookHandle&& other) noexcept;
  HookHandle(const HookHandle&) = delete;
  HookHandle& operator=(const HookHandle&) = delete;
  void remove();
  bool active() const { return id_ != 0; }

 private:
  friend HookHandle register_post_accumulate_grad_hook(const Tensor&, PostAccumulateGradHook);
  explicit HookHandle(uint64_t id) : id_(id) {}
  uint64_t id_ = 0;
};

/// Runs `hook(leaf)` after each accumulation into `leaf.grad()`. Throws when `leaf` is
/// undefined, not a leaf, or does not require grad. Hooks of one leaf run in registration
/// order; an exception from a hook leaves backward with that error.
HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook);

}  // namespace ember::autograd
