// ember/profiler.hpp — where the time of a program goes: per op, per module, per kernel.
//
// A Profiler records, while it lives (or until stop()), every op the program runs (its
// catalogue name, the module path that called it, forward or backward), the kernels each op
// launched with their device time, the host time of each, and the bytes each allocated:
//   {
//     Profiler prof;
//     prof.name_modules(model);             // module paths like "transformer.h.0.attn"
//     train_step();
//     prof.stop();
//     std::cout << prof.table({.sort_by = ProfileSort::device_time, .row_limit = 20});
//     prof.export_chrome_trace("step.json");  // opens in Perfetto or chrome://tracing
//   }
// Off (no Profiler alive) it costs one relaxed atomic load per op. docs/profiling.md has a
// real example and the overhead when on.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace ember {

namespace nn {
class Module;
}  // namespace nn

/// Which pass an op ran in: the forward (also anything outside backward) or the backward.
enum class ProfilePhase : uint8_t { forward, backward };

/// What a recorded range is.
enum class ProfileKind : uint8_t {
  op,      // an op of the catalogue (forward) or the backward of one
  kernel,  // one call into a backend's kernel table (a kernel, a GEMM, a copy)
  module,  // a module's forward
  range,   // a RecordScope of the program's own (or ember's: "optimizer.step")
};

namespace detail {
extern std::atomic<bool> g_profiling;
/// True while a Profiler records (any thread).
inline bool profiling() noexcept { return g_profiling.load(std::memory_order_relaxed); }

/// A range recorded on this thread while alive; nothing when no Profiler records. `name`
/// must outlive the Profiler (a catalogue name, a string literal), except for kind range
/// (copied). Ranges nest: ops inside a module, kernels inside an op.
class ProfileScope {
 public:
  ProfileScope(ProfileKind kind, const char* name, int device = -1) noexcept {
    if (profiling()) [[unlikely]]
      open(kind, name, device);
  }
  ~ProfileScope() {
    if (index_ >= 0) [[unlikely]]
      close();
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  void open(ProfileKind kind, const char* name, int device) noexcept;
  void close() noexcept;
  int64_t index_ = -1;
};
}  // namespace detail

/// A range of the program's own in the profile (torch.profiler.record_function):
///   { RecordScope r("data loading"); batch = loader.next(); }
class RecordScope {
 public:
  explicit RecordScope(const std::string& name);
  ~RecordScope();
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;

 private:
  int64_t index_ = -1;
};

struct ProfilerOptions {
  /// Time each kernel on its device (a pair of CUDA events around it). Off: host time only.
  bool device_time = true;
};

/// How table() and rows() order ops.
enum class ProfileSort : uint8_t { device_time, host_time, calls, bytes };

struct ProfileTableOptions {
  ProfileSort sort_by = ProfileSort::device_time;
  int row_limit = 30;           // rows shown (0: all)
  bool group_by_module = true;  // one row per (op, module path, phase); false: per (op, phase)
  int kernels_shown = 3;        // kernels listed per row (most device time first)
};

/// One row of the key averages: an op (or a range) in one module path and one phase.
struct ProfileRow {
  std::string name;    // the op's catalogue name, or the range's name
  std::string module;  // module path ("transformer.h.0.mlp.c_fc"; "" outside any module)
  ProfileKind kind = ProfileKind::op;
  ProfilePhase phase = ProfilePhase::forward;
  int64_t calls = 0;
  double host_ms = 0;           // host time inside the op, its nested ops included
  double self_host_ms = 0;      // host time not inside a nested op or kernel of its own
  double device_ms = 0;         // device time of the kernels the op launched itself
  double total_device_ms = 0;   // device time of its kernels and its nested ops' kernels
  int64_t bytes_allocated = 0;  // bytes the op's own allocations asked for
  int64_t kernel_calls = 0;     // kernel-table calls it made itself
  /// The kernels it launched itself: name, calls, device ms (most device time first).
  struct Kernel {
    std::string name;
    int64_t calls = 0;
    double device_ms = 0;
  };
  std::vector<Kernel> kernels;
};

/// What the devices did during one step (between two step() marks; the first step starts
/// with the Profiler), summed over every CUDA device: MemoryStats' counters (Note [What
/// kernel_launches counts] in src/cuda/launch_count.cpp). A steady training step launches
/// the same kernels every step and moves only its batch in and the scalars read out.
struct ProfileStepCounters {
  int64_t kernel_launches = 0;
  int64_t host_to_device_copies = 0;
  int64_t host_to_device_bytes = 0;
  int64_t device_to_host_copies = 0;
  int64_t device_to_host_bytes = 0;
};

/// Records ops, modules and kernels on every thread while alive and not stopped. One at a
/// time per process: a second one throws. Not for use inside a captured step's capture
/// (kernels queued into a graph have no device time of their own; the replay is one row).
class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// Ends the recording (waits for the devices to finish the kernels it timed).
  void stop();
  bool recording() const { return recording_; }
  /// Module paths from `root`'s names ("h.0.attn" under root); without it a module's path is
  /// its chain of type names ("GPT/Block/Linear"). Call before the forward you profile.
  void name_modules(const nn::Module& root, const std::string& prefix = "");
  /// Marks the end of a step (a training step, a batch): the trace shows step boundaries,
  /// and steps() counts them.
  void step();
  int64_t steps() const;
  /// Kernel launches and host<->device transfers of each step marked so far, in order.
  /// Example: for (auto& c : prof.step_counters()) assert(c.host_to_device_bytes == batch_bytes);
  const std::vector<ProfileStepCounters>& step_counters() const { return step_counters_; }

  /// Key averages over the whole recording (stops it first when still recording).
  std::vector<ProfileRow> rows(const ProfileTableOptions& options = {});
  /// rows() as a text table like torch.profiler's key_averages().table().
  std::string table(const ProfileTableOptions& options = {});
  /// Per kernel-table entry over the whole recording: calls and device time.
  std::vector<ProfileRow::Kernel> kernels();
  /// The whole recording as Chrome trace JSON (Perfetto, chrome://tracing): host ranges on
  /// one track per thread, kernels' device time on one track per device.
  void export_chrome_trace(const std::string& path);
  /// Total device time of every kernel recorded, in ms; wall time of the recording, in ms.
  double device_ms();
  double wall_ms();

 private:
  bool recording_ = false;
  bool resolved_ = false;
  ProfileStepCounters at_last_step_;  // the devices' counters at the last step() (or start)
  std::vector<ProfileStepCounters> step_counters_;
  void resolve();
};

}  // namespace ember
