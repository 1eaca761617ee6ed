// tests/test_device_runtime.cpp — the device runtime (src/backend/device_runtime.hpp): both
// backends fill it, the runtime.hpp queries go through it, and pinned staging buffers lease
// their copy slots (Note [Pinned slots are leased]) instead of being numbered by hand.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "backend/device_runtime.hpp"
#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "error_of.hpp"
#include "io/parallel_io.hpp"

using namespace ember;
using backend::PinnedStaging;
using ember::test_util::error_of;

TEST(DeviceRuntime, CpuRuntimeIsOneDeviceWithNullStreams) {
  const backend::DeviceRuntime& rt = backend::runtime_for(DeviceType::cpu);
  EXPECT_STREQ(rt.name, "cpu");
  EXPECT_EQ(rt.device_count(), 1);
  EXPECT_NE(rt.device_description(0).find("CPU"), std::string::npos);
  EXPECT_EQ(rt.compute_stream(0), nullptr);
  EXPECT_EQ(rt.comm_stream(0), nullptr);
  EXPECT_TRUE(rt.comm_stream_idle(0));
  EXPECT_NE(error_of([&] { rt.device_description(1); }).find("the CPU is device 0"),
            std::string::npos);
}

TEST(DeviceRuntime, CudaQueriesAgreeWithTheRuntime) {
  if (!ember_test::cuda_built()) {
    EXPECT_FALSE(cuda_available());
    EXPECT_EQ(cuda_device_count(), 0);
    EXPECT_NE(error_of([] { cuda_device_description(0); }).find("built without CUDA"),
              std::string::npos);
    return;
  }
  const backend::DeviceRuntime& rt = backend::runtime_for(DeviceType::cuda);
  EXPECT_EQ(cuda_device_count(), rt.device_count());
  EXPECT_EQ(cuda_available(), rt.device_count() > 0);
  if (cuda_available()) EXPECT_EQ(cuda_device_description(0), rt.device_description(0));
}

// Leases of this process's free CPU-type slots until the runtime refuses one (other users of the
// slots, such as io's staging pool after a streamed load, keep theirs for the process's life, so
// the free count depends on what ran before); their slots, all distinct.
std::vector<PinnedStaging> lease_every_free_slot(std::set<int>* slots, std::string* refusal) {
  std::vector<PinnedStaging> held;
  for (int i = 0; i <= backend::kPinnedSlots; ++i) {
    try {
      held.emplace_back(DeviceType::cpu, 16);
    } catch (const Error& e) {
      *refusal = e.what();
      break;
    }
    EXPECT_TRUE(slots->insert(held.back().slot()).second)
        << "slot " << held.back().slot() << " was leased twice";
    EXPECT_GE(held.back().slot(), 0);
    EXPECT_LT(held.back().slot(), backend::kPinnedSlots);
    EXPECT_EQ(held.back().size(), 16u);
  }
  return held;
}

TEST(DeviceRuntime, PinnedBuffersLeaseDistinctSlotsAndGiveThemBack) {
  const PinnedStaging other_user(DeviceType::cpu, 16);  // held throughout, as io's pool holds its
  std::set<int> first, second;
  std::string refusal;
  size_t free_slots = 0;
  {
    const std::vector<PinnedStaging> held = lease_every_free_slot(&first, &refusal);
    free_slots = held.size();
    EXPECT_NE(refusal.find("all 256 pinned staging slots are leased"), std::string::npos)
        << refusal;
  }
  EXPECT_GE(free_slots, 8u);
  EXPECT_LT(free_slots, static_cast<size_t>(backend::kPinnedSlots));
  EXPECT_EQ(first.count(other_user.slot()), 0u) << "a held slot was leased again";
  // Every slot came back: the same number can be leased at once again (and not one more).
  std::vector<PinnedStaging> all = lease_every_free_slot(&second, &refusal);
  EXPECT_EQ(all.size(), free_slots);
  EXPECT_EQ(second, first);
  all.pop_back();
  PinnedStaging again(DeviceType::cpu, 16);  // one returned, one leased
  EXPECT_FALSE(again.empty());
}

TEST(DeviceRuntime, PinnedBufferMovesItsLease) {
  PinnedStaging a(DeviceType::cpu, 32);
  const int slot = a.slot();
  void* data = a.data();
  PinnedStaging b(std::move(a));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): a moved-from lease is empty
  EXPECT_EQ(b.slot(), slot);
  EXPECT_EQ(b.data(), data);
  PinnedStaging c(DeviceType::cpu, 8);
  c = std::move(b);  // c's own lease is given back first
  EXPECT_EQ(c.slot(), slot);
  EXPECT_EQ(c.size(), 32u);
}

TEST(DeviceRuntime, PinnedBufferRefusesEmptyAndOutOfRangeCopies) {
  PinnedStaging empty;
  float x = 0;
  EXPECT_NE(error_of([&] { empty.copy_to_device(0, &x, 0, 4); }).find("the buffer is empty"),
            std::string::npos);
  empty.wait(0);  // nothing to wait for
  PinnedStaging buf(DeviceType::cpu, 16);
  const std::string e = error_of([&] { buf.copy_to_device(0, &x, 12, 8); });
  EXPECT_NE(e.find("bytes [12, 20) out of the buffer's 16"), std::string::npos) << e;
}

// Bytes through a pinned buffer onto a device and back, on `device`.
void round_trip(Device device) {
  std::vector<float> values(1000);
  std::iota(values.begin(), values.end(), 0.5f);
  const size_t bytes = values.size() * sizeof(float);
  Tensor t = zeros({1000}, {.device = device});
  PinnedStaging up(device.type, bytes + 64);
  std::memcpy(static_cast<char*>(up.data()) + 64, values.data(), bytes);
  up.copy_to_device(device.index, t.data_ptr(), 64, bytes);
  up.wait(device.index);
  EXPECT_EQ(t.to(Device::cpu()).to_vector<float>(), values);
  Tensor doubled = t * 2.0f;
  PinnedStaging down(device.type, bytes);
  down.copy_from_device(device.index, doubled.data_ptr(), 0, bytes);
  down.wait(device.index);
  const auto* got = static_cast<const float*>(down.data());
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(got[i], values[i] * 2.0f) << i;
}

TEST(DeviceRuntime, PinnedBufferCopiesOnTheCpu) { round_trip(Device::cpu()); }

TEST(DeviceRuntimeCuda, PinnedBufferCopiesOnTheGpu) {
  SKIP_WITHOUT_CUDA();
  round_trip(Device::cuda(0));
}

// io's streamed load (Note [Streaming onto the GPU]) through leased pinned buffers, run on the
// CPU runtime: the targets get exactly their bytes, across staging pieces (4 MiB) and checksum
// chunks, and the chunk digests give the checksum the writer computed.
TEST(DeviceRuntimeCuda, StreamedLoadOntoTheGpuAfterOneOnTheCpu) {
  // The staging pools are per device type: a CPU load first leases pinned buffers of the CPU
  // runtime, which a GPU load must not copy through (they memcpy; on the H200 this was a
  // segmentation fault in IoForeign.LoadsOntoAGpuModuleInPlace when CPU loads ran before it).
  SKIP_WITHOUT_CUDA();
  const std::string path = ::testing::TempDir() + "ember_stream_cpu_then_gpu.bin";
  const uint64_t header = 64, size = (uint64_t{5} << 20) + 77, chunk = uint64_t{1} << 20;
  std::vector<uint8_t> data(size);
  for (uint64_t i = 0; i < size; ++i) data[i] = static_cast<uint8_t>((i * 40503u) >> 7);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> zeros(header, 0);
  ASSERT_EQ(::pwrite(fd, zeros.data(), header, 0), static_cast<ssize_t>(header));
  (void)io::parallel::write_and_checksum(fd, header, {{data.data(), size}}, chunk, path);
  std::vector<uint8_t> host(size, 0);
  io::parallel::stream_to_device(DeviceType::cpu, 0, fd, header, size, {{0, size, host.data()}},
                                 chunk, nullptr, path);
  EXPECT_TRUE(host == data) << "the CPU load";
  Tensor gpu = empty({static_cast<int64_t>(size)}, {.dtype = DType::u8, .device = Device::cuda(0)});
  io::parallel::stream_to_device(DeviceType::cuda, 0, fd, header, size, {{0, size, gpu.data_ptr()}},
                                 chunk, nullptr, path);
  ::close(fd);
  std::remove(path.c_str());
  const std::vector<uint8_t> back = gpu.to(Device::cpu()).to_vector<uint8_t>();
  EXPECT_TRUE(back == data) << "the GPU load after the CPU one";
}

TEST(DeviceRuntime, StreamedLoadThroughLeasedBuffersDeliversEveryByte) {
  const std::string path = ::testing::TempDir() + "ember_stream_to_device.bin";
  const uint64_t header = 100, size = (uint64_t{9} << 20) + 12345, chunk = uint64_t{1} << 20;
  std::vector<uint8_t> data(size);
  for (uint64_t i = 0; i < size; ++i) data[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> zeros(header, 0);
  ASSERT_EQ(::pwrite(fd, zeros.data(), header, 0), static_cast<ssize_t>(header));
  const uint64_t written =
      io::parallel::write_and_checksum(fd, header, {{data.data(), size}}, chunk, path);
  // Three targets: inside one chunk, across chunks and staging pieces, and up to the end.
  const std::pair<uint64_t, uint64_t> ranges[] = {
      {10, 1000}, {(uint64_t{3} << 20) - 7, (uint64_t{7} << 20) + 3}, {size - 5000, size}};
  std::vector<std::vector<uint8_t>> out;
  std::vector<io::parallel::DeviceTarget> targets;
  for (const auto& [b, e] : ranges) out.emplace_back(e - b, 0xAB);
  for (size_t i = 0; i < out.size(); ++i)
    targets.push_back({ranges[i].first, ranges[i].second, out[i].data()});
  std::vector<uint64_t> digests;
  io::parallel::stream_to_device(DeviceType::cpu, 0, fd, header, size, targets, chunk, &digests,
                                 path);
  ::close(fd);
  std::remove(path.c_str());
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_TRUE(std::equal(out[i].begin(), out[i].end(), data.begin() + ranges[i].first))
        << "target " << i;
  EXPECT_EQ(io::parallel::combine_digests(digests), written);
}
