// src/autograd/hooks.cpp — the registry of post-accumulate-grad hooks (ember/hooks.hpp).
//
// Hooks are kept beside the tensors, keyed by the leaf's TensorImpl, rather than in it, so
// that the TensorImpl layout (included everywhere) stays as it is. Each entry also holds a
// weak reference to its leaf: a key whose leaf has died (and whose address a new tensor may
// reuse) never runs. The engine asks only when some hook exists (one atomic load).
#include "autograd/hooks.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "autograd/node.hpp"
#include "core/checks.hpp"
#include "ember/hooks.hpp"

namespace ember::autograd {

namespace {

struct Entry {
  uint64_t id;
  std::weak_ptr<TensorImpl> leaf;
  std::shared_ptr<PostAccumulateGradHook> hook;
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<const TensorImpl*, std::vector<Entry>> by_leaf;
  std::atomic<size_t> count{0};
  uint64_t next_id = 1;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: handles may outlive static teardown
  return *r;
}

}  // namespace

HookHandle& HookHandle::operator=(HookHandle&& other) noexcept {
  if (this != &other) {
    remove();
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

void HookHandle::remove() {
  if (id_ == 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto it = r.by_leaf.begin(); it != r.by_leaf.end(); ++it) {
    auto& entries = it->second;
    auto e =
        std::find_if(entries.begin(), entries.end(), [&](const Entry& x) { return x.id == id_; });
    if (e == entries.end()) continue;
    entries.erase(e);
    r.count.fetch_sub(1, std::memory_order_relaxed);
    if (entries.empty()) r.by_leaf.erase(it);
    break;
  }
  id_ = 0;
}

HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
  core::check_defined("register_post_accumulate_grad_hook", leaf, "tensor");
  EMBER_CHECK(leaf.is_leaf() && leaf.requires_grad(),
              "register_post_accumulate_grad_hook: expected a leaf that requires grad (got ",
              leaf.is_leaf() ? "a leaf that does not require grad" : "a tensor computed by an op",
              "; hooks run where gradients accumulate, which is on leaves only)");
  EMBER_CHECK(hook != nullptr, "register_post_accumulate_grad_hook: the hook is empty");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const std::shared_ptr<TensorImpl>& impl = detail::TensorAccess::impl_ptr(leaf);
  auto& entries = r.by_leaf[impl.get()];
  // Entries of a dead leaf at this address are stale: drop them.
  std::erase_if(entries, [&](const Entry& e) {
    const bool stale = e.leaf.expired();
    if (stale) r.count.fetch_sub(1, std::memory_order_relaxed);
    return stale;
  });
  const uint64_t id = r.next_id++;
  entries.push_back({id, impl, std::make_shared<PostAccumulateGradHook>(std::move(hook))});
  r.count.fetch_add(1, std::memory_order_relaxed);
  return HookHandle(id);
}

void run_post_accumulate_grad_hooks(const std::shared_ptr<TensorImpl>& leaf) {
  Registry& r = registry();
  if (r.count.load(std::memory_order_relaxed) == 0) return;
  std::vector<std::shared_ptr<PostAccumulateGradHook>> hooks;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.by_leaf.find(leaf.get());
    if (it == r.by_leaf.end()) return;
    for (const Entry& e : it->second)
      if (e.leaf.lock() == leaf) hooks.push_back(e.hook);
  }
  const Tensor t = detail::TensorAccess::wrap(leaf);
  for (const auto& h : hooks) (*h)(t);  // outside the lock: a hook may register or remove
}

}  // namespace ember::autograd
