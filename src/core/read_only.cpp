// src/core/read_only.cpp — ReadOnlyGuard (include/ember/read_only.hpp): this thread's list of
// read-only storages, the check every in-place change passes (StorageAccess::bump_version),
// and the stream order at a guard's start.
#include "ember/read_only.hpp"

#include <algorithm>
#include <memory>
#include <unordered_set>
#include <vector>

#include "backend/device_runtime.hpp"
#include "ember/error.hpp"

namespace ember {

namespace {
// The storages of this thread's alive guards, innermost last (a storage listed by two nested
// guards is listed twice: each guard removes its own entries), and the same as a set for the
// lookups (a decode step asks once per linear). The list holds the storages alive: a storage
// freed during the guard (a parameter reassigned) cannot leave its address to a new one that
// would then pass for read-only.
thread_local std::vector<std::shared_ptr<Storage>> t_read_only;
thread_local std::unordered_multiset<const Storage*> t_lookup;
}  // namespace

namespace detail {

bool read_only_guarded() { return !t_read_only.empty(); }

void check_not_read_only(const Storage& s) {
  EMBER_CHECK(!t_lookup.contains(&s),
              "in-place change of a tensor that a ReadOnlyGuard holds read-only (", s.bytes(),
              " bytes on ", s.device().str(),
              "; expected no change to it while the guard lives: models::generate holds the "
              "model's parameters read-only)");
}

}  // namespace detail

ReadOnlyGuard::ReadOnlyGuard(const std::vector<Tensor>& tensors) : count_(0) {
  std::vector<Device> devices;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    t_read_only.push_back(t.storage());
    t_lookup.insert(t.storage().get());
    ++count_;
    if (!t.device().is_cpu() &&
        std::find(devices.begin(), devices.end(), t.device()) == devices.end())
      devices.push_back(t.device());
  }
  // Work queued before the guard may still write these tensors: the first kernel queued inside
  // it waits for all of it (Note [Weights loaded before the wait] in src/cuda/gemv.cu).
  for (const Device d : devices) backend::runtime_for(d).order_next_launch(d.index);
}

ReadOnlyGuard::~ReadOnlyGuard() {
  for (size_t i = 0; i < count_; ++i) {
    t_lookup.erase(t_lookup.find(t_read_only.back().get()));
    t_read_only.pop_back();
  }
}

bool is_read_only(const Tensor& t) {
  return t.defined() && !t_read_only.empty() && t_lookup.contains(t.storage().get());
}

}  // namespace ember
