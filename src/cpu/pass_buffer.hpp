// src/cpu/pass_buffer.hpp — PassBuffer: memory from ember's CPU Pass pool for the scope of one
// kernel call (oneDNN's scratchpads and reordered operands, the small-plane convolutions'
// gathers), so that a kernel's temporaries are counted and reused like any tensor's.
#pragma once

#include <cstddef>

#include "cpu/kernels.hpp"

namespace ember::cpu {

/// A Pass-pool buffer of `bytes` for the scope; no allocation for 0 bytes.
class PassBuffer {
 public:
  explicit PassBuffer(size_t bytes) {
    if (bytes) ptr_ = allocate(0, bytes, Pool::Pass, &block_);
  }
  ~PassBuffer() {
    if (ptr_) deallocate(0, ptr_, block_, Pool::Pass);
  }
  PassBuffer(const PassBuffer&) = delete;
  PassBuffer& operator=(const PassBuffer&) = delete;
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t block_ = 0;
};

}  // namespace ember::cpu
