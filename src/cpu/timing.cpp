// src/cpu/timing.cpp — the profiler's timing marks on the CPU (runtime_slots.def): CPU kernels run
// synchronously on the calling thread, so a mark is a reading of the host clock.
#include <chrono>
#include <mutex>
#include <vector>

#include "cpu/kernels.hpp"

namespace ember::cpu {
namespace {
struct Marks {
  std::mutex mutex;
  std::vector<int64_t> ns;
};
Marks& marks() {
  static Marks* m = new Marks();  // leaked: marks may be taken in static destructors
  return *m;
}
}  // namespace

int64_t timing_mark(int /*device*/) {
  const int64_t t = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count();
  Marks& m = marks();
  const std::lock_guard lock(m.mutex);
  m.ns.push_back(t);
  return static_cast<int64_t>(m.ns.size()) - 1;
}

double timing_elapsed_ms(int /*device*/, int64_t from, int64_t to) {
  Marks& m = marks();
  const std::lock_guard lock(m.mutex);
  const auto n = static_cast<int64_t>(m.ns.size());
  if (from < 0 || to < 0 || from >= n || to >= n) return 0.0;
  return static_cast<double>(m.ns[to] - m.ns[from]) * 1e-6;
}

void timing_release(int /*device*/) {
  Marks& m = marks();
  const std::lock_guard lock(m.mutex);
  m.ns.clear();
}

}  // namespace ember::cpu
