// src/distributed/watchdog_thread.hpp — the thread both watchdogs run on (Note [Collective
// timeout] in process_group.cpp, Note [NCCL watchdog] in nccl.cpp): it calls a check every
// period, with the watchdog's mutex held, until stopped; the check ends the process itself
// when it finds a rank stuck. Also the clock they share.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace ember::distributed {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class WatchdogThread {
 public:
  /// Starts the thread: `check()` every `period_seconds`, under mutex().
  WatchdogThread(double period_seconds, std::function<void()> check) {
    thread_ = std::thread([this, period_seconds, check = std::move(check)] {
      const auto period = std::chrono::duration<double>(period_seconds);
      std::unique_lock<std::mutex> lock(mutex_);
      while (!cv_.wait_for(lock, period, [this] { return stop_; })) check();
    });
  }
  /// Stops and joins the thread.
  ~WatchdogThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  WatchdogThread(const WatchdogThread&) = delete;
  WatchdogThread& operator=(const WatchdogThread&) = delete;
  /// Held while the check runs: state the check reads is guarded by it.
  std::mutex& mutex() { return mutex_; }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ember::distributed
