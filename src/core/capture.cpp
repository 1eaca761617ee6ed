// src/core/capture.cpp — the host side of captured steps (see capture.hpp).
#include "core/capture.hpp"

#include "ember/error.hpp"

namespace ember::detail {
namespace {
thread_local CaptureRecorder* t_capture = nullptr;
thread_local int t_host_step_depth = 0;  // nested ReplayedHostStep scopes on this thread
}  // namespace

void CaptureRecorder::on_replay(std::string what, std::weak_ptr<const void> alive,
                                std::function<void()> action) {
  actions_.push_back({std::move(what), std::move(alive), std::move(action)});
}

void CaptureRecorder::note_grad(const std::shared_ptr<TensorImpl>& leaf) {
  leaves_.push_back(leaf);
}

void CaptureRecorder::finish() {
  grads_.clear();
  for (const std::weak_ptr<TensorImpl>& w : leaves_)
    if (std::shared_ptr<TensorImpl> leaf = w.lock()) grads_.emplace_back(w, leaf->grad);
  leaves_.clear();
}

void CaptureRecorder::replay_host() const {
  for (const Action& a : actions_)
    EMBER_CHECK(!a.alive.expired(), "CapturedStep: the ", a.what,
                " used by the captured step was destroyed; capture the step again");
  for (const auto& [w, grad] : grads_)
    if (std::shared_ptr<TensorImpl> leaf = w.lock()) leaf->grad = grad;
  for (const Action& a : actions_) a.run();
}

CaptureRecorder* active_capture() { return t_capture; }

CaptureRecorder* set_active_capture(CaptureRecorder* recorder) {
  CaptureRecorder* previous = t_capture;
  t_capture = recorder;
  return previous;
}

void check_no_host_transfer(const char* op) {
  EMBER_CHECK(t_capture == nullptr, op,
              ": copies between the host and the device inside a captured step (CapturedStep); "
              "a replayed graph cannot read or write host memory: return the tensor from the "
              "step function and read it after the call, or pass host data in as an input");
}

ReplayedHostStep::ReplayedHostStep(const char* what, const std::shared_ptr<const void>& alive,
                                   std::function<void()> action) {
  if (t_capture && t_host_step_depth == 0) t_capture->on_replay(what, alive, std::move(action));
  ++t_host_step_depth;
}

ReplayedHostStep::~ReplayedHostStep() { --t_host_step_depth; }

}  // namespace ember::detail
