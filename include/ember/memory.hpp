// ember/memory.hpp — memory pools and their accounting (ARCHITECTURE §3).
//
// Every device has two pools. Persistent holds parameters, buffers, their gradients and
// optimizer state; Pass holds activations and temporaries and is recycled every step.
#pragma once

#include <cstdint>

#include "ember/device.hpp"

namespace ember {

class Tensor;

enum class Pool : uint8_t { Persistent, Pass };

/// Figures for one device. Bytes are the sizes of blocks handed out (rounded up to the
/// pool's block size); `reserved` counts blocks held in the cache as well.
struct MemoryStats {
  int64_t persistent_bytes = 0;      // persistent blocks in use
  int64_t persistent_reserved = 0;   // persistent blocks in use + cached
  int64_t pass_in_use = 0;           // pass blocks in use
  int64_t pass_reserved = 0;         // pass blocks in use + cached
  int64_t pass_peak = 0;             // high-water mark of pass_in_use
  int64_t host_to_device_bytes = 0;  // bytes copied onto this device from the host
  int64_t device_to_host_bytes = 0;  // bytes copied from this device to the host
  int64_t alloc_count = 0;           // allocation requests served
  int64_t cache_hits = 0;            // requests served from a cached block
  int64_t system_allocs = 0;         // requests that went to the system allocator
  double fragmentation = 0.0;        // cached-but-unused share of reserved bytes
  int64_t captured_in_use = 0;       // blocks in use in captured steps' private pools
  int64_t captured_reserved = 0;     // segments held by those pools (train/capture.hpp)
  // Overall high-water marks over every pool of the device (Persistent, Pass and the captured
  // steps' private pools), since start or the last reset_peak_memory_stats: PyTorch's
  // max_memory_allocated / max_memory_reserved.
  int64_t peak_allocated = 0;  // of persistent_bytes + pass_in_use + captured_in_use
  int64_t peak_reserved = 0;   // of persistent_reserved + pass_reserved + captured_reserved
  // Counters since start (never reset; a step's figure is the difference of two readings,
  // ggmlR's diagnostics). Note [What kernel_launches counts] in src/cuda/launch_count.cpp:
  // each eager call into the device's kernel table that queues device work counts one (an
  // ember kernel, one cuBLASLt matmul, one cuDNN execution, a device copy or fill; a call
  // that launches several kernels of its own still counts one); a replayed captured step
  // counts the kernel nodes of its graph (CapturedStep::kernels_per_step); work recorded
  // into a graph during capture counts nothing. 0 on the CPU, whose kernels are calls.
  int64_t kernel_launches = 0;
  int64_t host_to_device_copies = 0;  // copies onto this device from the host (calls, not chunks)
  int64_t device_to_host_copies = 0;  // copies from this device to the host
};

/// Current figures for `device`. Example: memory_stats(Device::cpu()).pass_peak
MemoryStats memory_stats(Device device);
/// Resets the pass peak to the bytes in use now (for per-step measurement).
void reset_peak_stats(Device device);
/// Resets every high-water mark of `device` to its current figure, as PyTorch's
/// torch.cuda.reset_peak_memory_stats: peak_allocated and peak_reserved, and pass_peak too.
/// Example: reset_peak_memory_stats(d); train_step(); memory_stats(d).peak_allocated
void reset_peak_memory_stats(Device device);
/// Returns every cached (unused) block of `device` to the system.
void empty_cache(Device device);
/// Caps the bytes `device`'s pools may reserve from the system, all together (Persistent,
/// Pass, and captured steps' private pools): a request that would take them past `bytes`
/// first returns the cached blocks, then throws ember::OutOfMemory naming the request, the
/// limit and the pools, before the driver or the OS is asked, with nothing changed, so the
/// program can free tensors or build something smaller and go on. 0 removes the limit; a
/// limit below what is reserved now applies to the next request. ember::Error for a negative
/// byte count. Example: set_memory_limit(Device::cuda(0), int64_t{8} << 30);  // 8 GiB
void set_memory_limit(Device device, int64_t bytes);
/// The limit of `device` in bytes (0: none).
int64_t memory_limit(Device device);
/// The pool that owns the storage of `t`.
Pool pool_of(const Tensor& t);

/// Rescues every live tensor on the CUDA device `device` to the host — persistent and pass,
/// same handles, identical values (including what optimizers wrote on the device) — then
/// frees the device's pools. Tensors keep working, now on the CPU. Throws for the CPU and,
/// in a CPU-only build, says ember was built without CUDA.
/// Example: release_device(Device::cuda(0)); model.parameters()[0].device().is_cpu() == true
void release_device(Device device);

/// While alive, new storages on this thread come from `pool`.
/// Example: { PoolGuard g(Pool::Persistent); state = zeros(shape); }
class PoolGuard {
 public:
  explicit PoolGuard(Pool pool);
  ~PoolGuard();
  PoolGuard(const PoolGuard&) = delete;
  PoolGuard& operator=(const PoolGuard&) = delete;

 private:
  Pool previous_;
};
/// The pool new storages on this thread come from (Pass unless a PoolGuard says otherwise).
Pool current_pool();

}  // namespace ember
