// src/train/profiler.cpp — the Profiler's reports: key averages per op, module path and
// phase, the table, per-kernel totals and the Chrome trace (the recorder is core's:
// src/core/profiler.cpp).
#include "ember/profiler.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "core/profiler.hpp"
#include "ember/device.hpp"
#include "ember/error.hpp"
#include "ember/memory.hpp"
#include "ember/nn/module.hpp"

namespace ember {

using core::profiler::Event;
using core::profiler::Recorder;
using core::profiler::recorder;

RecordScope::RecordScope(const std::string& name) {
  if (detail::profiling()) index_ = core::profiler::open(ProfileKind::range, nullptr, name, -1);
}
RecordScope::~RecordScope() { core::profiler::close(index_); }

namespace {
// The counters of every CUDA device, summed (none in a CPU-only run).
ProfileStepCounters device_counters() {
  ProfileStepCounters c;
  for (int i = 0; i < cuda_device_count(); ++i) {
    const MemoryStats m = memory_stats(Device::cuda(i));
    c.kernel_launches += m.kernel_launches;
    c.host_to_device_copies += m.host_to_device_copies;
    c.host_to_device_bytes += m.host_to_device_bytes;
    c.device_to_host_copies += m.device_to_host_copies;
    c.device_to_host_bytes += m.device_to_host_bytes;
  }
  return c;
}
}  // namespace

Profiler::Profiler(ProfilerOptions options) {
  core::profiler::start(options.device_time);
  recording_ = true;
  at_last_step_ = device_counters();
}

Profiler::~Profiler() {
  try {
    stop();
  } catch (...) {
    // A device error while waiting for the timed kernels: the destructor must not throw;
    // the same error reaches the program at its next synchronisation.
  }
}

void Profiler::stop() {
  if (!recording_) return;
  core::profiler::stop();
  recording_ = false;
}

void Profiler::name_modules(const nn::Module& root, const std::string& prefix) {
  EMBER_CHECK(root.defined(),
              "Profiler::name_modules: the module handle is empty (expected a "
              "module, e.g. the model being profiled)");
  Recorder& r = recorder();
  const auto named = root->named_modules(prefix);
  const std::lock_guard lock(r.mutex);
  for (const auto& [name, module] : named) r.module_names[module.get()] = name;
}

void Profiler::step() {
  if (!recording_) return;
  const ProfileStepCounters now = device_counters();
  step_counters_.push_back({now.kernel_launches - at_last_step_.kernel_launches,
                            now.host_to_device_copies - at_last_step_.host_to_device_copies,
                            now.host_to_device_bytes - at_last_step_.host_to_device_bytes,
                            now.device_to_host_copies - at_last_step_.device_to_host_copies,
                            now.device_to_host_bytes - at_last_step_.device_to_host_bytes});
  at_last_step_ = now;
  Recorder& r = recorder();
  const int64_t t = core::profiler::now_ns();
  const std::lock_guard lock(r.mutex);
  r.step_ns.push_back(t - r.origin_ns);
}

int64_t Profiler::steps() const {
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  return static_cast<int64_t>(r.step_ns.size());
}

void Profiler::resolve() {
  stop();
  if (resolved_) return;
  core::profiler::resolve();
  resolved_ = true;
}

namespace {

const char* event_name(const Event& e) { return e.name ? e.name : e.text.c_str(); }

// The range a kernel or an allocation is charged to: the nearest op or program range above
// it (a kernel launched outside any op is its own owner).
std::vector<int32_t> owners(const std::vector<Event>& events) {
  std::vector<int32_t> owner(events.size(), -1);
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.kind == ProfileKind::op || e.kind == ProfileKind::range) {
      owner[i] = static_cast<int32_t>(i);
    } else if (e.parent >= 0 && owner[e.parent] >= 0) {
      owner[i] = owner[e.parent];
    } else {
      owner[i] = e.kind == ProfileKind::kernel ? static_cast<int32_t>(i) : -1;
    }
  }
  return owner;
}

double host_ms(const Event& e, int64_t stop_ns) {
  const int64_t end = e.host_end_ns >= 0 ? e.host_end_ns : stop_ns;
  return static_cast<double>(end - e.host_begin_ns) * 1e-6;
}

std::string trimmed_left(const std::string& s, size_t width) {
  if (s.size() <= width) return s;
  return "…" + s.substr(s.size() - (width - 1));
}

}  // namespace

std::vector<ProfileRow> Profiler::rows(const ProfileTableOptions& options) {
  resolve();
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  const std::vector<Event>& events = r.events;
  const std::vector<int32_t> owner = owners(events);

  // Per event: device time of its own kernels and of all kernels below it, child host time.
  std::vector<double> self_device(events.size(), 0.0), total_device(events.size(), 0.0);
  std::vector<double> child_host(events.size(), 0.0);
  std::vector<int64_t> bytes(events.size(), 0), kernel_calls(events.size(), 0);
  std::vector<std::map<std::string, ProfileRow::Kernel>> kernels(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.parent >= 0 && e.kind != ProfileKind::module)
      child_host[e.parent] += host_ms(e, r.stop_ns);
    const int32_t o = owner[i];
    if (o >= 0) bytes[o] += e.bytes;
    if (e.kind != ProfileKind::kernel || o < 0) continue;
    self_device[o] += e.device_ms;
    ++kernel_calls[o];
    ProfileRow::Kernel& k = kernels[o][e.name];
    k.name = e.name;
    ++k.calls;
    k.device_ms += e.device_ms;
    for (int32_t a = e.parent; a >= 0; a = events[a].parent) total_device[a] += e.device_ms;
    if (o == static_cast<int32_t>(i)) total_device[i] += e.device_ms;
  }

  using Key = std::tuple<int, std::string, std::string, int>;
  std::map<Key, ProfileRow> grouped;
  for (size_t i = 0; i < events.size(); ++i) {
    if (owner[i] != static_cast<int32_t>(i)) continue;
    const Event& e = events[i];
    const std::string module =
        e.module >= 0 && options.group_by_module ? r.module_paths[e.module] : std::string();
    const std::string name = e.kind == ProfileKind::kernel ? "[" + std::string(e.name) + "]"
                                                           : std::string(event_name(e));
    ProfileRow& row =
        grouped[Key{static_cast<int>(e.kind), name, module, static_cast<int>(e.phase)}];
    row.name = name;
    row.module = module;
    row.kind = e.kind;
    row.phase = e.phase;
    ++row.calls;
    const double h = host_ms(e, r.stop_ns);
    row.host_ms += h;
    row.self_host_ms += std::max(0.0, h - child_host[i]);
    row.device_ms += self_device[i];
    row.total_device_ms += total_device[i];
    row.bytes_allocated += bytes[i];
    row.kernel_calls += kernel_calls[i];
    for (const auto& [kname, k] : kernels[i]) {
      auto it = std::find_if(row.kernels.begin(), row.kernels.end(),
                             [&](const ProfileRow::Kernel& x) { return x.name == kname; });
      if (it == row.kernels.end()) {
        row.kernels.push_back(k);
      } else {
        it->calls += k.calls;
        it->device_ms += k.device_ms;
      }
    }
  }
  std::vector<ProfileRow> out;
  out.reserve(grouped.size());
  for (auto& [key, row] : grouped) {
    std::sort(row.kernels.begin(), row.kernels.end(),
              [](const auto& a, const auto& b) { return a.device_ms > b.device_ms; });
    out.push_back(std::move(row));
  }
  const auto measure = [&](const ProfileRow& row) -> double {
    switch (options.sort_by) {
      case ProfileSort::device_time: return row.device_ms;
      case ProfileSort::host_time: return row.self_host_ms;
      case ProfileSort::calls: return static_cast<double>(row.calls);
      case ProfileSort::bytes: return static_cast<double>(row.bytes_allocated);
    }
    return 0.0;
  };
  std::stable_sort(out.begin(), out.end(), [&](const ProfileRow& a, const ProfileRow& b) {
    return measure(a) > measure(b);
  });
  return out;
}

std::string Profiler::table(const ProfileTableOptions& options) {
  const std::vector<ProfileRow> all = rows(options);
  double device_total = 0, host_total = 0;
  int64_t calls_total = 0;
  for (const ProfileRow& row : all) {
    device_total += row.device_ms;
    host_total += row.self_host_ms;
    calls_total += row.calls;
  }
  const size_t shown = options.row_limit > 0
                           ? std::min(all.size(), static_cast<size_t>(options.row_limit))
                           : all.size();
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "%-28s %-32s %-3s %7s %10s %10s %10s %6s %9s  %s\n", "Name",
                "Module", "Pass", "Calls", "Host ms", "Self host", "Device ms", "Dev %", "Alloc MB",
                "Kernels (calls, device ms)");
  out << line << std::string(150, '-') << "\n";
  for (size_t i = 0; i < shown; ++i) {
    const ProfileRow& row = all[i];
    std::string ks;
    const int k_shown = std::min<int>(options.kernels_shown, static_cast<int>(row.kernels.size()));
    for (int k = 0; k < k_shown; ++k) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "%s%s×%lld %.3f", k ? ", " : "", row.kernels[k].name.c_str(),
                    static_cast<long long>(row.kernels[k].calls), row.kernels[k].device_ms);
      ks += buf;
    }
    if (static_cast<int>(row.kernels.size()) > k_shown) ks += ", …";
    std::snprintf(line, sizeof line,
                  "%-28s %-32s %-3s %7lld %10.3f %10.3f %10.3f %6.1f %9.1f  %s\n",
                  trimmed_left(row.name, 28).c_str(), trimmed_left(row.module, 32).c_str(),
                  row.phase == ProfilePhase::backward ? "bwd" : "fwd",
                  static_cast<long long>(row.calls), row.host_ms, row.self_host_ms, row.device_ms,
                  device_total > 0 ? 100.0 * row.device_ms / device_total : 0.0,
                  static_cast<double>(row.bytes_allocated) / (1 << 20), ks.c_str());
    out << line;
  }
  out << std::string(150, '-') << "\n";
  std::snprintf(line, sizeof line,
                "%zu rows (%zu shown), %lld calls; self host time %.3f ms; device time %.3f ms; "
                "wall %.3f ms; %lld steps\n",
                all.size(), shown, static_cast<long long>(calls_total), host_total, device_total,
                wall_ms(), static_cast<long long>(steps()));
  out << line;
  if (!step_counters_.empty()) {
    // Per step: the last step's figures and the range over all steps (equal launches from
    // step to step and no weight bytes moved is what a steady step looks like).
    const ProfileStepCounters& last = step_counters_.back();
    int64_t fewest = last.kernel_launches, most = last.kernel_launches;
    for (const ProfileStepCounters& c : step_counters_) {
      fewest = std::min(fewest, c.kernel_launches);
      most = std::max(most, c.kernel_launches);
    }
    std::snprintf(line, sizeof line,
                  "last step: %lld kernel launches (%lld to %lld over %zu steps); host->device "
                  "%lld copies, %lld bytes; device->host %lld copies, %lld bytes\n",
                  static_cast<long long>(last.kernel_launches), static_cast<long long>(fewest),
                  static_cast<long long>(most), step_counters_.size(),
                  static_cast<long long>(last.host_to_device_copies),
                  static_cast<long long>(last.host_to_device_bytes),
                  static_cast<long long>(last.device_to_host_copies),
                  static_cast<long long>(last.device_to_host_bytes));
    out << line;
  }
  return out.str();
}

std::vector<ProfileRow::Kernel> Profiler::kernels() {
  resolve();
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  std::map<std::string, ProfileRow::Kernel> by_name;
  for (const Event& e : r.events) {
    if (e.kind != ProfileKind::kernel) continue;
    ProfileRow::Kernel& k = by_name[e.name];
    k.name = e.name;
    ++k.calls;
    k.device_ms += e.device_ms;
  }
  std::vector<ProfileRow::Kernel> out;
  for (auto& [name, k] : by_name) out.push_back(k);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.device_ms > b.device_ms; });
  return out;
}

double Profiler::device_ms() {
  resolve();
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  double total = 0;
  for (const Event& e : r.events)
    if (e.kind == ProfileKind::kernel) total += e.device_ms;
  return total;
}

double Profiler::wall_ms() {
  stop();
  Recorder& r = recorder();
  const std::lock_guard lock(r.mutex);
  return static_cast<double>(r.stop_ns) * 1e-6;
}

void Profiler::export_chrome_trace(const std::string& path) {
  resolve();
  Recorder& r = recorder();
  nlohmann::json trace = nlohmann::json::array();
  {
    const std::lock_guard lock(r.mutex);
    const char* kinds[] = {"op", "kernel", "module", "range"};
    for (const Event& e : r.events) {
      const double ts = static_cast<double>(e.host_begin_ns) * 1e-3;  // µs
      nlohmann::json args = {{"phase", e.phase == ProfilePhase::backward ? "backward" : "forward"}};
      if (e.module >= 0) args["module"] = r.module_paths[e.module];
      if (e.bytes) args["bytes"] = e.bytes;
      trace.push_back({{"name", event_name(e)},
                       {"cat", kinds[static_cast<int>(e.kind)]},
                       {"ph", "X"},
                       {"ts", ts},
                       {"dur", host_ms(e, r.stop_ns) * 1e3},
                       {"pid", 0},
                       {"tid", e.thread},
                       {"args", args}});
      if (e.kind == ProfileKind::kernel && e.device_begin_ms >= 0 &&
          e.device_type != DeviceType::cpu) {
        // The kernel's time on its device, on the device's own track, with the op above it.
        nlohmann::json dargs = args;
        if (e.parent >= 0) dargs["op"] = event_name(r.events[e.parent]);
        trace.push_back({{"name", event_name(e)},
                         {"cat", "device"},
                         {"ph", "X"},
                         {"ts", e.device_begin_ms * 1e3},
                         {"dur", e.device_ms * 1e3},
                         {"pid", 1 + e.device},
                         {"tid", 0},
                         {"args", dargs}});
      }
    }
    for (size_t i = 0; i < r.step_ns.size(); ++i)
      trace.push_back({{"name", "step " + std::to_string(i + 1)},
                       {"ph", "i"},
                       {"s", "g"},
                       {"ts", static_cast<double>(r.step_ns[i]) * 1e-3},
                       {"pid", 0},
                       {"tid", 0}});
    trace.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "host"}}}});
    std::map<int, bool> devices;
    for (const Event& e : r.events)
      if (e.kind == ProfileKind::kernel && e.device_type != DeviceType::cpu)
        devices[e.device] = true;
    for (const auto& [d, unused] : devices)
      trace.push_back({{"name", "process_name"},
                       {"ph", "M"},
                       {"pid", 1 + d},
                       {"args", {{"name", "cuda:" + std::to_string(d)}}}});
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  EMBER_CHECK(file.good(), "Profiler::export_chrome_trace: cannot open ", path,
              " for writing (expected a writable path)");
  file << nlohmann::json{{"traceEvents", trace}, {"displayTimeUnit", "ms"}}.dump();
  EMBER_CHECK(file.good(), "Profiler::export_chrome_trace: writing ", path, " failed");
}

}  // namespace ember
