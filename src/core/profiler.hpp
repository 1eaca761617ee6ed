// src/core/profiler.hpp — the profiler's recorder, shared by the places that feed it: ops
// (ProfileScope), the autograd engine (phase and node scopes), modules (module frames), the
// kernel-table wrapper (src/backend/profiled.cpp: kernels and their device-time marks),
// storages (bytes) and the reports (src/train/profiler.cpp).
//
// Note [Profiling at no cost when off]
// Every hook first reads detail::g_profiling (one relaxed atomic load) and does nothing more
// when it is false. On, each range appends one Event under a mutex, and each kernel-table
// call also records two device timing marks (CUDA events on the device's stream; host clock
// readings on the CPU, whose kernels run synchronously). Marks are turned into milliseconds
// once, after the recording stops and the devices are synchronised.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/device_runtime.hpp"
#include "ember/device.hpp"
#include "ember/profiler.hpp"

namespace ember::core::profiler {

struct Event {
  const char* name = nullptr;  // static name (op, slot, module type); ranges use `text`
  std::string text;            // a range's own name
  ProfileKind kind = ProfileKind::op;
  ProfilePhase phase = ProfilePhase::forward;
  int32_t parent = -1;  // the enclosing range on the same thread
  int32_t module = -1;  // index into Recorder::module_paths
  int32_t thread = 0;   // small per-thread number
  DeviceType device_type = DeviceType::cpu;
  int device = -1;            // device of a kernel (-1: none)
  int64_t host_begin_ns = 0;  // since the recording began
  int64_t host_end_ns = -1;
  int64_t mark_begin = -1;  // device timing marks (kernels), -1 when none
  int64_t mark_end = -1;
  int64_t bytes = 0;            // bytes allocated while this range was the innermost
  double device_ms = 0;         // resolved kernel device time
  double device_begin_ms = -1;  // resolved kernel start, relative to the device's first mark
};

struct Recorder {
  std::mutex mutex;
  std::vector<Event> events;
  std::vector<std::string> module_paths;
  std::unordered_map<std::string, int32_t> module_path_index;
  std::unordered_map<const void*, std::string> module_names;  // ModuleImpl* -> its name
  std::unordered_set<std::string> interned;  // module type names (events keep c_str())
  std::vector<int64_t> step_ns;              // host time of each step()
  bool device_time = true;
  int64_t origin_ns = 0;  // steady clock at the start
  int64_t stop_ns = -1;
  int next_thread = 0;
};

/// The one recorder (valid while a Profiler exists).
Recorder& recorder();
int64_t now_ns();

/// Starts and stops recording (Profiler's constructor and stop()).
void start(bool device_time);
void stop();
/// After stop(): waits for each device that took marks, turns every kernel's marks into
/// device_ms and device_begin_ms, and releases the marks.
void resolve();

/// While alive, ops recorded on this thread belong to the backward pass (the engine).
class PhaseScope {
 public:
  explicit PhaseScope(ProfilePhase phase) noexcept;
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  ProfilePhase previous_ = ProfilePhase::forward;
  bool active_ = false;
};

/// A module's forward on this thread while alive: a module range, and the module path the
/// ops inside it are charged to. `module` is the ModuleImpl (its name from name_modules).
class ModuleFrame {
 public:
  ModuleFrame(const void* module, const std::string& type_name) noexcept;
  ~ModuleFrame();
  ModuleFrame(const ModuleFrame&) = delete;
  ModuleFrame& operator=(const ModuleFrame&) = delete;

 private:
  int64_t index_ = -1;
  int32_t previous_module_ = -1;
  bool active_ = false;
};

/// The module path ops on this thread are charged to now (a backward node keeps it).
int32_t current_module() noexcept;
/// A backward node's scope: the op's backward, charged to the module that ran its forward.
class BackwardScope {
 public:
  BackwardScope(const char* op, int32_t module) noexcept;
  ~BackwardScope();
  BackwardScope(const BackwardScope&) = delete;
  BackwardScope& operator=(const BackwardScope&) = delete;

 private:
  int64_t index_ = -1;
  int32_t previous_module_ = -1;
  bool active_ = false;
};

/// Opens a range; returns its index (or -1 when not recording).
int64_t open(ProfileKind kind, const char* name, std::string text, int device) noexcept;
void close(int64_t index) noexcept;
/// A kernel-table call: a kernel range with its device timing marks (set by the wrapper).
int64_t open_kernel(const char* slot, DeviceType type, int device) noexcept;
void set_marks(int64_t index, int64_t begin, int64_t end) noexcept;
/// `bytes` allocated now on this thread (charged to the innermost open range).
void note_bytes(int64_t bytes) noexcept;
/// The device of the innermost open op on this thread (-1: none).
int current_device() noexcept;

/// One device call recorded as a kernel range named `name`, with a timing mark of `runtime`
/// on each side when the recorder takes device time: the profiled kernel table wraps every
/// kernel slot in one, and a captured step's replay (a device service, graph_launch) takes one
/// so that it shows as one kernel row. Nothing while no Profiler records.
class KernelRange {
 public:
  /// device: -1 for the innermost open op's (0 when none).
  KernelRange(const char* name, DeviceType type, const backend::DeviceRuntime& runtime,
              int device = -1) noexcept;
  ~KernelRange();
  KernelRange(const KernelRange&) = delete;
  KernelRange& operator=(const KernelRange&) = delete;

 private:
  int64_t mark() noexcept;
  const backend::DeviceRuntime& runtime_;
  int device_ = 0;
  int64_t index_ = -1;
  int64_t begin_ = -1;
};

}  // namespace ember::core::profiler
