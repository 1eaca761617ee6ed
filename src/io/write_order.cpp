// src/io/write_order.cpp — the process-wide queue of writes per file (Note [Writes land in
// issue order] in src/io/write_order.hpp).
#include "io/write_order.hpp"

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>

namespace ember::io::write_order {
namespace {

struct WriteQueue {
  std::mutex mutex;
  std::condition_variable turn_done;
  uint64_t issued = 0;
  std::map<std::string, std::set<uint64_t>> pending;  // file -> unfinished writes, in order
};

WriteQueue& write_queue() {
  // Intentionally leaked: the asynchronous checkpoint writer, a static joined at exit, may
  // still finish a write after this translation unit's statics are gone.
  static WriteQueue* queue = new WriteQueue();
  return *queue;
}

std::string canonical_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return path;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal().string() : c.string();
}

}  // namespace

Turn::Turn(const std::string& path) : file_(canonical_file(path)) {
  WriteQueue& q = write_queue();
  std::lock_guard<std::mutex> lock(q.mutex);
  number_ = q.issued++;
  q.pending[file_].insert(number_);
}

Turn::~Turn() {
  WriteQueue& q = write_queue();
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    auto it = q.pending.find(file_);
    it->second.erase(number_);
    if (it->second.empty()) q.pending.erase(it);
  }
  q.turn_done.notify_all();
}

void Turn::wait() {
  WriteQueue& q = write_queue();
  std::unique_lock<std::mutex> lock(q.mutex);
  q.turn_done.wait(lock, [&] { return *q.pending.at(file_).begin() == number_; });
}

}  // namespace ember::io::write_order
