// src/core/capture.hpp — what the layers below train/ see of a captured step
// (train/capture.hpp; Note [Captured steps] in src/cuda/graph.cu): whether this thread is
// capturing, the host actions a replay runs again before each launch (an optimizer's or a
// scheduler's step), and the gradients the capture left on leaves.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/tensor.hpp"

namespace ember::detail {

/// The host side of one captured graph, filled while the step function runs under capture
/// and used by every replay.
class CaptureRecorder {
 public:
  /// An action replayed on the host before each launch, in the order recorded. `alive`
  /// belongs to the action's owner: once the owner is destroyed the replay refuses, naming
  /// `what`.
  void on_replay(std::string what, std::weak_ptr<const void> alive, std::function<void()> action);
  /// A leaf the capture's backward accumulated a gradient into.
  void note_grad(const std::shared_ptr<TensorImpl>& leaf);
  /// After the capture: remembers each noted leaf's gradient handle.
  void finish();
  /// Before a replay's host actions: the noted leaves get their captured gradients back
  /// (the graph writes those buffers), then the actions run. Throws naming a dead owner.
  void replay_host() const;

 private:
  struct Action {
    std::string what;
    std::weak_ptr<const void> alive;
    std::function<void()> run;
  };
  std::vector<Action> actions_;
  std::vector<std::weak_ptr<TensorImpl>> leaves_;
  std::vector<std::pair<std::weak_ptr<TensorImpl>, std::shared_ptr<TensorImpl>>> grads_;
};

/// The recorder of the capture running on this thread, or nullptr.
CaptureRecorder* active_capture();
/// Sets this thread's active capture (train/capture.cpp); returns the previous one.
CaptureRecorder* set_active_capture(CaptureRecorder* recorder);

/// Throws ember::Error when this thread is capturing: `op` would move data between the host
/// and a device, which a replayed graph cannot do.
void check_no_host_transfer(const char* op);

/// Put at the top of a host step that a replay must run again (Optimizer::step,
/// LRScheduler::step): while this thread captures, the outermost such scope records `action`.
class ReplayedHostStep {
 public:
  ReplayedHostStep(const char* what, const std::shared_ptr<const void>& alive,
                   std::function<void()> action);
  ~ReplayedHostStep();
  ReplayedHostStep(const ReplayedHostStep&) = delete;
  ReplayedHostStep& operator=(const ReplayedHostStep&) = delete;
};

}  // namespace ember::detail
