// src/core/profiler.cpp — the profiler's recorder (Note [Profiling at no cost when off] in
// src/core/profiler.hpp): ranges per thread, module paths, kernel timing marks.
#include "core/profiler.hpp"

#include <chrono>
#include <map>

#include "backend/device_runtime.hpp"
#include "ember/error.hpp"

namespace ember {
namespace detail {
std::atomic<bool> g_profiling{false};

void ProfileScope::open(ProfileKind kind, const char* name, int device) noexcept {
  index_ = core::profiler::open(kind, name, {}, device);
}
void ProfileScope::close() noexcept { core::profiler::close(index_); }
}  // namespace detail

namespace core::profiler {
namespace {

struct ThreadState {
  std::vector<int32_t> open;  // indices of this thread's open ranges, innermost last
  int32_t module = -1;
  ProfilePhase phase = ProfilePhase::forward;
  int thread = -1;
  uint64_t generation = 0;  // the recording the state belongs to
};

thread_local ThreadState t_state;
std::atomic<uint64_t> g_generation{0};  // bumped by start(): a new recording forgets old states

ThreadState& state() {
  ThreadState& s = t_state;
  const uint64_t generation = g_generation.load(std::memory_order_acquire);
  if (s.generation != generation) s = ThreadState{.generation = generation};
  return s;
}

int32_t module_path_id(Recorder& r, const std::string& path) {
  const auto it = r.module_path_index.find(path);
  if (it != r.module_path_index.end()) return it->second;
  const auto id = static_cast<int32_t>(r.module_paths.size());
  r.module_paths.push_back(path);
  r.module_path_index.emplace(path, id);
  return id;
}

}  // namespace

Recorder& recorder() {
  static Recorder* r = new Recorder();  // leaked: hooks may run in static destructors
  return *r;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void start(bool device_time) {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  EMBER_CHECK(!detail::profiling(),
              "Profiler: another Profiler is recording (expected one at a time; stop() it or "
              "let it go out of scope first)");
  r.events.clear();
  r.module_paths.clear();
  r.module_path_index.clear();
  r.module_names.clear();  // named by this recording's name_modules only (addresses are reused)
  r.step_ns.clear();
  r.device_time = device_time;
  r.origin_ns = now_ns();
  r.stop_ns = -1;
  r.next_thread = 0;
  ++g_generation;
  detail::g_profiling.store(true, std::memory_order_release);
}

void stop() {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  if (!detail::profiling()) return;
  detail::g_profiling.store(false, std::memory_order_release);
  r.stop_ns = now_ns() - r.origin_ns;
}

void resolve() {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  EMBER_ASSERT(!detail::profiling(), "profiler: resolve() while recording");
  // Per device: the first kernel with marks, whose begin mark is the device's time origin,
  // aligned with that kernel's host start.
  std::map<std::pair<int, int>, int64_t> first;  // (type, device) -> event index
  for (size_t i = 0; i < r.events.size(); ++i) {
    const Event& e = r.events[i];
    if (e.kind != ProfileKind::kernel || e.mark_begin < 0) continue;
    first.try_emplace({static_cast<int>(e.device_type), e.device}, static_cast<int64_t>(i));
  }
  for (const auto& [key, index] : first)
    backend::runtime_for(static_cast<DeviceType>(key.first)).synchronize(key.second);
  for (Event& e : r.events) {
    if (e.kind != ProfileKind::kernel || e.mark_begin < 0) continue;
    const backend::DeviceRuntime& be = backend::runtime_for(e.device_type);
    const Event& origin = r.events[first.at({static_cast<int>(e.device_type), e.device})];
    e.device_ms = be.timing_elapsed_ms(e.device, e.mark_begin, e.mark_end);
    e.device_begin_ms = static_cast<double>(origin.host_begin_ns) * 1e-6 +
                        be.timing_elapsed_ms(e.device, origin.mark_begin, e.mark_begin);
    e.mark_begin = e.mark_end = -1;
  }
  for (const auto& [key, index] : first)
    backend::runtime_for(static_cast<DeviceType>(key.first)).timing_release(key.second);
}

int64_t open(ProfileKind kind, const char* name, std::string text, int device) noexcept {
  if (!detail::profiling()) return -1;
  ThreadState& s = state();
  Recorder& r = recorder();
  const int64_t t = now_ns();
  const std::lock_guard lock(r.mutex);
  if (!detail::profiling()) return -1;
  if (s.thread < 0) s.thread = r.next_thread++;
  const int32_t parent = s.open.empty() ? -1 : s.open.back();
  // A composite's inner check of the same op (a second input checked, a recursion after
  // autocast) is the same call, not a nested one.
  if (kind == ProfileKind::op && parent >= 0 && r.events[parent].kind == ProfileKind::op &&
      r.events[parent].name == name)
    return -1;
  Event e;
  e.name = name;
  e.text = std::move(text);
  e.kind = kind;
  e.phase = s.phase;
  e.parent = parent;
  e.module = s.module;
  e.thread = s.thread;
  e.device = device >= 0 ? device : (parent >= 0 ? r.events[parent].device : -1);
  e.host_begin_ns = t - r.origin_ns;
  const auto index = static_cast<int32_t>(r.events.size());
  r.events.push_back(std::move(e));
  s.open.push_back(index);
  return index;
}

void close(int64_t index) noexcept {
  if (index < 0) return;
  ThreadState& s = state();
  Recorder& r = recorder();
  const int64_t t = now_ns();
  const std::lock_guard lock(r.mutex);
  // A recording that stopped and restarted since this range opened: not ours to close.
  if (index >= static_cast<int64_t>(r.events.size())) return;
  r.events[index].host_end_ns = t - r.origin_ns;
  if (!s.open.empty() && s.open.back() == index) s.open.pop_back();
}

int64_t open_kernel(const char* slot, DeviceType type, int device) noexcept {
  const int64_t index = open(ProfileKind::kernel, slot, {}, device);
  if (index < 0) return index;
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  Event& e = r.events[index];
  e.device_type = type;
  if (e.device < 0) e.device = 0;
  return index;
}

void set_marks(int64_t index, int64_t begin, int64_t end) noexcept {
  if (index < 0) return;
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  if (index >= static_cast<int64_t>(r.events.size())) return;
  r.events[index].mark_begin = begin;
  r.events[index].mark_end = end;
}

void note_bytes(int64_t bytes) noexcept {
  if (!detail::profiling()) return;
  ThreadState& s = state();
  if (s.open.empty()) return;
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  const int32_t index = s.open.back();
  if (index < static_cast<int32_t>(r.events.size())) r.events[index].bytes += bytes;
}

int current_device() noexcept {
  if (!detail::profiling()) return -1;
  ThreadState& s = state();
  if (s.open.empty()) return -1;
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  return r.events[s.open.back()].device;
}

int32_t current_module() noexcept { return detail::profiling() ? state().module : -1; }

PhaseScope::PhaseScope(ProfilePhase phase) noexcept {
  if (!detail::profiling()) return;
  ThreadState& s = state();
  previous_ = s.phase;
  s.phase = phase;
  active_ = true;
}
PhaseScope::~PhaseScope() {
  if (active_) state().phase = previous_;
}

ModuleFrame::ModuleFrame(const void* module, const std::string& type) noexcept {
  if (!detail::profiling()) return;
  ThreadState& s = state();
  Recorder& r = recorder();
  const char* type_name = nullptr;
  {
    const std::lock_guard lock(r.mutex);
    type_name = r.interned.insert(type).first->c_str();
    // The path: the name name_modules gave this module, else the parent's path plus the
    // module's type name.
    std::string path;
    const auto named = r.module_names.find(module);
    if (named != r.module_names.end()) {
      path = named->second;
    } else {
      path = s.module >= 0 ? r.module_paths[s.module] + "/" : std::string();
      path += type_name;
    }
    previous_module_ = s.module;
    s.module = module_path_id(r, path);
  }
  active_ = true;
  index_ = open(ProfileKind::module, type_name, {}, -1);
}

ModuleFrame::~ModuleFrame() {
  if (!active_) return;
  close(index_);
  state().module = previous_module_;
}

BackwardScope::BackwardScope(const char* op, int32_t module) noexcept {
  if (!detail::profiling()) return;
  ThreadState& s = state();
  previous_module_ = s.module;
  s.module = module;
  active_ = true;
  index_ = open(ProfileKind::op, op, {}, -1);
}

BackwardScope::~BackwardScope() {
  if (!active_) return;
  close(index_);
  state().module = previous_module_;
}

KernelRange::KernelRange(const char* name, DeviceType type, const backend::DeviceRuntime& runtime,
                         int device) noexcept
    : runtime_(runtime) {
  const int op_device = device >= 0 ? device : current_device();
  device_ = type == DeviceType::cpu ? 0 : (op_device >= 0 ? op_device : 0);
  index_ = open_kernel(name, type, device_);
  if (index_ >= 0 && recorder().device_time) begin_ = mark();
}

KernelRange::~KernelRange() {
  if (index_ < 0) return;
  if (begin_ >= 0) set_marks(index_, begin_, mark());
  close(index_);
}

int64_t KernelRange::mark() noexcept {
  try {
    return runtime_.timing_mark(device_);
  } catch (...) {
    return -1;  // a device that cannot take a mark: the kernel keeps its host time only
  }
}

}  // namespace core::profiler
}  // namespace ember
